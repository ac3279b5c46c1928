"""Builders of the offline corpora the MT benchmarks train on (nothing they build is committed),
and `prepare` at scale on synthetic corpora."""
