"""Training across machines (issue 50 item 5): `torchrun --nnodes 2` with the c10d rendezvous,
tried here as two "nodes" of one process each on 127.0.0.1 (gloo), sharing the run directory as
nodes share a network file system."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
from ports import free_port
from safetensors.torch import load_file
from tiny import TINY

from transduce.store.checkpoint import step_checkpoints
from transduce.train.build import Distributed
from transduce.train.state import peer_lost

COMMON = [*TINY, "model.dropout=0", "train.threads=1"]
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONFAULTHANDLER": "1"}


@dataclass
class Node:
    process: subprocess.Popen
    log: Path  # its stdout and stderr


def node(run: Path, port: int, *extra: str, host: bool) -> Node:
    """One node's launch, as on each machine: the same command; the `host` node serves the
    rendezvous store (said, not guessed from the address, which both "nodes" here share) and
    every address is 127.0.0.1, with no name lookup of this machine. Each node is its own
    process group, with its output in files beside the run (a pipe nobody reads could stall it)."""
    launch = ["--nnodes", "2", "--nproc_per_node", "1", "--rdzv-backend", "c10d", "--local-addr", "127.0.0.1"]
    launch += ["--rdzv-endpoint", f"127.0.0.1:{port}", "--rdzv-id", "nodes-test"]
    launch += ["--rdzv-conf", f"is_host={int(host)}"]
    command = [sys.executable, "-m", "torch.distributed.run", *launch, "-m", "transduce", "train", "small"]
    command += [*COMMON, *extra, "--run-dir", str(run), "--no-progress"]
    log = run.parent / f"{run.name}-{port}-{'host' if host else 'guest'}.log"
    with log.open("w") as out:
        return Node(subprocess.Popen(command, stdout=out, stderr=out, env=ENV, start_new_session=True), log)


def pair(run: Path, *extra: str) -> list[Node]:
    """Two nodes of one run, on a fresh port."""
    port = free_port()
    return [node(run, port, *extra, host=True), node(run, port, *extra, host=False)]


def finish(*nodes: Node, timeout: float = 150) -> list[tuple[int, str]]:
    """Each node's exit status and output. A node still running after `timeout` seconds is a
    hang: its workers print where they are (faulthandler, on SIGABRT), every node is killed and
    the test fails with all the output."""
    deadline = time.monotonic() + timeout
    processes = [n.process for n in nodes]
    while any(p.poll() is None for p in processes) and time.monotonic() < deadline:
        time.sleep(0.2)
    hung = [p for p in processes if p.poll() is None]
    for p in hung:
        for pid in children(p.pid):
            with contextlib.suppress(ProcessLookupError):  # it may have ended since
                os.kill(pid, signal.SIGABRT)
    time.sleep(2 if hung else 0)
    for p in processes:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    outputs = [n.log.read_text() for n in nodes]
    assert not hung, f"{len(hung)} node(s) still running after {timeout} s:\n" + "\n----\n".join(
        o[-4000:] for o in outputs
    )
    return [(p.returncode, o) for p, o in zip(processes, outputs, strict=True)]


def weights(run: Path) -> dict[str, torch.Tensor]:
    return load_file(str(step_checkpoints(run / "checkpoints")[-1] / "model.safetensors"))


def children(pid: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def test_two_nodes_equal_one_process_with_the_same_global_batch(tmp_path):
    steps = ["train.steps=3", "train.save_every=3"]
    alone = [*COMMON, *steps, "train.accumulate=2", "--run-dir", str(tmp_path / "one"), "--no-progress"]
    single = subprocess.run(
        [sys.executable, "-m", "transduce", "train", "small", *alone],
        capture_output=True,
        text=True,
        env=ENV,
        timeout=300,
    )
    assert single.returncode == 0, single.stderr[-2000:]
    for code, err in finish(*pair(tmp_path / "two", *steps)):
        assert code == 0, err[-2000:]
    a, b = weights(tmp_path / "one"), weights(tmp_path / "two")
    assert max(float((a[k] - b[k]).abs().max()) for k in a) < 1e-5


def test_a_node_that_dies_stops_the_survivor_with_a_clear_error_and_the_run_resumes(tmp_path):
    run = tmp_path / "run"
    steps = ["train.steps=400", "train.save_every=10"]
    survivor, doomed = pair(run, *steps)
    deadline = time.monotonic() + 240
    while not (run / "checkpoints").is_dir() or not step_checkpoints(run / "checkpoints"):
        assert time.monotonic() < deadline and survivor.process.poll() is None, "no checkpoint written"
        time.sleep(0.2)
    for pid in [doomed.process.pid, *children(doomed.process.pid)]:  # the machine goes: launcher and worker
        os.kill(pid, signal.SIGKILL)
    code, err = finish(survivor, timeout=120)[0]
    doomed.process.wait()
    assert code != 0
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "another process of the run stopped" in errors[0], err[-3000:]
    assert "--resume on every node" in errors[0]
    assert 'File "' + str(Path(__file__).parents[1] / "src") not in err  # no traceback of ours
    saved = step_checkpoints(run / "checkpoints")[-1]
    assert (saved / "model.safetensors").exists()
    resumed = ["train.steps=" + str(int(saved.name[5:]) + 4), "train.save_every=10", "--resume"]
    for code, err in finish(*pair(run, *resumed)):
        assert code == 0, err[-2000:]
    assert int(step_checkpoints(run / "checkpoints")[-1].name[5:]) == int(saved.name[5:]) + 4


@pytest.mark.parametrize("args, status", [(["--help"], 0), (["train", "no-such-config"], 2)])
def test_a_worker_of_a_distributed_run_ends_with_its_status_and_without_finalization(args, status):
    """A worker (WORLD_SIZE set, as torchrun does) skips the interpreter's finalization, where
    gloo's threads hung a guest node: an exit handler never runs; the status and the output stay."""
    script = (
        "import atexit, sys; atexit.register(print, 'finalized'); "
        f"sys.argv = ['transduce', *{args!r}]; from transduce.cli import main; main()"
    )
    for world, finalized in (("2", False), ("1", True)):
        done = subprocess.run(
            [sys.executable, "-c", script],
            capture_output=True,
            text=True,
            env={**ENV, "WORLD_SIZE": world},
            timeout=120,
        )
        assert done.returncode == status, done.stderr[-2000:]
        assert ("finalized" in done.stdout) is finalized
        assert ("Usage" in done.stdout) if status == 0 else done.stderr.startswith("error:")


@pytest.mark.parametrize(
    "exc, lost",
    [
        (RuntimeError("[../gloo/transport/tcp/pair.cc:537] Read error: Connection reset by peer"), True),
        (torch.distributed.DistNetworkError("Failed to recv, got 0 bytes"), True),
        (RuntimeError("shape mismatch"), False),
        (KeyboardInterrupt(), False),
    ],
)
def test_what_counts_as_a_lost_process(exc, lost):
    assert Distributed(0, 2).lost_peer(exc) is lost
    assert Distributed(0, 1).lost_peer(exc) is False  # one process has no peers to lose


@pytest.mark.parametrize("world, left", [(2, True), (1, False)])
def test_closing_leaves_the_process_group_of_a_run_of_several(tmp_path, world, left):
    """A run of several processes leaves its group before the exit (gloo's threads, left to the
    interpreter's end, hung a node); one process leaves alone a group its caller made."""
    torch.distributed.init_process_group(
        "gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1
    )
    try:
        Distributed(0, world).close()
        assert torch.distributed.is_initialized() is not left
    finally:
        if torch.distributed.is_initialized():
            torch.distributed.destroy_process_group()


def test_the_lost_process_message_names_the_cause_and_the_way_on(tmp_path):
    exc = RuntimeError(
        "[/x/gloo/transport/tcp/pair.cc:537] Read error [127.0.0.1]:9642: Connection reset by peer. "
        "This is typically caused by a remote worker hanging."
    )
    message = str(peer_lost(exc, 1, 4, tmp_path / "ckpt-00000020"))
    assert message.startswith("process 1 of 4: another process of the run stopped or cannot be reached")
    assert "(Read error [127.0.0.1]:9642: Connection reset by peer)" in message
    assert "pair.cc" not in message and "typically" not in message
    assert f"{tmp_path / 'ckpt-00000020'}" in message and "--resume on every node" in message
    assert "no checkpoint was written yet" in str(peer_lost(exc, 0, 2, None))
