"""Peer side of the training benchmark (runs in bench/.peers): HF MarianMTModel train steps.

Reads {"src": [[ids]], "tgt": [[ids]], "steps": n, "precision": "fp32"|"bf16", "profile": bool}
per line; answers {"seconds": [...], "rss_mb": m} and, when profiling, {"ops": {name: self seconds}}
of one extra step. Each step: forward, label-smoothed (0.1) cross entropy over non-pad
targets, backward, Adam; bf16 runs forward and loss under CPU autocast.
"""

import contextlib
import json
import resource
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F
import transformers


def train_step(model, opt, src: torch.Tensor, tgt: torch.Tensor, bf16: bool) -> None:
    pad, start = model.config.pad_token_id, model.config.decoder_start_token_id
    dec_in = torch.cat([torch.full((tgt.shape[0], 1), start), tgt[:, :-1]], 1)
    autocast = torch.autocast("cpu", dtype=torch.bfloat16) if bf16 else contextlib.nullcontext()
    with autocast:
        logits = model(input_ids=src, attention_mask=src.ne(pad).long(), decoder_input_ids=dec_in).logits
        loss = (
            F.cross_entropy(
                logits.reshape(-1, logits.shape[-1]).float(),
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


def main() -> None:
    torch.set_num_threads(int(sys.argv[2]))
    model = transformers.MarianMTModel.from_pretrained(Path(sys.argv[1])).train()
    opt = torch.optim.Adam(model.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9)
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        req = json.loads(line)
        src, tgt = torch.tensor(req["src"]), torch.tensor(req["tgt"])
        bf16 = req.get("precision", "fp32") == "bf16"
        times = []
        for _ in range(req["steps"]):
            begin = time.perf_counter()
            train_step(model, opt, src, tgt, bf16)
            times.append(time.perf_counter() - begin)
        answer = {"seconds": times, "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
        if req.get("profile"):
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
                train_step(model, opt, src, tgt, bf16)
            answer["ops"] = {e.key: e.self_cpu_time_total / 1e6 for e in prof.key_averages()}
        print(json.dumps(answer), flush=True)


if __name__ == "__main__":
    main()
