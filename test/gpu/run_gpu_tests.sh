#!/bin/bash
# The GPU tests and benchmarks, on a machine with a GPU (no PostgreSQL).
# The binaries come from the Makefile (make gpu-build: the extension's own
# cuda/*.o, built with its NVCC_FLAGS, linked with the core).  Stages, in
# the order given (default: build test dbscan-test):
#   build            make gpu-build (ptxas report in $OUT/build.log);
#                    CUDA_ARCHS=90 builds sm_90 only
#   test             test_kmeans_gpu: GPU vs CPU on fresh random data
#   dbscan-test      test_dbscan_gpu: labels and core flags = CPU's, once
#                    per seed in DB_SEEDS (default: one fresh seed)
#   sanitize         compute-sanitizer memcheck, initcheck, synccheck and
#                    racecheck (SANITIZE_TOOLS) over the quick sets of
#                    SANITIZE_BINS (default both tests; racecheck: tiny sets)
#   bench            PyTorch baseline (bench_kmeans.py), then bench_kmeans
#   dbscan-bench     bench_dbscan_gpu: GPU vs CPU table (BENCH_ONLY=A,B,...)
#   crossover        bench_crossover: CPU vs GPU k-means whole calls
#   sql              test/gpu/sql_gpu_test.sh in a real server started from
#                    .carry/ (../shared/tools/pg-bundle make .carry, after
#                    make install, then carry .carry)
# Every stage runs under a time limit.  Logs go to $OUT (when set) or
# test/out.  Exit status: nonzero if any stage failed.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUTDIR=${OUT:-test/out}
mkdir -p "$OUTDIR"
B=test/bin/gpu
stages=${*:-build test dbscan-test}
rc=0

# run LOG LIMIT CMD...: CMD under timeout, output to $OUTDIR/LOG; its status
run() {
	local log=$1 limit=$2; shift 2
	timeout "$limit" "$@" > "$OUTDIR/$log" 2>&1
	local r=$?
	[ $r -eq 124 ] && echo "  ($* timed out after ${limit}s)"
	return $r
}

sanitize() {	# tool quick-level binary
	local tool=$1 q=$2 bin=$3 log="sanitize_$(basename "$3")_$1.log"
	GPUCLUST_TEST_QUICK=$q run "$log" "${SANITIZE_TIMEOUT:-240}" \
		compute-sanitizer --tool "$tool" --error-exitcode 3 "$B/$bin"
	local r=$?
	echo "$bin $tool: exit $r; $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUTDIR/$log" | tail -1); $(grep 'passed,' "$OUTDIR/$log")"
	[ $r -eq 0 ] || { grep -m 20 -E "=========|FAIL" "$OUTDIR/$log"; return 1; }
}

for s in $stages; do
case $s in
build)
	echo "== build"
	run build.log "${BUILD_TIMEOUT:-400}" make -j"$(nproc)" gpu-build NVCC_EXTRA="-Xptxas -v" \
		|| { tail -40 "$OUTDIR/build.log"; rc=1; }
	;;
test)
	echo "== test_kmeans_gpu"
	run test_kmeans_gpu.log "${KM_TEST_TIMEOUT:-400}" $B/test_kmeans_gpu || rc=1
	grep -E "FAIL|passed|seed|device" "$OUTDIR/test_kmeans_gpu.log" | head -20
	;;
dbscan-test)
	echo "== test_dbscan_gpu"
	for seed in ${DB_SEEDS:-fresh}; do
		log=test_dbscan_gpu_$seed.log
		if [ "$seed" = fresh ]; then
			run "$log" "${DB_TEST_TIMEOUT:-300}" $B/test_dbscan_gpu
		else
			GPUCLUST_TEST_SEED=$seed run "$log" "${DB_TEST_TIMEOUT:-300}" $B/test_dbscan_gpu
		fi
		r=$?; [ $r -eq 0 ] || rc=1
		echo "  exit $r: $(grep -E '^test_dbscan_gpu' "$OUTDIR/$log" | tr '\n' ' ')"
		grep -m 10 "FAIL" "$OUTDIR/$log"
	done
	;;
sanitize)
	echo "== compute-sanitizer"
	for bin in ${SANITIZE_BINS:-test_kmeans_gpu test_dbscan_gpu}; do
		for tool in ${SANITIZE_TOOLS:-memcheck initcheck synccheck racecheck}; do
			q=1; [ $tool = racecheck ] && q=2
			sanitize $tool $q $bin || rc=1
		done
	done
	;;
bench)
	echo "== bench_kmeans"
	PYTHONUNBUFFERED=1 timeout 300 python3 test/gpu/bench_kmeans.py "$OUTDIR/torch_ms.txt" || echo "(torch baseline failed)"
	timeout "${KM_BENCH_TIMEOUT:-400}" $B/bench_kmeans "$OUTDIR/torch_ms.txt" 2>&1 | tee "$OUTDIR/bench.log" || rc=1
	;;
dbscan-bench)
	echo "== bench_dbscan_gpu"
	timeout "${DB_BENCH_TIMEOUT:-400}" $B/bench_dbscan_gpu 2>&1 | tee "$OUTDIR/bench_dbscan.log" || rc=1
	;;
crossover)
	echo "== bench_crossover"
	timeout 400 $B/bench_crossover 2>&1 | tee "$OUTDIR/crossover.log" || rc=1
	;;
sql)
	# the extension as installed here, in a real server: the bundle made by
	# ../shared/tools/pg-bundle make .carry (after make install), carried
	echo "== sql_gpu_test (server from .carry/pg-bundle.tar.xz)"
	if [ ! -f .carry/pg-bundle.tar.xz ]; then
		echo "no .carry/pg-bundle.tar.xz"; rc=1; continue
	fi
	env=$(timeout 120 bash .carry/pg-bundle start .carry) || { echo "$env"; rc=1; continue; }
	( eval "$env"; timeout "${SQL_TIMEOUT:-540}" test/gpu/sql_gpu_test.sh ) > "$OUTDIR/sql_gpu_test.log" 2>&1
	r=$?; [ $r -eq 0 ] || rc=1
	grep -E "^(ok|FAIL)|sql_gpu_test:|timed out" "$OUTDIR/sql_gpu_test.log"
	[ $r -eq 124 ] && echo "sql_gpu_test timed out"
	bash .carry/pg-bundle stop >/dev/null 2>&1
	;;
*)
	echo "unknown stage $s"; rc=1;;
esac
done
exit $rc
