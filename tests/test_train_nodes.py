"""Training across machines (issue 50 item 5): `torchrun --nnodes 2` with the c10d rendezvous,
tried here as two "nodes" of one process each on 127.0.0.1 (gloo), sharing the run directory as
nodes share a network file system."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from tiny import TINY

from transduce.store.checkpoint import step_checkpoints
from transduce.train.build import Distributed
from transduce.train.state import peer_lost

COMMON = [*TINY, "model.dropout=0", "train.threads=1"]
ENV = {**os.environ, "OMP_NUM_THREADS": "1"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def node(run: Path, port: int, *extra: str, new_session: bool = False) -> subprocess.Popen:
    """One node's launch, as on each machine: the same command, the rendezvous on the first."""
    launch = ["--nnodes", "2", "--nproc_per_node", "1", "--rdzv-backend", "c10d"]
    launch += ["--rdzv-endpoint", f"127.0.0.1:{port}", "--rdzv-id", "nodes-test"]
    command = [sys.executable, "-m", "torch.distributed.run", *launch, "-m", "transduce", "train", "small"]
    command += [*COMMON, *extra, "--run-dir", str(run), "--no-progress"]
    return subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=ENV,
        start_new_session=new_session,
    )


def finish(*nodes: subprocess.Popen, timeout: float = 300) -> list[tuple[int, str]]:
    return [(p.wait(timeout), p.communicate()[1]) for p in nodes]


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
    port = free_port()
    first = node(tmp_path / "two", port, *steps)
    time.sleep(0.5)  # the first node hosts the rendezvous, as the endpoint's machine would
    for code, err in finish(first, node(tmp_path / "two", port, *steps)):
        assert code == 0, err[-2000:]
    a, b = weights(tmp_path / "one"), weights(tmp_path / "two")
    assert max(float((a[k] - b[k]).abs().max()) for k in a) < 1e-5


def test_a_node_that_dies_stops_the_survivor_with_a_clear_error_and_the_run_resumes(tmp_path):
    run, port = tmp_path / "run", free_port()
    steps = ["train.steps=400", "train.save_every=10"]
    survivor = node(run, port, *steps)
    time.sleep(0.5)
    doomed = node(run, port, *steps, new_session=True)
    deadline = time.monotonic() + 240
    while not (run / "checkpoints").is_dir() or not step_checkpoints(run / "checkpoints"):
        assert time.monotonic() < deadline and survivor.poll() is None, "no checkpoint written"
        time.sleep(0.2)
    for pid in [doomed.pid, *children(doomed.pid)]:  # the machine goes: launcher and worker
        os.kill(pid, signal.SIGKILL)
    code, err = finish(survivor, timeout=120)[0]
    doomed.wait()
    assert code != 0
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "another process of the run stopped" in errors[0], err[-3000:]
    assert "--resume on every node" in errors[0]
    assert 'File "' + str(Path(__file__).parents[1] / "src") not in err  # no traceback of ours
    saved = step_checkpoints(run / "checkpoints")[-1]
    assert (saved / "model.safetensors").exists()
    resumed = ["train.steps=" + str(int(saved.name[5:]) + 4), "train.save_every=10", "--resume"]
    port = free_port()
    first = node(run, port, *resumed)
    time.sleep(0.5)
    for code, err in finish(first, node(run, port, *resumed)):
        assert code == 0, err[-2000:]
    assert int(step_checkpoints(run / "checkpoints")[-1].name[5:]) == int(saved.name[5:]) + 4


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
