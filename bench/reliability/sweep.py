"""The black-box bad-input sweep behind docs/bad-input-sweep.md: every case runs the real command
line, the Python API (in a child process of its own) or a running server, and is classed by what
a user sees: a clean error (one `error:` line on stderr, exit status 2; an exception of a
documented type naming the argument; a 4xx), a documented behaviour (a case that is meant to
work), a traceback (or an internal exception, or a 5xx), a hang (past the timeout), wrongly
accepted (exit 0 where it should have been refused), data lost (a file it was not asked to
replace removed or changed), or other (an error that is not one clean line, or that does not
name what is wrong).

    python -m bench.reliability.sweep                  # every case; fixtures built once in bench/out/sweep
    python -m bench.reliability.sweep --only libre     # the cases whose name or area holds 'libre'
    python -m bench.reliability.sweep --list           # the cases, not run
    python -m bench.reliability.sweep --src /tmp/wt/src --record   # another tree; write the record

Fixtures (tiny models trained for 2 steps: a copy-task model, a text model on a generated
English->German corpus, a multilingual one, a Universal Transformer, their CTranslate2 exports,
a random M2M100 directory) are built by the tree under test on the first run and kept (delete the
work folder when what builds them changed). Not part of the test suite: one case at a time (the
default `--jobs 1`) it takes about 15 minutes on two loaded cores. The areas are issue 87's
(2026-12-04): the
CTranslate2 engine and exports, the Python API, search modes, multilingual data and decoding,
the LibreTranslate-compatible API, `import m2m100`, and a brief re-check of compressed inputs
and `prepare --workers`.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import queue
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
WORK = ROOT / "bench" / "out" / "sweep"
OUTCOMES = ("clean error", "documented", "traceback", "hang", "wrongly accepted", "data lost", "other")
SIZES = [
    "model.d_model=32",
    "model.heads=4",
    "model.d_ff=64",
    "model.encoder_layers=1",
    "model.decoder_layers=1",
    "train.warmup=10",
    "train.log_every=1000",
]
TINY = [
    *SIZES,
    "data.task=copy",
    "data.task_train_max_len=6",
    "data.task_test_max_len=8",
    "data.task_train_size=300",
    "data.task_eval_size=20",
    "data.max_tokens=200",
]
STEPS = ["train.steps=2", "train.save_every=2", "train.validate_every=2", "--no-progress"]
WORDS = "the cat sat on a mat and dog ran far away big red fox jumps over lazy small house tree"
KEY = "sekret"


# --------------------------------------------------------------------------------------------
# Fixtures


@dataclass(frozen=True)
class Fixtures:
    root: Path

    def __getattr__(self, name: str) -> Path:
        return self.root / name


def _corpus(folder: Path, src: str, tgt: str, change: Callable[[str], str], seed: int) -> None:
    import random

    rng, words = random.Random(seed), WORDS.split()
    folder.mkdir(parents=True, exist_ok=True)
    for split, size in (("train", 300), ("dev", 12), ("test", 12)):
        lines = [" ".join(rng.choice(words) for _ in range(rng.randint(2, 7))) for _ in range(size)]
        (folder / f"{split}.{src}").write_text("".join(f"{line}\n" for line in lines))
        (folder / f"{split}.{tgt}").write_text("".join(f"{change(line)}\n" for line in lines))


M2M100_BUILDER = r"""
import io, json, sys
from pathlib import Path
import sentencepiece as spm, torch, transformers
folder = Path(sys.argv[1]); folder.mkdir(parents=True, exist_ok=True)
texts = ["the quick brown fox jumps over the lazy dog", "a cat sat on the mat", "hello world",
         "der schnelle braune fuchs springt", "eine katze sitzt auf der matte", "hallo welt"]
buffer = io.BytesIO()
spm.SentencePieceTrainer.train(sentence_iterator=iter(texts * 20), model_writer=buffer, vocab_size=60,
                               model_type="bpe", minloglevel=2)
(folder / "sentencepiece.bpe.model").write_bytes(buffer.getvalue())
sp = spm.SentencePieceProcessor(model_proto=buffer.getvalue())
vocab = {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3}
for i in range(sp.get_piece_size()):
    if not (sp.is_control(i) or sp.is_unknown(i)):
        vocab.setdefault(sp.id_to_piece(i), len(vocab))
(folder / "vocab.json").write_text(json.dumps(vocab))
torch.manual_seed(0)
config = transformers.M2M100Config(vocab_size=len(vocab) + 108, d_model=32, encoder_layers=1,
    decoder_layers=1,
    encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64,
    max_position_embeddings=128)
transformers.M2M100ForConditionalGeneration(config).eval().save_pretrained(folder)
transformers.M2M100Tokenizer(vocab_file=str(folder / "vocab.json"),
                             spm_file=str(folder / "sentencepiece.bpe.model")).save_pretrained(folder)
"""


def build_fixtures(fx: Fixtures, env: dict[str, str]) -> None:
    """The fixtures, each built unless already there (a marker file says it is complete)."""

    def step(name: str, *commands: list[str]) -> None:
        if (fx.root / f".{name}.done").exists():
            return
        print(f"fixture {name} ...", flush=True)
        for command in commands:
            done = subprocess.run(command, cwd=fx.root, env=env, capture_output=True, text=True, timeout=1800)
            if done.returncode != 0:
                raise SystemExit(f"fixture {name}: {' '.join(command)} failed:\n{done.stdout}\n{done.stderr}")
        (fx.root / f".{name}.done").write_text("")

    fx.root.mkdir(parents=True, exist_ok=True)
    t = [sys.executable, "-m", "transduce"]
    if not (fx.root / ".corpora.done").exists():
        _corpus(fx.corpus_text, "en", "de", str.upper, 0)
        _corpus(fx.corpus_de, "en", "de", str.upper, 1)
        _corpus(fx.corpus_fr, "en", "fr", lambda s: " ".join(reversed(s.split())), 2)
        (fx.root / ".corpora.done").write_text("")
    prep = ["--vocab-size", "400", "--workers", "1"]
    step("data_text", [*t, "prepare", "corpus_text", "--src", "en", "--tgt", "de", *prep, "-o", "data_text"])
    small = [*t, "train", "small", *SIZES, "data.max_tokens=400", *STEPS]
    step("run_text", [*small, f"data.dataset={fx.data_text}", "--run-dir", "run_text"])
    step("run_copy", [*t, "train", "small", *TINY, *STEPS, "--run-dir", "run_copy"])
    step("run_ut", [*t, "train", "small", *TINY, *STEPS, "model.arch=universal", "--run-dir", "run_ut"])
    step(
        "data_multi",
        [*t, "prepare", "--pair", "en-de=corpus_de", "--pair", "en-fr=corpus_fr", *prep, "-o", "data_multi"],
    )
    step("run_multi", [*small, f"data.dataset={fx.data_multi}", "--run-dir", "run_multi"])
    step("ct2_copy", [*t, "export", "run_copy", "--format", "ctranslate2", "-o", "ct2_copy"])
    step("ct2_text", [*t, "export", "run_text", "--format", "ctranslate2", "-o", "ct2_text"])
    step("short_copy", [*t, "shortlist", "run_copy/data", "-o", "short_copy.safetensors"])
    step(
        "m2m100",
        [sys.executable, "-c", M2M100_BUILDER, "m2m_hf"],
        [*t, "import", "m2m100", "m2m_hf", "-o", "m2m_ours"],
    )


def checkpoint_of(run: Path) -> Path:
    return sorted((run / "checkpoints").glob("ckpt-*"))[-1]


# --------------------------------------------------------------------------------------------
# Cases


@dataclass
class Ctx:
    """What a case's builder gets: its own empty folder, the fixtures, and helpers."""

    dir: Path
    fx: Fixtures
    port: int = 0

    def copy(self, source: Path, name: str | None = None) -> Path:
        target = self.dir / (name or source.name)
        (shutil.copytree if source.is_dir() else shutil.copy2)(source, target, symlinks=True)
        return target

    def ckpt(self, run: Path, name: str = "ck") -> Path:
        """A copy of the run's newest checkpoint, without the CTranslate2 exports cached there."""
        target = self.dir / name
        shutil.copytree(checkpoint_of(run), target, ignore=shutil.ignore_patterns("ctranslate2-*"))
        return target

    def write(self, name: str, text: str | bytes) -> str:
        path = self.dir / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(text if isinstance(text, bytes) else text.encode())
        return str(path)

    def fifo(self, name: str) -> str:
        os.mkfifo(self.dir / name)
        return str(self.dir / name)

    def edit_json(self, path: Path, change: Callable[[Any], Any]) -> Path:
        data = json.loads(path.read_text())
        new = change(data)
        path.write_text(json.dumps(data if new is None else new))
        return path


@dataclass
class Case:
    name: str
    area: str
    kind: str  # cli, api or http
    expect: str  # error (it must be refused) or ok (a documented behaviour)
    run: Any  # cli: Ctx -> argv; api: code; http: (server, method, path, request keywords)
    names: str = ""  # a fragment a clean error must hold: what is wrong
    guard: tuple[str, ...] = ()  # paths under the case folder that must keep their files as they were
    stdin: str = "1 2\n"
    note: str = ""


CASES: list[Case] = []


def _unique(cases: list[Case]) -> list[Case]:
    names = Counter(c.name for c in cases)
    twice = [n for n, k in names.items() if k > 1]
    assert not twice, f"cases named twice: {twice}"
    return cases


def cli(area: str, name: str, run: Callable[[Ctx], list[str]], names: str = "", **more: Any) -> None:
    CASES.append(Case(name, area, "cli", more.pop("expect", "error"), run, names, **more))


def api(area: str, name: str, code: str, names: str = "", **more: Any) -> None:
    CASES.append(Case(name, area, "api", more.pop("expect", "error"), code, names, **more))


def http(area: str, name: str, server: str, method: str, path: str, names: str = "", **more: Any) -> None:
    expect = more.pop("expect", "error")
    note = more.pop("note", "")
    CASES.append(Case(name, area, "http", expect, (server, method, path, more), names, note=note))


def _damaged_export(part: str, damage: Callable[[Path], object], names: str, *, text: bool = False) -> None:
    """A case per command: translate, evaluate, score and serve on an export damaged so."""

    def argv(command: str) -> Callable[[Ctx], list[str]]:
        def build(c: Ctx) -> list[str]:
            folder = c.copy(c.fx.ct2_text if text else c.fx.ct2_copy, "exp")
            damage(folder)
            line = "the cat" if text else "1 2"
            extra = {
                "translate": ["-i", c.write("in.txt", f"{line}\n")],
                "evaluate": [
                    "--src",
                    c.write("in.txt", f"{line}\n"),
                    "--ref",
                    c.write("ref.txt", f"{line}\n"),
                ],
                "score": ["--src", c.write("in.txt", f"{line}\n"), "--tgt", c.write("ref.txt", f"{line}\n")],
                "serve": ["--port", str(c.port)],
            }[command]
            return [command, str(folder), "--engine", "ctranslate2", *extra]

        return build

    for command in ("translate", "evaluate", "score", "serve"):
        cli("ct2-export", f"{command}-{part}", argv(command), names, guard=("exp",))


def _bytes_cut(name: str, keep: float) -> Callable[[Path], None]:
    def damage(folder: Path) -> None:
        data = (folder / name).read_bytes()
        (folder / name).write_bytes(data[: int(len(data) * keep)])

    return damage


def _remove(name: str) -> Callable[[Path], None]:
    def damage(folder: Path) -> None:
        path = folder / name
        shutil.rmtree(path) if path.is_dir() else path.unlink()

    return damage


def _replace(name: str, content: bytes) -> Callable[[Path], None]:
    return lambda folder: (folder / name).write_bytes(content)


def _info(change: Callable[[dict], object]) -> Callable[[Path], None]:
    def damage(folder: Path) -> None:
        info = json.loads((folder / "transduce.json").read_text())
        new = change(info)
        (folder / "transduce.json").write_text(json.dumps(info if new is None else new))

    return damage


def _foreign_info(folder: Path) -> None:
    """transduce.json of another export (the text model's) beside this one's model.bin."""
    shutil.copy2(FX.ct2_text / "transduce.json", folder / "transduce.json")


def _dir_for(name: str) -> Callable[[Path], None]:
    def damage(folder: Path) -> None:
        (folder / name).unlink()
        (folder / name).mkdir()

    return damage


def _fifo_for(name: str) -> Callable[[Path], None]:
    def damage(folder: Path) -> None:
        (folder / name).unlink()
        os.mkfifo(folder / name)

    return damage


def _vocab_cut(folder: Path) -> None:
    """CTranslate2's vocabulary file with its last ten entries gone."""
    names = [p for p in folder.iterdir() if p.name.endswith("vocabulary.json")]
    for path in names:
        entries = json.loads(path.read_text())
        path.write_text(json.dumps(entries[:-10]))


def _ct2_config(change: Callable[[dict], object]) -> Callable[[Path], None]:
    def damage(folder: Path) -> None:
        config = json.loads((folder / "config.json").read_text())
        change(config)
        (folder / "config.json").write_text(json.dumps(config))

    return damage


SINGLE_NAMES = {
    "model-bin-is-dir": "model.bin",
    "model-bin-fifo": "model.bin",
    "transduce-json-dir": "transduce.json",
    "transduce-json-fifo": "transduce.json",
    "transduce-json-empty-object": "transduce.json",
    "transduce-json-sha-number": "model.bin",
    "transduce-json-checkpoint-config-garbage": "transduce.json",
    "ct2-config-garbage": "config.json",
    "ct2-config-list": "config.json",
    "ct2-config-eos-changed": "config.json",
    "vocabulary-missing": "vocabulary",
    "vocabulary-garbage": "vocabulary",
    "src-vocab-missing": "src",
    "export-empty-dir": "exp",
}


# CTranslate2 exports damaged after `export`, and the engine's options

a = "ct2-export"
_damaged_export("model-bin-truncated", _bytes_cut("model.bin", 0.5), "model.bin")
_damaged_export("model-bin-missing", _remove("model.bin"), "model.bin")
_damaged_export("transduce-json-missing", _remove("transduce.json"), "transduce.json")
_damaged_export("transduce-json-garbage", _replace("transduce.json", b'{"checkpoint": '), "transduce.json")
_damaged_export("transduce-json-list", _replace("transduce.json", b"[1, 2]"), "transduce.json")
_damaged_export("transduce-json-foreign", _foreign_info, "checksum")
_damaged_export("ct2-config-missing", _remove("config.json"), "config.json")
_damaged_export("vocabulary-cut", _vocab_cut, "vocabulary")
_damaged_export("src-spm-missing", _remove("src.spm"), "src.spm", text=True)
single = [
    ("model-bin-is-dir", _dir_for("model.bin")),
    ("model-bin-fifo", _fifo_for("model.bin")),
    ("transduce-json-dir", _dir_for("transduce.json")),
    ("transduce-json-fifo", _fifo_for("transduce.json")),
    ("transduce-json-empty-object", _replace("transduce.json", b"{}")),
    ("transduce-json-sha-number", _info(lambda i: i.__setitem__("model_sha256", 5))),
    (
        "transduce-json-checkpoint-config-garbage",
        _info(lambda i: i["checkpoint"].__setitem__("config", 7)),
    ),
    (
        "transduce-json-tokenizer-name-outside",
        _info(lambda i: i.__setitem__("source_tokenizer", "../../x")),
    ),
    ("ct2-config-garbage", _replace("config.json", b"{not json")),
    ("ct2-config-list", _replace("config.json", b"[]")),
    ("ct2-config-eos-changed", _ct2_config(lambda c: c.__setitem__("eos_token", "<zzz>"))),
    (
        "vocabulary-missing",
        lambda f: [p.unlink() for p in f.iterdir() if p.name.endswith("vocabulary.json")],
    ),
    (
        "vocabulary-garbage",
        lambda f: [p.write_text("{") for p in f.iterdir() if p.name.endswith("vocabulary.json")],
    ),
    ("src-vocab-missing", lambda f: [p.unlink() for p in f.iterdir() if p.name.startswith("src.")]),
    ("export-empty-dir", lambda f: [_remove(p.name)(f) for p in list(f.iterdir())]),
]
for part, damage in single:
    names = SINGLE_NAMES.get(part, "")

    def build(c: Ctx, damage: Callable[[Path], object] = damage) -> list[str]:
        folder = c.copy(c.fx.ct2_copy, "exp")
        damage(folder)
        return ["translate", str(folder), "--engine", "ctranslate2", "-i", c.write("in.txt", "1 2\n")]

    if part == "transduce-json-tokenizer-name-outside":
        note = "the field names a file for other programs (bench/); transduce reads src.* itself"
        cli(a, f"translate-{part}", build, expect="ok", note=note, guard=("exp",))
        continue
    cli(a, f"translate-{part}", build, names, guard=("exp",))


def text_damage(part: str, damage: Callable[[Path], object]) -> None:
    """A damage to the text model's export (sentencepiece files)."""

    def build(c: Ctx) -> list[str]:
        folder = c.copy(c.fx.ct2_text, "exp")
        damage(folder)
        return ["translate", str(folder), "--engine", "ctranslate2", "-i", c.write("in.txt", "the cat\n")]

    cli(a, f"translate-text-{part}", build, "src.spm", guard=("exp",))


text_damage("src-spm-garbage", _replace("src.spm", b"not a sentencepiece model"))
text_damage("src-spm-empty", _replace("src.spm", b""))
text_damage(
    "src-spm-link-outside", lambda f: (_remove("src.spm")(f), (f / "src.spm").symlink_to("/etc/hostname"))
)

# paths that are not exports
e = "ct2-engine"
cli(
    e,
    "translate-missing-path",
    lambda c: ["translate", str(c.dir / "nope"), "--engine", "ctranslate2"],
    "nope",
)
cli(e, "translate-path-is-file", lambda c: ["translate", c.write("f", "x"), "--engine", "ctranslate2"])
cli(e, "translate-dataset-dir", lambda c: ["translate", str(c.fx.data_text), "--engine", "ctranslate2"])
cli(
    e,
    "translate-export-without-engine",
    lambda c: ["translate", str(c.fx.ct2_copy)],
    "--engine ctranslate2",
)
cli(
    e,
    "evaluate-export-without-engine",
    lambda c: ["evaluate", str(c.fx.ct2_copy), "--split", "dev"],
    "ctranslate2",
)
cli(
    e,
    "score-export-without-engine",
    lambda c: ["score", str(c.fx.ct2_copy), "--src", c.write("s", "1\n"), "--tgt", c.write("t", "1\n")],
    "ctranslate2",
)
cli(
    e,
    "serve-export-without-engine",
    lambda c: ["serve", str(c.fx.ct2_copy), "--port", str(c.port)],
    "ctranslate2",
)
cli(e, "attention-on-export", lambda c: ["attention", str(c.fx.ct2_copy), "1 2", "-o", str(c.dir / "p")])
cli(
    e,
    "evaluate-split-on-export",
    lambda c: ["evaluate", str(c.fx.ct2_copy), "--engine", "ctranslate2", "--split", "dev"],
    expect="ok",
    note="the export records the task",
)
for command, extra in (
    ("translate", []),
    ("evaluate", ["--split", "dev"]),
    ("score", ["--src", "S", "--tgt", "S"]),
    ("serve", ["--port", "PORT"]),
):

    def ut(c: Ctx, command: str = command, extra: list[str] = extra) -> list[str]:
        given = [c.write("s", "1 2\n") if x == "S" else str(c.port) if x == "PORT" else x for x in extra]
        return [command, str(c.fx.run_ut), "--engine", "ctranslate2", *given]

    cli(e, f"{command}-universal-transformer", ut, "CTranslate2 cannot hold")
cli(
    e,
    "export-universal-transformer",
    lambda c: ["export", str(c.fx.run_ut), "--format", "ctranslate2", "-o", "o"],
    "cannot",
)
cli(
    e,
    "translate-multilingual-ct2",
    lambda c: ["translate", str(c.fx.run_multi), "--engine", "ctranslate2", "--tgt-lang", "de"],
    expect="ok",
    stdin="the cat\n",
)
for device in ("gpu", "cuda", "cuda:0", "cuda:x", "cpu:1", "", "CPU"):
    for engine in ("ctranslate2", "torch"):
        cli(
            e,
            f"{engine}-device-{device or 'empty'}",
            lambda c, d=device, g=engine: ["translate", str(c.fx.run_copy), "--engine", g, "--device", d],
            "--device",
        )
for command in ("evaluate", "score", "serve"):
    cli(
        e,
        f"{command}-ct2-device-gpu",
        lambda c, cmd=command: [
            cmd,
            str(c.fx.run_copy),
            "--engine",
            "ctranslate2",
            "--device",
            "gpu",
            *(
                ["--split", "dev"]
                if cmd == "evaluate"
                else ["--src", c.write("s", "1\n"), "--tgt", c.write("s", "1\n")]
                if cmd == "score"
                else ["--port", str(c.port)]
            ),
        ],
        "--device",
    )
for q in ("int16", "float16", "INT8", ""):
    cli(
        e,
        f"ct2-quantize-{q or 'empty'}",
        lambda c, q=q: ["translate", str(c.fx.run_copy), "--engine", "ctranslate2", "--quantize", q],
        "--quantize",
    )
cli(
    e,
    "ct2-quantize-int8-on-export",
    lambda c: ["translate", str(c.fx.ct2_copy), "--engine", "ctranslate2", "--quantize", "int8"],
    expect="ok",
    note="CTranslate2 converts a float32 export's weights when loading",
)
cli(
    e,
    "ct2-threads-0",
    lambda c: ["translate", str(c.fx.run_copy), "--engine", "ctranslate2", "--threads", "0"],
    "--threads",
)
cli(
    e,
    "ct2-threads-huge",
    lambda c: ["translate", str(c.fx.run_copy), "--engine", "ctranslate2", "--threads", "100000"],
    "--threads",
)
cli(
    e,
    "ct2-engine-uppercase",
    lambda c: ["translate", str(c.fx.run_copy), "--engine", "CTranslate2"],
    "--engine",
)
cli(
    e,
    "ct2-nbest-above-beam",
    lambda c: ["translate", str(c.fx.run_copy), "--engine", "ctranslate2", "--beam", "2", "--nbest", "3"],
    "--nbest",
)
cli(
    e,
    "ct2-tgt-lang-one-pair",
    lambda c: ["translate", str(c.fx.run_text), "--engine", "ctranslate2", "--tgt-lang", "de"],
    "--tgt-lang",
    stdin="the cat\n",
)
cli(
    e,
    "ct2-score-line-counts",
    lambda c: [
        "score",
        str(c.fx.run_copy),
        "--engine",
        "ctranslate2",
        "--src",
        c.write("s", "1\n2\n"),
        "--tgt",
        c.write("t", "1\n"),
    ],
)
cli(
    e,
    "ct2-score-unknown-symbol",
    lambda c: [
        "score",
        str(c.fx.run_copy),
        "--engine",
        "ctranslate2",
        "--src",
        c.write("s", "1\n"),
        "--tgt",
        c.write("t", "zebra\n"),
    ],
    "zebra",
)
cli(
    e,
    "ct2-shortlist-other-vocab",
    lambda c: [
        "translate",
        str(c.fx.run_text),
        "--engine",
        "ctranslate2",
        "--shortlist",
        str(c.fx.root / "short_copy.safetensors"),
    ],
    "--shortlist",
    stdin="the cat\n",
)
cli(
    e,
    "ct2-shortlist-garbage",
    lambda c: [
        "translate",
        str(c.fx.run_copy),
        "--engine",
        "ctranslate2",
        "--shortlist",
        c.write("s.safetensors", "garbage"),
    ],
    "shortlist",
)


def stale_cache(c: Ctx) -> list[str]:
    ck = c.ckpt(c.fx.run_copy)
    done = subprocess.run(
        [sys.executable, "-m", "transduce", "translate", str(ck), "--engine", "ctranslate2"],
        input="1\n",
        capture_output=True,
        text=True,
        env=ENV,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    cache = next(ck.glob("ctranslate2-*"))
    with (cache / "model.bin").open("r+b") as f:
        f.seek(200)
        f.write(b"\0" * 32)
    return ["translate", str(ck), "--engine", "ctranslate2", "-i", c.write("in.txt", "1 2\n")]


cli(
    e,
    "ct2-damaged-cache-rewritten",
    stale_cache,
    expect="ok",
    note="the cache is checked and exported again",
    guard=("ck/model.safetensors", "ck/config.json"),
)


def cache_is_file(c: Ctx) -> list[str]:
    ck = c.ckpt(c.fx.run_copy)
    from_digest = json.loads((ck / "config.json").read_text())
    digest = from_digest.get("checksums", {}).get("model.safetensors", "")
    c.write(f"ck/ctranslate2-float32-{digest[:12]}", "my notes\n")
    return ["translate", str(ck), "--engine", "ctranslate2", "-i", c.write("in.txt", "1 2\n")]


cli(e, "ct2-cache-name-is-users-file", cache_is_file, "ctranslate2-float32", guard=("ck",))


def readonly_checkpoint(c: Ctx) -> list[str]:
    ck = c.ckpt(c.fx.run_copy)
    return [
        "translate",
        str(ck),
        "--engine",
        "ctranslate2",
        "-i",
        c.write("in.txt", "1 2\n"),
        "-o",
        str(ck / "out.txt"),
    ]


cli(
    e,
    "ct2-output-inside-checkpoint",
    readonly_checkpoint,
    "overwrite the input",
    note="-o inside an input is refused (docs/reliability.md)",
    guard=("ck",),
)
cli(
    e,
    "ct2-output-is-model-bin",
    lambda c: [
        "translate",
        str(c.copy(c.fx.ct2_copy, "exp")),
        "--engine",
        "ctranslate2",
        "-i",
        c.write("in.txt", "1\n"),
        "-o",
        str(c.dir / "exp" / "model.bin"),
    ],
    "model.bin",
    guard=("exp",),
)
cli(
    e,
    "ct2-output-is-transduce-json",
    lambda c: [
        "translate",
        str(c.copy(c.fx.ct2_copy, "exp")),
        "--engine",
        "ctranslate2",
        "-i",
        c.write("in.txt", "1\n"),
        "-o",
        str(c.dir / "exp" / "transduce.json"),
    ],
    "transduce.json",
    guard=("exp",),
)
cli(
    e,
    "ct2-serve-static-cache",
    lambda c: [
        "serve",
        str(c.fx.run_copy),
        "--engine",
        "ctranslate2",
        "--static-cache",
        "--port",
        str(c.port),
    ],
    "--static-cache",
)


# `transduce export`: outputs, formats, weight types, inputs

a = "export"
run = lambda c: str(c.fx.run_copy)  # noqa: E731
ex = ["export", "--format", "ctranslate2"]
cli(
    a,
    "ct2-o-foreign-dir",
    lambda c: [*ex, run(c), "-o", (c.write("mine/notes.txt", "mine"), str(c.dir / "mine"))[1]],
    "mine",
    guard=("mine",),
)
cli(a, "ct2-o-is-file", lambda c: [*ex, run(c), "-o", c.write("f.txt", "mine")], "f.txt", guard=("f.txt",))
cli(
    a,
    "ct2-o-is-file-force",
    lambda c: [*ex, run(c), "-o", c.write("f.txt", "mine"), "--force"],
    expect="ok",
    note="--force replaces it",
)
cli(
    a,
    "ct2-o-is-checkpoint",
    lambda c: [*ex, str(c.ckpt(c.fx.run_copy)), "-o", str(c.dir / "ck"), "--force"],
    "ck",
    guard=("ck",),
)
cli(
    a,
    "ct2-o-inside-checkpoint",
    lambda c: [*ex, str(c.ckpt(c.fx.run_copy)), "-o", str(c.dir / "ck" / "sub")],
    "ck",
    guard=("ck",),
)
cli(
    a,
    "ct2-o-is-run-dir",
    lambda c: [*ex, str(c.copy(c.fx.run_copy, "run")), "-o", str(c.dir / "run"), "--force"],
    "run",
    guard=("run",),
)
cli(
    a,
    "ct2-o-inside-run-dir",
    lambda c: [*ex, str(c.copy(c.fx.run_copy, "run")), "-o", str(c.dir / "run" / "checkpoints" / "x")],
    "run",
    guard=("run",),
)
cli(
    a,
    "ct2-o-missing-parent",
    lambda c: [*ex, run(c), "-o", str(c.dir / "a" / "b" / "c")],
    expect="ok",
    note="parents created",
)
cli(a, "ct2-o-empty", lambda c: [*ex, run(c), "-o", ""], "-o")
cli(a, "ct2-o-dev-null", lambda c: [*ex, run(c), "-o", "/dev/null"], "/dev/null")
cli(
    a,
    "ct2-o-link-to-dir",
    lambda c: [
        *ex,
        run(c),
        "-o",
        (c.write("d/x", "mine"), os.symlink(c.dir / "d", c.dir / "l"), str(c.dir / "l"))[2],
    ],
    "l",
    guard=("d",),
)
cli(
    a,
    "ct2-o-existing-export",
    lambda c: [*ex, run(c), "-o", str(c.copy(c.fx.ct2_copy, "exp"))],
    expect="ok",
    note="an earlier export of the command is replaced",
)
for q in ("int4", "INT8", "", "float64"):
    cli(
        a,
        f"ct2-quantization-{q or 'empty'}",
        lambda c, q=q: [*ex, run(c), "-o", "o", "--quantization", q],
        "--quantization",
    )
cli(
    a,
    "marian-with-quantization",
    lambda c: ["export", str(c.fx.run_text), "--format", "marian", "-o", "o", "--quantization", "int8"],
    "--quantization",
)
cli(
    a,
    "m2m100-with-quantization",
    lambda c: ["export", str(c.fx.m2m_ours), "--format", "m2m100", "-o", "o", "--quantization", "int8"],
    "--quantization",
)
cli(a, "ct2-with-source-lang", lambda c: [*ex, run(c), "-o", "o", "--source-lang", "en"], "--source-lang")
cli(a, "ct2-with-description-empty", lambda c: [*ex, run(c), "-o", "o", "--description", ""], "--description")
cli(a, "format-unknown", lambda c: ["export", run(c), "--format", "onnx"], "--format")
cli(a, "format-uppercase", lambda c: ["export", run(c), "--format", "CTranslate2"], "--format")
cli(a, "missing-checkpoint", lambda c: [*ex, str(c.dir / "nope"), "-o", "o"], "nope")
cli(a, "checkpoint-is-file", lambda c: [*ex, c.write("f", "x"), "-o", "o"], "f")
cli(a, "checkpoint-is-dataset", lambda c: [*ex, str(c.fx.data_text), "-o", "o"], "data_text")
cli(a, "checkpoint-is-export", lambda c: [*ex, str(c.fx.ct2_copy), "-o", "o"], "ct2_copy")
cli(
    a,
    "checkpoint-weights-damaged",
    lambda c: [
        *ex,
        str((lambda ck: (ck / "model.safetensors").write_bytes(b"x" * 64) and ck)(c.ckpt(c.fx.run_copy))),
        "-o",
        "o",
    ],
    "model.safetensors",
)
cli(
    a,
    "checkpoint-without-config",
    lambda c: [
        *ex,
        str((lambda ck: (ck / "config.json").unlink() or ck)(c.ckpt(c.fx.run_copy))),
        "-o",
        "o",
    ],
    "ck",
)
cli(
    a,
    "ct2-shortlist-missing",
    lambda c: [*ex, run(c), "-o", "o", "--shortlist", str(c.dir / "nope")],
    "nope",
)
cli(
    a,
    "ct2-shortlist-other-model",
    lambda c: [
        *ex,
        str(c.fx.run_text),
        "-o",
        "o",
        "--shortlist",
        str(c.fx.root / "short_copy.safetensors"),
    ],
    "shortlist",
)
cli(
    a,
    "marian-with-shortlist",
    lambda c: [
        "export",
        str(c.fx.run_text),
        "--format",
        "marian",
        "-o",
        "o",
        "--shortlist",
        str(c.fx.root / "short_copy.safetensors"),
    ],
    "--shortlist",
)
cli(
    a,
    "marian-of-universal",
    lambda c: ["export", str(c.fx.run_ut), "--format", "marian", "-o", "o"],
    "arch",
)
cli(a, "marian-of-symbol-model", lambda c: ["export", run(c), "--format", "marian", "-o", "o"], "")
cli(
    a,
    "m2m100-of-native",
    lambda c: ["export", str(c.fx.run_text), "--format", "m2m100", "-o", "o"],
    "M2M100",
)
cli(
    a,
    "m2m100-o-is-input",
    lambda c: [
        "export",
        str(c.copy(c.fx.m2m_ours, "ours")),
        "--format",
        "m2m100",
        "-o",
        str(c.dir / "ours"),
        "--force",
    ],
    "ours",
    guard=("ours",),
)
cli(
    a,
    "m2m100-o-is-hf-source",
    lambda c: ["export", str(c.fx.m2m_ours), "--format", "m2m100", "-o", str(c.copy(c.fx.m2m_hf, "hf"))],
    "hf",
    guard=("hf",),
)
cli(a, "ct2-of-m2m100", lambda c: [*ex, str(c.fx.m2m_ours), "-o", "o"], expect="ok")
# argos
ar = ["export", "--format", "argos"]
cli(a, "argos-symbol-model", lambda c: [*ar, run(c), "-o", "p.argosmodel"], "sentencepiece")
cli(a, "argos-multilingual", lambda c: [*ar, str(c.fx.run_multi), "-o", "p.argosmodel"], "")
cli(
    a,
    "argos-o-is-dir",
    lambda c: [*ar, str(c.fx.run_text), "-o", (c.write("d/x", "mine"), str(c.dir / "d"))[1]],
    "d",
    guard=("d",),
)
cli(
    a,
    "argos-o-is-file",
    lambda c: [*ar, str(c.fx.run_text), "-o", c.write("p.argosmodel", "mine")],
    "p.argosmodel",
    guard=("p.argosmodel",),
)
cli(
    a,
    "argos-o-missing-parent",
    lambda c: [*ar, str(c.fx.run_text), "-o", str(c.dir / "a" / "b.argosmodel")],
    "does not exist",
    note="a file's -o in a missing folder is refused, as translate's (a directory's is made)",
)
cli(
    a,
    "argos-o-inside-checkpoint",
    lambda c: [*ar, str(c.ckpt(c.fx.run_text)), "-o", str(c.dir / "ck" / "p.argosmodel")],
    "ck",
    guard=("ck",),
)
cli(
    a,
    "argos-o-other-suffix",
    lambda c: [*ar, str(c.fx.run_text), "-o", str(c.dir / "p.zip")],
    expect="ok",
    note="the name is the user's",
)
cli(
    a,
    "argos-source-lang-bad",
    lambda c: [*ar, str(c.fx.run_text), "-o", "p.argosmodel", "--source-lang", "e n"],
    "--source-lang",
)
cli(
    a,
    "argos-target-lang-empty",
    lambda c: [*ar, str(c.fx.run_text), "-o", "p.argosmodel", "--target-lang", ""],
    "--target-lang",
)
cli(
    a,
    "argos-same-languages",
    lambda c: [
        *ar,
        str(c.fx.run_text),
        "-o",
        "p.argosmodel",
        "--source-lang",
        "de",
        "--target-lang",
        "de",
    ],
    "de",
)
cli(
    a,
    "argos-version-empty",
    lambda c: [*ar, str(c.fx.run_text), "-o", "p.argosmodel", "--package-version", ""],
    "version",
)
cli(
    a,
    "argos-quantization-bad",
    lambda c: [*ar, str(c.fx.run_text), "-o", "p.argosmodel", "--quantization", "int3"],
    "--quantization",
)
cli(
    a,
    "argos-with-shortlist",
    lambda c: [
        *ar,
        str(c.fx.run_text),
        "-o",
        "p.argosmodel",
        "--shortlist",
        str(c.fx.root / "short_copy.safetensors"),
    ],
    "--shortlist",
)
cli(
    a,
    "argos-license-newline",
    lambda c: [*ar, str(c.fx.run_text), "-o", "p.argosmodel", "--license", "MIT\nevil: 1"],
    expect="ok",
    note="kept as given in metadata.json (JSON-escaped)",
)


# Search modes: --greedy, --beam, --sample, --min-len, decode.search

a = "search"
tr = lambda c, *o: ["translate", str(c.fx.run_copy), *o]  # noqa: E731
cli(a, "greedy-beam", lambda c: tr(c, "--greedy", "--beam", "4"), "--beam")
cli(a, "greedy-nbest", lambda c: tr(c, "--greedy", "--nbest", "2"), "--nbest")
cli(a, "greedy-sample", lambda c: tr(c, "--greedy", "--sample"), "--greedy")
cli(a, "greedy-alpha", lambda c: tr(c, "--greedy", "--alpha", "0.6"), "--alpha")
cli(a, "greedy-temperature", lambda c: tr(c, "--greedy", "--temperature", "0.5"), "--temperature")
cli(a, "sample-beam", lambda c: tr(c, "--sample", "--beam", "2"), "--beam")
cli(a, "sample-nbest", lambda c: tr(c, "--sample", "--nbest", "2"), "--nbest")
cli(
    a,
    "greedy-nbest-1",
    lambda c: tr(c, "--greedy", "--nbest", "1"),
    expect="ok",
    note="one output per input is what greedy gives",
)
cli(
    a,
    "evaluate-greedy-beam",
    lambda c: ["evaluate", str(c.fx.run_copy), "--split", "dev", "--greedy", "--beam", "2"],
    "--beam",
)
cli(a, "min-len-above-limit", lambda c: tr(c, "--min-len", "100"), "--min-len")
cli(
    a,
    "min-len-above-limit-ct2",
    lambda c: tr(c, "--min-len", "100", "--engine", "ctranslate2"),
    "--min-len",
)
cli(
    a,
    "min-len-above-limit-evaluate",
    lambda c: ["evaluate", str(c.fx.run_copy), "--split", "dev", "--min-len", "100"],
    "--min-len",
)
cli(a, "min-len-negative", lambda c: tr(c, "--min-len", "-1"), "--min-len")
cli(
    a,
    "min-len-with-small-max-len-b",
    lambda c: tr(c, "--min-len", "5", "--max-len-a", "0", "--max-len-b", "3"),
    "--min-len",
)
cli(
    a,
    "min-len-empty-line",
    lambda c: tr(c, "--min-len", "100"),
    expect="ok",
    stdin="\n",
    note="an empty line gives an empty line",
)
cli(a, "max-len-a-negative", lambda c: tr(c, "--max-len-a", "-1"), "--max-len-a")
cli(
    a,
    "max-len-b-zero",
    lambda c: tr(c, "--max-len-a", "0", "--max-len-b", "0"),
    expect="ok",
    note="an output limit below 1 token is 1 (decode.search.max_output_length)",
)
for value in ("bogus", "Greedy", "1"):
    cli(
        a,
        f"config-search-{value}",
        lambda c, v=value: ["inspect", "small", f"decode.search={v}"],
        "decode.search",
    )
cli(
    a,
    "config-search-greedy-with-beam",
    lambda c: ["inspect", "small", "decode.search=greedy", "decode.beam=8"],
    expect="ok",
    note="a config holds every setting; beam search's stay for when it is asked for",
)
cli(
    a,
    "config-search-sample-with-nbest",
    lambda c: ["inspect", "small", "decode.search=sample", "decode.nbest=3"],
    expect="ok",
    note="as decode.search=greedy with decode.beam",
)


def greedy_checkpoint(c: Ctx) -> list[str]:
    ck = c.ckpt(c.fx.run_copy)
    c.edit_json(ck / "config.json", lambda m: m["config"]["decode"].__setitem__("search", "greedy"))
    return ["translate", str(ck), "--beam", "4"]


cli(
    a,
    "checkpoint-greedy-given-beam",
    greedy_checkpoint,
    expect="ok",
    note="a checkpoint trained with decode.search=greedy (config.json edited); --beam asks for beam search",
)


def bad_search_checkpoint(c: Ctx) -> list[str]:
    ck = c.ckpt(c.fx.run_copy)
    c.edit_json(ck / "config.json", lambda m: m["config"]["decode"].__setitem__("search", "fast"))
    return ["translate", str(ck)]


cli(a, "checkpoint-search-unknown", bad_search_checkpoint, "search")


# Multilingual data (prepare --pair, --tag-format) and decoding (--tgt-lang)

a = "multilingual"
p = ["prepare", "--vocab-size", "400", "--workers", "1", "-o", "out"]
de = lambda c: f"en-de={c.fx.corpus_de}"  # noqa: E731
fr = lambda c: f"en-fr={c.fx.corpus_fr}"  # noqa: E731
for spec in ("ende=D", "en-de", "en-de=", "=D", "-de=D", "en-=D", "e n-de=D", "en-de-fr=D", "en_US-de=D"):

    def bad_pair(c: Ctx, spec: str = spec) -> list[str]:
        return [*p, "--pair", spec.replace("D", str(c.fx.corpus_de)), "--pair", fr(c)]

    cli(
        a,
        f"pair-spec-{spec}",
        bad_pair,
        "train.en_US" if spec == "en_US-de=D" else "--pair",
        note="a code of the user's own, read as the files' suffix" if spec == "en_US-de=D" else "",
    )
cli(a, "pair-twice", lambda c: [*p, "--pair", de(c), "--pair", de(c)], "twice")
cli(
    a,
    "pair-one-only",
    lambda c: [*p, "--pair", de(c)],
    "two --pair",
)
cli(a, "pair-same-language", lambda c: [*p, "--pair", f"en-en={c.fx.corpus_de}", "--pair", fr(c)], "en-en")
cli(a, "pair-dir-missing", lambda c: [*p, "--pair", f"en-de={c.dir / 'nope'}", "--pair", fr(c)], "nope")
cli(a, "pair-dir-is-file", lambda c: [*p, "--pair", f"en-de={c.write('f', 'x')}", "--pair", fr(c)], "f")
cli(
    a,
    "pair-files-other-languages",
    lambda c: [*p, "--pair", f"en-es={c.fx.corpus_de}", "--pair", fr(c)],
    "es",
)
cli(
    a,
    "pair-with-data-dir",
    lambda c: [*p, str(c.fx.corpus_text), "--pair", de(c), "--pair", fr(c)],
    "--pair",
)
cli(
    a,
    "pair-with-src-tgt",
    lambda c: [*p, "--pair", de(c), "--pair", fr(c), "--src", "en", "--tgt", "de"],
    "--src",
)
cli(a, "pair-with-task", lambda c: [*p, "--pair", de(c), "--task", "copy"], "--task")
cli(
    a,
    "pair-with-separate-vocab",
    lambda c: [*p, "--pair", de(c), "--pair", fr(c), "--separate-vocab"],
    "--separate-vocab",
)
cli(
    a,
    "pair-with-vocab-from-one-pair",
    lambda c: [*p, "--pair", de(c), "--pair", fr(c), "--vocab-from", str(c.fx.run_text)],
    "--vocab-from",
)
cli(
    a,
    "pair-o-inside-pair-dir",
    lambda c: [
        "prepare",
        "--vocab-size",
        "400",
        "--pair",
        f"en-de={c.copy(c.fx.corpus_de, 'de')}",
        "--pair",
        fr(c),
        "-o",
        str(c.dir / "de" / "out"),
        "--force",
    ],
    "de",
    guard=("de",),
)
cli(
    a,
    "pair-o-is-pair-dir",
    lambda c: [
        "prepare",
        "--vocab-size",
        "400",
        "--pair",
        f"en-de={c.copy(c.fx.corpus_de, 'de')}",
        "--pair",
        fr(c),
        "-o",
        str(c.dir / "de"),
        "--force",
    ],
    "de",
    guard=("de",),
)


def dev_missing(c: Ctx) -> list[str]:
    d = c.copy(c.fx.corpus_de, "de")
    (d / "dev.de").unlink()
    return [*p, "--pair", f"en-de={d}", "--pair", fr(c)]


cli(a, "pair-dev-side-missing", dev_missing, "dev.de")


def pair_lines_differ(c: Ctx) -> list[str]:
    d = c.copy(c.fx.corpus_de, "de")
    with (d / "train.de").open("a") as f:
        f.write("EXTRA\n")
    return [*p, "--pair", f"en-de={d}", "--pair", fr(c)]


cli(a, "pair-line-counts-differ", pair_lines_differ, "train")


def tag_in_corpus(c: Ctx) -> list[str]:
    d = c.copy(c.fx.corpus_de, "de")
    with (d / "train.en").open("a") as f, (d / "train.de").open("a") as g:
        f.write(">>fra<< the cat\n")
        g.write("THE CAT\n")
    return [*p, "--pair", f"en-de={d}", "--pair", fr(c)]


cli(a, "pair-corpus-holds-a-tag", tag_in_corpus, ">>fra<<")
for form in (
    "{lang}",
    "<{lang}> ",
    "{lang}{lang}",
    "{x}",
    "{",
    "{lang",
    "{0}",
    "{lang!r}",
    "__{lang}__",
    "",
    ">> {lang} <<",
    "<2{lang}>",
):
    ok = form in ("__{lang}__", "<2{lang}>")
    cli(
        a,
        f"tag-format-{form or 'empty'}",
        lambda c, f=form: [*p, "--pair", de(c), "--pair", fr(c), "--tag-format", f],
        "--tag-format",
        expect="ok" if ok else "error",
    )
cli(
    a,
    "tag-format-without-pair",
    lambda c: [
        "prepare",
        str(c.fx.corpus_text),
        "--src",
        "en",
        "--tgt",
        "de",
        "--vocab-size",
        "400",
        "-o",
        "out",
        "--tag-format",
        "__{lang}__",
    ],
    "--tag-format",
)
# decoding
m = lambda c: str(c.fx.run_multi)  # noqa: E731
cli(
    a,
    "translate-tgt-lang-unknown",
    lambda c: ["translate", m(c), "--tgt-lang", "xx"],
    "--tgt-lang",
    stdin="the cat\n",
)
cli(
    a,
    "translate-tgt-lang-empty",
    lambda c: ["translate", m(c), "--tgt-lang", ""],
    "--tgt-lang",
    stdin="the cat\n",
)
cli(
    a,
    "translate-tgt-lang-tag-form",
    lambda c: ["translate", m(c), "--tgt-lang", ">>deu<<"],
    "--tgt-lang",
    stdin="the cat\n",
)
cli(
    a,
    "translate-tgt-lang-iso3",
    lambda c: ["translate", m(c), "--tgt-lang", "fra"],
    expect="ok",
    stdin="the cat\n",
)
cli(a, "translate-no-tgt-lang", lambda c: ["translate", m(c)], "--tgt-lang", stdin="the cat\n")
cli(
    a,
    "translate-unknown-tag-in-line",
    lambda c: ["translate", m(c)],
    "--tgt-lang",
    stdin=">>spa<< the cat\n",
)
cli(
    a,
    "translate-tag-only-line",
    lambda c: ["translate", m(c)],
    expect="ok",
    stdin=">>deu<<\n",
    note="a tag alone: an empty output",
)
cli(
    a,
    "translate-tgt-lang-one-pair",
    lambda c: ["translate", str(c.fx.run_text), "--tgt-lang", "de"],
    "--tgt-lang",
    stdin="the cat\n",
)
cli(
    a,
    "translate-tgt-lang-symbol-model",
    lambda c: ["translate", str(c.fx.run_copy), "--tgt-lang", "de"],
    "--tgt-lang",
)
cli(
    a,
    "translate-tgt-lang-ensemble",
    lambda c: ["translate", m(c), m(c), "--tgt-lang", "de"],
    expect="ok",
    stdin="the cat\n",
)
cli(
    a,
    "evaluate-tgt-lang-unknown",
    lambda c: [
        "evaluate",
        m(c),
        "--src",
        c.write("s", "the cat\n"),
        "--ref",
        c.write("r", "THE CAT\n"),
        "--tgt-lang",
        "xx",
    ],
    "--tgt-lang",
)
cli(
    a,
    "evaluate-no-tgt-lang",
    lambda c: ["evaluate", m(c), "--src", c.write("s", "the cat\n"), "--ref", c.write("r", "THE CAT\n")],
    "--tgt-lang",
)
cli(
    a,
    "evaluate-hyp-with-tgt-lang",
    lambda c: [
        "evaluate",
        m(c),
        "--hyp",
        c.write("h", "THE CAT\n"),
        "--ref",
        c.write("r", "THE CAT\n"),
        "--tgt-lang",
        "de",
    ],
    "--tgt-lang",
)
cli(a, "evaluate-split-test-multilingual", lambda c: ["evaluate", m(c), "--split", "test"], "")
cli(
    a,
    "score-tgt-lang-unknown",
    lambda c: [
        "score",
        m(c),
        "--src",
        c.write("s", "the cat\n"),
        "--tgt",
        c.write("t", "THE CAT\n"),
        "--tgt-lang",
        "xx",
    ],
    "--tgt-lang",
)
cli(
    a,
    "score-no-tgt-lang",
    lambda c: ["score", m(c), "--src", c.write("s", "the cat\n"), "--tgt", c.write("t", "THE CAT\n")],
    "--tgt-lang",
)
cli(
    a,
    "score-tgt-lang-one-pair",
    lambda c: [
        "score",
        str(c.fx.run_text),
        "--src",
        c.write("s", "the cat\n"),
        "--tgt",
        c.write("t", "THE CAT\n"),
        "--tgt-lang",
        "de",
    ],
    "--tgt-lang",
)
cli(
    a,
    "attention-multilingual-untagged",
    lambda c: ["attention", m(c), "the cat", "-o", str(c.dir / "p")],
    "",
)
cli(
    a,
    "serve-multilingual-target-lang-unknown",
    lambda c: ["serve", m(c), "--source-lang", "en", "--target-lang", "xx", "--port", str(c.port)],
    "for a model of one pair",
    note="the pairs are the model's own (prepare --pair)",
)
cli(
    a,
    "serve-source-lang-bad-code",
    lambda c: [
        "serve",
        str(c.fx.run_copy),
        "--source-lang",
        "e n",
        "--target-lang",
        "de",
        "--port",
        str(c.port),
    ],
    "--source-lang",
)
cli(
    a,
    "serve-source-lang-only",
    lambda c: ["serve", str(c.fx.run_copy), "--source-lang", "en", "--port", str(c.port)],
    "--target-lang",
)
cli(
    a,
    "serve-source-lang-empty",
    lambda c: ["serve", str(c.fx.run_text), "--source-lang", "", "--port", str(c.port)],
    "--source-lang",
)
cli(
    a,
    "serve-target-lang-same",
    lambda c: [
        "serve",
        str(c.fx.run_copy),
        "--source-lang",
        "en",
        "--target-lang",
        "en",
        "--port",
        str(c.port),
    ],
    "en",
)
cli(
    a,
    "train-pair-temperature-zero",
    lambda c: [
        "train",
        "small",
        *SIZES,
        f"data.dataset={c.fx.data_multi}",
        "data.pair_temperature=0",
        *STEPS,
        "--run-dir",
        "r",
    ],
    "pair_temperature",
)
cli(
    a,
    "train-pair-temperature-one-pair-data",
    lambda c: [
        "train",
        "small",
        *SIZES,
        f"data.dataset={c.fx.data_text}",
        "data.pair_temperature=5",
        *STEPS,
        "--run-dir",
        "r",
    ],
    "pair_temperature",
)


# `import m2m100` on broken directories

a = "import-m2m100"
im = lambda c, src: ["import", "m2m100", str(src), "-o", str(c.dir / "out")]  # noqa: E731


def broken(part: str, damage: Callable[[Path], object], names: str = "", **more: Any) -> None:
    def build(c: Ctx) -> list[str]:
        folder = c.copy(c.fx.m2m_hf, "hf")
        damage(folder)
        return im(c, folder)

    cli(a, part, build, names, guard=("hf",), **more)


cli(a, "dir-missing", lambda c: im(c, c.dir / "nope"), "nope")
cli(a, "dir-is-file", lambda c: im(c, c.write("f", "x")), "f")
cli(a, "dir-empty", lambda c: im(c, (c.dir / "e").mkdir() or c.dir / "e"), "config.json")
cli(a, "marian-dir", lambda c: im(c, c.fx.run_copy), "")
broken("config-is-dir", _dir_for("config.json"), "config.json")
broken("config-fifo", _fifo_for("config.json"), "config.json")
broken("weights-fifo", _fifo_for("model.safetensors"), "model.safetensors")
broken("weights-truncated", _bytes_cut("model.safetensors", 0.5), "model.safetensors")
broken(
    "weights-link-to-dev-zero",
    lambda f: (_remove("model.safetensors")(f), (f / "model.safetensors").symlink_to("/dev/zero")),
    "model.safetensors",
)
broken("spm-fifo", _fifo_for("sentencepiece.bpe.model"), "sentencepiece.bpe.model")
broken(
    "tokenizer-config-missing",
    _remove("tokenizer_config.json"),
    expect="ok",
    note="M2M100Tokenizer's layout, read from vocab.json, is the one assumed",
)
broken("tokenizer-config-garbage", _replace("tokenizer_config.json", b"{"), "tokenizer_config.json")
broken("tokenizer-config-list", _replace("tokenizer_config.json", b"[]"), "tokenizer_config.json")
broken(
    "generation-config-missing",
    _remove("generation_config.json"),
    expect="ok",
    note="config.json holds the special ids too",
)
broken("generation-config-garbage", _replace("generation_config.json", b"nope"), "generation_config.json")
broken("vocab-list", _replace("vocab.json", b"[1, 2]"), "vocab.json")
broken(
    "vocab-string-ids",
    lambda f: f.joinpath("vocab.json").write_text(
        json.dumps({k: str(v) for k, v in json.loads(f.joinpath("vocab.json").read_text()).items()})
    ),
    "vocab.json",
)
broken(
    "vocab-negative-id",
    lambda f: f.joinpath("vocab.json").write_text(
        json.dumps({**json.loads(f.joinpath("vocab.json").read_text()), "zz": -5})
    ),
    "vocab.json",
)
broken(
    "config-vocab-size-zero",
    lambda f: Ctx(f, FX).edit_json(f / "config.json", lambda d: d.__setitem__("vocab_size", 0)),
    "vocab_size",
)
broken(
    "config-layers-huge",
    lambda f: Ctx(f, FX).edit_json(f / "config.json", lambda d: d.__setitem__("encoder_layers", 10**9)),
    "encoder_layers",
)
broken(
    "config-max-positions-zero",
    lambda f: Ctx(f, FX).edit_json(f / "config.json", lambda d: d.__setitem__("max_position_embeddings", 0)),
    "max_position_embeddings",
)
broken("config-nested-deep", _replace("config.json", b"[" * 100000 + b"]" * 100000), "config.json")
cli(
    a,
    "o-is-hf-dir",
    lambda c: ["import", "m2m100", str(c.copy(c.fx.m2m_hf, "hf")), "-o", str(c.dir / "hf"), "--force"],
    "hf",
    guard=("hf",),
)
cli(
    a,
    "o-inside-hf-dir",
    lambda c: ["import", "m2m100", str(c.copy(c.fx.m2m_hf, "hf")), "-o", str(c.dir / "hf" / "out")],
    "hf",
    guard=("hf",),
)
cli(
    a,
    "o-foreign-dir",
    lambda c: [
        "import",
        "m2m100",
        str(c.fx.m2m_hf),
        "-o",
        (c.write("mine/x", "mine"), str(c.dir / "mine"))[1],
    ],
    "mine",
    guard=("mine",),
)


def nameless_output(c: Ctx) -> list[str]:
    c.write("mine.txt", "mine")  # the working directory, which -o '' names, holds a file of the user's
    return ["import", "m2m100", str(c.fx.m2m_hf), "-o", "", "--force"]


cli(
    a,
    "o-empty-force",
    nameless_output,
    "name of its own",
    guard=("mine.txt",),
    note="'' is the working directory",
)
cli(
    a,
    "o-is-file",
    lambda c: ["import", "m2m100", str(c.fx.m2m_hf), "-o", c.write("f", "mine")],
    "f",
    guard=("f",),
)
cli(
    a,
    "translate-without-language-token",
    lambda c: ["translate", str(c.fx.m2m_ours), "--greedy"],
    expect="ok",
    stdin="hello world\n",
    note="decodes; the docs say to give the tokens",
)
cli(
    a,
    "translate-tgt-lang",
    lambda c: ["translate", str(c.fx.m2m_ours), "--tgt-lang", "de"],
    "--src-lang",
    stdin="__en__ hello world\n",
)
cli(
    a,
    "translate-src-lang-unknown",
    lambda c: ["translate", str(c.fx.m2m_ours), "--tgt-lang", "de", "--src-lang", "xx"],
    "--src-lang xx",
    stdin="hello world\n",
)


# A brief re-check of compressed inputs and prepare --workers (2026-12-04)

a = "prepare-recheck"


def corpus(c: Ctx) -> Path:
    return c.copy(c.fx.corpus_text, "c")


def pr(d: Path, *o: str) -> list[str]:
    return ["prepare", str(d), "--src", "en", "--tgt", "de", "--vocab-size", "400", "-o", "out", *o]


def gz_cut(c: Ctx) -> list[str]:
    d = corpus(c)
    data = gzip.compress((d / "train.en").read_bytes())
    (d / "train.en.gz").write_bytes(data[: len(data) // 2])
    (d / "train.en").unlink()
    return pr(d)


def not_gzip(c: Ctx) -> list[str]:
    d = corpus(c)
    (d / "train.en").rename(d / "train.en.gz")
    return pr(d)


def empty_gz(c: Ctx) -> list[str]:
    d = corpus(c)
    (d / "train.en").unlink()
    (d / "train.en.gz").write_bytes(gzip.compress(b""))
    return pr(d)


def both_forms(c: Ctx) -> list[str]:
    d = corpus(c)
    (d / "dev.de.gz").write_bytes(gzip.compress((d / "dev.de").read_bytes()))
    return pr(d)


def bz2(c: Ctx) -> list[str]:
    import bz2 as bz

    d = corpus(c)
    (d / "train.en.bz2").write_bytes(bz.compress((d / "train.en").read_bytes()))
    (d / "train.en").unlink()
    return pr(d)


cli(a, "gz-cut-short", gz_cut, "train.en.gz")
cli(a, "gz-not-gzip", not_gzip, "train.en.gz")
cli(a, "gz-empty", empty_gz, "train")
cli(a, "plain-and-gz", both_forms, "dev.de")
cli(a, "bz2-unsupported", bz2, "train.en")
for w in ("0", "-1", "x"):
    cli(a, f"workers-{w}", lambda c, w=w: pr(c.fx.corpus_text, "--workers", w), "--workers")
cli(
    a,
    "workers-64",
    lambda c: pr(c.fx.corpus_text, "--workers", "64"),
    expect="ok",
    note="as many as there are chunks",
)


API_PRELUDE = """
import transduce
"""


# The Python API

a = "python-api"
# load
for code, names in (
    ("transduce.load(None)", r"\bpath\b"),
    ("transduce.load(123)", r"\bpath\b"),
    ("transduce.load(b'run_copy')", r"\bpath\b"),
    ("transduce.load(['run_copy'])", r"\bpath\b"),
    ("transduce.load(FX.root / 'nope')", "nope"),
    ("transduce.load(FX.data_text)", "data_text"),
    ("transduce.load(FX.run_copy, engine='onnx')", "engine"),
    ("transduce.load(FX.run_copy, engine=None)", "engine"),
    ("transduce.load(FX.run_copy, engine='CTranslate2')", "engine"),
    ("transduce.load(FX.run_copy, device='gpu')", "device"),
    ("transduce.load(FX.run_copy, device=0)", "device"),
    ("transduce.load(FX.run_copy, device=None)", "device[ :=]"),
    ("transduce.load(FX.run_copy, device='cuda')", "cuda"),
    ("transduce.load(FX.run_copy, device='cuda', engine='ctranslate2')", "cuda"),
    ("transduce.load(FX.run_copy, device=0, engine='ctranslate2')", "device"),
    ("transduce.load(FX.run_copy, quantize='int4')", "quantize"),
    ("transduce.load(FX.run_copy, quantize=True)", "quantize"),
    ("transduce.load(FX.run_copy, quantize=None)", "quantize"),
    ("transduce.load(FX.run_copy, quantize='int16', engine='ctranslate2')", "quantize"),
    ("transduce.load(FX.run_copy, threads=0)", "threads"),
    ("transduce.load(FX.run_copy, threads='2')", "threads"),
    ("transduce.load(FX.run_copy, threads=2.5)", "threads"),
    ("transduce.load(FX.run_copy, threads=-1, engine='ctranslate2')", "threads"),
    ("transduce.load(FX.run_copy, threads='2', engine='ctranslate2')", "threads"),
    ("transduce.load(FX.ct2_copy)", "ctranslate2"),
    ("transduce.load(FX.run_ut, engine='ctranslate2')", "CTranslate2 cannot hold"),
    ("transduce.load(FX.run_copy, beam=4)", "beam"),
    ("transduce.load(FX.m2m_hf)", "m2m_hf"),
):
    api(a, f"load: {code.removeprefix('transduce.load(')[:-1]}", code, names)
api(a, "load: an export, ctranslate2", "transduce.load(FX.ct2_copy, engine='ctranslate2')", expect="ok")
api(
    a,
    "load: a truncated export",
    "exp = copy(FX.ct2_copy); cut(exp / 'model.bin'); transduce.load(exp, engine='ctranslate2')",
    "model.bin",
)
api(
    a,
    "load: an export without transduce.json",
    "exp = copy(FX.ct2_copy); (exp / 'transduce.json').unlink(); transduce.load(exp, engine='ctranslate2')",
    "transduce.json",
)
# translate / hypotheses
t = "transduce.translate"
for code, names in (
    (f"{t}(str(FX.run_copy), ['1 2'])", "model"),
    (f"{t}(FX.run_copy, ['1 2'])", "model"),
    (f"{t}(None, ['1 2'])", "model"),
    (f"{t}([], ['1 2'])", "model"),
    (f"{t}([M.copy, 'x'], ['1 2'])", "model"),
    (f"{t}(M.copy, '1 2')", "lines"),
    (f"{t}(M.copy, None)", "lines"),
    (f"{t}(M.copy, 12)", "lines"),
    (f"{t}(M.copy, [1, 2])", "lines"),
    (f"{t}(M.copy, [b'1 2'])", "lines"),
    (f"{t}(M.copy, [None])", "lines"),
    (f"{t}(M.copy, ['1 2'], beam=0)", "beam"),
    (f"{t}(M.copy, ['1 2'], beam='4')", "beam"),
    (f"{t}(M.copy, ['1 2'], beam=True)", "beam"),
    (f"{t}(M.copy, ['1 2'], beam=2.5)", "beam"),
    (f"{t}(M.copy, ['1 2'], alpha=float('nan'))", "alpha"),
    (f"{t}(M.copy, ['1 2'], greedy=True, beam=4)", "beam"),
    (f"{t}(M.copy, ['1 2'], greedy=True, sample=True)", "greedy"),
    (f"{t}(M.copy, ['1 2'], greedy='no')", "greedy"),
    (f"{t}(M.copy, ['1 2'], sample='false')", "sample"),
    (f"{t}(M.copy, ['1 2'], greedy=1)", "greedy"),
    (f"{t}(M.copy, ['1 2'], search='bogus')", "search"),
    (f"{t}(M.copy, ['1 2'], search='greedy', beam=4)", "beam"),
    (f"{t}(M.copy, ['1 2'], search='greedy', sample=True)", "sample"),
    (f"{t}(M.copy, ['1 2'], temperature=0.5)", "temperature"),
    (f"{t}(M.copy, ['1 2'], min_len=1000)", "min_len"),
    (f"{t}(M.copy, ['1 2'], min_len=-1)", "min_len"),
    (f"{t}(M.copy, ['1 2'], max_len_b='50')", "max_len_b"),
    (f"{t}(M.copy, ['1 2'], beem=4)", "beem"),
    (f"{t}(M.copy, ['1 2'], max_src_len=3)", "max_src_len"),
    (f"{t}(M.copy, ['1 2'], prefixes='1')", "prefixes"),
    (f"{t}(M.copy, ['1 2'], prefixes=['1', '2'])", "prefix"),
    (f"{t}(M.copy, ['1 2'], prefixes=[None])", "prefixes"),
    (f"{t}(M.copy, ['1 2'], prefixes=['zebra'])", "zebra"),
    (f"{t}(M.copy, ['1 2'], tgt_lang='de')", "tgt_lang"),
    (f"{t}(M.multi, ['the cat'])", "tgt_lang"),
    (f"{t}(M.multi, ['the cat'], tgt_lang='xx')", "tgt_lang"),
    (f"{t}(M.multi, ['the cat'], tgt_lang=5)", "tgt_lang"),
    (f"{t}(M.multi, ['the cat'], tgt_lang=['de'])", "tgt_lang"),
    (f"{t}(M.multi, ['the cat'], tgt_lang=b'de')", "tgt_lang"),
    (f"{t}(M.ct2, ['1 2'], static_cache=True)", "static_cache"),
    (f"{t}(M.ct2, ['1 2'], sample=True, seed=-1)", "seed"),
    (f"{t}(M.ct2, ['1 2'], min_len=1000)", "min_len"),
    (f"{t}(M.ct2, ['1 2'], greedy=True, nbest=2)", "nbest"),
    (f"{t}([M.copy, M.ct2], ['1 2'])", "ctranslate2"),
    (f"{t}([M.copy, M.text], ['1 2'])", "vocabular"),
):
    api(a, f"translate: {code.removeprefix(t + '(')[:-1]}", code, names)
api(a, "translate: no lines", f"{t}(M.copy, [])", expect="ok")
api(
    a,
    "translate: a tuple and a generator",
    f"{t}(M.copy, ('1 2',)); {t}(M.copy, (x for x in ['1']))",
    expect="ok",
)
api(
    a,
    "translate: nbest=2",
    f"{t}(M.copy, ['1 2'], nbest=2)",
    expect="ok",
    note="the best of the n-best; hypotheses gives them all",
)
api(
    a,
    "translate: a line holding a newline",
    f"{t}(M.copy, ['1\\n2'])",
    expect="ok",
    note="one input, one output",
)
api(a, "translate: multilingual, tgt_lang iso3", f"{t}(M.multi, ['the cat'], tgt_lang='fra')", expect="ok")
h = "transduce.hypotheses"
for code, names in (
    (f"{h}(M.copy, ['1'], nbest=5, beam=2)", "nbest"),
    (f"{h}(M.copy, ['1'], sample=True, num_samples=0)", "num_samples"),
    (f"{h}(M.copy, ['1'], sample=True, beam=4)", "beam"),
    (f"{h}(M.copy, ['1'], num_samples=3)", "num_samples"),
    (f"{h}(M.copy, '1')", "lines"),
):
    api(a, f"hypotheses: {code.removeprefix(h + '(')[:-1]}", code, names)
s = "transduce.score"
for code, names in (
    (f"{s}(M.copy, ['1'], ['1', '2'])", "target lines"),
    (f"{s}(M.copy, '1', ['1'])", "sources"),
    (f"{s}(M.copy, ['1'], None)", "targets"),
    (f"{s}(M.copy, ['1'], ['zebra'])", "zebra"),
    (f"{s}(M.copy, ['1'], ['1'], per_token='yes')", "per_token"),
    (f"{s}(M.copy, ['1'], ['1'], beam=4)", "beam"),
    (f"{s}(M.multi, ['the cat'], ['THE CAT'], tgt_lang='xx')", "tgt_lang"),
    (f"{s}(M.multi, ['the cat'], ['THE CAT'])", "tgt_lang"),
    (f"{s}(str(FX.run_copy), ['1'], ['1'])", "model"),
    (f"{s}(M.ct2, ['1'], ['1', '2'])", "target lines"),
):
    api(a, f"score: {code.removeprefix(s + '(')[:-1]}", code, names)
api(a, "score: ct2", f"{s}(M.ct2, ['1'], ['1'])", expect="ok")
# fit and load_config
f, lc = "transduce.fit", "transduce.load_config"
cfg = "CFG"
for code, names in (
    (f"{f}({cfg}, None)", "run_dir"),
    (f"{f}({cfg}, 5)", "run_dir"),
    (f"{f}('small', 'r', overrides='train.steps=1')", "overrides"),
    (f"{f}(None, 'r')", "config"),
    (f"{f}(123, 'r')", "config"),
    (f"{f}({{'model': {{}}}}, 'r')", "config"),
    (f"{f}({cfg}, 'r', init_from=123)", "init_from"),
    (f"{f}({cfg}, 'r', init_from=FX.root / 'nope')", "nope"),
    (f"{f}({cfg}, 'r', keep_step=True)", "keep_step"),
    (f"{f}({cfg}, 'r', ['train.steps=0'])", "train.steps"),
    (f"{f}({cfg}, 'r', ['train.stepz=3'])", "train.stepz"),
    (f"{f}({cfg}, 'r', progress=False, unknown=1)", "unknown"),
    (f"{f}({cfg}, copy(FX.data_text) / 'run')", "data_text"),
    (f"{lc}('nope')", "nope"),
    (f"{lc}(None)", "source"),
    (f"{lc}(5)", "source"),
    (f"{lc}('small', 'train.steps=3')", "overrides"),
    (f"{lc}('small', None)", "overrides"),
    (f"{lc}('small', ['train.steps'])", "train.steps"),
    (f"{lc}('small', [b'train.steps=3'])", "overrides"),
    (f"{lc}('small', [3])", "overrides"),
    (f"{lc}('small', ['decode.search=bogus'])", "decode.search"),
    (f"{lc}(FX.ct2_copy)", "ct2_copy"),
    (f"{lc}(FX.data_text)", "data_text"),
    (f"{lc}(FX.root / 'nope.toml')", "nope.toml"),
):
    api(
        a,
        f"{code.split('(')[0].removeprefix('transduce.')}: {code.split('(', 1)[1][:-1]}",
        code,
        names,
        guard=("data_text",) if "data_text" in code and "copy(" in code else (),
    )
api(a, "load_config: a checkpoint", f"{lc}(FX.run_copy)", expect="ok")
OK_CALLS = [  # calls that work, and why
    (
        "translate: an unknown symbol",
        f"{t}(M.copy, ['1 zebra'])",
        "read as <unk>, as the command line reads it",
    ),
    (
        "translate: static_cache on the CPU",
        f"{t}(M.copy, ['1 2'], static_cache=True)",
        "fixed shapes, no graphs",
    ),
    (
        "hypotheses: nbest=65, beam=65",
        f"{h}(M.ct2, ['1'], nbest=65, beam=65)",
        "the server's bound (64) is its own",
    ),
    (
        "fit: a run inside another run's checkpoints/",
        f"{f}(CFG, copy(FX.run_copy) / 'checkpoints' / 'x')",
        "nothing there is replaced",
    ),
]
for name, code, note in OK_CALLS:
    api(a, name, code, expect="ok", note=note)


HTTP_SERVERS = {
    # name: (fixture, options)
    "text": ("run_text", ["--api-key", KEY]),
    "copy-ct2": ("run_copy", ["--engine", "ctranslate2"]),
    "multi": ("run_multi", []),
}


# The server: the LibreTranslate-compatible API and our /translate's new options

a = "libretranslate"
lt = "/libretranslate/translate"
ok_fields = {"q": "the cat", "source": "en", "target": "de", "api_key": KEY}


def body(**change: Any) -> dict[str, Any]:
    fields = {**ok_fields, **change}
    return {k: v for k, v in fields.items() if v is not ...}


J = "json"
for name, fields, names in (
    ("missing-q", body(q=...), "q"),
    ("q-empty", body(q=""), "q"),
    ("q-empty-list", body(q=[]), "q"),
    ("q-number", body(q=5), "q"),
    ("q-list-of-numbers", body(q=[1, 2]), "q"),
    ("q-object", body(q={"a": "b"}), "q"),
    ("q-nested-list", body(q=[["the"]]), "q"),
    ("q-null", body(q=None), "q"),
    ("missing-target", body(target=...), "target"),
    ("missing-source", body(source=...), "source"),
    ("target-unknown", body(target="xx"), "xx"),
    ("source-unknown", body(source="xx"), "xx"),
    ("target-number", body(target=5), "target"),
    ("target-reverse-pair", body(source="de", target="en"), "en"),
    ("format-markdown", body(format="markdown"), "format"),
    ("format-number", body(format=5), "format"),
    ("format-empty", body(format=""), ""),
    ("alternatives-word", body(alternatives="x"), "alternatives"),
    ("alternatives-100", body(alternatives=100), "alternatives"),
    ("alternatives-huge", body(alternatives=10**30), "alternatives"),
    ("api-key-wrong", body(api_key="nope"), "API key"),
    ("api-key-missing", body(api_key=...), "API key"),
    ("api-key-empty", body(api_key=""), "API key"),
    ("api-key-number", body(api_key=5), "API key"),
    ("q-over-64-lines", body(q="\n".join(["the cat"] * 100)), ""),
    ("q-list-of-100", body(q=["the cat"] * 100), ""),
    ("q-line-over-max-chars", body(q="cat " * 800), ""),
):
    expect = "ok" if name == "format-empty" else "error"
    http(a, name, "text", "POST", lt, names, **{J: fields}, expect=expect)
for name, fields in (
    ("source-auto", body(source="auto")),
    ("identity-translation", body(source="en", target="en")),
    ("target-uppercase", body(target="DE")),
    ("html-unclosed-tag", body(q="<b>the cat", format="html")),
    ("html-script", body(q="<script>alert(1)</script> the cat", format="html")),
    ("q-whitespace-only", body(q="   ")),
    ("q-control-characters", body(q="the\x00 cat\x1b[31m")),
    ("alternatives-negative", body(alternatives=-3)),
    ("alternatives-float", body(alternatives=2.5)),
    ("alternatives-true", body(alternatives=True)),
    ("q-list", body(q=["the cat", "a dog"])),
):
    http(a, name, "text", "POST", lt, **{J: fields}, expect="ok")
form = {k: str(v) for k, v in ok_fields.items()}
http(a, "form-urlencoded", "text", "POST", lt, data=form, expect="ok")
http(a, "form-multipart", "text", "POST", lt, files={k: (None, v) for k, v in form.items()}, expect="ok")
http(
    a,
    "query-string-only",
    "text",
    "POST",
    lt + "?" + "&".join(f"{k}={v.replace(' ', '+')}" for k, v in form.items()),
    expect="ok",
)
http(
    a,
    "form-non-utf8",
    "text",
    "POST",
    lt,
    content=b"q=the+\xff\xfe&source=en&target=de&api_key=" + KEY.encode(),
    headers={"content-type": "application/x-www-form-urlencoded"},
    expect="ok",
    note="undecodable bytes replaced",
)
http(
    a,
    "json-syntax",
    "text",
    "POST",
    lt,
    "JSON",
    content=b'{"q": ',
    headers={"content-type": "application/json"},
)
http(a, "json-list", "text", "POST", lt, "JSON", json=[1, 2])
http(
    a,
    "json-non-utf8",
    "text",
    "POST",
    lt,
    "JSON",
    content=b'{"q": "\xff"}',
    headers={"content-type": "application/json"},
)
http(
    a,
    "json-deep-nesting",
    "text",
    "POST",
    lt,
    "",
    content=b'{"q": ' + b"[" * 100000 + b"]" * 100000 + b"}",
    headers={"content-type": "application/json"},
)
http(
    a,
    "json-as-text-plain",
    "text",
    "POST",
    lt,
    "text/plain",
    content=json.dumps(ok_fields).encode(),
    headers={"content-type": "text/plain"},
)
http(
    a,
    "multipart-without-boundary",
    "text",
    "POST",
    lt,
    "multipart",
    content=b"garbage",
    headers={"content-type": "multipart/form-data"},
)
http(
    a,
    "multipart-q-as-file",
    "text",
    "POST",
    lt,
    "q",
    files={
        "q": ("q.txt", b"the cat"),
        "source": (None, "en"),
        "target": (None, "de"),
        "api_key": (None, KEY),
    },
)
big = "the cat " * (10 * 1024 * 1024 // 8)
http(a, "q-10MB-json", "text", "POST", lt, "", json=body(q=big))
http(a, "q-10MB-form", "text", "POST", lt, "", data={**form, "q": big})
http(
    a,
    "q-10MB-chunked",
    "text",
    "POST",
    lt,
    "",
    chunked=json.dumps(body(q=big)).encode(),
    headers={"content-type": "application/json"},
)
http(a, "get-translate", "text", "GET", lt, "")
http(a, "detect-route", "text", "POST", "/libretranslate/detect", "", json={"q": "the cat"})
http(a, "languages", "text", "GET", "/libretranslate/languages", expect="ok")
http(a, "languages-post", "text", "POST", "/libretranslate/languages", "")
http(
    a,
    "unknown-languages-translate",
    "copy-ct2",
    "POST",
    lt,
    "--source-lang",
    json={"q": "1 2", "source": "en", "target": "de"},
)
http(a, "unknown-languages-list", "copy-ct2", "GET", "/libretranslate/languages", expect="ok", note="[]")
# the multilingual model
http(
    a,
    "multi-target-fr",
    "multi",
    "POST",
    lt,
    json={"q": "the cat", "source": "en", "target": "fr"},
    expect="ok",
)
http(
    a,
    "multi-source-auto",
    "multi",
    "POST",
    lt,
    json={"q": "the cat", "source": "auto", "target": "de"},
    expect="ok",
)
http(
    a,
    "multi-target-unknown",
    "multi",
    "POST",
    lt,
    "xx",
    json={"q": "the cat", "source": "en", "target": "xx"},
)
http(
    a,
    "multi-target-not-from-source",
    "multi",
    "POST",
    lt,
    "",
    json={"q": "the cat", "source": "de", "target": "fr"},
)
http(a, "multi-languages", "multi", "GET", "/libretranslate/languages", expect="ok")
# our own /translate: search modes and tgt_lang
s = "server-options"
for server in ("text", "copy-ct2"):
    seg = "the cat" if server == "text" else "1 2"
    hd = {"x-api-key": KEY} if server == "text" else {}
    for name, fields, names in (
        ("greedy-beam", {"greedy": True, "beam": 4}, "beam"),
        ("search-greedy-nbest", {"search": "greedy", "nbest": 2}, "nbest"),
        ("search-bogus", {"search": "bogus"}, "search"),
        ("greedy-and-search-sample", {"greedy": True, "search": "sample"}, "greedy"),
        ("greedy-string", {"greedy": "yes"}, "greedy"),
        ("min-len-above-limit", {"min_len": 1000}, "min_len"),
        ("tgt-lang-one-pair", {"tgt_lang": "de"}, "tgt_lang"),
        ("tgt-lang-number", {"tgt_lang": 5}, "tgt_lang"),
        ("sample-seed", {"sample": True, "seed": 3}, "seed"),
        ("temperature-without-sample", {"temperature": 0.5}, "temperature"),
    ):
        expect = "ok" if (name == "sample-seed" and server == "text") else "error"
        http(
            s,
            f"{server}-{name}",
            server,
            "POST",
            "/translate",
            names,
            json={"segments": [seg], **fields},
            headers=hd,
            expect=expect,
        )
    http(
        s,
        f"{server}-search-greedy",
        server,
        "POST",
        "/translate",
        json={"segments": [seg], "search": "greedy"},
        headers=hd,
        expect="ok",
    )
http(s, "copy-ct2-attention", "copy-ct2", "POST", "/attention", "attention", json={"segments": ["1 2"]})
http(
    s,
    "copy-ct2-unknown-symbol",
    "copy-ct2",
    "POST",
    "/translate",
    json={"segments": ["zebra"]},
    expect="ok",
    note="a source word outside the vocabulary is read as <unk>, as translate reads it",
)
for name, fields, names in (
    ("multi-no-tgt-lang", {}, "tgt_lang"),
    ("multi-tgt-lang-unknown", {"tgt_lang": "xx"}, "tgt_lang"),
    ("multi-tgt-lang-empty", {"tgt_lang": ""}, "tgt_lang"),
    ("multi-tgt-lang-list", {"tgt_lang": ["de"]}, "tgt_lang"),
    ("multi-unknown-tag-in-segment", {"segments": [">>spa<< the cat"]}, "tgt_lang"),
):
    http(s, name, "multi", "POST", "/translate", names, json={"segments": ["the cat"], **fields})
http(
    s,
    "multi-tgt-lang-de",
    "multi",
    "POST",
    "/translate",
    json={"segments": ["the cat"], "tgt_lang": "de"},
    expect="ok",
)
http(
    s,
    "multi-tag-in-segment",
    "multi",
    "POST",
    "/translate",
    json={"segments": [">>fra<< the cat"]},
    expect="ok",
)


_unique(CASES)


# --------------------------------------------------------------------------------------------
# Running a case


@dataclass
class Result:
    case: Case
    outcome: str
    shown: str  # the command, call or request as a user would write it
    message: str  # the error line, exception or answer (first 240 characters)
    seconds: float
    lost: str = ""


def snapshot(path: Path) -> dict[str, str]:
    """Each file under `path` (or `path` itself) by its relative name: its content's hash, a
    link's target, or the kind of a special file."""
    found: dict[str, str] = {}
    if not os.path.lexists(path):
        return found
    items = [path] if not path.is_dir() or path.is_symlink() else [path, *sorted(path.rglob("*"))]
    for item in items:
        name = str(item.relative_to(path)) if item != path else "."
        if item.is_symlink():
            found[name] = "link:" + os.readlink(item)
        elif item.is_file():
            found[name] = hashlib.sha256(item.read_bytes()).hexdigest()
        elif item.is_dir():
            found[name] = "dir"
        else:
            found[name] = "special"
    return found


def losses(before: dict[str, dict[str, str]], base: Path) -> str:
    """What was removed or changed among the guarded paths, or ''."""
    lost = []
    for guarded, files in before.items():
        after = snapshot(base / guarded)
        gone = [n for n in files if n not in after]
        changed = [n for n in files if n in after and after[n] != files[n]]
        if gone or changed:
            lost.append(f"{guarded}: removed {gone[:4]} changed {changed[:4]}")
    return "; ".join(lost)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


ENV: dict[str, str] = {}
FX = Fixtures(Path(os.environ.get("SWEEP_FX", WORK / "fx")))


def shown_argv(argv: list[str], base: Path) -> str:
    import shlex

    words = ["transduce", *argv]
    text = " ".join(shlex.quote(w) if len(w) < 80 else shlex.quote(w[:40] + "...") for w in words)
    return text.replace(str(base) + "/", "").replace(str(FX.root) + "/", "fx/")


def error_lines(text: str) -> tuple[list[str], list[str]]:
    """The `error:` lines of stderr, and its other lines that are not warnings or hints."""
    lines = [line for line in text.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("error:")]
    others = [line for line in lines if not line.startswith(("error:", "warning:", "hint:"))]
    return errors, others


def run_cli(case: Case, base: Path, timeout: float) -> Result:
    folder = base / case.name.replace("/", "_")
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    ctx = Ctx(folder, FX, free_port())
    try:
        argv = case.run(ctx)
    except Exception as exc:  # the case's own setup failed: a bug of the sweep
        return Result(case, "other", case.name, f"setup failed: {type(exc).__name__}: {exc}", 0.0)
    before = {g: snapshot(folder / g) for g in case.guard}
    start = time.monotonic()
    (folder / ".stdin").write_text(case.stdin)
    with (
        (folder / ".stdin").open() as stdin,
        (folder / ".stdout").open("w") as stdout,
        (folder / ".stderr").open("w") as stderr,
    ):
        process = subprocess.Popen(
            [sys.executable, "-m", "transduce", *argv],
            cwd=folder,
            env=ENV,
            stdin=stdin,
            stdout=stdout,
            stderr=stderr,
            start_new_session=True,
        )
        timed_out = started = False
        while process.poll() is None:
            time.sleep(0.3)
            if argv[0] == "serve":
                said = (folder / ".stdout").read_text(errors="replace") + (folder / ".stderr").read_text(
                    errors="replace"
                )
                started = "LibreTranslate-compatible API" in said or "Uvicorn running" in said
            if started or time.monotonic() - start > timeout:
                timed_out = not started
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
    out = (folder / ".stdout").read_text(errors="replace")
    err = (folder / ".stderr").read_text(errors="replace")
    seconds = time.monotonic() - start
    lost = losses(before, folder)
    shown = shown_argv(argv, folder)
    errors, others = error_lines(err)
    text = (
        (errors[0] if errors else (err.strip().splitlines() or [""])[-1])
        if err.strip()
        else out.strip()[:240]
    )
    if started and case.expect == "error":
        return Result(case, "wrongly accepted", shown, "started serving", seconds, lost)
    if started:
        return Result(case, "documented", shown, "started serving", seconds, lost)
    if timed_out:
        return Result(case, "hang", shown, f"no answer in {timeout:.0f} s", seconds, lost)
    if "Traceback" in out + err:
        last = [line for line in err.splitlines() if line.strip()][-1:]
        return Result(case, "traceback", shown, last[0] if last else "", seconds, lost)
    if lost:
        return Result(case, "data lost", shown, text[:240], seconds, lost)
    rc = process.returncode
    if case.expect == "error":
        if rc == 0:
            return Result(
                case, "wrongly accepted", shown, (out.strip().splitlines() or [""])[0][:240], seconds
            )
        clean = rc == 2 and len(errors) == 1 and not others
        named = re.search(case.names, err, re.IGNORECASE) is not None
        outcome = "clean error" if clean and named else "other"
        note = "" if clean else f" [exit {rc}, {len(errors)} error lines, {len(others)} other lines]"
        return Result(case, outcome, shown, (text + note)[:300], seconds)
    if rc == 0:
        return Result(case, "documented", shown, (out.strip().splitlines() or [""])[0][:240], seconds)
    return Result(case, "other", shown, f"refused: {text}"[:300], seconds)


# The Python API: the cases run in one child process (torch imported once); the parent reads a
# JSON line per case and restarts the child past a case that hangs.

API_CHILD = r"""
import json, os, shutil, sys, traceback
from pathlib import Path
answers = os.fdopen(os.dup(1), "w")  # the answers' own channel; what the cases print goes to stderr
os.dup2(2, 1)
sys.stdout = sys.stderr
sys.path.insert(0, os.environ["SWEEP_ROOT"])
from bench.reliability.sweep import CASES, FX, snapshot, losses
import transduce

class Models:
    def __getattr__(self, name):
        found = {
            "copy": lambda: transduce.load(FX.run_copy),
            "text": lambda: transduce.load(FX.run_text),
            "multi": lambda: transduce.load(FX.run_multi),
            "ct2": lambda: transduce.load(FX.run_copy, engine="ctranslate2"),
        }[name]()
        setattr(self, name, found)
        return found

M = Models()
CFG = transduce.load_config("small", ["model.d_model=32", "model.heads=4", "model.d_ff=64",
    "model.encoder_layers=1", "model.decoder_layers=1", "data.task=copy", "data.task_train_size=30",
    "data.task_eval_size=4", "train.steps=1",
    "train.warmup=1", "train.validate_every=1", "train.save_every=1", "train.log_every=1000"])
base = Path(sys.argv[1])
by_name = {c.name: c for c in CASES}
for name in sys.stdin.read().splitlines():
    case = by_name[name]
    folder = base / name.replace("/", "_").replace(" ", "_")[:120]
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    os.chdir(folder)
    def copy(source, folder=folder):
        target = folder / Path(source).name
        shutil.copytree(source, target, symlinks=True)
        return target
    def cut(path):
        data = Path(path).read_bytes()
        Path(path).write_bytes(data[: len(data) // 2])
    answer = {"name": name}
    try:
        names = {"transduce": transduce, "FX": FX, "M": M, "CFG": CFG, "copy": copy, "cut": cut}
        exec(case.run, {**names, "Path": Path})
        answer["raised"] = None
    except BaseException as exc:
        tb = traceback.extract_tb(exc.__traceback__)
        answer |= {"raised": type(exc).__name__, "message": str(exc)[:400],
                   "value_error": isinstance(exc, (TypeError, ValueError)),
                   "where": f"{tb[-1].filename.split('/src/')[-1]}:{tb[-1].lineno}" if tb else ""}
    changed = [g for g in case.guard if snapshot(FX.root / g) != snapshot(folder / g)]
    answer["lost"] = f"{changed} differ from the fixtures'" if changed else ""
    print(json.dumps(answer), file=answers, flush=True)
"""


def classify_api(case: Case, answer: dict[str, Any]) -> tuple[str, str]:
    raised = answer.get("raised")
    if answer.get("lost"):
        return "data lost", answer["lost"]
    if raised is None:
        return ("documented" if case.expect == "ok" else "wrongly accepted"), "returned"
    message = f"{raised}: {answer.get('message', '')}"
    if raised in ("KeyboardInterrupt", "SystemExit"):
        return "other", message
    documented = answer.get("value_error")
    if case.expect == "ok":
        return "other", f"raised {message}"
    if not documented:
        return "traceback", f"{message} (at {answer.get('where')})"
    if not re.search(case.names, answer.get("message", "")):
        return "other", f"{message} (does not name {case.names}; at {answer.get('where')})"
    return "clean error", message


def _forward(stream: Any, lines: queue.Queue[str | None]) -> None:
    """Each line of `stream` put in `lines`, then None at its end."""
    for line in stream:
        lines.put(line)
    lines.put(None)


def run_api(cases: list[Case], base: Path, timeout: float) -> list[Result]:
    results: list[Result] = []
    left = list(cases)
    env = {**ENV, "SWEEP_ROOT": str(ROOT), "SWEEP_FX": str(FX.root)}
    while left:
        process = subprocess.Popen(
            [sys.executable, "-c", API_CHILD, str(base)],
            env=env,
            cwd=base,
            text=True,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        assert process.stdin is not None and process.stdout is not None
        process.stdin.write("".join(f"{c.name}\n" for c in left))
        process.stdin.close()
        lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=_forward, args=(process.stdout, lines), daemon=True).start()
        while left:
            start = time.monotonic()
            try:
                line = lines.get(timeout=timeout + (90 if not results else 0))
            except queue.Empty:
                line = "TIMEOUT"
            case = left[0]
            if line is None or line == "TIMEOUT":
                os.killpg(process.pid, signal.SIGKILL)
                stderr = process.stderr.read() if process.stderr else ""  # type: ignore[union-attr]
                outcome = "hang" if line == "TIMEOUT" else "traceback"
                tail = [x for x in stderr.splitlines() if x.strip()][-1:] if stderr else []
                results.append(
                    Result(case, outcome, case.run, (tail[0] if tail else "the child died")[:240], timeout)
                )
                left.pop(0)
                break
            answer = json.loads(line)
            assert answer["name"] == case.name, (answer, case.name)
            outcome, message = classify_api(case, answer)
            results.append(Result(case, outcome, case.run, message[:300], time.monotonic() - start))
            left.pop(0)
        else:
            process.wait(timeout=60)
    return results


class Served:
    """A `transduce serve` process for the HTTP cases, its output in a log file."""

    def __init__(self, name: str, base: Path) -> None:
        fixture, options = HTTP_SERVERS[name]
        self.port = free_port()
        self.log = base / f"serve-{name}.log"
        self.handle = self.log.open("w")
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "transduce",
                "serve",
                str(FX.root / fixture),
                "--port",
                str(self.port),
                *options,
            ],
            env=ENV,
            cwd=FX.root,
            stdout=self.handle,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        import httpx

        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"http://127.0.0.1:{self.port}/health", timeout=5).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            if self.process.poll() is not None:
                break
            time.sleep(1)
        raise SystemExit(f"server {name} did not start:\n{self.log.read_text()}")

    def stop(self) -> None:
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
        self.handle.close()


def run_http(case: Case, server: Served, timeout: float) -> Result:
    import httpx

    _, method, path, given = case.run
    given = dict(given)
    chunked = given.pop("chunked", None)
    if chunked is not None:
        given["content"] = (chunked[i : i + 65536] for i in range(0, len(chunked), 65536))
    shown_body = {k: v for k, v in given.items() if k != "headers"}
    shown = f"{method} {path} {json.dumps(shown_body, default=str)[:200]}"
    log_before = server.log.read_text(errors="replace")
    start = time.monotonic()
    try:
        answer = httpx.request(method, f"http://127.0.0.1:{server.port}{path}", timeout=timeout, **given)
    except httpx.TimeoutException:
        return Result(case, "hang", shown, f"no answer in {timeout:.0f} s", timeout)
    except httpx.HTTPError as exc:
        alive = server.process.poll() is None
        return Result(
            case,
            "other" if alive else "traceback",
            shown,
            f"{type(exc).__name__}: {exc}",
            time.monotonic() - start,
        )
    seconds = time.monotonic() - start
    new_log = server.log.read_text(errors="replace")[len(log_before) :]
    status = answer.status_code
    text = f"HTTP {status}: {answer.text[:200]}"
    if status >= 500 or "Traceback" in new_log:
        return Result(case, "traceback", shown, text, seconds)
    shaped = True
    if path.startswith("/libretranslate") and status >= 400:
        try:
            shaped = isinstance(answer.json().get("error"), str)
        except (ValueError, AttributeError):
            shaped = False
    if case.expect == "error":
        if status < 400:
            return Result(case, "wrongly accepted", shown, text, seconds)
        named = re.search(case.names, answer.text) is not None
        return Result(
            case,
            "clean error" if shaped and named else "other",
            shown,
            text + ("" if shaped else " [not LibreTranslate's shape]"),
            seconds,
        )
    return Result(case, "documented" if status < 400 else "other", shown, text, seconds)


# --------------------------------------------------------------------------------------------


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--src", type=Path, default=ROOT / "src", help="the source tree whose transduce runs")
    parser.add_argument("--work", type=Path, default=WORK, help="fixtures and the cases' folders")
    parser.add_argument("--only", action="append", default=[], help="cases whose name or area holds this")
    parser.add_argument("--kind", choices=("cli", "api", "http"), action="append", default=[])
    parser.add_argument("--timeout", type=float, default=180.0, help="seconds before a case counts as a hang")
    parser.add_argument("--jobs", type=int, default=1, help="command-line cases run at once")
    parser.add_argument("--list", action="store_true", help="list the cases and stop")
    parser.add_argument(
        "--record", action="store_true", help="write bench/records/reliability/sweep-DATE.json"
    )
    return parser.parse_args()


def run_cases(selected: list[Case], base: Path, args: argparse.Namespace) -> list[Result]:
    """Every selected case: the command lines (`--jobs` at once), the API's in one child, then
    the HTTP cases server by server."""
    results: list[Result] = []

    def report(r: Result) -> None:
        results.append(r)
        print(f"{r.outcome:16} {r.seconds:6.1f}s {r.case.area}/{r.case.name}: {r.message[:160]}", flush=True)

    clis = [c for c in selected if c.kind == "cli"]
    with ThreadPoolExecutor(max(1, args.jobs)) as pool:
        for r in pool.map(lambda c: run_cli(c, base / "cli", args.timeout), clis):
            report(r)
    apis = [c for c in selected if c.kind == "api"]
    if apis:
        (base / "api").mkdir(exist_ok=True)
        for r in run_api(apis, base / "api", args.timeout):
            report(r)
    by_server: dict[str, list[Case]] = {}
    for c in selected:
        if c.kind == "http":
            by_server.setdefault(c.run[0], []).append(c)
    for name, cases in by_server.items():
        server = Served(name, base)
        try:
            for c in cases:
                report(run_http(c, server, args.timeout))
        finally:
            server.stop()
    return results


def write_results(results: list[Result], args: argparse.Namespace) -> None:
    """The counts, results.json in the work folder, and with --record the record."""
    counts = Counter(r.outcome for r in results)
    print("\n" + ", ".join(f"{counts.get(o, 0)} {o}" for o in OUTCOMES) + f" ({len(results)} cases)")
    rows = [
        {"case": r.case.name, "area": r.case.area, "kind": r.case.kind, "expect": r.case.expect}
        | {
            "outcome": r.outcome,
            "command": r.shown,
            "message": r.message,
            "lost": r.lost,
            "note": r.case.note,
        }
        for r in results
    ]
    (args.work / "results.json").write_text(json.dumps(rows, indent=1, ensure_ascii=False) + "\n")
    print(f"results in {args.work / 'results.json'}")
    if not args.record:
        return
    sys.path.insert(0, str(ROOT))
    from bench.records import write_record

    tree = ["git", "-C", str(args.src.resolve()), "rev-parse", "--short", "HEAD"]
    commit = subprocess.run(tree, capture_output=True, text=True).stdout.strip()
    write_record(
        "reliability",
        "sweep",
        title="Bad-input sweep: outcomes",
        command="python -m bench.reliability.sweep --record",
        host=socket.gethostname(),
        setup=f"{len(results)} cases at {commit} with its working tree, timeout {args.timeout:.0f} s",
        rows=[{"outcome": o, "cases": counts.get(o, 0)} for o in OUTCOMES],
        cases=[r for r in rows if r["outcome"] != "clean error"],
    )


def main() -> None:
    args = arguments()
    selected = [
        c
        for c in CASES
        if (not args.only or any(o in c.name or o in c.area for o in args.only))
        and (not args.kind or c.kind in args.kind)
    ]
    if args.list:
        for c in selected:
            print(f"{c.kind:5} {c.area:17} {c.expect:5} {c.name}")
        print(f"{len(selected)} cases")
        return
    global FX
    FX = Fixtures(args.work.resolve() / "fx")
    ENV.update(os.environ, PYTHONPATH=str(args.src.resolve()), SWEEP_FX=str(FX.root), NO_COLOR="1")
    ENV.pop("TRANSDUCE_API_KEY", None)
    build_fixtures(FX, ENV)
    base = args.work.resolve() / "cases"
    base.mkdir(parents=True, exist_ok=True)
    before = {p.name: snapshot(p) for p in FX.root.iterdir() if p.is_dir()}
    results = run_cases(selected, base, args)
    for name, files in before.items():  # the fixtures come through every case as they were
        after = snapshot(FX.root / name)
        changed = [n for n in files if after.get(n) != files[n] and "ctranslate2-" not in n]
        if changed:
            print(f"FIXTURE CHANGED: {name}: {changed[:5]}")
    write_results(results, args)


if __name__ == "__main__":
    main()
