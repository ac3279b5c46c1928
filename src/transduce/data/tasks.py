"""Generated tasks, no download: copy, reverse, double, decimal addition, Learning-to-Execute
programs (`lte`, and the program evaluation settings `lte_program`, `lte_control`, `lte_addition`
of data/programs.py), two classification tasks (`majority`, one label per sequence; `updown`, one label per
token) and a language-modelling task (`repeat`).

Every task has seeded splits: `train`, `dev` and `test` with lengths drawn uniformly from
task_train_min_len..task_train_max_len, and `test_long` with lengths from task_test_min_len
(default task_train_max_len + 1) to task_test_max_len (length generalisation, as in the
Universal Transformer paper). Examples are space-separated symbols; in `lte` programs a
space inside the program is the symbol `_`.

The UT paper's algorithmic setting (tensor2tensor's AlgorithmicIdentityDecimal40,
AlgorithmicReverseDecimal40, AlgorithmicAdditionDecimal40): tasks copy, reverse and addition_le,
100k training examples of lengths 1..40, tested at length 400. Learning to Execute's memorisation
tasks (Zaremba & Sutskever 2014): copy, double and reverse.
A classification task's target is its labels, from its own label vocabulary; `repeat` pairs
a prompt `1 2 3 |` with its continuation `1 2 3`.
"""

from __future__ import annotations

import random
import zlib
from collections.abc import Callable
from functools import partial
from itertools import pairwise

from ..choices import SPLITS
from ..config import PROGRAM_TASKS, DataConfig
from .meta import LabelUnit
from .programs import PROGRAM_ALPHABET, program_example

Example = tuple[str, str]
LTE_ALPHABET = list("0123456789+-*()<=;_apfeilsnrt")
SEPARATOR = "|"  # `repeat`: the end of the prompt


def _spaced(text: str) -> str:
    return " ".join("_" if ch == " " else ch for ch in text)


def _sequence(rng: random.Random, length: int, symbols: int) -> list[str]:
    return [str(rng.randrange(symbols)) for _ in range(length)]


def copy_example(rng: random.Random, length: int, symbols: int) -> Example:
    seq = " ".join(_sequence(rng, length, symbols))
    return seq, seq


def reverse_example(rng: random.Random, length: int, symbols: int) -> Example:
    """The target is the input reversed. This is also Learning to Execute's memorisation with
    "input reversing" (the model reads the sequence reversed and writes it in order)."""
    seq = _sequence(rng, length, symbols)
    return " ".join(seq), " ".join(reversed(seq))


def double_example(rng: random.Random, length: int, symbols: int) -> Example:
    """Learning to Execute's memorisation with "input doubling" (Zaremba & Sutskever 2014,
    arXiv:1410.4615): the input is the sequence presented twice, the target the sequence once.
    `length` is the sequence's length (the input has twice as many symbols)."""
    seq = _sequence(rng, length, symbols)
    return " ".join(seq + seq), " ".join(seq)


def _number(rng: random.Random, digits: int) -> int:
    return rng.randrange(10 ** (digits - 1) if digits > 1 else 0, 10**digits)


def addition_example(rng: random.Random, length: int) -> Example:
    """`length` is the digit count of the longer operand."""
    a = _number(rng, length)
    b = _number(rng, rng.randint(1, length))
    if rng.random() < 0.5:
        a, b = b, a
    return _spaced(f"{a}+{b}"), _spaced(str(a + b))


def _little_endian(rng: random.Random, digits: int) -> str:
    """A random number of `digits` digits written least significant digit first; its most
    significant (last) digit is not 0 unless it is the only one, as in tensor2tensor."""
    return str(_number(rng, digits))[::-1]


def addition_le_example(rng: random.Random, length: int) -> Example:
    """tensor2tensor's decimal addition (AlgorithmicAdditionDecimal40, the UT paper's): two
    little-endian numbers joined by a separator (`+`), the target their sum, little-endian.
    `length` counts the whole input (at least 3): the first operand has l1 digits, l1 uniform in
    1..length-2, the second the other length-1-l1. (tensor2tensor draws l1 from 1..L/2 and l2 from
    1..L-l1-1 under a maximum L instead, so its inputs have no fixed length.)"""
    first = rng.randint(1, length - 2)
    a, b = _little_endian(rng, first), _little_endian(rng, length - 1 - first)
    total = int(a[::-1]) + int(b[::-1])
    return _spaced(f"{a}+{b}"), _spaced(str(total)[::-1])


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


def lte_example(rng: random.Random, length: int, nesting: int) -> Example:
    """A program `a=E1;print(E2+a)`; `length` bounds the digits of each constant, `nesting` the
    depth of E2 (E1 is one shallower)."""
    first, fv = _lte_expression(rng, nesting - 1, length)
    second, sv = _lte_expression(rng, nesting, length)
    op = rng.choice(["+", "-"])
    program = f"a={first};print({second}{op}a)"
    return _spaced(program), _spaced(str(sv + fv if op == "+" else sv - fv))


def majority_example(rng: random.Random, length: int, symbols: int) -> Example:
    """One label for the sequence: are most symbols in the upper half of the alphabet (`high`),
    the lower half (`low`), or as many in each (`tie`)?"""
    seq = [rng.randrange(symbols) for _ in range(length)]
    high = sum(2 * s >= symbols for s in seq)
    label = "high" if 2 * high > length else "low" if 2 * high < length else "tie"
    return " ".join(map(str, seq)), label


def updown_example(rng: random.Random, length: int, symbols: int) -> Example:
    """One label per symbol: `first`, then whether it is above (`up`), below (`down`) or equal to
    (`same`) the symbol before it, so each label needs the neighbouring position."""
    seq = [rng.randrange(symbols) for _ in range(length)]
    labels = ["first"] + ["up" if b > a else "down" if b < a else "same" for a, b in pairwise(seq)]
    return " ".join(map(str, seq)), " ".join(labels)


def repeat_example(rng: random.Random, length: int, symbols: int) -> Example:
    """A prompt `s |` whose continuation is `s` again: a language model continues it exactly
    only by reading the prompt back."""
    seq = " ".join(_sequence(rng, length, symbols))
    return f"{seq} {SEPARATOR}", seq


Generate = Callable[[random.Random, int], Example]  # (rng, length) -> one example


def _program_generator(task: str) -> Callable[[DataConfig], Generate]:
    """A program evaluation setting's generator: `length` bounds its constants' digits."""
    return lambda cfg: partial(program_example, nesting=cfg.task_nesting, task=task)


# Each task's generator, given the settings it reads (data.task_symbols, data.task_nesting).
GENERATORS: dict[str, Callable[[DataConfig], Generate]] = {
    "copy": lambda cfg: partial(copy_example, symbols=cfg.task_symbols),
    "reverse": lambda cfg: partial(reverse_example, symbols=cfg.task_symbols),
    "double": lambda cfg: partial(double_example, symbols=cfg.task_symbols),
    "addition": lambda cfg: addition_example,
    "addition_le": lambda cfg: addition_le_example,
    "lte": lambda cfg: partial(lte_example, nesting=cfg.task_nesting),
    "majority": lambda cfg: partial(majority_example, symbols=cfg.task_symbols),
    "updown": lambda cfg: partial(updown_example, symbols=cfg.task_symbols),
    "repeat": lambda cfg: partial(repeat_example, symbols=cfg.task_symbols),
    **{task: _program_generator(task) for task in PROGRAM_TASKS},
}

# Classification tasks: one label per sequence or per token, and the labels in class order
# (class c is the c-th label of the target vocabulary).
LABELS: dict[str, tuple[LabelUnit, list[str]]] = {
    "majority": ("sequence", ["low", "high", "tie"]),
    "updown": ("token", ["first", "up", "down", "same"]),
}
SHORTEST = {"addition_le": 3}  # lengths below this are raised to it


def task_symbols(cfg: DataConfig) -> list[str]:
    """The source alphabet of `cfg.task` (and its target alphabet, except for classification)."""
    if cfg.task in ("copy", "reverse", "double", "majority", "updown"):
        return [str(i) for i in range(cfg.task_symbols)]
    if cfg.task == "repeat":
        return [str(i) for i in range(cfg.task_symbols)] + [SEPARATOR]
    if cfg.task in ("addition", "addition_le"):
        return list("0123456789+")
    if cfg.task in PROGRAM_TASKS:
        return PROGRAM_ALPHABET
    return LTE_ALPHABET


def generate_split(cfg: DataConfig, split: str) -> list[Example]:
    """Deterministic examples of one split of `cfg.task` (seeded by data.seed and the split)."""
    if cfg.task is None:
        raise ValueError("data.task is not set; allowed: " + ", ".join(GENERATORS))
    if split not in SPLITS:
        raise ValueError(f"unknown split '{split}'; allowed: {', '.join(SPLITS)}")
    rng = random.Random(cfg.seed * 1_000_003 + zlib.crc32(f"{cfg.task}/{split}".encode()))
    if split == "test_long":
        low, high = cfg.long_min_len, cfg.long_max_len
    else:
        low, high = cfg.task_train_min_len, cfg.task_train_max_len
    low = max(low, SHORTEST.get(cfg.task, 1))
    size = cfg.task_train_size if split == "train" else cfg.task_eval_size
    make = GENERATORS[cfg.task](cfg)
    return [make(rng, rng.randint(low, high)) for _ in range(size)]


def examples_of_length(cfg: DataConfig, length: int, count: int, seed: int) -> list[Example]:
    """`count` seeded examples of `cfg.task` all of one length, for accuracy-by-length curves."""
    if cfg.task is None:
        raise ValueError("data.task is not set; allowed: " + ", ".join(GENERATORS))
    if length < SHORTEST.get(cfg.task, 1):
        raise ValueError(f"task '{cfg.task}' has no examples of length {length}")
    rng = random.Random(seed * 1_000_003 + zlib.crc32(f"{cfg.task}/length{length}".encode()))
    make = GENERATORS[cfg.task](cfg)
    return [make(rng, length) for _ in range(count)]
