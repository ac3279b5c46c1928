"""bench/mt/toolkits.py's sharded decoding: order kept, finished shards reused, short outputs refused.

A peer's test decoding can outlast a session, so what it keeps must resume exactly; a fake toolkit
stands in for JoeyNMT/OpenNMT-py (the real ones live in their own venv).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root, where bench/ is

from bench.mt.toolkits import decode_in_shards
from transduce.data.corpus import read_lines


class Reverser:
    """Decodes a line into its reverse and records which shards it was asked for."""

    def __init__(self, drop_last: bool = False):
        self.sources: list[str] = []
        self.drop_last = drop_last

    def decode(self, source: Path, out: Path, log: str) -> dict:
        self.sources.append(source.name)
        hyps = [line[::-1] for line in read_lines(source)]
        if self.drop_last:
            hyps = hyps[:-1]
        out.write_text("".join(h + "\n" for h in hyps), encoding="utf-8")
        return {"argv": ["reverse", str(source)], "log": log}


LINES = [f"line {i} ä" for i in range(7)]


@pytest.mark.parametrize("jobs", [1, 2])
def test_shards_keep_line_order(tmp_path: Path, jobs: int) -> None:
    toolkit = Reverser()
    result = decode_in_shards(toolkit, LINES, tmp_path / "decode", size=3, jobs=jobs)
    assert result["hypotheses"] == [line[::-1] for line in LINES]
    assert sorted(toolkit.sources) == ["000.src", "001.src", "002.src"]
    assert result["command"]["shards"] == 3 and result["command"]["shard_lines"] == 3
    assert result["jobs"] == jobs
    assert not list((tmp_path / "decode").glob("*.tmp"))


def test_a_rerun_decodes_only_unfinished_shards(tmp_path: Path) -> None:
    shards = tmp_path / "decode"
    first = decode_in_shards(Reverser(), LINES, shards, size=3, jobs=1)
    (shards / "001.json").unlink()  # as if killed while decoding the second shard
    again = Reverser()
    second = decode_in_shards(again, LINES, shards, size=3, jobs=2)
    assert again.sources == ["001.src"]
    assert second["hypotheses"] == first["hypotheses"]


def test_a_shard_missing_hypotheses_is_an_error(tmp_path: Path) -> None:
    shards = tmp_path / "decode"
    with pytest.raises(RuntimeError, match="2 hypotheses for 3 lines"):
        decode_in_shards(Reverser(drop_last=True), LINES[:3], shards, size=3, jobs=1)
    assert not (shards / "000.json").exists()
