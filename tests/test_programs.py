"""Learning to Execute's program evaluation settings (data/programs.py): every generated program,
run by Python itself, prints its target; each setting draws only its own operations; the mix
strategy's draws stay within the length and nesting asked for."""

from __future__ import annotations

import contextlib
import io
import random
import re

import pytest

from transduce.config import PROGRAM_TASKS, load_config
from transduce.data.programs import PROGRAM_ALPHABET, program_example
from transduce.data.tasks import generate_split, task_symbols


def run_source(source: str) -> str:
    """What Python prints for an example's source symbols (`_` a space, `#` a line break)."""
    text = "".join(source.split()).replace("_", " ").replace("#", "\n")
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(text, {})
    return printed.getvalue().strip()


@pytest.mark.parametrize("task", PROGRAM_TASKS)
@pytest.mark.parametrize("nesting", [1, 2, 3])
def test_python_prints_the_target(task, nesting):
    rng = random.Random(nesting)
    for _ in range(300):
        source, target = program_example(rng, 5, nesting=nesting, task=task)
        assert run_source(source) == "".join(target.split())
        assert set(source.split()) <= set(PROGRAM_ALPHABET)


def constants(text: str) -> list[str]:
    """The numbers written in a program that are not a loop count or a multiplier."""
    text = re.sub(r"range\(\d+\)", "", text)
    return re.findall(r"(?<![*\d])\d+(?![*\d])", text)


def test_each_setting_draws_its_own_operations():
    """addition: only `+`, no code lines; control: every program has a loop or an if; program:
    all six kinds show up."""
    rng = random.Random(0)
    sources = {
        task: ["".join(program_example(rng, 5, nesting=2, task=task)[0].split()) for _ in range(400)]
        for task in PROGRAM_TASKS
    }
    for text in sources["lte_addition"]:
        assert re.fullmatch(r"print\([\d()+]+\)", text), text
    for text in sources["lte_control"]:
        assert "for_x_in_range" in text or "_if_" in text, text
        assert "*" not in text
    every = "".join(sources["lte_program"])
    for piece in ("+", "-", "*", "for_x_in_range", "_if_", ";#"):
        assert piece in every


def test_the_mix_strategy_draws_within_the_length_and_the_nesting():
    """Constants have 1..length digits (10**length at most), all of them seen; 1..nesting
    operations: at nesting 2 some addition programs add two numbers and some three."""
    rng = random.Random(1)
    texts = ["".join(program_example(rng, 3, nesting=2, task="lte_addition")[0].split()) for _ in range(500)]
    digits = {len(c) for t in texts for c in constants(t)}
    assert {1, 2, 3} <= digits <= {1, 2, 3, 4}  # 4 only for 1000 itself (LTE draws 1..10**length)
    assert max(int(c) for t in texts for c in constants(t)) <= 1000
    assert {t.count("+") for t in texts} == {1, 2}


def test_the_task_generates_seeded_splits_in_its_alphabet():
    cfg = load_config(
        "small",
        [
            "data.task=lte_control",
            "data.task_train_min_len=5",
            "data.task_train_max_len=5",
            "data.task_train_size=50",
            "data.task_eval_size=10",
        ],
    ).data
    train = generate_split(cfg, "train")
    assert train == generate_split(cfg, "train") and len(train) == 50
    assert task_symbols(cfg) == PROGRAM_ALPHABET
    for source, target in train:
        assert run_source(source) == "".join(target.split())
