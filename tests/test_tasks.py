"""Generated tasks at the UT paper's and Learning to Execute's settings: targets checked against
naive re-implementations, lengths against the config, speed at 100k examples."""

import time
from pathlib import Path

import pytest

from transduce.config import ConfigError, DataConfig, load_config
from transduce.data.dataset import prepare_task
from transduce.data.tasks import examples_of_length, generate_split

PAPER = {"task_train_max_len": 40, "task_test_min_len": 400, "task_test_max_len": 400}


def schoolbook_sum(a: list[int], b: list[int]) -> list[int]:
    """Little-endian digit lists added digit by digit with a carry, as on paper."""
    out, carry = [], 0
    for i in range(max(len(a), len(b))):
        carry, digit = divmod((a[i] if i < len(a) else 0) + (b[i] if i < len(b) else 0) + carry, 10)
        out.append(digit)
    return [*out, carry] if carry else out


def test_schoolbook_sum_on_hand_made_examples():
    assert schoolbook_sum([9, 9], [1]) == [0, 0, 1]  # 99 + 1 = 100
    assert schoolbook_sum([3, 2, 1], [0]) == [3, 2, 1]
    assert schoolbook_sum([5], [5]) == [0, 1]


def check_addition_le(src: str, tgt: str) -> None:
    """Two little-endian operands (most significant digit, the last, not 0 unless alone) joined
    by `+`; the target is their little-endian sum."""
    left, right = src.split(" + ")
    a, b = [int(d) for d in left.split()], [int(d) for d in right.split()]
    for number in (a, b):
        assert len(number) == 1 or number[-1] != 0
    assert [int(d) for d in tgt.split()] == schoolbook_sum(a, b)


@pytest.mark.parametrize("task", ["copy", "reverse", "double", "addition_le"])
def test_targets_follow_the_definition_at_every_length(task):
    cfg = DataConfig(task=task, task_train_max_len=12, task_test_max_len=30, task_eval_size=300)
    for split in ("train", "dev", "test_long"):
        for src, tgt in generate_split(cfg, split)[:300]:
            tokens, target = src.split(), tgt.split()
            if task == "copy":
                assert target == tokens
            elif task == "reverse":
                assert target == tokens[::-1]
            elif task == "double":
                assert tokens == target + target
            else:
                check_addition_le(src, tgt)


def test_addition_le_on_a_hand_made_example():
    # 36 + 344967 = 345003, every number written least significant digit first
    check_addition_le("6 3 + 7 6 9 4 4 3", "3 0 0 5 4 3")
    with pytest.raises(AssertionError):
        check_addition_le("6 3 + 7 6 9 4 4 3", "3 0 0 5 4 4")


def input_length(task: str, src: str) -> int:
    """The length a task's generator was asked for: the sequence for double (given twice),
    the whole input (operands and separator) for addition_le, else the input."""
    n = len(src.split())
    return n // 2 if task == "double" else n


@pytest.mark.parametrize("task", ["copy", "reverse", "double", "addition_le"])
def test_the_papers_lengths_are_expressible(task):
    cfg = DataConfig(task=task, task_train_size=2000, task_eval_size=30, **PAPER)
    train = {input_length(task, s) for s, _ in generate_split(cfg, "train")}
    assert train == set(range(3 if task == "addition_le" else 1, 41))  # uniform lengths 1..40, all seen
    assert {input_length(task, s) for s, _ in generate_split(cfg, "test_long")} == {400}


def test_memorisation_at_one_length():
    cfg = DataConfig(task="double", task_train_min_len=55, task_train_max_len=55, task_eval_size=20)
    for split in ("train", "dev", "test"):
        assert {len(t.split()) for _, t in generate_split(cfg, split)[:50]} == {55}
    assert {len(s.split()) for s, _ in generate_split(cfg, "test_long")} <= set(range(112, 221, 2))


def test_examples_of_one_length_are_seeded_and_exact():
    cfg = DataConfig(task="addition_le")
    pairs = examples_of_length(cfg, 57, 40, seed=3)
    assert pairs == examples_of_length(cfg, 57, 40, seed=3)
    assert pairs != examples_of_length(cfg, 57, 40, seed=4)
    assert {len(s.split()) for s, _ in pairs} == {57}
    for src, tgt in pairs:
        check_addition_le(src, tgt)
    with pytest.raises(ValueError, match="no examples of length 2"):
        examples_of_length(cfg, 2, 1, seed=0)


def test_a_hundred_thousand_training_examples_in_seconds():
    cfg = DataConfig(task="reverse", task_train_size=100_000, **PAPER)
    start = time.perf_counter()
    pairs = generate_split(cfg, "train")
    assert time.perf_counter() - start < 10.0
    assert len(pairs) == 100_000


@pytest.mark.parametrize(
    ("overrides", "fragment"),
    [
        (
            ["data.task_train_min_len=30", "data.task_train_max_len=20"],
            "data.task_train_min_len (30) must not",
        ),
        (
            ["data.task_test_min_len=500", "data.task_test_max_len=400", "data.task_train_max_len=40"],
            "data.task_test_min_len (500) must not exceed data.task_test_max_len (400)",
        ),
        (["data.task=addition_le", "data.task_train_max_len=2"], "needs data.task_train_max_len >= 3"),
        (["data.task=triple"], "data.task: Input should be 'copy', 'reverse', 'double', 'addition'"),
    ],
)
def test_bad_task_lengths_are_refused_naming_the_keys(overrides, fragment):
    with pytest.raises(ConfigError) as err:
        load_config("small", overrides)
    assert fragment in str(err.value)


def test_new_length_keys_leave_earlier_task_datasets_up_to_date(tmp_path: Path):
    # hashes written before task_train_min_len and task_test_min_len existed
    reverse = DataConfig(task="reverse", task_train_size=50, task_eval_size=10)
    addition = DataConfig(
        task="addition", task_train_max_len=6, task_test_max_len=9, task_train_size=50, task_eval_size=10
    )
    assert prepare_task(reverse, tmp_path / "r").meta.hash.startswith("cdc0502a48f4dd81")
    assert prepare_task(addition, tmp_path / "a").meta.hash.startswith("01d6db485d923968")
    explicit = addition.model_copy(update={"task_train_min_len": 1, "task_test_min_len": 7})
    assert (
        prepare_task(explicit, tmp_path / "e").meta.hash == prepare_task(addition, tmp_path / "a").meta.hash
    )
    shifted = addition.model_copy(update={"task_test_min_len": 8})
    assert prepare_task(shifted, tmp_path / "s").meta.hash != prepare_task(addition, tmp_path / "a").meta.hash


def test_generators_take_the_values_they_read():
    """Each generator is called with the settings it uses, not the whole config: `lte` programs
    at nesting 1 and 3 (run by Python itself), the symbol count of the symbol tasks."""
    import random

    from transduce.data.tasks import copy_example, lte_example, majority_example

    rng = random.Random(0)
    for nesting in (1, 3):
        for _ in range(50):
            program, value = lte_example(rng, 2, nesting=nesting)
            printed: list[int] = []
            exec("".join(program.split()).replace("_", " "), {"print": printed.append})
            assert printed == [int("".join(value.split()))]
    for symbols in (2, 5):
        seen = {s for _ in range(50) for s in copy_example(rng, 6, symbols=symbols)[0].split()}
        assert seen == {str(i) for i in range(symbols)}
        src, label = majority_example(rng, 7, symbols=symbols)
        high = sum(2 * int(s) >= symbols for s in src.split())
        assert label == ("high" if high > 7 - high else "low")
