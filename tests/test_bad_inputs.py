"""The error contract: every bad input ends in one `error:` line and exit status 2.

One row per bad command line or damaged directory: how to build it, the command, and a
fragment the message must contain. (Output-safety rows live in test_data_safety.py, config
rows in test_config.py, Marian import rows in test_marian.py, server rows in test_serve*.py.)
"""

from __future__ import annotations

import bz2
import gzip
import json
import lzma
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import zstandard
from tiny import TINY, train_tiny
from typer.testing import CliRunner

from transduce.cli import app
from transduce.store.checkpoint import step_checkpoints


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    """The tiny copy model, trained for two steps."""
    return train_tiny(tmp_path_factory.mktemp("bad") / "r", 2)


def checkpoint_copy(run: Path, tmp: Path) -> Path:
    copy = tmp / "ckpt"
    shutil.copytree(step_checkpoints(run / "checkpoints")[-1], copy)
    return copy


def edit_meta(folder: Path, change: Callable[[dict], None], name: str = "config.json") -> Path:
    """`folder` with its JSON metadata file `name` changed in place."""
    meta = json.loads((folder / name).read_text())
    change(meta)
    (folder / name).write_text(json.dumps(meta))
    return folder


def lines(tmp: Path, name: str, text: str) -> str:
    (tmp / name).write_text(text)
    return str(tmp / name)


def dataset_copy(run: Path, tmp: Path) -> Path:
    copy = tmp / "data"
    shutil.copytree(run / "data", copy)
    return copy


def train_on(data: Path, tmp: Path) -> list[str]:
    return ["train", "small", *TINY, f"data.dataset={data}", "data.task=null", "--run-dir", str(tmp / "t")]


def damaged_npy(run: Path, tmp: Path) -> list[str]:
    data = dataset_copy(run, tmp)
    (data / "train.src.tokens.npy").write_bytes(b"\x93NUMPY garbage")
    return train_on(data, tmp)


def every_checkpoint_damaged(run: Path, tmp: Path) -> list[str]:
    """A copy of the run whose every checkpoint's weights are garbled, resumed."""
    copy = tmp / "r"
    shutil.copytree(run, copy)
    for checkpoint in step_checkpoints(copy / "checkpoints"):
        (checkpoint / "model.safetensors").write_bytes(b"garbage")
    return ["train", "small", *TINY, "--run-dir", str(copy), "--resume"]


def foreign_best_json(run: Path, tmp: Path) -> list[str]:
    """A --run-dir holding someone's best.json and no checkpoints."""
    (tmp / "mine").mkdir()
    (tmp / "mine" / "best.json").write_text("mine\n")
    return ["train", "small", *TINY, "--run-dir", str(tmp / "mine")]


def ids_out_of_range(run: Path, tmp: Path) -> list[str]:
    data = dataset_copy(run, tmp)
    tokens = np.load(data / "dev.tgt.tokens.npy")
    tokens[0] = 10_000
    np.save(data / "dev.tgt.tokens.npy", tokens)
    return train_on(data, tmp)


def corrupt_dataset_meta(run: Path, tmp: Path) -> list[str]:
    data = dataset_copy(run, tmp)
    (data / "meta.json").write_text('{"format": 1, "hash": 3')
    return train_on(data, tmp)


def dataset_meta(change: Callable[[dict], None]) -> Callable[[Path, Path], list[str]]:
    """Training on a copy of the run's dataset whose meta.json has `change` applied."""
    return lambda r, t: train_on(edit_meta(dataset_copy(r, t), change, "meta.json"), t)


def float_tokens(run: Path, tmp: Path) -> list[str]:
    data = dataset_copy(run, tmp)
    np.save(data / "train.src.tokens.npy", np.load(data / "train.src.tokens.npy").astype(np.float64))
    return train_on(data, tmp)


def array_linked_outside(run: Path, tmp: Path) -> list[str]:
    data = dataset_copy(run, tmp)
    shutil.move(data / "train.src.tokens.npy", tmp / "elsewhere.npy")
    (data / "train.src.tokens.npy").symlink_to(tmp / "elsewhere.npy")
    return train_on(data, tmp)


def best(run: Path, tmp: Path, text: str) -> list[str]:
    """Translating with a copy of the run whose best.json holds `text`."""
    copy = tmp / "run"
    shutil.copytree(run, copy)
    (copy / "best.json").write_text(text)
    return ["translate", str(copy)]


def config_linked(run: Path, tmp: Path) -> list[str]:
    """A checkpoint whose config.json links to another checkpoint's."""
    ckpt, other = checkpoint_copy(run, tmp), tmp / "other"
    shutil.copytree(ckpt, other)
    (ckpt / "config.json").unlink()
    (ckpt / "config.json").symlink_to(other / "config.json")
    return ["translate", str(ckpt)]


def fifo(tmp: Path, name: str) -> str:
    """A named pipe nobody writes to: reading it would block for ever."""
    os.mkfifo(tmp / name)
    return str(tmp / name)


def fifo_corpus(run: Path, tmp: Path) -> list[str]:
    corpus = tmp / "c"
    corpus.mkdir()
    for name in ("train.de", "dev.en", "dev.de"):
        (corpus / name).write_text("a b\n")
    fifo(corpus, "train.en")
    return ["prepare", str(corpus), "--src", "en", "--tgt", "de", "-o", str(tmp / "out")]


def text_corpus(tmp: Path) -> Path:
    """A small, valid English-German corpus in train/dev files."""
    corpus = tmp / "c"
    corpus.mkdir()
    for name in ("train.en", "train.de", "dev.en", "dev.de"):
        (corpus / name).write_text("".join(f"a b {i} c\n" for i in range(30)))
    return corpus


def prepare_on(corpus: Path, tmp: Path, *extra: str) -> list[str]:
    return ["prepare", str(corpus), "--src", "en", "--tgt", "de", "-o", str(tmp / "out"), *extra]


COMPRESS = {"gz": gzip.compress, "bz2": bz2.compress, "xz": lzma.compress, "zst": zstandard.compress}


def cut_short(kind: str) -> Callable[[Path, Path], list[str]]:
    """prepare on a corpus whose train.en is compressed (gz, bz2, xz or zst) as two frames (gzip
    members, bz2 and xz streams), cut inside the second: the first frame alone is a file of half the
    lines, which a reader stopping at a frame's end takes for the whole."""

    def build(run: Path, tmp: Path) -> list[str]:
        corpus = text_corpus(tmp)
        lines = (corpus / "train.en").read_bytes().splitlines(keepends=True)
        second = COMPRESS[kind](b"".join(lines[15:]))
        packed = COMPRESS[kind](b"".join(lines[:15])) + second[: len(second) // 2]
        (corpus / f"train.en.{kind}").write_bytes(packed)
        (corpus / "train.en").unlink()
        return prepare_on(corpus, tmp)

    return build


def two_forms_of_a_corpus_file(run: Path, tmp: Path) -> list[str]:
    corpus = text_corpus(tmp)
    (corpus / "dev.de.xz").write_bytes(lzma.compress((corpus / "dev.de").read_bytes()))
    return prepare_on(corpus, tmp)


def npy_fifo(run: Path, tmp: Path) -> list[str]:
    data = dataset_copy(run, tmp)
    (data / "dev.src.tokens.npy").unlink()
    fifo(data, "dev.src.tokens.npy")
    return train_on(data, tmp)


def lock_is_a_folder(run: Path, tmp: Path) -> list[str]:
    (tmp / "t" / ".lock").mkdir(parents=True)
    return ["train", "small", *TINY, "--run-dir", str(tmp / "t")]


def too_long(tmp: Path) -> str:
    """A file name longer than file systems take (255 bytes)."""
    return str(tmp / ("x" * 300))


def too_deep(tmp: Path) -> str:
    """A path longer than the system takes (4096 bytes), each name in it short enough."""
    return str(tmp.joinpath(*["y" * 200] * 25, "out"))


def offsets_decreasing(run: Path, tmp: Path) -> list[str]:
    """A dataset whose offsets go back: example 2 would have a negative length."""
    data = dataset_copy(run, tmp)
    offsets = np.load(data / "train.src.offsets.npy")
    offsets[2] = offsets[1] - 1
    np.save(data / "train.src.offsets.npy", offsets)
    return train_on(data, tmp)


def vocab_from_with(run: Path, tmp: Path, *extra: str, text: str = "1 2\n") -> list[str]:
    """prepare --vocab-from the run (the copy task's digits) on `text`, with `extra` options."""
    corpus = tmp / "c"
    corpus.mkdir()
    for name in ("train.en", "train.de", "dev.en", "dev.de"):
        (corpus / name).write_text(text)
    return ["prepare", str(corpus), "--src", "en", "--tgt", "de", "--vocab-from", str(run), *extra]


def wider_config(meta: dict) -> None:
    meta["config"]["model"]["d_model"] = 64


ROWS: list[tuple[str, Callable[[Path, Path], list[str]], str]] = [
    ("--beam 0", lambda r, t: ["translate", str(r), "--beam", "0"], "--beam: Input should be greater than"),
    (
        "--nbest over --beam",
        lambda r, t: ["translate", str(r), "--nbest", "5", "--beam", "4"],
        "must not exceed",
    ),
    (
        "--sample --nbest 2",
        lambda r, t: ["translate", str(r), "--sample", "--nbest", "2"],
        "--nbest applies to beam search; for several samples per input give --num-samples",
    ),
    (
        "--sample --beam 4",
        lambda r, t: ["translate", str(r), "--sample", "--beam", "4"],
        "--beam applies to beam search, not to sampling (--sample)",
    ),
    *(
        (
            f"{option} without --sample",
            lambda r, t, option=option, value=value: ["translate", str(r), option, value],
            f"{option} applies only to sampling; give --sample too",
        )
        for option, value in (
            ("--temperature", "2"),
            ("--num-samples", "3"),
            ("--top-k", "5"),
            ("--top-p", "0.5"),
            ("--seed", "1"),
        )
    ),
    (
        "--max-src-len -2",
        lambda r, t: ["translate", str(r), "--max-src-len", "-2"],
        "--max-src-len must be >= 1",
    ),
    ("--threads -1", lambda r, t: ["translate", str(r), "--threads", "-1"], "--threads must be a positive"),
    (
        "--threads 100000",
        lambda r, t: ["translate", str(r), "--threads", "100000"],
        "--threads 100000: at most",
    ),
    ("--device cpu:1", lambda r, t: ["translate", str(r), "--device", "cpu:1"], "--device 'cpu:1': allowed"),
    (
        "evaluate --hyp with --beam and --tgt-lang (ignored before)",
        lambda r, t: [
            "evaluate",
            "--hyp",
            lines(t, "h", "a\n"),
            "--ref",
            lines(t, "r", "a\n"),
            "--beam",
            "2",
            "--tgt-lang",
            "de",
        ],
        "--beam, --tgt-lang: --hyp is scored as it is; nothing is translated",
    ),
    ("--quantize fp4", lambda r, t: ["translate", str(r), "--quantize", "fp4"], "allowed: none, int8"),
    ("--device tpu", lambda r, t: ["translate", str(r), "--device", "tpu"], "allowed: auto, cpu, cuda"),
    ("--device cuda:99", lambda r, t: ["translate", str(r), "--device", "cuda:99"], "--device cuda:99: "),
    (
        "unknown metadata key",
        lambda r, t: ["translate", str(edit_meta(checkpoint_copy(r, t), lambda m: m.update(colour="red")))],
        "colour: Extra inputs are not permitted",
    ),
    (
        "non-integer step",
        lambda r, t: ["translate", str(edit_meta(checkpoint_copy(r, t), lambda m: m.update(step="../..")))],
        "step: Input should be a valid integer",
    ),
    ("corrupt best.json", lambda r, t: best(r, t, '{"step": "../.."}'), "best.json: unreadable"),
    (
        "best.json naming a missing checkpoint",
        lambda r, t: best(r, t, '{"step": 999}'),
        "best.json: names step 999, but",
    ),
    (
        "unknown task in config.json",
        lambda r, t: ["translate", str(edit_meta(checkpoint_copy(r, t), lambda m: m.update(task="nope")))],
        "task: Input should be 'copy', 'reverse', 'double', 'addition', 'addition_le', 'lte', 'majority', ",
    ),
    ("config.json a link", config_linked, "config.json: not a regular file (links and devices are refused)"),
    (
        "vocabulary missing",
        lambda r, t: ["translate", str(_without(checkpoint_copy(r, t), "src.symbols.json"))],
        "vocabulary missing or damaged",
    ),
    (
        "--hyp and --ref of different lengths",
        lambda r, t: ["evaluate", "--hyp", lines(t, "h", "a\nb\n"), "--ref", lines(t, "r", "a\n")],
        "reference set 1 has 1 lines for 2 hypotheses",
    ),
    (
        "empty --hyp and --ref",
        lambda r, t: ["evaluate", "--hyp", lines(t, "h", ""), "--ref", lines(t, "r", "")],
        "nothing to score",
    ),
    (
        "second --ref of another length",
        lambda r, t: [
            "evaluate",
            "--hyp",
            lines(t, "h", "a\n"),
            "--ref",
            lines(t, "r", "a\n"),
            "--ref",
            lines(t, "q", ""),
        ],
        "reference set 2 has 0 lines",
    ),
    ("--split of no such name", lambda r, t: ["evaluate", str(r), "--split", "tests"], "allowed: train, dev"),
    ("--src a directory", lambda r, t: ["evaluate", str(r), "--src", str(t), "--ref", str(t)], "a directory"),
    ("damaged .npy in a dataset", damaged_npy, "damaged dataset"),
    ("--resume where every checkpoint is damaged", every_checkpoint_damaged, "nothing to resume from"),
    ("--run-dir with a best.json of no run", foreign_best_json, "best.json exists but"),
    ("token ids beyond the vocabulary", ids_out_of_range, "token ids outside the vocabulary"),
    ("corrupt dataset meta.json", corrupt_dataset_meta, "unreadable metadata"),
    (
        "dataset meta.json with wrong split sizes",
        dataset_meta(lambda m: m["sizes"].update(train=99999)),
        "meta.json gives the train split 99999 examples",
    ),
    (
        "dataset vocabulary size a string",
        dataset_meta(lambda m: m.update(src_vocab_size=str(m["src_vocab_size"]))),
        "src_vocab_size: Input should be a valid integer",
    ),
    (
        "dataset vocabulary size too small",
        dataset_meta(lambda m: m.update(src_vocab_size=5)),
        "meta.json gives src_vocab_size 5, but the src vocabulary has",
    ),
    ("float token ids", float_tokens, "holds float64 values; dataset arrays hold integers"),
    (
        "prepare --vocab-from with --vocab-size",
        lambda r, t: vocab_from_with(r, t, "--vocab-size", "300"),
        "--vocab-from uses the model's as they are",
    ),
    (
        "prepare --vocab-from a generated task's model on German text",
        lambda r, t: vocab_from_with(r, t, text="der Hund 1 schläft\n"),
        "train.en are <unk> in the model's vocabulary (3 of 4: words it cannot spell); it is no",
    ),
    (
        "prepare --vocab-from with --separate-vocab",
        lambda r, t: vocab_from_with(r, t, "--separate-vocab"),
        "--vocab-size and --separate-vocab apply when prepare learns",
    ),
    (
        "evaluate -o with --hyp",
        lambda r, t: [
            "evaluate",
            "--hyp",
            lines(t, "h", "a\n"),
            "--ref",
            lines(t, "r", "a\n"),
            "-o",
            str(t / "o"),
        ],
        "--hyp, --split and --trees make none to keep",
    ),
    (
        "evaluate -o with --split",
        lambda r, t: ["evaluate", str(r), "--split", "dev", "-o", str(t / "o")],
        "--hyp, --split and --trees make none to keep",
    ),
    (
        "evaluate -o a directory",
        lambda r, t: [
            "evaluate",
            str(r),
            "--src",
            lines(t, "s", "1\n"),
            "--ref",
            lines(t, "r", "1\n"),
            "-o",
            str(t),
        ],
        "is a directory; -o takes a file path",
    ),
    ("dataset offsets going back", offsets_decreasing, "train.src offsets decrease"),
    (
        "translate -o a name over the file system's limit",
        lambda r, t: ["translate", str(r), "-o", too_long(t)],
        "File name too long",
    ),
    (
        "translate -o a name whose temporary name is over the limit",
        lambda r, t: ["translate", str(r), "-o", str(t / ("x" * 250))],
        "File name too long",
    ),
    (
        "translate -o a path over the limit",
        lambda r, t: ["translate", str(r), "-o", too_deep(t)],
        "name too long",
    ),
    (
        "score -o a name over the limit",
        lambda r, t: [
            "score",
            str(r),
            "--src",
            lines(t, "s", "1\n"),
            "--tgt",
            lines(t, "g", "1\n"),
            "-o",
            too_long(t),
        ],
        "File name too long",
    ),
    (
        "average -o a name over the limit",
        lambda r, t: ["average", "--last", "1", "--run-dir", str(r), "-o", too_long(t)],
        "File name too long",
    ),
    ("export -o a path over the limit", lambda r, t: ["export", str(r), "-o", too_deep(t)], "name too long"),
    (
        "prepare -o a name over the limit",
        lambda r, t: ["prepare", "--task", "copy", "-o", too_long(t)],
        "too long",
    ),
    (
        "shortlist -o a name over the limit",
        lambda r, t: ["shortlist", str(r / "data"), "-o", too_long(t)],
        "File name too long",
    ),
    (
        "attention -o a name over the limit",
        lambda r, t: ["attention", str(r), "1 2", "-o", too_long(t)],
        "too long",
    ),
    (
        "train --run-dir a name over the limit",
        lambda r, t: ["train", "small", *TINY, "--run-dir", too_long(t)],
        "File name too long",
    ),
    (
        "train --run-dir a path over the limit",
        lambda r, t: ["train", "small", *TINY, "--run-dir", too_deep(t)],
        "File name too long",
    ),
    ("dataset array a link out of it", array_linked_outside, "not a regular file (links, pipes"),
    (
        "attention --layers beyond the model",
        lambda r, t: ["attention", str(r), "1 2", "--layers", "0,9", "-o", str(t / "a")],
        "--layers: the model has layers 0..",
    ),
    (
        "attention --heads beyond the model",
        lambda r, t: ["attention", str(r), "1 2", "--heads", "7", "-o", str(t / "a")],
        "--heads: the model has heads 0..",
    ),
    ("attention on an empty source", lambda r, t: ["attention", str(r), " ", "-o", str(t / "a")], "empty"),
    ("config file a named pipe", lambda r, t: ["train", fifo(t, "c.toml"), *TINY], "not a regular file"),
    ("dataset array a named pipe", npy_fifo, "not a regular file"),
    ("corpus file a named pipe", fifo_corpus, "not a regular file"),
    *(
        (f"{kind} corpus file cut short", cut_short(kind), f"train.en.{kind}: {says}")
        for kind, says in (
            ("gz", "unreadable after line 0"),
            ("bz2", "unreadable after line"),
            ("xz", "unreadable after line 0"),
            ("zst", "damaged or cut short (no whole zstd frame from byte"),
        )
    ),
    ("a corpus file both plain and compressed", two_forms_of_a_corpus_file, "keep only one of them"),
    ("prepare --workers 0", lambda r, t: prepare_on(text_corpus(t), t, "--workers", "0"), "'--workers'"),
    (
        "syntax-aware model on data without trees",
        lambda r, t: ["train", "small", *TINY, "model.syntax_mask=hard", "--run-dir", str(t / "t")],
        "masks attention with source trees",
    ),
    (
        "--run-dir an existing file",
        lambda r, t: ["train", "small", *TINY, "--run-dir", lines(t, "f", "x")],
        "is not a directory",
    ),
    ("run lock a folder", lock_is_a_folder, "cannot take the run directory's lock"),
    (
        "weights of another width than config.json",
        lambda r, t: ["translate", str(edit_meta(checkpoint_copy(r, t), wider_config))],
        "weights do not fit the model",
    ),
    (
        "inspect --src-vocab 0",
        lambda r, t: ["inspect", "small", "--src-vocab", "0"],
        "--src-vocab must be 1..",
    ),
    (
        "inspect data.dataset with --src-vocab",
        lambda r, t: ["inspect", "small", f"data.dataset={r / 'data'}", "data.task=null", "--src-vocab", "8"],
        "gives the vocabulary sizes; leave out --src-vocab and --tgt-vocab",
    ),
    (
        "inspect data.dataset not prepared",
        lambda r, t: ["inspect", "small", f"data.dataset={t}"],
        "not a prepared dataset (no meta.json)",
    ),
    (
        "inspect --src-len -5",
        lambda r, t: ["inspect", "small", "--src-len", "-5"],
        "Invalid value for '--src-len': Input should be greater than or equal to 1",
    ),
    (
        "translate --src-trees for a model without trees",
        lambda r, t: ["translate", str(r), "--src-trees", str(t / "nope.tree")],
        "this model takes no source trees",
    ),
    (
        "attention --src-trees for a model without trees",
        lambda r, t: ["attention", str(r), "1 2", "-o", str(t / "a"), "--src-trees", str(t / "nope")],
        "this model takes no source trees",
    ),
    ("unknown command", lambda r, t: ["frobnicate"], "No such command 'frobnicate'"),
    (
        "unknown subcommand",
        lambda r, t: ["import", "fairseq", str(t)],
        "No such command 'fairseq'; see `",
    ),
    (
        "unknown option",
        lambda r, t: ["translate", str(r), "--bem", "4"],
        "No such option: --bem (Possible options: --beam, --nbest)",
    ),
    (
        "option value of the wrong type",
        lambda r, t: ["translate", str(r), "--beam", "four"],
        "Invalid value for '--beam'",
    ),
    ("option without its value", lambda r, t: ["translate", str(r), "--beam"], "requires an argument"),
    ("missing argument", lambda r, t: ["train"], "Missing argument 'config'; see `"),
    (
        "attention -o an existing file",
        lambda r, t: ["attention", str(r), "1 2", "-o", lines(t, "f", "x")],
        "-o takes a folder",
    ),
    (
        "attention on a very long source",
        lambda r, t: ["attention", str(r), " ".join(["1"] * 300), "-o", str(t / "a")],
        "plots take at most",
    ),
    (
        "a decoder-only model without decoder layers",
        lambda r, t: [
            "train",
            "small",
            *TINY,
            "model.kind=decoder",
            "model.decoder_layers=0",
            "--run-dir",
            str(t / "t"),
        ],
        "model.kind='decoder' needs model.decoder_layers >= 1",
    ),
    (
        "--prefix on a classifier",
        lambda r, t: [
            "translate",
            str(classifier(t)),
            "-i",
            lines(t, "i", "1 2\n"),
            "--prefix",
            lines(t, "p", "low\n"),
        ],
        "forced prefixes do not apply to a classifier",
    ),
    (
        "--prefix with a word outside the target vocabulary",
        lambda r, t: [
            "translate",
            str(r),
            "-i",
            lines(t, "i", "1 2\n3\n"),
            "--prefix",
            lines(t, "p", "1\n2 zebra 3\n"),
        ],
        "p:2: 'zebra' is not in the model's target vocabulary (it would be read as <unk>)",
    ),
    (
        "score --tgt with a word outside the target vocabulary",
        lambda r, t: [
            "score",
            str(r),
            "--src",
            lines(t, "s", "1 2\n3\n"),
            "--tgt",
            lines(t, "g", "1 2\n3 zebra\n"),
        ],
        "g:2: 'zebra' is not in the model's target vocabulary",
    ),
    (
        "a checkpoint whose src.spm is empty (a vocabulary of 0 entries and sentencepiece's log before)",
        lambda r, t: [
            "translate",
            str(text_checkpoint(t, damage=lambda c: (c / "src.spm").write_bytes(b""))),
        ],
        "src.*: vocabulary missing or damaged (an empty file, not a sentencepiece model)",
    ),
]


def text_checkpoint(tmp: Path, damage: Callable[[Path], object]) -> Path:
    """A text model's checkpoint (a sentencepiece vocabulary) trained for one step, then damaged."""
    assert CliRunner().invoke(app, [*prepare_on(text_corpus(tmp), tmp), "--vocab-size", "300"]).exit_code == 0
    steps = ["train.steps=1", "train.save_every=1", "train.validate_every=1", "--no-progress"]
    data, run = f"data.dataset={tmp / 'out'}", str(tmp / "r")
    trained = CliRunner().invoke(app, ["train", "small", *TINY[:5], data, *steps, "--run-dir", run])
    assert trained.exit_code == 0, trained.output
    checkpoint = step_checkpoints(tmp / "r" / "checkpoints")[-1]
    damage(checkpoint)
    return checkpoint


def shortlist_file(run: Path, tmp: Path) -> str:
    result = CliRunner().invoke(app, ["shortlist", str(run / "data"), "-o", str(tmp / "short.txt")])
    assert result.exit_code == 0, result.output
    return str(tmp / "short.txt")


def corrupt_export(run: Path, tmp: Path) -> list[str]:
    """An export directory whose model.bin was damaged after it was written."""
    out = tmp / "exported"
    CliRunner().invoke(app, ["export", str(run), "--format", "ctranslate2", "-o", str(out)])
    with (out / "model.bin").open("r+b") as model:
        model.seek(100)
        model.write(b"\0" * 16)
    return ["translate", str(out), "--engine", "ctranslate2"]


def unchecked_export(run: Path, tmp: Path) -> list[str]:
    """An export directory whose record has lost the checksum of model.bin, and model.bin damaged."""
    import json

    argv = corrupt_export(run, tmp)
    info_file = tmp / "exported" / "transduce.json"
    info = json.loads(info_file.read_text())
    del info["model_sha256"]
    info_file.write_text(json.dumps(info))
    return argv


def foreign_cache(run: Path, tmp: Path) -> list[str]:
    """A checkpoint holding, where its CTranslate2 export would be cached, a folder of the user's."""
    from transduce.decode.ctranslate2_engine import cache_folder
    from transduce.store.load import load_reader

    ckpt = checkpoint_copy(run, tmp)
    folder = cache_folder(load_reader(ckpt), "float32")
    shutil.rmtree(folder, ignore_errors=True)  # an export that an earlier row cached
    folder.mkdir()
    (folder / "notes.txt").write_text("mine")  # test_data_safety checks it is kept
    return ["translate", str(ckpt), "--engine", "ctranslate2"]


ENGINE_ROWS: list[tuple[str, Callable[[Path, Path], list[str]], str]] = [
    (
        "--engine with an unknown engine",
        lambda r, t: ["translate", str(r), "--engine", "onnx"],
        "--engine 'onnx': allowed: torch, ctranslate2",
    ),
    (
        "--engine ctranslate2 with a Universal Transformer with ACT",
        lambda r, t: [
            "translate",
            str(train_tiny(t / "ut", 2, "model.arch=universal", "model.act=true")),
            "--engine",
            "ctranslate2",
        ],
        "CTranslate2 cannot hold model.arch=universal (only arch=transformer: no shared recurrent layers); "
        "model.act (adaptive computation time); decode it with --engine torch",
    ),
    (
        "--engine ctranslate2 with a classifier",
        lambda r, t: ["translate", str(classifier(t)), "--engine", "ctranslate2"],
        "CTranslate2 cannot hold model.kind=encoder (only encoder-decoder models)",
    ),
    (
        "--engine ctranslate2 with an ensemble",
        lambda r, t: ["translate", str(r), str(r), "--engine", "ctranslate2"],
        "--engine ctranslate2 decodes one model; an ensemble of several decodes with --engine torch",
    ),
    (
        "--engine ctranslate2 with --src-trees",
        lambda r, t: [
            "translate",
            str(r),
            "--engine",
            "ctranslate2",
            "--src-trees",
            lines(t, "s", "(S 1)\n"),
        ],
        "--src-trees: CTranslate2 models read no source trees",
    ),
    (
        "--engine ctranslate2 with --static-cache",
        lambda r, t: ["evaluate", str(r), "--split", "dev", "--engine", "ctranslate2", "--static-cache"],
        "--static-cache: it is the torch engine's",
    ),
    (
        "--engine ctranslate2 with --prefix and --shortlist",
        lambda r, t: [
            "translate",
            str(r),
            "--engine",
            "ctranslate2",
            "-i",
            lines(t, "i", "1 2\n"),
            "--prefix",
            lines(t, "p", "1\n"),
            "--shortlist",
            shortlist_file(r, t),
        ],
        "--prefix with --shortlist: forced prefixes with a shortlist need the torch engine",
    ),
    ("--engine ctranslate2 given a corrupt export", corrupt_export, "model.bin: corrupt or truncated"),
    (
        "--engine ctranslate2 given an export without its checksum",
        unchecked_export,
        "no checksum of model.bin",
    ),
    (
        "an export given to the torch engine",
        lambda r, t: corrupt_export(r, t)[:2],
        "is a CTranslate2 export (`transduce export`); decode it with --engine ctranslate2",
    ),
    (
        "--engine ctranslate2 where the user's folder holds the cache's name",
        foreign_cache,
        "holds files that no export wrote (left as they are); move them, or export the checkpoint elsewhere",
    ),
]


def damaged_export(damage: Callable[[Path], object], command: str = "translate") -> Callable:
    """`command` with --engine ctranslate2 on an export of the run damaged by `damage`."""

    def build(run: Path, tmp: Path) -> list[str]:
        out = tmp / "exported"
        CliRunner().invoke(app, ["export", str(run), "--format", "ctranslate2", "-o", str(out)])
        damage(out)
        inputs = {
            "translate": [],
            "score": ["--src", lines(tmp, "s", "1 2\n"), "--tgt", lines(tmp, "t", "1 2\n")],
        }
        return [command, str(out), "--engine", "ctranslate2", *inputs[command]]

    return build


def _cut_vocabulary(export: Path) -> None:
    vocabulary = export / "shared_vocabulary.json"
    vocabulary.write_text(json.dumps(json.loads(vocabulary.read_text())[:-3]))


def _edit_json_file(name: str, change: Callable[[dict], None]) -> Callable[[Path], None]:
    return lambda folder: edit_meta(folder, change, name)


# Exports damaged after `export` (issue 87's sweep, 2026-12-04): every file is checksummed now
EXPORT_ROWS: list[tuple[str, Callable[[Path, Path], list[str]], str]] = [
    (
        "score on an export whose vocabulary lost entries (decoded before)",
        damaged_export(_cut_vocabulary, "score"),
        "shared_vocabulary.json: corrupt or truncated (checksum mismatch), or changed since the export",
    ),
    (
        "an export whose CTranslate2 config.json was edited (decoded before)",
        damaged_export(_edit_json_file("config.json", lambda c: c.update(eos_token="<zzz>"))),
        "config.json: corrupt or truncated",
    ),
    (
        "an export whose transduce.json is gone",
        damaged_export(lambda out: (out / "transduce.json").unlink()),
        "a CTranslate2 model directory without transduce.json",
    ),
    (
        "an export whose transduce.json is a directory (taken for a checkpoint before)",
        damaged_export(lambda out: ((out / "transduce.json").unlink(), (out / "transduce.json").mkdir())),
        "transduce.json: not a regular file (a directory, pipe or device); export the checkpoint again",
    ),
    (
        "an export whose model.bin is a directory (reported as having none before)",
        damaged_export(lambda out: ((out / "model.bin").unlink(), (out / "model.bin").mkdir())),
        "model.bin: not a regular file (a directory, pipe or device); export the checkpoint again",
    ),
    (
        "an export whose transduce.json is gone, given to the torch engine",
        lambda r, t: damaged_export(lambda out: (out / "transduce.json").unlink())(r, t)[:2],
        "a CTranslate2 model directory without transduce.json",
    ),
    (
        "transduce.json with a checkpoint section of the wrong type (a multi-line error before)",
        damaged_export(_edit_json_file("transduce.json", lambda i: i["checkpoint"].update(config=7))),
        "transduce.json: not the metadata of a transduce export",
    ),
    (
        "transduce.json with files_sha256 not an object",
        damaged_export(_edit_json_file("transduce.json", lambda i: i.update(files_sha256=[1]))),
        "files_sha256 is no object",
    ),
    (
        "--engine ctranslate2 --threads 100000 (CTranslate2 crashed)",
        lambda r, t: ["translate", str(r), "--engine", "ctranslate2", "--threads", "100000"],
        "--threads 100000: at most 1024",
    ),
    (
        "export --quantization with --format marian (ignored before)",
        lambda r, t: ["export", str(r), "--format", "marian", "-o", str(t / "o"), "--quantization", "int8"],
        "--quantization goes with --format ctranslate2 or argos, not marian",
    ),
    (
        "export --format ctranslate2 with an empty --description (ignored before)",
        lambda r, t: ["export", str(r), "--format", "ctranslate2", "-o", str(t / "o"), "--description", ""],
        "--description, --license: for --format argos",
    ),
]


def _without(ckpt: Path, name: str) -> Path:
    (ckpt / name).unlink()
    return ckpt


@pytest.mark.parametrize(
    ("build", "fragment"),
    [(b, f) for _, b, f in ROWS + ENGINE_ROWS + EXPORT_ROWS],
    ids=[r[0] for r in ROWS + ENGINE_ROWS + EXPORT_ROWS],
)
def test_bad_input_is_one_error_line_and_status_2(tmp_path, run, build, fragment):
    result = CliRunner().invoke(app, build(run, tmp_path), input="1 2\n")
    assert result.exit_code == 2, result.output
    errors = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, result.output
    assert result.output.strip().splitlines() == errors, result.output  # nothing else, no progress line
    assert fragment in result.output.replace("\n", " "), result.output
    assert "Traceback" not in result.output


def classifier(tmp: Path) -> Path:
    """A tiny classifier (the majority task), trained for two steps."""
    return train_tiny(
        tmp / "classifier", 2, "model.kind=encoder", "model.num_classes=3", "data.task=majority"
    )


def closed_stdout() -> None:
    """Run in the child before it starts: it then finds its standard output closed (`>&-`)."""
    os.close(1)


# Bad inputs that need a real process: (id, arguments, what the child does before it starts, fragment)
PROCESS_ROWS: list[tuple[str, Callable[[Path, Path], list[str]], Callable[[], None], str]] = [
    (
        "translate with standard output closed",
        lambda r, t: ["translate", str(r), "--greedy"],
        closed_stdout,
        "standard output is closed",
    ),
    (
        "translate --sample with a classifier, progress shown (piped input)",
        lambda r, t: ["translate", str(classifier(t)), "--sample"],
        lambda: None,
        "sampling does not apply to a classifier",
    ),
]


@pytest.mark.parametrize(
    ("build", "before", "fragment"), [r[1:] for r in PROCESS_ROWS], ids=[r[0] for r in PROCESS_ROWS]
)
def test_bad_input_in_a_real_process_is_one_error_line(tmp_path, run, build, before, fragment):
    result = subprocess.run(
        [sys.executable, "-m", "transduce", *build(run, tmp_path)],
        input="1 2\n",
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=before,
        timeout=120,
    )
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1, result.stderr
    assert fragment in result.stderr


def every_command() -> list[tuple[list[str], object]]:
    """(the words that name it, the click command) for the app, its groups and their commands."""
    from typer.main import get_command

    group = get_command(app)
    commands = [([], group), (["import"], group.commands["import"])]
    commands += [([name], command) for name, command in group.commands.items() if name != "import"]
    return commands + [(["import", name], c) for name, c in group.commands["import"].commands.items()]


def help_of(*words: str) -> str:
    result = CliRunner().invoke(app, [*words, "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    return result.output


def test_help_lists_every_option_of_every_command():
    for path, command in every_command():
        result = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": "200"})
        assert result.exit_code == 0, result.output
        for param in command.params:
            for name in param.opts if param.param_type_name == "option" else []:
                assert name in result.output, (path, name)


def test_help_shows_values_as_a_user_types_them_not_as_python_types():
    """No `<bool>` after a flag (typer's label, even on --help), no `list[Path]` or other Python type."""
    for path, _ in every_command():
        shown = help_of(*path)
        for python in ("<bool>", "<str>", "<int>", "<float>", "<path>", "list[", "Path]"):
            assert python not in shown, (path, python)
        assert re.search(r"--help\s+Show this message", shown), path


def option_row(shown: str, option: str) -> str:
    """The row of an option in --help output: its first line and the lines that continue it."""
    lines = shown.splitlines()
    start = next(i for i, line in enumerate(lines) if re.match(rf"│\s+(\*\s+)?{option}\s", line))
    rest = (i for i in range(start + 1, len(lines)) if re.match(r"(│\s+(\*\s+)?-|╰)", lines[i]))
    return " ".join(lines[start : next(rest)])


def choice_options() -> list[tuple[list[str], str, tuple[str, ...]]]:
    """(command, option, the values that the library, where it checks the option, accepts) for
    every option whose values are a closed set."""
    from typing import get_args

    from transduce.choices import ENGINES
    from transduce.cli.conversion import EXPORT_FORMATS
    from transduce.config import TaskName
    from transduce.data.prepare import CONTROL_CHARACTERS, EMPTY_PAIRS, TABS
    from transduce.data.source import SOURCE_FORMATS, SOURCE_TREES
    from transduce.evaluate import SPLITS
    from transduce.interop.ctranslate2 import CT2_QUANTIZATIONS
    from transduce.store.load import QUANTIZE

    rows = [([c], "--quantize", QUANTIZE) for c in ("translate", "evaluate", "score", "serve")]
    rows += [([c], "--engine", ENGINES) for c in ("translate", "evaluate", "score", "serve")]
    rows += [(["prepare"], "--empty", EMPTY_PAIRS), (["prepare"], "--tabs", TABS)]
    rows += [(["prepare"], "--control", CONTROL_CHARACTERS), (["prepare"], "--source-format", SOURCE_FORMATS)]
    rows += [
        (["prepare"], "--source-trees", SOURCE_TREES),
        (["prepare"], "--task", (*get_args(TaskName), "parse")),
    ]
    rows += [(["evaluate"], "--split", SPLITS), (["export"], "--format", EXPORT_FORMATS)]
    return [*rows, (["export"], "--quantization", CT2_QUANTIZATIONS)]


@pytest.mark.parametrize(
    ("command", "option", "values"), choice_options(), ids=[f"{c[0]} {o}" for c, o, _ in choice_options()]
)
def test_help_names_every_value_of_a_choice_option(command, option, values):
    """A short set of values is the option's metavar ([skip|reject]); a long one, which would not
    fit the metavar column, is listed in the option's help under a metavar naming what it is."""
    row = option_row(help_of(*command), option)
    metavar = row.split(option, 1)[1].split()[0]
    if len("|".join(values)) <= 30:
        assert metavar == "[" + "|".join(values) + "]", row
    else:
        assert metavar not in ("TEXT", "<str>"), row
        missing = [v for v in values if not re.search(rf"(?<![\w-]){re.escape(v)}(?![\w-])", row)]
        assert not missing, (option, missing, row)


def test_train_help_names_every_preset_with_its_size():
    from transduce.config import PRESETS

    shown = " ".join(help_of("train").split())
    for name, preset in PRESETS.items():
        assert f"{name} (d_model {preset['model']['d_model']}," in shown, name


def test_nbest_keeps_a_row_for_empty_lines(run):
    result = CliRunner().invoke(
        app, ["translate", str(run), "--nbest", "2", "--beam", "2"], input="1 2\n\n3\n"
    )
    assert result.exit_code == 0, result.output
    numbers = [int(line.split(" ||| ")[0]) for line in result.stdout.splitlines()]
    assert numbers == [0, 0, 1, 2, 2]


def test_evaluate_scores_against_several_references(tmp_path):
    hyp = lines(tmp_path, "h", "the cat sat on the mat\n")
    one = CliRunner().invoke(
        app, ["evaluate", "--hyp", hyp, "--ref", lines(tmp_path, "r1", "a cat sat on a mat\n")]
    )
    two = CliRunner().invoke(
        app,
        [
            "evaluate",
            "--hyp",
            hyp,
            "--ref",
            str(tmp_path / "r1"),
            "--ref",
            lines(tmp_path, "r2", "the cat sat on the mat\n"),
        ],
    )
    assert one.exit_code == two.exit_code == 0
    assert "BLEU 100.00" in two.stdout and "BLEU 100.00" not in one.stdout


def test_inspect_and_evaluate_accept_what_prepare_and_train_wrote(tmp_path, run):
    inspect = CliRunner().invoke(app, ["inspect", str(run)])
    assert inspect.exit_code == 0 and "total parameters" in inspect.stdout
    data = tmp_path / "addition"
    prepared = CliRunner().invoke(
        app,
        [
            "prepare",
            "--task",
            "copy",
            "-o",
            str(data),
            "--set",
            "data.task_train_max_len=4",
            "--set",
            "data.task_train_size=200",
            "--set",
            "data.task_eval_size=10",
        ],
    )
    assert prepared.exit_code == 0, prepared.output
    assert "test_long 10" in prepared.output
    trained = train_tiny(tmp_path / "t", 2, f"data.dataset={data}", "data.task=null")
    result = CliRunner().invoke(app, ["evaluate", str(trained), "--split", "test_long", "--greedy"])
    assert result.exit_code == 0, result.output
    assert "(10 examples)" in result.stdout


def test_test_long_is_longer_than_training_by_default():
    from transduce.config import DataConfig
    from transduce.data.tasks import generate_split

    cfg = DataConfig(task="copy", task_train_max_len=40, task_eval_size=50)
    lengths = {len(src.split()) for src, _ in generate_split(cfg, "test_long")}
    assert min(lengths) >= 41 and max(lengths) <= 80 and len(lengths) > 5
