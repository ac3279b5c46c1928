"""The closed sets of values that options take: the library checks a value against them, and
`--help` lists them. A module of its own, importing nothing heavy, so that the command line can
show them without loading torch."""

from __future__ import annotations

QUANTIZE = ("none", "int8")  # decoding: float32 as trained, or dynamic int8 linear layers (CPU)
MAX_THREADS = 1024  # --threads: beyond any CPU's cores; CTranslate2 crashes starting 100,000
ENGINES = ("torch", "ctranslate2")  # what decodes: our PyTorch model, or a CTranslate2 export of it
SPLITS = ("train", "dev", "test", "test_long")  # the splits of a generated task
EXPORT_FORMATS = ("marian", "m2m100", "ctranslate2", "argos")
CT2_QUANTIZATIONS = ("float32", "int8", "int8_float32", "int16", "float16", "bfloat16", "int8_float16")
# `prepare`: what to do with a pair with an empty side, a tab inside a line, control characters
EMPTY_PAIRS = ("skip", "reject")
TABS = ("space", "reject")
CONTROL_CHARACTERS = ("skip", "reject")
SOURCE_FORMATS = ("text", "tree")  # plain text, or bracketed trees linearised for the encoder
SOURCE_TREES = ("tree", "conllu")  # syntax trees for syntax-aware attention
