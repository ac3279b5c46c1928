"""Peer side of the MT benchmark (runs in bench/.peers): train and decode a HF MarianMTModel.

    marian_mt.py MODEL_DIR THREADS SEED   (SEED seeds the dropout masks)

Requests, one JSON object per line:
  {"op": "train", "src": [[ids]], "tgt": [[ids]], "lr": x}  -> {"seconds": s, "loss": l}
  {"op": "decode", "src": [[ids]], "beam": k, "alpha": a, "max_new": n}  -> {"outputs": [[ids]]}
  {"op": "save", "dir": path}  -> {"saved": path}   (safetensors weights and config, to reuse)
A train step is the recipe transduce uses: label-smoothed (0.1) cross entropy summed over
non-pad targets and divided by their count, backward, Adam (0.9, 0.98, 1e-9) at the given lr.
"""

import json
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F
import transformers


def main() -> None:
    torch.set_num_threads(int(sys.argv[2]))
    torch.manual_seed(int(sys.argv[3]))
    model = transformers.MarianMTModel.from_pretrained(Path(sys.argv[1]))
    opt = torch.optim.Adam(model.parameters(), lr=0.0, betas=(0.9, 0.98), eps=1e-9)
    pad, start = model.config.pad_token_id, model.config.decoder_start_token_id
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        req = json.loads(line)
        if req["op"] == "save":
            model.save_pretrained(req["dir"])
            print(json.dumps({"saved": req["dir"]}), flush=True)
            continue
        width = max(len(s) for s in req["src"])
        src = torch.tensor([s + [pad] * (width - len(s)) for s in req["src"]])
        if req["op"] == "train":
            model.train()
            begin = time.perf_counter()
            t_width = max(len(t) for t in req["tgt"])
            tgt = torch.tensor([t + [pad] * (t_width - len(t)) for t in req["tgt"]])
            dec_in = torch.cat([torch.full((tgt.shape[0], 1), start), tgt[:, :-1]], 1)
            logits = model(input_ids=src, attention_mask=src.ne(pad).long(), decoder_input_ids=dec_in).logits
            loss = (
                F.cross_entropy(
                    logits.reshape(-1, logits.shape[-1]),
                    tgt.reshape(-1),
                    ignore_index=pad,
                    label_smoothing=0.1,
                    reduction="sum",
                )
                / tgt.ne(pad).sum()
            )
            for group in opt.param_groups:
                group["lr"] = req["lr"]
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            print(json.dumps({"seconds": time.perf_counter() - begin, "loss": loss.item()}), flush=True)
        else:
            model.eval()
            with torch.no_grad():
                out = model.generate(
                    input_ids=src,
                    attention_mask=src.ne(pad).long(),
                    num_beams=req["beam"],
                    length_penalty=req["alpha"],
                    max_new_tokens=req["max_new"],
                    do_sample=False,
                    bad_words_ids=[[pad]],
                )
            eos = model.config.eos_token_id
            outputs = []
            for row in out[:, 1:].tolist():
                ids = []
                for t in row:
                    if t == eos:
                        break
                    if t != pad:
                        ids.append(t)
                outputs.append(ids)
            print(json.dumps({"outputs": outputs}), flush=True)


if __name__ == "__main__":
    main()
