"""Attention heat maps per layer and head (encoder self, decoder self, cross), as in the paper."""

from __future__ import annotations

from pathlib import Path

import torch
from torch import Tensor

from .data.batching import encode_sources
from .data.vocab import BOS
from .model.transformer import EncoderDecoder


@torch.no_grad()
def collect_attention(
    model: EncoderDecoder, src_ids: list[int], tgt_ids: list[int], source: dict[str, Tensor] | None = None
) -> dict[str, list[Tensor]]:
    """Weights per kind ('encoder', 'decoder', 'cross'), one (heads, queries, keys) tensor per layer.

    source: extra encoder inputs (factors, syntax) of annotated models."""
    src = encode_sources([src_ids])
    enc_records: list[dict[str, Tensor]] = [{} for _ in model.encoder.layers]
    dec_records: list[dict[str, Tensor]] = [{} for _ in model.decoder.layers]
    memory = model.encode(src, records=enc_records, **(source or {}))
    model.decode(torch.tensor([[BOS, *tgt_ids]]), memory, records=dec_records)
    return {
        "encoder": [r["self"][0] for r in enc_records],
        "decoder": [r["self"][0] for r in dec_records],
        "cross": [r["cross"][0] for r in dec_records],
    }


def plot_attention(
    weights: dict[str, list[Tensor]],
    src_tokens: list[str],
    tgt_tokens: list[str],
    out_dir: Path,
    layers: list[int] | None = None,
    heads: list[int] | None = None,
) -> list[Path]:
    """One PNG per (kind, layer) with a panel per head; returns the files written."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out_dir.mkdir(parents=True, exist_ok=True)
    src_labels = [*src_tokens, "</s>"]
    tgt_labels = ["<s>", *tgt_tokens]
    labels = {
        "encoder": (src_labels, src_labels),
        "decoder": (tgt_labels, tgt_labels),
        "cross": (tgt_labels, src_labels),
    }
    written = []
    for kind, per_layer in weights.items():
        for layer, w in enumerate(per_layer):
            if layers is not None and layer not in layers:
                continue
            chosen = heads if heads is not None else list(range(w.shape[0]))
            fig, axes = plt.subplots(1, len(chosen), figsize=(3.2 * len(chosen), 3.4), squeeze=False)
            rows, cols = labels[kind]
            for ax, h in zip(axes[0], chosen, strict=True):
                ax.imshow(w[h].float().numpy(), cmap="viridis", vmin=0.0, vmax=1.0)
                ax.set_title(f"{kind} layer {layer} head {h}", fontsize=8)
                ax.set_xticks(range(len(cols)), cols, rotation=90, fontsize=6)
                ax.set_yticks(range(len(rows)), rows, fontsize=6)
            fig.tight_layout()
            path = out_dir / f"{kind}-layer{layer}.png"
            fig.savefig(path, dpi=110)
            plt.close(fig)
            written.append(path)
    return written


def plot_ponder(steps: Tensor, tokens: list[str], path: Path, title: str) -> Path:
    """Bar chart of ACT steps per position (the UT paper's ponder-time figure)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(max(4.0, 0.35 * len(tokens)), 3.0))
    ax.bar(range(len(tokens)), steps.tolist(), color="tab:blue")
    ax.set_xticks(range(len(tokens)), tokens, rotation=90, fontsize=7)
    ax.set_ylabel("ponder steps")
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
