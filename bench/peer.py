"""Peer side of the decode benchmark; runs in bench/.peers (transformers + ctranslate2).

Reads one JSON request per line on stdin, answers one JSON line on stdout:
  {"engine": "hf" | "ct2" | "ct2-int8", "beam": k, "src": [[ids]], "length": n}
  -> {"seconds": t, "outputs": [[ids]]}
Outputs are forced to exactly n tokens (EOS blocked before n), so every engine does equal work.
"""

import json
import sys
import time
from pathlib import Path

import ctranslate2
import torch
import transformers


def main() -> None:
    hf_dir, threads = Path(sys.argv[1]), int(sys.argv[2])
    torch.set_num_threads(threads)
    model = transformers.MarianMTModel.from_pretrained(hf_dir).eval()
    vocab = json.loads((hf_dir / "vocab.json").read_text())
    names = {i: p for p, i in vocab.items()}
    translators = {}
    for kind, quant in (("ct2", "float32"), ("ct2-int8", "int8")):
        out = hf_dir.parent / f"ct2-{quant}"
        if not out.exists():
            ctranslate2.converters.TransformersConverter(str(hf_dir)).convert(str(out), quantization=quant)
        translators[kind] = ctranslate2.Translator(
            str(out), device="cpu", inter_threads=1, intra_threads=threads, compute_type=quant
        )
    pad, eos = model.config.pad_token_id, model.config.eos_token_id
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        req = json.loads(line)
        src, n, beam = req["src"], req["length"], req["beam"]
        if req["engine"] == "hf":
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
            outputs = [[t for t in row[1:].tolist() if t not in (pad, eos)] for row in out]
        else:
            tokens = [[names[i] for i in s] for s in src]
            start = time.perf_counter()
            res = translators[req["engine"]].translate_batch(
                tokens,
                beam_size=beam,
                min_decoding_length=n,
                max_decoding_length=n,
                length_penalty=0.0,
                max_batch_size=len(tokens),
            )
            seconds = time.perf_counter() - start
            outputs = [[vocab[t] for t in r.hypotheses[0]] for r in res]
        print(json.dumps({"seconds": seconds, "outputs": outputs}), flush=True)


if __name__ == "__main__":
    main()
