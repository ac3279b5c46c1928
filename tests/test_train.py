"""Training: schedule, label smoothing, learning, exact resume, averaging, DDP, damaged checkpoints."""

import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from ports import free_port
from safetensors.torch import load_file
from tiny import TINY, tiny_config

from transduce.config import ConfigError, load_config
from transduce.data.vocab import PAD
from transduce.store.average import average_checkpoints
from transduce.store.checkpoint import CheckpointError, load_checkpoint, step_checkpoints
from transduce.train import step as step_mod
from transduce.train.loss import label_smoothed_loss
from transduce.train.schedule import inverse_sqrt_lr
from transduce.train.trainer import Trainer, TrainingError


def test_schedule_matches_formula():
    d, warmup, scale = 512, 4000, 1.0
    for step in (1, warmup, 10 * warmup):
        expected = scale * d**-0.5 * min(step**-0.5, step * warmup**-1.5)
        assert inverse_sqrt_lr(step, d, warmup, scale) == pytest.approx(expected, rel=1e-12)
    assert inverse_sqrt_lr(warmup, d, warmup) > inverse_sqrt_lr(warmup - 1, d, warmup)
    assert inverse_sqrt_lr(warmup, d, warmup) > inverse_sqrt_lr(warmup + 1, d, warmup)


def test_label_smoothing_equals_explicit_distribution():
    torch.manual_seed(1)
    vocab, eps, pad = 7, 0.1, 0
    logits = torch.randn(2, 3, vocab)
    target = torch.tensor([[3, 5, 0], [1, 2, 6]])
    smoothed, nll = label_smoothed_loss(logits, target, eps, pad)
    expected_smoothed = expected_nll = 0.0
    for b in range(2):
        for t in range(3):
            if target[b, t] == pad:
                continue
            q = torch.full((vocab,), eps / vocab)
            q[target[b, t]] += 1 - eps
            logp = torch.log_softmax(logits[b, t], -1)
            expected_smoothed += float(-(q * logp).sum())
            expected_nll += float(-logp[target[b, t]])
    assert smoothed.item() == pytest.approx(expected_smoothed, rel=1e-5)
    assert nll.item() == pytest.approx(expected_nll, rel=1e-5)


def test_label_smoothing_gradient_matches_pytorch_cross_entropy():
    torch.manual_seed(2)
    vocab, eps, pad = 11, 0.1, 0
    target = torch.randint(1, vocab, (3, 5))
    target[0, 3:] = pad
    ours = torch.randn(3, 5, vocab, requires_grad=True)
    reference = ours.detach().clone().requires_grad_(True)
    smoothed, nll = label_smoothed_loss(ours, target, eps, pad)
    assert not nll.requires_grad
    (0.5 * smoothed).backward()  # an upstream gradient other than 1 (loss normalisation)
    reference_loss = torch.nn.functional.cross_entropy(
        reference.reshape(-1, vocab),
        target.reshape(-1),
        ignore_index=pad,
        label_smoothing=eps,
        reduction="sum",
    )
    (0.5 * reference_loss).backward()
    assert smoothed.item() == pytest.approx(reference_loss.item(), rel=1e-6)
    assert torch.allclose(ours.grad, reference.grad, atol=1e-6)
    assert ours.grad[target.eq(pad)].abs().max() == 0


def test_small_model_learns_copy(tmp_path):
    """600 updates on one thread: dev sequences are 1.00 from 400 to 700 updates (0.685 at 300);
    with train.seed 2 and 3 they are 1.00 at 600, with two threads 1.00 from 500. Two threads took
    this test from 60 s to 13 minutes on a loaded 2-core machine, and gain a model this small
    nothing."""
    cfg = load_config(
        "small",
        [
            "model.d_model=64",
            "model.heads=4",
            "model.d_ff=256",
            "model.encoder_layers=2",
            "model.decoder_layers=2",
            "model.dropout=0",
            "data.task=copy",
            "data.task_train_max_len=6",
            "data.task_test_max_len=8",
            "data.task_train_size=4000",
            "data.task_eval_size=200",
            "data.max_tokens=1024",
            "train.steps=600",
            "train.warmup=100",
            "train.lr_scale=0.5",
            "train.validate_every=600",
            "train.save_every=600",
            "train.threads=1",
        ],
    )
    metrics = Trainer(cfg, tmp_path / "run", show_progress=False).fit()
    assert metrics["dev_seq_acc"] >= 0.99, metrics


def _weights(run: Path) -> dict[str, torch.Tensor]:
    return load_file(str(step_checkpoints(run / "checkpoints")[-1] / "model.safetensors"))


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_resume_gives_identical_parameters(tmp_path, monkeypatch, precision):
    counted = []  # target tokens of every batch trained on, counted from the batches themselves
    real = Trainer.train_step

    def counting(self, batches):
        counted.append(sum(int(b.tgt_out.ne(PAD).sum()) for b in batches))
        return real(self, batches)

    monkeypatch.setattr(Trainer, "train_step", counting)
    straight = tiny_config("train.steps=12", "train.save_every=6", f"train.precision={precision}")
    first = Trainer(straight, tmp_path / "a", show_progress=False)
    first.fit()
    assert first.state.tokens == sum(counted) > 0
    half = tiny_config("train.steps=6", "train.save_every=6", f"train.precision={precision}")
    Trainer(half, tmp_path / "b", show_progress=False).fit()
    resumed = Trainer(straight, tmp_path / "b", show_progress=False)
    resumed.fit(resume=True)
    assert resumed.state.step == 12
    assert resumed.state.tokens == first.state.tokens  # counted across the resume
    a, b = _weights(tmp_path / "a"), _weights(tmp_path / "b")
    assert a.keys() == b.keys()
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_corrupt_checkpoint_reported_and_resume_falls_back(tmp_path, capsys):
    cfg = tiny_config("train.steps=4", "train.save_every=2")
    Trainer(cfg, tmp_path / "r", show_progress=False).fit()
    _, last = step_checkpoints(tmp_path / "r" / "checkpoints")
    weights = last / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    with pytest.raises(CheckpointError, match="corrupt or truncated"):
        load_checkpoint(last, with_trainer=True)
    again = Trainer(tiny_config("train.steps=4", "train.save_every=2"), tmp_path / "r", show_progress=False)
    assert again.resume()
    assert again.state.step == 2
    assert "skipping damaged checkpoint" in capsys.readouterr().err  # even without a progress display


def test_averaging_copies_and_means(tmp_path):
    cfg = tiny_config("train.steps=4", "train.save_every=2", "train.keep_last=5")
    Trainer(cfg, tmp_path / "r", show_progress=False).fit()
    first, second = step_checkpoints(tmp_path / "r" / "checkpoints")
    same = average_checkpoints([first, first, first])
    one = load_checkpoint(first).weights
    assert all(torch.allclose(same.weights[k], one[k], atol=1e-7) for k in one)
    mean = average_checkpoints([first, second])
    two = load_checkpoint(second).weights
    assert all(torch.allclose(mean.weights[k], (one[k] + two[k]) / 2, atol=1e-7) for k in one)
    Trainer(
        tiny_config("train.steps=2", "train.save_every=2", "model.d_ff=32"),
        tmp_path / "other",
        show_progress=False,
    ).fit()
    with pytest.raises(CheckpointError, match="different architectures"):
        average_checkpoints([first, step_checkpoints(tmp_path / "other" / "checkpoints")[0]])


def test_average_last_writes_the_mean_of_the_last_checkpoints_at_the_end(tmp_path, monkeypatch):
    """Past a warmup of 2 steps, and with every validation scoring the same, so the average is
    as good as the best checkpoint and kept (test_train_run.py tests what is left out or refused)."""
    monkeypatch.setattr(Trainer, "validate", lambda self: {"step": self.state.step, "dev_loss": 1.0})
    overrides = ("train.save_every=2", "train.keep_last=2", "train.average_last=2", "train.warmup=2")
    Trainer(tiny_config("train.steps=6", *overrides), tmp_path / "r", show_progress=False).fit()
    kept = step_checkpoints(tmp_path / "r" / "checkpoints")
    assert [p.name for p in kept] == ["ckpt-00000004", "ckpt-00000006"]
    older, newer = (load_file(p / "model.safetensors") for p in kept)
    averaged = load_file(tmp_path / "r" / "averaged" / "model.safetensors")
    assert averaged.keys() == newer.keys()
    assert all(torch.allclose(averaged[k], (older[k] + newer[k]) / 2, atol=1e-7) for k in newer)
    assert [a.step for a in load_checkpoint(tmp_path / "r" / "averaged").meta.averaged_from] == [4, 6]
    assert "averaged 2 checkpoints (steps 4, 6) into" in (tmp_path / "r" / "train.log").read_text()
    resumed = tiny_config("train.steps=8", *overrides)
    Trainer(resumed, tmp_path / "r", show_progress=False).fit(resume=True)  # a longer run replaces it
    assert [a.step for a in load_checkpoint(tmp_path / "r" / "averaged").meta.averaged_from] == [6, 8]


def test_average_last_never_replaces_a_directory_it_did_not_write(tmp_path):
    (tmp_path / "r" / "averaged").mkdir(parents=True)
    (tmp_path / "r" / "averaged" / "notes.txt").write_text("mine")
    cfg = tiny_config("train.steps=2", "train.save_every=2", "train.average_last=1")
    with pytest.raises(TrainingError, match="which `transduce average` did not write"):
        Trainer(cfg, tmp_path / "r", show_progress=False).fit()
    assert (tmp_path / "r" / "averaged" / "notes.txt").read_text() == "mine"
    assert not step_checkpoints(tmp_path / "r" / "checkpoints")  # refused before training


def test_non_finite_losses_are_skipped_then_stop(tmp_path, monkeypatch):
    real = step_mod.label_smoothed_loss

    def poisoned(*args, **kwargs):
        loss, nll = real(*args, **kwargs)
        return loss * math.nan, nll

    monkeypatch.setattr(step_mod, "label_smoothed_loss", poisoned)
    trainer = Trainer(
        tiny_config("train.steps=10", "train.max_bad_steps=3"), tmp_path / "r", show_progress=False
    )
    before = {k: v.clone() for k, v in trainer.model.state_dict().items()}
    with pytest.raises(TrainingError, match="3 non-finite losses in a row"):
        trainer.fit()
    assert trainer.state.step == 0 and trainer.state.skipped == 3
    assert all(torch.equal(before[k], v) for k, v in trainer.model.state_dict().items())


def test_ddp_two_processes_equal_one_process_with_same_global_batch(tmp_path):
    common = [*TINY, "model.dropout=0", "train.steps=3", "train.save_every=3", "train.threads=1"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    single = subprocess.run(
        [
            sys.executable,
            "-m",
            "transduce",
            "train",
            "small",
            *common,
            "train.accumulate=2",
            "--run-dir",
            str(tmp_path / "one"),
            "--no-progress",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert single.returncode == 0, single.stderr[-2000:]
    multi = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--nproc_per_node",
            "2",
            "--master_port",
            str(free_port()),
            "-m",
            "transduce",
            "train",
            "small",
            *common,
            "--run-dir",
            str(tmp_path / "two"),
            "--no-progress",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert multi.returncode == 0, multi.stderr[-2000:]
    a, b = _weights(tmp_path / "one"), _weights(tmp_path / "two")
    assert max(float((a[k] - b[k]).abs().max()) for k in a) < 1e-5


def test_training_on_prepared_text_reports_bleu_and_translates(tmp_path):
    from typer.testing import CliRunner

    from transduce.cli import app
    from transduce.data.prepare import PrepareOptions, prepare_text

    words = ["the", "cat", "sat", "on", "a", "mat", "and", "dog", "ran", "far", "away"]
    rng = torch.Generator().manual_seed(0)
    for split, size in (("train", 200), ("dev", 12)):
        lines = [
            " ".join(words[int(i)] for i in torch.randint(0, len(words), (int(n),), generator=rng))
            for n in torch.randint(2, 8, (size,), generator=rng)
        ]
        (tmp_path / f"{split}.en").write_text("\n".join(lines) + "\n")
        (tmp_path / f"{split}.up").write_text("\n".join(line.upper() for line in lines) + "\n")
    prepare_text(tmp_path, tmp_path / "data", PrepareOptions("en", "up", vocab_size=300), show_progress=False)
    cfg = load_config(
        "small",
        [
            *TINY[:5],
            "data.task=null",
            f"data.dataset={tmp_path / 'data'}",
            "data.max_tokens=300",
            "train.steps=6",
            "train.save_every=6",
            "train.warmup=3",
        ],
    )
    metrics = Trainer(cfg, tmp_path / "run", show_progress=False).fit()
    assert {"dev_bleu", "dev_chrf", "dev_loss"} <= metrics.keys()
    assert 0.0 <= metrics["dev_bleu"] <= 100.0
    result = CliRunner().invoke(
        app, ["translate", str(tmp_path / "run"), "--greedy"], input="the cat\n\nran far\n"
    )
    assert result.exit_code == 0, result.output
    assert len(result.stdout.split("\n")) == 4  # three lines plus the final newline
    scored = CliRunner().invoke(
        app,
        [
            "evaluate",
            str(tmp_path / "run"),
            "--src",
            str(tmp_path / "dev.en"),
            "--ref",
            str(tmp_path / "dev.up"),
            "--greedy",
        ],
    )
    assert scored.exit_code == 0, scored.output
    assert "BLEU" in scored.stdout and "nrefs:1" in scored.stdout and "perplexity" in scored.stdout


def test_wall_clock_budget_stops_saves_and_validates(tmp_path):
    cfg = tiny_config("train.steps=100000", "train.save_every=100000", "train.max_minutes=0.002")
    metrics = Trainer(cfg, tmp_path / "run", show_progress=False).fit()
    steps = step_checkpoints(tmp_path / "run" / "checkpoints")
    assert len(steps) == 1 and 0 < metrics["step"] < 100000
    assert metrics["train_minutes"] >= 0.002 and "dev_seq_acc" in metrics
    log = (tmp_path / "run" / "train.log").read_text()
    assert "train.max_minutes=0.002 of training time reached" in log
    resumed = Trainer(cfg, tmp_path / "run", show_progress=False).fit(resume=True)
    assert resumed["step"] == metrics["step"]  # the budget is spent: no step, no new checkpoint
    assert step_checkpoints(tmp_path / "run" / "checkpoints") == steps
    assert "already spent; nothing to train" in (tmp_path / "run" / "train.log").read_text()


def test_validation_by_training_minutes(tmp_path):
    cfg = tiny_config("train.steps=6", "train.save_every=6", "train.validate_every_minutes=0.00001")
    trainer = Trainer(cfg, tmp_path / "run", show_progress=False)
    trainer.fit()
    minutes = [h["train_minutes"] for h in trainer.state.history]
    assert len(minutes) == 6 and minutes == sorted(minutes)  # every step, in training time


def test_bf16_autocast_step_tracks_fp32(tmp_path):
    """train.precision=bf16 on the CPU: same first-step loss as fp32 to bf16 accuracy, weights stay fp32."""
    from transduce.data.batching import collate

    stats, trainers = {}, {}
    for precision in ("fp32", "bf16"):
        trainer = Trainer(
            tiny_config(f"train.precision={precision}"), tmp_path / precision, show_progress=False
        )
        batch = collate(trainer.train_split, next(iter(trainer.sampler)))
        stats[precision], trainers[precision] = trainer.train_step([batch]), trainer
    assert stats["bf16"] is not None and math.isfinite(stats["bf16"].loss)
    assert stats["bf16"].loss == pytest.approx(stats["fp32"].loss, rel=2e-2)
    assert stats["bf16"].loss != stats["fp32"].loss  # autocast really ran in bf16
    assert all(p.dtype == torch.float32 for p in trainers["bf16"].model.parameters())


def test_learned_positions_shorter_than_the_data_are_refused_before_training(tmp_path):
    from transduce.config import ConfigError

    cfg = tiny_config("model.positions=learned", "model.max_positions=8")  # copy data reach 7 + EOS/BOS
    with pytest.raises(ConfigError, match="has sequences of 9 positions"):
        Trainer(cfg, tmp_path / "r", show_progress=False)


@pytest.mark.parametrize(
    ("metric", "values", "best", "stop"),
    [
        ("loss", [5.0, 4.0, 4.5, 4.2, 4.0, 3.0], 2, 5),  # equal is not better
        ("seq_acc", [0.1, 0.3, 0.2, 0.5, 0.4, 0.45, 0.5, 0.9], 4, 7),
    ],
)
def test_early_stopping_on_a_synthetic_metric_sequence(tmp_path, monkeypatch, metric, values, best, stop):
    """Validation at every step returns the next value; patience 3 stops 3 validations after the
    best, whose checkpoint is kept (saved although save_every is far away) and named in best.json."""
    sequence = iter(values)

    def validate(self):
        return {"step": self.state.step, "dev_loss": 9.0, "dev_seq_acc": 0.0, f"dev_{metric}": next(sequence)}

    monkeypatch.setattr(Trainer, "validate", validate)
    cfg = tiny_config(
        "train.steps=50",
        "train.validate_every=1",
        "train.save_every=1000",
        "train.patience=3",
        f"train.best_metric={metric}",
    )
    trainer = Trainer(cfg, tmp_path / "r", show_progress=False)
    trainer.fit()
    assert trainer.state.step == stop
    assert trainer.state.best_step == best and trainer.state.best_value == values[best - 1]
    steps = [int(p.name.split("-")[1]) for p in step_checkpoints(tmp_path / "r" / "checkpoints")]
    assert best in steps and stop in steps
    assert f'"step": {best}' in (tmp_path / "r" / "best.json").read_text()
    again = Trainer(cfg, tmp_path / "r", show_progress=False)
    again.fit(resume=True)  # nothing left to train: already stopped
    assert again.state.step == stop
    assert "stopped early" in (tmp_path / "r" / "train.log").read_text()


def test_a_best_metric_the_data_does_not_have_is_refused(tmp_path):
    with pytest.raises(ConfigError, match=r"train\.best_metric='bleu' is not computed on task data"):
        Trainer(tiny_config("train.best_metric=bleu"), tmp_path / "r", show_progress=False)


def test_fp16_overflow_lowers_the_loss_scale_and_is_not_a_bad_step(tmp_path):
    """train.precision=fp16 with a loss scale far too high: the first updates overflow and are
    skipped while the scale halves, then training goes on (max_bad_steps=1 would stop it at the
    first non-finite loss)."""
    cfg = tiny_config("train.precision=fp16", "train.steps=3", "train.save_every=3", "train.max_bad_steps=1")
    trainer = Trainer(cfg, tmp_path / "r", show_progress=False)
    trainer.scaler = torch.amp.GradScaler(trainer.device.type, init_scale=2.0**40)
    trainer.fit()
    assert trainer.state.step == 3 and trainer.state.skipped >= 1 and trainer.state.bad_in_row == 0
    assert trainer.scaler.get_scale() <= 2.0**39
    saved = load_checkpoint(step_checkpoints(tmp_path / "r" / "checkpoints")[-1], with_trainer=True)
    assert saved.trainer is not None and saved.trainer["scaler"]["scale"] == trainer.scaler.get_scale()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("chunk_elements", [11, 40, 10_000])  # one row, several rows, all rows at once
def test_chunked_label_smoothing_matches_pytorch_cross_entropy(dtype, chunk_elements):
    """Loss and gradient of the chunked loss against autograd through PyTorch's own label-smoothed
    cross entropy on the same logits in fp32, whatever the chunking, in fp32 and bf16."""
    torch.manual_seed(3)
    vocab, eps, pad = 11, 0.1, 0
    target = torch.randint(1, vocab, (4, 6))
    target[1, 2:] = pad
    logits = torch.randn(4, 6, vocab).to(dtype)
    ours = logits.clone().requires_grad_(True)
    reference = logits.float().requires_grad_(True)
    smoothed, nll = label_smoothed_loss(ours, target, eps, pad, chunk_elements=chunk_elements)
    (0.25 * smoothed).backward()
    flat_logits, flat_target = reference.reshape(-1, vocab), target.reshape(-1)
    loss_kw = {"ignore_index": pad, "reduction": "sum"}
    expected = torch.nn.functional.cross_entropy(flat_logits, flat_target, label_smoothing=eps, **loss_kw)
    (0.25 * expected).backward()
    expected_nll = torch.nn.functional.cross_entropy(flat_logits.detach(), flat_target, **loss_kw)
    assert smoothed.dtype == nll.dtype == torch.float32
    assert smoothed.item() == pytest.approx(expected.item(), rel=1e-6)
    assert nll.item() == pytest.approx(expected_nll.item(), rel=1e-6)
    assert ours.grad.dtype == dtype
    tolerance = 1e-6 if dtype == torch.float32 else 4e-3  # bf16 keeps 8 bits of the gradient
    assert torch.allclose(ours.grad.float(), reference.grad, atol=tolerance, rtol=tolerance)
    assert ours.grad[target.eq(pad)].abs().max() == 0


def test_chunked_label_smoothing_never_holds_all_log_probabilities():
    """The fp32 log-softmax runs on at most `chunk_elements` logits at a time, and the loss can
    be backpropagated once only (its gradient is scaled in place)."""
    sizes: list[int] = []

    class Recorder(torch.overrides.TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            if func in (torch.Tensor.log_softmax, torch.log_softmax):
                sizes.append(args[0].numel())
            return func(*args, **(kwargs or {}))

    logits = torch.randn(3, 50, 16, requires_grad=True)
    target = torch.randint(1, 16, (3, 50))
    with Recorder():
        loss, _ = label_smoothed_loss(logits, target, 0.1, PAD, chunk_elements=16 * 7)
    assert sizes and max(sizes) <= 16 * 7 and sum(sizes) == logits.numel()
    loss.backward(retain_graph=True)
    with pytest.raises(RuntimeError, match="once"):
        loss.backward()


def test_label_smoothing_without_gradient_keeps_no_gradient_buffer():
    """Validation (no autograd) takes the same values and allocates no (tokens, V) gradient."""
    torch.manual_seed(4)
    logits, target = torch.randn(2, 5, 9, requires_grad=True), torch.randint(1, 9, (2, 5))
    allocated: list[tuple[int, ...]] = []

    class Recorder(torch.overrides.TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            if func is torch.empty_like:
                allocated.append(tuple(args[0].shape))
            return func(*args, **(kwargs or {}))

    with torch.no_grad(), Recorder():
        loss, _ = label_smoothed_loss(logits, target, 0.1, PAD, chunk_elements=9)
    assert allocated == []
    expected = torch.nn.functional.cross_entropy(
        logits.reshape(-1, 9), target.reshape(-1), label_smoothing=0.1, reduction="sum"
    )
    assert loss.item() == pytest.approx(expected.item(), rel=1e-6)
    assert not loss.requires_grad
