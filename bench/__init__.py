"""Benchmarks of transduce, by role; run each from the repository root as `python -m bench.<role>.<name>`
(bench/README.md lists them). Results go to bench/records/; `python -m bench.results` makes
docs/results.md from them."""
