"""Config loading: files, presets, overrides, and errors that name the key."""

import subprocess
import sys
import time
from pathlib import Path

import pytest

from transduce.config import (
    MAX_CONFIG_BYTES,
    PRESETS,
    ConfigError,
    ModelConfig,
    check_positions,
    load_config,
)

CONFIGS = Path(__file__).resolve().parent.parent / "configs"


def test_unknown_key_names_key_and_allowed_keys():
    with pytest.raises(ConfigError) as err:
        load_config("small", ["model.d_modle=3"])
    text = str(err.value)
    assert "unknown key 'model.d_modle'" in text
    assert "d_model" in text and "heads" in text


def test_out_of_range_value_names_key():
    with pytest.raises(ConfigError, match=r"model\.dropout: Input should be less than 1 \(got 1\.5\)"):
        load_config("small", ["model.dropout=1.5"])


def test_bad_choice_lists_allowed_values():
    with pytest.raises(ConfigError, match=r"model\.norm: Input should be 'post' or 'pre'"):
        load_config("base", ["model.norm=mid"])


def test_unknown_section_is_rejected():
    with pytest.raises(ConfigError, match="unknown key 'modle'"):
        load_config("base", ["modle.d_model=3"])


def test_heads_must_divide_width():
    with pytest.raises(ConfigError, match=r"divisible by model\.heads"):
        load_config("base", ["model.heads=7"])


def test_toml_and_yaml_files_with_preset(tmp_path):
    toml = tmp_path / "c.toml"
    toml.write_text('preset = "small"\n[model]\nnorm = "pre"\n[train]\nsteps = 7\n')
    cfg = load_config(str(toml), ["model.d_model=128"])
    assert (cfg.model.norm, cfg.model.d_model, cfg.model.encoder_layers, cfg.train.steps) == (
        "pre",
        128,
        3,
        7,
    )
    yaml = tmp_path / "c.yaml"
    yaml.write_text("model:\n  heads: 2\n  d_model: 64\n")
    assert load_config(str(yaml)).model.heads == 2
    bad = tmp_path / "bad.yaml"
    bad.write_text("model:\n  d_ff: [1\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(str(bad))


def test_missing_source_is_explained():
    with pytest.raises(ConfigError, match="neither a preset"):
        load_config("no-such-thing")


# Nine levels of nine aliases: 9^9 (387 million) "lol"s for anything that walks the tree.
BILLION_LAUGHS = "\n".join(
    ['a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    + [f"{b}: &{b} [{', '.join(['*' + a] * 9)}]" for a, b in zip("abcdefgh", "bcdefghi", strict=True)]
    + ["model:", "  d_ff: *i"]
)

# (file name, its bytes or None for a directory, expected message fragment)
BAD_FILES = [
    ("bad.json", b'{"model": ', "bad.json: not valid JSON: line 1, column 11"),
    ("list.json", b"[1, 2]", "list.json: the top level must be a mapping of sections"),
    ("value.toml", b'preset = "small"\nmodel = 3\n', "model is a section: set its keys"),
    ("deep.json", b"[" * 100_000, "deep.json: not valid JSON: nested too deeply"),
    (
        "latin1.yaml",
        "model:\n  norm: pr\xe9\n".encode("latin-1"),
        "latin1.yaml: not UTF-8 text (byte 17: invalid",
    ),
    ("conf.yaml", None, "conf.yaml: is a directory; give a preset (small, base"),
    ("preset.toml", b'preset = ["small"]\n', "preset.toml: preset: unknown ['small']; allowed: small, base"),
    ("bomb.yaml", BILLION_LAUGHS.encode(), "bomb.yaml: not valid YAML: line 2, column 8: aliases (*name)"),
    ("digits.yaml", b"model:\n  d_ff: 1" + b"0" * 5000, "digits.yaml: not valid YAML: Exceeds the limit"),
    ("huge.toml", b"#" * (MAX_CONFIG_BYTES + 1), f"huge.toml: larger than {MAX_CONFIG_BYTES} bytes"),
    ("c.ini", b"[model]\n", "c.ini: unknown config format '.ini'; use .toml, .yaml or .json"),
]

# (overrides on the small preset, expected message fragment)
BAD_OVERRIDES = [
    (["model=1"], "model is a section: set its keys (model.d_model=...), not 1"),
    (["model.d_model.x=1"], "model.d_model is a value (256), not a section: it has no keys"),
    (["model.d_model=["], "override 'model.d_model=[': not valid YAML: line 1, column 2"),
    (["model.d_ff=[&a [1, 2], *a, *a]"], "aliases (*name) are not allowed"),
    (["model.d_ff=100000000000"], "model.d_ff: Input should be less than or equal to 65536 (got 10000"),
    (["model.d_model=131072"], "model.d_model: Input should be less than or equal to 65536"),
    (["model.heads=4096"], "model.heads: Input should be less than or equal to 1024"),
    (["model.encoder_layers=100"], "model.encoder_layers: Input should be less than or equal to 64"),
    (["model.decoder_layers=-1"], "model.decoder_layers: Input should be greater than or equal to 0"),
    (["model.max_positions=100000000"], "model.max_positions: Input should be less than or equal to 65536"),
    (["model.kind=encoder", "model.num_classes=1000000000"], "model.num_classes: Input should be less than"),
    (["model.kind=encoder"], "model.kind='encoder' needs model.num_classes (an integer >= 2)"),
    (
        ["model.kind=decoder", "model.decoder_layers=0"],
        "model.kind='decoder' needs model.decoder_layers >= 1",
    ),
    (
        ["model.kind=encoder", "model.num_classes=2", "model.encoder_layers=0"],
        "model.kind='encoder' needs model.encoder_layers >= 1",
    ),
    (
        ["model.kind=decoder", "model.syntax_mask=hard"],
        "model.syntax_mask='hard' needs model.kind='encoder_decoder'",
    ),
    (["train.best_metric=accuracy"], "train.best_metric: Input should be 'loss', 'ppl'"),
    (["train.lr_scale=1e300"], "train.lr_scale: Input should be less than or equal to 100 (got '1e300')"),
    (["train.lr_scale=.inf"], "train.lr_scale: Input should be a finite number"),
    (["train.steps=10000000000"], "train.steps: Input should be less than or equal to 1000000000"),
    (["train.adam_betas=[0.9, 1.5]"], "train.adam_betas.1: Input should be less than 1 (got 1.5)"),
    (["train.seed=-1"], "train.seed: Input should be greater than or equal to 0"),
    (
        ["train.keep_last=3", "train.average_last=5"],
        "train.average_last (5) must not exceed train.keep_last (3)",
    ),
    (
        ["train.master_weights=true"],
        "train.master_weights=true keeps bf16 weights beside fp32 ones; it needs train.precision=bf16 "
        "(not fp32), or set train.master_weights=false",
    ),
    (["train.prefetch=-1"], "train.prefetch: Input should be greater than or equal to 0"),
    (["train.prefetch=1000"], "train.prefetch: Input should be less than or equal to 64"),
    (["train.compile=maybe"], "train.compile: Input should be a valid boolean"),
    (["data.pad_to_multiple=0"], "data.pad_to_multiple: Input should be greater than or equal to 1"),
    (["data.max_tokens=1000000000000"], "data.max_tokens: Input should be less than or equal to 1048576"),
    (["data.task_train_max_len=100000000"], "data.task_train_max_len: Input should be less than or equal"),
    (["data.task_test_max_len=100000000"], "data.task_test_max_len: Input should be less than or equal"),
    (["data.task_train_size=100000000"], "data.task_train_size: Input should be less than or equal"),
    (
        ["data.task=lte", "data.task_nesting=6", "data.task_train_max_len=1000"],
        "data.task 'lte' would generate about 2,816,000,000 symbols; allowed: 200,000,000",
    ),
    (
        ["data.task=copy", "data.dataset=data/prepared"],
        "data.task ('copy') and data.dataset ('data/prepared') are both set",
    ),
    (["decode.max_len_b=1000000000"], "decode.max_len_b: Input should be less than or equal to 65536"),
    (
        ["model.d_ff=" + "[" * 30 + "]" * 30],
        "model.d_ff: Input should be a valid integer (got [[[[[[[...]]]]]]])",
    ),
    (["model.d_ff=" + "[" * 5000], "not valid YAML: nested too deeply"),
]


# A bad value in a file is refused even when an override sets a key below it.
BAD_FILES_WITH_OVERRIDES = [
    ("value.toml", b"model = 3\n", ["model.d_model=32"], "model is a value (3), not a section"),
]


def _cases() -> list:
    files = [pytest.param(name, content, [], fragment, id=name) for name, content, fragment in BAD_FILES]
    overrides = [pytest.param(None, None, o, f, id=" ".join(o)[:40]) for o, f in BAD_OVERRIDES]
    both = [pytest.param(*row, id=f"{row[0]} {row[2][0]}") for row in BAD_FILES_WITH_OVERRIDES]
    return files + overrides + both


@pytest.mark.parametrize(("name", "content", "overrides", "fragment"), _cases())
def test_bad_config_is_refused_promptly_naming_the_fault(tmp_path, name, content, overrides, fragment):
    source = "small"
    if name is not None:
        path = tmp_path / name
        path.mkdir() if content is None else path.write_bytes(content)
        source = str(path)
    start = time.perf_counter()
    with pytest.raises(ConfigError) as err:
        load_config(source, overrides)
    assert time.perf_counter() - start < 10.0  # a hang guard (the alias bomb ran for minutes)
    assert fragment in str(err.value)
    assert "\n" not in str(err.value)  # the CLI prints it as one `error:` line


def test_shipped_configs_and_presets_stay_within_bounds():
    for source in [*PRESETS, *map(str, sorted(CONFIGS.glob("*.toml")))]:
        load_config(source)


def test_learned_positions_must_cover_the_data():
    check_positions(ModelConfig(positions="sinusoidal", max_positions=8), 50, "data")
    check_positions(ModelConfig(positions="learned", max_positions=50), 50, "data")
    with pytest.raises(ConfigError, match=r"runs/x/data has sequences of 51 .* model\.max_positions=50"):
        check_positions(ModelConfig(positions="learned", max_positions=50), 51, "runs/x/data")


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["{dir}"], "is a directory"),
        (["{dir}/bad.json"], "not valid JSON"),
        (["{dir}/bomb.yaml"], "aliases (*name) are not allowed"),
        (["small", "model.d_ff=100000000000"], "model.d_ff: Input should be less than or equal to 65536"),
    ],
)
def test_cli_train_prints_one_error_line(tmp_path, args, fragment):
    (tmp_path / "bad.json").write_text('{"model": ')
    (tmp_path / "bomb.yaml").write_text(BILLION_LAUGHS)
    argv = [a.format(dir=tmp_path) for a in args]
    run = subprocess.run(
        [sys.executable, "-m", "transduce", "train", *argv, "--run-dir", str(tmp_path / "run")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 2, run.stderr
    assert run.stderr.startswith("error: ") and run.stderr.count("\n") == 1, run.stderr
    assert fragment in run.stderr and "Traceback" not in run.stderr
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    "overrides",
    [
        ["model.position_offset=2", "model.positions=learned"],
        ["model.pos_frequencies=tensor2tensor", "model.positions=learned"],
        ["model.position_offset=2", "model.arch=universal"],
    ],
)
def test_sinusoid_options_need_a_transformer_with_sinusoids(overrides):
    with pytest.raises(ConfigError, match=r"model\.position_offset and model\.pos_frequencies"):
        load_config("small", overrides)


def test_sinusoid_options_are_off_by_default():
    """Checkpoints written before the keys existed read as they were computed: no offset, the
    paper's frequencies."""
    model = ModelConfig()
    assert (model.position_offset, model.pos_frequencies) == (0, "paper")
