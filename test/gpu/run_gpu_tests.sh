#!/bin/bash
# The GPU tests and benchmarks, on a machine with a GPU (no PostgreSQL).
# The binaries come from the Makefile (make gpu-build: the extension's own
# cuda/*.o, built with its NVCC_FLAGS, linked with the core).  Stages, in
# the order given (default: build test dbscan-test):
#   build            make gpu-build (ptxas report in $OUT/build.log);
#                    CUDA_ARCHS=90 builds sm_90 only
#   test             test_kmeans_gpu: GPU vs CPU on fresh random data, the
#                    labels suite (gc_kmeans_labels_gpu, kmeans_step's GPU
#                    labels) and the multi suite (fits split over two or
#                    three GPUs = one GPU's; GPU 0 twice on a machine of
#                    one) included; KM_SUITES="labels multi" runs only the
#                    suites named
#   dbscan-test      test_dbscan_gpu: labels and core flags = CPU's, once
#                    per seed in DB_SEEDS (default: one fresh seed); every
#                    index (grid, tree, brute force) and both algorithms
#                    (union-find, DClust); the pinned ring's round trips
#                    (cuda/common/transfer.cu); the multi suite (calls
#                    split over two or three GPUs = the CPU; GPU 0 for
#                    every slab on a machine of one); ~60 s a seed;
#                    DB_SUITES=multi runs that suite alone
#   hdbscan-test     test_hdbscan_gpu: HDBSCAN's GPU phases (core distances,
#                    the spanning tree's edges) = the CPU's bit for bit and
#                    the brute force's on small cases; the single-linkage
#                    and condensed trees = the CPU's on random spanning
#                    trees; whole calls = the CPU's; memory, cancel (also
#                    raised while a kernel runs, timed), progress; about 1
#                    minute
#   ap-test          test_ap_gpu: affinity propagation, float8 = CPU bit for
#                    bit, float4 = its sequential reference, float4 against
#                    float8 with the ties named; calls split over two or
#                    three GPUs = one GPU's (its multi suite)
#   tools-test       test_kdistance_gpu and test_silhouette_gpu: the GPU's
#                    k-distances and silhouettes against the CPU's, bit
#                    for bit, on fresh random data
#   sanitize         compute-sanitizer memcheck, initcheck, synccheck and
#                    racecheck (SANITIZE_TOOLS) over the quick sets of
#                    SANITIZE_BINS (default every test; racecheck: tiny sets;
#                    test_kmeans_gpu's quick sets hold the labels suite's;
#                    SANITIZE_KM_SUITES="labels": test_kmeans_gpu runs only
#                    those suites)
#   bench            k-means per iteration (issue 13's table, with FP32,
#                    TF32 and memory rooflines) and whole fits: the
#                    baselines on the same data (bench_kmeans.py: PyTorch,
#                    and flash-kmeans fp32/fp16 when .vendor/flash_kmeans
#                    was carried: test/gpu/fetch_vendor.sh makes it here;
#                    carry [".vendor"]), then bench_kmeans.  About 2-4
#                    minutes; at most KM_BASELINE_TIMEOUT (200) +
#                    KM_BENCH_TIMEOUT (220) s
#   kf-bench         bench_kmeans_features: whole k-means fits with sample
#                    weights, cosine and given centres, GPU vs CPU, then
#                    bench_kmeans_features.py (scikit-learn, PyTorch) on
#                    the same rows (BENCH_KF_N, _D, _K, _ITERS)
#   tools-bench      bench_tools: gpu_kdistance's and gpu_silhouette's cores,
#                    GPU vs CPU, then bench_tools.py (scikit-learn's
#                    NearestNeighbors and silhouette_score, PyTorch) on the
#                    same rows
#   ap-bench         bench_ap_gpu: affinity propagation per iteration (5k
#                    to the largest n that fits, float8 and float4, bytes
#                    rooflines; BENCH_AP_N, BENCH_AP_KEEP) and whole
#                    calls CPU vs GPU; then bench_ap_sklearn.py
#                    (scikit-learn per iteration; AP_SKLEARN_N, default
#                    "5000 10000 20000")
#   hdbscan-bench    bench_hdbscan: whole HDBSCAN calls GPU vs CPU (110k,
#                    1M, 10M x 2, 1M x 16, the 10M spanning tree), phases,
#                    memory, floors, the crossover; then bench_hdbscan
#                    --trace (each Borůvka round, in
#                    bench_hdbscan_trace.log); about 3-4 minutes
#   dbscan-bench     bench_dbscan_gpu: GPU vs CPU table, rows A-G, X, Z
#                    (BENCH_ONLY=A,B,...; Y, the brute force, only when
#                    named; BENCH_C_BRUTE=1 adds the brute force to C;
#                    BENCH_GPU=0 times the CPU alone); ~2.5-3 minutes
#   db-multi-bench   bench_dbscan_multi: the host's links to the GPUs
#                    first (pinned copies and rings, each GPU alone and all
#                    at once), then one DBSCAN call on GPU 0 against
#                    the same call split over every GPU (two slabs on GPU 0
#                    on a machine of one), whole calls, results checked
#                    equal (DB_MULTI_BENCH_ARGS="n d ..." to change the
#                    cases); 10M to 200M rows
#   crossover        bench_crossover: CPU vs GPU k-means whole calls
#   multi-bench      bench_kmeans_multi: one k-means fit on GPU 0 against
#                    the same fit split over every GPU (two shards on GPU 0
#                    on a machine of one), whole calls, results checked
#                    equal (MULTI_BENCH_ARGS="n d k iters ..." to change
#                    the cases); about 3 minutes on two H200s
#   stream-bench     bench_kmeans_stream: k-means on data larger than the
#                    GPU (640M x 32 float32 = 82 GB in host memory, streamed
#                    in chunks): rows/s per iteration, H2D GB/s vs pinned
#                    (STREAM_BENCH_ARGS="n d k iters" to change it), then
#                    flash-kmeans's kmeans_largeN on the same shape
#                    (bench_kmeans_largeN.py; .vendor carried)
#   sql              test/gpu/sql_gpu_test.sh in a real server started from
#                    .carry/ (../shared/tools/pg-bundle make .carry, after
#                    make install, then carry .carry), gpuclust preloaded
#                    so that the GPU worker runs every GPU call
#                    (SQL_PRELOAD=0: not preloaded, contexts per backend)
#   sql-bench        test/gpu/sql_kmeans_timing.sh in that server: gpu_kmeans
#                    on 1M rows x 32, k = 100, 3 calls on 'gpu' and one on
#                    'cpu', log_timing's ingest / upload / init / Lloyd /
#                    download / emit as a table
#   worker           test/server/worker_test.py --gpu in that server: the worker's
#                    hand-off, queue, cancellation and failures on the GPU;
#                    on a machine of several GPUs the worker owns
#                    WORKER_DEVICES (default '0'), as its queue checks are
#                    one GPU's (gpus covers several)
#   gpus             test/server/gpus_test.py --gpu in that server, preloaded:
#                    the GPUs of its default gpuclust.gpu_devices (every one
#                    present), then, after a restart, those of
#                    GPUS_DEVICES (default '0,1': on a machine of one GPU,
#                    GPU 1 missing, 'unusable', while GPU 0 serves);
#                    psycopg from .carry/py, as dbdist
#   faults           test/server/fault_test.py --gpu in that server: a client
#                    killed mid-call (k-means, affinity propagation on
#                    device 'gpu'): its backend ends within
#                    client_connection_check_interval + 1 s
#   worker-bench     test/gpu/bench_worker.py: 16 sessions, first-call
#                    latency and idle GPU memory, worker vs per-backend
#   gpus-bench       test/gpu/bench_gpus.py: 16 sessions with each
#                    gpuclust.gpu_devices value of GPUS_BENCH_DEVICES
#                    (default "0 0,1") on two loads, bench_worker.py's
#                    (host-bound) and affinity propagation (GPU-bound):
#                    the sessions' ingest / compute / emit, each GPU's
#                    share busy, the throughput against the first value's,
#                    and the most any number of GPUs could give on the
#                    first (its sessions' own host work against its wall)
#   dbdist           test/distributed/dbscan_distributed_test.py in that server:
#                    gpu_dbscan_distributed with its partitions' runs on the
#                    GPU (device => 'gpu') = gpu_dbscan on the CPU, serial
#                    and under parallel query; then --bench DBDIST_BENCH_N
#                    (default 10,000,000) rows of 2 features.  The machine
#                    has no psycopg: carry Debian's (python3-psycopg 3.1,
#                    pure Python) under .carry/py, with PYTHONPATH there and
#                    LD_LIBRARY_PATH=/opt/pgb/syslib (the bundle's libpq;
#                    2026-11-25 its loader was pointed at
#                    /opt/pgb/syslib/libpq.so.5 explicitly)
#   kagg             test/distributed/kmeans_distributed_test.py --device gpu in that
#                    server (kmeans_step's blocks labelled by the GPU worker),
#                    then test/gpu/bench_kmeans_step.py (KAGG_BENCH_ROWS rows,
#                    default 10,000,000, of 32 features, k = 100): the
#                    aggregate on the CPU and the GPU, serial and parallel,
#                    against gpu_kmeans_fit and PyTorch; then KAGG_BENCH2_ROWS
#                    (default 2,000,000) rows of 128 features, k = 1000, 2
#                    iterations, where the labelling dominates; same psycopg
#                    as dbdist
#   hdbscan-sklearn  test/gpu/compare_hdbscan_sklearn.py in that server:
#                    gpu_hdbscan and gpu_minimum_spanning_tree on 'cpu' and
#                    'gpu' against scikit-learn's HDBSCAN (1.3 or later) on
#                    fresh random cases (the seed printed;
#                    HDBSCAN_CMP_SEED=N replays it): GPU = CPU bit for bit,
#                    the MST's weights, scikit-learn's tree code on our
#                    MST, gpu_hdbscan_tree = its condensed tree of our
#                    MST row for row, stock HDBSCAN (TIE: a difference that the order of
#                    equal MST weights alone explains).  About 3-4 minutes
#                    (HDBSCAN_CMP_BUDGET_S, 210 s, of scikit-learn at most);
#                    at most HDBSCAN_CMP_TIMEOUT (300) s.  psycopg from
#                    .carry/py, as dbdist
#   hdbscan-sql-bench  test/gpu/bench_hdbscan.py in that server: gpu_hdbscan
#                    on 110k 2-d (the issue's; scikit-learn's HDBSCAN timed
#                    beside it, ~72 s, BENCH_HDBSCAN_SKLEARN=0 leaves it
#                    out), 1M 2-d, 1M 16-d, 10M 2-d (GPU; the CPU with
#                    BENCH_HDBSCAN_CPU_10M=1) and gpu_minimum_spanning_tree
#                    on the 10M rows, whole SQL calls twice each with
#                    log_timing's ingest share, GPU = CPU checked; about 5-6
#                    minutes, at most HDBSCAN_BENCH_TIMEOUT (420) s
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
	local tool=$1 q=$2 bin=$3 log="sanitize_$(basename "$3")_$1.log" args=()
	[ "$bin" = test_kmeans_gpu ] && read -ra args <<< "${SANITIZE_KM_SUITES:-}"
	GPUCLUST_TEST_QUICK=$q run "$log" "${SANITIZE_TIMEOUT:-240}" \
		compute-sanitizer --tool "$tool" --error-exitcode 3 "$B/$bin" "${args[@]}"
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
	# shellcheck disable=SC2086
	run test_kmeans_gpu.log "${KM_TEST_TIMEOUT:-400}" $B/test_kmeans_gpu ${KM_SUITES:-} || rc=1
	grep -E "FAIL|passed|seed|device|  labels:" "$OUTDIR/test_kmeans_gpu.log" | head -20
	;;
dbscan-test)
	echo "== test_dbscan_gpu"
	for seed in ${DB_SEEDS:-fresh}; do
		log=test_dbscan_gpu_$seed.log
		# shellcheck disable=SC2086
		if [ "$seed" = fresh ]; then
			run "$log" "${DB_TEST_TIMEOUT:-300}" $B/test_dbscan_gpu ${DB_SUITES:-}
		else
			run "$log" "${DB_TEST_TIMEOUT:-300}" env GPUCLUST_TEST_SEED=$seed $B/test_dbscan_gpu ${DB_SUITES:-}
		fi
		r=$?; [ $r -eq 0 ] || rc=1
		echo "  exit $r: $(grep -E '^test_dbscan_gpu' "$OUTDIR/$log" | tr '\n' ' ')"
		grep -m 10 "FAIL" "$OUTDIR/$log"
	done
	;;
kf-bench)
	echo "== bench_kmeans_features (weights, cosine, given centres: GPU vs CPU)"
	run bench_kmeans_features.log "${KF_BENCH_TIMEOUT:-300}" $B/bench_kmeans_features /tmp || rc=1
	cat "$OUTDIR/bench_kmeans_features.log"
	echo "== bench_kmeans_features.py (scikit-learn, PyTorch on the same rows)"
	PYTHONUNBUFFERED=1 timeout "${KF_PEERS_TIMEOUT:-300}" python3 test/gpu/bench_kmeans_features.py /tmp \
		"${BENCH_KF_N:-1000000}" "${BENCH_KF_D:-32}" "${BENCH_KF_K:-100}" "${BENCH_KF_ITERS:-20}" \
		2>&1 | tee "$OUTDIR/bench_kmeans_features_peers.log"
	;;
tools-test)
	for t in test_kdistance_gpu test_silhouette_gpu; do
		echo "== $t"
		run $t.log "${TOOLS_TEST_TIMEOUT:-300}" $B/$t || rc=1
		grep -E "FAIL|passed|seed|device" "$OUTDIR/$t.log" | head -20
	done
	;;
tools-bench)
	echo "== bench_tools (k-distances and silhouette: GPU vs CPU)"
	run bench_tools.log "${TOOLS_BENCH_TIMEOUT:-300}" $B/bench_tools /tmp || rc=1
	cat "$OUTDIR/bench_tools.log"
	echo "== bench_tools.py (scikit-learn, PyTorch on the same rows)"
	PYTHONUNBUFFERED=1 timeout "${TOOLS_PEERS_TIMEOUT:-300}" python3 test/gpu/bench_tools.py /tmp \
		2>&1 | tee "$OUTDIR/bench_tools_peers.log"
	;;
hdbscan-test)
	echo "== test_hdbscan_gpu"
	run test_hdbscan_gpu.log "${HD_TEST_TIMEOUT:-300}" $B/test_hdbscan_gpu || rc=1
	grep -E "FAIL|passed|seed|  [a-z0-9]" "$OUTDIR/test_hdbscan_gpu.log" | head -40
	;;
hdbscan-bench)
	echo "== bench_hdbscan"
	timeout "${HD_BENCH_TIMEOUT:-400}" $B/bench_hdbscan 2>&1 | tee "$OUTDIR/bench_hdbscan.log"
	[ "${PIPESTATUS[0]}" -eq 0 ] || rc=1
	echo "== bench_hdbscan --trace (stderr: $OUTDIR/bench_hdbscan_trace.log)"
	timeout "${HD_TRACE_TIMEOUT:-120}" $B/bench_hdbscan --trace 2> "$OUTDIR/bench_hdbscan_trace.log" || rc=1
	grep -E "^==|round|tree" "$OUTDIR/bench_hdbscan_trace.log" | head -60
	;;
ap-test)
	echo "== test_ap_gpu"
	run test_ap_gpu.log "${AP_TEST_TIMEOUT:-300}" $B/test_ap_gpu || rc=1
	grep -E "FAIL|passed|seed|float4" "$OUTDIR/test_ap_gpu.log" | head -30
	;;
ap-bench)
	echo "== bench_ap_gpu"
	timeout "${AP_BENCH_TIMEOUT:-300}" $B/bench_ap_gpu 2>&1 | tee "$OUTDIR/bench_ap.log" || rc=1
	echo "== bench_ap_sklearn.py"
	PYTHONUNBUFFERED=1 timeout "${AP_SKLEARN_TIMEOUT:-240}" python3 test/gpu/bench_ap_sklearn.py ${AP_SKLEARN_N:-5000 10000 20000} \
		2>&1 | tee "$OUTDIR/bench_ap_sklearn.log"
	;;
sanitize)
	echo "== compute-sanitizer"
	for bin in ${SANITIZE_BINS:-test_kmeans_gpu test_dbscan_gpu test_ap_gpu test_kdistance_gpu test_silhouette_gpu test_hdbscan_gpu}; do
		for tool in ${SANITIZE_TOOLS:-memcheck initcheck synccheck racecheck}; do
			q=1; [ $tool = racecheck ] && q=2
			sanitize $tool $q $bin || rc=1
		done
	done
	;;
bench)
	echo "== bench_kmeans: baselines (bench_kmeans.py; $OUTDIR/baselines.txt)"
	if [ -f .vendor/flash_kmeans/VERSION ]; then
		echo "  $(cat .vendor/flash_kmeans/VERSION) from .vendor"
	else
		echo "  flash-kmeans not carried (test/gpu/fetch_vendor.sh, then carry .vendor)"
	fi
	PYTHONUNBUFFERED=1 timeout "${KM_BASELINE_TIMEOUT:-200}" python3 test/gpu/bench_kmeans.py "$OUTDIR/baselines.txt" \
		2>&1 | tee "$OUTDIR/bench_baselines.log"
	r=${PIPESTATUS[0]}
	[ $r -eq 0 ] || echo "  (baselines: exit $r$([ $r -eq 124 ] && echo ", timed out after ${KM_BASELINE_TIMEOUT:-200}s"); the table shows what they wrote)"
	echo "== bench_kmeans"
	timeout "${KM_BENCH_TIMEOUT:-220}" $B/bench_kmeans "$OUTDIR/baselines.txt" 2>&1 | tee "$OUTDIR/bench.log"
	r=${PIPESTATUS[0]}
	[ $r -eq 0 ] || { echo "  (bench_kmeans: exit $r$([ $r -eq 124 ] && echo ", timed out after ${KM_BENCH_TIMEOUT:-220}s"))"; rc=1; }
	;;
dbscan-bench)
	echo "== bench_dbscan_gpu"
	timeout "${DB_BENCH_TIMEOUT:-400}" $B/bench_dbscan_gpu 2>&1 | tee "$OUTDIR/bench_dbscan.log" || rc=1
	;;
multi-bench)
	echo "== bench_kmeans_multi"
	# shellcheck disable=SC2086
	timeout "${MULTI_BENCH_TIMEOUT:-300}" $B/bench_kmeans_multi ${MULTI_BENCH_ARGS:-} 2>&1 |
		tee "$OUTDIR/bench_kmeans_multi.log"
	[ "${PIPESTATUS[0]}" -eq 0 ] || rc=1
	;;
db-multi-bench)
	echo "== bench_dbscan_multi"
	# shellcheck disable=SC2086
	timeout "${DB_MULTI_BENCH_TIMEOUT:-300}" $B/bench_dbscan_multi ${DB_MULTI_BENCH_ARGS:-} 2>&1 |
		tee "$OUTDIR/bench_dbscan_multi.log"
	[ "${PIPESTATUS[0]}" -eq 0 ] || rc=1
	;;
crossover)
	echo "== bench_crossover"
	timeout 400 $B/bench_crossover 2>&1 | tee "$OUTDIR/crossover.log" || rc=1
	;;
stream-bench)
	echo "== bench_kmeans_stream"
	# shellcheck disable=SC2086
	timeout "${STREAM_BENCH_TIMEOUT:-240}" $B/bench_kmeans_stream ${STREAM_BENCH_ARGS:-} 2>&1 |
		tee "$OUTDIR/bench_stream.log" || rc=1
	# flash-kmeans's streamed kmeans_largeN on the same shape (when carried)
	# shellcheck disable=SC2086
	timeout "${STREAM_BENCH_TIMEOUT:-240}" python3 test/gpu/bench_kmeans_largeN.py \
		${STREAM_BENCH_ARGS:-640000000 32 100 5} 2>&1 | tee -a "$OUTDIR/bench_stream.log"
	;;
sql|sql-bench|worker|gpus|worker-bench|gpus-bench|dbdist|kagg|faults|hdbscan-sklearn|hdbscan-sql-bench)
	# the extension as installed here, in a real server: the bundle made by
	# ../shared/tools/pg-bundle make .carry (after make install), carried,
	# with gpuclust preloaded (its GPU worker on; SQL_PRELOAD=0: not
	# preloaded, each backend its own CUDA context)
	echo "== $s (server from .carry/pg-bundle.tar.xz)"
	if [ ! -f .carry/pg-bundle.tar.xz ]; then
		echo "no .carry/pg-bundle.tar.xz"; rc=1; continue
	fi
	bash .carry/pg-bundle stop >/dev/null 2>&1
	env=$(timeout 120 bash .carry/pg-bundle start .carry) || { echo "$env"; rc=1; continue; }
	ctl="su pgrun -c 'LD_LIBRARY_PATH=/opt/pgb/syslib:/usr/local/cuda/lib64 /opt/pgb/lib/postgresql/15/bin/pg_ctl -D /tmp/pgb-data -w -l /tmp/pgb.log"
	if [ "${SQL_PRELOAD:-1}" = 1 ]; then
		( eval "$env"; psql -X -q -c "ALTER SYSTEM SET shared_preload_libraries = 'gpuclust'" ) &&
			timeout 120 bash -c "$ctl -m fast restart'" >/dev/null || { echo "restart failed"; rc=1; continue; }
	fi
	case $s in
	sql)
		( eval "$env"; timeout "${SQL_TIMEOUT:-540}" test/gpu/sql_gpu_test.sh ) > "$OUTDIR/sql_gpu_test.log" 2>&1
		r=$?
		grep -E "^(ok|FAIL)|sql_gpu_test:|timed out" "$OUTDIR/sql_gpu_test.log";;
	sql-bench)
		( eval "$env"; timeout "${SQL_BENCH_TIMEOUT:-300}" test/gpu/sql_kmeans_timing.sh ) > "$OUTDIR/sql_bench.log" 2>&1
		r=$?
		cat "$OUTDIR/sql_bench.log";;
	faults)
		( eval "$env"; timeout "${FAULTS_TIMEOUT:-120}" python3 test/server/fault_test.py --gpu ) \
			> "$OUTDIR/fault_test.log" 2>&1
		r=$?
		cat "$OUTDIR/fault_test.log";;
	worker)
		# its queue checks are those of one GPU: on a machine of several,
		# the worker owns WORKER_DEVICES (default GPU 0; gpus covers several)
		if [ "$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')" -gt 1 ]; then
			( eval "$env"; psql -X -q -c "ALTER SYSTEM SET gpuclust.gpu_devices = '${WORKER_DEVICES:-0}'" ) &&
				timeout 120 bash -c "$ctl -m fast restart'" >/dev/null || { echo "restart failed"; rc=1; continue; }
		fi
		( eval "$env"; export PYTHONPATH=$PWD/.carry/py${PYTHONPATH:+:$PYTHONPATH}
			timeout "${WORKER_TIMEOUT:-400}" python3 test/server/worker_test.py --gpu \
			--server-log /tmp/pgb.log --stop-cmd "$ctl -m fast stop'" --start-cmd "$ctl -o \"-k /tmp -p 5432 -c listen_addresses=\" start'" ) \
			> "$OUTDIR/worker_test.log" 2>&1
		r=$?
		cat "$OUTDIR/worker_test.log";;
	gpus)
		( eval "$env"; export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/.carry/py${PYTHONPATH:+:$PYTHONPATH}
			timeout "${GPUS_TIMEOUT:-200}" python3 test/server/gpus_test.py --gpu
			t=$?
			psql -X -q -c "ALTER SYSTEM SET gpuclust.gpu_devices = '${GPUS_DEVICES:-0,1}'" &&
				timeout 120 bash -c "$ctl -m fast restart'" >/dev/null || exit 1
			timeout "${GPUS_TIMEOUT:-200}" python3 test/server/gpus_test.py --gpu --devices "${GPUS_DEVICES:-0,1}"
			exit $((t | $?)) ) > "$OUTDIR/gpus_test.log" 2>&1
		r=$?
		cat "$OUTDIR/gpus_test.log";;
	dbdist)
		( eval "$env"; timeout "${DBDIST_TIMEOUT:-300}" python3 test/distributed/dbscan_distributed_test.py --device gpu &&
			timeout "${DBDIST_BENCH_TIMEOUT:-240}" python3 test/distributed/dbscan_distributed_test.py \
				--bench "${DBDIST_BENCH_N:-10000000}" ) > "$OUTDIR/dbdist.log" 2>&1
		r=$?
		grep -E "^(FAIL|INFO  bench)| passed," "$OUTDIR/dbdist.log";;
	kagg)
		( eval "$env"; timeout "${KAGG_TIMEOUT:-240}" python3 test/distributed/kmeans_distributed_test.py --device gpu
			t=$?
			timeout "${KAGG_BENCH_TIMEOUT:-300}" python3 test/gpu/bench_kmeans_step.py \
				--rows "${KAGG_BENCH_ROWS:-10000000}"
			b=$?
			timeout "${KAGG_BENCH_TIMEOUT:-300}" python3 test/gpu/bench_kmeans_step.py \
				--rows "${KAGG_BENCH2_ROWS:-2000000}" --d 128 --k 1000 --iters 2
			exit $((t | b | $?)) ) > "$OUTDIR/kagg.log" 2>&1
		r=$?
		grep -E "^(FAIL|\||  |per pass|gpu_kmeans_distributed)| passed,|rows x" "$OUTDIR/kagg.log";;
	hdbscan-sklearn)
		( eval "$env"; export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/.carry/py${PYTHONPATH:+:$PYTHONPATH}
			timeout "${HDBSCAN_CMP_TIMEOUT:-300}" python3 test/gpu/compare_hdbscan_sklearn.py ) \
			> "$OUTDIR/compare_hdbscan_sklearn.log" 2>&1
		r=$?
		grep -E "^(FAIL|TIE|SKIP)|^compare_hdbscan_sklearn|ties \(" "$OUTDIR/compare_hdbscan_sklearn.log";;
	hdbscan-sql-bench)
		( eval "$env"; export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/.carry/py${PYTHONPATH:+:$PYTHONPATH}
			timeout "${HDBSCAN_BENCH_TIMEOUT:-420}" python3 test/gpu/bench_hdbscan.py ) \
			> "$OUTDIR/bench_hdbscan_sql.log" 2>&1
		r=$?
		cat "$OUTDIR/bench_hdbscan_sql.log";;
	gpus-bench)
		# shellcheck disable=SC2086
		( eval "$env"; export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/.carry/py${PYTHONPATH:+:$PYTHONPATH}
			timeout "${GPUS_BENCH_TIMEOUT:-500}" python3 test/gpu/bench_gpus.py \
				--restart-cmd "$ctl -m fast restart'" --devices ${GPUS_BENCH_DEVICES:-0 0,1} \
				--rounds "${GPUS_BENCH_ROUNDS:-2}" ) > "$OUTDIR/bench_gpus.log" 2>&1
		r=$?
		cat "$OUTDIR/bench_gpus.log";;
	worker-bench)
		( eval "$env"; timeout "${WORKER_BENCH_TIMEOUT:-500}" python3 test/gpu/bench_worker.py \
			--restart-cmd "$ctl -m fast restart'" ) > "$OUTDIR/bench_worker.log" 2>&1
		r=$?
		cat "$OUTDIR/bench_worker.log";;
	esac
	[ $r -eq 0 ] || rc=1
	[ $r -eq 124 ] && echo "$s timed out"
	tail -5 /tmp/pgb.log
	bash .carry/pg-bundle stop >/dev/null 2>&1
	;;
*)
	echo "unknown stage $s"; rc=1;;
esac
done
exit $rc
