#!/usr/bin/env bash
# cuda-device-check.sh — run the CUDA backend's tests and benchmarks on a GPU
# machine that may have no Go toolchain, from a test binary built elsewhere:
#
#   make cuda-test-binary                  # where Go is: bin/cuda.test (-tags cuda)
#   scripts/cuda-device-check.sh [BINARY]  # on the GPU machine, repository root
#
# BINARY defaults to bin/cuda.test, else kernels/cuda.test. Results go under
# $OUT (default ./cuda-device-out): env.txt (GPU, driver, binary), test.txt
# (`-test.v`: conformance suite against kernels/cpu's tolerances, the device
# tag-mismatch test, …), bench.txt (`-test.bench .`: ZeroPages vs cuMemsetD8,
# MatMul, Attention, Decode1B on this GPU and on the CPU) and status.txt (the
# exit status of each step). The tests run first; the benchmarks run even if
# a test failed, so that one run gives every figure. Exit status: non-zero
# when the tests or the benchmarks failed.
#
# Knobs: CUDA_BENCH (benchmark regexp, default .), CUDA_BENCHTIME (default
# 1s), CUDA_TEST_TIMEOUT (default 5m), CUDA_BENCH_TIMEOUT (default 10m).
set -uo pipefail

out="${OUT:-./cuda-device-out}"
mkdir -p "$out"
bin="${1:-}"
if [ -z "$bin" ]; then
	for c in bin/cuda.test kernels/cuda.test; do
		[ -x "$c" ] && { bin="$c"; break; }
	done
fi
if [ -z "$bin" ] || [ ! -x "$bin" ]; then
	echo "cuda-device-check.sh: no test binary (build one with 'make cuda-test-binary')" | tee "$out/status.txt" >&2
	exit 2
fi
bin="$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")"

{
	echo "date: $(date -u +%FT%TZ)"
	echo "binary: $bin"
	uname -a
	nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv 2>&1 || echo "nvidia-smi: not available"
	ldd "$bin" 2>&1 | grep -i cuda || true
	nproc
} >"$out/env.txt" 2>&1
cat "$out/env.txt"

# The binary's init (gorgonia.org/cu) calls cuInit and exits when no driver
# or GPU is present: that shows up here as a failed test step.
"$bin" -test.v -test.count=1 -test.timeout "${CUDA_TEST_TIMEOUT:-5m}" 2>&1 | tee "$out/test.txt"
test_rc=${PIPESTATUS[0]}
echo "test: exit $test_rc" | tee "$out/status.txt"

"$bin" -test.run '^$' -test.bench "${CUDA_BENCH:-.}" -test.benchmem -test.benchtime "${CUDA_BENCHTIME:-1s}" \
	-test.timeout "${CUDA_BENCH_TIMEOUT:-10m}" 2>&1 | tee "$out/bench.txt"
bench_rc=${PIPESTATUS[0]}
echo "bench: exit $bench_rc" | tee -a "$out/status.txt"

[ "$test_rc" -eq 0 ] && [ "$bench_rc" -eq 0 ]
