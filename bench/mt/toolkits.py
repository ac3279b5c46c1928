"""Peer toolkits on their own Transformer recipes: JoeyNMT and OpenNMT-py, trained on CPU for a
wall-clock budget, decoded with beam 4, scored with sacrebleu. Groundwork for "MT quality per
unit of compute against the established toolkits' own recipes".

    python -m bench.mt.toolkits --toolkit joeynmt --data DIR --spm FILE --seed 1 --minutes 60 \
        --out bench/out/toolkits
    python -m bench.mt.toolkits --toolkit onmt --recipe small-fast --spm FILE4K ...  # our recipe
    python -m bench.mt.toolkits --make-toy DIR    # tiny synthetic en->de corpus + 500-piece model

DIR holds train/dev/test.{en,de} plain text, one sentence a line; FILE is the shared
sentencepiece model (e.g. the `.spm` that `transduce prepare` writes). One JSON per run goes to
--records/<toolkit>[+<recipe>]-seed<N>-<M>min[-<host>-host].json (bench/records/mt-compare, where
bench/mt/recipes.py puts ours and tables them all); a run whose JSON exists is skipped, and a
killed run resumes at its first unfinished phase in --out (timing, training, decoding; a
half-trained model is trained again from the start, since its budget cannot be split; decoding
resumes at its first unfinished shard of --decode-shard-lines lines).

The toolkits' venv, bench/.toolkits (created on first use by `ensure_toolkits`, git-ignored):
  torch==2.13.0 (CPU) first; then joeynmt==2.3.0 and OpenNMT-py==3.5.1 with --no-deps (both pin
  an older torch: OpenNMT-py 3.5.1 requires torch<2.3, JoeyNMT 2.3.0 lists protobuf<3.21 and
  dev tools); then what they import at run time, tried one import error at a time, installed
  with torch==2.13.0 on the same pip line so that pip can never replace it:
  - JoeyNMT 2.3.0: numpy, pyyaml, tqdm, packaging, importlib_metadata (helpers.py),
    sentencepiece and subword-nmt (tokenizers.py imports both at the top), tensorboard
    (training.py uses torch.utils.tensorboard.SummaryWriter), matplotlib (plotting.py, imported
    by helpers.py). Not needed: datasets/pandas (only for dataset_type huggingface/tsv),
    sacremoses (only pretokenizer moses), plotly (hub only); protobuf is whatever tensorboard
    brings (7.x), JoeyNMT's protobuf<3.21 pin is not needed for anything run here.
  - OpenNMT-py 3.5.1: configargparse, pyonmttok (inputters), sacrebleu (scorers), and, because
    onmt/transforms/__init__.py imports every transform module, spacy + pyahocorasick
    (terminology.py), rapidfuzz (fuzzymatch.py), fasttext-wheel (clean.py), regex, six. Not
    needed: ctranslate2, bitsandbytes, safetensors, flask/waitress (other features only).
  sentencepiece is pinned to 0.2.1: 0.2.3 dropped SentencePieceProcessor.SetVocabulary, which
  JoeyNMT's sentencepiece tokenizer calls. The exact pins are in RUNTIME below. pip then reports
  the peers' unmet pins (torch<2.3, protobuf<3.21, seaborn, pylint, ...): expected, harmless.

What torch 2.13 needs (no API either toolkit uses is missing beyond these two):
  - JoeyNMT's plateau scheduler passes ReduceLROnPlateau(verbose=False), an argument torch
    removed in 2.7 (TypeError). No switch or older package helps, so JoeyNMT runs through
    bench/peers/joeynmt_compat.py, which accepts and drops it (False was the default) and then runs
    `python -m joeynmt` unchanged.
  - OpenNMT-py trains unchanged (it only warns that torch.cuda.amp.custom_fwd/bwd are
    deprecated), but onmt_translate cannot load its own checkpoints: torch 2.6 made
    torch.load(weights_only=True) the default, and they hold an argparse.Namespace. Its commands
    run with TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1, torch's documented switch back to the old
    default for callers that do not choose (our own files only).
  JoeyNMT 2.3.0's own bug: `translate -o FILE` fails (AttributeError: args.n_best), so its
  hypotheses are taken from stdout.

Data and vocabulary: both toolkits read the raw text and apply the given sentencepiece model
with their own sentencepiece support (JoeyNMT: tokenizer_type sentencepiece, its vocabulary
file written from the model's pieces; OpenNMT-py: the `sentencepiece` transform, its vocabulary
counted by onmt_build_vocab over the transformed training data, shared). Their outputs are
detokenised by the same sentencepiece decode inside each toolkit (JoeyNMT's post_process,
OpenNMT-py's apply_reverse), and scored against the untouched reference lines.

Recipes (values in JOEYNMT_RECIPE / ONMT_RECIPE; what changed and why is listed there):
  JoeyNMT: configs/transformer_iwslt14_deen_bpe.yaml (its IWSLT14 de-en Transformer, the
    small-data recipe: 6+6 layers, 256 wide, 4 heads, ff 1024, dropout 0.3, Adam 0.9/0.999 at
    3e-4 with plateau decay, 4096-token batches, label smoothing 0.1, tied embeddings), written
    in the 2.3 layout; the sentencepiece and testing settings come from the 2.x
    configs/iwslt14_deen_sp.yaml (tokenizer_type sentencepiece with alpha 0.1 subword sampling,
    test batch 1024 tokens, max output 100, beam_alpha 1.0, sacrebleu 13a).
  OpenNMT-py: docs FAQ "How do I train the Transformer model?" (docs/source/FAQ.md, 3.x):
    the base Transformer (6+6, 512, 8 heads, ff 2048, dropout 0.1), Adam beta2 0.998, noam
    lr 2 with 8000 warmup over 200k updates, 4096-token batches accumulated 4 times on 4 GPUs,
    label smoothing 0.1, glorot init. CPU forces: one device, fp32, no loader workers, no
    accumulation (one update = 4096 tokens; 65,536-token updates would leave a few dozen
    updates in an hour), and a warmup of the recipe's share of the run (4%) with the noam peak
    kept at the recipe's value (learning_rate = 2 * sqrt(warmup / 8000)).
  --recipe small-fast (JOEYNMT_SMALL_FAST / ONMT_SMALL_FAST): transduce's own `small-fast`
    preset written in each toolkit's options, with 4,000 shared pieces, decoded with alpha 0.6
    as transduce decodes. Not the toolkits' recipes: it separates what the recipe buys from
    what the toolkit's speed buys under the same budget.

Budget: the wall time of the toolkit's training process (its start-up and its own dev
validations included: neither toolkit can leave them out). OpenNMT-py's start-up includes
filling the recipe's bucket of 262,144 examples (sentencepiece over them) before its first
update: about 50 s on one core (a small corpus is cycled to fill it). JoeyNMT has no wall-time option,
but its training loop catches KeyboardInterrupt and saves latest.ckpt, so the driver sends
SIGINT at the deadline. OpenNMT-py has neither: it saves every 1/30 of the updates a short
timing run (--timing-updates: start-up, seconds per update, one dev validation) expects, is
stopped at the deadline, and its last complete save before it is the model (the budget loses
at most 1/30 of its updates that way; a train_steps set from the estimate instead left a run
at 42 of its 60 minutes when the load fell after the timing run). Both toolkits get their
validation interval (in updates) from the same timing run, so that --curve-points dev
validations fit in the budget; the dev set used during training is the first --dev-lines lines
of dev. The test set is decoded with the final weights (not best-on-dev).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import math
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import ClassVar

from bench.records import BENCH, HOST_HELP, OUT, RECORDS, cpu_name, host_probe, host_suffix
from transduce.data.corpus import read_lines
from transduce.fileio import write_text_atomic

TOOLKITS = BENCH / ".toolkits"
COMPAT = BENCH / "peers" / "joeynmt_compat.py"  # `python -m joeynmt` with torch>=2.7's ReduceLROnPlateau
TORCH = "torch==2.13.0"
PEERS = ["joeynmt==2.3.0", "OpenNMT-py==3.5.1"]
# What the two import at run time (found by trying), pinned at the versions tested together.
RUNTIME = [
    "numpy==2.4.6",
    "pyyaml==6.0.3",
    "tqdm==4.70.1",
    "packaging==26.3",
    "importlib_metadata==10.2.0",
    "sentencepiece==0.2.1",  # 0.2.3 dropped SetVocabulary, which JoeyNMT calls
    "subword-nmt==0.3.8",
    "tensorboard==2.21.0",
    "matplotlib==3.11.2",
    "sacrebleu==2.6.0",
    "configargparse==1.9.0",
    "pyonmttok==1.38.1",
    "spacy==3.8.18",
    "pyahocorasick==2.3.1",
    "rapidfuzz==3.14.6",
    "fasttext-wheel==0.9.2",
    "regex==2026.11.15",
    "six==1.17.0",
]


def ensure_toolkits(venv: Path = TOOLKITS) -> Path:
    """The Python of the toolkits' own venv, created on first use, so that their packages (and
    their pins on older torch) never enter ours. A venv whose install did not finish is redone."""
    python = venv / "bin" / "python"
    done = venv / "installed.json"
    if not done.exists():
        if not python.exists():
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        pip = [str(python), "-m", "pip", "install", "-q"]
        subprocess.run([*pip, TORCH], check=True)  # the CPU build first, never a CUDA one
        subprocess.run([*pip, "--no-deps", *PEERS], check=True)  # their torch pins are ignored
        subprocess.run([*pip, TORCH, *RUNTIME], check=True)  # torch named: pip may not replace it
        version = subprocess.run(
            [str(python), "-c", "import torch; print(torch.__version__)"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
        if not version.startswith("2.13.0"):
            raise RuntimeError(f"bench/.toolkits has torch {version}, expected 2.13.0")
        done.write_text(json.dumps({"torch": version, "peers": PEERS, "runtime": RUNTIME}, indent=1))
    return python


# ---- recipes ---------------------------------------------------------------------------------

JOEYNMT_RECIPE = {
    "source": "joeynmt configs/transformer_iwslt14_deen_bpe.yaml (model, training); "
    "configs/iwslt14_deen_sp.yaml (sentencepiece tokenizer, testing)",
    "changes": [
        "2.3 layout: model_dir, use_cuda, fp16, random_seed at the top; eval_metric -> "
        "early_stopping_metric bleu + testing.eval_metrics; keep_last_ckpts -> keep_best_ckpts; "
        "initializer xavier -> xavier_uniform (renamed); max_sent_length 62 applied by the driver to "
        "the deterministic segmentation (JoeyNMT's own filter crashes with subword sampling, see "
        "JoeyNMT.prepare)",
        "layer_norm pre and activation relu written out (the 1.x Transformer was pre-norm; "
        "iwslt14_deen_sp.yaml says pre)",
        "lowercase false, no moses pretokenizer: the data and the scoring here are cased and raw",
        "use_cuda false, fp16 false (CPU); num_workers 0 (one thread)",
        "epochs 100 -> unbounded: training stops at the wall-time budget (SIGINT)",
        "validation_freq 1000 / logging_freq 100 -> set from the timing run so that "
        "--curve-points validations fit in the budget",
        "test beam 5 -> 4 (the benchmark's), decoded with latest.ckpt (not best.ckpt)",
    ],
    "training": {
        "optimizer": "adam",
        "normalization": "tokens",
        "adam_betas": [0.9, 0.999],
        "scheduling": "plateau",
        "patience": 5,
        "decrease_factor": 0.7,
        "loss": "crossentropy",
        "learning_rate": 0.0003,
        "learning_rate_min": 1.0e-8,
        "weight_decay": 0.0,
        "label_smoothing": 0.1,
        "batch_size": 4096,
        "batch_type": "token",
        "early_stopping_metric": "bleu",
        "shuffle": True,
        "keep_best_ckpts": 5,
        "overwrite": True,
        "print_valid_sents": [0, 1, 2],
    },
    "model": {
        "initializer": "xavier_uniform",
        "embed_initializer": "xavier_uniform",
        "embed_init_gain": 1.0,
        "init_gain": 1.0,
        "bias_initializer": "zeros",
        "tied_embeddings": True,
        "tied_softmax": True,
        **{
            side: {
                "type": "transformer",
                "num_layers": 6,
                "num_heads": 4,
                "embeddings": {"embedding_dim": 256, "scale": True, "dropout": 0.0},
                "hidden_size": 256,
                "ff_size": 1024,
                "dropout": 0.3,
                "layer_norm": "pre",
                "activation": "relu",
            }
            for side in ("encoder", "decoder")
        },
    },
    "max_length": 62,
    "tokenizer_cfg": {"alpha": 0.1},  # subword sampling in training, as iwslt14_deen_sp.yaml
    "testing": {
        "n_best": 1,
        "beam_alpha": 1.0,
        "batch_size": 1024,
        "batch_type": "token",
        "max_output_length": 100,
        "eval_metrics": ["bleu"],
        "sacrebleu_cfg": {"tokenize": "13a", "lowercase": False},
    },
}

ONMT_RECIPE = {
    "source": "OpenNMT-py docs/source/FAQ.md, 'How do I train the Transformer model?' (3.x)",
    "changes": [
        "world_size 4, gpu_ranks [0,1,2,3] -> 1, [] (CPU); model_dtype fp16 -> fp32 (CPU)",
        "num_workers 2 -> 0 (one thread)",
        "accum_count [4] -> [1]: one update = 4096 tokens (the recipe's 65,536 tokens per update "
        "leave a few dozen CPU updates an hour)",
        "warmup_steps 8000 of train_steps 200000 -> 4% of the updates the budget allows, and "
        "learning_rate 2 -> 2*sqrt(warmup/8000), keeping the noam peak at the recipe's ~9.9e-4",
        "train_steps 200000 -> the budget's deadline (the timing run's estimate sets the warmup "
        "share and the saving interval)",
        "valid_steps 10000 -> set so that --curve-points validations fit; valid_metrics [BLEU] "
        "added for a dev BLEU curve; save_checkpoint_steps 10000 -> 1/30 of the planned updates, "
        "keep_checkpoint 2, train_steps twice the planned: the run is stopped at the deadline and "
        "decoded from its last save before it",
    ],
    "options": {
        "bucket_size": 262144,
        "world_size": 1,
        "gpu_ranks": [],
        "num_workers": 0,
        "batch_type": "tokens",
        "batch_size": 4096,
        "valid_batch_size": 2048,
        "accum_count": [1],
        "accum_steps": [0],
        "model_dtype": "fp32",
        "optim": "adam",
        "decay_method": "noam",
        "adam_beta2": 0.998,
        "max_grad_norm": 0,
        "label_smoothing": 0.1,
        "param_init": 0,
        "param_init_glorot": True,
        "normalization": "tokens",
        "encoder_type": "transformer",
        "decoder_type": "transformer",
        "position_encoding": True,
        "enc_layers": 6,
        "dec_layers": 6,
        "heads": 8,
        "hidden_size": 512,
        "word_vec_size": 512,
        "transformer_ff": 2048,
        "dropout_steps": [0],
        "dropout": [0.1],
        "attention_dropout": [0.1],
    },
    "recipe_warmup": 8000,
    "recipe_train_steps": 200000,
    "recipe_learning_rate": 2.0,
}

# transduce's `small-fast` preset (config.PRESETS: 2+2 pre-norm layers of 128, d_ff 512, 4 heads,
# no dropout, 2048-token batches, the inverse-square-root schedule at the paper's rate with
# 400 warmup updates, Adam 0.9/0.98, label smoothing 0.1, tied embeddings; 4,000 shared pieces:
# pass that model with --spm) in each toolkit's terms: is our result the recipe or the toolkit?
SMALL_FAST_CHANGES = [
    "transduce's small-fast preset instead of the toolkit's recipe: 2+2 pre-norm layers of 128, "
    "d_ff 512, 4 heads, dropout 0 (attention too), 2048-token batches, noam schedule with factor 1 "
    "and 400 warmup updates, Adam betas 0.9/0.98, label smoothing 0.1, tied embeddings",
    "decoding as transduce's: beam 4, length penalty alpha 0.6 (Wu et al.)",
]

JOEYNMT_SMALL_FAST = {
    **JOEYNMT_RECIPE,
    "source": "transduce small-fast (bench/mt/toolkits.py SMALL_FAST_CHANGES) in JoeyNMT 2.3's layout",
    "changes": [
        *SMALL_FAST_CHANGES,
        "no subword sampling (transduce segments deterministically); length filter 256 pieces "
        "(transduce's data.max_len); validation and test settings otherwise as JoeyNMT's recipe",
    ],
    "training": {
        **{k: v for k, v in JOEYNMT_RECIPE["training"].items() if k not in ("patience", "decrease_factor")},
        "scheduling": "noam",
        "learning_rate_factor": 1.0,
        "learning_rate_warmup": 400,
        "adam_betas": [0.9, 0.98],
        "batch_size": 2048,
    },
    "model": {
        **JOEYNMT_RECIPE["model"],
        **{
            side: {
                **JOEYNMT_RECIPE["model"][side],
                "num_layers": 2,
                "embeddings": {"embedding_dim": 128, "scale": True, "dropout": 0.0},
                "hidden_size": 128,
                "ff_size": 512,
                "dropout": 0.0,
            }
            for side in ("encoder", "decoder")
        },
    },
    "max_length": 256,
    "tokenizer_cfg": {},
    "testing": {**JOEYNMT_RECIPE["testing"], "beam_alpha": 0.6},
}

ONMT_SMALL_FAST = {
    **ONMT_RECIPE,
    "source": "transduce small-fast (bench/mt/toolkits.py SMALL_FAST_CHANGES) in OpenNMT-py 3.5's options",
    "changes": [*SMALL_FAST_CHANGES, "loader settings (bucket, one device, fp32) as in ONMT_RECIPE"],
    "options": {
        **ONMT_RECIPE["options"],
        "batch_size": 2048,
        "adam_beta2": 0.98,
        "enc_layers": 2,
        "dec_layers": 2,
        "heads": 4,
        "hidden_size": 128,
        "word_vec_size": 128,
        "transformer_ff": 512,
        "dropout": [0.0],
        "attention_dropout": [0.0],
        "share_embeddings": True,
        "share_decoder_embeddings": True,
    },
    "fixed_warmup": 400,
    "recipe_learning_rate": 1.0,
    "translate_options": ["-length_penalty", "wu", "-alpha", "0.6"],
}

RECIPES = {"own": {"joeynmt": JOEYNMT_RECIPE, "onmt": ONMT_RECIPE}}
RECIPES["small-fast"] = {"joeynmt": JOEYNMT_SMALL_FAST, "onmt": ONMT_SMALL_FAST}

STAMP = re.compile(r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})")


def stamp(line: str) -> float | None:
    """The epoch seconds of a log line's timestamp (both toolkits log local time, to the ms)."""
    m = STAMP.search(line)
    return datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp() if m else None


class Runner:
    """Runs the toolkits' commands with the thread count fixed, recording each one."""

    def __init__(self, python: Path, threads: int, log_dir: Path, env: dict[str, str]) -> None:
        self.python = python
        self.env = {"OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads), **env}
        self.log_dir = log_dir

    def popen(
        self, args: list[str], log: str, stdin: Path | None = None, stdout: Path | None = None
    ) -> tuple[subprocess.Popen, dict]:
        """Start `python args...` with stderr (and stdout, unless `stdout` names a file) to `log`."""
        argv = [str(self.python), *map(str, args)]
        with contextlib.ExitStack() as files:  # the child keeps its own copies
            err = files.enter_context(open(self.log_dir / log, "w"))
            proc = subprocess.Popen(
                argv,
                stdin=files.enter_context(open(stdin)) if stdin else subprocess.DEVNULL,
                stdout=files.enter_context(open(stdout, "w")) if stdout else err,
                stderr=err,
                env={**os.environ, **self.env},
                # a driver started as a background job has SIGINT ignored, and Python then never
                # raises KeyboardInterrupt in the child: JoeyNMT's deadline needs it back
                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
            )
        record = {"argv": argv, "env": self.env, "log": log}
        if stdin:
            record["stdin"] = str(stdin)
        if stdout:
            record["stdout"] = str(stdout)
        return proc, record

    def run(self, args: list[str], log: str, stdin: Path | None = None, stdout: Path | None = None) -> dict:
        start = time.time()
        proc, record = self.popen(args, log, stdin, stdout)
        if proc.wait() != 0:
            tail = (self.log_dir / log).read_text(errors="replace")[-3000:]
            raise RuntimeError(f"{' '.join(record['argv'])} failed ({proc.returncode}):\n{tail}")
        return {**record, "seconds": round(time.time() - start, 2)}


def wait_until(proc: subprocess.Popen, deadline: float) -> bool:
    """Wait for `proc` until the deadline (epoch seconds); True if it is still running then."""
    while proc.poll() is None and time.time() < deadline:
        time.sleep(0.2)
    return proc.poll() is None


def write_yaml(path: Path, cfg: dict) -> None:
    import yaml

    path.write_text(yaml.safe_dump(cfg, sort_keys=False))


def non_empty(src: Path, out: Path, limit: int | None = None) -> list[int]:
    """Copy `src` (its first `limit` lines) without its empty lines (both toolkits drop them) and
    return where they were."""
    lines = read_lines(src)[:limit]
    empty = [i for i, line in enumerate(lines) if not line.strip()]
    write_text_atomic(out, "".join(line + "\n" for line in lines if line.strip()))
    return empty


def refill(hyps: list[str], empty: list[int]) -> list[str]:
    for i in empty:
        hyps.insert(i, "")
    return hyps


# ---- JoeyNMT ---------------------------------------------------------------------------------


class Toolkit:
    """What both drivers share: where the run lives, the data, the model, the seed."""

    env: ClassVar[dict[str, str]] = {}  # environment the toolkit's commands need

    def __init__(
        self,
        runner: Runner,
        run_dir: Path,
        data: Path,
        spm: Path,
        langs: tuple[str, str],
        seed: int,
        recipe: dict,
    ):
        self.runner, self.dir, self.data, self.spm, self.langs, self.seed, self.recipe = (
            runner,
            run_dir,
            data,
            spm,
            langs,
            seed,
            recipe,
        )


class JoeyNMT(Toolkit):
    package = PEERS[0]

    def prepare(self) -> list[dict]:
        """JoeyNMT's vocabulary file (the model's pieces, less those it adds itself: unk, pad, bos,
        eos, and sentencepiece's control pieces) and its training data, length-filtered here.

        JoeyNMT filters by length where it tokenises, and with subword sampling it tokenises a
        training pair twice (batch sampler, then collate) with different samples: a pair that
        passed the first time can come back too long the second time, and collate_fn's assertion
        kills the run (seen here on the 563k-pair corpus). So the recipe's max_length filter is
        applied once, to the deterministic segmentation, and JoeyNMT's own is turned off.
        """
        import sentencepiece as spm

        sp = spm.SentencePieceProcessor(model_file=str(self.spm))
        vocab = self.dir / "vocab.txt"
        if not vocab.exists():
            pieces = [
                sp.id_to_piece(i)
                for i in range(sp.get_piece_size())
                if not (sp.is_control(i) or sp.is_unknown(i))
            ]
            vocab.write_text("".join(p + "\n" for p in pieces), encoding="utf-8")
        limit = self.recipe["max_length"]
        sides = [read_lines(self.data / f"train.{lang}") for lang in self.langs]
        lengths = [[len(ids) for ids in sp.encode(lines)] for lines in sides]
        keep = [i for i, (a, b) in enumerate(zip(*lengths, strict=True)) if 0 < a <= limit and 0 < b <= limit]
        for lang, lines in zip(self.langs, sides, strict=True):
            write_text_atomic(self.dir / "data" / f"train.{lang}", "".join(lines[i] + "\n" for i in keep))
        return [{"train_pairs": len(sides[0]), "kept_within_max_length": len(keep), "max_length": limit}]

    def config(self, model_dir: Path, validate_every: int, updates: int | None = None) -> dict:
        """The recipe in JoeyNMT 2.3's layout; `updates` caps the run (the timing run only), which
        then logs every update."""
        r = self.recipe
        side = {
            "max_length": -1,  # applied in prepare()
            "lowercase": False,
            "normalize": False,
            "level": "bpe",
            "voc_file": str(self.dir / "vocab.txt"),
            "tokenizer_type": "sentencepiece",
            "tokenizer_cfg": {"model_file": str(self.spm), **r["tokenizer_cfg"]},
        }
        logging_freq = 1 if updates else largest_divisor(validate_every, 100)
        training = {
            **r["training"],
            "epochs": 1_000_000,
            "validation_freq": validate_every,
            "logging_freq": logging_freq,
        }
        if updates is not None:
            training["updates"] = updates
        return {
            "name": f"joeynmt-seed{self.seed}",
            "joeynmt_version": "2.3.0",
            "model_dir": str(model_dir),
            "use_cuda": False,
            "fp16": False,
            "random_seed": self.seed,
            "num_workers": 0,
            "data": {
                "train": str(self.dir / "data" / "train"),
                "dev": str(self.dir / "data" / "dev"),
                "dataset_type": "plain",
                "src": {"lang": self.langs[0], **side},
                "trg": {"lang": self.langs[1], **side},
            },
            "testing": {
                **r["testing"],
                "beam_size": 4,
                "load_model": str(model_dir / "latest.ckpt"),
            },
            "training": training,
            "model": r["model"],
        }

    def _start(self, model_dir: Path, validate_every: int, log: str, updates: int | None = None):
        if model_dir.exists():
            shutil.rmtree(model_dir)
        cfg = self.dir / f"{model_dir.name}.yaml"
        write_yaml(cfg, self.config(model_dir, validate_every, updates))
        return self.runner.popen([COMPAT, "train", cfg, "--skip-test"], log)

    def timing(self, updates: int) -> dict:
        start = time.time()
        proc, record = self._start(self.dir / "timing", updates, "timing.log", updates)
        if proc.wait() != 0:
            raise RuntimeError(f"JoeyNMT timing run failed: see {self.dir / 'timing.log'}")
        end = time.time()
        log = (self.dir / "timing" / "train.log").read_text().splitlines()
        steps = [stamp(line) for line in log if "Step:" in line]
        return timing_from(start, steps, end, {**record, "seconds": round(end - start, 2)})

    def train(self, budget_s: float, validate_every: int) -> dict:
        model_dir = self.dir / "model"
        start = time.time()
        proc, record = self._start(model_dir, validate_every, "train.log")
        interrupted = wait_until(proc, start + budget_s)
        if interrupted:
            proc.send_signal(signal.SIGINT)  # the trainer catches it and saves latest.ckpt
        if proc.wait() != 0 or not (model_dir / "latest.ckpt").exists():
            raise RuntimeError(
                f"JoeyNMT training failed (or the budget ended before its training loop started): "
                f"see {self.dir / 'train.log'}"
            )
        end = time.time()
        stats = json.loads(
            subprocess.run(
                [
                    str(self.runner.python),
                    "-c",
                    "import json, sys, torch; "
                    "s = torch.load(sys.argv[1], map_location='cpu', weights_only=False)['stats_state']; "
                    "print(json.dumps({k: v for k, v in s.items() if isinstance(v, (int, float))}))",
                    str(model_dir / "latest.ckpt"),
                ],
                check=True,
                capture_output=True,
                text=True,
            ).stdout
        )
        rows = (
            (model_dir / "validations.txt").read_text().splitlines()
            if (model_dir / "validations.txt").exists()
            else []
        )
        curve = joey_curve((model_dir / "train.log").read_text().splitlines(), rows, start)
        return {
            "minutes": round((end - start) / 60, 3),
            "stopped_by": "SIGINT at the deadline" if interrupted else "finished by itself",
            "updates": int(stats["steps"]),
            "target_tokens": int(stats["total_tokens"]),
            "curve": curve,
            "command": {**record, "seconds": round(end - start, 2), "sigint_after_s": budget_s},
        }

    def decode(self, src: Path, out: Path, log: str) -> dict:
        """`translate` reads stdin and prints the detokenised hypotheses (its -o option fails in
        2.3.0: AttributeError on args.n_best), with the beam and checkpoint of model.yaml."""
        cfg = self.dir / "model.yaml"
        return self.runner.run([COMPAT, "translate", cfg], log, stdin=src, stdout=out)


def joey_curve(log: list[str], rows: list[str], start: float) -> list[dict]:
    """The dev curve: validations.txt's rows (steps, loss, ppl, bleu), timed by the log's
    'Evaluation result (greedy)' lines, one per validation, in the same order."""
    times = [stamp(line) for line in log if "Evaluation result (greedy)" in line]
    curve = []
    for t, row in zip(times, rows, strict=False):
        fields = dict(f.split(": ", 1) for f in row.split("\t") if ": " in f)
        curve.append(
            {
                "minutes": round((t - start) / 60, 3),
                "step": int(fields["Steps"]),
                "dev_bleu": float(fields["bleu"]),
                "dev_loss": float(fields["loss"]),
                "dev_ppl": float(fields["ppl"]),
            }
        )
    return curve


# ---- OpenNMT-py ------------------------------------------------------------------------------


SAVES = 30  # OpenNMT-py saves per planned run: the deadline costs at most 1/SAVES of it


class OpenNMT(Toolkit):
    package = PEERS[1]
    # torch>=2.6 loads with weights_only=True by default; OpenNMT-py's checkpoints hold its options
    # (argparse.Namespace) and vocabularies, so onmt_translate fails to load them. torch's own
    # documented switch restores the old default where the caller did not choose (our files).
    env: ClassVar[dict[str, str]] = {"TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD": "1"}

    def config(self, name: str, planned: int, valid_steps: int, report_every: int) -> dict:
        """The run's options; `planned`: the updates the budget is expected to allow. The training
        run ("model") may go on past them, to twice as many: the deadline stops it (`train`),
        and it saves every 1/30 of `planned` so that the model at the deadline is kept."""
        r = self.recipe
        if "fixed_warmup" in r:
            warmup, learning_rate = r["fixed_warmup"], r["recipe_learning_rate"]
        else:  # the recipe's share of the run, at the recipe's peak rate
            warmup = max(1, round(planned * r["recipe_warmup"] / r["recipe_train_steps"]))
            learning_rate = r["recipe_learning_rate"] * math.sqrt(warmup / r["recipe_warmup"])
        src, tgt = self.langs
        corpus = {"transforms": ["sentencepiece"]}
        return {
            "data": {
                "corpus_1": {
                    "path_src": str(self.data / f"train.{src}"),
                    "path_tgt": str(self.data / f"train.{tgt}"),
                    **corpus,
                },
                "valid": {
                    "path_src": str(self.dir / "data" / f"dev.{src}"),
                    "path_tgt": str(self.dir / "data" / f"dev.{tgt}"),
                    **corpus,
                },
            },
            "src_subword_model": str(self.spm),
            "tgt_subword_model": str(self.spm),
            "src_vocab": str(self.dir / "vocab.shared"),
            "share_vocab": True,
            "save_data": str(self.dir / "onmt-data"),
            "overwrite": True,
            "save_model": str(self.dir / name / "model"),
            "save_checkpoint_steps": max(1, planned // SAVES) if name == "model" else planned,
            "keep_checkpoint": 2,
            "seed": self.seed,
            "train_steps": 2 * planned if name == "model" else planned,
            "valid_steps": valid_steps,
            "report_every": report_every,
            "valid_metrics": ["BLEU"],
            **r["options"],
            "warmup_steps": warmup,
            "learning_rate": learning_rate,
        }

    def prepare(self) -> list[dict]:
        """onmt_build_vocab over the whole training data (-n_sample -1), shared."""
        if (self.dir / "vocab.shared").exists():
            return []
        cfg = self.dir / "vocab.yaml"
        write_yaml(cfg, self.config("vocab", 1, 1, 1))
        return [
            self.runner.run(["-m", "onmt.bin.build_vocab", "-config", cfg, "-n_sample", "-1"], "vocab.log")
        ]

    def _start(self, name: str, planned: int, valid_steps: int, log: str):
        model_dir = self.dir / name
        if model_dir.exists():
            shutil.rmtree(model_dir)
        model_dir.mkdir(parents=True)
        report_every = 1 if name == "timing" else largest_divisor(valid_steps, 50)  # onmt's default 50
        cfg = self.dir / f"{name}.yaml"
        write_yaml(cfg, self.config(name, planned, valid_steps, report_every))
        return self.runner.popen(["-m", "onmt.bin.train", "-config", cfg], log)

    def timing(self, updates: int) -> dict:
        start = time.time()
        proc, record = self._start("timing", updates, updates, "timing.log")
        if proc.wait() != 0:
            raise RuntimeError(f"OpenNMT-py timing run failed: see {self.dir / 'timing.log'}")
        end = time.time()
        log = (self.dir / "timing.log").read_text().splitlines()  # its log_file misses the training
        steps = [stamp(line) for line in log if re.search(r"\] Step\s+\d+/", line)]
        return timing_from(start, steps, end, {**record, "seconds": round(end - start, 2)})

    def train(self, updates: int, validate_every: int, budget_s: float) -> dict:
        """Trained until the deadline (OpenNMT-py has no wall-time option): `updates`, the timing
        run's estimate, sets the saving interval (1/30 of it) and the recipe's warmup share, not
        the end, since the pace changes with the load and with the bucket refills that the timing
        run does not see. The model is the last complete save before the deadline."""
        start = time.time()
        proc, record = self._start("model", updates, validate_every, "train.log")
        stopped = wait_until(proc, start + budget_s)
        if stopped:
            proc.terminate()
            proc.wait()
        elif proc.returncode != 0:
            raise RuntimeError(f"OpenNMT-py training failed: see {self.dir / 'train.log'}")
        end = time.time()
        step = checkpoint_step(self._last_complete_checkpoint())
        tokens, curve = onmt_progress(
            (self.dir / "train.log").read_text().splitlines(), start, validate_every, step
        )
        return {
            "minutes": round((end - start) / 60, 3),
            "stopped_by": (
                f"the deadline; the last save before it at update {step} ({updates} planned)"
                if stopped
                else f"train_steps {2 * updates} (twice the {updates} planned) before the deadline"
            ),
            "updates": step,
            "target_tokens": round(tokens),
            "target_tokens_note": "sum over onmt's reports of their mean target tokens a batch",
            "curve": curve,
            "command": {**record, "seconds": round(end - start, 2)},
        }

    def _checkpoints(self) -> list[Path]:
        return sorted((self.dir / "model").glob("model_step_*.pt"), key=checkpoint_step)

    def _last_complete_checkpoint(self) -> Path:
        """The newest save that loads; one cut off by the deadline is renamed *.pt.partial."""
        for checkpoint in reversed(self._checkpoints()):
            probe = "import sys, torch; torch.load(sys.argv[1], map_location='cpu', weights_only=False)"
            loads = subprocess.run(
                [str(self.runner.python), "-c", probe, str(checkpoint)], capture_output=True
            )
            if loads.returncode == 0:
                return checkpoint
            checkpoint.rename(checkpoint.with_name(checkpoint.name + ".partial"))
        raise RuntimeError(f"OpenNMT-py saved no complete checkpoint: see {self.dir / 'train.log'}")

    def decode(self, src: Path, out: Path, log: str) -> dict:
        args = ["-m", "onmt.bin.translate", "-model", self._checkpoints()[-1], "-src", src, "-output", out]
        args += ["-beam_size", "4", "-gpu", "-1", "-seed", str(self.seed), "-transforms", "sentencepiece"]
        args += ["-src_subword_model", self.spm, "-tgt_subword_model", self.spm]
        args += self.recipe.get("translate_options", [])
        return self.runner.run(args, log)


def checkpoint_step(path: Path) -> int:
    """The update an OpenNMT-py save was made at (model_step_<N>.pt)."""
    return int(path.stem.rsplit("_", 1)[1])


def onmt_progress(
    log: list[str], start: float, validate_every: int, upto: int | None = None
) -> tuple[float, list[dict]]:
    """Target tokens trained on up to update `upto` (each report's mean target tokens a batch,
    times the batches since the last report) and the dev curve (BLEU is logged before the
    perplexity of the same validation, the k-th validation is at update k * validate_every)."""
    tokens, last_step, curve, bleu = 0.0, 0, [], None
    for line in log:
        if m := re.search(r"\] Step\s+(\d+)/\s*\d+;.*bsz:\s*[\d.]+/\s*([\d.]+)/", line):
            step = min(int(m.group(1)), upto if upto is not None else math.inf)
            tokens += float(m.group(2)) * max(0, step - last_step)  # a report's mean, to `upto`
            last_step = max(last_step, step)
        elif "validation BLEU:" in line:
            bleu = float(line.rsplit(":", 1)[1])
        elif "Validation perplexity:" in line:
            ppl = float(line.rsplit(":", 1)[1])
            point = {
                "minutes": round((stamp(line) - start) / 60, 3),
                "step": validate_every * (len(curve) + 1),
            }
            if bleu is not None:
                point["dev_bleu"] = bleu
            curve.append({**point, "dev_loss": math.log(ppl), "dev_ppl": ppl})
            bleu = None
    return tokens, curve


TOOLKIT_CLASSES = {"joeynmt": JoeyNMT, "onmt": OpenNMT}


def largest_divisor(n: int, most: int) -> int:
    """The largest divisor of n not above `most` (a logging interval that divides a validation one)."""
    return max(d for d in range(1, min(most, n) + 1) if n % d == 0)


def timing_from(start: float, steps: list[float | None], end: float, command: dict) -> dict:
    """Start-up (process start to the first update's end, less one update), seconds per update,
    and the rest of the run after the last update (one dev validation, saving, exit)."""
    steps = [s for s in steps if s is not None]
    if len(steps) < 3:
        raise RuntimeError(f"timing run logged {len(steps)} updates; raise --timing-updates")
    per_update = (steps[-1] - steps[0]) / (len(steps) - 1)
    return {
        "updates": len(steps),
        "seconds_per_update": per_update,
        "startup_s": max(0.0, steps[0] - start - per_update),
        "validation_s": max(0.0, end - steps[-1]),
        "command": command,
    }


def plan(timing: dict, budget_s: float, points: int) -> tuple[int, int]:
    """(updates, validate_every): updates that fill the budget with `points` validations in it."""
    usable = budget_s - timing["startup_s"] - points * timing["validation_s"]
    updates = max(points, int(usable / timing["seconds_per_update"]))
    every = max(1, updates // points)
    return every * points, every


# ---- one run ---------------------------------------------------------------------------------


def decode_in_shards(toolkit: Toolkit, lines: list[str], shards: Path, size: int, jobs: int) -> dict:
    """Decode `lines` in shards of `size` lines, `jobs` one-thread processes at a time.

    Each finished shard is kept as shards/NNN.json (its hypotheses, seconds and command), so a
    killed decoding resumes at its first unfinished shard, and a rerun may change `jobs`. An
    undertrained peer's outputs run to its length limit, and one test set then takes over an
    hour and a half on one core. `seconds` sums the shards' processes: the one-process time,
    comparable between runs whatever `jobs` was.
    """
    from concurrent.futures import ThreadPoolExecutor

    shards.mkdir(parents=True, exist_ok=True)
    starts = range(0, len(lines), size)

    def shard(k: int) -> dict:
        done = shards / f"{k:03d}.json"
        if not done.exists():
            part = lines[starts[k] : starts[k] + size]
            source, out = shards / f"{k:03d}.src", shards / f"{k:03d}.hyp.tmp"
            write_text_atomic(source, "".join(line + "\n" for line in part))
            start = time.time()
            command = toolkit.decode(source, out, f"{shards.name}/{k:03d}.log")
            hyps = read_lines(out)
            if len(hyps) != len(part):
                raise RuntimeError(f"{out}: {len(hyps)} hypotheses for {len(part)} lines")
            result = {"seconds": round(time.time() - start, 2), "hypotheses": hyps, "command": command}
            write_text_atomic(done, json.dumps(result, indent=1))
            out.unlink()
        return json.loads(done.read_text())

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        parts = list(pool.map(shard, range(len(starts))))
    return {
        "seconds": round(sum(p["seconds"] for p in parts), 2),
        "jobs": jobs,
        "hypotheses": [h for p in parts for h in p["hypotheses"]],
        "command": {**parts[0]["command"], "shards": len(parts), "shard_lines": size},
    }


def set_up(args: argparse.Namespace, run_dir: Path) -> Toolkit:
    """The toolkit, working in `run_dir`, with the dev set it validates on during training (the
    first --dev-lines lines of the data's)."""
    (run_dir / "data").mkdir(parents=True, exist_ok=True)
    for lang in (args.src, args.tgt):
        dev = read_lines(args.data / f"dev.{lang}")[: args.dev_lines]
        write_text_atomic(run_dir / "data" / f"dev.{lang}", "".join(line + "\n" for line in dev))
    python = ensure_toolkits()
    kind = TOOLKIT_CLASSES[args.toolkit]
    runner = Runner(python, args.threads, run_dir, kind.env)
    recipe = RECIPES[args.recipe][args.toolkit]
    return kind(runner, run_dir, args.data, args.spm, (args.src, args.tgt), args.seed, recipe)


def kept_phase(run_dir: Path, file: str, make: Callable[[], dict]) -> dict:
    """`make()`'s result, kept in run_dir/file so that a rerun skips the phase."""
    path = run_dir / file
    if not path.exists():
        result = make()
        write_text_atomic(path, json.dumps(result, indent=1))
    return json.loads(path.read_text())


def decode_test(args: argparse.Namespace, toolkit: Toolkit, run_dir: Path) -> dict:
    """The test set's translations (its first --test-lines lines, blank ones left out and put
    back empty), decoded in shards that a rerun keeps."""
    source = run_dir / "data" / f"test.{args.src}"
    empty = non_empty(args.data / f"test.{args.src}", source, args.test_lines)
    shards = run_dir / f"decode-{args.decode_shard_lines}"
    decoded = decode_in_shards(toolkit, read_lines(source), shards, args.decode_shard_lines, args.decode_jobs)
    return {**decoded, "hypotheses": refill(decoded["hypotheses"], empty)}


def run(args: argparse.Namespace) -> Path:
    args.out, args.data, args.spm = args.out.resolve(), args.data.resolve(), args.spm.resolve()
    system = args.toolkit if args.recipe == "own" else f"{args.toolkit}+{args.recipe}"
    name = f"{system}-seed{args.seed}-{args.minutes:g}min" + host_suffix(args.host)
    args.records.mkdir(parents=True, exist_ok=True)
    result_path = args.records / f"{name}.json"
    if result_path.exists():
        print(f"{result_path} exists: skipped")
        return result_path
    run_dir = args.out / name
    src, tgt = args.src, args.tgt
    toolkit = set_up(args, run_dir)
    phase = functools.partial(kept_phase, run_dir)
    prepared = phase("prepare.json", lambda: {"commands": toolkit.prepare()})
    probe = phase("probe.json", host_probe)

    budget_s = args.minutes * 60
    timing = phase("timing.json", lambda: toolkit.timing(args.timing_updates))
    updates, every = plan(timing, budget_s, args.curve_points)
    print(
        f"{name}: {timing['seconds_per_update']:.2f} s/update, start-up {timing['startup_s']:.1f} s, "
        f"validation {timing['validation_s']:.1f} s -> ~{updates} updates, validating every {every}"
    )
    if args.toolkit == "joeynmt":
        trained = phase("train.json", lambda: toolkit.train(budget_s, every))
    else:
        trained = phase("train.json", lambda: toolkit.train(updates, every, budget_s))

    decoded = phase("decode.json", lambda: decode_test(args, toolkit, run_dir))
    from transduce.metrics import corpus_scores

    refs = read_lines(args.data / f"test.{tgt}")[: args.test_lines]
    scores = corpus_scores(decoded["hypotheses"], refs)
    result = {
        "toolkit": args.toolkit,
        "recipe_name": args.recipe,
        "version": toolkit.package,
        "torch": json.loads((TOOLKITS / "installed.json").read_text())["torch"],
        "seed": args.seed,
        **({"host": args.host} if args.host else {}),
        "machine": {"cpu": cpu_name(), "cpus": os.cpu_count(), "probe_before_training": probe},
        "data": str(args.data),
        "spm": str(args.spm),
        "direction": f"{src}-{tgt}",
        "date": time.strftime("%Y-%m-%d"),  # when the record was written (the results page shows it)
        "budget_minutes": args.minutes,
        "threads": args.threads,
        "minutes": trained["minutes"],
        "stopped_by": trained["stopped_by"],
        "updates": trained["updates"],
        "target_tokens": trained["target_tokens"],
        "test": {
            "lines": len(refs),
            "first_lines_only": args.test_lines is not None,
            "beam": 4,
            "bleu": scores.bleu,
            "chrf": scores.chrf,
            "bleu_signature": scores.bleu_signature,
            "chrf_signature": scores.chrf_signature,
            "decode_seconds": decoded["seconds"],
            **({"decode_jobs": decoded["jobs"]} if "jobs" in decoded else {}),
        },
        "curve": trained["curve"],
        "curve_note": f"dev: first {args.dev_lines} lines; minutes since the training process started",
        "recipe": {"source": toolkit.recipe["source"], "changes": toolkit.recipe["changes"]},
        "timing_run": {k: v for k, v in timing.items() if k != "command"},
        "planned": {"updates": updates, "validate_every": every},
        "commands": [*prepared["commands"], timing["command"], trained["command"], decoded["command"]],
    }
    write_text_atomic(result_path, json.dumps(result, indent=1))
    print(
        f"{name}: {result['updates']} updates in {result['minutes']:.2f} min, "
        f"test BLEU {scores.bleu:.2f} chrF {scores.chrf:.2f} -> {result_path}"
    )
    return result_path


# ---- a toy corpus for smoke tests ------------------------------------------------------------


def make_toy(out: Path, n_train: int = 2000, n_eval: int = 200, pieces: int = 500) -> None:
    """A toy en->de task: a fixed 120-word dictionary and one reordering (the second word moves to
    the end, like a German verb in a subordinate clause); train/dev/test and a `pieces`-piece
    sentencepiece model (transduce's settings) at out/vocab.spm."""
    from transduce.data.vocab import SentencePieceVocab

    rng = random.Random(0)
    syllables = ["ka", "to", "ri", "men", "sa", "lo", "vi", "ne", "dor", "pu", "shi", "an", "el", "ber"]
    german = ["ge", "sch", "ei", "ung", "en", "ter", "lich", "bau", "ach", "zu", "ver", "st", "au"]
    lexicon = {
        "".join(rng.choice(syllables) for _ in range(rng.randint(1, 3))): "".join(
            rng.choice(german) for _ in range(rng.randint(1, 3))
        )
        for _ in range(120)
    }
    words = sorted(lexicon)

    def pair() -> tuple[str, str]:
        en = [rng.choice(words) for _ in range(rng.randint(3, 10))]
        de = [lexicon[w] for w in en]
        de.append(de.pop(1))
        return " ".join(en).capitalize() + ".", " ".join(de).capitalize() + "."

    out.mkdir(parents=True, exist_ok=True)
    splits = {"train": n_train, "dev": n_eval, "test": n_eval}
    corpus = {split: [pair() for _ in range(n)] for split, n in splits.items()}
    for split, pairs in corpus.items():
        for k, lang in enumerate(("en", "de")):
            (out / f"{split}.{lang}").write_text("".join(p[k] + "\n" for p in pairs), encoding="utf-8")
    text = [side for p in corpus["train"] for side in p]
    SentencePieceVocab.train(text, pieces).save(out / "vocab")
    print(f"toy corpus in {out}: {splits}, sentencepiece model {out / 'vocab.spm'}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--toolkit", choices=sorted(TOOLKIT_CLASSES), help="which peer toolkit to run")
    parser.add_argument("--data", type=Path, help="directory with train/dev/test.{SRC,TGT} plain text")
    parser.add_argument("--spm", type=Path, help="the shared sentencepiece model file")
    parser.add_argument("--src", default="en", help="source language suffix (default en)")
    parser.add_argument("--tgt", default="de", help="target language suffix (default de)")
    parser.add_argument(
        "--recipe",
        choices=sorted(RECIPES),
        default="own",
        help="own: the toolkit's documented recipe (default); small-fast: transduce's small-fast "
        "preset in the toolkit's terms (pass its 4,000-piece --spm)",
    )
    parser.add_argument("--seed", type=int, default=1, help="the toolkit's random seed (default 1)")
    parser.add_argument("--minutes", type=float, default=60, help="training wall-time budget (default 60)")
    parser.add_argument("--threads", type=int, default=1, help="OMP/MKL threads of the toolkit (default 1)")
    parser.add_argument("--host", help=HOST_HELP)
    parser.add_argument("--out", type=Path, default=OUT / "toolkits", help="where runs work")
    parser.add_argument(
        "--records",
        type=Path,
        default=RECORDS / "mt-compare",
        help="where each run's JSON result goes (committed; bench/mt/recipes.py --report tables them)",
    )
    parser.add_argument(
        "--curve-points", type=int, default=4, help="dev validations during training (default 4)"
    )
    parser.add_argument(
        "--dev-lines", type=int, default=500, help="dev lines validated during training (default 500)"
    )
    parser.add_argument(
        "--test-lines", type=int, help="score only the first N test lines (default: all; for smoke tests)"
    )
    parser.add_argument(
        "--decode-shard-lines",
        type=int,
        default=250,
        help="test lines a decoding process takes (default 250): finished shards are kept, so a "
        "killed decoding resumes",
    )
    parser.add_argument(
        "--decode-jobs",
        type=int,
        default=1,
        help="decoding processes at a time, each with --threads threads (default 1); the record's "
        "decode_seconds sums them",
    )
    parser.add_argument(
        "--timing-updates", type=int, default=10, help="updates in the timing run (default 10)"
    )
    parser.add_argument(
        "--make-toy",
        type=Path,
        metavar="DIR",
        help="write a tiny synthetic en->de corpus and a "
        "500-piece sentencepiece model (DIR/vocab.spm) to DIR, and exit",
    )
    args = parser.parse_args()
    if args.make_toy:
        make_toy(args.make_toy)
        return
    if not (args.toolkit and args.data and args.spm):
        parser.error("--toolkit, --data and --spm are required (or --make-toy DIR)")
    run(args)


if __name__ == "__main__":
    main()
