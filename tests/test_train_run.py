"""The run directory over a training run's life: the best checkpoint, the automatic average, the
progress display, why a run stopped, and a disk that fills while it saves."""

import errno
import io
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import torch
from rich.console import Console
from safetensors.torch import load_file
from tiny import TINY, tiny_config, train_tiny
from typer.testing import CliRunner

from transduce.cli import app
from transduce.fileio import written_by
from transduce.store.checkpoint import load_checkpoint, step_checkpoints
from transduce.train.averaging import Keeping, Kept, stable_window
from transduce.train.progress import Limit, TrainingProgress, first_limit
from transduce.train.trainer import Trainer


def scripted_validation(monkeypatch, losses: list[float], seen: list[dict] | None = None) -> None:
    """Each validation returns the next dev loss of `losses` (the model is not decoded); `seen`
    gets a copy of the weights each one validated."""
    sequence = iter(losses)

    def validate(self):
        if seen is not None:
            seen.append({k: v.detach().clone() for k, v in self.model.state_dict().items()})
        return {"step": self.state.step, "dev_loss": next(sequence), "dev_seq_acc": 0.0}

    monkeypatch.setattr(Trainer, "validate", validate)


def train_cli(run: Path, *extra: str) -> str:
    """`transduce train` of the tiny model into `run`; its whole output (it must succeed)."""
    argv = ["train", "small", *TINY, *extra, "--run-dir", str(run), "--no-progress"]
    result = CliRunner().invoke(app, argv)
    assert result.exit_code == 0, result.output
    return result.output


def test_a_missing_best_is_replaced_by_the_best_of_the_later_validations(tmp_path, monkeypatch):
    """The best checkpoint (step 2, dev loss 3.0) deleted behind the run's back: the validations
    after the resume are worse than it (4.0, then 4.5), and the better of them becomes the best."""
    run = train_tiny(tmp_path / "r", 2)
    checkpoints = run / "checkpoints"
    shutil.copytree(checkpoints / "ckpt-00000002", checkpoints / "ckpt-00000003")  # step 2, best 2
    shutil.rmtree(checkpoints / "ckpt-00000002")
    state = json.loads((checkpoints / "ckpt-00000003" / "trainer.json").read_text())["state"]
    assert state["best_step"] == 2 and state["best_value"] < 4.0  # the real best was better
    scripted_validation(monkeypatch, [4.0, 4.5])
    cfg = tiny_config("train.steps=4", "train.validate_every=1", "train.save_every=100")
    trainer = Trainer(cfg, run, show_progress=False)
    trainer.fit(resume=True)
    assert trainer.state.best_step == 3 and trainer.state.best_value == 4.0
    assert json.loads((run / "best.json").read_text()) == {"step": 3}
    assert (checkpoints / "ckpt-00000003").exists()


# ------------------------------------------------------------ the average


def kept(*points: tuple[int, float | None]) -> list[Kept]:
    return [Kept(Path(f"ckpt-{step:08d}"), step, seconds) for step, seconds in points]


def steps_of(window) -> list[int]:
    return [k.step for k in window.chosen]


def test_the_average_window_is_past_the_warmup_and_within_the_last_save_intervals():
    by_steps = Keeping(keep_last=5, average_last=3, warmup=400, save_every=100, save_every_minutes=None)
    window = stable_window(kept((300, None), (500, None), (600, None), (700, None)), by_steps)
    assert steps_of(window) == [500, 600, 700] and window.left_out == []
    window = stable_window(kept((171, 180.0), (381, 300.0)), by_steps)  # the 5-minute run
    assert steps_of(window) == [] and (window.asked, window.available) == (3, 2)
    assert window.left_out == [f"step {s} (within the warmup of 400 steps)" for s in (171, 381)]
    assert steps_of(stable_window(kept((400, None), (401, None)), by_steps)) == [401]
    window = stable_window(kept((450, None), (900, None), (1000, None)), by_steps)  # 450: a best, saved early
    assert steps_of(window) == [900, 1000] and "over 3 x train.save_every=100 steps" in window.left_out[0]
    by_time = Keeping(keep_last=5, average_last=3, warmup=10, save_every=100000, save_every_minutes=3.0)
    window = stable_window(kept((100, 60.0), (500, 600.0), (600, 840.0), (700, 1140.0)), by_time)
    assert steps_of(window) == [600, 700]  # 500 is 9 training minutes (3 intervals) before the last
    assert "over 3 x train.save_every_minutes=3 training minutes" in window.left_out[0]
    assert steps_of(stable_window(kept((500, None), (600, 840.0), (700, 1140.0)), by_time)) == [500, 600, 700]


AVERAGED = (
    "train.steps=6",
    "train.save_every=2",
    "train.keep_last=3",
    "train.average_last=3",
    "train.warmup=2",
)


def test_average_is_validated_and_kept_when_at_least_as_good_as_the_best(tmp_path, monkeypatch):
    """Checkpoints 2, 4, 6 with warmup 2: step 2 is left out; the average of 4 and 6 scores 2.9
    against the best checkpoint's 3.0 (step 6), so it is kept with its own dev scores."""
    seen: list[dict] = []
    scripted_validation(monkeypatch, [5.0, 4.0, 3.0, 2.9], seen)
    output = train_cli(tmp_path / "r", *AVERAGED, "train.validate_every=2")
    run = tmp_path / "r"
    line = f"averaged 2 checkpoints (steps 4, 6) into {run / 'averaged'}: dev loss 2.9 against 3 for the "
    line += f"best checkpoint (step 6); translate with {run / 'averaged'} (left out: step 2 (within the "
    line += "warmup of 2 steps))"
    assert line in output.splitlines(), output
    averaged = load_checkpoint(run / "averaged")
    assert [a.step for a in averaged.meta.averaged_from] == [4, 6] and averaged.meta.metrics[
        "dev_loss"
    ] == 2.9
    four, six = (load_file(run / "checkpoints" / f"ckpt-0000000{s}" / "model.safetensors") for s in (4, 6))
    assert all(
        torch.allclose(seen[-1][k], (four[k] + six[k]) / 2, atol=1e-7) for k in four
    )  # what was scored
    assert "averaged 2 checkpoints (steps 4, 6)" in (run / "train.log").read_text()


def test_average_worse_than_the_best_is_not_kept_and_an_earlier_one_is_removed(tmp_path, monkeypatch):
    """An average scoring 3.5 against the best's 3.0 is not written; the earlier average of this
    run is removed, so `translate RUN/averaged` cannot decode a stale model; the trained weights
    are back in the model after the average was validated."""
    run = tmp_path / "r"
    scripted_validation(monkeypatch, [5.0, 4.0, 3.0, 3.0])
    train_cli(run, *AVERAGED, "train.validate_every=2")
    assert written_by(run / "averaged") == "average"
    scripted_validation(monkeypatch, [2.5, 3.5])
    trainer = Trainer(
        tiny_config(*AVERAGED, "train.steps=8", "train.validate_every=2"), run, show_progress=False
    )
    trainer.fit(resume=True)
    assert not (run / "averaged").exists()
    expected = (
        f"the average of 3 checkpoints (steps 4, 6, 8) scores dev loss 3.5 against 2.5 for the best "
        f"checkpoint (step 8), so it is not kept (the earlier {run / 'averaged'} removed); translate with "
        f"{run} (its best checkpoint)"
    )
    assert trainer.outcome is not None and trainer.outcome.average == expected
    last = load_file(run / "checkpoints" / "ckpt-00000008" / "model.safetensors")
    state = trainer.model.state_dict()
    assert all(torch.equal(state[k], v) for k, v in last.items())


def test_no_checkpoint_past_the_warmup_means_no_average(tmp_path):
    """The issue's run in small: every checkpoint lies in the warmup (10 steps), none is averaged."""
    output = train_cli(tmp_path / "r", "train.steps=4", "train.save_every=2", "train.average_last=2")
    run = tmp_path / "r"
    expected = (
        f"no checkpoint to average; translate with {run} (its best checkpoint) (left out: step 2 (within "
        "the warmup of 10 steps); step 4 (within the warmup of 10 steps))"
    )
    assert expected in output.splitlines() and not (run / "averaged").exists()


def test_train_with_average_last_names_the_average_it_wrote(tmp_path, monkeypatch):
    """Moved from test_data_safety.py: the console names what it averaged into which folder, in
    one line (issue 49 item 7), past a warmup of 1 step and with equal dev scores (kept)."""
    scripted_validation(monkeypatch, [1.0, 1.0, 1.0])
    extra = ("train.steps=4", "train.save_every=2", "train.average_last=2", "train.warmup=1")
    output = train_cli(tmp_path / "t", *extra)
    assert f"averaged 2 checkpoints (steps 2, 4) into {tmp_path / 't' / 'averaged'}: " in output
    assert written_by(tmp_path / "t" / "averaged") == "average"


def test_fewer_checkpoints_than_average_last_is_one_message_of_what_was_done(tmp_path, monkeypatch):
    scripted_validation(monkeypatch, [1.0, 1.0])
    extra = (
        "train.steps=4",
        "train.save_every=4",
        "train.keep_last=5",
        "train.average_last=5",
        "train.warmup=2",
    )
    output = train_cli(tmp_path / "r", *extra)
    averaged = tmp_path / "r" / "averaged"
    expected = (
        f"averaged 1 checkpoint (step 4) into {averaged}: dev loss 1 against 1 for the best checkpoint "
        f"(step 4); translate with {averaged} (train.average_last=5, but the run has 1)"
    )
    assert expected in output.splitlines(), output
    assert "warning" not in output and "the average of the last" not in output


# --------------------------------------------------------- progress, stops


def test_progress_counts_the_limit_that_ends_the_run_first():
    assert first_limit(0, 100000, 0.0, 2.0) is Limit.STEPS
    assert first_limit(10, 100000, 60.0, 2.0) is Limit.MINUTES  # half the time, 0.01% of the steps
    assert first_limit(90000, 100000, 60.0, 2.0) is Limit.STEPS
    assert first_limit(10, 100000, 60.0, None) is Limit.STEPS
    with TrainingProgress(Console(file=io.StringIO()), True, 100000, 2.0) as progress:
        progress.advance(10, 60.0)
        (task,) = progress.progress.tasks
        assert (task.total, task.completed) == (2.0, 1.0)  # minutes; the ETA follows them
        assert progress.count(10, 60.0) == "step 10, 1/2 min"
        progress.advance(90000, 60.0)
        assert (task.total, task.completed) == (100000, 90000)


def step_lines(out: io.StringIO) -> list[str]:
    """The progress lines of a console that is not a terminal (the bar's last state follows them)."""
    return [line for line in out.getvalue().splitlines() if line.startswith("step ")]


def test_plain_progress_lines_say_the_time_elapsed_and_the_eta_at_this_process_pace():
    """Off a terminal, a step-bound run's lines carry wall-clock time since the loop started here
    and the time left at that pace, each on one line however long; a resumed run (from step 50)
    counts only its own steps."""
    out, times = io.StringIO(), iter([100.0, 130.0, 190.0, 4000.0])
    wide = "loss 1" + " tok/s" * 20  # wider than the console's 80 columns
    with TrainingProgress(Console(file=out), True, 100, None, now=lambda: next(times)) as progress:
        progress.advance(0, 0.0)
        progress.stats(25, 20.0, "loss 2")  # 30 s for 25 steps: 75 left take 90 s
        progress.stats(50, 40.0, wide)
    assert step_lines(out) == [
        "step 25/100, 0:30 elapsed, ETA 1:30: loss 2",
        f"step 50/100, 1:30 elapsed, ETA 1:30: {wide}",
    ]
    out, times = io.StringIO(), iter([0.0, 20.0, 3700.0])
    with TrainingProgress(Console(file=out), True, 100, None, now=lambda: next(times)) as progress:
        progress.advance(50, 600.0)
        progress.stats(60, 610.0, "loss 1")  # 2 s a step here, whatever the first run's pace
        progress.stats(60, 610.0, "loss 1")
    assert step_lines(out) == [
        "step 60/100, 0:20 elapsed, ETA 1:20: loss 1",
        "step 60/100, 1:01:40 elapsed, ETA 4:06:40: loss 1",  # 370 s a step now
    ]


def test_the_time_limit_shows_as_minutes_in_the_progress_lines(tmp_path):
    """train.max_minutes=0.05 ends the run long before train.steps=100000: every progress line
    counts minutes, none counts towards 100000 steps."""
    out = io.StringIO()
    cfg = tiny_config(
        "train.steps=100000", "train.save_every=100000", "train.max_minutes=0.05", "train.log_every=1"
    )
    Trainer(cfg, tmp_path / "r", console=Console(file=out)).fit()
    lines = [line for line in out.getvalue().splitlines() if line.startswith("step ") and "tok/s" in line]
    assert len(lines) > 1 and all("/0.05 min: loss" in line for line in lines), lines
    assert "/100000" not in out.getvalue()


def test_the_console_says_why_training_stopped(tmp_path, monkeypatch):
    output = train_cli(tmp_path / "steps", "train.steps=2")
    assert "finished at step 2 (train.steps=2 reached); checkpoints in" in output
    output = train_cli(tmp_path / "time", "train.steps=100000", "train.max_minutes=0.002")
    assert "(train.max_minutes=0.002 of training time reached); checkpoints in" in output
    scripted_validation(monkeypatch, [5.0, 6.0, 7.0])
    output = train_cli(tmp_path / "early", "train.steps=50", "train.validate_every=1", "train.patience=2")
    expected = "stopped early after 2 validations without a better dev loss (the best at step 1)"
    assert f"finished at step 3 ({expected})" in output


def test_rerunning_a_finished_run_says_so_and_averages_nothing(tmp_path, monkeypatch):
    run = tmp_path / "r"
    extra = ("train.steps=4", "train.save_every=2", "train.average_last=2", "train.warmup=1")
    scripted_validation(monkeypatch, [1.0, 1.0, 1.0])
    train_cli(run, *extra)
    written = (run / "averaged" / "config.json").stat().st_mtime_ns
    output = train_cli(run, *extra)
    expected = f"{run} had already finished at step 4: train.steps=4 already reached; nothing to train"
    assert output.strip().splitlines() == [f"{expected} (raise it to go on)"], output
    assert (run / "averaged" / "config.json").stat().st_mtime_ns == written


# ------------------------------------------------------------ a full disk


def full_disk() -> None:
    """In the child before it starts: no file may grow past 20 kB (the tiny model's weights are
    90 kB), as on a disk that is full; the signal would kill it instead of failing the write."""
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (20_000, 20_000))


def test_a_full_disk_while_saving_is_one_error_line_and_the_earlier_checkpoint_is_intact(tmp_path):
    """Every write of train.log fails too (it is /dev/full): one `error:` line naming the
    checkpoint, no traceback, no second attempt at the save on the way out."""
    run = train_tiny(tmp_path / "r", 2)
    (run / "train.log").unlink()
    (run / "train.log").symlink_to("/dev/full")
    command = [
        sys.executable,
        "-m",
        "transduce",
        "train",
        "small",
        *TINY,
        "train.steps=4",
        "train.save_every=2",
    ]
    result = subprocess.run(
        [*command, "--run-dir", str(run), "--no-progress"],
        capture_output=True,
        text=True,
        preexec_fn=full_disk,
        timeout=300,
    )
    assert result.returncode == 2, result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and f"cannot write {run / 'checkpoints' / 'ckpt-00000004'}: " in errors[0], (
        result.stderr
    )
    assert "Traceback" not in result.stderr and "could not save" not in result.stderr
    assert [p.name for p in step_checkpoints(run / "checkpoints")] == ["ckpt-00000002"]
    assert load_checkpoint(run / "checkpoints" / "ckpt-00000002", with_trainer=True).meta.step == 2


def test_run_logger_survives_a_full_disk(tmp_path, capsys, monkeypatch):
    """train.log on /dev/full (every write: no space left on device) and TensorBoard files that
    cannot be written: one warning for each, no error (the run's own error, if any, is the one)."""
    from torch.utils.tensorboard import SummaryWriter

    from transduce.train.log import RunLogger

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(SummaryWriter, "add_scalar", full)
    (tmp_path / "train.log").symlink_to("/dev/full")
    logger = RunLogger(tmp_path, True)
    for step in (1, 2):
        logger.scalars(step, {"loss": 1.0})
        logger.text("a line")
    logger.close()
    err = capsys.readouterr().err
    assert err.count(f"warning: cannot write {tmp_path / 'train.log'}: No space left on device") == 1, err
    assert err.count(f"warning: cannot write the TensorBoard files in {tmp_path / 'tb'}: No space") == 1, err
