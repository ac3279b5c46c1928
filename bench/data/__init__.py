"""Builders of the offline corpora the MT benchmarks train on (built into bench/out/, not
committed, but for the small corpus `make demo` trains on, demo/en-de/), and `prepare` at scale
on synthetic corpora."""
