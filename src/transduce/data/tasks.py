"""Generated tasks, no download: copy, reverse, decimal addition, Learning-to-Execute programs.

Every task has seeded splits: `train`, `dev` and `test` with lengths 1..train_max_len, and
`test_long` with lengths train_max_len+1..test_max_len (length generalisation, as in the
Universal Transformer paper). Examples are space-separated symbols; in `lte` programs a
space inside the program is the symbol `_`.
"""

from __future__ import annotations

import random
import zlib
from collections.abc import Callable

from ..config import DataConfig

Example = tuple[str, str]
SPLITS = ("train", "dev", "test", "test_long")
LTE_ALPHABET = list("0123456789+-*()<=;_apfeilsnrt")


def _spaced(text: str) -> str:
    return " ".join("_" if ch == " " else ch for ch in text)


def _sequence(rng: random.Random, length: int, symbols: int) -> list[str]:
    return [str(rng.randrange(symbols)) for _ in range(length)]


def copy_example(rng: random.Random, length: int, cfg: DataConfig) -> Example:
    seq = " ".join(_sequence(rng, length, cfg.task_symbols))
    return seq, seq


def reverse_example(rng: random.Random, length: int, cfg: DataConfig) -> Example:
    seq = _sequence(rng, length, cfg.task_symbols)
    return " ".join(seq), " ".join(reversed(seq))


def _number(rng: random.Random, digits: int) -> int:
    return rng.randrange(10 ** (digits - 1) if digits > 1 else 0, 10**digits)


def addition_example(rng: random.Random, length: int, cfg: DataConfig) -> Example:
    """`length` is the digit count of the longer operand."""
    a = _number(rng, length)
    b = _number(rng, rng.randint(1, length))
    if rng.random() < 0.5:
        a, b = b, a
    return _spaced(f"{a}+{b}"), _spaced(str(a + b))


def _lte_expression(rng: random.Random, depth: int, digits: int) -> tuple[str, int]:
    if depth == 0:
        value = _number(rng, rng.randint(1, digits))
        return str(value), value
    kind = rng.choice(["+", "-", "*", "if"])
    left, lv = _lte_expression(rng, depth - 1, digits)
    if kind == "*":
        k = rng.randint(2, 9)
        return f"({left}*{k})", lv * k
    right, rv = _lte_expression(rng, depth - 1, digits)
    if kind == "if":
        c1, c2 = _number(rng, 1), _number(rng, 1)
        return f"({left} if {c1}<{c2} else {right})", lv if c1 < c2 else rv
    return f"({left}{kind}{right})", lv + rv if kind == "+" else lv - rv


def lte_example(rng: random.Random, length: int, cfg: DataConfig) -> Example:
    """A program `a=E1;print(E2+a)`; `length` bounds the digits of each constant."""
    first, fv = _lte_expression(rng, cfg.task_nesting - 1, length)
    second, sv = _lte_expression(rng, cfg.task_nesting, length)
    op = rng.choice(["+", "-"])
    program = f"a={first};print({second}{op}a)"
    return _spaced(program), _spaced(str(sv + fv if op == "+" else sv - fv))


GENERATORS: dict[str, Callable[[random.Random, int, DataConfig], Example]] = {
    "copy": copy_example,
    "reverse": reverse_example,
    "addition": addition_example,
    "lte": lte_example,
}


def task_symbols(cfg: DataConfig) -> list[str]:
    if cfg.task in ("copy", "reverse"):
        return [str(i) for i in range(cfg.task_symbols)]
    if cfg.task == "addition":
        return list("0123456789+")
    return LTE_ALPHABET


def generate_split(cfg: DataConfig, split: str) -> list[Example]:
    """Deterministic examples of one split of `cfg.task` (seeded by data.seed and the split)."""
    if cfg.task is None:
        raise ValueError("data.task is not set; allowed: " + ", ".join(GENERATORS))
    if split not in SPLITS:
        raise ValueError(f"unknown split '{split}'; allowed: {', '.join(SPLITS)}")
    rng = random.Random(cfg.seed * 1_000_003 + zlib.crc32(f"{cfg.task}/{split}".encode()))
    if split == "test_long":
        low, high = cfg.task_train_max_len + 1, cfg.long_max_len
    else:
        low, high = 1, cfg.task_train_max_len
    size = cfg.task_train_size if split == "train" else cfg.task_eval_size
    make = GENERATORS[cfg.task]
    return [make(rng, rng.randint(low, high), cfg) for _ in range(size)]
