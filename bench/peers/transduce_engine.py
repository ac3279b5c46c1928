"""`transduce translate --engine ctranslate2` in a process of its own, for bench/decode/e2e.py.

    transduce_engine.py CHECKPOINT THREADS QUANTIZE

Runs with our own venv's Python (not the peers'): opens CHECKPOINT on CTranslate2 (its cached
export, `none` float32 or `int8` weights) on THREADS CPU threads, as `transduce translate
--engine ctranslate2 --threads THREADS` does, and answers the text requests of
bench/peers/engines.py with `translate_lines`:
  {"beam": k, "alpha": a, "max_tokens": m, "lines": [text]} -> {"seconds": t, "outputs": [text]}
A process apart, as each peer engine has: a second CTranslate2 Translator, or PyTorch's
threads, in the same process slow a Translator on 2 threads.
"""

import json
import sys
import time

from transduce.decode.ctranslate2_engine import open_ctranslate2
from transduce.decode.options import decode_options
from transduce.decode.pipeline import output_rows, translate_lines


def main() -> None:
    checkpoint, threads, quantize = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    loaded = open_ctranslate2(checkpoint, quantize, threads, "cpu")
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        req = json.loads(line)
        search = {"greedy": True} if req["beam"] == 1 else {"beam": req["beam"], "alpha": req["alpha"]}
        options = decode_options(loaded.config.decode, max_tokens=req["max_tokens"], **search)
        start = time.perf_counter()
        # one-best text, as `transduce translate` writes it: no scores asked for
        outputs, _ = translate_lines(loaded, req["lines"], options, scores=False)
        seconds = time.perf_counter() - start
        print(json.dumps({"seconds": seconds, "outputs": output_rows(outputs)}), flush=True)


if __name__ == "__main__":
    main()
