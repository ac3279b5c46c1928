"""`transduce export --format argos`: the package holds what Argos Translate reads (metadata from
the checkpoint, the CTranslate2 model told to add EOS, one sentencepiece model, a sentence-boundary
model that never splits); where the languages come from; what cannot be packaged is one error
line. Where bench/.argos holds Argos Translate (`python -m bench.serve.argos` makes it), Argos
itself installs the package and translates as our CTranslate2 engine does, offline."""

import json
import random
import subprocess
import zipfile
from dataclasses import replace

import pytest
from tiny import train_tiny
from typer.testing import CliRunner

import transduce
from bench.serve.argos import ARGOS, argos_translate, as_argos_writes
from transduce.cli import app as cli
from transduce.config import load_config
from transduce.interop.argos import PackageInfo, check_packageable
from transduce.interop.ctranslate2 import ExportError
from transduce.interop.minisbd import never_split_model
from transduce.store.languages import LanguagesError, model_languages
from transduce.store.load import load_model

WORDS = ["the", "cat", "sat", "on", "a", "mat", "and", "dog", "ran", "far", "away"]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A shared-vocabulary model of English -> 'German' (upper case) prepared with --src en --tgt de."""
    from transduce.data.prepare import PrepareOptions, prepare_text
    from transduce.train.trainer import Trainer

    tmp = tmp_path_factory.mktemp("argos")
    rng = random.Random(0)
    for split, size in (("train", 300), ("dev", 10)):
        lines = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 7))) for _ in range(size)]
        (tmp / f"{split}.en").write_text("".join(f"{line}\n" for line in lines))
        (tmp / f"{split}.de").write_text("".join(f"{line.upper()}\n" for line in lines))
    prepare_text(tmp, tmp / "data", PrepareOptions("en", "de", vocab_size=300), show_progress=False)
    overrides = ["model.d_model=32", "model.heads=4", "model.d_ff=64", "model.encoder_layers=2"]
    overrides += ["model.decoder_layers=2", f"data.dataset={tmp / 'data'}", "data.max_tokens=400"]
    overrides += ["train.steps=60", "train.warmup=20", "train.save_every=60", "train.validate_every=60"]
    Trainer(load_config("small", overrides), tmp / "run", show_progress=False).fit()
    sentences = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 12))) for _ in range(40)]
    return tmp, sentences


def export(*args):
    return CliRunner().invoke(cli, ["export", *map(str, args), "--format", "argos"])


def test_the_package_holds_what_argos_translate_reads(trained, tmp_path):
    tmp, _ = trained
    result = export(tmp / "run", "-o", tmp_path / "en_de.argosmodel", "--license", "CC0-1.0")
    assert result.exit_code == 0, result.output
    with zipfile.ZipFile(tmp_path / "en_de.argosmodel") as package:
        names = set(package.namelist())
        folder = "translate-en_de-1_0"
        assert names == {
            f"{folder}/{name}"
            for name in (
                "metadata.json",
                "README.md",
                "sentencepiece.model",
                "minisbd/never-split.onnx",
                "model/model.bin",
                "model/config.json",
                "model/shared_vocabulary.json",
            )
        }
        meta = json.loads(package.read(f"{folder}/metadata.json"))
        config = json.loads(package.read(f"{folder}/model/config.json"))
        spm = package.read(f"{folder}/sentencepiece.model")
        sbd = package.read(f"{folder}/minisbd/never-split.onnx")
    loaded = load_model(tmp / "run")
    assert {k: meta[k] for k in ("from_code", "from_name", "to_code", "to_name", "package_version")} == {
        "from_code": "en",
        "from_name": "English",
        "to_code": "de",
        "to_name": "German",
        "package_version": "1.0",
    }
    assert meta["license"] == "CC0-1.0" and f"step {loaded.meta.step}" in meta["description"]
    assert meta["transduce"]["weights_sha256"] == loaded.meta.checksums["model.safetensors"]
    assert "prepare --src en --tgt de" in meta["transduce"]["languages_from"]
    assert config["add_source_eos"] is True  # Argos gives the pieces alone; the model reads EOS after them
    assert spm == (loaded.path / "src.spm").read_bytes() and sbd == never_split_model("en")


def test_the_languages_come_from_the_dataset_unless_named(trained, tmp_path):
    tmp, _ = trained
    loaded = load_model(tmp / "run")
    assert model_languages(loaded).pairs == (("en", "de"),)
    assert model_languages(loaded, target="pt_BR").pairs == (("en", "pt_BR"),)
    moved = replace(
        loaded,
        config=loaded.config.model_copy(
            update={"data": loaded.config.data.model_copy(update={"dataset": str(tmp_path)})}
        ),
    )
    with pytest.raises(LanguagesError, match="give --source-lang and --target-lang"):
        model_languages(moved)
    assert model_languages(moved, "en", "fr").pairs == (("en", "fr"),)
    other = replace(
        loaded,
        meta=loaded.meta.model_copy(
            update={"data_identity": loaded.meta.data_identity.model_copy(update={"dataset_hash": "0" * 64})}
        ),
    )
    with pytest.raises(LanguagesError):  # the dataset at that path is not the one it was trained on
        model_languages(other)


REFUSED = [  # name, export's extra arguments, what the error says
    ("a bad version", ["--package-version", "1.x"], "--package-version '1.x'"),
    ("a bad language code", ["--target-lang", "German!"], "--target-lang 'German!'"),
    ("one language on both sides", ["--source-lang", "de", "--target-lang", "de"], "are both de"),
    ("an empty target language (taken as none)", ["--target-lang", ""], "--target-lang '': give a language"),
    ("an option of another format", ["--shortlist", "x"], "--shortlist goes with --format ctranslate2"),
]


@pytest.mark.parametrize(("args", "says"), [r[1:] for r in REFUSED], ids=[r[0] for r in REFUSED])
def test_what_cannot_be_packaged_is_one_error_line(trained, tmp_path, args, says):
    tmp, _ = trained
    result = export(tmp / "run", "-o", tmp_path / "x.argosmodel", *args)
    assert result.exit_code != 0 and says in result.output
    assert not (tmp_path / "x.argosmodel").exists()


def test_a_model_argos_cannot_read_is_refused(trained, tmp_path):
    tmp, _ = trained
    loaded = load_model(tmp / "run")
    with pytest.raises(ExportError, match="separate source and target vocabularies"):
        check_packageable(replace(loaded, tgt_vocab=load_model(tmp / "run").tgt_vocab))
    result = export(
        train_tiny(tmp_path / "copy", 2),
        "--source-lang",
        "en",
        "--target-lang",
        "de",
        "-o",
        tmp_path / "c.argosmodel",
    )
    assert result.exit_code != 0 and "no sentencepiece vocabulary" in result.output.replace("\n", " ")
    with pytest.raises(ExportError, match="numbers between dots"):
        PackageInfo(version="one")


def test_an_existing_file_is_replaced_only_if_export_wrote_it(trained, tmp_path):
    tmp, _ = trained
    out = tmp_path / "en_de.argosmodel"
    out.write_text("my notes")
    refused = export(tmp / "run", "-o", out)
    assert (
        refused.exit_code != 0
        and "not a package `export` wrote" in refused.output
        and out.read_text() == "my notes"
    )
    assert export(tmp / "run", "-o", out, "--force").exit_code == 0
    assert export(tmp / "run", "-o", out, "--package-version", "1.1").exit_code == 0  # its own: replaced


needs_argos = pytest.mark.skipif(
    not (ARGOS / "bin" / "python").exists(),
    reason="Argos Translate's venv bench/.argos is not made (python -m bench.serve.argos)",
)


@needs_argos
def test_the_sentence_boundary_model_never_splits_in_minisbd(tmp_path):
    (tmp_path / "m.onnx").write_bytes(never_split_model("en"))
    texts = ["One. Two! Three?", "  Mr. Smith  went home.  ", "x", "tab\there. e.g. this"]
    script = "import json, sys; from minisbd import SBDetect; d = SBDetect(sys.argv[1], use_gpu=False); "
    script += "print(json.dumps([d.sentences(t) for t in json.loads(sys.argv[2])]))"
    done = subprocess.run(
        [str(ARGOS / "bin" / "python"), "-c", script, str(tmp_path / "m.onnx"), json.dumps(texts)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(done.stdout) == [[t.strip()] for t in texts]


@needs_argos
def test_argos_translate_translates_as_our_ctranslate2_engine_offline(trained, tmp_path):
    tmp, sentences = trained
    assert export(tmp / "run", "-o", tmp_path / "en_de.argosmodel").exit_code == 0
    theirs = argos_translate(ARGOS / "bin" / "python", tmp_path / "en_de.argosmodel", sentences, "en", "de")
    model = transduce.load(
        tmp / "run", engine="ctranslate2", quantize="int8"
    )  # as bench.serve.argos.ARGOS_SETTINGS
    mine = transduce.translate(model, sentences, beam=4, alpha=0.2, max_len_a=0.0, max_len_b=256, min_len=1)
    assert theirs == [
        as_argos_writes(line) for line in mine
    ]  # Argos writes `_` as a space, drops a leading one
    assert sum(t == m for t, m in zip(theirs, mine, strict=True)) >= len(mine) // 2  # most lines as they are
