"""The training step without host synchronisation (issue 47): the same updates as the loop that read
the loss and gradient norm back at every step, no read-back inside a step, batches prepared ahead
in the same order (resume included), batches padded to few shapes, torch.compile, and bf16 weights
with fp32 master weights."""

from __future__ import annotations

import contextlib
import copy
import math
import threading
from pathlib import Path

import pytest
import torch
from tiny import tiny_config

from transduce.config import Config
from transduce.data.batching import Batch, collate
from transduce.model.ponder import ponder_loss
from transduce.store.checkpoint import load_checkpoint, step_checkpoints
from transduce.train.batches import steps_ahead
from transduce.train.counters import StepCounters
from transduce.train.loss import label_smoothed_loss
from transduce.train.master import MasterWeights
from transduce.train.objective import IGNORE
from transduce.train.step import Skipped, StepStats
from transduce.train.trainer import Trainer


class OldStep:
    """The step as it was before issue 47 (one process), copied as the independent computation:
    the loss and gradient norm read back on the host, a non-finite one skipped there, the learning
    rate a Python float of the host's step count. Its Adam is the fused one the old loop used on
    CUDA: with the unfused one, float32 round-off in the weights after one step turns the key
    projection's bias gradients (zero but for round-off: softmax ignores a shift shared by all keys)
    into different Adam updates of the size of the rate, so no tolerance could compare them."""

    def __init__(self, trainer: Trainer, cfg: Config) -> None:
        self.model = copy.deepcopy(trainer.model)
        self.objective, self.smoothing, self.act_tau = (
            trainer.objective,
            cfg.train.label_smoothing,
            cfg.model.act_tau,
        )
        t = cfg.train
        self.optimizer = torch.optim.Adam(
            self.model.parameters(),
            lr=0.0,
            betas=t.adam_betas,
            eps=t.adam_eps,
            weight_decay=t.weight_decay,
            fused=True,
        )
        self.d_model, self.warmup, self.scale = cfg.model.d_model, t.warmup, t.lr_scale
        self.step = 0

    def lr(self, step: int) -> float:
        step = max(step, 1)
        return self.scale * self.d_model**-0.5 * min(step**-0.5, step * self.warmup**-1.5)

    def __call__(self, batches: list[Batch]) -> StepStats | Skipped:
        targets = [self.objective.targets(b) for b in batches]
        total = float(sum(int(t.ne(IGNORE).sum()) for t in targets))
        self.optimizer.zero_grad(set_to_none=True)
        sums = torch.zeros(2)
        for b, target in zip(batches, targets, strict=True):
            out = self.objective.forward(self.model, b)
            loss, nll = label_smoothed_loss(out.logits, target, self.smoothing, IGNORE)
            objective = loss * (1 / total)
            ponder = ponder_loss(out.ponder, self.act_tau)
            if ponder is not None:
                objective = objective + ponder / len(batches)
            objective.backward()
            sums += torch.stack([loss.detach(), nll])
        norm = float(torch.nn.utils.clip_grad_norm_(self.model.parameters(), math.inf))
        if not (math.isfinite(float(sums[0])) and math.isfinite(norm)):
            self.optimizer.zero_grad(set_to_none=True)
            return Skipped.NON_FINITE
        for group in self.optimizer.param_groups:
            group["lr"] = self.lr(self.step + 1)
        self.optimizer.step()
        self.step += 1
        return StepStats(float(sums[0]) / total, float(sums[1]) / total, int(total), norm)


@contextlib.contextmanager
def infinite_gradient(model: torch.nn.Module):
    """A finite loss whose gradient is not: one weight's gradient turned to inf in the backward pass."""
    weight = next(p for name, p in model.named_parameters() if name.endswith("weight") and p.dim() == 2)
    handle = weight.register_hook(lambda g: g * math.inf)
    try:
        yield
    finally:
        handle.remove()


def test_the_device_step_makes_the_old_loops_updates_step_by_step(tmp_path):
    """Weights after every step against the old loop's, on the same batches with the same dropout
    masks, through a step with an infinite gradient in the middle: that step changes nothing
    (bit for bit) and does not advance the schedule, which a wrong rate after it would show."""
    cfg = tiny_config("train.lr_scale=2", "train.warmup=6", "model.dropout=0.1")
    trainer = Trainer(cfg, tmp_path / "r", show_progress=False)
    old = OldStep(trainer, cfg)
    stream = iter(trainer.sampler)
    for step in range(10):
        batches = [collate(trainer.train_split, next(stream)) for _ in range(2)]
        before = {k: v.clone() for k, v in trainer.model.state_dict().items()}
        rng = torch.get_rng_state()
        plant = step == 4
        with infinite_gradient(trainer.model) if plant else contextlib.nullcontext():
            new = trainer.train_step(batches)
        torch.set_rng_state(rng)
        with infinite_gradient(old.model) if plant else contextlib.nullcontext():
            want = old(batches)
        if plant:
            assert new is Skipped.NON_FINITE and want is Skipped.NON_FINITE
            assert all(torch.equal(before[k], v) for k, v in trainer.model.state_dict().items())
            assert trainer.state.skipped == 1 and trainer.state.bad_in_row == 1
            continue
        assert isinstance(new, StepStats) and isinstance(want, StepStats)
        assert new.loss == pytest.approx(want.loss, rel=1e-5) and new.tokens == want.tokens
        assert new.grad_norm == pytest.approx(want.grad_norm, rel=1e-4)
        moved = max(float((before[k] - v).abs().max()) for k, v in trainer.model.state_dict().items())
        assert moved > 1e-3  # so that a rate one step off (>= 10% here) would exceed the tolerance
        ours, theirs = trainer.model.state_dict(), old.model.state_dict()
        assert all(torch.equal(ours[k], theirs[k]) for k in ours), step  # bit for bit
    assert trainer.state.step == old.step == 9 and trainer.state.bad_in_row == 0


SYNCS = ("item", "tolist", "__float__", "__bool__", "__int__")


@pytest.mark.parametrize(
    "settings",
    [
        ("train.precision=fp32", "train.clip_norm=1.0"),
        ("train.precision=fp16", "train.accumulate=2"),
        ("train.precision=bf16", "train.master_weights=true"),
    ],
)
def test_no_step_reads_a_tensor_back(tmp_path, monkeypatch, settings):
    """Every way a tensor reaches the host (item, tolist, float, bool, int) counted while the loop's
    steps run: none; the counters are read back once per train.log_every steps (and at the end)."""
    calls: list[str] = []
    inside = threading.local()
    main = threading.get_ident()
    for name in SYNCS:
        real = getattr(torch.Tensor, name)

        def counted(self, *args, _real=real, _name=name, **kwargs):
            if getattr(inside, "step", False) and threading.get_ident() == main:
                calls.append(_name)
            return _real(self, *args, **kwargs)

        monkeypatch.setattr(torch.Tensor, name, counted)
    real_step = Trainer.train_step

    def step(self, batches):
        inside.step = True
        try:
            return real_step(self, batches)
        finally:
            inside.step = False

    reads = []
    real_read = StepCounters.read
    monkeypatch.setattr(Trainer, "train_step", step)
    monkeypatch.setattr(StepCounters, "read", lambda self: reads.append(1) or real_read(self))
    cfg = tiny_config("train.steps=12", "train.log_every=4", "train.save_every=12", *settings)
    trainer = Trainer(cfg, tmp_path / "r", show_progress=False)
    trainer.fit()
    assert trainer.state.step + trainer.state.skipped >= 12
    assert calls == []
    if trainer.state.skipped == 0:
        assert len(reads) == 3  # steps 4, 8 and 12


def test_max_bad_steps_stops_at_the_read_back_with_the_state_of_the_last_bad_step(tmp_path, monkeypatch):
    """Three non-finite steps in a row among steps read back only every 8: the run ends at the read-
    back with the state after the third (the later steps counted nothing, changed nothing), and the
    checkpoint written on the way out holds the data position after the third."""
    real = label_smoothed_loss
    bad_from = 3  # the steps of calls 4, 5, 6 ... are non-finite
    seen = []

    def poisoned(*args, **kwargs):
        seen.append(1)
        loss, nll = real(*args, **kwargs)
        return (loss * math.nan if len(seen) > bad_from else loss), nll

    from transduce.train import step as step_mod

    monkeypatch.setattr(step_mod, "label_smoothed_loss", poisoned)
    cfg = tiny_config("train.steps=20", "train.log_every=8", "train.max_bad_steps=3")
    trainer = Trainer(cfg, tmp_path / "r", show_progress=False)
    positions = []
    real_attempt = Trainer._attempt

    def attempt(self, step):
        positions.append(step.position)
        return real_attempt(self, step)

    monkeypatch.setattr(Trainer, "_attempt", attempt)
    from transduce.train.state import TrainingError

    with pytest.raises(TrainingError, match="3 non-finite losses in a row at step 3"):
        trainer.fit()
    assert len(positions) == 8  # read back at the eighth step, not before
    assert (trainer.state.step, trainer.state.skipped, trainer.state.bad_in_row) == (3, 3, 3)
    saved = load_checkpoint(step_checkpoints(tmp_path / "r" / "checkpoints")[-1], with_trainer=True)
    assert saved.meta.step == 3 and saved.trainer is not None
    assert saved.trainer["sampler"] == positions[5]  # after the sixth batch: the third bad one


def recorded_batches(monkeypatch) -> list[list[list[int]]]:
    """The example indices of every step's batches, as the loop hands them to train_step."""
    seen: list[list[list[int]]] = []
    real = Trainer.train_step

    def record(self, batches):
        seen.append([b.indices for b in batches])
        return real(self, batches)

    monkeypatch.setattr(Trainer, "train_step", record)
    return seen


def weights(run: Path) -> dict[str, torch.Tensor]:
    return load_checkpoint(step_checkpoints(run / "checkpoints")[-1]).weights


def test_prefetched_batches_are_the_same_in_the_same_order_resume_included(tmp_path, monkeypatch):
    """15 steps of 2 batches (the epoch turns over) without prefetching, with 3 steps ahead, and
    with 3 ahead stopped at step 6 and resumed: the same batches in the same order and the same
    weights. The checkpoint at step 6 holds the position after step 6's batches, not after those
    prepared ahead (the sampler itself is put back there when the loop ends)."""
    seen = recorded_batches(monkeypatch)
    common = ("train.accumulate=2", "train.save_every=6", "model.dropout=0.1")
    runs = {}
    for name, ahead in (("off", 0), ("ahead", 3)):
        cfg = tiny_config("train.steps=15", f"train.prefetch={ahead}", *common)
        trainer = Trainer(cfg, tmp_path / name, show_progress=False)
        trainer.fit()
        runs[name], seen[:] = list(seen), []
        assert trainer.sampler.state_dict() == trainer.position
    assert runs["off"] == runs["ahead"] and len(runs["off"]) == 15
    assert len({tuple(i) for step in runs["off"] for i in step}) > len(runs["off"][0]) * 2
    half = Trainer(
        tiny_config("train.steps=6", "train.prefetch=3", *common), tmp_path / "b", show_progress=False
    )
    half.fit()
    saved = load_checkpoint(step_checkpoints(tmp_path / "b" / "checkpoints")[-1], with_trainer=True)
    n = len(half.sampler.epoch_batches(0))
    assert saved.trainer is not None
    assert saved.trainer["sampler"] == (
        {"epoch": 0, "position": 12} if n >= 12 else {"epoch": 1, "position": 12 - n}
    )
    resumed = Trainer(
        tiny_config("train.steps=15", "train.prefetch=3", *common), tmp_path / "b", show_progress=False
    )
    resumed.fit(resume=True)
    assert seen == runs["off"]
    a, b = weights(tmp_path / "off"), weights(tmp_path / "b")
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_prefetch_defaults_to_two_steps_on_a_gpu_and_none_on_the_cpu():
    """Unset, train.prefetch builds no batches ahead on the CPU (the thread took 7-10% of the step's
    throughput there) and two steps ahead on CUDA; a value set explicitly holds on either."""
    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    assert (steps_ahead(None, cpu), steps_ahead(None, cuda)) == (0, 2)
    assert (steps_ahead(3, cpu), steps_ahead(0, cuda)) == (3, 0)


def test_batches_padded_to_a_multiple_have_few_shapes_and_the_same_loss(tmp_path):
    """data.pad_to_multiple=4: every batch's widths are multiples of 4 and what `shape` predicts
    without collating; fewer distinct shapes than unpadded; the same ids where both have them
    (PAD after); the loss of a padded batch equals the unpadded one's; the count is logged."""
    shapes = {}
    for multiple in (1, 4):
        cfg = tiny_config("model.dropout=0", f"data.pad_to_multiple={multiple}", "train.steps=1")
        trainer = Trainer(cfg, tmp_path / f"m{multiple}", show_progress=False)
        split, objective = trainer.train_split, trainer.objective
        batches = trainer.sampler.epoch_batches(0)
        shapes[multiple] = set()
        for indices in batches:
            batch = objective.collate(split, indices, multiple)
            plain = objective.collate(split, indices)
            shape = (len(indices), batch.src.shape[1], batch.tgt_in.shape[1])
            assert shape == objective.shapes(split, [indices], multiple)[0]
            assert shape[1] % multiple == 0 and shape[2] % multiple == 0
            for padded, unpadded in ((batch.src, plain.src), (batch.tgt_out, plain.tgt_out)):
                assert torch.equal(padded[:, : unpadded.shape[1]], unpadded)
                assert bool((padded[:, unpadded.shape[1] :] == 0).all())
            shapes[multiple].add(shape)
        trainer.fit()
        assert (
            f"{len(shapes[multiple])} distinct shapes"
            in (tmp_path / f"m{multiple}" / "train.log").read_text()
        )
    assert len(shapes[4]) < len(shapes[1])
    trainer.model.eval()
    indices = trainer.sampler.epoch_batches(0)[0]
    losses = []
    for multiple in (1, 8):
        batch = trainer.objective.collate(trainer.train_split, indices, multiple)
        out = trainer.objective.forward(trainer.model, batch)
        losses.append(
            label_smoothed_loss(out.logits, trainer.objective.targets(batch), 0.1, IGNORE)[0].item()
        )
    assert losses[1] == pytest.approx(losses[0], rel=1e-5)


def test_compiled_training_gives_the_eager_losses(tmp_path):
    """train.compile=true: the model's forward pass through torch.compile (inductor, C++ on the
    CPU), the same losses over a few steps as eager to float32 round-off."""
    losses = {}
    for compiled in (False, True):
        cfg = tiny_config(
            "model.dropout=0", f"train.compile={str(compiled).lower()}", "data.pad_to_multiple=8"
        )
        trainer = Trainer(cfg, tmp_path / str(compiled), show_progress=False)
        assert isinstance(trainer.optimizer_step.net, torch._dynamo.eval_frame.OptimizedModule) == compiled
        stream = iter(trainer.sampler)
        multiple = trainer.settings.pad_to_multiple
        losses[compiled] = [
            trainer.train_step([trainer.objective.collate(trainer.train_split, next(stream), multiple)]).loss
            for _ in range(3)
        ]
    assert losses[True] == pytest.approx(losses[False], rel=1e-4)


def test_master_weights_train_in_bf16_save_fp32_and_resume_exactly(tmp_path):
    """train.master_weights=true: the passes run a bf16 copy of the model (no autocast), which is
    always the fp32 weights rounded; checkpoints hold the fp32 ones; the first loss tracks fp32's to
    bf16 accuracy; and a run interrupted and resumed equals an uninterrupted one bit for bit."""
    common = ("train.precision=bf16", "train.master_weights=true", "model.dropout=0.1", "train.save_every=4")
    straight = Trainer(tiny_config("train.steps=8", *common), tmp_path / "a", show_progress=False)
    master = straight.optimizer_step.master
    assert master is not None and straight.optimizer_step.dtype is None  # no autocast
    straight.fit()
    assert all(p.dtype == torch.bfloat16 for p in master.compute.parameters())
    assert all(p.dtype == torch.float32 for p in straight.model.parameters())
    for low, high in master.pairs:
        assert torch.equal(low, high.to(torch.bfloat16))
    assert all(t.dtype == torch.float32 for t in weights(tmp_path / "a").values() if t.is_floating_point())
    Trainer(tiny_config("train.steps=4", *common), tmp_path / "b", show_progress=False).fit()
    resumed = Trainer(tiny_config("train.steps=8", *common), tmp_path / "b", show_progress=False)
    resumed.fit(resume=True)
    a, b = straight.model.state_dict(), resumed.model.state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)
    first = {}
    for name, extra in (("fp32", ()), ("pure", ("train.precision=bf16", "train.master_weights=true"))):
        trainer = Trainer(tiny_config("model.dropout=0", *extra), tmp_path / name, show_progress=False)
        first[name] = trainer.train_step([collate(trainer.train_split, next(iter(trainer.sampler)))])
    assert first["pure"].loss == pytest.approx(first["fp32"].loss, rel=2e-2)
    assert first["pure"].loss != first["fp32"].loss  # it really ran in bf16


def test_master_weights_move_as_fp32_adam_on_the_bf16_gradients(tmp_path):
    """Three steps with train.master_weights=true against Adam written out here in float64 from
    each step's gradients (the bf16 copy's, as the master weights received them) and the schedule's
    rate: the fp32 master weights equal it to float32 round-off, and most of them are not bf16
    values (an optimizer that stepped the bf16 copy, or rounded the masters, would fail both)."""
    cfg = tiny_config(
        "model.dropout=0", "train.precision=bf16", "train.master_weights=true", "train.warmup=4"
    )
    trainer = Trainer(cfg, tmp_path / "r", show_progress=False)
    master = trainer.optimizer_step.master
    assert master is not None
    params = [p for _, p in master.pairs]
    w = [p.detach().double().clone() for p in params]
    m = [torch.zeros_like(x) for x in w]
    v = [torch.zeros_like(x) for x in w]
    (b1, b2), eps = cfg.train.adam_betas, cfg.train.adam_eps
    stream = iter(trainer.sampler)
    for step in range(1, 4):
        stats = trainer.train_step([collate(trainer.train_split, next(stream))])
        assert isinstance(stats, StepStats)
        lr = cfg.train.lr_scale * cfg.model.d_model**-0.5 * min(step**-0.5, step * cfg.train.warmup**-1.5)
        for i, p in enumerate(params):
            g = p.grad.double()
            assert torch.equal(p.grad, p.grad.bfloat16().float())  # a bf16 gradient
            m[i] = b1 * m[i] + (1 - b1) * g
            v[i] = b2 * v[i] + (1 - b2) * g * g
            w[i] -= lr * (m[i] / (1 - b1**step)) / ((v[i] / (1 - b2**step)).sqrt() + eps)
    for p, want in zip(params, w, strict=True):
        assert p.dtype == torch.float32
        assert torch.allclose(p.double(), want, rtol=1e-6, atol=1e-7)
    kept = sum(int((p != p.bfloat16().float()).sum()) for p in params)
    assert kept > 0.5 * sum(p.numel() for p in params)  # most master weights are not bf16 values


def test_master_gradients_are_the_bf16_ones_in_fp32_none_where_none_and_not_accumulated():
    torch.manual_seed(0)
    model = torch.nn.ModuleDict({"used": torch.nn.Linear(6, 4), "unused": torch.nn.Linear(3, 2)})
    master = MasterWeights(model)
    for scale in (1.0, -3.0):  # a second step's gradients replace the first's
        master.zero_grad()
        out = master.compute["used"](torch.randn(5, 6, dtype=torch.bfloat16))
        (scale * out.float().square().sum()).backward()
        master.grads_to_master()
        for low, high in zip(master.compute.parameters(), model.parameters(), strict=True):
            if low.grad is None:
                assert high.grad is None
            else:
                assert high.grad.dtype == torch.float32
                assert torch.equal(high.grad, low.grad.float())
    assert model["unused"].weight.grad is None and model["used"].weight.grad is not None
