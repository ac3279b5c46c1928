"""Attention heat maps per layer and head (encoder self, decoder self, cross), as in the paper,
and the UT paper's ACT ponder-time figure."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor, nn

from .data.batching import annotation_tensors, encode_sources
from .data.vocab import BOS
from .decode.kinds import decoding_for
from .decode.pipeline import encode_lines
from .decode.search import greedy
from .model.attention import record_attention
from .model.transformer import EncoderDecoder, ModelOutput
from .store.load import LoadedModel

MAX_PLOT_TOKENS = 200  # a heat map's labels stay readable, and plotting stays quick


@dataclass
class Example:
    """One source in the model's input format and a target (given, or the greedy output)."""

    src_ids: list[int]
    tgt_ids: list[int]
    source: dict[str, Tensor]  # factors / syntax tensors of annotated models

    def src_labels(self, loaded: LoadedModel) -> list[str]:
        """The encoder's input tokens: the source and EOS."""
        return [*(loaded.src_vocab.token(i) for i in self.src_ids), "</s>"]

    def read_labels(self, loaded: LoadedModel) -> list[str]:
        """The decoder's input tokens: <s> and the target."""
        return ["<s>", *(loaded.tgt_vocab.token(i) for i in self.tgt_ids)]

    def written_labels(self, loaded: LoadedModel) -> list[str]:
        """The tokens the decoder writes, one per position: the target and EOS. Position i reads
        <s> and i target tokens and writes the next one, so a row labelled with what it reads
        would show each alignment one token late."""
        return [*(loaded.tgt_vocab.token(i) for i in self.tgt_ids), "</s>"]

    def forward(self, model: EncoderDecoder) -> ModelOutput:
        """The teacher-forced pass over this example (<s> + target as decoder input), on the
        model's device."""
        device = next(model.parameters()).device
        source = {k: v.to(device) for k, v in self.source.items()}
        tgt = torch.tensor([[BOS, *self.tgt_ids]], device=device)
        return model(encode_sources([self.src_ids]).to(device), tgt, **source)


def make_example(loaded: LoadedModel, source: str, target: str | None, trees: Path | None = None) -> Example:
    """Read `source` as translate does (trees and factors included); decode greedily without a target."""
    encoded = encode_lines(loaded, [source], trees)
    src_ids = encoded.sources[0]
    if not src_ids:
        raise ValueError("the source is empty")
    if len(src_ids) > MAX_PLOT_TOKENS:
        raise ValueError(f"the source has {len(src_ids)} tokens; plots take at most {MAX_PLOT_TOKENS}")
    extra = annotation_tensors(encoded.annotations, len(src_ids) + 1) if encoded.annotations else {}
    if target is None:
        device = next(loaded.model.parameters()).device
        src, on_device = encode_sources([src_ids]).to(device), {k: v.to(device) for k, v in extra.items()}
        tgt_ids = greedy(loaded.model, src, source=on_device)[0].tokens
    else:
        tgt_ids = loaded.tgt_vocab.encode(target)
    return Example(src_ids, tgt_ids, extra)


@torch.no_grad()
def collect_attention(model: EncoderDecoder, example: Example) -> dict[str, list[Tensor]]:
    """Weights per kind ('encoder', 'decoder', 'cross'), one (heads, queries, keys) tensor per
    layer (per recurrent step for a Universal Transformer)."""
    with record_attention(model) as records:
        example.forward(model)
    kinds: dict[str, list[Tensor]] = {"encoder": [], "decoder": [], "cross": []}
    for name, calls in records.items():
        side, module = name.split(".")[0], name.split(".")[-1]
        kind = "cross" if module == "cross_attn" else side
        kinds[kind].extend(w[0].cpu() for w in calls)
    return kinds


def check_plottable(model: nn.Module) -> None:
    """ValueError unless the model's kind can be plotted (an encoder-decoder): the plots follow a
    source through both stacks and the cross-attention between them."""
    if not decoding_for(model.kind).plots:
        raise ValueError(
            f"attention plots need an encoder-decoder model; this one is model.kind='{model.kind}'"
        )


def check_selection(
    model: EncoderDecoder, heads: int, layers: list[int] | None, chosen: list[int] | None
) -> None:
    """ValueError naming the range when a chosen layer or head does not exist."""
    check_plottable(model)
    depth = max(model.encoder.depth, model.decoder.depth)
    if layers and not all(0 <= x < depth for x in layers):
        raise ValueError(f"--layers: the model has layers 0..{depth - 1}, not {','.join(map(str, layers))}")
    if chosen and not all(0 <= h < heads for h in chosen):
        raise ValueError(f"--heads: the model has heads 0..{heads - 1}, not {','.join(map(str, chosen))}")


@torch.no_grad()
def ponder_steps(model: EncoderDecoder, example: Example) -> dict[str, Tensor]:
    """ACT steps per position by side: 'encoder' over the source + EOS, 'decoder' over the
    positions that write the target + EOS."""
    return {side: p.steps[0].cpu() for side, p in example.forward(model).ponder.items()}


@dataclass
class HeatMap:
    """One figure written: its file, what it shows, and its axis labels, one per row (query) and
    per column (key) of the weights it draws."""

    path: Path
    kind: str
    layer: int
    rows: list[str]
    cols: list[str]


def axis_labels(example: Example, loaded: LoadedModel) -> dict[str, tuple[list[str], list[str]]]:
    """(row labels, column labels) per kind. A decoder row is labelled with the token written at
    that step (the target + EOS), as the server's /attention labels it; a column with the token
    read there: the source + EOS for the encoder's keys, <s> + target for the decoder's."""
    src, read, written = (
        example.src_labels(loaded),
        example.read_labels(loaded),
        example.written_labels(loaded),
    )
    return {"encoder": (src, src), "decoder": (written, read), "cross": (written, src)}


def plot_attention(
    weights: dict[str, list[Tensor]],
    labels: dict[str, tuple[list[str], list[str]]],
    out_dir: Path,
    layers: list[int] | None = None,
    heads: list[int] | None = None,
) -> list[HeatMap]:
    """One PNG per (kind, layer) with a panel per head; `labels` from `axis_labels`. Returns the
    maps written; ValueError if the labels do not fit the weights (one per row and column)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for kind, per_layer in weights.items():
        rows, cols = labels[kind]
        for layer, w in enumerate(per_layer):
            if layers is not None and layer not in layers:
                continue
            if tuple(w.shape[1:]) != (len(rows), len(cols)):
                raise ValueError(
                    f"{kind} layer {layer}: weights of shape {tuple(w.shape[1:])} for "
                    f"{len(rows)} x {len(cols)} labels"
                )
            chosen = heads if heads is not None else list(range(w.shape[0]))
            fig, axes = plt.subplots(1, len(chosen), figsize=(3.2 * len(chosen), 3.4), squeeze=False)
            for ax, h in zip(axes[0], chosen, strict=True):
                ax.imshow(w[h].float().numpy(), cmap="viridis", vmin=0.0, vmax=1.0)
                ax.set_title(f"{kind} layer {layer} head {h}", fontsize=8)
                ax.set_xticks(range(len(cols)), cols, rotation=90, fontsize=6)
                ax.set_yticks(range(len(rows)), rows, fontsize=6)
            fig.tight_layout()
            path = out_dir / f"{kind}-layer{layer}.png"
            fig.savefig(path, dpi=110)
            plt.close(fig)
            written.append(HeatMap(path, kind, layer, rows, cols))
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
