"""Typed configuration: one object drives the CLI, the Python API and the saved checkpoint.

A config is built from a preset name or a TOML/YAML file, then dotted overrides
(`model.d_model=256`) are applied, and the whole is validated once. Every error names the
offending key and, where the key is unknown or the value is a choice, the allowed values.

By concern: schema.py (the sections, their bounds and checks), presets.toml (the presets, as
data) and parsing.py (files, overrides, validation with named errors).
"""

from .parsing import MAX_CONFIG_BYTES, build_config, load_config, parse_override, resolve_source
from .presets import PRESETS
from .schema import (
    COUNT_MAX,
    DEPTH_MAX,
    POSITIONS_MAX,
    PROGRAM_TASKS,
    SEED_MAX,
    TASK_LEN_MAX,
    TASK_SYMBOLS_BUDGET,
    TOKENS_MAX,
    TRAINING_ONLY_MODEL_KEYS,
    WIDTH_MAX,
    Config,
    ConfigError,
    DataConfig,
    DecodeConfig,
    ModelConfig,
    TaskName,
    TrainConfig,
    architecture_differences,
    check_positions,
)

__all__ = [
    "COUNT_MAX",
    "DEPTH_MAX",
    "MAX_CONFIG_BYTES",
    "POSITIONS_MAX",
    "PRESETS",
    "PROGRAM_TASKS",
    "SEED_MAX",
    "TASK_LEN_MAX",
    "TASK_SYMBOLS_BUDGET",
    "TOKENS_MAX",
    "TRAINING_ONLY_MODEL_KEYS",
    "WIDTH_MAX",
    "Config",
    "ConfigError",
    "DataConfig",
    "DecodeConfig",
    "ModelConfig",
    "TaskName",
    "TrainConfig",
    "architecture_differences",
    "build_config",
    "check_positions",
    "load_config",
    "parse_override",
    "resolve_source",
]
