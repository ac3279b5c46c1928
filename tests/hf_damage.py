"""Damages to a Hugging Face model directory, shared by the Marian and M2M100 import tests: each
returns a function of the folder that changes one file in place."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

from safetensors.torch import load_file, save_file

Damage = Callable[[Path], object]


def edit_json(name: str, **changes: object) -> Damage:
    """Set (or, with None, delete) keys of a JSON object file."""

    def damage(folder: Path) -> None:
        data = json.loads((folder / name).read_text())
        for key, value in changes.items():
            data.pop(key) if value is None else data.__setitem__(key, value)
        (folder / name).write_text(json.dumps(data))

    return damage


def write(name: str, content: bytes) -> Damage:
    """Replace a file's bytes."""
    return lambda folder: (folder / name).write_bytes(content)


def remove(name: str) -> Damage:
    return lambda folder: (folder / name).unlink()


def truncate(name: str) -> Damage:
    """Keep the first half of a file's bytes."""

    def damage(folder: Path) -> None:
        data = (folder / name).read_bytes()
        (folder / name).write_bytes(data[: len(data) // 2])

    return damage


def pipe(name: str) -> Damage:
    """The file replaced by a named pipe nobody writes to (reading it would block)."""

    def damage(folder: Path) -> None:
        (folder / name).unlink()
        os.mkfifo(folder / name)

    return damage


def linked_to_a_device(name: str) -> Damage:
    """The file replaced by a link to /dev/zero: endless bytes."""

    def damage(folder: Path) -> None:
        (folder / name).unlink()
        (folder / name).symlink_to("/dev/zero")

    return damage


def edit_tensors(change: Callable[[dict], object]) -> Damage:
    """Rewrite model.safetensors with change(weights) applied."""

    def damage(folder: Path) -> None:
        weights = load_file(str(folder / "model.safetensors"))
        change(weights)
        save_file(weights, str(folder / "model.safetensors"), metadata={"format": "pt"})

    return damage
