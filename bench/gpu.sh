#!/usr/bin/env bash
# The GPU check, one command for a lent device (issue 23; see bench/RESULTS.md "GPU").
#
#   bench/gpu.sh fetch     here, with PyPI: the wheels the device image lacks, into .whl/
#   bench/gpu.sh           there (device tool: run with carry [".whl"]): install this working
#                          tree without network, run the `gpu` tests, then bench/gpu.py; all
#                          output under $OUT (default bench/out/gpu)
#
# The device image has Python 3.12 with torch, sentencepiece, sacrebleu, safetensors, typer,
# rich, transformers, httpx and pytest; the server's fastapi/starlette/uvicorn and pydantic (at
# our tested versions) travel as wheels.
set -uo pipefail
cd "$(dirname "$0")/.."
WHEELS=(fastapi==0.165.0 starlette==1.10.0 uvicorn==0.54.0 pydantic==2.14.3 pydantic_core==2.50.4
    annotated-types==0.8.0 annotated-doc==0.0.7 typing-inspection==0.4.5 typing_extensions==4.16.0)

if [ "${1:-}" = fetch ]; then
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
        -d .whl "${WHEELS[@]}"
    exit
fi

OUT=${OUT:-bench/out/gpu}
mkdir -p "$OUT"
if compgen -G ".whl/*.whl" >/dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
        .whl/*.whl || exit 2
    export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
python3 -m pip install -q --no-deps --no-build-isolation -e . >"$OUT/install.log" 2>&1 \
    || export PYTHONPATH=$PWD/src:${PYTHONPATH:-}  # an image whose setuptools cannot build in place
export PYTHONUNBUFFERED=1
{
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
    python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'
} | tee "$OUT/device.txt"
timeout 200 python3 -m pytest -m gpu -p no:cacheprovider -rs tests/test_gpu.py 2>&1 | tee "$OUT/tests.log"
tests=${PIPESTATUS[0]}
timeout 340 python3 bench/gpu.py --out "$OUT" 2>&1 | tee "$OUT/bench.log"
bench=${PIPESTATUS[0]}
echo "gpu tests: exit $tests; benchmark: exit $bench" | tee -a "$OUT/device.txt"
[ "$tests" = 0 ] && [ "$bench" = 0 ]
