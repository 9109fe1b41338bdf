#!/usr/bin/env bash
# The checks that need a CUDA GPU, in one run: the device tests, then the GPU benchmarks.
# Usage: bash benchmarks/gpu_check.sh [OUTDIR]  (default $OUT, else gpu-check/). Needs torch with
# CUDA, NumPy, SciPy, wrapt, pytest and hypothesis importable; CuPy is used where present.
set -uo pipefail
out=${1:-${OUT:-gpu-check}}
mkdir -p "$out"
export PYTHONPATH=.${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1 AUTOCONVERT_TEST_DEVICE=cuda
status=0
{ nvidia-smi -L; python3 -c "import torch, numpy, scipy; print('torch', torch.__version__, 'numpy', numpy.__version__, 'scipy', scipy.__version__)"; } 2>&1 | tee "$out/machine.txt"
pytest=(python3 -m pytest -o addopts= -ra -p no:cacheprovider -m gpu)
"${pytest[@]}" tests 2>&1 | tee "$out/tests.log" || status=1
SCIPY_ARRAY_API=1 "${pytest[@]}" tests/test_native.py 2>&1 | tee -a "$out/tests.log" || status=1
python3 -m benchmarks --case gpu ${GPU_CHECK_CASES:-} --json "$out/gpu.json" 2>&1 | tee "$out/bench.log" || status=1
exit $status
