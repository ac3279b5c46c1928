"""On CUDA, what the CPU suite checks on the CPU: cached decoding equals the full forward pass,
beam search finds the brute-force optimum, the CPU-only packing stays off, mixed-precision
training steps track fp32 (fp16 with loss scaling; bf16 master weights), resume is exact, batches
copied ahead on a side stream train as those built in the loop, torchrun with NCCL, and the
server answering on a CUDA model. Marked `gpu`, skipped without CUDA (`bench/gpu/gpu.sh` runs them on
a lent device; CI never needs them). TRANSDUCE_TEST_DEVICE=cpu runs the same tests on the CPU,
to check the tests themselves."""

from __future__ import annotations

import itertools
import json
import math
import os
import subprocess
import sys

import httpx
import pytest
import torch
from serving import Server
from test_search import Uncached, brute_force_best
from tiny import TINY, tiny_config, train_tiny
from tiny_models import batch, tiny_model

from transduce.data.batching import collate
from transduce.data.vocab import EOS
from transduce.decode.beam import beam_search
from transduce.decode.search import greedy
from transduce.decode.torch_engine import decode_all
from transduce.device import attention_kernels
from transduce.model.attention import scaled_dot_product
from transduce.model.packed import PackedLinear
from transduce.serve import create_app
from transduce.store.checkpoint import step_checkpoints
from transduce.store.load import load_for_decoding, load_model
from transduce.train.trainer import Skipped, Trainer

DEVICE = torch.device(os.environ.get("TRANSDUCE_TEST_DEVICE", "cuda"))

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(DEVICE.type == "cuda" and not torch.cuda.is_available(), reason="needs CUDA"),
]


@pytest.fixture
def no_tf32():
    """Exact float32 matrix products (no TF32), so tolerances are float32's."""
    before = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    yield
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = before


def test_cached_search_equals_the_full_forward_pass_and_the_cpu(no_tf32):
    for norm in ("post", "pre"):
        cpu = tiny_model(vocab=15, seed=3, overrides=[f"model.norm={norm}"])
        model = tiny_model(vocab=15, seed=3, overrides=[f"model.norm={norm}"]).to(DEVICE)
        src = batch([[4, 7, 9, 5, 11], [8, 6], [12, 13, 14]])
        for beam in (1, 3):
            cached = beam_search(model, src.to(DEVICE), beam=beam, nbest=beam, max_len_b=6)
            full = beam_search(Uncached(model), src.to(DEVICE), beam=beam, nbest=beam, max_len_b=6)
            on_cpu = beam_search(cpu, src, beam=beam, nbest=beam, max_len_b=6)
            tokens = [[h.tokens for h in n] for n in cached]
            assert tokens == [[h.tokens for h in n] for n in full] == [[h.tokens for h in n] for n in on_cpu]
            for a, b in zip(itertools.chain(*cached), itertools.chain(*on_cpu), strict=True):
                assert math.isclose(a.score, b.score, abs_tol=1e-4)
        assert [h.tokens for h in greedy(model, src.to(DEVICE))] == [h.tokens for h in greedy(cpu, src)]


@torch.no_grad()
def test_exhaustive_beam_finds_the_brute_force_optimum(no_tf32):
    for seed in range(3):
        model = tiny_model(seed=seed).to(DEVICE)
        src = torch.tensor([[4, 5, 4, EOS]], device=DEVICE)
        for alpha in (0.0, 0.6):
            score, tokens = brute_force_best(model, src, limit=3, alpha=alpha)
            hyp = beam_search(model, src, beam=40, alpha=alpha, max_len_a=0.0, max_len_b=3)[0][0]
            assert hyp.tokens == tokens and math.isclose(hyp.score, score, abs_tol=1e-4)


def test_decoding_loads_onto_the_device_without_cpu_packing(tmp_path):
    run = train_tiny(tmp_path / "r", 2)
    loaded = load_for_decoding(run, "none", device=str(DEVICE))
    assert next(loaded.model.parameters()).device.type == DEVICE.type
    packed = any(isinstance(m, PackedLinear) for m in loaded.model.modules())
    assert packed == (DEVICE.type == "cpu")  # oneDNN's packed weights are the CPU's alone


@pytest.mark.parametrize(("precision", "rel"), [("bf16", 2e-2), ("fp16", 5e-3)])
def test_mixed_precision_step_tracks_fp32(tmp_path, precision, rel):
    """Without dropout: CUDA draws a different dropout mask for each dtype, so with it the losses
    differ by more than precision (1.8% for fp16 on an H200)."""
    stats, trainers = {}, {}
    for p in ("fp32", precision):
        config = tiny_config(f"train.precision={p}", "model.dropout=0")
        trainer = Trainer(config, tmp_path / p, show_progress=False)
        assert trainer.device.type == DEVICE.type
        stats[p] = trainer.train_step([collate(trainer.train_split, next(iter(trainer.sampler)))])
        trainers[p] = trainer
    assert not isinstance(stats[precision], Skipped), stats[precision]
    assert stats[precision].loss == pytest.approx(stats["fp32"].loss, rel=rel)
    assert stats[precision].loss != stats["fp32"].loss  # autocast really ran in low precision
    assert all(p.dtype == torch.float32 for p in trainers[precision].model.parameters())
    if precision == "fp16":
        assert trainers["fp16"].scaler.is_enabled()


def test_fp16_overflow_skips_the_update_and_lowers_the_scale(tmp_path):
    trainer = Trainer(tiny_config("train.precision=fp16"), tmp_path / "r", show_progress=False)
    trainer.scaler = torch.amp.GradScaler(DEVICE.type, init_scale=2.0**40)
    before = {k: v.clone() for k, v in trainer.model.state_dict().items()}
    step = trainer.train_step([collate(trainer.train_split, next(iter(trainer.sampler)))])
    assert step is Skipped.OVERFLOW and trainer.scaler.get_scale() == 2.0**39
    assert all(torch.equal(before[k], v) for k, v in trainer.model.state_dict().items())


def straight_and_resumed(tmp_path, *overrides: str) -> tuple[Trainer, Trainer]:
    """Two runs of the tiny config with `overrides`, fitted: 8 steps straight (in a/), and 4
    steps then resumed to 8 (in b/)."""
    straight = Trainer(tiny_config("train.steps=8", *overrides), tmp_path / "a", show_progress=False)
    straight.fit()
    Trainer(tiny_config("train.steps=4", *overrides), tmp_path / "b", show_progress=False).fit()
    resumed = Trainer(tiny_config("train.steps=8", *overrides), tmp_path / "b", show_progress=False)
    resumed.fit(resume=True)
    return straight, resumed


@pytest.mark.parametrize("precision", ["fp32", "bf16", "fp16"])
def test_resume_is_exact(tmp_path, precision):
    """With dropout (the device's random generator) and each precision's state (fp16's scale)."""
    straight, resumed = straight_and_resumed(
        tmp_path, "model.dropout=0.1", f"train.precision={precision}", "train.save_every=4"
    )
    assert straight.optimizer.defaults["fused"]  # resumes fused state (fused on the CPU too: issue 47)
    a, b = straight.model.state_dict(), resumed.model.state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_batches_copied_ahead_on_a_side_stream_train_as_those_built_in_the_loop(tmp_path):
    """train.prefetch=3: batches pinned on a background thread and copied to the device on a side
    stream ahead of their step; with dropout and padded widths, the weights after 6 steps equal
    those of batches built one at a time in the loop (prefetch=0), bit for bit."""
    weights = {}
    for ahead in (0, 3):
        common = ("model.dropout=0.1", "data.pad_to_multiple=8", "train.save_every=6")
        cfg = tiny_config("train.steps=6", f"train.prefetch={ahead}", *common)
        trainer = Trainer(cfg, tmp_path / str(ahead), show_progress=False)
        assert trainer.device.type == DEVICE.type
        trainer.fit()
        weights[ahead] = trainer.model.state_dict()
    assert all(torch.equal(weights[0][k], weights[3][k]) for k in weights[0])


def test_bf16_master_weights_track_fp32_and_resume_exactly(tmp_path):
    """train.master_weights=true on the device: the first loss tracks fp32's to bf16 accuracy (and
    differs: it ran in bf16), and a run interrupted and resumed equals an uninterrupted one."""
    first = {}
    for name, extra in (("fp32", ()), ("master", ("train.precision=bf16", "train.master_weights=true"))):
        trainer = Trainer(tiny_config("model.dropout=0", *extra), tmp_path / name, show_progress=False)
        first[name] = trainer.train_step([collate(trainer.train_split, next(iter(trainer.sampler)))])
    assert first["master"].loss == pytest.approx(first["fp32"].loss, rel=2e-2)
    assert first["master"].loss != first["fp32"].loss
    common = ("model.dropout=0.1", "train.precision=bf16", "train.master_weights=true", "train.save_every=4")
    straight, resumed = straight_and_resumed(tmp_path, *common)
    a, b = straight.model.state_dict(), resumed.model.state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_torchrun_one_process_trains(tmp_path):
    """torchrun --nproc_per_node 1: the process group is NCCL on CUDA (gloo on the CPU)."""
    run = tmp_path / "run"
    launch = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc_per_node",
        "1",
        "--master_port",
        "29541",
    ]
    train = ["-m", "transduce", "train", "small", *TINY, "train.steps=3", "train.save_every=3"]
    done = subprocess.run(
        [*launch, *train, "--run-dir", str(run), "--no-progress"], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert len(step_checkpoints(run / "checkpoints")) == 1


def test_server_answers_on_a_device_model(tmp_path):
    run = train_tiny(tmp_path / "r", 20)
    on_device = load_for_decoding(run, "none", device=str(DEVICE))
    reference = load_model(run)
    with Server(create_app(on_device)) as server:
        answer = httpx.post(
            f"{server.url}/translate", json={"segments": ["1 2 3", "4 5"], "beam": 2}, timeout=60
        )
        attention = httpx.post(f"{server.url}/attention", json={"segment": "1 2 3"}, timeout=60)
    assert answer.status_code == 200, answer.text
    assert attention.status_code == 200, attention.text
    options = reference.config.decode.model_copy(update={"beam": 2})
    want = decode_all(reference.model, [reference.src_vocab.encode(s) for s in ("1 2 3", "4 5")], options)
    assert [t["text"] for t in answer.json()["translations"]] == [
        reference.tgt_vocab.decode(h[0].tokens) for h in want
    ]
    shown = attention.json()  # a row per target token (</s> included), a column per source token
    assert len(shown["weights"]) == len(shown["target"]) and len(shown["weights"][0]) == len(shown["source"])


def test_static_cache_replays_a_cuda_graph_and_equals_the_growing_cache(no_tf32):
    """decode/static.py on the device: greedy, beam (n-best) and sampling equal the growing cache;
    on CUDA the step is a captured graph (one per shape), reused by the next batch of that shape."""
    from transduce.config import DecodeConfig
    from transduce.decode import static

    model = tiny_model(vocab=15, seed=3).to(DEVICE)
    sources = [[4, 7, 9, 5, 11], [8, 6], [12, 13, 14], [5], [9, 9, 9, 9]]
    for cfg in (
        DecodeConfig(beam=3, nbest=2, max_len_b=6),
        DecodeConfig(sample=True, seed=3, num_samples=2, max_len_b=6),
    ):
        for search in ("beam", "greedy") if not cfg.sample else ("sample",):
            searched = cfg.model_copy(update={"search": search})
            expected = decode_all(model, sources, searched)
            got = decode_all(model, sources, searched.model_copy(update={"static_cache": True}))
            assert [[h.tokens for h in hs] for hs in got] == [[h.tokens for h in hs] for hs in expected]
            for a, b in zip(got, expected, strict=True):
                assert all(math.isclose(x.score, y.score, abs_tol=1e-4) for x, y in zip(a, b, strict=True))
    pool = static._POOLS[model]
    if DEVICE.type == "cuda":
        assert pool.steps and all(step.graph is not None for step in pool.steps.values())
    again = decode_all(model, sources, DecodeConfig(beam=3, max_len_b=6, static_cache=True))
    assert len(pool.steps) <= static.POOL_SIZE and [h[0].tokens for h in again]


KERNELS = [("efficient", "efficient_attention"), ("cudnn", "cudnn_attention")]


def attention_events(first: str) -> list[str]:
    """The profiler's event names for `base`'s attention shapes with a padding mask, as training
    builds it, forward and backward, with the kernel `first` named first."""
    gen = torch.Generator().manual_seed(0)
    shape = (16, 8, 48, 64)  # as bench.gpu.sdpa measured: cuDNN takes this call when it comes first
    q, k, v = (torch.randn(shape, generator=gen).to(DEVICE, torch.bfloat16).requires_grad_() for _ in "qkv")
    pad = torch.zeros(16, 1, 1, 48)
    pad[:, :, :, 40:] = float("-inf")
    with attention_kernels(DEVICE, first), torch.profiler.profile() as prof:
        out, _ = scaled_dot_product(q, k, v, pad.to(DEVICE))
        out.float().sum().backward()
    return sorted({event.key for event in prof.key_averages()})


def _expect_kernel(names: list[str], kernel: str) -> None:
    wanted = kernel if DEVICE.type == "cuda" else "flash_attention_for_cpu"  # the CPU's one kernel
    assert any(wanted in name for name in names), [n for n in names if "attention" in n]


@pytest.mark.parametrize("first, kernel", KERNELS)
def test_training_attention_runs_the_kernel_named_first(first, kernel):
    _expect_kernel(attention_events(first), kernel)


@pytest.mark.parametrize("first, kernel", KERNELS)
def test_the_kernel_named_first_runs_in_a_fresh_process(first, kernel):
    """As in a training run: the kernel order is set before the process's first attention call,
    which is where PyTorch settles its own default (on an H200 it had cuDNN take every call)."""
    code = f"import json, test_gpu; print(json.dumps(test_gpu.attention_events({first!r})))"
    tests = os.path.dirname(os.path.abspath(__file__))
    env = os.environ | {"PYTHONPATH": os.pathsep.join([tests, os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    _expect_kernel(json.loads(done.stdout.strip().splitlines()[-1]), kernel)
