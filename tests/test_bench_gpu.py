"""bench/gpu/session.py: the GPU session's summary from its stages (the figures issue 47 asks for),
and a later session completing an earlier one's stages. The stages themselves need a GPU."""

import json
from types import SimpleNamespace

import torch
from tiny_models import tiny_model

from bench.gpu.peer_trainers import ONMT_RATE, complete_saves, ttq_options, windows
from bench.gpu.session import MASTER as MASTER_OVERRIDES
from bench.gpu.session import TTQ, fastest_variant, gather, summary, trainer_rates
from bench.gpu.step_profile import device_busy_us
from bench.gpu.throughput import MASTER, random_batch, training_step
from transduce.config import load_config
from transduce.train.master import MasterWeights
from transduce.train.schedule import InverseSqrt


def test_summary_gives_the_ratios_from_the_stages():
    stages = {
        "trainer": {
            "variants": [{"tokens_per_s": 90_000.0, "tokens_per_step": 20_000}, {"tokens_per_s": None}]
        },
        "bench": {
            "tokens": 20_000,
            "command": "bench",
            "rows": [
                {
                    "preset": "base",
                    "precision": "bf16",
                    "compile": False,
                    "tokens_per_s": 120_000.0,
                    "mfu": 0.31,
                },
                {
                    "preset": "base",
                    "precision": "bf16-master",
                    "compile": False,
                    "tokens_per_s": 100_000.0,
                    "mfu": 0.3,
                },
                {
                    "preset": "base",
                    "precision": "bf16-master",
                    "compile": True,
                    "tokens_per_s": 150_000.0,
                    "mfu": 0.39,
                },
                {
                    "preset": "big",
                    "precision": "bf16",
                    "compile": False,
                    "tokens_per_s": 50_000.0,
                    "mfu": 0.44,
                },
            ],
        },
        "decode": {
            "rows": [
                {
                    "preset": "base",
                    "precision": "bf16",
                    "sentences": 1024,
                    "beam": 4,
                    "dynamic_vs_hf": 2.0,
                    "static_vs_hf": 6.0,
                },
                {
                    "preset": "base",
                    "precision": "bf16",
                    "sentences": 64,
                    "beam": 4,
                    "dynamic_vs_hf": 9.0,
                    "static_vs_hf": 9.0,
                },
                {
                    "preset": "base",
                    "precision": "bf16",
                    "sentences": 1024,
                    "beam": 1,
                    "dynamic_vs_hf": 3.0,
                    "static_vs_hf": 1.5,
                },
            ]
        },
    }
    out = summary(stages, "NVIDIA H100")
    assert out["device"] == "NVIDIA H100"
    assert out["trainer_tokens_per_s"] == 90_000.0 and out["bench_tokens_per_s"] == 120_000.0
    assert out["trainer_to_bench"] == 0.75 and out["trainer_to_bench_master"] == 0.9
    assert out["bench_compiled_tokens_per_s"] == 150_000.0 and out["mfu_base_bf16_master"] == 0.3
    assert (out["mfu_base_bf16"], out["mfu_big_bf16"]) == (0.31, 0.44)
    assert out["decode_beam4_vs_hf"] == 6.0 and out["decode_greedy_vs_hf"] == 3.0
    assert out["commands"]["bench"] == "bench"


def test_a_later_session_fills_in_the_stages_an_earlier_one_did_not_run(tmp_path):
    earlier, now = tmp_path / "earlier", tmp_path / "now"
    earlier.mkdir(), now.mkdir()
    (earlier / "tests.json").write_text(json.dumps({"status": 0, "from": "earlier"}))
    (earlier / "decode.json").write_text(json.dumps({"rows": [], "from": "earlier"}))
    (now / "decode.json").write_text(json.dumps({"rows": [], "from": "now"}))
    found = gather(now, earlier)
    assert found["tests"]["from"] == "earlier" and found["decode"]["from"] == "now"
    assert set(found) == {"tests", "decode"}


def test_trainer_rates_skip_the_first_window(tmp_path):
    log = tmp_path / "train.log"
    log.write_text(
        "2026-11-27 10:00:00 step 20: train/loss=9.1 train/tokens_per_s=1000 train/mfu=0.1\n"
        "2026-11-27 10:00:05 step 40: train/loss=8.1 train/tokens_per_s=90000.5 train/mfu=0.3\n"
        "2026-11-27 10:00:09 warning: something\n"
        "2026-11-27 10:00:10 step 60: train/loss=7.1 train/tokens_per_s=1.1e+05 train/mfu=0.3\n"
    )
    assert trainer_rates(log) == [90000.5, 110000.0]


def test_the_benchmarks_master_weights_step_updates_both_copies():
    """bench.gpu.throughput's bf16-master row: Adam moves the fp32 weights, and the bf16 copy the
    passes run on is those weights rounded, as train.master_weights keeps it."""
    model = tiny_model(vocab=12).train()
    master = MasterWeights(model)
    before = [p.detach().clone() for p in model.parameters()]
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    scaler = torch.amp.GradScaler("cpu", enabled=False)
    batch = random_batch(4, 5, 12, torch.device("cpu"))
    training_step(master.compute, optimizer, scaler, batch, MASTER, master)()
    assert any(not torch.equal(a, p) for a, p in zip(before, model.parameters(), strict=True))
    for low, high in zip(master.compute.parameters(), model.parameters(), strict=True):
        assert low.dtype == torch.bfloat16 and torch.equal(low, high.detach().to(torch.bfloat16))


def test_device_busy_time_counts_each_kernel_once():
    """The profiler lists a kernel's time under the kernel and again under the operation that
    launched it; busy time is the kernels', as the profiler's own table totals it."""
    cuda, cpu = torch.autograd.DeviceType.CUDA, torch.autograd.DeviceType.CPU

    def event(device, us, annotation=False):
        return SimpleNamespace(device_type=device, self_device_time_total=us, is_user_annotation=annotation)

    # an operation, its kernel, a memset, and a user's range over them
    events = [event(cpu, 150.0), event(cuda, 130.0), event(cuda, 20.0), event(cuda, 999.0, True)]
    assert device_busy_us(events) == 150.0


def test_device_busy_time_of_a_cpu_profile_is_zero():
    a, b = torch.randn(64, 64), torch.randn(64, 64)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        (a @ b).sum()
    assert device_busy_us(prof.key_averages()) == 0


def test_summary_gives_our_trainer_over_each_peer_and_the_device_figures():
    stages = {
        "trainer": {"variants": [{"tokens_per_s": 500_000.0}, {"tokens_per_s": 400_000.0}]},
        "peers": {
            "rows": [
                {"peer": "hf", "tokens_per_s": 100_000.0},
                {"peer": "onmt", "tokens_per_s": 250_000.0},
                {"peer": "hf-efficient", "tokens_per_s": None},  # a peer that failed
            ]
        },
        "ttq": {"minutes": 6.0, "bleu": 40.5, "chrf": 61.0},
        "onmt-ttq": {"minutes": 5.9, "bleu": 30.25, "chrf": 55.5},
        "ct2": {
            "rows": [
                {"compute_type": "float16", "beam": 4, "ours_s": 0.5, "raw_s": 0.4},
                {"compute_type": "float16", "beam": 1, "ours_s": 0.3, "raw_s": 0.2},
                {"engine": "torch", "precision": "bf16", "beam": 4, "seconds": 2.0},
            ]
        },
    }
    out = summary(stages, "H200")
    assert out["trainer_vs_hf"] == 5.0 and out["trainer_vs_onmt"] == 2.0
    assert out["trainer_vs_hf_efficient"] is None
    assert (out["ttq_minutes"], out["ttq_bleu"], out["ttq_chrf"]) == (6.0, 40.5, 61.0)
    assert (out["ttq_onmt_minutes"], out["ttq_onmt_bleu"], out["ttq_onmt_chrf"]) == (5.9, 30.25, 55.5)
    assert out["ct2_cuda"] == {"float16": {"ours_s": 0.5, "raw_s": 0.4}}
    failed = summary({"ct2": {"rows": [], "error": "OSError: libcublas.so.12"}}, "H200")
    assert failed["ct2_cuda"] == "OSError: libcublas.so.12"


def test_time_to_quality_trains_with_the_fastest_variant_measured():
    trainer = {
        "variants": [
            {"overrides": "a=1", "tokens_per_s": 300.0},
            {"overrides": "b=2", "tokens_per_s": 500.0},
            {"overrides": "c=3", "tokens_per_s": None},
        ]
    }
    assert fastest_variant(trainer) == "b=2"
    assert fastest_variant(None) == MASTER_OVERRIDES


def test_peer_windows_and_onmt_log_lines_are_read_as_logged():
    line = (
        "[2026-12-04 17:43:06,784 INFO] Step 40/  100; acc: 4.9; ppl: 6812.8; xent: 8.8; lr: 0.00001; "
        "sents:   42951; bsz: 19088/23735/2148; 48719/60578 tok/s;     43 sec;\n"
        "[2026-12-04 17:42:58,947 INFO] Step  2/    6; acc: 0.0; ppl: 8226.6; xent: 9.0; lr: 0.00000; "
        "sents: 30973; bsz: 19504/24070/1549; 919/1100 tok/s;     35 sec;"
    )
    found = [(int(m.group(1)), float(m.group(3))) for m in ONMT_RATE.finditer(line)]
    assert found == [(40, 60578.0), (2, 1100.0)]
    assert windows([10.0, 30.0, 20.0, 40.0]) == {
        "window_rates": [10.0, 30.0, 20.0, 40.0],
        "tokens_per_s": 30.0,
    }
    assert windows([10.0])["tokens_per_s"] is None


def test_onmt_time_to_quality_runs_our_ttq_recipe_in_its_options(tmp_path):
    """OpenNMT-py's noam rate (learning_rate * hidden^-0.5 * min(s^-0.5, s * warmup^-1.5), its
    docs' formula) with the mapped options is our schedule at every step, and the rest of the
    recipe is the ttq stage's."""
    args = SimpleNamespace(
        preset="base", dataset=tmp_path, onmt_bucket=1024, device="cuda", onmt_batch_size=48000,
        work=tmp_path, steps=1, log_every=20, save_every=180, average=5,
    )  # fmt: skip
    options = ttq_options(args, tmp_path / "s", tmp_path / "t", tmp_path / "v")
    cfg = load_config("base", [o for o in TTQ[1:] if not o.startswith("data.dataset=")])
    ours = InverseSqrt(cfg.model.d_model, cfg.train.warmup, cfg.train.lr_scale)
    for step in (1, 100, cfg.train.warmup, 4 * cfg.train.warmup):
        noam = options["learning_rate"] * options["hidden_size"] ** -0.5
        noam *= min(step**-0.5, step * options["warmup_steps"] ** -1.5)
        assert abs(noam - ours(step)) < 1e-12
    assert options["warmup_steps"] == 1500 and options["hidden_size"] == cfg.model.d_model
    assert (options["adam_beta1"], options["adam_beta2"]) == cfg.train.adam_betas
    assert options["label_smoothing"] == cfg.train.label_smoothing == 0.1
    assert options["dropout"] == [cfg.model.dropout]
    assert options["save_checkpoint_steps"] == 180 and options["keep_checkpoint"] == 6


def test_onmt_saves_in_update_order_less_one_cut_off(tmp_path):
    for step in (10, 2, 30):
        torch.save({"step": step}, tmp_path / f"model_step_{step}.pt")
    assert [p.name for p in complete_saves(tmp_path)] == [f"model_step_{s}.pt" for s in (2, 10, 30)]
    (tmp_path / "model_step_40.pt").write_bytes(b"PK\x03\x04 cut off")
    assert [p.name for p in complete_saves(tmp_path)] == [f"model_step_{s}.pt" for s in (2, 10, 30)]
