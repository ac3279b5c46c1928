"""Peer side of the training benchmark (runs in bench/.peers): HF MarianMTModel train steps.

Reads {"src": [[ids]], "tgt": [[ids]], "steps": n} per line; answers {"seconds": [...], "rss_mb": m}.
Each step: forward, label-smoothed (0.1) cross entropy over non-pad targets, backward, Adam.
"""

import json
import resource
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F
import transformers


def main() -> None:
    torch.set_num_threads(int(sys.argv[2]))
    model = transformers.MarianMTModel.from_pretrained(Path(sys.argv[1])).train()
    opt = torch.optim.Adam(model.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9)
    pad, start = model.config.pad_token_id, model.config.decoder_start_token_id
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        req = json.loads(line)
        src, tgt = torch.tensor(req["src"]), torch.tensor(req["tgt"])
        dec_in = torch.cat([torch.full((tgt.shape[0], 1), start), tgt[:, :-1]], 1)
        times = []
        for _ in range(req["steps"]):
            begin = time.perf_counter()
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
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            times.append(time.perf_counter() - begin)
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(json.dumps({"seconds": times, "rss_mb": rss}), flush=True)


if __name__ == "__main__":
    main()
