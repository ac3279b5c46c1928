"""docs/results.md is what `python -m bench.results` makes of bench/records/: current, one page, and
each claim's newest record wins."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root, where bench/ is

from bench.results import MAX_LINES, PAGE, RECORDS, newest, render


def test_the_page_is_what_the_records_give():
    assert PAGE.read_text(encoding="utf-8") == render(), "run: python -m bench.results"


def test_the_page_fits_in_its_limit():
    assert len(PAGE.read_text(encoding="utf-8").splitlines()) <= MAX_LINES


def test_a_newer_record_of_a_claim_replaces_the_older_on_the_page(tmp_path):
    records = tmp_path / "records"
    shutil.copytree(RECORDS, records)
    old = newest(records, "decode", "int8-width")
    new = json.loads(json.dumps(old))
    new["date"] = "2099-01-01"
    new["command"] = "python -m bench.decode.int8_width --presets elsewhere"
    for row in new["rows"]:
        row["vs_float32"] = 9.87
    (records / "decode" / "int8-width-2099-01-01.json").write_text(json.dumps(new), encoding="utf-8")
    page = render(records)
    section = page.split("## int8 by model width", 1)[1].split("\n## ", 1)[0]
    assert "| small-fast | 128 | 9.87x | 9.87x | 9.87x | 9.87x |" in section
    assert "2099-01-01" in section and "--presets elsewhere" in section
    assert old["date"] not in section
    assert newest(records, "decode", "int8-width")["date"] == "2099-01-01"


def test_claims_whose_names_share_a_prefix_are_kept_apart():
    """`decode` must not pick up a `decode-e2e` record, however new."""
    assert newest(RECORDS, "decode", "decode")["claim"] == "decode"
    assert newest(RECORDS, "decode", "decode-e2e")["claim"] == "decode-e2e"
