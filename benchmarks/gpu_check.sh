#!/usr/bin/env bash
# The checks that need a CUDA GPU, in one run: the device tests, then the GPU benchmarks.
# Usage: bash benchmarks/gpu_check.sh [OUTDIR]  (default $OUT, else gpu-check/). Needs torch with
# CUDA, NumPy, SciPy, wrapt, pytest and hypothesis importable; CuPy and scikit-learn are used where
# present (the native paths' device tests and rows need scikit-learn for the estimators).
set -uo pipefail
out=${1:-${OUT:-gpu-check}}
mkdir -p "$out"
export PYTHONPATH=.${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1 AUTOCONVERT_TEST_DEVICE=cuda
status=0
{ nvidia-smi -L; python3 -c "import torch, numpy, scipy, importlib.util as u; print('torch', torch.__version__, 'numpy', numpy.__version__, 'scipy', scipy.__version__, 'cupy', u.find_spec('cupy') and __import__('cupy').__version__)"; } 2>&1 | tee "$out/machine.txt"
pytest=(python3 -m pytest -o addopts= -ra -p no:cacheprovider)
"${pytest[@]}" -m gpu tests 2>&1 | tee "$out/tests.log" || status=1
SCIPY_ARRAY_API=1 "${pytest[@]}" -m gpu tests/test_native.py tests/test_native_classes.py 2>&1 | tee -a "$out/tests.log" || status=1
"${pytest[@]}" -m "not gpu" tests/test_cupy.py 2>&1 | tee -a "$out/tests.log" || status=1  # CuPy there, not here
python3 -m benchmarks --case gpu --case gpu_resident --case gpu_native --case gpu_compiled --json "$out/gpu.json" --results "$out/RESULTS-gpu.md" \
    2>&1 | tee "$out/bench.log" || status=1
exit $status
