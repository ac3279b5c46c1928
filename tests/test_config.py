"""Config loading: files, presets, overrides, and errors that name the key."""

import pytest

from transduce.config import ConfigError, load_config


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
