"""Random tiny encoder-decoders and an independent log-probability loop, for decoding tests."""

import torch

from transduce.config import load_config
from transduce.data.vocab import BOS, EOS, PAD, SymbolVocab
from transduce.model import build_model
from transduce.store.checkpoint import save_checkpoint, state_tensors
from transduce.store.load import LoadedModel, load_model
from transduce.store.meta import CheckpointMeta

DIGITS = [str(i) for i in range(10)]
SIZES = ["model.d_model=16", "model.heads=2", "model.d_ff=32", "model.encoder_layers=1", "model.dropout=0"]


def tiny_model(vocab=6, seed=0, sharpen=4.0, overrides=()):
    """d=16, one encoder and two decoder layers, no dropout; the output weights multiplied by
    `sharpen` give more varied next-token distributions than the default initialisation."""
    torch.manual_seed(seed)
    cfg = load_config("small", [*SIZES, "model.decoder_layers=2", *overrides]).model
    model = build_model(cfg, vocab, vocab).eval()
    with torch.no_grad():
        model.output.weight.mul_(sharpen)
    return model


def batch(rows):
    """Source ids -> (batch, m) with EOS and right padding."""
    width = max(len(r) for r in rows) + 1
    return torch.tensor([[*r, EOS] + [PAD] * (width - len(r) - 1) for r in rows])


@torch.no_grad()
def next_log_probs(model, src_row, prefix):
    """log P(. | prefix, source) from one uncached decoder pass over [BOS] + prefix (vocab,)."""
    memory = model.encode(torch.tensor([src_row]))
    return model.decode(torch.tensor([[BOS, *prefix]]), memory)[0, -1].float().log_softmax(-1)


def token_log_probs(model, src_row, seq):
    """Each token's log-probability, one uncached pass per position: no batching, padding or cache."""
    return [float(next_log_probs(model, src_row, seq[:i])[t]) for i, t in enumerate(seq)]


@torch.no_grad()
def sequence_log_probs(model, src_row, seq):
    """Each token's log-probability from one uncached pass over one unpadded sequence."""
    memory = model.encode(torch.tensor([src_row]))
    logp = model.decode(torch.tensor([[BOS, *seq[:-1]]]), memory)[0].float().log_softmax(-1)
    return [float(logp[i, t]) for i, t in enumerate(seq)]


def saved_checkpoint(path, symbols, seed, overrides=()) -> LoadedModel:
    """A random tiny model over a symbol vocabulary (beam 3, outputs of at most m + 6 tokens)
    saved as a checkpoint at `path` and loaded back; `overrides` change its config."""
    torch.manual_seed(seed)
    vocab = SymbolVocab(symbols)
    defaults = [*SIZES, "model.decoder_layers=1", "decode.beam=3", "decode.max_len_b=6"]
    cfg = load_config("small", [*defaults, *overrides])
    model = build_model(cfg.model, len(vocab), len(vocab))
    with torch.no_grad():
        model.output.weight.mul_(3.0)  # more varied outputs than the default initialisation
    (path.parent / f"{path.name}-vocab").mkdir()
    vocab.save(path.parent / f"{path.name}-vocab" / "src")
    meta = CheckpointMeta(src_vocab_size=len(vocab), tgt_vocab_size=len(vocab))
    save_checkpoint(
        path, state_tensors(model), cfg, meta, [path.parent / f"{path.name}-vocab" / "src.symbols.json"]
    )
    return load_model(path)


def decoder_rows(model, monkeypatch) -> list[int]:
    """A list that gets the number of rows of every later `model.decode` call (search's batch
    at each step)."""
    rows = []
    decode = model.decode

    def counting(tokens, memory, cache=None):
        rows.append(tokens.shape[0])
        return decode(tokens, memory, cache)

    monkeypatch.setattr(model, "decode", counting)
    return rows


def steps_where_rows_change(rows_per_step: list[int]) -> list[int]:
    """The steps whose batch differs from the step before's (`decoder_rows`' list)."""
    return [step for step in range(1, len(rows_per_step)) if rows_per_step[step] != rows_per_step[step - 1]]
