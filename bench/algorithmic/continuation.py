"""A longer budget continues a shorter one's run instead of training its first updates again.

The learning rate (`InverseSqrt`) does not depend on the total number of updates and a resumed run
is bit-identical to an uninterrupted one, so a cell at 30,000 updates that starts from the same
cell's checkpoint at 10,000 is the run it would have trained from the start, for a third of the
cost. The shorter run's folder is copied, never changed; the copy's checkpoints arrive last and in
one rename, so an interrupted copy leaves no checkpoint behind and is made again on the next try.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from transduce.fileio import OutputError, remove_stale_temporaries, temporary, write_text_atomic
from transduce.train.run_dir import RunLock

MARKER = "continued.json"  # in the longer run's folder: what it continues, and that run's cost
SPENT = "interrupted.json"  # in a run's folder: the CPU its interrupted invocations spent on it


def cell_lock(run: Path) -> RunLock:
    """The grid's lock on a cell's run, held from its check to its record (training takes the
    run's own `.lock` only while it trains)."""
    return RunLock(run, ".cell-lock", "bench.algorithmic.grid")


def adopt(source: Path, record: Path, work: Path, name: str) -> bool:
    """Copy the finished run `source` (whose record is `record`) into `work`, which holds no
    checkpoint yet; False when there is no such run to continue (the cell trains from the start).
    `name` is what the longer run's record names as its origin."""
    if not (source / "checkpoints").is_dir():
        return False
    if not record.exists():
        raise OutputError(f"{source} has no record yet at {record}; it is continued once it has finished")
    with cell_lock(source):  # nor while another invocation evaluates it
        remove_stale_temporaries(work)
        for entry in sorted(source.iterdir()):
            skipped = entry.name.startswith(".") or entry.name in ("checkpoints", SPENT)
            if skipped or (work / entry.name).exists():
                continue  # locks, temporaries, checkpoints (last), its cost (in its record), a try's copies
            copy(entry, work / entry.name)
        cost = json.loads(record.read_text())["train_cpu_minutes"]
        write_text_atomic(work / MARKER, json.dumps({"continued_from": name, "continued_cpu_minutes": cost}))
        copy(source / "checkpoints", work / "checkpoints")
    return True


def copy(entry: Path, target: Path) -> None:
    """A file or folder copied under a temporary name and renamed into place."""
    part = temporary(target)
    if entry.is_dir():
        shutil.copytree(entry, part)
    else:
        shutil.copy2(entry, part)
    part.rename(target)


def continued(work: Path) -> dict:
    """What the run in `work` continues and that run's training CPU minutes; empty for a run
    trained from its first update."""
    marker = work / MARKER
    return json.loads(marker.read_text()) if marker.exists() else {}


def add_interrupted(work: Path, minutes: float) -> None:
    """Keep the CPU minutes an invocation spent on the run in `work` before it was interrupted, so
    the record that a later invocation writes counts them too."""
    total = interrupted(work) + minutes
    write_text_atomic(work / SPENT, json.dumps({"interrupted_cpu_minutes": total}))


def interrupted(work: Path) -> float:
    """The CPU minutes that interrupted invocations spent on the run in `work` (0 for none)."""
    path = work / SPENT
    return json.loads(path.read_text())["interrupted_cpu_minutes"] if path.exists() else 0.0
