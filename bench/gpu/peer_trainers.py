"""The peer trainers beside ours on the same data and device (issue 86): Hugging Face
MarianMTModel in a plain PyTorch loop, and OpenNMT-py's own `onmt_train`; OpenNMT-py's time to quality.

    python -m bench.gpu.peer_trainers hf --dataset /tmp/l10n/l10n-de-data --steps 120 --out DIR
    python -m bench.gpu.peer_trainers onmt --dataset /tmp/l10n/l10n-de-data --steps 120 --out DIR
    python -m bench.gpu.peer_trainers hf --dataset DIR --preset small --steps 4 --log-every 2 \\
        --device cpu --out DIR      # a smoke run

Both read the carried prepared dataset (`bench/gpu/gpu.sh pack`): its 8,000 shared pieces, its
train split. Each writes <out>/<peer>.json: target tokens per second in each window of
--log-every updates, their median after the first window (start-up excluded, as for our trainer),
target tokens per update, and the PyTorch allocator's peak (HF, in this process); the session
measures every trainer's device memory the same way from outside (nvidia-smi).

- hf: `transformers.MarianMTModel` at the preset's size (`base`: 6+6 layers of 512, 8 heads,
  d_ff 2048, ReLU, dropout 0.1, shared and tied embeddings, the scaled sinusoidal positions; the
  same parameters as ours) on *our* batches: transduce's sampler and collation under
  data.max_tokens=25000, built ahead on a thread and copied on a side stream as our trainer's are.
  The loop is what an HF user writes (or Trainer does with bf16=True): bf16 autocast over fp32
  weights, HF's own attention (`sdpa`, PyTorch's kernel order; `--attention-kernel efficient`
  puts ours first), label-smoothed (0.1) cross entropy over non-pad targets, fused Adam
  (0.9, 0.98, 1e-9) with our inverse-square-root schedule; the loss is read back once a window.
- onmt: OpenNMT-py 3.5.1 (from the carried wheels) with bench/mt/toolkits.py's ONMT_RECIPE (the
  base Transformer of its FAQ) on one GPU: batches of about our target tokens (--onmt-batch-size), fp16 (3.5.1
  has fp32 and fp16 only; `model_dtype fp16` is torch.cuda.amp with a GradScaler, at bf16's
  tensor-core rate), shared embeddings as ours. Its data is our train split written back as
  pieces (no transforms: the same segmentation), its vocabulary our pieces. Its own log's target
  tok/s per --log-every window (`report_every`). spaCy is not carried (36 MB; only its
  terminology transform imports it, at import time): a placeholder module stands in for that
  import alone (bench/peers/onmt_bin.py).
- onmt-ttq: time to quality (issue 86, item 2), the onmt peer on our ttq recipe instead of its own
  (`ttq_options`) for --minutes of training, then its last --average saves averaged, beam 4 on
  --test and BLEU/chrF against --ref as `transduce evaluate` scores:
    python -m bench.gpu.peer_trainers onmt-ttq --dataset /tmp/l10n/l10n-de-data --minutes 4.36 \
        --save-every 181 --test test.en --ref test.de --out DIR
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.metadata
import json
import os
import re
import statistics
import subprocess
import sys
import time
from functools import partial
from pathlib import Path

import sentencepiece
import torch
import torch.nn.functional as F

from bench.gpu.session import TTQ
from bench.mt.toolkits import ONMT_RECIPE, OpenNMT, checkpoint_step, write_yaml
from transduce.config import DecodeConfig, load_config
from transduce.data.batching import BatchSampler, round_up
from transduce.data.dataset import Dataset
from transduce.data.vocab import EOS, PAD
from transduce.device import attention_kernels
from transduce.metrics import corpus_scores
from transduce.train.batches import BatchStream, steps_ahead
from transduce.train.objective import objective_for
from transduce.train.schedule import InverseSqrt

LAUNCHER = Path(__file__).resolve().parents[1] / "peers" / "onmt_bin.py"  # OpenNMT-py's commands
ONMT_ENV = OpenNMT.env  # its translate and average_models load its own pickled checkpoints


def windows(rates: list[float]) -> dict:
    """The figures every peer reports: each window's rate, and their median after the first."""
    later = rates[1:]
    return {"window_rates": rates, "tokens_per_s": statistics.median(later) if later else None}


def marian(cfg, vocab_size: int):
    """A MarianMTModel of `cfg.model`'s size and our vocabulary (random weights, as ours start)."""
    import transformers

    m = cfg.model
    config = transformers.MarianConfig(
        vocab_size=vocab_size,
        decoder_vocab_size=vocab_size,
        d_model=m.d_model,
        encoder_layers=m.encoder_layers,
        decoder_layers=m.decoder_layers,
        encoder_attention_heads=m.heads,
        decoder_attention_heads=m.heads,
        encoder_ffn_dim=m.d_ff,
        decoder_ffn_dim=m.d_ff,
        activation_function=m.activation,
        dropout=m.dropout,
        attention_dropout=m.attention_dropout,
        activation_dropout=m.ffn_dropout,
        max_position_embeddings=1024,
        scale_embedding=True,
        share_encoder_decoder_embeddings=True,
        tie_word_embeddings=True,
        pad_token_id=PAD,
        eos_token_id=EOS,
        decoder_start_token_id=PAD,
    )
    return transformers.MarianMTModel._from_config(config, attn_implementation="sdpa")


def run_hf(args: argparse.Namespace) -> dict:
    cfg = load_config(args.preset, [f"data.dataset={args.dataset}", f"data.max_tokens={args.max_tokens}"])
    device = torch.device(args.device)
    torch.manual_seed(1)
    data = Dataset(args.dataset)
    train = data.splits["train"]
    objective = objective_for(cfg.model)
    sampler = BatchSampler(round_up(objective.lengths(train), 1), cfg.data.max_tokens, cfg.data.seed, 0, 1)
    collate = partial(objective.collate, train, multiple=1)
    model = marian(cfg, len(data.tgt_vocab)).to(device).train()
    adam = torch.optim.Adam(
        model.parameters(), lr=0.0, betas=(0.9, 0.98), eps=1e-9, fused=device.type == "cuda"
    )
    schedule = InverseSqrt(cfg.model.d_model, cfg.train.warmup, cfg.train.lr_scale)
    autocast = torch.autocast(device.type, dtype=torch.bfloat16)
    kernels = (
        attention_kernels(device, "efficient")
        if args.attention_kernel == "efficient"
        else contextlib.nullcontext()
    )
    rates, tokens_total, window_tokens = [], 0, torch.zeros((), dtype=torch.long, device=device)
    loss_sum = torch.zeros((), device=device)
    stream = BatchStream(sampler, collate, 1, device, steps_ahead(None, device))
    with stream, kernels:
        began = time.perf_counter()
        for step in range(1, args.steps + 1):
            batch = next(stream).batches[0]
            with autocast:
                logits = model(
                    input_ids=batch.src, attention_mask=batch.src.ne(PAD), decoder_input_ids=batch.tgt_in
                ).logits
            targets = batch.tgt_out.ne(PAD).sum()
            loss = F.cross_entropy(
                logits.float().flatten(0, 1),
                batch.tgt_out.flatten(),
                ignore_index=PAD,
                label_smoothing=0.1,
                reduction="sum",
            )
            for group in adam.param_groups:
                group["lr"] = schedule(step)
            adam.zero_grad(set_to_none=True)
            (loss / targets).backward()
            adam.step()
            window_tokens += targets
            loss_sum += loss.detach()
            if step % args.log_every == 0:
                done = int(window_tokens.item())  # waits for the window's work: the window's end
                now = time.perf_counter()
                rates.append(done / (now - began))
                print(f"step {step}: {rates[-1]:.0f} target tokens/s, loss {loss_sum.item() / done:.3f}")
                tokens_total += done
                window_tokens.zero_()
                loss_sum.zero_()
                began = time.perf_counter()
    peak = torch.cuda.max_memory_allocated(device) / 2**20 if device.type == "cuda" else None
    return {
        "peer": "hf",
        "transformers": __import__("transformers").__version__,
        "attention_kernel": args.attention_kernel,
        "preset": args.preset,
        "parameters": sum(p.numel() for p in model.parameters()),
        "max_tokens": args.max_tokens,
        "steps": args.steps,
        "tokens_per_step": tokens_total / (len(rates) * args.log_every) if rates else None,
        "torch_peak_mib": peak,
        **windows(rates),
    }


def write_pieces(data: Dataset, folder: Path) -> tuple[Path, Path, Path]:
    """Our train split as lines of pieces (source, target) and our vocabulary's pieces, for OpenNMT-py."""
    folder.mkdir(parents=True, exist_ok=True)
    vocab = data.src_vocab
    pieces = [vocab.token(i) for i in range(len(vocab))]
    train = data.splits["train"]
    paths = []
    for side, tokens, offsets in (
        ("src", train.src_tokens, train.src_offsets),
        ("tgt", train.tgt_tokens, train.tgt_offsets),
    ):
        path = folder / f"train.{side}"
        ids = tokens.tolist()
        with path.open("w", encoding="utf-8") as out:
            for a, b in zip(offsets[:-1].tolist(), offsets[1:].tolist(), strict=True):
                out.write(" ".join(pieces[i] for i in ids[a:b]) + "\n")
        paths.append(path)
    specials = {vocab.token(i) for i in range(EOS + 1)}
    vocab_file = folder / "vocab.txt"
    vocab_file.write_text("".join(p + "\n" for p in pieces if p not in specials), encoding="utf-8")
    return paths[0], paths[1], vocab_file


ONMT_RATE = re.compile(r"Step\s+(\d+)/\s*\d+;.*?([0-9.]+)/\s*([0-9.]+) tok/s")


def onmt_options(args: argparse.Namespace, src: Path, tgt: Path, vocab: Path) -> dict:
    """ONMT_RECIPE on one GPU at our batch size, sharing embeddings as ours do."""
    options = {
        **ONMT_RECIPE["options"],
        "bucket_size": args.onmt_bucket,
        "gpu_ranks": [0] if args.device == "cuda" else [],
        "num_workers": 2 if args.device == "cuda" else 0,
        "batch_size": args.onmt_batch_size,
        "model_dtype": "fp16" if args.device == "cuda" else "fp32",
        "share_vocab": True,
        "share_embeddings": True,
        "share_decoder_embeddings": True,
        "vocab_size_multiple": 8,
        "learning_rate": ONMT_RECIPE["recipe_learning_rate"],
        "warmup_steps": ONMT_RECIPE["recipe_warmup"],
    }
    if args.preset != "base":  # a smoke run's small model
        cfg = load_config(args.preset, []).model
        options.update(
            enc_layers=cfg.encoder_layers,
            dec_layers=cfg.decoder_layers,
            heads=cfg.heads,
            hidden_size=cfg.d_model,
            word_vec_size=cfg.d_model,
            transformer_ff=cfg.d_ff,
        )
    work = args.work / "onmt"
    return {
        **options,
        "src_vocab": str(vocab),
        "tgt_vocab": str(vocab),
        "data": {"corpus_1": {"path_src": str(src), "path_tgt": str(tgt)}},
        "save_model": str(work / "model"),
        "train_steps": args.steps,
        "valid_steps": 10**9,
        "save_checkpoint_steps": 10**9,
        "report_every": args.log_every,
        "seed": 1,
    }


def run_onmt(args: argparse.Namespace) -> dict:
    data = Dataset(args.dataset)
    work = args.work / "onmt"  # its data and checkpoint stay out of --out (which comes back)
    began = time.perf_counter()
    src, tgt, vocab = write_pieces(data, work)
    written = time.perf_counter() - began
    config = work / "config.yaml"
    write_yaml(config, onmt_options(args, src, tgt, vocab))
    log = work / "train.log"
    with log.open("w") as out:
        status = subprocess.run(
            [sys.executable, str(LAUNCHER), "train", "-config", str(config)],
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        ).returncode
    text = log.read_text(errors="replace")
    print(text[-3000:])
    (args.out / "onmt-train.log").write_text(text)
    (args.out / "onmt-config.yaml").write_text(config.read_text())
    found = [(int(m.group(1)), float(m.group(3))) for m in ONMT_RATE.finditer(text)]
    batch = re.findall(r"bsz:\s*([0-9.]+)/\s*([0-9.]+)/", text)
    return {
        "peer": "onmt",
        "onmt": importlib.metadata.version("OpenNMT-py"),
        "status": status,
        "preset": args.preset,
        "max_tokens": args.max_tokens,
        "steps": args.steps,
        "data_written_s": written,
        "tokens_per_step": statistics.mean(float(t) for _, t in batch[1:]) if len(batch) > 1 else None,
        "options": onmt_options(args, src, tgt, vocab),
        **windows([rate for _, rate in found]),
    }


def ttq_options(args: argparse.Namespace, src: Path, tgt: Path, vocab: Path) -> dict:
    """The ttq stage's recipe (bench/gpu/session.py's TTQ) in OpenNMT-py's options: noam at
    learning_rate = our lr_scale is our inverse-square-root schedule; the same warm-up, Adam
    betas, label smoothing, dropout and clipping; pre-norm layers are OpenNMT-py's own. No end by
    steps (the deadline stops it), a save every --save-every updates, the last --average kept."""
    overrides = [o for o in TTQ[1:] if not o.startswith("data.dataset=")]
    cfg = load_config(args.preset, [f"data.dataset={args.dataset}", *overrides])
    t, m = cfg.train, cfg.model
    return {
        **onmt_options(args, src, tgt, vocab),
        "learning_rate": t.lr_scale,
        "warmup_steps": t.warmup,
        "adam_beta1": t.adam_betas[0],
        "adam_beta2": t.adam_betas[1],
        "label_smoothing": t.label_smoothing,
        "max_grad_norm": t.clip_norm or 0,
        "dropout": [m.dropout],
        "attention_dropout": [m.attention_dropout],
        "train_steps": 10**7,
        "save_checkpoint_steps": args.save_every,
        "keep_checkpoint": args.average + 1,  # one more: the save the deadline cuts may be partial
    }


def train_until(command: list[str], log: Path, minutes: float) -> tuple[int | None, float]:
    """Run OpenNMT-py's training for `minutes` from its training loop's start (its start-up, like
    ours, not counted), then stop it (it has no wall-time option): its exit status (None when the
    deadline stopped it) and the seconds it trained."""
    with log.open("w") as out:
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env={**os.environ, **ONMT_ENV})
        started = None
        while proc.poll() is None:
            if started is None and "Start training loop" in log.read_text(errors="replace"):
                started = time.monotonic()
            if started is not None and time.monotonic() - started >= 60 * minutes:
                proc.terminate()
                proc.wait()
                return None, time.monotonic() - started
            time.sleep(0.5)
    return proc.returncode, time.monotonic() - started if started else 0.0


def complete_saves(folder: Path) -> list[Path]:
    """OpenNMT-py's saves in update order, less one the deadline cut off (it does not load)."""
    saves = sorted(folder.glob("model_step_*.pt"), key=checkpoint_step)
    if saves:
        try:  # our own run's file: its pickled options are OpenNMT-py's, not untrusted input
            torch.load(saves[-1], map_location="cpu", weights_only=False)
        except Exception:  # any failure to read it: it was cut off
            saves.pop()
    return saves


def onmt_error(command: list[str]) -> str | None:
    """Run one of OpenNMT-py's commands: None, or the end of what it printed when it failed."""
    done = subprocess.run(command, capture_output=True, text=True, env={**os.environ, **ONMT_ENV})
    return None if done.returncode == 0 else (done.stderr or done.stdout)[-2000:]


def run_onmt_ttq(args: argparse.Namespace) -> dict:
    """Time to quality for OpenNMT-py: the ttq recipe for --minutes, the last --average saves
    averaged (its average_models), beam 4 on the test set (its translate, Wu's length penalty at
    our alpha), scored as `transduce evaluate` scores (sacrebleu, detokenised)."""
    data = Dataset(args.dataset)
    work = args.work / "onmt-ttq"
    src, tgt, vocab = write_pieces(data, work)
    config = work / "config.yaml"
    options = ttq_options(args, src, tgt, vocab)
    write_yaml(config, {**options, "save_model": str(work / "model")})
    for old in work.glob("model_step_*.pt"):
        old.unlink()
    launcher = [sys.executable, str(LAUNCHER)]
    status, trained = train_until(
        [*launcher, "train", "-config", str(config)], work / "train.log", args.minutes
    )
    text = (work / "train.log").read_text(errors="replace")
    (args.out / "onmt-ttq-train.log").write_text(text)
    newest = complete_saves(work)[-args.average :]
    # as train.average_last chooses: of the newest saves, those past the warmup; else the last alone
    chosen = [p for p in newest if checkpoint_step(p) > options["warmup_steps"]] or newest[-1:]
    result = {
        "peer": "onmt-ttq",
        "onmt": importlib.metadata.version("OpenNMT-py"),
        "train_status": status,  # None: the deadline stopped it
        "minutes": args.minutes,
        "trained_s": trained,
        "updates": checkpoint_step(newest[-1]) if newest else None,
        "averaged": [p.name for p in chosen],
        "options": options,
        **windows([float(m.group(3)) for m in ONMT_RATE.finditer(text)]),
    }
    if not chosen:
        return {**result, "error": "no complete save before the deadline"}
    model = work / "averaged.pt" if len(chosen) > 1 else chosen[0]
    average = [*launcher, "average_models", "-models", *map(str, chosen), "-output", str(model), "-fp32"]
    if len(chosen) > 1 and (failed := onmt_error(average)):
        return {**result, "error": failed}
    sp = sentencepiece.SentencePieceProcessor(model_file=str(args.dataset / "src.spm"))
    lines = args.test.read_text(encoding="utf-8").splitlines()[: args.test_lines]
    pieces, output = work / "test.pieces", work / "test.out"
    pieces.write_text("".join(" ".join(p) + "\n" for p in sp.encode(lines, out_type=str)), encoding="utf-8")
    gpu = "0" if args.device == "cuda" else "-1"
    translate = [*launcher, "translate", "-model", str(model), "-src", str(pieces), "-output", str(output)]
    translate += ["-beam_size", "4", "-length_penalty", "wu", "-alpha", str(DecodeConfig().alpha)]
    translate += ["-batch_size", "4096", "-batch_type", "tokens", "-gpu", gpu]
    began = time.perf_counter()
    failed = onmt_error(translate)
    result.update(translate_s=time.perf_counter() - began, translate=" ".join(translate))
    if failed:
        return {**result, "error": failed}
    outputs = [sp.decode(line.split()) for line in output.read_text(encoding="utf-8").splitlines()]
    scores = corpus_scores(outputs, args.ref.read_text(encoding="utf-8").splitlines()[: args.test_lines])
    return {**result, "bleu": scores.bleu, "chrf": scores.chrf, "bleu_signature": scores.bleu_signature}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("peer", choices=list(PEERS))
    parser.add_argument("--dataset", type=Path, required=True)
    parser.add_argument("--preset", default="base")
    parser.add_argument("--steps", type=int, default=120)
    parser.add_argument("--log-every", type=int, default=20, help="updates a window")
    parser.add_argument("--max-tokens", type=int, default=25000, help="data.max_tokens of our batches (HF's)")
    parser.add_argument("--attention-kernel", choices=["default", "efficient"], default="default")
    parser.add_argument(
        "--onmt-batch-size",
        type=int,
        default=48000,
        help="OpenNMT-py's batch_size in its tokens (rows x the longest side in the batch): 25,000 gave "
        "12.9k target tokens a batch on this data, ours 24k, so 48,000 for about the same",
    )
    parser.add_argument("--onmt-bucket", type=int, default=65536, help="OpenNMT-py's bucket_size")
    parser.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    parser.add_argument("--minutes", type=float, default=6.0, help="onmt-ttq: minutes of training")
    parser.add_argument("--save-every", type=int, default=200, help="onmt-ttq: updates between saves")
    parser.add_argument("--average", type=int, default=5, help="onmt-ttq: the last saves averaged")
    parser.add_argument("--test", type=Path, help="onmt-ttq: the raw test sources")
    parser.add_argument("--ref", type=Path, help="onmt-ttq: the raw test references")
    parser.add_argument("--test-lines", type=int, help="onmt-ttq: the first lines only (a smoke run)")
    parser.add_argument("--out", type=Path, required=True, help="the figures and logs")
    parser.add_argument("--work", type=Path, default=Path("/tmp/peer-trainers"), help="data and checkpoints")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    result = PEERS[args.peer](args)
    name = args.peer if args.attention_kernel == "default" else f"{args.peer}-{args.attention_kernel}"
    (args.out / f"{name}.json").write_text(json.dumps(result, indent=1))
    print(json.dumps({k: v for k, v in result.items() if k != "options"}, indent=1))


PEERS = {"hf": run_hf, "onmt": run_onmt, "onmt-ttq": run_onmt_ttq}

if __name__ == "__main__":
    main()
