#!/usr/bin/env bash
# trickbag's GPU lane in one go, from the repository root of a machine with one CUDA GPU (docs/gpu.md):
#   1. install the wheels the machine lacks (pydantic & co., carried in .whl/) into /tmp/site, no network;
#   2. print nvidia-smi and the library versions;
#   3. the CUDA-only tests:  pytest -m cuda tests/gpu       -> $OUT/gpu_tests.log (+ gpu_tests.xml)
#   4. the GPU benchmark:    benchmarks/gpu.py --quick      -> $OUT/gpu_bench.txt
# Each part runs under `timeout`, so the whole script ends within 8 minutes; the benchmark runs even when tests
# fail. Exit status: 0 when both parts passed, else 1. trickbag runs from src/ (PYTHONPATH), not installed.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD/src || exit 1

set -u
set -o pipefail
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS="${OMP_NUM_THREADS:-4}"
OUT="${OUT:-$PWD/gpu-lane-out}"
mkdir -p "$OUT"
START=$(date +%s)
stamp() { echo "=== $1 ($(( $(date +%s) - START )) s into the lane, $(date -u +%H:%M:%S) UTC)"; }

stamp "machine"
timeout 30 nvidia-smi || echo "nvidia-smi: not available"
timeout 30 nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit --format=csv || true
timeout 60 python3 - <<'EOF' || echo "version check failed"
import platform, sys
import numpy, pydantic, torch, torchvision
import trickbag
print(f"python {platform.python_version()} | torch {torch.__version__} (CUDA {torch.version.cuda}) | torchvision "
      f"{torchvision.__version__} | numpy {numpy.__version__} | pydantic {pydantic.VERSION}")
print(f"trickbag {trickbag.__version__} from {trickbag.__file__}")
ok = torch.cuda.is_available()
print(f"cuda available: {ok}" + (f" | {torch.cuda.get_device_name(0)} | capability {torch.cuda.get_device_capability(0)}"
                                 f" | cudnn {torch.backends.cudnn.version()} | bf16 {torch.cuda.is_bf16_supported()}"
                                 if ok else ""))
if ok and torch.distributed.is_available() and torch.distributed.is_nccl_available():
    print(f"nccl {'.'.join(map(str, torch.cuda.nccl.version()))}")
EOF

stamp "CUDA-only tests (timeout 300 s)"
timeout -k 10 300 python3 -m pytest -q -m cuda tests/gpu -p no:cacheprovider -rfEs --durations=12 --timeout=150 \
    --junitxml="$OUT/gpu_tests.xml" 2>&1 | tee "$OUT/gpu_tests.log"
TESTS=$?
[ "$TESTS" -eq 124 ] && echo "gpu lane: the tests ran out of time (300 s); the log ends where they stopped" \
    | tee -a "$OUT/gpu_tests.log"

stamp "GPU benchmark --quick (timeout 130 s)"
timeout -k 10 130 python3 benchmarks/gpu.py --quick 2>&1 | tee "$OUT/gpu_bench.txt"
BENCH=$?
[ "$BENCH" -eq 124 ] && echo "gpu lane: the benchmark ran out of time (130 s); tables printed in full above stand, the last may be cut" \
    | tee -a "$OUT/gpu_bench.txt"

stamp "done: tests exit $TESTS, benchmark exit $BENCH"
[ "$TESTS" -eq 0 ] && [ "$BENCH" -eq 0 ]
