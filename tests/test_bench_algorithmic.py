"""The algorithmic grid's tooling (issue 48): cells in parallel processes with their records written
as they finish and skipped on a re-run, the device and updates and learning curve in every
record, the jobs probe, the settings' names kept for the records made before the new options, and
the headline of the best settings at length 400."""

from __future__ import annotations

import json
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the repository root, where bench/ is

from bench.algorithmic import headline  # noqa: E402
from bench.algorithmic.grid import POSITIONS, config, curve, parse, setting_name  # noqa: E402
from bench.algorithmic.jobs import cell_argv  # noqa: E402
from bench.records import mean_pair  # noqa: E402
from transduce.train.run_dir import RunLock  # noqa: E402

TINY = [
    *("--models", "transformer", "--positions", "none", "--steps", "3", "--width", "16", "--d-ff", "32"),
    *("--heads", "2", "--layers", "1", "--ut-steps", "2", "--train-size", "40", "--eval-size", "3"),
    *("--train-len", "5", "--test-len", "8", "--lengths", "6", "--sweep-size", "2", "--device", "cpu"),
]


GRID_ENV = dict(os.environ, PYTHONPATH=f"{ROOT / 'src'}:{ROOT}")


def grid(*args: str | Path) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "bench.algorithmic.grid", *map(str, args)]
    return subprocess.run(command, cwd=ROOT, env=GRID_ENV, capture_output=True, text=True, timeout=600)


def long_grid(tmp_path: Path, minutes: str) -> list[str]:
    """A grid of one copy cell of 100,000 tiny updates (far more than a test waits for), run as a
    pool with a --minutes deadline, recording under tmp_path."""
    long = [*TINY[: TINY.index("--steps")], "--steps", "100000", *TINY[TINY.index("--steps") + 2 :]]
    command = [sys.executable, "-m", "bench.algorithmic.grid", "--tasks", "copy", "--seeds", "1", *long]
    return [*command, "--minutes", minutes, "--records", str(tmp_path / "r"), "--out", str(tmp_path / "o")]


def test_the_settings_recorded_before_the_new_options_keep_their_names():
    """The main grid's folder is named from the defaults; a new option counts once it is changed."""
    assert setting_name(parse([])) == "len40-400_steps1000_tok2048_06b7eff0"
    pool = ["--jobs", "4", "--device", "cpu", "--curve-every", "100"]
    assert setting_name(parse(pool)).endswith("06b7eff0")
    assert not setting_name(parse(["--act-tau", "0.001"])).endswith("06b7eff0")
    assert not setting_name(parse(["--program-len", "4"])).endswith("06b7eff0")
    assert not setting_name(parse(["--position-range", "128"])).endswith("06b7eff0")


def test_act_options_name_a_new_setting_and_reach_the_model():
    """ACT's options (issue 91): at their defaults the recorded settings keep their names; changed,
    they name a new setting and reach the model's config."""
    defaults = [
        *("--act-halt-bias", "1.0", "--act-min-steps", "1"),
        *("--act-tau-start", "0", "--act-halt-lr", "1"),
    ]
    assert setting_name(parse(defaults)).endswith("06b7eff0")
    changed = [
        *("--act-halt-bias", "-3", "--act-min-steps", "2", "--act-tau-encoder", "0"),
        *("--act-tau-start", "500", "--act-tau-ramp", "1000", "--act-halt-lr", "0.1", "--act-halt-detach"),
    ]
    args = parse(changed)
    assert not setting_name(args).endswith("06b7eff0")
    model = config(args, "reverse", "ut_act", "offset", 1).model
    assert (model.act_halt_bias, model.act_min_steps, model.act_halt_lr) == (-3.0, 2, 0.1)
    assert model.act_halt_detach
    assert (model.act_tau_encoder, model.act_tau_decoder, model.act_tau) == (0.0, None, 0.01)
    assert (model.act_tau_start, model.act_tau_ramp) == (500, 1000)


def test_the_curve_holds_act_steps_per_stack_where_the_model_has_them():
    validation = {"step": 500, "dev_char_acc": 0.5, "dev_seq_acc": 0.1, "dev_loss": 1.0}
    steps = {"encoder_ponder_mean": 1.5, "encoder_ponder_max": 3.0, "decoder_ponder_mean": 7.0}
    assert curve([validation | steps, {"step": 600, "train_loss": 2.0}, validation | {"step": 1000}]) == [
        {"updates": 500, "dev_char": 0.5, "dev_seq": 0.1, "dev_loss": 1.0}
        | {"encoder_ponder": 1.5, "decoder_ponder": 7.0},
        {"updates": 1000, "dev_char": 0.5, "dev_seq": 0.1, "dev_loss": 1.0},
    ]


@pytest.mark.parametrize("positions", list(POSITIONS))
def test_every_positions_choice_is_a_valid_configuration_of_the_draw_it_names(positions):
    """Each --positions name loads as a configuration whose randomisation and draw are the ones its
    name says (the draw is per_stack or per_step where the name ends so, shared otherwise)."""
    model = config(parse(["--position-range", "128"]), "reverse", "ut_act", positions, 1).model
    mode = positions.removesuffix("_spread").removesuffix("_per_stack").removesuffix("_per_step")
    assert model.position_randomisation == mode
    draw = next((d for d in ("per_stack", "per_step") if positions.endswith(d)), "shared")
    assert model.position_draw == draw
    assert model.position_eval == ("spread" if positions.endswith("_spread") else "dense")


def test_a_cell_process_gets_the_grid_arguments_without_the_pools():
    argv = ["--jobs", "4", "--tasks", "copy", "--minutes=30", "--cell", "copy:ut:none:1", "--steps", "9"]
    assert cell_argv(argv) == ["--tasks", "copy", "--steps", "9"]


def test_parallel_cells_record_device_updates_and_curve_and_a_rerun_skips_them(tmp_path):
    records, out = tmp_path / "records", tmp_path / "out"
    where = ("--records", records, "--out", out)
    cells = ("--tasks", "copy", "lte_program", "--seeds", "2", "--jobs", "2")
    done = grid(*cells, "--curve-every", "1", *TINY, *where)
    assert done.returncode == 0, done.stdout + done.stderr
    (folder,) = records.iterdir()
    files = sorted(folder.glob("*-seed*.json"))
    names = [f.name for f in files]
    assert names == [f"{t}-transformer-none-seed{s}.json" for t in ("copy", "lte_program") for s in (1, 2)]
    for path in files:
        record = json.loads(path.read_text())
        assert record["updates"] == 3 and record["device_type"] == "cpu" and record["device"]
        assert [point["updates"] for point in record["curve"]] == [1, 2, 3]
        assert record["curve"][-1]["dev_seq"] == record["dev_seq"]
        assert "--jobs" not in record["command"] and "--cell" not in record["command"]
        assert 0 <= record["forced_char"] <= 1 and 0 <= record["forced_seq"] <= 1
        assert ("t2t_char" in record) == (record["task"] == "copy")  # lengths 1..8; not for LTE
    assert "6" in json.loads(files[0].read_text())["by_length"]  # the sweep; not for the LTE task
    assert json.loads(files[2].read_text())["by_length"] == {}
    stamps = [f.stat().st_mtime_ns for f in files]
    again = grid(*cells, *TINY, *where)
    assert again.returncode == 0, again.stderr
    assert "0 cells done" in again.stdout and [f.stat().st_mtime_ns for f in files] == stamps
    assert "Learning to Execute program evaluation" in (folder / "table.md").read_text()


@pytest.mark.parametrize(
    ("lock", "holder"), [(".cell-lock", "bench.algorithmic.grid"), (".lock", "transduce train")]
)
def test_a_cell_another_invocation_holds_is_left_to_it_and_recorded_once_free(tmp_path, lock, holder):
    """Two invocations fill one grid side by side. A cell is held from its check to its record, not
    only while it trains: an invocation that found a run trained to the end but still being
    evaluated used to evaluate it again and overwrite its record with its own seconds of work. A
    run that a training process holds (`transduce train`, or a grid from before the cell lock) is
    left to it too, with one line, not a traceback."""
    args = ["--tasks", "copy", "--seeds", "1", *TINY, "--records", f"{tmp_path}/r", "--out", f"{tmp_path}/o"]
    name = setting_name(parse(args))
    work = tmp_path / "o" / name / "copy-transformer-none-seed1"
    record = tmp_path / "r" / name / "copy-transformer-none-seed1.json"
    with RunLock(work, lock, holder):
        held = grid(*args)
    assert held.returncode == 0, held.stdout + held.stderr
    assert f"skipped: {work} is in use by process {os.getpid()} on " in held.stdout
    assert f"({holder}, since" in held.stdout and not record.exists()
    assert "Traceback" not in held.stdout + held.stderr
    free = grid(*args)
    assert free.returncode == 0, free.stdout + free.stderr
    assert json.loads(record.read_text())["updates"] == 3


def test_a_longer_budget_continues_the_shorter_run_and_is_the_run_trained_from_the_start(tmp_path):
    """--continue-from copies the same cell's finished run at fewer updates, never changing it, and
    trains on. The learning rate ignores the total and a resume is exact, so the record is the one
    a run from the first update gives; it names its origin and counts the origin's training CPU.
    An origin without a record (still training or evaluating) is waited for, not copied."""

    def at(steps: int, where: str, *more: str) -> subprocess.CompletedProcess:
        tiny = [*TINY[: TINY.index("--steps")], "--steps", str(steps), *TINY[TINY.index("--steps") + 2 :]]
        out = ("--records", tmp_path / where / "r", "--out", tmp_path / where / "o")
        return grid("--tasks", "copy", "--seeds", "1", "--curve-every", "1", *tiny, *out, *more)

    def record(where: str, steps: int) -> dict:
        (path,) = (tmp_path / where / "r").glob(f"*_steps{steps}_*/copy-transformer-none-seed1.json")
        return json.loads(path.read_text())

    assert at(3, "a").returncode == 0
    shorter = record("a", 3)
    (origin,) = (tmp_path / "a" / "o").glob("*_steps3_*/copy-transformer-none-seed1")
    (origin / "interrupted.json").write_text(json.dumps({"interrupted_cpu_minutes": 7.0}))  # in its record
    files = {p: p.stat().st_mtime_ns for p in origin.rglob("*") if p.is_file() and p.name[0] != "."}
    (kept,) = (tmp_path / "a" / "r").glob("*_steps3_*/copy-transformer-none-seed1.json")
    kept.rename(kept.with_suffix(".away"))
    waiting = at(6, "a", "--continue-from", "3")
    assert waiting.returncode == 0 and f"skipped: {origin} has no record yet" in waiting.stdout
    assert not list((tmp_path / "a" / "r").glob("*_steps6_*/*-seed1.json"))
    kept.with_suffix(".away").rename(kept)
    longer = at(6, "a", "--continue-from", "3")
    assert longer.returncode == 0 and f"continues {origin} from update 3" in longer.stdout, longer.stdout
    straight = at(6, "b", "--continue-from", "3")
    assert straight.returncode == 0 and "to continue; it trains from update 1" in straight.stdout
    continued, fresh = record("a", 6), record("b", 6)
    (log,) = (tmp_path / "a" / "o").glob("*_steps6_*/copy-transformer-none-seed1/train.log")
    assert "train.steps=3 reached" in log.read_text() and log.read_text().count(" step 1: ") == 1
    assert continued["continued_from"] == f"{origin.parent.name}/{origin.name}"
    assert "continued_from" not in fresh
    assert continued["train_cpu_minutes"] > shorter["train_cpu_minutes"] == continued["continued_cpu_minutes"]
    assert continued["train_cpu_minutes"] < shorter["train_cpu_minutes"] + 7.0  # not counted twice
    assert continued["updates"] == fresh["updates"] == 6
    for key in ("curve", "char", "seq", "dev_loss", "forced_char", "t2t_char", "by_length"):
        assert continued[key] == fresh[key], key
    assert {p: p.stat().st_mtime_ns for p in files} == files and record("a", 3) == shorter


def test_the_deadline_interrupts_a_cell_of_a_grid_started_in_the_background(tmp_path):
    """A shell's background job ignores SIGINT, and its children inherit that: the cell must
    still stop at --minutes (saving a checkpoint) instead of training on to the end."""
    done = subprocess.run(
        long_grid(tmp_path, "0.5"),
        cwd=ROOT,
        env=GRID_ENV,
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 cells done, 1 left for the next run" in done.stdout
    assert list((tmp_path / "o").glob("*/copy-transformer-none-seed1/checkpoints/ckpt-*"))
    log = next((tmp_path / "o").glob("*/logs/copy-transformer-none-seed1.log")).read_text()
    assert "Traceback" not in log and "interrupted: cell copy-transformer-none-seed1;" in log, log
    (spent,) = (tmp_path / "o").glob("*/copy-transformer-none-seed1/interrupted.json")
    assert json.loads(spent.read_text())["interrupted_cpu_minutes"] > 0  # the record will count it


def test_ctrl_c_stops_the_pool_s_cells_with_checkpoints_and_one_line(tmp_path):
    """SIGINT to the grid's process alone (`kill -INT`; a terminal's Ctrl-C reaches its cells too)
    is passed on to the running cell, which saves a checkpoint; the grid then says so in one line
    and exits 130, with no traceback. The grid starts as a shell's background job does (`nohup
    ... &`), with SIGINT ignored, which Python keeps unless the grid asks for it back."""
    proc = subprocess.Popen(
        long_grid(tmp_path, "30"),
        cwd=ROOT,
        env=GRID_ENV,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
    )
    deadline = time.monotonic() + 120
    while not any("step" in p.read_text() for p in (tmp_path / "o").glob("*/copy-*/train.log")):
        assert proc.poll() is None and time.monotonic() < deadline, "the cell never started training"
        time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, out + err
    assert "Traceback" not in err and err.strip().splitlines() == [err.strip()]
    assert err.startswith("interrupted: ") and "resumes" in err
    assert list((tmp_path / "o").glob("*/copy-transformer-none-seed1/checkpoints/ckpt-*"))


def test_the_jobs_probe_records_cells_per_minute(tmp_path):
    where = ("--records", tmp_path / "r", "--out", tmp_path)
    done = grid("--jobs-probe", "1,2", "--probe-steps", "2", *TINY, *where)
    assert done.returncode == 0, done.stdout + done.stderr
    (path,) = (tmp_path / "r").glob("jobs-probe-*.json")
    record = json.loads(path.read_text())
    assert [row["jobs"] for row in record["rows"]] == [1, 2]
    for row in record["rows"]:
        assert row["cells_per_minute"] == pytest.approx(row["cells"] / row["wall_minutes"], rel=0.02)
    assert record["best_jobs"] in (1, 2) and record["device"]
    assert not list(tmp_path.glob("probe*"))  # the scratch cells are gone


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--jobs", "0"], "--jobs 0: must be at least 1"),
        (["--device", "gpu"], "argument --device: invalid choice"),
        (["--cell", "copy:nope:none:1"], "error: --cell copy:nope:none:1: want TASK:MODEL:POSITIONS:SEED"),
        (["--continue-from", "1000"], "--continue-from 1000: must lie in 1..999 (below --steps)"),
        (["--steps", "9", "--continue-from", "0"], "--continue-from 0: must lie in 1..8 (below --steps)"),
    ],
)
def test_bad_arguments_are_one_error_line(tmp_path, args, message):
    done = grid(*args, "--records", tmp_path / "r", "--out", tmp_path / "o")
    assert done.returncode == 2 and message in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "o").exists()


def fake_run(task: str, model: str, positions: str, seed: int, char: float, seq: float, **more) -> dict:
    lengths = {"40": {"char": 1.0, "seq": 1.0}, "200": {"char": char + 0.1, "seq": seq}}
    run = {"task": task, "model": model, "positions": positions, "seed": seed, "char": char, "seq": seq}
    return run | {"steps": 1000, "by_length": lengths} | more


def write_setting(records: Path, name: str, train_len: int, runs: list[dict], **sizes: int) -> None:
    folder = records / name
    folder.mkdir(parents=True)
    (folder / "setting.json").write_text(json.dumps({"train_len": train_len, "test_len": 400} | sizes))
    for run in runs:
        path = folder / f"{run['task']}-{run['model']}-{run['positions']}-seed{run['seed']}.json"
        path.write_text(json.dumps(run))


def test_the_headline_is_the_best_setting_of_each_model_at_400(tmp_path):
    """Means over seeds by hand; the better sequence accuracy wins over more updates or seeds;
    a setting at other lengths does not count, nor one at other sizes than the paper's (a
    one-layer Transformer, a UT of 4 steps). The best by tensor2tensor's measure is chosen alike
    among the settings whose every run has it."""
    records = tmp_path / "records"
    write_setting(
        records,
        "a",
        40,
        [
            fake_run("copy", "ut", "offset", 1, 0.5, 0.25, machine="Xeon, 2 CPUs", t2t_char=0.8, t2t_seq=0.1),
            fake_run("copy", "ut", "offset", 2, 0.7, 0.35, machine="Xeon, 2 CPUs", t2t_char=0.6, t2t_seq=0.3),
            fake_run("copy", "ut", "none", 1, 0.9, 0.1, machine="Xeon, 2 CPUs"),
            fake_run("copy", "ut", "none", 2, 0.9, 0.1, machine="Xeon, 2 CPUs", t2t_char=1.0, t2t_seq=1.0),
        ],
    )
    more = fake_run(
        "copy", "ut", "offset", 1, 0.9, 0.2, updates=9000, device="H100", t2t_char=0.9, t2t_seq=0.15
    )
    write_setting(records, "b", 40, [more])
    write_setting(records, "c", 20, [fake_run("copy", "ut", "offset", 1, 1.0, 1.0)])
    write_setting(records, "d", 40, [fake_run("reverse", "transformer", "none", 1, 0.2, 0.0, device="H100")])
    shallow = fake_run("reverse", "transformer", "none", 1, 0.9, 0.9, t2t_char=0.9, t2t_seq=0.9)
    write_setting(records, "e", 40, [shallow], layers=1)
    write_setting(records, "f", 40, [fake_run("copy", "ut", "none", 3, 1.0, 1.0)], ut_steps=4)
    rows = headline.write(records, tmp_path / "plot.png")
    assert json.loads((records / "headline.json").read_text()) == rows
    copy, reverse = rows
    assert (copy["task"], copy["model"], copy["setting"], copy["positions"]) == ("copy", "ut", "a", "offset")
    assert copy["char"] == pytest.approx(0.6) and copy["seq"] == pytest.approx(0.3) and copy["n"] == 2
    assert copy["updates"] == 1000 and copy["device"] == "Xeon"
    assert copy["by_length"]["200"]["char"] == pytest.approx(0.7)
    assert copy["paper"] == [0.91, 0.35]
    forced = copy["teacher_forced"]
    assert (forced["setting"], forced["positions"], forced["n"], forced["updates"]) == (
        "a",
        "offset",
        2,
        1000,
    )
    assert forced["char"] == pytest.approx(0.7) and forced["seq"] == pytest.approx(0.2)
    assert (reverse["model"], reverse["device"], reverse["paper"]) == ("transformer", "H100", [0.13, 0.06])
    assert reverse["teacher_forced"] is None
    assert (tmp_path / "plot.png").stat().st_size > 0


def test_the_headline_keeps_means_unrounded_so_the_page_rounds_them_once(tmp_path):
    """Seeds whose mean is just under .xx5 (0.17, 0.2, 0.215: 0.19499...): a mean stored rounded to
    four places (0.195) would read 0.20 in the headline table and 0.19 where the page rounds the
    seeds' own mean; unrounded, both read 0.19."""
    records = tmp_path / "records"
    runs = [
        fake_run("reverse", "transformer", "offset", seed, 0.5, 0.1, t2t_char=0.9, t2t_seq=seq)
        for seed, seq in ((1, 0.17), (2, 0.2), (3, 0.215))
    ]
    write_setting(records, "a", 40, runs)
    (row,) = headline.headline(records)
    assert row["teacher_forced"]["seq"] == statistics.fmean(r["t2t_seq"] for r in runs)
    assert f"{row['teacher_forced']['seq']:.2f}" == mean_pair(runs, "t2t_char", "t2t_seq")[-4:] == "0.19"


def test_the_committed_headline_is_what_the_records_give(tmp_path):
    committed = json.loads((ROOT / "bench/records/algorithmic/headline.json").read_text())
    assert headline.headline(ROOT / "bench/records/algorithmic") == committed


def test_the_recipe_search_reports_the_updates_to_the_target():
    from bench.algorithmic.recipe import first_passing, setting_argv, summary

    curve = [{"updates": u, "dev_seq": s} for u, s in ((250, 0.5), (500, 0.91), (750, 0.85), (1000, 0.95))]
    assert first_passing(curve, 0.9) == 500 and first_passing(curve, 0.99) is None
    assert setting_argv("lr=2,warmup=100,act_steps=4") == [
        "--lr-scale",
        "2",
        "--warmup",
        "100",
        "--ut-steps",
        "4",
    ]
    runs = [
        {"curve": curve, "dev_seq": 0.95, "cpu_minutes": 3.0},
        {"curve": curve[:2], "dev_seq": 0.91, "cpu_minutes": 1.0},
    ]
    row = summary("lr=2", runs, 0.9)
    assert row["updates_to_target"] == [500, 500] and row["mean_updates_to_target"] == 500
    assert row["final_dev_seq"] == pytest.approx(0.93) and row["best_dev_seq"] == pytest.approx(0.93)
    for bad in ("lr=x", "speed=2", "lr"):
        with pytest.raises(ValueError, match="setting"):
            setting_argv(bad)


def test_a_record_counts_the_cpu_minutes_of_the_invocations_interrupted_before_it(tmp_path):
    """What interrupted invocations spent (kept in the run's folder when they stopped) is added to
    the training CPU minutes of the record that the finishing invocation writes."""
    out = ("--records", tmp_path / "r", "--out", tmp_path / "o")
    work = tmp_path / "o" / setting_name(parse(TINY)) / "copy-transformer-none-seed1"
    work.mkdir(parents=True)
    (work / "interrupted.json").write_text(json.dumps({"interrupted_cpu_minutes": 7.0}))
    assert grid("--tasks", "copy", "--seeds", "1", *TINY, *out).returncode == 0
    (path,) = (tmp_path / "r").glob("*/copy-transformer-none-seed1.json")
    record = json.loads(path.read_text())
    assert 7.0 < record["train_cpu_minutes"] < 7.0 + record["wall_minutes"] * 2 + 1


def test_test_time_depth_runs_each_stack_the_steps_asked_and_the_trained_depth_is_the_grid_s(tmp_path):
    """bench.algorithmic.depth (issue 91): UT+ACT's dev pass takes exactly d steps a stack at
    each depth; the fixed-depth UT at its trained depth gives the grid's own t2t figures, and
    another depth another dev loss."""
    models = TINY.index("--models") + 1
    tiny = [*TINY[:models], "ut", "ut_act", *TINY[models + 1 :]]  # both UTs in place of the Transformer
    setting = ["--tasks", "copy", "--seeds", "1", *tiny, "--records", str(tmp_path / "r")]
    setting += ["--out", str(tmp_path / "o")]
    done = grid(*setting)
    assert done.returncode == 0, done.stderr[-2000:]
    command = [sys.executable, "-m", "bench.algorithmic.depth", "--depths", "1", "2", "3", "--", *setting]
    probe = subprocess.run(command, cwd=ROOT, env=GRID_ENV, capture_output=True, text=True, timeout=600)
    assert probe.returncode == 0, probe.stderr[-2000:]
    (folder,) = (tmp_path / "r").iterdir()
    act = json.loads((folder / "depth" / "copy-ut_act-none-seed1.json").read_text())
    for d in (1, 2, 3):
        assert act["depths"][str(d)]["dev_encoder_steps"] == act["depths"][str(d)]["dev_decoder_steps"] == d
    fixed = json.loads((folder / "depth" / "copy-ut-none-seed1.json").read_text())
    recorded = json.loads((folder / "copy-ut-none-seed1.json").read_text())
    assert fixed["trained"]["steps"] == 2
    at_trained = fixed["depths"]["2"]
    assert (at_trained["t2t_char"], at_trained["t2t_seq"]) == (recorded["t2t_char"], recorded["t2t_seq"])
    assert fixed["depths"]["1"]["dev_nll"] != at_trained["dev_nll"]
    assert "| 3 |" in probe.stdout
