#!/usr/bin/env bash
# The algorithmic grid on a lent GPU (issue 48; notes: docs/results/algorithmic.md).
#
#   bench/algorithmic/gpu.sh MINUTES [JOBS]
#       there (device tool: run from the repository root; carry [".whl"] as bench/gpu/gpu.sh fetches
#       it, and "bench/out/algorithmic" to resume the cells an earlier session interrupted):
#       1. unless JOBS is given, the jobs probe: cells per minute with PROBE (default 2,4,8) cells
#          at once, 100-update UT cells; JOBS is then the best N;
#       2. the grid at STEPS (default 10000) updates, 3 seeds, JOBS cells at once, for what is left of
#          MINUTES (then the running cells are interrupted and save a checkpoint): first copy, reverse,
#          addition x Transformer, UT, UT+ACT with offsets over a range of RANGE (default 512)
#          positions (on the CPU at 10k updates the Transformer reversed furthest over 512: 0.37 of
#          characters by tensor2tensor's measure over three seeds, against 0.20 over 128; copy there
#          has not left its longer plateau, 0.42 against 0.92), then the same x positions none,
#          offset, subset_spread (Learning to Execute's program evaluation first, at --lr-scale
#          0.25, then its memorisation tasks with the rest). Cells with a committed record are skipped.
#       $OUT gets algorithmic.tar.xz.0, .1, ... (15 MiB parts of one archive): bench/records/algorithmic/
#       (the new records and the probe's) and, in bench/out/algorithmic/, the unfinished cells' newest
#       checkpoints and every cell's log. Here: `cat algorithmic.tar.xz.* | tar -xJf -`, commit
#       bench/records/algorithmic, and resume the interrupted cells from bench/out/algorithmic in the
#       same session, on the CPU or by carrying them to the next device call (only the cells to
#       resume: a call carries 64 MiB); a new session's checkout has no bench/out.
set -uo pipefail
cd "$(dirname "$0")/../.."  # the repository root
MINUTES=${1:?usage: bench/algorithmic/gpu.sh MINUTES [JOBS]}
JOBS=${2:-}
RANGE=${RANGE:-512}  # the offset range of the first grid
OUT=${OUT:-bench/out/gpu-algorithmic}
mkdir -p "$OUT"
began=$(date +%s)
if compgen -G ".whl/*.whl" >/dev/null; then  # pydantic and friends, as bench/gpu/gpu.sh installs them
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
        .whl/*.whl || exit 2
    export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
export PYTHONPATH=$PWD/src:$PWD${PYTHONPATH:+:$PYTHONPATH}
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/device.txt"
if [ -z "$JOBS" ]; then
    python3 -m bench.algorithmic.grid --device cuda --jobs-probe "${PROBE:-2,4,8}" --probe-steps 100 \
        | tee "$OUT/probe.log"
    JOBS=$(sed -n 's/^best jobs: \([0-9]*\).*/\1/p' "$OUT/probe.log")
    JOBS=${JOBS:-4}
fi
minutes_left() { echo $(( MINUTES - ($(date +%s) - began) / 60 - 1 )); }  # a minute for packing
grid() {  # grid LOG ARGS...: the grid at STEPS, 3 seeds, for what is left of MINUTES, logged to $OUT/LOG
    local log=$1 left
    shift
    left=$(minutes_left)
    [ "$left" -gt 0 ] || return 0
    python3 -m bench.algorithmic.grid --device cuda --jobs "$JOBS" --minutes "$left" --steps "${STEPS:-10000}" \
        --seeds 3 --curve-every 1000 "$@" 2>&1 | tee "$OUT/$log"
}
# first the offsets over a range, the setting closest to the paper's UT
grid "grid-range$RANGE.log" --positions offset_range --position-range "$RANGE"
# program evaluation learns at a quarter of the rate (nothing at the default)
grid grid-programs.log --tasks lte_program lte_control lte_addition --positions none --lr-scale 0.25
grid grid.log --lte
unfinished=()  # cells without a record: their newest checkpoint resumes next time (the generated
for run in bench/out/algorithmic/*/*/; do  # data is not packed: a resumed run writes it again)
    setting=$(basename "$(dirname "$run")") cell=$(basename "$run")
    [ "$cell" = logs ] || [ -f "bench/records/algorithmic/$setting/$cell.json" ] && continue
    newest=$(ls -d "$run"checkpoints/ckpt-* 2>/dev/null | tail -1)
    [ -n "$newest" ] && unfinished+=("${newest%/}" "${run}train.log" "${run}best.json")
    for kept in continued.json interrupted.json; do  # what it continues; the CPU its invocations spent
        [ -n "$newest" ] && [ -f "$run$kept" ] && unfinished+=("$run$kept")
    done
done
# the device returns files of at most 16 MiB, 64 MiB in all: the archive comes back in 15 MiB parts
# (here: `cat algorithmic.tar.xz.* | tar -xJf -`)
tar -cJf - bench/records/algorithmic bench/out/algorithmic/*/logs ${unfinished[@]+"${unfinished[@]}"} \
    2>/dev/null | split -b 15M -d -a 1 - "$OUT/algorithmic.tar.xz."
ls -la "$OUT"
