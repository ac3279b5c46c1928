"""`python -m bench.data.l10n`: the builder's command line."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from . import __doc__ as about
from .build import Options, build


def parse_args() -> Options:
    parser = argparse.ArgumentParser(
        prog="python -m bench.data.l10n",
        description=about,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--lang", required=True, help="target language code: de, fr, es, pt_BR, ...")
    parser.add_argument("--out", type=Path, required=True, help="folder to write the corpus into")
    parser.add_argument("--cache-dir", type=Path, default=Path("bench/out/debs"), help="the .debs, kept")
    parser.add_argument(
        "--packages", type=Path, help="file of package names, one a line: no discovery, no budget"
    )
    parser.add_argument(
        "--budget-mb",
        type=float,
        default=1500.0,
        help="the selected .debs' total size (default 1500; 0: all)",
    )
    parser.add_argument(
        "--max-unranked-mb",
        type=float,
        default=2.0,
        help="packages the rank table lacks are taken first if their .deb is at most this big",
    )
    parser.add_argument("--no-download", action="store_true", help="use only the cached .debs")
    parser.add_argument("--dry-run", action="store_true", help="print the package selection and stop")
    parser.add_argument("--dev-size", type=int, default=2000)
    parser.add_argument("--test-size", type=int, default=2000)
    parser.add_argument("--min-words", type=int, default=2, help="fewest source words a pair may have")
    parser.add_argument("--max-words", type=int, default=100, help="most source words a pair may have")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 2, help="processes reading .debs")
    parser.add_argument(
        "--reserve",
        type=Path,
        action="append",
        default=[],
        metavar="FILE",
        help="sources (a frozen test.en, say) kept out of every split by near-duplicate key; repeatable",
    )
    args = parser.parse_args()
    return Options(
        lang=args.lang,
        out=args.out,
        cache_dir=args.cache_dir,
        packages_file=args.packages,
        budget_mb=args.budget_mb,
        max_unranked_mb=args.max_unranked_mb,
        download=not args.no_download,
        dry_run=args.dry_run,
        dev_size=args.dev_size,
        test_size=args.test_size,
        min_words=args.min_words,
        max_words=args.max_words,
        jobs=args.jobs,
        reserve=args.reserve,
    )


if __name__ == "__main__":
    build(parse_args())
