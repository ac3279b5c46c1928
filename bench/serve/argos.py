"""Argos Translate on our exported package against `transduce translate --engine ctranslate2`.

    python -m bench.serve.argos --checkpoint RUN [--lines 2000] [--src FILE]

Exports RUN as an .argosmodel (`transduce export --format argos`), installs it with Argos
Translate's own `package.install_from_path` into a private home, and translates --src's first
--lines lines with its `translate.translate`, offline: in a network namespace with no interface
but loopback (`unshare -rn`, where the host allows it), so a download it tried would fail. The
same lines go through `transduce translate --engine ctranslate2` with Argos's settings: int8
(Argos's `auto` compute type on a CPU with int8), beam 4 (ARGOS_BEAM_SIZE), length penalty 0.2
(its translate_batch's), at least 1 and at most 256 tokens (CTranslate2's defaults, which Argos
keeps; ours allow an empty output, which a barely trained model can prefer). Records
the share of identical lines, and the share identical once our output is written as Argos
writes the same pieces (its SentencePieceTokenizer.decode turns every `_` into a space), in
bench/records/serve/argos-<date>.json: ours batched as `translate` batches, and a line per
CTranslate2 call as Argos calls it (--max-tokens 1), since a long repetitive output can end
otherwise when its line is decoded beside others (CTranslate2's int8 results depend a little on
the batch), and the lines that differ beyond the underscores.

Argos Translate runs in its own venv, bench/.argos (created on first use, git-ignored): the CPU
torch==2.13.0 first (argostranslate needs stanza, which needs torch: unpinned, pip would pull a
multi-GB CUDA build), then argostranslate==1.11.0.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.peers.venv import TORCH, ensure_venv
from bench.records import BENCH, OUT, host_line, write_record

ARGOS = BENCH / ".argos"
ARGOS_PACKAGES = ["argostranslate==1.11.0"]
TEST = OUT / "l10n-de" / "test.en"
WITHOUT_NETWORK = " in a network namespace with no network (unshare -rn)"
# What Argos Translate decodes with, as `transduce translate` options.
ARGOS_SETTINGS = [
    "--quantize",
    "int8",
    "--beam",
    "4",
    "--alpha",
    "0.2",
    "--max-len-a",
    "0",
    "--max-len-b",
    "256",
    "--min-len",
    "1",
]

# Run by the venv's Python: install the package, translate stdin's lines (JSON), print them (JSON).
TRANSLATE = """
import json, sys
from argostranslate import package, translate
package.install_from_path(sys.argv[1])
lines = json.load(sys.stdin)
print(json.dumps([translate.translate(line, sys.argv[2], sys.argv[3]) for line in lines]))
"""


def ensure_argos(venv: Path = ARGOS) -> Path:
    """The Python of Argos Translate's own venv, created on first use (torch kept at ours)."""
    return ensure_venv(venv, [TORCH, *ARGOS_PACKAGES])


def offline() -> list[str]:
    """The command prefix that runs a program with no network but loopback, where the host lets
    an unprivileged user make a network namespace; nothing where it does not."""
    if (
        shutil.which("unshare")
        and subprocess.run(["unshare", "-rn", "true"], capture_output=True).returncode == 0
    ):
        return ["unshare", "-rn"]
    return []


def private_home(home: Path) -> dict[str, str]:
    """An environment whose Argos Translate data, settings and caches all lie under `home`."""
    return {
        **os.environ,
        "HOME": str(home),
        "XDG_DATA_HOME": str(home / "data"),
        "XDG_CONFIG_HOME": str(home / "config"),
        "XDG_CACHE_HOME": str(home / "cache"),
    }


def argos_translate(python: Path, package: Path, lines: list[str], source: str, target: str) -> list[str]:
    """`lines` through Argos Translate's own API, the package installed in a fresh private home,
    offline where the host allows it."""
    with tempfile.TemporaryDirectory() as home:
        done = subprocess.run(
            [*offline(), str(python), "-c", TRANSLATE, str(package), source, target],
            input=json.dumps(lines),
            capture_output=True,
            text=True,
            env=private_home(Path(home)),
            check=False,
        )
    if done.returncode != 0:
        raise RuntimeError(f"Argos Translate failed: {done.stderr[-2000:]}")
    return json.loads(done.stdout.splitlines()[-1])


def as_argos_writes(line: str) -> str:
    """Our output as Argos Translate writes the same pieces: its SentencePieceTokenizer.decode
    turns every `_` into a space, then it drops one leading space."""
    line = line.replace("_", " ")
    return line[1:] if line.startswith(" ") else line


def compare(ours: list[str], theirs: list[str]) -> dict[str, float | int]:
    """Identical lines, and lines identical once ours is written as Argos writes it."""
    pairs = list(zip(ours, theirs, strict=True))
    same = sum(a == b for a, b in pairs)
    read_alike = sum(as_argos_writes(a) == b for a, b in pairs)
    return {
        "lines": len(pairs),
        "identical": same,
        "identical_pct": round(100 * same / len(pairs), 2),
        "differ_only_by_underscores": read_alike - same,
        "identical_as_argos_writes_pct": round(100 * read_alike / len(pairs), 2),
    }


def ours(checkpoint: Path, lines: list[str], folder: Path, *options: str) -> list[str]:
    """`transduce translate --engine ctranslate2` with Argos's settings (and `options`)."""
    (folder / "in.txt").write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    cmd = [sys.executable, "-m", "transduce", "translate", str(checkpoint), "--engine", "ctranslate2"]
    cmd += [
        *ARGOS_SETTINGS,
        *options,
        "--threads",
        "1",
        "-i",
        str(folder / "in.txt"),
        "-o",
        str(folder / "out.txt"),
    ]
    subprocess.run(cmd, check=True, capture_output=True)
    return (folder / "out.txt").read_text(encoding="utf-8").split("\n")[: len(lines)]


def export(checkpoint: Path, package: Path, *options: str) -> None:
    cmd = [
        sys.executable,
        "-m",
        "transduce",
        "export",
        str(checkpoint),
        "--format",
        "argos",
        "-o",
        str(package),
    ]
    subprocess.run([*cmd, "--force", *options], check=True, capture_output=True)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--checkpoint", type=Path, required=True, help="an English->German run or checkpoint")
    parser.add_argument("--src", type=Path, default=TEST, help="source lines (default: the l10n test set)")
    parser.add_argument("--lines", type=int, default=2000)
    args = parser.parse_args()
    python = ensure_argos()
    lines = args.src.read_text(encoding="utf-8").split("\n")[: args.lines]
    with tempfile.TemporaryDirectory() as tmp:
        package = Path(tmp) / "en_de.argosmodel"
        export(args.checkpoint, package)
        theirs = argos_translate(python, package, lines, "en", "de")
        batched = ours(args.checkpoint, lines, Path(tmp))
        alone = ours(args.checkpoint, lines, Path(tmp), "--max-tokens", "1")
    rows = [
        {"ours": "batched (max_tokens 4096)"} | compare(batched, theirs),
        {"ours": "a line per call, as Argos (--max-tokens 1)"} | compare(alone, theirs),
    ]
    differing = [
        {"source": s, "argos": t, "ours batched": b, "ours alone": a}
        for s, t, b, a in zip(lines, theirs, batched, alone, strict=True)
        if as_argos_writes(a) != t or as_argos_writes(b) != t
    ]
    write_record(
        "serve",
        "argos",
        title="Argos Translate on our exported package against translate --engine ctranslate2",
        command=f"python -m bench.serve.argos --checkpoint {args.checkpoint} --lines {args.lines}",
        host=host_line(1),
        setup=(
            "argostranslate 1.11.0 in its own venv, the package installed with package.install_from_path "
            f"in a private home, translate.translate per line{WITHOUT_NETWORK if offline() else ''}; "
            f"ours: transduce translate --engine ctranslate2 {' '.join(ARGOS_SETTINGS)}; "
            f"{len(lines)} lines of {args.src}"
        ),
        rows=rows,
        differing=differing[:50],
    )


if __name__ == "__main__":
    main()
