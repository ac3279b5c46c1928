#!/usr/bin/env bash
# The GPU check, one command for a lent device (issue 23; results: docs/results/gpu.md).
#
#   bench/gpu/gpu.sh fetch   here, with PyPI: the wheels the device image lacks, into .whl/
#   bench/gpu/gpu.sh pack    here: the prepared l10n En->De data (8k vocabulary) and the raw test
#                            set, into .gpudata/l10n.tar.xz (14 MB) for the real run
#   bench/gpu/gpu.sh         there (device tool: run from the repository root with carry
#                            [".whl", ".gpudata"]): install this working tree without network,
#                            run the `gpu` tests, then bench/gpu/throughput.py, then (when
#                            .gpudata is there) train the `base` model on l10n En->De in bf16 for
#                            the time left of GPU_BUDGET_S (default 560 s) and score it on the
#                            test set, beam 4; all output under $OUT (default bench/out/gpu)
#
# The device image has Python 3.12 with torch, sentencepiece, sacrebleu, safetensors, typer,
# rich, transformers, httpx and pytest; the server's fastapi/starlette/uvicorn (fastapi needs
# opentelemetry-api) and pydantic (at our tested versions) travel as wheels.
set -uo pipefail
cd "$(dirname "$0")/../.."  # the repository root
WHEELS=(fastapi==0.165.0 starlette==1.10.0 uvicorn==0.54.0 pydantic==2.14.3 pydantic_core==2.50.4
    annotated-types==0.8.0 annotated-doc==0.0.7 typing-inspection==0.4.5 typing_extensions==4.16.0
    opentelemetry-api==1.45.2)

if [ "${1:-}" = fetch ]; then
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
        -d .whl "${WHEELS[@]}"
    exit
fi
if [ "${1:-}" = pack ]; then
    mkdir -p .gpudata
    tar -C bench/out -cf - l10n-de-data l10n-de/test.en l10n-de/test.de | xz -T2 -6 >.gpudata/l10n.tar.xz
    exit
fi
deadline=$((SECONDS + ${GPU_BUDGET_S:-560}))

OUT=${OUT:-bench/out/gpu}
mkdir -p "$OUT"
if compgen -G ".whl/*.whl" >/dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
        .whl/*.whl || exit 2
    export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
python3 -m pip install -q --no-deps --no-build-isolation -e . >/tmp/install.log 2>&1 \
    || export PYTHONPATH=$PWD/src:${PYTHONPATH:-}  # an image whose setuptools cannot build in place
export PYTHONUNBUFFERED=1
{
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
    python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'
} | tee "$OUT/device.txt"
timeout 150 python3 -m pytest -m gpu -p no:cacheprovider -rs tests/test_gpu.py 2>&1 | tee "$OUT/tests.log"
tests=${PIPESTATUS[0]}
timeout 260 python3 -m bench.gpu.throughput --out "$OUT" 2>&1 | tee "$OUT/bench.log"
bench=${PIPESTATUS[0]}
mt=skipped
left=$((deadline - SECONDS - 110))  # the model's start, validations, checkpoints and the test decoding
if [ -f .gpudata/l10n.tar.xz ] && [ "$left" -ge 60 ]; then
    mkdir -p /tmp/l10n && tar -C /tmp/l10n -xJf .gpudata/l10n.tar.xz
    minutes=$(python3 -c "print(round($left / 60, 2))")
    timeout $((left + 90)) python3 -m transduce train base data.dataset=/tmp/l10n/l10n-de-data \
        data.max_tokens=25000 train.precision=bf16 train.warmup=2000 train.max_minutes="$minutes" \
        train.steps=100000000 train.validate_every=100000000 train.save_every=100000000 \
        train.validate_every_minutes="$(python3 -c "print($minutes / 2)")" train.save_every_minutes="$minutes" \
        train.keep_last=1 train.log_every=100 --run-dir /tmp/mt --no-progress 2>&1 | tee "$OUT/mt_train.log"
    mt=${PIPESTATUS[0]}
    cp "$(ls -d /tmp/mt/checkpoints/*/ | tail -1)trainer.json" "$OUT/mt_trainer.json"
    timeout 100 python3 -m transduce evaluate /tmp/mt --src /tmp/l10n/l10n-de/test.en \
        --ref /tmp/l10n/l10n-de/test.de --beam 4 --device cuda 2>&1 | tee "$OUT/mt_eval.log"
fi
echo "gpu tests: exit $tests; benchmark: exit $bench; l10n base run: $mt" | tee -a "$OUT/device.txt"
[ "$tests" = 0 ] && [ "$bench" = 0 ]
