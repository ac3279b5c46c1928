"""Fine-tuning: `prepare --vocab-from` reuses a model's vocabularies, `train --init-from` starts a new
run from its weights; mismatches are refused with one-line errors."""

import json
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from tiny import TINY
from typer.testing import CliRunner

from transduce.cli import app
from transduce.config import load_config
from transduce.store.checkpoint import load_checkpoint, step_checkpoints
from transduce.store.load import config_from
from transduce.train.trainer import Trainer

WORDS = ["the", "cat", "sat", "on", "a", "mat", "and", "dog", "ran", "far", "away"]
SIZES = [*TINY[:5], "data.task=null", "data.max_tokens=300", "train.warmup=3"]


def corpus(folder: Path, words: list[str], seed: int) -> Path:
    """Random sentences over `words`, and their upper-cased copies, as train/dev splits."""
    rng = torch.Generator().manual_seed(seed)
    folder.mkdir()
    for split, size in (("train", 120), ("dev", 8)):
        lines = [
            " ".join(words[int(i)] for i in torch.randint(0, len(words), (int(n),), generator=rng))
            for n in torch.randint(2, 7, (size,), generator=rng)
        ]
        (folder / f"{split}.en").write_text("\n".join(lines) + "\n")
        (folder / f"{split}.up").write_text("\n".join(line.upper() for line in lines) + "\n")
    return folder


def cli(*args: object) -> str:
    result = CliRunner().invoke(app, [str(a) for a in args])
    assert result.exit_code == 0, result.output
    return result.stdout


def cli_error(*args: object) -> str:
    result = CliRunner().invoke(app, [str(a) for a in args])
    assert result.exit_code == 2, result.output
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, result.stderr
    return errors[0]


@pytest.fixture(scope="module")
def general(tmp_path_factory) -> dict[str, Path]:
    """A general run trained 4 steps on one corpus; a second corpus prepared with its vocabulary
    and a third with a vocabulary of its own."""
    tmp = tmp_path_factory.mktemp("ft")
    corpus(tmp / "general", WORDS, 0)
    corpus(tmp / "domain", [*WORDS[:6], "bird", "flew", "over"], 1)
    cli(
        "prepare",
        tmp / "general",
        "-o",
        tmp / "data-general",
        "--src",
        "en",
        "--tgt",
        "up",
        "--vocab-size",
        300,
    )
    cfg = load_config(
        "small", [*SIZES, f"data.dataset={tmp / 'data-general'}", "train.steps=4", "train.save_every=4"]
    )
    Trainer(cfg, tmp / "run-general", show_progress=False).fit()
    args = ("prepare", tmp / "domain", "--src", "en", "--tgt", "up")
    cli(*args, "-o", tmp / "data-domain", "--vocab-from", tmp / "run-general")
    cli(*args, "-o", tmp / "data-own", "--vocab-size", 300)
    return {"tmp": tmp, "run": tmp / "run-general", "data": tmp / "data-domain", "own": tmp / "data-own"}


def test_vocab_from_encodes_with_the_checkpoints_vocabulary(general):
    ckpt = step_checkpoints(general["run"] / "checkpoints")[-1]
    assert (general["data"] / "src.spm").read_bytes() == (ckpt / "src.spm").read_bytes()
    assert (general["own"] / "src.spm").read_bytes() != (ckpt / "src.spm").read_bytes()
    meta = json.loads((general["data"] / "meta.json").read_text())
    assert meta["src_vocab_size"] == 300


def test_init_from_starts_from_exactly_the_loaded_weights(general):
    ckpt = step_checkpoints(general["run"] / "checkpoints")[-1]
    cfg = config_from(str(general["run"]), [f"data.dataset={general['data']}"])
    trainer = Trainer(cfg, general["tmp"] / "run-init", show_progress=False)
    trainer.init_from(general["run"])
    expected = load_checkpoint(ckpt).weights
    state = trainer.model.state_dict()
    assert all(torch.equal(state[k], v) for k, v in expected.items())
    assert trainer.state.step == 0 and trainer.origin is not None and trainer.origin.step == 4
    assert all(not s for s in trainer.optimizer.state.values())  # a fresh Adam


@pytest.mark.parametrize(("keep", "first_step"), [([], 2), (["--keep-step", "--keep-optimizer"], 6)])
def test_train_init_from_records_its_start(general, keep, first_step):
    run = general["tmp"] / f"run-ft{len(keep)}"
    steps = f"train.steps={first_step}", f"train.save_every={first_step}"
    data = f"data.dataset={general['data']}"
    cli(
        "train",
        general["run"],
        data,
        *steps,
        "--init-from",
        general["run"],
        "--run-dir",
        run,
        *keep,
        "--no-progress",
    )
    (saved,) = step_checkpoints(run / "checkpoints")
    assert saved.name == f"ckpt-{first_step:08d}"
    meta = json.loads((saved / "config.json").read_text())
    origin = meta["initialised_from"]
    assert (
        origin["step"] == 4 and origin["kept_step"] == bool(keep) and origin["kept_optimizer"] == bool(keep)
    )
    assert (
        meta["data_identity"]["dataset_hash"]
        == json.loads((general["data"] / "meta.json").read_text())["hash"]
    )


def test_fine_tuning_mismatches_are_refused(general, tmp_path):
    run = general["run"]
    base = ["train", run, "--run-dir", tmp_path / "r", "--no-progress"]
    error = cli_error(*base, f"data.dataset={general['own']}", "--init-from", run)
    assert "other vocabularies" in error and "--vocab-from" in error
    error = cli_error(*base, "model.d_ff=32", f"data.dataset={general['data']}", "--init-from", run)
    assert "model.d_ff: 64 vs 32" in error
    assert "--init-from" in cli_error(*base, f"data.dataset={general['data']}", "--keep-step")
    error = cli_error("train", run, f"data.dataset={general['data']}", "--init-from", run, "--run-dir", run)
    assert "give a new --run-dir" in error
    error = cli_error("train", run, f"data.dataset={general['data']}", "--run-dir", run, "train.steps=8")
    assert "--init-from" in error  # resuming on other data points to fine-tuning
    assert "--vocab-from applies to parallel text" in cli_error(
        "prepare", "--task", "copy", "-o", tmp_path / "d", "--vocab-from", run
    )
    linked = tmp_path / "linked"
    linked.mkdir()
    for vocab in sorted(general["data"].glob("src.*")):
        (linked / vocab.name).symlink_to(vocab)
    domain = ("prepare", general["tmp"] / "domain", "--src", "en", "--tgt", "up", "-o", tmp_path / "d2")
    error = cli_error(*domain, "--vocab-from", linked)
    assert "not a regular file" in error and not (tmp_path / "d2").exists()


def test_vocab_from_records_only_what_applied_and_learns_nothing(general, tmp_path):
    """With --vocab-from, meta.json records no vocabulary size or sharing (none applied) and the
    progress display does not announce a vocabulary being learned."""
    args = ["prepare", general["tmp"] / "domain", "--src", "en", "--tgt", "up"]
    reused = CliRunner().invoke(
        app, [str(a) for a in (*args, "-o", tmp_path / "d", "--vocab-from", general["run"])]
    )
    assert reused.exit_code == 0, reused.output
    assert "learning BPE vocabulary" not in reused.output and "encoding train.en" in reused.output
    options = json.loads((tmp_path / "d" / "meta.json").read_text())["options"]
    assert options["vocab_size"] is None and options["shared_vocab"] is None
    assert options["vocab_from"] == str(step_checkpoints(general["run"] / "checkpoints")[-1])
    learned = CliRunner().invoke(app, [str(a) for a in (*args, "-o", tmp_path / "e", "--vocab-size", 300)])
    assert learned.exit_code == 0 and "learning BPE vocabulary" in learned.output
    options = json.loads((tmp_path / "e" / "meta.json").read_text())["options"]
    assert options["vocab_size"] == 300 and options["shared_vocab"] is True


def test_vocab_from_a_symbol_vocabulary_encodes_with_it(tmp_path):
    """A model of a generated task (a symbol vocabulary, no sentencepiece) lends its vocabulary
    too: each line is its symbols' ids, an unknown one <unk>."""
    from tiny_models import DIGITS, saved_checkpoint

    from transduce.data.dataset import Dataset
    from transduce.data.vocab import UNK

    loaded = saved_checkpoint(tmp_path / "ck", DIGITS, seed=0)
    (tmp_path / "c").mkdir()
    lines = {"train": ["1 2 3", "4 5", "9 x 0"], "dev": ["7 7"]}
    for split, text in lines.items():
        for side in ("src", "tgt"):
            (tmp_path / "c" / f"{split}.{side}").write_text("".join(f"{t}\n" for t in text))
    cli("prepare", tmp_path / "c", "-o", tmp_path / "d", "--vocab-from", tmp_path / "ck")
    data = Dataset(tmp_path / "d")
    train = data.splits["train"]
    got = [[t.tolist() for t in train.pair(i)] for i in range(len(train))]
    assert got == [[loaded.src_vocab.encode(t)] * 2 for t in lines["train"]]
    assert got[2][0] == [13, UNK, 4]  # "9 x 0": x is no symbol of the model's


@pytest.mark.parametrize(
    ("train", "warned"),
    [
        (["1 2 3", "4 5"], None),
        (["0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 x"], None),  # 1 of 21 (4.8%)
        (["1 2 3", "4 5", "9 x 0"], "12.5% of the tokens of {} are <unk> in the model's vocabulary (1 of 8"),
        (["1 x"], "50.0% of the tokens of {} are <unk> in the model's vocabulary (1 of 2"),  # half: kept
    ],
    ids=["all known", "under 5% unknown", "12.5% unknown", "half unknown"],
)
def test_vocab_from_warns_with_the_share_of_unknown_tokens(tmp_path, train, warned):
    """Over 5% of a side's tokens <unk> is a warning with the figure, per file (over half is
    refused: a row of test_bad_inputs.py); the dataset is written all the same."""
    from tiny_models import DIGITS, saved_checkpoint

    saved_checkpoint(tmp_path / "ck", DIGITS, seed=0)
    (tmp_path / "c").mkdir()
    for split, text in (("train", train), ("dev", ["7 7"])):
        for side in ("src", "tgt"):
            (tmp_path / "c" / f"{split}.{side}").write_text("".join(f"{t}\n" for t in text))
    args = ("prepare", tmp_path / "c", "-o", tmp_path / "d", "--vocab-from", tmp_path / "ck")
    result = CliRunner().invoke(app, [str(a) for a in args])
    assert result.exit_code == 0, result.output
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning:")]
    files = [tmp_path / "c" / f"train.{side}" for side in ("src", "tgt")]
    assert len(warnings) == (2 if warned else 0), result.stderr
    for line, path in zip(warnings, files, strict=False):
        assert warned.format(path) in line, line


# Fine-tuning command lines that would do nothing or something else than asked: (id, the arguments
# after `train RUN data.dataset=DOMAIN`, given the fixture and a fresh folder, and the error's fragment).
REFUSED: list[tuple[str, Callable[[dict[str, Path], Path], list[object]], str]] = [
    (
        "--keep-step from a step already past train.steps",
        lambda g, t: ["train.steps=3", "--init-from", g["run"], "--keep-step", "--run-dir", t / "r"],
        "is at step 4, not below train.steps=3, so nothing would be trained",
    ),
    (
        "--keep-step from a step equal to train.steps",
        lambda g, t: ["train.steps=4", "--init-from", g["run"], "--keep-step", "--run-dir", t / "r"],
        "is at step 4, not below train.steps=4",
    ),
    (
        "--init-from into a run directory that holds checkpoints",
        lambda g, t: ["--init-from", g["run"], "--run-dir", _with_checkpoints(g, t)],
        "already holds checkpoints, and --init-from starts a new run; give a new --run-dir",
    ),
]


def _with_checkpoints(general: dict[str, Path], tmp: Path) -> Path:
    """A fine-tuning run of two steps on the domain data: a run directory with checkpoints."""
    run = tmp / "tuned"
    data = f"data.dataset={general['data']}"
    cli(
        "train",
        general["run"],
        data,
        "train.steps=2",
        "--init-from",
        general["run"],
        "--run-dir",
        run,
        "--no-progress",
    )
    return run


@pytest.mark.parametrize(("build", "fragment"), [r[1:] for r in REFUSED], ids=[r[0] for r in REFUSED])
def test_fine_tuning_that_would_do_nothing_or_else_is_refused(general, tmp_path, build, fragment):
    args = build(general, tmp_path)
    before = sorted(p.name for p in (tmp_path / "tuned" / "checkpoints").glob("*"))
    error = cli_error("train", general["run"], f"data.dataset={general['data']}", *args, "--no-progress")
    assert fragment in error
    assert not (tmp_path / "r" / "checkpoints").exists()  # nothing trained, no folder named that is not there
    assert sorted(p.name for p in (tmp_path / "tuned" / "checkpoints").glob("*")) == before


# A fine-tuning run's overrides and flags, and whether it is told that it warms up again to the
# general run's peak learning rate (train.warmup=3 at d_model 32, lr_scale 1: 0.1).
REWARMING = [
    ("the checkpoint's own schedule", [], "0.1 (at step 3), no lower than the peak"),
    ("a shorter warm-up to a higher peak", ["train.warmup=2"], "0.13 (at step 2), no lower than the peak"),
    ("a lower rate", ["train.lr_scale=0.25"], None),
    ("a longer warm-up to a lower peak", ["train.warmup=12"], None),
    ("the step kept, the schedule continued", ["train.steps=6", "--keep-step"], None),
]


@pytest.mark.parametrize(("args", "hint"), [r[1:] for r in REWARMING], ids=[r[0] for r in REWARMING])
def test_fine_tuning_at_the_general_runs_peak_rate_is_hinted(general, tmp_path, args, hint):
    run, data = general["run"], f"data.dataset={general['data']}"
    command = ["train", run, data, "train.steps=2", *args, "--init-from", run, "--run-dir", tmp_path / "r"]
    result = CliRunner().invoke(app, [str(a) for a in [*command, "--no-progress"]])
    assert result.exit_code == 0, result.output
    hints = [line for line in result.stderr.splitlines() if line.startswith("hint:")]
    if hint is None:
        assert hints == []
    else:
        (line,) = hints
        assert hint in line and "was trained with (0.1); " in line
        assert "For fine-tuning: train.lr_scale=0.1 train.warmup=50, and general data mixed" in line
