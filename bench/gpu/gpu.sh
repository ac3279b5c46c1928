#!/usr/bin/env bash
# The GPU check, one command for a lent device (issues 47, 86; results: docs/results/gpu.md).
#
#   bench/gpu/gpu.sh fetch   here, with PyPI: the wheels the device image lacks, into .whl/
#   bench/gpu/gpu.sh pack    here: the prepared l10n En->De data (8k vocabulary) and the raw test
#                            set, into .gpudata/l10n.tar.xz (14 MB) for the trainer stage (built
#                            first when bench/out has none: minutes of CPU and Debian downloads;
#                            PYTHON=.venv/bin/python for the project's venv)
#   bench/gpu/gpu.sh [STAGE ...] [-- SESSION OPTIONS]
#                            there (device tool: run from the repository root with carry
#                            [".whl", ".whl-onmt", ".gpudata"], or [".whl", ".whl-ct2",
#                            ".gpudata/l10n-test.tar.xz"] for the ct2 stage: 64 MiB a call; see
#                            docs/results/gpu.md): install this working tree without network,
#                            then bench/gpu/session.py's stages (default all, issue 86's first:
#                            trainer peers ttq ct2 onmt-ttq bench decode tests profile kernel sdpa; the ct2
#                            stage needs .whl-ct2 carried). $OUT gets summary.json and session.tar.xz (every stage's
#                            JSON and log), which go into bench/records/gpu/<device>-<date>/; a later
#                            run can do only the stages missing, with
#                            `-- --previous bench/records/gpu/<device>-<date>`.
#
# The device image has Python 3.12 with torch, transformers, sentencepiece, sacrebleu,
# safetensors, typer, rich, httpx and pytest; the server's fastapi/starlette/uvicorn (fastapi
# needs opentelemetry-api) and pydantic (at our tested versions) travel as wheels.
set -uo pipefail
cd "$(dirname "$0")/../.."  # the repository root
WHEELS=(fastapi==0.165.0 starlette==1.10.0 uvicorn==0.54.0 pydantic==2.14.3 pydantic_core==2.50.4
    annotated-types==0.8.0 annotated-doc==0.0.7 typing-inspection==0.4.5 typing_extensions==4.16.0
    opentelemetry-api==1.45.2)
# OpenNMT-py, the peer trainer (bench/gpu/peer_trainers.py), and what it imports at run time that
# the image lacks, into .whl-onmt (25 MB; carried for the peers stage); spaCy (36 MB, imported only
# by its terminology transform) stays behind
ONMT_WHEELS=(OpenNMT-py==3.5.1 configargparse==1.9.0 pyonmttok==1.38.1 rapidfuzz==3.14.6 pyahocorasick==2.3.1
    fasttext-wheel==0.9.2)
# CTranslate2 (43 MB) travels in .whl-ct2, in the call that decodes with it (the ct2 stage): with
# the peers' wheels and the data it would pass the 64 MiB a call may carry
CT2_WHEELS=(ctranslate2==4.8.5)

if [ "${1:-}" = fetch ]; then
    download() {
        python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
            --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
            --platform manylinux2014_x86_64 -d "$@"
    }
    download .whl "${WHEELS[@]}" && download .whl-onmt "${ONMT_WHEELS[@]}" && download .whl-ct2 "${CT2_WHEELS[@]}"
    exit
fi
if [ "${1:-}" = pack ]; then  # builds the corpus (minutes, Debian's registry) and dataset when missing
    [ -d bench/out/l10n-de-data ] || ${PYTHON:-python3} -c 'from bench.data.l10n_corpus import build, prepared
prepared(build("de", 1500), "en", "de")' || exit 2
    mkdir -p .gpudata
    tar -C bench/out -cf - l10n-de-data l10n-de/test.en l10n-de/test.de | xz -T2 -6 >.gpudata/l10n.tar.xz
    tar -C bench/out -cf - l10n-de/test.en l10n-de/test.de | xz -T2 -6 >.gpudata/l10n-test.tar.xz
    exit
fi
export GPU_SESSION_START=${GPU_SESSION_START:-$(date +%s)}  # the session's deadline counts from here
export GPU_BUDGET_S=${GPU_BUDGET_S:-540}
OUT=${OUT:-bench/out/gpu}
mkdir -p "$OUT"
if compgen -G ".whl*/*.whl" >/dev/null; then  # .whl, .whl-onmt, .whl-ct2: whichever the call carried
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
        .whl*/*.whl || exit 2
    export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
python3 -m pip install -q --no-deps --no-build-isolation -e . >/tmp/install.log 2>&1 \
    || export PYTHONPATH=$PWD/src:${PYTHONPATH:-}  # an image whose setuptools cannot build in place
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}  # bench/ runs as a package
export PYTHONUNBUFFERED=1
stages=()
while [ $# -gt 0 ] && [ "$1" != -- ]; do stages+=("$1"); shift; done
[ "${1:-}" = -- ] && shift
work=/tmp/gpu-session
mkdir -p "$work"
{
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
    python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'
} | tee "$work/device.txt"
# the whole session stops at GPU_BUDGET_S (default 540 s), inside the device call's limit, so that
# what the finished stages wrote is packed and comes back even when a stage runs long
timeout -k 10 $((GPU_BUDGET_S - $(date +%s) + GPU_SESSION_START)) python3 -m bench.gpu.session --out "$work" \
    ${stages[@]+--stages "${stages[@]}"} "$@"
status=$?
cp "$work/summary.json" "$OUT/" 2>/dev/null
tar -C "$work" -cJf "$OUT/session.tar.xz" .
exit $status
