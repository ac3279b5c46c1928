"""The peers' own venv (transformers, CTranslate2) and the processes that answer from it.

Peer scripts (engines.py, marian_mt.py, marian_steps.py) run with the venv's Python and read one
JSON request per line on stdin, answering one JSON line on stdout; their packages never enter ours.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from bench.records import BENCH

PEERS = BENCH / ".peers"
HERE = Path(__file__).resolve().parent  # the peer scripts


TORCH = "torch==2.13.0"  # installed first in every peer venv: the CPU build, never a CUDA one


def ensure_venv(venv: Path, packages: list[str]) -> Path:
    """The Python of a peer's own venv, created on first use (torch's CPU build, then `packages`),
    so that a peer's packages never enter ours."""
    python = venv / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        pip = [str(python), "-m", "pip", "install", "-q"]
        subprocess.run([*pip, TORCH], check=True)
        subprocess.run([*pip, *packages], check=True)
    return python


def ensure_peers(venv: Path = PEERS) -> Path:
    """The Python of the peers' own venv (transformers, CTranslate2)."""
    return ensure_venv(venv, ["transformers", "ctranslate2", "sentencepiece", "numpy"])


class Peer:
    """A peer script of bench/peers/ answering one JSON request per line (decode or train)."""

    def __init__(self, python: Path, script: str, hf_dir: Path, threads: int, *extra: str) -> None:
        self.proc = subprocess.Popen(
            [str(python), str(HERE / script), str(hf_dir), str(threads), *extra],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert json.loads(self.proc.stdout.readline())["ready"]

    def request(self, payload: dict) -> dict:
        self.proc.stdin.write(json.dumps(payload) + "\n")
        self.proc.stdin.flush()
        return json.loads(self.proc.stdout.readline())

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait()


class Peers:
    """One engines.py process per engine (see engines.py: a second CTranslate2 Translator in a
    process slows the first), answering each request from the process of its engine; `engines`
    are request names, "ct2-vmap" served by the "ct2" process."""

    def __init__(self, python: Path, hf_dir: Path, threads: int, engines: set[str]) -> None:
        loaded = sorted({self.process(e) for e in engines})
        self.procs = {e: Peer(python, "engines.py", hf_dir, threads, e) for e in loaded}

    @staticmethod
    def process(engine: str) -> str:
        """The peer process that serves requests for `engine`."""
        return engine.removesuffix("-vmap")

    def request(self, payload: dict) -> dict:
        return self.procs[self.process(payload["engine"])].request(payload)

    def close(self) -> None:
        for proc in self.procs.values():
            proc.close()
