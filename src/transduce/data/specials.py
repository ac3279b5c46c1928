"""The ids every vocabulary reserves, in a module of their own so that each vocabulary kind's
module can import them without importing the others (data/vocab.py loads them all)."""

from __future__ import annotations

PAD, UNK, BOS, EOS = 0, 1, 2, 3
