"""Learning to Execute's program evaluation (Zaremba & Sutskever 2014, arXiv:1410.4615), as the
Universal Transformer paper uses it (its Table 6: nesting 2, length 5, "program", "control" and
"addition", generated with the LTE paper's mix strategy).

A program is built as LTE's generator builds it: `nesting` operations, each taking its operands
from the previous operation's result (the first from fresh constants), the last one's expression
printed. The operations are LTE's six: addition or subtraction `(a+b)`, multiplication by a small
number `(a*k)`, plain use of an operand, a variable assignment `v=a;` then `(v+b)`, a for-loop
`v=a` / `for x in range(k):v+=b`, and an if-expression `(c if a<b else d)`. Under the mix strategy
every constant has 1..`length` digits (drawn per constant) and a program 1..`nesting` operations
(drawn per program); a small multiplier or loop count is 1..4*l for an l drawn the same way.

The three settings differ in the operations they draw from: `program` all six, `control` the
control-flow ones (the for-loop and the if-expression), `addition` only the addition (so
`print(((a+b)+c))`; at nesting 1 LTE's addition task `print((a+b))`). LTE's code names no
"control" set; this is our reading of the name.

An example's source is the program one character a symbol, a space written `_` and a line break
`#` (as LTE's own data files write it); its target is the printed integer.
"""

from __future__ import annotations

import random
import string
from collections.abc import Callable
from dataclasses import dataclass, field

from ..config import PROGRAM_TASKS

Example = tuple[str, str]
Value = tuple[str, int]  # an expression and its value
PROGRAM_ALPHABET = list("0123456789+-*()<>=;:#_") + list(string.ascii_lowercase)
VARIABLES = [c for c in string.ascii_lowercase if c != "x"]  # x is the loops' counter


@dataclass
class Builder:
    """One program under construction: the draws, the result stack, the code and its variables."""

    rng: random.Random
    length: int
    stack: list[Value] = field(default_factory=list)
    code: list[str] = field(default_factory=list)
    used: set[str] = field(default_factory=set)

    def digits(self) -> int:
        """The mix strategy's length: 1..length, drawn again at each use."""
        return self.rng.randint(1, self.length)

    def operand(self) -> Value:
        """The previous operation's result, or a fresh constant of 1..length digits."""
        if self.stack:
            return self.stack.pop()
        value = self.rng.randint(1, 10 ** self.digits())
        return str(value), value

    def operands(self, count: int) -> list[Value]:
        """`count` operands in a random order (the previous result lands in any of them)."""
        values = [self.operand() for _ in range(count)]
        self.rng.shuffle(values)
        return values

    def variable(self) -> str:
        name = self.rng.choice([v for v in VARIABLES if v not in self.used])
        self.used.add(name)
        return name


def _sum(b: Builder, plus_only: bool = False) -> Value:
    (a, av), (c, cv) = b.operands(2)
    if plus_only or b.rng.random() < 0.5:
        return f"({a}+{c})", av + cv
    return f"({a}-{c})", av - cv


def _addition(b: Builder) -> Value:
    return _sum(b, plus_only=True)


def _small_multiply(b: Builder) -> Value:
    a, av = b.operand()
    k = b.rng.randint(1, 4 * b.digits())
    return (f"({a}*{k})", av * k) if b.rng.random() < 0.5 else (f"({k}*{a})", av * k)


def _identity(b: Builder) -> Value:
    return b.operand()


def _assignment(b: Builder) -> Value:
    var = b.variable()
    (a, av), (c, cv) = b.operands(2)
    b.code.append(f"{var}={a};")
    if b.rng.random() < 0.5:
        return f"({var}+{c})", av + cv
    return f"({var}-{c})", av - cv


def _loop(b: Builder) -> Value:
    var = b.variable()
    (a, av), (c, cv) = b.operands(2)
    times = b.rng.randint(1, 4 * b.digits())
    op, sign = ("+", 1) if b.rng.random() < 0.5 else ("-", -1)
    b.code += [f"{var}={a}", f"for x in range({times}):{var}{op}={c}"]
    return var, av + sign * times * cv


def _if(b: Builder) -> Value:
    (a, av), (c, cv), (t, tv), (e, ev) = b.operands(4)
    if b.rng.random() < 0.5:
        return f"({t} if {a}<{c} else {e})", tv if av < cv else ev
    return f"({t} if {a}>{c} else {e})", tv if av > cv else ev


Operation = Callable[[Builder], Value]
OPERATIONS: dict[str, list[Operation]] = {
    "lte_program": [_sum, _small_multiply, _identity, _assignment, _loop, _if],
    "lte_control": [_loop, _if],
    "lte_addition": [_addition],
}
assert set(OPERATIONS) == set(PROGRAM_TASKS)


def program(rng: random.Random, length: int, nesting: int, task: str) -> tuple[str, int]:
    """A program of `task`'s operations (mix strategy: 1..nesting of them, constants of 1..length
    digits) as Python source, and the integer it prints."""
    builder = Builder(rng, length)
    for _ in range(rng.randint(1, nesting)):
        builder.stack.append(rng.choice(OPERATIONS[task])(builder))
    expr, value = builder.stack.pop()
    return "\n".join([*builder.code, f"print({expr})"]), value


def program_example(rng: random.Random, length: int, nesting: int, task: str) -> Example:
    """One example: the program's characters as symbols (space `_`, line break `#`), the printed
    value's characters as the target."""
    source, value = program(rng, length, nesting, task)
    symbols = ["_" if ch == " " else "#" if ch == "\n" else ch for ch in source]
    return " ".join(symbols), " ".join(str(value))
