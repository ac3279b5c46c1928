"""`prepare` writes the same dataset bytes as before it streamed its input (issue 50).

The digests below were computed by running the `prepare` of commit 5a1c56a (which read whole
corpora into memory and encoded them in one process) on these fixtures: an independent
computation of the expected output, not a copy of what the streaming code writes. They cover
the token arrays, offsets, annotation arrays, vocabularies and meta.json of every fixture. One
digest was recomputed the same way after a deliberate change of main's in-memory `prepare`
(9f51400: with --vocab-from, meta.json records no vocabulary size or sharing): the meta.json
of the reused-vocabulary fixture, as main's `prepare` at 89efc29 writes it.
Regenerate them only for a deliberate change of the dataset format:
`python tests/test_prepare_bytes.py` prints the digests of the code it runs.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from pcfg import Grammar, generate_treebank

from transduce.data.prepare import PrepareOptions, prepare_text
from transduce.data.source import SourceFormat

GRAMMAR = Grammar.parse((Path(__file__).parent / "data" / "toy.pcfg").read_text())
WORDS = [
    "the",
    "cat",
    "sat",
    "on",
    "a",
    "mat",
    "and",
    "dog",
    "ran",
    "far",
    "away",
    "from",
    "home",
    "über",
    "straße",
    "größe",
    "café",
    "naïve",
    "😀",
]


def _lines(count: int, seed: int) -> list[str]:
    """Deterministic lines of 1 to 9 words (arithmetic, so no library's generator can change them)."""
    out, state = [], seed
    for _ in range(count):
        state = (state * 1103515245 + 12345) % (1 << 31)
        length = 1 + state % 9
        out.append(" ".join(WORDS[(state >> (3 + 2 * k)) % len(WORDS)] for k in range(length)))
    return out


def _write(folder: Path, name: str, lines: list[str], newline: str = "\n", head: bytes = b"") -> None:
    (folder / name).write_bytes(head + "".join(f"{x}{newline}" for x in lines).encode())


def plain_corpus(folder: Path) -> None:
    """Clean and dirty pairs: tabs, control characters, empty sides, a byte order mark, CRLF
    line ends, a last line without its newline, a pair too long and one over the ratio."""
    train = _lines(70, 1)
    dirty = ["a\tcat", "the \x96 dog", "", "sat on", "   ", " ".join(["cat"] * 50), "home", "a mat"]
    dirty_tgt = ["A CAT", "THE DOG", "X", "SAT\x07ON", "Y", "CAT", " ".join(["HOME"] * 12), "A\tMAT"]
    _write(folder, "train.src", train[:30] + dirty + train[30:], head=b"\xef\xbb\xbf")
    _write(folder, "train.tgt", [x.upper() for x in train[:30]] + dirty_tgt + [x.upper() for x in train[30:]])
    dev = _lines(9, 2)
    _write(folder, "dev.src", dev, newline="\r\n")
    _write(folder, "dev.tgt", [x.upper() for x in dev], newline="\r\n")
    test = _lines(6, 3)
    _write(folder, "test.src", test)
    (folder / "test.tgt").write_text("\n".join(x.upper() for x in test), encoding="utf-8")


def tree_corpus(folder: Path, kind: str) -> None:
    """Pairs from generated trees: the source as bracketed trees, as word|tag tokens, or as
    words with a tree file beside them (bracketed or CoNLL-U)."""
    for seed, (split, size) in enumerate((("train", 50), ("dev", 6))):
        trees = generate_treebank(GRAMMAR, size, seed=seed, max_words=10)
        if kind == "tree":
            src = [str(t) for t in trees]
        elif kind.startswith("factors"):
            src = [" ".join(f"{w}|{tag}" for w, tag in t.leaves()) for t in trees]
        else:
            src = [" ".join(t.words()) for t in trees]
        _write(folder, f"{split}.src", src)
        _write(folder, f"{split}.tgt", [" ".join(t.words()).upper() for t in trees])
        if kind.endswith("tree-file"):
            _write(folder, f"{split}.src.tree", [str(t) for t in trees])
        if kind == "conllu":
            blocks = []
            for t in trees:
                words = t.words()
                blocks.append(
                    "".join(f"{i}\t{w}\t_\t_\t_\t_\t{i - 1}\t_\t_\t_\n" for i, w in enumerate(words, 1))
                )
            (folder / f"{split}.src.conllu").write_text("\n".join(blocks), encoding="utf-8")


def _run(name: str, corpus, opts: PrepareOptions) -> Path:
    """Prepare `name`-data from the corpus in `name`, both relative to the working directory,
    so that meta.json, which names the files, is the same in every temporary folder."""
    folder = Path(name)
    folder.mkdir()
    corpus(folder)
    out = Path(f"{name}-data")
    prepare_text(folder, out, opts, show_progress=False)
    return out


CASES = {
    "plain-shared": (plain_corpus, dict(vocab_size=360, max_len=40)),
    "plain-separate": (plain_corpus, dict(vocab_size=340, shared_vocab=False, max_ratio=None)),
    "tree-source": (
        lambda f: tree_corpus(f, "tree"),
        dict(vocab_size=380, shared_vocab=False, max_ratio=None, source=SourceFormat("tree")),
    ),
    "factors": (
        lambda f: tree_corpus(f, "factors"),
        dict(vocab_size=340, shared_vocab=False, source=SourceFormat(factors=1)),
    ),
    "tree-file": (
        lambda f: tree_corpus(f, "tree-file"),
        dict(vocab_size=340, shared_vocab=False, source=SourceFormat(trees="tree")),
    ),
    "conllu": (lambda f: tree_corpus(f, "conllu"), dict(vocab_size=340, source=SourceFormat(trees="conllu"))),
    "factors-tree-file": (
        lambda f: tree_corpus(f, "factors-tree-file"),
        dict(vocab_size=340, shared_vocab=False, source=SourceFormat(factors=1, trees="tree")),
    ),
}


def digests(out: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(out.iterdir())}


def build(case: str) -> dict[str, str]:
    """The digests of the dataset of one case, built in the working directory."""
    corpus, options = CASES[case]
    return digests(_run(case, corpus, PrepareOptions("src", "tgt", **options)))


def build_vocab_from() -> dict[str, str]:
    """Encoding with the vocabulary of another dataset."""
    base = _run("base", plain_corpus, PrepareOptions("src", "tgt", vocab_size=360))
    opts = PrepareOptions("src", "tgt", vocab_from=str(base))
    return digests(_run("reuse", lambda f: tree_corpus(f, "words"), opts))


EXPECTED: dict[str, dict[str, str]] = {
    "conllu": {
        ".transduce-output.json": "acfc6a732d029a77341fe8737deb70309aee14c5b7d2e3a6309d06c2b3e5d5f6",
        "dev.omega.npy": "bfd7e11b2e51e2f00f9483f8cb0b9ab9c0ee599adc966595eca5010f4ec62c18",
        "dev.omega_offsets.npy": "967f79033bed09c150e920441a45a978e2b4f028804f45e9d6d29dda89dc4fb9",
        "dev.src.offsets.npy": "39ad14203e48069518876862795ef95a1dad8f4a9b035c98c9b559e800e5e558",
        "dev.src.tokens.npy": "e4f30e0a0a8d719947688aaad143114f0022ab05d93c723ede3e9c3dec94c032",
        "dev.tgt.offsets.npy": "1b909619d418d605c5746fefbf419e27f770dcf8484bb7171be5838c287aba3f",
        "dev.tgt.tokens.npy": "d1a8c72ef9fd980837a64e07b3c09d5713570a90be761e36f58a6e5852ce414a",
        "meta.json": "e9cb5917cfbe58c7fb8eb7175ee92cb36a0b553b2cbd671969e0123d73b3a7d3",
        "src.spm": "10e16ade7555f4f1a4dc99e4ad85be1f0e247b32fb6a059713743e8e2a374ab3",
        "train.omega.npy": "a4b43603fb9cbe63196fc88f4634fffa00ef5f7f6dde4e272c772a91b6178c05",
        "train.omega_offsets.npy": "07d3cc13b64df8ebee7e684a5f96514453a8ad3b732bdecce68f408220bc36ad",
        "train.src.offsets.npy": "41040741452e05c7086b6a8eeea4b8ec821e99fc4e2ba3b97c123dba656275e6",
        "train.src.tokens.npy": "6dc45d2e78a9bf54ee93680c31e0410584b408f6fbb3ebe9e62c1a783f79c7d4",
        "train.tgt.offsets.npy": "504822c26b3622ee96459ca2daecfb171ed132f5d967e91dff9a2656851a020b",
        "train.tgt.tokens.npy": "787187a247e8c3b3914b6276b80e35d74f30f689d8c395ded940bdea38822288",
    },
    "factors": {
        ".transduce-output.json": "acfc6a732d029a77341fe8737deb70309aee14c5b7d2e3a6309d06c2b3e5d5f6",
        "dev.src.offsets.npy": "bf91bfac95980093e7778b67fa3daa0bedf363a8df79107a248b12fb9cf3fbf1",
        "dev.src.tokens.npy": "71bd6620aac3867f7c500eda2302529f2646b124f22a58486a2c6e2ec34a9883",
        "dev.src_factors.npy": "2d2f3ad8650b5f71ee1d7ec178eabd5dbaf6b5ded380a2d7c40ffbec74ea79b2",
        "dev.tgt.offsets.npy": "fa63cfbe8a33ec9160167d74b7599d8a3472582853e7b7814780b6b4575abea7",
        "dev.tgt.tokens.npy": "f2b75bc2a6644f521da93a1bb1ccfe506614256aec84d64283a201340afd5bcc",
        "meta.json": "93716d0f2c8f3887fd4301f956392ef1f150d3145e4d498bd811bb8efe2cf6c0",
        "src.factor0.symbols.json": "50600f15642275ce9f360b4064d20d2d76c9c595785a9316035d2d4f186c55be",
        "src.spm": "2c8585d23768156fd00041c0e3140f8b54b5b5b41617f30d0efe3f188e5abc0b",
        "tgt.spm": "03939e4d9c9decaa1328608fa30f25de07424ca1975ec002620556ad6b2b7947",
        "train.src.offsets.npy": "aeebbe2aa9f993567a927a02bbe5f6bc088555fd018b4b5d7a76da1645b08b65",
        "train.src.tokens.npy": "3b33081ec118c7f6aced183ab3540e8a77c00a8c181784fd0032218f80bc206f",
        "train.src_factors.npy": "74adf79aa239ec3119996dae82a1c47003a9a67fbaddd8c1e0955b0afb27fc74",
        "train.tgt.offsets.npy": "9f48778c970d59b836aeb233673f1f890eafd47956ff81da39779e73398441e1",
        "train.tgt.tokens.npy": "ab6307db17143d322ecd260e47ac44c35aff4a348b025f590640c274bd363fa8",
    },
    "factors-tree-file": {
        ".transduce-output.json": "acfc6a732d029a77341fe8737deb70309aee14c5b7d2e3a6309d06c2b3e5d5f6",
        "dev.omega.npy": "d61a36bf7265550204cff4ae8f9a84ddd23280c4cc7ad40b8625faf927862882",
        "dev.omega_offsets.npy": "c62791ca53fc15b33158acee67c49ec3082d22bcc992bd49ae6af9a317135871",
        "dev.src.offsets.npy": "bf91bfac95980093e7778b67fa3daa0bedf363a8df79107a248b12fb9cf3fbf1",
        "dev.src.tokens.npy": "71bd6620aac3867f7c500eda2302529f2646b124f22a58486a2c6e2ec34a9883",
        "dev.src_factors.npy": "2d2f3ad8650b5f71ee1d7ec178eabd5dbaf6b5ded380a2d7c40ffbec74ea79b2",
        "dev.tgt.offsets.npy": "fa63cfbe8a33ec9160167d74b7599d8a3472582853e7b7814780b6b4575abea7",
        "dev.tgt.tokens.npy": "f2b75bc2a6644f521da93a1bb1ccfe506614256aec84d64283a201340afd5bcc",
        "meta.json": "781fcaacc582146d3f8ba54393333ad9f3ee36b796bd3e8694897022f61ab7ce",
        "src.factor0.symbols.json": "50600f15642275ce9f360b4064d20d2d76c9c595785a9316035d2d4f186c55be",
        "src.spm": "2c8585d23768156fd00041c0e3140f8b54b5b5b41617f30d0efe3f188e5abc0b",
        "tgt.spm": "03939e4d9c9decaa1328608fa30f25de07424ca1975ec002620556ad6b2b7947",
        "train.omega.npy": "6194e64891c468d3c498f5fc983921b8d4ed43922da29d9246f8fefce7e931b6",
        "train.omega_offsets.npy": "41a1735165a525ba4569c2c22fb00baff9644b5297343013b36339ba826901ad",
        "train.src.offsets.npy": "aeebbe2aa9f993567a927a02bbe5f6bc088555fd018b4b5d7a76da1645b08b65",
        "train.src.tokens.npy": "3b33081ec118c7f6aced183ab3540e8a77c00a8c181784fd0032218f80bc206f",
        "train.src_factors.npy": "74adf79aa239ec3119996dae82a1c47003a9a67fbaddd8c1e0955b0afb27fc74",
        "train.tgt.offsets.npy": "9f48778c970d59b836aeb233673f1f890eafd47956ff81da39779e73398441e1",
        "train.tgt.tokens.npy": "ab6307db17143d322ecd260e47ac44c35aff4a348b025f590640c274bd363fa8",
    },
    "plain-separate": {
        ".transduce-output.json": "acfc6a732d029a77341fe8737deb70309aee14c5b7d2e3a6309d06c2b3e5d5f6",
        "dev.src.offsets.npy": "806d4eb9f3fd1470922961c5cec6682e3495116023bf575404fd4cb29e6cc2d4",
        "dev.src.tokens.npy": "5f8a88a16060f9b71fdb41b1d626823c840cc3b8bce3dd70c9d089bd0d3b908f",
        "dev.tgt.offsets.npy": "806d4eb9f3fd1470922961c5cec6682e3495116023bf575404fd4cb29e6cc2d4",
        "dev.tgt.tokens.npy": "9cebe53f119210e0c40e43ee0ccc8cdf32fd53f968fd5d9b983cd08f3f6f0c99",
        "meta.json": "e15ea4d1cbe1c01a50197d5df78aca48661bf25d72b9282c3b54088f8787c9c2",
        "src.spm": "cf15cd1d8d326274f5717e686dc8e6278cc402dc82ebdcf53fd8960fed9aef5d",
        "test.src.offsets.npy": "7acc9128fda4e57b61f6be146a73bf122c9e14ca5ba98875f93d96f3416492c3",
        "test.src.tokens.npy": "d0d1efaf6bd2d13fc5cab801e8b1050347ca87d6d9f4a4854f907c8a7693beac",
        "test.tgt.offsets.npy": "7acc9128fda4e57b61f6be146a73bf122c9e14ca5ba98875f93d96f3416492c3",
        "test.tgt.tokens.npy": "7cd154d8adf4481371c1414b51c0ad4d649c34beaf84393052d7f52d2d1f45b0",
        "tgt.spm": "636451e04cad297606ee6f6b67cc6d24674a7847ab9b4a4efcb50d2d039f8702",
        "train.src.offsets.npy": "d85462dbf773b001a6b6ee9a9e11d1a4969da3c92485c513ab97a7c866e67f21",
        "train.src.tokens.npy": "e4d68b276d68f432c20dd7b9f1fc5839448f1b04cac21785350f89f3d11a823b",
        "train.tgt.offsets.npy": "8bc322b837700cb155efbca27a8f8bc35345fa0a2bb5345ac34ce8317e9a51bd",
        "train.tgt.tokens.npy": "561ac3de3ddf7abd3f0eb0b1fdea2e44873cb33dd1c3fd01e780ffc083ff4bb8",
    },
    "plain-shared": {
        ".transduce-output.json": "acfc6a732d029a77341fe8737deb70309aee14c5b7d2e3a6309d06c2b3e5d5f6",
        "dev.src.offsets.npy": "5eb62b63294ed1b5b2c929cbc06aba5386c2699d410a42574d1ab55349dd25d6",
        "dev.src.tokens.npy": "c4a02ec6410022bb88a8cbbcdbd083b99b5d9d6fdc912a90ea1c3283bd390ce2",
        "dev.tgt.offsets.npy": "630e6a3802e3d26bfbe3041515ad2bff00123f5c89f89d2a92a0cfdf36081320",
        "dev.tgt.tokens.npy": "fdb4c25d83fdd913af52bff273f34a8d110765250f47eb2ad19c2af05e83b26e",
        "meta.json": "a071069596e29acc86c58499ee31a34cb6d0c5936b5b1f1fe9b6b1e8fc5c0676",
        "src.spm": "175761bda5f93d1bf82eafb60887c93a10d7eb15f03f7ea2cbfa57b67fe53251",
        "test.src.offsets.npy": "d21f51320c8e86c4c97d3c46590bcc313256147aa3988a61aa42f2385ec93bfc",
        "test.src.tokens.npy": "e2270f9b19ba5c01e607ee6c7acd5eab1a10dba10e37dc6ffa5e0773ceaaa01e",
        "test.tgt.offsets.npy": "887905c8438033b41e9f1eb91b62a500198febd8d25d22054cf23ca20d8db52d",
        "test.tgt.tokens.npy": "bb88d2f3a98ad5dce6954dfc0c8a5bf8aa32791e47b3e64dd8fdc6e3686449fd",
        "train.src.offsets.npy": "2425f7eccdb1d85e2b15d82ee055691f14d57fa0685347e32f0b9def9d14eb4e",
        "train.src.tokens.npy": "747ba4dbe5c8046e552ef03149eb46e6bfaff956e99fbf5b9cc3b95cb96acea9",
        "train.tgt.offsets.npy": "067c0d69e5e8240e332c9a4591470a77f32d5aa13eebddef44ce9defeb6abf05",
        "train.tgt.tokens.npy": "f5d9f0e7e6f7ca94b2257cfb077b0e60a17b59849e2a72eb65cbf142a9be1128",
    },
    "tree-file": {
        ".transduce-output.json": "acfc6a732d029a77341fe8737deb70309aee14c5b7d2e3a6309d06c2b3e5d5f6",
        "dev.omega.npy": "d61a36bf7265550204cff4ae8f9a84ddd23280c4cc7ad40b8625faf927862882",
        "dev.omega_offsets.npy": "c62791ca53fc15b33158acee67c49ec3082d22bcc992bd49ae6af9a317135871",
        "dev.src.offsets.npy": "bf91bfac95980093e7778b67fa3daa0bedf363a8df79107a248b12fb9cf3fbf1",
        "dev.src.tokens.npy": "71bd6620aac3867f7c500eda2302529f2646b124f22a58486a2c6e2ec34a9883",
        "dev.tgt.offsets.npy": "fa63cfbe8a33ec9160167d74b7599d8a3472582853e7b7814780b6b4575abea7",
        "dev.tgt.tokens.npy": "f2b75bc2a6644f521da93a1bb1ccfe506614256aec84d64283a201340afd5bcc",
        "meta.json": "b6bcedc771ed9f071bb54ffafc13f3620787fcec604bc0117f49339f60f2b5db",
        "src.spm": "2c8585d23768156fd00041c0e3140f8b54b5b5b41617f30d0efe3f188e5abc0b",
        "tgt.spm": "03939e4d9c9decaa1328608fa30f25de07424ca1975ec002620556ad6b2b7947",
        "train.omega.npy": "6194e64891c468d3c498f5fc983921b8d4ed43922da29d9246f8fefce7e931b6",
        "train.omega_offsets.npy": "41a1735165a525ba4569c2c22fb00baff9644b5297343013b36339ba826901ad",
        "train.src.offsets.npy": "aeebbe2aa9f993567a927a02bbe5f6bc088555fd018b4b5d7a76da1645b08b65",
        "train.src.tokens.npy": "3b33081ec118c7f6aced183ab3540e8a77c00a8c181784fd0032218f80bc206f",
        "train.tgt.offsets.npy": "9f48778c970d59b836aeb233673f1f890eafd47956ff81da39779e73398441e1",
        "train.tgt.tokens.npy": "ab6307db17143d322ecd260e47ac44c35aff4a348b025f590640c274bd363fa8",
    },
    "tree-source": {
        ".transduce-output.json": "acfc6a732d029a77341fe8737deb70309aee14c5b7d2e3a6309d06c2b3e5d5f6",
        "dev.src.offsets.npy": "29502edc7a3c32e067d7aa928155b9d22dfe2d222270774a425b41eb484a944b",
        "dev.src.tokens.npy": "ad96d3f94c14673fbf3e46cd464f92c648d2f11534da3651548b798308b02ce2",
        "dev.tgt.offsets.npy": "4c605fcfda3f21bf3d0558b5d4e53b9758badbf45f1a525afec9c1a6a6cd6eaa",
        "dev.tgt.tokens.npy": "1cfe8a6a012ff5cd289d36a4b96a2c21da894abf137c4fb5da6b5d3dffe20d04",
        "meta.json": "5f9b5dbf8373ab73c95d363d00ffdd357c77d572397bba70ddf700d229d880c3",
        "src.spm": "f352c67ce9c2f85526bfaba1fd715feeda45e6863c11430da556a750d7edfd4e",
        "tgt.spm": "51510ef301ac9343986d713a24a1baae93a141a986e4fa009ca17d01f3319253",
        "train.src.offsets.npy": "a7fee69df32841f238915028163e1c733923db68224ae728ea22ccb03b9c0152",
        "train.src.tokens.npy": "f996cb8c3bf9344dcdfd1198fdbcdd2f7b275cb65fdb60cdb4e0515d4c0c5e12",
        "train.tgt.offsets.npy": "411c478dbf1d9fdfb5f5eddda6027fc179681048350e599d892a9d6fce64bb19",
        "train.tgt.tokens.npy": "ea1bb1c896f7dd6f6b26f4400ac78603ea25927c34585a11f408087702beef39",
    },
    "vocab-from": {
        ".transduce-output.json": "acfc6a732d029a77341fe8737deb70309aee14c5b7d2e3a6309d06c2b3e5d5f6",
        "dev.src.offsets.npy": "b882d58086ac41d076fb83c3e5e29e57c3d91f5977f8675742c56a6137637c49",
        "dev.src.tokens.npy": "306acd7b7d401c23b86f56cebc272b4313c67ded5dfec138dec6dd73598dd5db",
        "dev.tgt.offsets.npy": "80b531b271f6bc1058d886f80ffaa70e60116c117e71efe38bff688ed570b6a3",
        "dev.tgt.tokens.npy": "d5c0896978663aa373beb58ea6c19b049335d8bc9b934753160f347e8ee57994",
        "meta.json": "a3c9b926c8987de0141b5fec4dc5cff2ee7d7e027c8dbc2ef73b40fc7eb154ba",
        "src.spm": "175761bda5f93d1bf82eafb60887c93a10d7eb15f03f7ea2cbfa57b67fe53251",
        "train.src.offsets.npy": "da1e998f4ac876257e3ab5dc0c91a3dc40816eb8cf0f1f6ac5eafd9afc7d7327",
        "train.src.tokens.npy": "20b88e48a65cb922800b27464511ef6cc32a4f7ba56040aac84c02aa2ac3227e",
        "train.tgt.offsets.npy": "6fd8df0efc9f5e1463cf74889560e27f5b3bd4910b6609ca4bf16950189fd9c1",
        "train.tgt.tokens.npy": "7a025791af3e1aa3e44a728bffd1d5e88a3eb42f790969cd9b90a56af5253829",
    },
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_prepare_writes_the_bytes_it_wrote_before_streaming(tmp_path, monkeypatch, case):
    monkeypatch.chdir(tmp_path)
    assert build(case) == EXPECTED[case]


def test_prepare_with_a_reused_vocabulary_writes_the_same_bytes(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert build_vocab_from() == EXPECTED["vocab-from"]


if __name__ == "__main__":
    import os
    import tempfile

    result = {}
    for case in [*sorted(CASES), "vocab-from"]:
        with tempfile.TemporaryDirectory() as tmp:
            os.chdir(tmp)
            result[case] = build_vocab_from() if case == "vocab-from" else build(case)
    for case, files in result.items():
        print(f"    {case!r}: {{")
        for name, digest in files.items():
            print(f"        {name!r}: {digest!r},")
        print("    },")
