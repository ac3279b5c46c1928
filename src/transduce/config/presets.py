"""The presets, kept as data in presets.toml beside this module: a name to the sections it sets."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

PRESETS: dict[str, dict[str, Any]] = tomllib.loads((Path(__file__).parent / "presets.toml").read_text())
