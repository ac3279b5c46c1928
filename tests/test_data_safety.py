"""Nothing the user did not ask to replace is ever lost: one row per dangerous command line.

Each row builds a scene in a temporary folder, runs the real CLI, and checks the contract: exit
status 2, one `error:` line naming the problem, no traceback, and every file that was there
before (inputs and earlier outputs) byte-for-byte unchanged.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import resource
import shutil
import signal
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from tiny import TINY, tiny_config, train_tiny
from typer.testing import CliRunner

from transduce.cli import app
from transduce.fileio import WriteError, check_output_dir, written_by
from transduce.store.checkpoint import load_checkpoint, save_checkpoint, step_checkpoints
from transduce.train.run_dir import RunLock
from transduce.train.trainer import Trainer

WORDS = [
    "the",
    "a",
    "cat",
    "dog",
    "sat",
    "ran",
    "on",
    "under",
    "mat",
    "box",
    "red",
    "blue",
    "big",
    "small",
    "one",
    "two",
]


def write_corpus(folder: Path, seed: int = 0, dev_lines: list[str] | None = None, suffix: str = "") -> Path:
    """A small parallel corpus (target = source upper-cased) in train/dev files."""
    folder.mkdir(parents=True, exist_ok=True)
    words = [w + suffix for w in WORDS]
    lines = [
        " ".join(words[(i * 7 + j * 3 + seed) % len(words)] for j in range(3 + i % 4)) for i in range(60)
    ]
    (folder / "train.en").write_text("".join(f"{x}\n" for x in lines))
    (folder / "train.up").write_text("".join(f"{x.upper()}\n" for x in lines))
    dev = lines[:5] if dev_lines is None else dev_lines
    (folder / "dev.en").write_text("".join(f"{x}\n" for x in dev))
    (folder / "dev.up").write_text("".join(f"{x.upper()}\n" for x in dev))
    return folder


def prepare_args(corpus: Path, out: Path, *extra: str) -> list[str]:
    return [
        "prepare",
        str(corpus),
        "--src",
        "en",
        "--tgt",
        "up",
        "--vocab-size",
        "310",
        "-o",
        str(out),
        *extra,
    ]


def snapshot(root: Path) -> dict[str, str]:
    """Every file and link under `root` with its content hash (links: their target); a run's
    lock file, which names its latest holder, is not the user's data."""
    out = {}
    for path in sorted(root.rglob("*")):
        if path.name == ".lock":
            continue
        if path.is_symlink():
            out[str(path)] = "link:" + os.readlink(path)
        elif path.is_file():
            out[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    """A run directory with two checkpoints of the tiny copy model."""
    return train_tiny(tmp_path_factory.mktemp("run") / "r", 4, "train.save_every=2")


def foreign_dir(path: Path) -> Path:
    path.mkdir(parents=True)
    (path / "notes.txt").write_text("my thesis, chapter 3\n")
    return path


def scene_prepare_foreign(tmp: Path, run: Path) -> list[str]:
    return prepare_args(write_corpus(tmp / "c"), foreign_dir(tmp / "mine"))


def scene_prepare_into_input(tmp: Path, run: Path) -> list[str]:
    corpus = write_corpus(tmp / "c2")
    return prepare_args(corpus, corpus)


def scene_prepare_over_file(tmp: Path, run: Path) -> list[str]:
    (tmp / "out.txt").write_text("keep me\n")
    return prepare_args(write_corpus(tmp / "c"), tmp / "out.txt")


def scene_prepare_over_link(tmp: Path, run: Path) -> list[str]:
    target = foreign_dir(tmp / "real")
    (tmp / "link").symlink_to(target)
    return prepare_args(write_corpus(tmp / "c"), tmp / "link")


def scene_prepare_empty_dev(tmp: Path, run: Path) -> list[str]:
    return prepare_args(write_corpus(tmp / "c", dev_lines=["", "  ", ""]), tmp / "data")


def scene_prepare_empty_train(tmp: Path, run: Path) -> list[str]:
    corpus = write_corpus(tmp / "c")
    (corpus / "train.en").write_text("\n\n\n")
    (corpus / "train.up").write_text("\n\n\n")
    return prepare_args(corpus, tmp / "data")


def scene_average_foreign(tmp: Path, run: Path) -> list[str]:
    return ["average", "--last", "2", "--run-dir", str(run), "-o", str(foreign_dir(tmp / "mine"))]


def scene_average_into_input(tmp: Path, run: Path) -> list[str]:
    first, second = step_checkpoints(run / "checkpoints")
    return ["average", str(first), str(second), "-o", str(second)]


def scene_average_other_vocab(tmp: Path, run: Path) -> list[str]:
    other = train_tiny(tmp / "other", 2, "data.task_symbols=12")
    first = step_checkpoints(run / "checkpoints")[0]
    return ["average", str(first), str(step_checkpoints(other / "checkpoints")[0]), "-o", str(tmp / "avg")]


def scene_export_foreign(tmp: Path, run: Path) -> list[str]:
    return ["export", str(run), "-o", str(foreign_dir(tmp / "mine"))]


def scene_export_over_file(tmp: Path, run: Path) -> list[str]:
    (tmp / "model.txt").write_text("keep me\n")
    return ["export", str(run), "-o", str(tmp / "model.txt")]


def scene_import_foreign(tmp: Path, run: Path) -> list[str]:
    return ["import", "marian", str(foreign_dir(tmp / "hf")), "-o", str(foreign_dir(tmp / "mine"))]


def scene_translate_into_dir(tmp: Path, run: Path) -> list[str]:
    (tmp / "in.txt").write_text("1 2\n")
    return ["translate", str(run), "-i", str(tmp / "in.txt"), "-o", str(foreign_dir(tmp / "outdir"))]


def scene_translate_missing_folder(tmp: Path, run: Path) -> list[str]:
    (tmp / "in.txt").write_text("1 2\n")
    return ["translate", str(run), "-i", str(tmp / "in.txt"), "-o", str(tmp / "nowhere" / "out.txt")]


def scene_translate_over_input(tmp: Path, run: Path) -> list[str]:
    (tmp / "in.txt").write_text("1 2\n")
    return ["translate", str(run), "-i", str(tmp / "in.txt"), "-o", str(tmp / "in.txt")]


def scene_translate_over_link_to_input(tmp: Path, run: Path) -> list[str]:
    (tmp / "in.txt").write_text("1 2\n")
    (tmp / "link.txt").symlink_to(tmp / "in.txt")
    return ["translate", str(run), "-i", str(tmp / "in.txt"), "-o", str(tmp / "link.txt")]


def scene_translate_into_checkpoint(tmp: Path, run: Path) -> list[str]:
    (tmp / "in.txt").write_text("1 2\n")
    newest = step_checkpoints(run / "checkpoints")[-1]
    return ["translate", str(newest), "-i", str(tmp / "in.txt"), "-o", str(newest / "model.safetensors")]


def scene_translate_over_hard_link_to_input(tmp: Path, run: Path) -> list[str]:
    (tmp / "in.txt").write_text("1 2\n")
    os.link(tmp / "in.txt", tmp / "hard.txt")
    return ["translate", str(run), "-i", str(tmp / "in.txt"), "-o", str(tmp / "hard.txt")]


def scene_translate_over_hard_link_to_config(tmp: Path, run: Path) -> list[str]:
    (tmp / "in.txt").write_text("1 2\n")
    newest = step_checkpoints(run / "checkpoints")[-1]
    os.link(newest / "config.json", tmp / "config.json")
    return ["translate", str(newest), "-i", str(tmp / "in.txt"), "-o", str(tmp / "config.json")]


def scene_score_over_hard_link_to_targets(tmp: Path, run: Path) -> list[str]:
    (tmp / "src.txt").write_text("1 2\n")
    (tmp / "tgt.txt").write_text("1 2\n")
    os.link(tmp / "tgt.txt", tmp / "scores.txt")
    argv = ["score", str(run), "--src", str(tmp / "src.txt"), "--tgt", str(tmp / "tgt.txt")]
    return [*argv, "-o", str(tmp / "scores.txt")]


def scene_evaluate_over_ref(tmp: Path, run: Path) -> list[str]:
    (tmp / "in.txt").write_text("1 2\n")
    (tmp / "ref.txt").write_text("2 1\n")
    return [
        "evaluate",
        str(run),
        "--src",
        str(tmp / "in.txt"),
        "--ref",
        str(tmp / "ref.txt"),
        "-o",
        str(tmp / "ref.txt"),
    ]


def scene_evaluate_into_checkpoint(tmp: Path, run: Path) -> list[str]:
    (tmp / "in.txt").write_text("1 2\n")
    newest = step_checkpoints(run / "checkpoints")[-1]
    return [
        "evaluate",
        str(newest),
        "--src",
        str(tmp / "in.txt"),
        "--ref",
        str(tmp / "in.txt"),
        "-o",
        str(newest / "config.json"),
    ]


def scene_resume_other_vocab(tmp: Path, run: Path) -> list[str]:
    for name, suffix in (("a", ""), ("b", "ing")):
        corpus = write_corpus(tmp / f"c{name}", suffix=suffix)
        assert CliRunner().invoke(app, prepare_args(corpus, tmp / f"d{name}")).exit_code == 0
    text = ["model.d_model=32", "model.heads=4", "model.d_ff=64", "model.encoder_layers=1"]
    text += ["model.decoder_layers=1", "train.steps=1", "train.validate_every=1", "data.max_tokens=200"]
    first = CliRunner().invoke(
        app,
        ["train", "small", *text, f"data.dataset={tmp / 'da'}", "--run-dir", str(tmp / "t"), "--no-progress"],
    )
    assert first.exit_code == 0, first.output
    return [
        "train",
        "small",
        *text,
        "train.steps=2",
        f"data.dataset={tmp / 'db'}",
        "--run-dir",
        str(tmp / "t"),
    ]


def scene_prepare_force_inside_input(tmp: Path, run: Path) -> list[str]:
    corpus = write_corpus(tmp / "c")
    return prepare_args(corpus, foreign_dir(corpus / "raw"), "--force")


def dataset_copy(tmp: Path, run: Path) -> Path:
    shutil.copytree(run / "data", tmp / "ds")
    return tmp / "ds"


def train_args(run_dir: Path, *extra: str) -> list[str]:
    return ["train", "small", *TINY, *extra, "--run-dir", str(run_dir), "--no-progress"]


def scene_run_dir_in_dataset(tmp: Path, run: Path) -> list[str]:
    data = dataset_copy(tmp, run)
    return train_args(data / "run", "data.task=null", f"data.dataset={data}")


def scene_run_dir_is_dataset(tmp: Path, run: Path) -> list[str]:
    data = dataset_copy(tmp, run)
    return train_args(data, "data.task=null", f"data.dataset={data}")


def scene_run_dir_is_checkpoint(tmp: Path, run: Path) -> list[str]:
    shutil.copytree(step_checkpoints(run / "checkpoints")[-1], tmp / "ck")
    return train_args(tmp / "ck")


def scene_resume_on_edited_data(tmp: Path, run: Path) -> list[str]:
    mine = train_tiny(tmp / "r", 2)
    tokens = np.load(mine / "data" / "train.src.tokens.npy")
    tokens[0] = 4 + (tokens[0] - 3) % 10  # another symbol of the copy task
    np.save(mine / "data" / "train.src.tokens.npy", tokens)
    return train_args(mine, "train.steps=4")


def scene_average_last_over_foreign(tmp: Path, run: Path) -> list[str]:
    foreign_dir(tmp / "t" / "averaged")
    return train_args(tmp / "t", "train.average_last=1")


ROWS: list[tuple[str, Callable[[Path, Path], list[str]], str]] = [
    ("prepare -o a foreign directory", scene_prepare_foreign, "did not write"),
    ("prepare -o its own input folder", scene_prepare_into_input, "contain or lie inside the input"),
    ("prepare --force -o inside its input folder", scene_prepare_force_inside_input, "lie inside the input"),
    ("prepare -o an existing file", scene_prepare_over_file, "not a directory"),
    ("prepare -o a symbolic link", scene_prepare_over_link, "symbolic link"),
    ("prepare with an all-empty dev split", scene_prepare_empty_dev, "dev split has no usable examples"),
    ("prepare with an all-empty train split", scene_prepare_empty_train, "train split has no usable"),
    ("average -o a foreign directory", scene_average_foreign, "did not write"),
    ("average -o one of its inputs", scene_average_into_input, "contain or lie inside the input"),
    ("average checkpoints of other vocabularies", scene_average_other_vocab, "vocabularies differ"),
    ("export -o a foreign directory", scene_export_foreign, "did not write"),
    ("export -o an existing file", scene_export_over_file, "not a directory"),
    ("import marian -o a foreign directory", scene_import_foreign, "did not write"),
    ("translate -o a directory", scene_translate_into_dir, "is a directory"),
    ("translate -o in a missing folder", scene_translate_missing_folder, "does not exist"),
    ("translate -o its own input", scene_translate_over_input, "would overwrite the input"),
    ("translate -o a link to its input", scene_translate_over_link_to_input, "would overwrite the input"),
    ("translate -o a file of the checkpoint", scene_translate_into_checkpoint, "would overwrite the input"),
    ("translate -o a hard link to its input", scene_translate_over_hard_link_to_input, "(a hard link to it)"),
    (
        "translate -o a hard link to the checkpoint's config.json",
        scene_translate_over_hard_link_to_config,
        "config.json (a hard link to it)",
    ),
    (
        "score -o a hard link to its --tgt",
        scene_score_over_hard_link_to_targets,
        "tgt.txt (a hard link to it)",
    ),
    ("evaluate -o its own --ref", scene_evaluate_over_ref, "would overwrite the input"),
    ("evaluate -o a file of the checkpoint", scene_evaluate_into_checkpoint, "would overwrite the input"),
    ("resume on another vocabulary", scene_resume_other_vocab, "trained on another vocabulary"),
    ("resume on edited generated data", scene_resume_on_edited_data, "its arrays changed after"),
    ("train --run-dir inside its dataset", scene_run_dir_in_dataset, "lies inside the dataset"),
    ("train --run-dir its dataset", scene_run_dir_is_dataset, "lies inside the dataset"),
    ("train --run-dir a checkpoint", scene_run_dir_is_checkpoint, "which `transduce train` wrote"),
    ("average_last over a foreign averaged/", scene_average_last_over_foreign, "average` did not write"),
]


@pytest.mark.parametrize(("scene", "fragment"), [(s, f) for _, s, f in ROWS], ids=[r[0] for r in ROWS])
def test_dangerous_command_is_refused_and_loses_nothing(tmp_path, trained, scene, fragment):
    argv = scene(tmp_path, trained)
    before_tmp, before_run = snapshot(tmp_path), snapshot(trained)
    result = CliRunner().invoke(app, argv)
    assert result.exit_code == 2, result.output
    errors = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and fragment in result.output.replace("\n", " "), result.output
    assert "Traceback" not in result.output
    after = snapshot(tmp_path)
    assert {k: v for k, v in after.items() if k in before_tmp} == before_tmp
    assert snapshot(trained) == before_run


NAMELESS = [  # an -o that names no folder of its own, with --force (issue 87's sweep, 2026-12-04)
    ("export -o ''", lambda tmp, run: ["export", str(run), "--format", "ctranslate2", "-o", ""]),
    ("prepare -o .", lambda tmp, run: prepare_args(write_corpus(tmp / "c"), Path("."))),
    ("prepare -o ..", lambda tmp, run: prepare_args(write_corpus(tmp / "c"), Path("..") / "cwd" / "..")),
]


@pytest.mark.parametrize("scene", [r[1] for r in NAMELESS], ids=[r[0] for r in NAMELESS])
def test_an_output_without_a_name_of_its_own_is_refused(tmp_path, trained, monkeypatch, scene):
    """'' is '.': the working directory (import m2m100 gave a traceback; the others an error
    about "PosixPath('.')"); '..' its parent. Refused before any work, --force or not."""
    monkeypatch.chdir(foreign_dir(tmp_path / "cwd"))
    argv = [*scene(tmp_path, trained), "--force"]
    before = snapshot(tmp_path)
    result = CliRunner().invoke(app, argv)
    assert result.exit_code == 2 and result.output.count("error:") == 1, result.output
    assert "give the output a name of its own (not '.', '..' or '/')" in result.output
    assert snapshot(tmp_path) == before


@contextlib.contextmanager
def file_size_limit(limit: int):
    """Writes past `limit` bytes fail (EFBIG) as writes to a full disk fail (ENOSPC): this process's
    soft RLIMIT_FSIZE, with SIGXFSZ ignored so that the write returns the error instead of the
    signal killing the process; both restored after."""
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, handler)


def written_once(argv: list[str]) -> list[str]:
    """Run `argv` (it must succeed, with no limit) and return it, to be run again on a full disk."""
    result = CliRunner().invoke(app, argv)
    assert result.exit_code == 0, result.output
    return argv


def full_average(tmp: Path, run: Path) -> list[str]:
    return written_once(["average", "--last", "2", "--run-dir", str(run), "-o", str(tmp / "out")])


def full_export(tmp: Path, run: Path) -> list[str]:
    return written_once(["export", str(run), "--format", "ctranslate2", "-o", str(tmp / "out")])


def full_shortlist(tmp: Path, run: Path) -> list[str]:
    return [*written_once(["shortlist", str(run / "data"), "-o", str(tmp / "out")]), "--force"]


def full_prepare(tmp: Path, run: Path) -> list[str]:
    corpus = write_corpus(tmp / "c")
    argv = written_once(prepare_args(corpus, tmp / "out"))
    write_corpus(corpus, seed=2)  # new inputs: the dataset is to be written again
    return argv


def full_score(tmp: Path, run: Path) -> list[str]:
    (tmp / "in.txt").write_text("1 2 3 4 5 6\n" * 800)  # rows enough to pass the limit
    (tmp / "out").write_text("my earlier scores\n")
    return [
        "score",
        str(run),
        "--src",
        str(tmp / "in.txt"),
        "--tgt",
        str(tmp / "in.txt"),
        "-o",
        str(tmp / "out"),
    ]


# Writers on a full disk: each row writes `out` under tmp (most of them once successfully first),
# then writes it again where no file may grow past FULL_DISK bytes.
FULL_DISK = 1024
FULL_DISK_ROWS: list[tuple[str, Callable[[Path, Path], list[str]]]] = [
    ("average (a checkpoint's weights)", full_average),
    ("export --format ctranslate2", full_export),
    ("shortlist", full_shortlist),
    ("prepare", full_prepare),
    ("score -o (as translate -o)", full_score),
]


@pytest.mark.parametrize("scene", [s for _, s in FULL_DISK_ROWS], ids=[r[0] for r in FULL_DISK_ROWS])
def test_full_disk_is_one_error_line_and_keeps_the_earlier_output(tmp_path, trained, scene):
    argv = scene(tmp_path, trained)
    before_tmp, before_run = snapshot(tmp_path), snapshot(trained)
    with file_size_limit(FULL_DISK):
        result = CliRunner().invoke(app, argv)
    assert result.exit_code == 2, result.output
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and f"cannot write {tmp_path / 'out'}: File too large" in result.stderr.replace(
        "\n", ""
    ), result.output
    assert "Traceback" not in result.output
    assert snapshot(tmp_path) == before_tmp  # the earlier output as it was, no temporary left
    assert snapshot(trained) == before_run


def test_full_disk_while_saving_a_checkpoint_is_a_write_error_naming_it(tmp_path, trained):
    """What the trainer meets when a save fails: a WriteError (an OutputError) naming the
    checkpoint, the checkpoint written before intact, no temporary left beside it."""
    ck = load_checkpoint(step_checkpoints(trained / "checkpoints")[-1], with_trainer=True)
    out = tmp_path / "checkpoints" / "ckpt-00000004"
    shutil.copytree(ck.path, out)
    before = snapshot(tmp_path)
    with file_size_limit(FULL_DISK), pytest.raises(WriteError, match=f"cannot write {out}: File too large"):
        save_checkpoint(
            out, ck.weights, ck.config, ck.meta, [ck.path / "src.symbols.json"], trainer=ck.trainer
        )
    assert snapshot(tmp_path) == before


def test_safetensors_no_space_left_is_one_error_line(tmp_path, trained, monkeypatch):
    """safetensors reports a full disk as its own error (the issue's traceback), here raised
    where it writes the weights: one line with the OS's reason, naming the output."""
    import safetensors.torch
    from safetensors import SafetensorError

    def full(*args, **kwargs):
        raise SafetensorError("Error while serializing: I/O error: No space left on device (os error 28)")

    argv = full_average(tmp_path, trained)
    before = snapshot(tmp_path)
    monkeypatch.setattr(safetensors.torch, "save_file", full)
    result = CliRunner().invoke(app, argv)
    assert result.exit_code == 2
    assert result.stderr.startswith(f"error: cannot write {tmp_path / 'out'}: No space left on device")
    assert result.stderr.count("\n") == 1 and snapshot(tmp_path) == before


@pytest.mark.parametrize("mask", [0o022, 0o027])
def test_written_files_follow_the_umask(tmp_path, mask):
    """Weights, shortlists and exports get the permissions the umask gives, as every other
    file does (safetensors alone made its files 0o600: a service account could read the config
    but not the weights)."""
    from tiny_models import DIGITS, saved_checkpoint

    from transduce.decode.shortlist import build_shortlist
    from transduce.interop.ctranslate2 import export_ctranslate2

    before = os.umask(mask)
    try:
        saved_checkpoint(tmp_path / "ck", DIGITS, seed=0)
        pairs = [([4, 5, 6], [6, 5, 4]), ([7, 8], [8, 7])]
        build_shortlist(pairs, len(DIGITS) + 4, len(DIGITS) + 4, per_token=2, frequent=1).save(
            tmp_path / "list"
        )
        export_ctranslate2(tmp_path / "ck", tmp_path / "ct2")
    finally:
        os.umask(before)
    files = [*(tmp_path / "ck").iterdir(), tmp_path / "list", *(tmp_path / "ct2").iterdir()]
    assert tmp_path / "ck" / "model.safetensors" in files and (tmp_path / "ct2" / "model.bin") in files
    modes = {f.name: oct(stat.S_IMODE(f.stat().st_mode)) for f in files}
    assert modes == dict.fromkeys(modes, oct(0o666 & ~mask))


def test_second_trainer_on_a_locked_run_is_refused_with_the_holder(tmp_path):
    run = train_tiny(tmp_path / "r", 2)
    before = snapshot(run / "checkpoints")
    with RunLock(run):
        result = CliRunner().invoke(app, ["train", "small", *TINY, "train.steps=4", "--run-dir", str(run)])
    assert result.exit_code == 2
    assert f"is in use by process {os.getpid()}" in result.output.replace("\n", " ")
    assert snapshot(run / "checkpoints") == before


@pytest.mark.parametrize(("signum", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_sigint_saves_the_steps_trained_and_exits(tmp_path, signum, status):
    """Case 519 of the bad-input sweep, in a real process: SIGINT (or SIGTERM) once training runs
    saves the steps so far and exits with 130 (143). The child starts with SIGINT ignored, as a
    background job of a shell script does (the sweep's 'hang'): `train` stops on it all the same."""
    run = tmp_path / "r"
    command = [sys.executable, "-m", "transduce", "train", "small", *TINY, "train.steps=100000"]
    command += ["train.save_every=100000", "train.validate_every=100000", "train.log_every=1"]
    proc = subprocess.Popen(
        [*command, "--run-dir", str(run)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
    )
    try:
        for line in proc.stdout:  # step lines: the progress display writes them when not on a terminal
            if line.startswith("step 3/"):
                break
        proc.send_signal(signum)
        output, _ = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == status, output
    saved = step_checkpoints(run / "checkpoints")
    assert len(saved) == 1 and load_checkpoint(saved[0]).meta.step >= 3, output
    assert "steps so far saved in" in output.replace("\n", " ")


@pytest.mark.parametrize("ending", ["finished", "error"])
def test_train_holds_sigterm_only_while_it_trains(tmp_path, monkeypatch, ending):
    """SIGTERM saves and exits 143 while training runs; once the run is saved, it is ignored while
    the report (or the one error line) goes out, and `train` gives the caller's handler back when
    it returns. torchrun's agent stops the survivor of a lost node with SIGTERM as it exits, and the
    training handler's SystemExit inside an exit handler printed a traceback (test_train_nodes,
    once in a loaded suite)."""
    import transduce.cli.training as training

    seen = []
    report = training.report_end
    monkeypatch.setattr(
        training, "report_end", lambda *a: seen.append(signal.getsignal(signal.SIGTERM)) or report(*a)
    )
    run = tmp_path / "r"
    held = RunLock(train_tiny(run, 2)) if ending == "error" else contextlib.nullcontext()
    before = signal.getsignal(signal.SIGTERM)
    try:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        with held:  # a run in use by another process: refused once training starts, exit 2
            result = CliRunner().invoke(
                app, ["train", "small", *TINY, "train.steps=4", "--run-dir", str(run)]
            )
        assert result.exit_code == (0 if ending == "finished" else 2), result.output
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL, "train kept its SIGTERM handler"
        assert seen == ([signal.SIG_IGN] if ending == "finished" else [])
    finally:
        signal.signal(signal.SIGTERM, before)


def busy_corpus(folder: Path, pairs: int = 300_000) -> Path:
    """A corpus that keeps two workers encoding for a second or two: 2,000 lines of 5 to 12
    words, repeated."""
    folder.mkdir(parents=True)
    lines = ["".join(f"w{(i * 7 + j * 13) % 500} " for j in range(5 + i % 8)) for i in range(2000)]
    text = "".join(f"{x.strip()}\n" for x in lines)
    for name in ("train.en", "train.up"):
        (folder / name).write_text(text * (pairs // len(lines)))
    for name in ("dev.en", "dev.up"):
        (folder / name).write_text(text[:1000].rsplit("\n", 1)[0] + "\n")
    return folder


def children(pid: int) -> list[int]:
    """The processes whose parent is `pid`, read from /proc."""
    found = []
    for entry in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError):
            if int(entry.read_text().rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.parent.name))
    return found


def command_line(pid: int) -> bytes:
    """`pid`'s command line; empty once it has ended (a child listed a moment ago may have)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def running(pid: int) -> bool:
    """Whether `pid` still runs (a zombie has ended; only its parent's wait for it is missing)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def ended_within(pids: list[int], seconds: float) -> list[int]:
    """Those of `pids` still running after `seconds` (a process may still be on its way out when
    its pipes close)."""
    deadline = time.monotonic() + seconds
    while (left := [p for p in pids if running(p)]) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


def workers_encoding(proc: subprocess.Popen, folder: Path) -> list[int]:
    """Wait until `prepare` encodes into its temporary output in `folder` with two worker
    processes; its child processes then (the workers and multiprocessing's resource tracker)."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        kids = children(proc.pid)
        spawned = [k for k in kids if b"spawn_main" in command_line(k)]
        if len(spawned) == 2 and list(folder.glob(".out.tmp-*")):
            return kids
        time.sleep(0.02)
    raise AssertionError(f"prepare never encoded with two workers: {proc.communicate()}")


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads the processes from /proc")
@pytest.mark.parametrize(("signum", "status"), [(signal.SIGTERM, 143), (signal.SIGKILL, -9)])
def test_prepare_stopped_while_workers_encode_leaves_no_process_behind(tmp_path, signum, status):
    """`prepare --workers 2` stopped while its workers encode: whoever captured its output (here
    `communicate`, as `subprocess.run(capture_output=True)` does) gets the end of it within
    seconds, and no worker is left. SIGTERM is handled as Ctrl-C is (exit status 143, the
    temporary output removed); after SIGKILL, which nothing can handle, the workers see that their
    parent is gone and exit (they used to wait for work for ever, holding the pipes open)."""
    command = prepare_args(busy_corpus(tmp_path / "c"), tmp_path / "out", "--workers", "2")
    proc = subprocess.Popen(
        [sys.executable, "-m", "transduce", *command],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    kids: list[int] = []
    try:
        kids = workers_encoding(proc, tmp_path)
        proc.send_signal(signum)
        start = time.monotonic()
        _, errors = proc.communicate(timeout=60)
        took = time.monotonic() - start
    finally:
        proc.kill()
        for pid in ended_within(kids, 5):  # on a failure, nothing left running
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    assert proc.returncode == status, errors
    assert took < 30, f"the output was held open for {took:.1f} s"
    assert ended_within(kids, 5) == [], "processes of prepare's still running 5 s after its output ended"
    assert "Traceback" not in errors
    if signum == signal.SIGTERM:
        assert sorted(p.name for p in tmp_path.iterdir()) == ["c"], errors  # no temporary output


def test_resume_without_its_best_checkpoint_warns_and_chooses_a_new_best(tmp_path):
    run = train_tiny(tmp_path / "r", 2)
    checkpoints = run / "checkpoints"
    shutil.copytree(checkpoints / "ckpt-00000002", checkpoints / "ckpt-00000003")  # step 2, best 2
    shutil.rmtree(checkpoints / "ckpt-00000002")  # the best, deleted behind the run's back
    Trainer(tiny_config("train.steps=4", "train.validate_every=4"), run, show_progress=False).fit(resume=True)
    assert "the best checkpoint (step 2) is missing" in (run / "train.log").read_text()
    assert json.loads((run / "best.json").read_text()) == {"step": 4}


def test_lock_of_a_dead_process_is_taken_over(tmp_path):
    run = train_tiny(tmp_path / "r", 2)
    (run / ".lock").write_text("process 999999 on elsewhere (transduce train, since long ago)\n")
    Trainer(tiny_config("train.steps=3"), run, show_progress=False).fit(resume=True)
    assert step_checkpoints(run / "checkpoints")[-1].name == "ckpt-00000003"


def test_prepare_replaces_its_own_output_and_force_replaces_a_foreign_one(tmp_path):
    corpus = write_corpus(tmp_path / "c")
    out = tmp_path / "data"
    assert CliRunner().invoke(app, prepare_args(corpus, out)).exit_code == 0
    first = json.loads((out / "meta.json").read_text())["hash"]
    write_corpus(corpus, seed=3)
    assert CliRunner().invoke(app, prepare_args(corpus, out)).exit_code == 0
    assert json.loads((out / "meta.json").read_text())["hash"] != first
    mine = foreign_dir(tmp_path / "mine")
    assert CliRunner().invoke(app, prepare_args(corpus, mine, "--force")).exit_code == 0
    assert written_by(mine) == "prepare" and not (mine / "notes.txt").exists()


def test_empty_directory_is_a_fine_output(tmp_path):
    (tmp_path / "empty").mkdir()
    check_output_dir(tmp_path / "empty", "prepare")


def test_leftovers_of_interrupted_writes_are_removed_on_the_next_run(tmp_path):
    corpus = write_corpus(tmp_path / "c")
    dead = tmp_path / ".data.tmp-999999"
    foreign_dir(dead)
    alive = tmp_path / f".data.tmp-{os.getpid()}x"  # not our pattern: kept
    foreign_dir(alive)
    assert CliRunner().invoke(app, prepare_args(corpus, tmp_path / "data")).exit_code == 0
    assert not dead.exists() and alive.exists()
    run = train_tiny(tmp_path / "r", 2)
    stale = foreign_dir(run / "checkpoints" / ".ckpt-00000004.tmp-999999")
    Trainer(tiny_config("train.steps=3"), run, show_progress=False).fit(resume=True)
    assert not stale.exists()


def test_translate_writes_through_links_and_pipes(tmp_path, trained):
    (tmp_path / "in.txt").write_text("1 2\n3\n")
    target = tmp_path / "target.txt"
    target.write_text("old\n")
    (tmp_path / "link.txt").symlink_to(target)
    result = CliRunner().invoke(
        app, ["translate", str(trained), "-i", str(tmp_path / "in.txt"), "-o", str(tmp_path / "link.txt")]
    )
    assert result.exit_code == 0, result.output
    assert (tmp_path / "link.txt").is_symlink() and len(target.read_text().splitlines()) == 2
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    received: list[str] = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_text()))
    reader.start()
    result = CliRunner().invoke(
        app, ["translate", str(trained), "-i", str(tmp_path / "in.txt"), "-o", str(fifo)]
    )
    reader.join(timeout=60)
    assert result.exit_code == 0 and len(received[0].splitlines()) == 2
    assert fifo.is_fifo()


def transduce_writing(argv: list[str], stdout) -> subprocess.CompletedProcess:
    """The CLI in a process of its own whose standard output is `stdout` (a pipe, or a file)."""
    command = [sys.executable, "-m", "transduce", *argv]
    return subprocess.run(command, stdout=stdout, stderr=subprocess.PIPE, text=True, timeout=120)


@pytest.mark.parametrize("name", ["/dev/stdout", "/proc/self/fd/1"])
def test_translate_o_a_name_of_standard_output_writes_through_a_pipe(tmp_path, trained, name):
    (tmp_path / "in.txt").write_text("1 2\n3\n")
    argv = ["translate", str(trained), "-i", str(tmp_path / "in.txt"), "-o", name, "--greedy"]
    result = transduce_writing(argv, subprocess.PIPE)
    assert result.returncode == 0, result.stderr
    assert len(result.stdout.splitlines()) == 2, result.stdout


def test_translate_o_dev_stdout_appends_to_the_file_the_shell_opened(tmp_path, trained):
    """`-o /dev/stdout >> log`: the log keeps what it held (the file is the descriptor's to write
    to, not one to replace)."""
    (tmp_path / "in.txt").write_text("1 2\n3\n")
    log = tmp_path / "log.txt"
    log.write_text("kept\n")
    argv = ["translate", str(trained), "-i", str(tmp_path / "in.txt"), "-o", "/dev/stdout", "--greedy"]
    with log.open("a") as appended:
        result = transduce_writing(argv, appended)
    assert result.returncode == 0, result.stderr
    assert log.read_text().startswith("kept\n") and len(log.read_text().splitlines()) == 3


def test_crash_in_validation_keeps_the_training_done(tmp_path, monkeypatch):
    def broken(self):
        raise RuntimeError("validation broke")

    monkeypatch.setattr(Trainer, "validate", broken)
    trainer = Trainer(
        tiny_config("train.steps=5", "train.validate_every=3"), tmp_path / "r", show_progress=False
    )
    with pytest.raises(RuntimeError, match="validation broke"):
        trainer.fit()
    saved = step_checkpoints(tmp_path / "r" / "checkpoints")
    assert [p.name for p in saved] == ["ckpt-00000003"]
    assert load_checkpoint(saved[0], with_trainer=True).trainer["state"]["step"] == 3


def test_average_records_what_it_averaged_and_warns_when_short(tmp_path, trained):
    result = CliRunner().invoke(
        app, ["average", "--last", "5", "--run-dir", str(trained), "-o", str(tmp_path / "a")]
    )
    assert result.exit_code == 0, result.output
    # compared without white space: the console wraps at 80 columns, folding a long temporary path
    flat = "".join(result.output.split())
    assert "hasonly2checkpoints" in flat
    assert f"averaged2checkpoints(steps2,4)into{tmp_path / 'a'}" in flat
    meta = load_checkpoint(tmp_path / "a").meta
    assert [(a.checkpoint, a.step) for a in meta.averaged_from] == [
        ("ckpt-00000002", 2),
        ("ckpt-00000004", 4),
    ]
    assert meta.step == 4 and meta.metrics == {}


def test_weights_without_a_checksum_are_refused(tmp_path, trained):
    ckpt = step_checkpoints(trained / "checkpoints")[-1]
    copy = tmp_path / "ck"
    copy.mkdir()
    for f in ckpt.iterdir():
        (copy / f.name).write_bytes(f.read_bytes())
    meta = json.loads((copy / "config.json").read_text())
    del meta["checksums"]["model.safetensors"]
    (copy / "config.json").write_text(json.dumps(meta))
    result = CliRunner().invoke(app, ["translate", str(copy)], input="1 2\n")
    assert result.exit_code == 2 and "no checksum" in result.output


def test_disk_full_while_preparing_keeps_the_earlier_dataset(tmp_path, monkeypatch):
    import errno

    from transduce.data.dataset import Split

    corpus = write_corpus(tmp_path / "c")
    out = tmp_path / "data"
    assert CliRunner().invoke(app, prepare_args(corpus, out)).exit_code == 0
    before = snapshot(out)
    write_corpus(corpus, seed=2)

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(Split, "save", full)
    result = CliRunner().invoke(app, prepare_args(corpus, out))
    assert result.exit_code == 2 and "No space left on device" in result.output
    assert snapshot(out) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c", "data"]  # no temporary left


@pytest.mark.parametrize(
    ("option", "says"),
    [
        ("--vocab-size=0", "--vocab-size must be from 8"),
        ("--max-len=0", "--max-len must be >= 1"),
        ("--max-ratio=nan", "--max-ratio must be a number >= 0"),
        ("--max-ratio=-1", "--max-ratio must be a number >= 0"),
        ("--empty=drop", "--empty 'drop': allowed: skip, reject"),
        ("--vocab-sample=0", "--vocab-sample must be >= 1"),
    ],
)
def test_prepare_options_that_could_only_fail_later_are_refused(tmp_path, option, says):
    result = CliRunner().invoke(app, [*prepare_args(write_corpus(tmp_path / "c"), tmp_path / "d"), option])
    assert result.exit_code == 2 and says in result.output and "Traceback" not in result.output


def test_a_byte_order_mark_is_not_part_of_the_first_line(tmp_path):
    from transduce.data.corpus import read_lines

    (tmp_path / "bom.txt").write_bytes("\ufeffHallo Welt\nzwei\n".encode())
    assert read_lines(tmp_path / "bom.txt") == ["Hallo Welt", "zwei"]
