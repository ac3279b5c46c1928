"""Build the offline English->German corpus once into bench/out/l10n-de (ignored by git; a
budget other than the default 1500 MB builds into bench/out/l10n-de-<budget>mb instead, so
corpora of different sizes never stand in for each other).

    python -m bench.data.l10n_corpus [--lang de] [--budget-mb 1500]

Runs the builder of bench/data/l10n/ (real human translations from the gettext catalogs in
Debian packages; needs apt-file and lz4, installed here when missing), with the .debs cached in
bench/out/debs, and reuses the result when train/dev/test files are already there. Prints the
corpus's line counts.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
from pathlib import Path

from bench.data.l10n.build import Options
from bench.data.l10n.build import build as build_corpus
from bench.records import OUT


def ensure_tools() -> None:
    """apt-file and lz4 (the builder reads apt's Contents indices with them), installed with
    apt-file's indices when missing."""
    if shutil.which("apt-file") and shutil.which("lz4"):
        return
    subprocess.run(["apt-get", "update", "-q"], check=True, stdout=subprocess.DEVNULL)
    subprocess.run(
        ["apt-get", "install", "-y", "-q", "apt-file", "lz4"], check=True, stdout=subprocess.DEVNULL
    )
    subprocess.run(["apt-file", "update"], check=True, stdout=subprocess.DEVNULL)


DEFAULT_BUDGET_MB = 1500


def corpus_dir(lang: str, budget_mb: int) -> Path:
    """Where the corpus of this language and .deb budget lives."""
    suffix = "" if budget_mb == DEFAULT_BUDGET_MB else f"-{budget_mb}mb"
    return OUT / f"l10n-{lang}{suffix}"


def build(lang: str, budget_mb: int) -> Path:
    out = corpus_dir(lang, budget_mb)
    files = [out / f"{split}.{side}" for split in ("train", "dev", "test") for side in ("en", lang)]
    if all(f.exists() for f in files):
        return out
    ensure_tools()
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    build_corpus(Options(lang=lang, out=tmp, cache_dir=OUT / "debs", budget_mb=budget_mb))
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    return out


def prepared(corpus: Path, src: str, tgt: str, vocab_size: int = 8000) -> Path:
    """`corpus` (raw train/dev/test.{src,tgt}) as `transduce prepare` makes it, with one shared
    sentencepiece vocabulary of `vocab_size`, in bench/out/<corpus>-data (-<size> for other
    sizes); reused when up to date."""
    from transduce.data.prepare import PrepareOptions, prepare_text

    suffix = "" if vocab_size == 8000 else f"-{vocab_size}"
    data = OUT / f"{corpus.name}-data{suffix}"
    prepare_text(corpus, data, PrepareOptions(src, tgt, vocab_size=vocab_size), show_progress=False)
    return data


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--lang", default="de")
    parser.add_argument("--budget-mb", type=int, default=DEFAULT_BUDGET_MB)
    args = parser.parse_args()
    out = build(args.lang, args.budget_mb)
    for split in ("train", "dev", "test"):
        lines = sum(1 for _ in (out / f"{split}.en").open(encoding="utf-8"))
        print(f"{split}: {lines} pairs in {out}")


if __name__ == "__main__":
    main()
