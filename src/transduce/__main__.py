"""`python -m transduce` (also what `torchrun -m transduce train ...` launches)."""

from .cli import main

main()
