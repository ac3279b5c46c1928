"""Peer side of the decode benchmarks; runs in bench/.peers (transformers + ctranslate2).

    engines.py HF_DIR THREADS ENGINE

Loads one engine on THREADS threads: "hf", the MarianMTModel in HF_DIR (generate); "ct2" or
"ct2-int8", the CTranslate2 model HF_DIR/../ct2-float32 or HF_DIR/../ct2-int8 (converted from
HF_DIR with CTranslate2's converter when it is not there; HF_DIR then needs only its source.spm
and target.spm, for text requests). One engine a process: a second CTranslate2 Translator in
the same process halves the first one's speed on 2 threads (measured here: 1.79 s -> 3.38 s
for beam 4 on the l10n test set, and deleting it does not restore it). Reads one JSON request
per line on stdin, answers one JSON line on stdout. For text, "ct2-vmap" and "ct2-int8-vmap"
translate with the model's vocabulary map (use_vmap: a shortlist exported with it).

Token ids (bench/decode/speed.py):
  {"engine": e, "beam": k, "src": [[ids]], "length": n} -> {"seconds": t, "outputs": [[ids]]}
Outputs are forced to exactly n tokens (EOS blocked before n), so every engine does equal work.

Text (bench/decode/e2e.py), timed from raw lines to detokenised text as a user would run it:
  {"engine": e, "beam": k, "alpha": a, "max_len_a": x, "max_len_b": y, "max_tokens": m,
   "lines": [text]} -> {"seconds": t, "outputs": [text]}
CTranslate2 gets the sentencepiece pieces of every line plus </s>, one `translate_batch` call per
length-sorted batch of at most m padded source tokens (transduce's and HF's batches), each with
the limit x * the batch's longest + y: CTranslate2 has no per-sentence limit, and one call over
all lines would let a weak model's degenerate outputs run to the longest line's limit; HF
tokenises with MarianTokenizer, generates length-sorted batches of at most m padded source
tokens (limit x * the batch's longest + y new tokens) and decodes with batch_decode. Both take a
as their length penalty: score / |Y|^a, where transduce divides by ((5 + |Y|) / 6)^a.
"""

import json
import sys
import time
from pathlib import Path

import ctranslate2
import sentencepiece
import torch
import transformers


def decode_ids(
    model: transformers.MarianMTModel,
    translators: dict[str, ctranslate2.Translator],
    vocab: dict[str, int],
    req: dict,
) -> dict:
    """The token-id request of bench/decode/speed.py: every output exactly req["length"] tokens; only
    the engine's own call is timed."""
    src, n, beam = req["src"], req["length"], req["beam"]
    if req["engine"] == "hf":
        pad, eos = model.config.pad_token_id, model.config.eos_token_id
        width = max(len(s) for s in src)
        ids = torch.tensor([s + [pad] * (width - len(s)) for s in src])
        start = time.perf_counter()
        with torch.no_grad():
            out = model.generate(
                input_ids=ids,
                attention_mask=ids.ne(pad).long(),
                num_beams=beam,
                do_sample=False,
                min_new_tokens=n,
                max_new_tokens=n + 1,
                length_penalty=0.0,
                early_stopping=True,
                bad_words_ids=[[pad]],
            )
        seconds = time.perf_counter() - start
        return {
            "seconds": seconds,
            "outputs": [[t for t in row[1:].tolist() if t not in (pad, eos)] for row in out],
        }
    names = {i: p for p, i in vocab.items()}
    tokens = [[names[i] for i in s] for s in src]
    start = time.perf_counter()
    res = translators[req["engine"]].translate_batch(
        tokens,
        beam_size=beam,
        min_decoding_length=n,
        max_decoding_length=n,
        length_penalty=0.0,
        max_batch_size=len(src),
    )
    seconds = time.perf_counter() - start
    return {"seconds": seconds, "outputs": [[vocab[t] for t in r.hypotheses[0]] for r in res]}


def length_batches(lengths: list[int], max_tokens: int) -> list[list[int]]:
    """Indices sorted by length, cut where the padded batch would pass max_tokens (transduce's rule)."""
    batches: list[list[int]] = []
    current: list[int] = []
    longest = 0
    for i in sorted(range(len(lengths)), key=lengths.__getitem__):
        if current and max(longest, lengths[i]) * (len(current) + 1) > max_tokens:
            batches.append(current)
            current, longest = [], 0
        current.append(i)
        longest = max(longest, lengths[i])
    return [*batches, current] if current else batches


def translate_hf(
    model: transformers.MarianMTModel, tokenizer: transformers.MarianTokenizer, req: dict
) -> list[str]:
    """Text through MarianTokenizer, generate on length-sorted batches, batch_decode; input order."""
    ids = tokenizer(req["lines"])["input_ids"]  # each ends in </s>
    pad = model.config.pad_token_id
    outputs = [""] * len(ids)
    for batch in length_batches([len(s) for s in ids], req["max_tokens"]):
        width = max(len(ids[i]) for i in batch)
        src = torch.tensor([ids[i] + [pad] * (width - len(ids[i])) for i in batch])
        with torch.no_grad():
            out = model.generate(
                input_ids=src,
                attention_mask=src.ne(pad).long(),
                num_beams=req["beam"],
                do_sample=False,
                length_penalty=req["alpha"],
                max_new_tokens=int(req["max_len_a"] * (width - 1) + req["max_len_b"]),
                bad_words_ids=[[pad]],  # the decoder-start row; transduce never generates it either
            )
        texts = tokenizer.batch_decode(out, skip_special_tokens=True, clean_up_tokenization_spaces=False)
        for i, text in zip(batch, texts, strict=True):
            outputs[i] = text
    return outputs


def translate_ct2(
    translator: ctranslate2.Translator,
    source: sentencepiece.SentencePieceProcessor,
    target: sentencepiece.SentencePieceProcessor,
    req: dict,
) -> list[str]:
    """Text through sentencepiece, translate_batch per length-sorted batch (each with its own
    length limit, as HF's generate gets), detokenised; input order."""
    tokens = [[*pieces, "</s>"] for pieces in source.encode(req["lines"], out_type=str)]
    hypotheses: list[list[str]] = [[] for _ in tokens]
    for batch in length_batches([len(t) for t in tokens], req["max_tokens"]):
        longest = max(len(tokens[i]) for i in batch) - 1
        results = translator.translate_batch(
            [tokens[i] for i in batch],
            max_batch_size=req["max_tokens"],
            batch_type="tokens",
            beam_size=req["beam"],
            length_penalty=req["alpha"],
            use_vmap=req["engine"].endswith("-vmap"),  # the exported shortlist (vmap.txt)
            max_decoding_length=int(req["max_len_a"] * longest + req["max_len_b"]),
            max_input_length=0,  # no truncation, as transduce
        )
        for i, result in zip(batch, results, strict=True):
            hypotheses[i] = result.hypotheses[0]
    return target.decode(hypotheses)


CT2_WEIGHTS = {"ct2": "float32", "ct2-int8": "int8"}


def main() -> None:
    hf_dir, threads, engine = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    if engine not in ("hf", *CT2_WEIGHTS):
        sys.exit(f"engines.py: unknown engine {engine!r}: hf, ct2 or ct2-int8")
    torch.set_num_threads(threads)
    marian = (hf_dir / "config.json").exists()  # else only the sentencepiece files, for CTranslate2
    model = transformers.MarianMTModel.from_pretrained(hf_dir).eval() if engine == "hf" else None
    vocab = json.loads((hf_dir / "vocab.json").read_text()) if marian else {}
    translators = {}
    if engine in CT2_WEIGHTS:
        quant = CT2_WEIGHTS[engine]
        out = hf_dir.parent / f"ct2-{quant}"
        if not out.exists():
            ctranslate2.converters.TransformersConverter(str(hf_dir)).convert(str(out), quantization=quant)
        translators[engine] = ctranslate2.Translator(
            str(out), device="cpu", inter_threads=1, intra_threads=threads, compute_type=quant
        )
    text = None  # tokenizers, loaded for the first text request (not timed)
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        req = json.loads(line)
        if "lines" not in req:
            print(json.dumps(decode_ids(model, translators, vocab, req)), flush=True)
            continue
        if text is None:
            text = (
                transformers.MarianTokenizer.from_pretrained(hf_dir) if marian else None,
                sentencepiece.SentencePieceProcessor(model_file=str(hf_dir / "source.spm")),
                sentencepiece.SentencePieceProcessor(model_file=str(hf_dir / "target.spm")),
            )
        start = time.perf_counter()
        if req["engine"] == "hf":
            outputs = translate_hf(model, text[0], req)
        else:
            outputs = translate_ct2(translators[req["engine"].removesuffix("-vmap")], text[1], text[2], req)
        print(json.dumps({"seconds": time.perf_counter() - start, "outputs": outputs}), flush=True)


if __name__ == "__main__":
    main()
