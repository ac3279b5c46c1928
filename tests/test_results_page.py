"""docs/results.md is what `python -m bench.results` makes of bench/records/: current, one page, and
each claim's newest record wins."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root, where bench/ is

import bench.results as results
from bench.results import MAX_LINES, PAGE, PROGRAM_SETTINGS, RECORDS, newest, render, teacher_forced


def test_the_page_is_what_the_records_give():
    assert PAGE.read_text(encoding="utf-8") == render(), "run: python -m bench.results"


def test_the_page_fits_in_its_limit():
    assert len(PAGE.read_text(encoding="utf-8").splitlines()) <= MAX_LINES


@pytest.mark.parametrize("check", [False, True])
def test_the_generator_refuses_a_page_over_its_limit(tmp_path, monkeypatch, check):
    """Writing or checking, a page over MAX_LINES exits non-zero, so it cannot land unnoticed."""
    long_page = "".join(f"line {i}\n" for i in range(MAX_LINES + 1))
    out = tmp_path / "results.md"
    out.write_text(long_page, encoding="utf-8")
    monkeypatch.setattr(results, "render", lambda records=None: long_page)
    argv = ["bench.results", "--out", str(out)] + (["--check"] if check else [])
    monkeypatch.setattr(sys, "argv", argv)
    with pytest.raises(SystemExit, match=f"{MAX_LINES + 1} lines, over the page's {MAX_LINES}"):
        results.main()
    assert out.read_text(encoding="utf-8") == long_page


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


def _run(
    folder: Path, task: str, model: str, positions: str, updates: int, seed: int, **scores: float
) -> None:
    run = {"task": task, "model": model, "positions": positions, "updates": updates, "char": 0.5, "seq": 0.0}
    run |= {"forced_char": 0.5, "forced_seq": 0.0, "dev_seq": 1.0} | scores
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{task}-{model}-{positions}-seed{seed}.json").write_text(json.dumps(run), encoding="utf-8")


def test_the_teacher_forced_table_shows_each_model_at_its_best_learned_setting(tmp_path):
    """Per (task, model): cells at chance in distribution are left out, each setting is taken at its
    most updates, and of the settings the one best by tensor2tensor's measure is shown, ranked as
    the headline ranks settings (sequences, then characters). A control at another depth than the
    paper's Transformer is not a candidate, however good."""
    short = tmp_path / "algorithmic" / "len40-400_steps1000_tok2048_aaaa"
    long = tmp_path / "algorithmic" / "len40-400_steps10000_tok2048_bbbb"
    shallow = tmp_path / "algorithmic" / "len40-400_steps10000_tok2048_cccc"
    for folder in (short, long, shallow):
        folder.mkdir(parents=True)
        (folder / "setting.json").write_text("{}", encoding="utf-8")
    (shallow / "setting.json").write_text('{"layers": 1}', encoding="utf-8")
    _run(shallow, "copy", "transformer", "none", 10000, 1, dev_char=1.0, t2t_char=0.99, t2t_seq=0.9)
    _run(short, "copy", "transformer", "none", 1000, 1, dev_char=0.9, t2t_char=0.99, t2t_seq=0.5)
    _run(long, "copy", "transformer", "none", 10000, 1, dev_char=1.0, t2t_char=0.61, t2t_seq=0.1)
    _run(long, "copy", "transformer", "offset", 10000, 1, dev_char=1.0, t2t_char=0.71, t2t_seq=0.2)
    _run(long, "copy", "transformer", "offset", 10000, 2, dev_char=1.0, t2t_char=0.73, t2t_seq=0.4)
    _run(long, "copy", "ut", "none", 10000, 1, dev_char=1.0, t2t_char=0.42, t2t_seq=0.0)
    _run(long, "copy", "ut", "offset", 10000, 1, dev_char=0.2, t2t_char=0.95, t2t_seq=0.9)
    _run(long, "reverse", "ut_act", "none", 10000, 1, dev_char=1.0, t2t_char=0.12, t2t_seq=0.14)
    _run(long, "reverse", "ut_act", "offset", 10000, 1, dev_char=1.0, t2t_char=0.10, t2t_seq=0.15)
    table = teacher_forced(tmp_path)
    rows = [line for line in table if line.startswith("| copy")]
    assert len(rows) == 2
    assert rows[0].startswith("| copy | Transformer | offset | 10000 | 2 |") and "| 0.72 / 0.30 |" in rows[0]
    assert rows[1].startswith("| copy | UT | none | 10000 | 1 |") and "| 0.42 / 0.00 |" in rows[1]
    (reverse,) = [line for line in table if line.startswith("| reverse")]
    assert reverse.startswith("| reverse | UT+ACT | offset |"), "ranked as the headline: sequences first"


@pytest.mark.parametrize(
    ("setting", "model", "row"),
    [
        ('{"act_min_steps": 4}', "ut_act", "| reverse | UT+ACT | offset, act_min_steps 4 | 10000 | 1 |"),
        ('{"lr_scale": 0.25}', "transformer", "| reverse | Transformer | offset | 10000 | 1 |"),
    ],
)
def test_the_teacher_forced_table_pools_seeds_only_within_one_recipe(tmp_path, setting, model, row):
    """Settings that differ in anything but their updates (an ACT option, issue 91, named after the
    positions; a learning rate) are two cells, never one mean: the better is shown with its own seeds."""
    plain = tmp_path / "algorithmic" / "len40-400_steps10000_tok2048_aaaa"
    other = tmp_path / "algorithmic" / "len40-400_steps10000_tok2048_bbbb"
    for folder, written in ((plain, "{}"), (other, setting)):
        folder.mkdir(parents=True)
        (folder / "setting.json").write_text(written, encoding="utf-8")
    for seed in (1, 2, 3):
        _run(plain, "reverse", model, "offset", 10000, seed, dev_char=1.0, t2t_char=0.12, t2t_seq=0.15)
    _run(other, "reverse", model, "offset", 10000, 1, dev_char=1.0, t2t_char=0.4, t2t_seq=0.3)
    (shown,) = [line for line in teacher_forced(tmp_path) if line.startswith("| reverse")]
    assert shown.startswith(row) and "| 0.40 / 0.30 |" in shown


def test_the_program_table_gives_each_budget_its_columns_and_only_the_measured_ones(tmp_path):
    """A record fills its budget's and model's column (teacher-forced); a column no run fills is left out."""
    records = tmp_path / "records"
    shutil.copytree(RECORDS, records)
    shutil.rmtree(records / "algorithmic" / PROGRAM_SETTINGS["50k"], ignore_errors=True)
    _run(
        records / "algorithmic" / PROGRAM_SETTINGS["50k"],
        "lte_addition",
        "ut",
        "none",
        50000,
        9,
        forced_char=0.11,
        forced_seq=0.22,
    )
    section = render(records).split("Learning to Execute's program evaluation", 1)[1]
    header, _, _, _, addition = section.split("\n\n", 2)[1].splitlines()[:5]
    assert header.endswith("| ours at 20k: T | ours at 20k: UT+ACT | ours at 50k: UT |")
    assert "10k: UT |" not in header and "50k: T |" not in header
    assert addition.startswith("| addition |") and addition.endswith("| 0.11 / 0.22 (1) |")


def test_a_days_second_record_is_newer_than_its_first_and_older_than_the_next_day(tmp_path):
    folder = tmp_path / "gpu"
    folder.mkdir()
    for name in ("x-2026-11-30", "x-2026-11-30-2", "x-2026-11-29-3", "x-2026-11-30-10"):
        (folder / f"{name}.json").write_text(json.dumps({"name": name}), encoding="utf-8")
    assert newest(tmp_path, "gpu", "x")["name"] == "x-2026-11-30-10"
    (folder / "x-2026-12-01.json").write_text(json.dumps({"name": "next day"}), encoding="utf-8")
    assert newest(tmp_path, "gpu", "x")["name"] == "next day"


def test_a_session_with_opennmt_time_to_quality_puts_it_beside_ours(tmp_path):
    records = tmp_path / "records"
    shutil.copytree(RECORDS, records)
    folder = records / "gpu" / "h100-2099-01-01"
    folder.mkdir()
    run = {"minutes": 4.36, "updates": 790, "tokens_per_s": 71234.0, "averaged": ["a", "b", "c"]}
    (folder / "onmt-ttq.json").write_text(json.dumps({**run, "bleu": 31.5, "chrf": 57.25}))
    session = {"date": "2099-01-01", "host": "NVIDIA H100 (80 GiB)", "results": "h100-2099-01-01"}
    (records / "gpu" / "gpu-session-2099-01-01.json").write_text(json.dumps(session))
    section = render(records).split("## GPU", 1)[1].split("\n## ", 1)[0]
    assert "for 4.36 minutes of training (790 updates at 71,234 target tokens/s" in section
    assert (
        "its last 3 saves averaged: test BLEU **31.50**, chrF 57.25 (beam 4; 2099-01-01, NVIDIA H100)"
        in section
    )
    assert "48.26" in section  # our time to quality stays from the session that ran it
    assert "OpenNMT-py on the same recipe and minutes: not yet run" not in section
    assert "OpenNMT-py on the same recipe and minutes: not yet run" in render(RECORDS)
