#!/bin/bash
# Builds the GPU k-means tests and benchmark from source (nvcc + gcc, no
# PostgreSQL) and runs the stages named (default: build test):
#   build     compile cuda/*.cu and the core's k-means sources into test/bin/gpu
#   test      test_kmeans_gpu (GPU vs CPU on fresh random data)
#   sanitize  compute-sanitizer memcheck, initcheck (quick set), racecheck (tiny set)
#   bench     PyTorch baseline (bench_kmeans.py), then bench_kmeans: one table
#             per iteration, one of whole fits (init share, FAISS workload)
#   crossover bench_crossover: CPU vs GPU whole calls, for GC_KMEANS_GPU_MIN_WORK
# DBSCAN (cuda/dbscan.cu), built on their own (no k-means objects needed):
#   dbscan-build     compile cuda/device.cu, cuda/dbscan.cu and the CPU DBSCAN
#                    (DB_GENCODE overrides the targets, e.g. sm_90 alone)
#   dbscan-test      test_dbscan_gpu: GPU labels and core flags = CPU's
#   dbscan-sanitize  compute-sanitizer memcheck (quick set), racecheck (tiny)
#   dbscan-bench     bench_dbscan_gpu: GPU vs CPU table (BENCH_ONLY=A,B,...)
# Logs go to $OUT (when set) or test/out.  Exit status: nonzero if any stage
# failed.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUTDIR=${OUT:-test/out}
mkdir -p "$OUTDIR" test/bin/gpu
B=test/bin/gpu
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
NVCC=${NVCC:-$CUDA_HOME/bin/nvcc}
NVCC_FLAGS="-O3 -std=c++17 -Xcompiler -fPIC -fmad=false \
  -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 \
  -gencode arch=compute_90,code=compute_90"
CFLAGS="-std=gnu11 -O3 -g -Wall -fopenmp -ffp-contract=off -fno-math-errno -DGPUCLUST_CUDA -Isrc/core -Itest/unit"
LIBS="-L$CUDA_HOME/lib64 -lcudart_static -ldl -lrt -lpthread -lstdc++ -lm -fopenmp"
CORE=$(echo src/core/*.c)
stages=${*:-build test}
rc=0

for s in $stages; do
case $s in
build)
	echo "== build"
	cuobjs=""
	for f in cuda/*.cu; do
		o=$B/cu_$(basename "$f" .cu).o; cuobjs="$cuobjs $o"
		"$NVCC" $NVCC_FLAGS -Xptxas -v -c "$f" -o "$o" > "$OUTDIR/ptxas_$(basename "$f" .cu).log" 2>&1 &
	done
	objs=""
	for f in $CORE; do
		o=$B/$(basename "$f" .c).o; objs="$objs $o"
		gcc $CFLAGS -c "$f" -o "$o" &
	done
	wait
	for f in cuda/*.cu; do
		if grep -q -i "error" "$OUTDIR/ptxas_$(basename "$f" .cu).log"; then
			cat "$OUTDIR/ptxas_$(basename "$f" .cu).log"; rc=1
		fi
	done
	gcc $CFLAGS -o $B/test_kmeans_gpu test/gpu/test_kmeans_gpu.c $objs $cuobjs $LIBS || rc=1
	gcc $CFLAGS -o $B/bench_kmeans test/gpu/bench_kmeans.c $cuobjs $objs -I$CUDA_HOME/include $LIBS || rc=1
	gcc $CFLAGS -o $B/bench_crossover test/gpu/bench_crossover.c $cuobjs $objs $LIBS || rc=1
	;;
test)
	echo "== test"
	$B/test_kmeans_gpu 2>&1 | tee "$OUTDIR/test_kmeans_gpu.log" || rc=1
	;;
sanitize)
	echo "== compute-sanitizer (quick set)"
	for tool in memcheck racecheck initcheck; do
		q=1; [ $tool = racecheck ] && q=2
		GPUCLUST_TEST_QUICK=$q timeout ${SANITIZE_TIMEOUT:-150} compute-sanitizer --tool $tool --error-exitcode 3 \
			$B/test_kmeans_gpu > "$OUTDIR/sanitize_$tool.log" 2>&1
		r=$?
		echo "$tool: exit $r; $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUTDIR/sanitize_$tool.log" | tail -1); $(grep 'passed,' "$OUTDIR/sanitize_$tool.log")"
		[ $r -eq 0 ] || { rc=1; grep -m 20 -E "=========" "$OUTDIR/sanitize_$tool.log"; }
	done
	;;
bench)
	echo "== bench"
	PYTHONUNBUFFERED=1 python3 test/gpu/bench_kmeans.py "$OUTDIR/torch_ms.txt" || echo "(torch baseline failed)"
	$B/bench_kmeans "$OUTDIR/torch_ms.txt" 2>&1 | tee "$OUTDIR/bench.log" || rc=1
	if [ -n "${BENCH_MINB1:-}" ]; then
		echo "-- tiled kernel built for 1 block/SM (GPUCLUST_KM_TILED_MINB=1):"
		GPUCLUST_KM_TILED_MINB=1 $B/bench_kmeans "$OUTDIR/torch_ms.txt" 2>&1 | grep tiled | tee "$OUTDIR/bench_minb1.log"
	fi
	;;
crossover)
	echo "== crossover"
	$B/bench_crossover 2>&1 | tee "$OUTDIR/crossover.log" || rc=1
	;;
dbscan-build)
	echo "== dbscan-build"
	DB_GENCODE=${DB_GENCODE:-"-gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90"}
	DBCORE="src/core/common.c src/core/dbscan.c src/core/dbscan_grid.c src/core/dbscan_kdtree.c src/core/kdtree.c src/core/radix_sort.c"
	dbcu=""
	for f in cuda/device.cu cuda/dbscan.cu; do
		o=$B/dbcu_$(basename "$f" .cu).o; dbcu="$dbcu $o"
		"$NVCC" -O3 -std=c++17 -Xcompiler -fPIC -fmad=false $DB_GENCODE -Xptxas -v -c "$f" -o "$o" > "$OUTDIR/ptxas_db_$(basename "$f" .cu).log" 2>&1 &
	done
	dbobjs=""
	for f in $DBCORE; do
		o=$B/db_$(basename "$f" .c).o; dbobjs="$dbobjs $o"
		gcc $CFLAGS -c "$f" -o "$o" &
	done
	wait
	for f in cuda/device.cu cuda/dbscan.cu; do
		if grep -q -i "error" "$OUTDIR/ptxas_db_$(basename "$f" .cu).log"; then
			cat "$OUTDIR/ptxas_db_$(basename "$f" .cu).log"; rc=1
		fi
	done
	gcc $CFLAGS -o $B/test_dbscan_gpu test/gpu/test_dbscan_gpu.c $dbobjs $dbcu $LIBS || rc=1
	gcc $CFLAGS -o $B/bench_dbscan_gpu test/gpu/bench_dbscan_gpu.c $dbobjs $dbcu $LIBS || rc=1
	;;
dbscan-test)
	echo "== dbscan-test"
	# a time limit: a hang (the grid path once hung in its union-find) must
	# not take the whole device session with it
	timeout ${DB_TEST_TIMEOUT:-300} $B/test_dbscan_gpu > "$OUTDIR/test_dbscan_gpu.log" 2>&1
	r=$?; [ $r -eq 0 ] || { rc=1; echo "test_dbscan_gpu: exit $r (124: timed out)"; }
	grep -E "FAIL|passed|cases|seed|device" "$OUTDIR/test_dbscan_gpu.log" | head -40
	;;
dbscan-sanitize)
	echo "== dbscan compute-sanitizer"
	for tool in memcheck racecheck; do
		q=1; [ $tool = racecheck ] && q=2
		GPUCLUST_TEST_QUICK=$q timeout ${SANITIZE_TIMEOUT:-150} compute-sanitizer --tool $tool --error-exitcode 3 \
			$B/test_dbscan_gpu > "$OUTDIR/sanitize_db_$tool.log" 2>&1
		r=$?
		echo "$tool: exit $r; $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUTDIR/sanitize_db_$tool.log" | tail -1); $(grep 'passed,' "$OUTDIR/sanitize_db_$tool.log")"
		[ $r -eq 0 ] || { rc=1; grep -m 20 -E "=========|FAIL" "$OUTDIR/sanitize_db_$tool.log"; }
	done
	;;
dbscan-bench)
	echo "== dbscan-bench"
	timeout ${DB_BENCH_TIMEOUT:-300} $B/bench_dbscan_gpu 2>&1 | tee "$OUTDIR/bench_dbscan.log" || rc=1
	;;
*)
	echo "unknown stage $s"; rc=1;;
esac
done
exit $rc
