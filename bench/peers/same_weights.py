"""A random-init model of ours and its MarianMTModel export: the same weights for both engines of
the speed benchmarks (bench/decode/speed.py, bench/train/throughput.py)."""

from __future__ import annotations

import random
from pathlib import Path

import torch

from transduce.config import load_config
from transduce.data.vocab import BOS, SentencePieceVocab
from transduce.interop.marian import export_marian
from transduce.model import build_model
from transduce.store.checkpoint import save_checkpoint, state_tensors
from transduce.store.meta import CheckpointMeta


def synthetic_text(n: int, seed: int = 0) -> list[str]:
    """`n` lines of made-up words, for a vocabulary and for inputs of realistic length."""
    rng = random.Random(seed)
    syllables = ["ka", "to", "ri", "men", "sa", "lo", "vi", "ne", "dor", "pu", "shi", "an", "el", "qu", "ber"]
    words = ["".join(rng.choice(syllables) for _ in range(rng.randint(1, 4))) for _ in range(3000)]
    return [" ".join(rng.choice(words) for _ in range(rng.randint(5, 30))) for _ in range(n)]


def build(preset: str, out: Path) -> tuple[torch.nn.Module, SentencePieceVocab]:
    """The preset's model (seed 0, Marian's sinusoid layout, no dropout) over an 8000-piece vocabulary
    of synthetic text, exported to out/hf for the peers; both kept in `out` and reused."""
    vocab_file = out / "vocab" / "src.spm"
    if vocab_file.exists():
        vocab = SentencePieceVocab(vocab_file.read_bytes())
    else:
        vocab = SentencePieceVocab.train(synthetic_text(20000), 8000)
        vocab_file.parent.mkdir(parents=True, exist_ok=True)
        vocab.save(out / "vocab" / "src")
    cfg = load_config(preset, ["model.pos_layout=halves", "model.dropout=0"])
    torch.manual_seed(0)
    model = build_model(cfg.model, len(vocab), len(vocab)).eval()
    with torch.no_grad():  # CTranslate2 starts Marian decoders from a zero embedding
        model.tgt_embed.tokens.weight[BOS].zero_()
    if not (out / "hf" / "config.json").exists():
        save_checkpoint(
            out / "ckpt",
            state_tensors(model),
            cfg,
            CheckpointMeta(src_vocab_size=len(vocab), tgt_vocab_size=len(vocab)),
            [vocab_file],
            force=True,  # the benchmark's own scratch folder
        )
        export_marian(out / "ckpt", out / "hf", force=True)
    return model, vocab
