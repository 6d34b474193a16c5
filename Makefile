# gpuclust — PGXS build.
#   make                 build (with CUDA when nvcc is found)
#   make USE_CUDA=0      CPU-only build
#   make install         install into the server of pg_config
#   make unit            build and run the core's unit tests (no server)
#   make installcheck    pg_regress against a running server
#   make gpu-check       GPU tests, compute-sanitizer (needs a GPU, no server)
#   make gpu-bench       GPU benchmarks (needs a GPU, no server)

# gpuclust_postgis: PostGIS points as features (SQL only, requires postgis;
# gpuclust itself does not)
EXTENSION   = gpuclust gpuclust_postgis
MODULE_big  = gpuclust
DATA        = $(wildcard $(foreach e,$(EXTENSION),sql/$(e)--*.sql))
REGRESS     = $(patsubst sql/%.sql,%,$(filter-out $(DATA),$(wildcard sql/*.sql)))
REGRESS_OPTS = --inputdir=. --outputdir=test/regress_out

# The core (src/core): one folder per algorithm plus common/; its headers
# are included by path from src/core ("common/metric.h", "kmeans/kmeans.h").
CORE_SRCS   = $(wildcard src/core/*/*.c)
CORE_HDRS   = $(wildcard src/core/*.h src/core/*/*.h)
# The glue: the module (src/gpuclust.c) and its folders (src/common, the
# algorithms, src/distributed, src/worker); src/core is the core's.
GLUE_SRCS   = src/gpuclust.c $(filter-out src/core/%,$(wildcard src/*/*.c))
GLUE_HDRS   = $(filter-out src/core/%,$(wildcard src/*/*.h))
CORE_OBJS   = $(CORE_SRCS:.c=.o)
OBJS        = $(GLUE_SRCS:.c=.o) $(CORE_OBJS)

# CUDA: nvcc found on PATH or in $(CUDA_HOME), and its static runtime
# (libcudart_static.a) found beside it; otherwise a CPU-only build.
# USE_CUDA=0 forces CPU-only.
-include config.mk   # written by test/lib/setup.sh when a CUDA build failed
CUDA_HOME  ?= /usr/local/cuda
NVCC       ?= $(realpath $(firstword $(shell command -v nvcc 2>/dev/null) $(wildcard $(CUDA_HOME)/bin/nvcc)))
CUDA_ROOTS  = $(CUDA_HOME) $(if $(NVCC),$(abspath $(dir $(NVCC))..))
CUDART_A   ?= $(firstword $(realpath $(foreach r,$(CUDA_ROOTS),$(foreach l,lib64 lib targets/x86_64-linux/lib targets/sbsa-linux/lib,$(r)/$(l)/libcudart_static.a))))
CUDART_LINKS = $(if $(CUDART_A),$(shell printf 'int cudaGetDeviceCount(int *);int main(void){int n;return cudaGetDeviceCount(&n);}' | \
                 $(CC) -x c - -o /dev/null -L$(dir $(CUDART_A)) -lcudart_static -ldl -lrt -lpthread -lstdc++ >/dev/null 2>&1 && echo yes))
ifeq ($(USE_CUDA),0)
# CPU-only by request: nothing to probe
else ifeq ($(NVCC),)
USE_CUDA    = 0
else ifeq ($(CUDART_LINKS),)
$(warning gpuclust: nvcc found at $(NVCC) but its static runtime ($(or $(CUDART_A),libcudart_static.a: not found)) does not link; building CPU-only)
USE_CUDA    = 0
else
USE_CUDA   ?= 1
endif
ifeq ($(USE_CUDA),1)
CUDA_LIB    = $(dir $(CUDART_A))
# cuda/: common/ (device, transfers, checks) and one folder per algorithm.
# Test-only: the entry points (*_hooks.cu) and the brute-force DBSCAN that
# only dbscan_hooks.cu reaches; linked into the GPU tests, never the extension.
CU_TEST_SRCS = $(wildcard cuda/*/*_hooks.cu) cuda/dbscan/dbscan_brute.cu
CU_SRCS     = $(filter-out $(CU_TEST_SRCS),$(wildcard cuda/*/*.cu))
CU_OBJS     = $(CU_SRCS:.cu=.o)
CU_HOOK_OBJS = $(CU_TEST_SRCS:.cu=.o)
OBJS       += $(CU_OBJS)
GC_CUDA_DEF = -DGPUCLUST_CUDA
# The one place the CUDA flags are set, for the extension and the GPU tests
# alike.  -fmad=false: no FMA contraction, so the GPU decides dist² <= eps²
# as the CPU does.  Machine code for CUDA_ARCHS (default sm_80 and sm_90a:
# Hopper's own features, wgmma, run only on H100/H200) plus PTX of the last
# without the "a" for later GPUs; NVCC_EXTRA adds flags (-Xptxas -v).
CUDA_ARCHS ?= 80 90a
CUDA_PTX    = $(subst a,,$(lastword $(CUDA_ARCHS)))
NVCC_FLAGS  = -O3 -std=c++17 -Xcompiler -fPIC -fmad=false -DGPUCLUST_CUDA -Isrc/core -Icuda \
              $(foreach a,$(CUDA_ARCHS),-gencode arch=compute_$(a),code=sm_$(a)) \
              -gencode arch=compute_$(CUDA_PTX),code=compute_$(CUDA_PTX) \
              $(NVCC_EXTRA)
# Static runtime: the library loads on servers with no CUDA installed.
CUDA_LINK   = -L$(CUDA_LIB) -lcudart_static -ldl -lrt -lpthread -lstdc++
endif

# -ffp-contract=off: no FMA, so CPU and GPU decide dist² <= eps² alike.
GC_CFLAGS   = -O3 -fopenmp -ffp-contract=off -fno-math-errno $(GC_CUDA_DEF)
PG_CFLAGS   = $(GC_CFLAGS) -Wno-declaration-after-statement
# Headers by path: the glue's from src ("common/...", "worker/...",
# "core/..."), the core's from src/core ("common/metric.h"); no glue header
# shares a core header's name (test/install/check_includes.sh).
PG_CPPFLAGS += -I$(srcdir)/src -I$(srcdir)/src/core
# make GC_TESTING=1: an extension with its test-only switches
# (gpuclust.gpu_worker_emulate), for the suites that need them; never a
# product build.
ifeq ($(GC_TESTING),1)
PG_CPPFLAGS += -DGC_TESTING
endif
SHLIB_LINK  = -fopenmp $(CUDA_LINK)
EXTRA_CLEAN = $(CU_OBJS) $(CU_HOOK_OBJS) test/regress_out test/bin

# No LLVM bitcode (it needs clang and cannot cover the CUDA objects).
override with_llvm = no

# Goals that need no PostgreSQL (the core's tests, the GPU tests and
# benchmarks, the CLI) run without PGXS: on a GPU machine with no server.
STANDALONE_GOALS = config unit unit-sanitize cli gpu-build gpu-check gpu-bench
ifneq ($(MAKECMDGOALS),)
ifeq ($(filter-out $(STANDALONE_GOALS) test/bin/% cuda/%,$(MAKECMDGOALS)),)
NO_PGXS     = 1
endif
endif
ifndef NO_PGXS
PG_CONFIG  ?= pg_config
PGXS       := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)
endif

cuda/%.o: cuda/%.cu $(wildcard cuda/*/*.cuh) $(CORE_HDRS)
	$(NVCC) $(NVCC_FLAGS) -c $< -o $@

# What this build uses (printed by test/lib/setup.sh).
.PHONY: config
config:
	@echo "gpuclust build: USE_CUDA=$(USE_CUDA) nvcc=$(or $(NVCC),none) cudart=$(or $(CUDART_A),none)"

# (the CUDA objects depend on the core's headers only: their rule above)
$(GLUE_SRCS:.c=.o): $(CORE_HDRS) $(GLUE_HDRS)
$(CORE_OBJS): $(CORE_HDRS)

# ---- core unit tests and the command-line driver (no PostgreSQL) ----
# GC_TESTING: the test-only entry points and switches (never in the extension).
TEST_CC     = $(CC) -std=gnu11 -Wall -Wextra -g $(GC_CFLAGS) -DGC_TESTING -Isrc/core
TEST_LIBS   = -fopenmp -lm $(CUDA_LINK)
UNIT_SRCS   = $(wildcard test/unit/test_*.c)
UNIT_BINS   = $(patsubst test/unit/%.c,test/bin/%,$(UNIT_SRCS))
CORE_TOBJS  = $(patsubst src/core/%.c,test/bin/core/%.o,$(CORE_SRCS))
CORE_ALL    = $(CORE_TOBJS) $(if $(filter 1,$(USE_CUDA)),$(CU_OBJS))

test/bin/core/%.o: src/core/%.c $(CORE_HDRS)
	@mkdir -p $(dir $@)
	$(TEST_CC) -c -o $@ $<

test/bin/%: test/unit/%.c test/unit/testutil.h $(CORE_ALL) $(CORE_HDRS)
	@mkdir -p test/bin
	$(TEST_CC) -o $@ $< $(CORE_ALL) $(TEST_LIBS)

test/bin/gpuclust-cli: test/cli/gpuclust_cli.c $(CORE_ALL) $(CORE_HDRS)
	@mkdir -p test/bin
	$(TEST_CC) -o $@ $< $(CORE_ALL) $(TEST_LIBS)

# ---- GPU tests and benchmarks (a GPU, no PostgreSQL) ----
# Built from the extension's own objects (cuda/*/*.o, NVCC_FLAGS above), the
# test-only code (CU_TEST_SRCS, same flags) and the core;
# test/gpu/run_gpu_tests.sh runs them (stages: see that file).
GPU_BINS    = $(patsubst test/gpu/%.c,test/bin/gpu/%,$(wildcard test/gpu/*.c))

test/bin/gpu/%: test/gpu/%.c test/unit/testutil.h $(wildcard test/gpu/*.h) $(CORE_ALL) $(CU_HOOK_OBJS) $(CORE_HDRS)
	@mkdir -p test/bin/gpu
	$(TEST_CC) -Itest/unit -I$(CUDA_HOME)/include -o $@ $< $(CORE_ALL) $(CU_HOOK_OBJS) $(TEST_LIBS)

# The CUPTI tracer (test/gpu/trace/, loaded through CUDA_INJECTION64_PATH),
# built by gpu-build where $(CUDA_HOME) has CUPTI; a toolkit without it
# builds the rest.  It finds libcupti beside itself first, then in the
# toolkit.
CUPTI_H     = $(firstword $(wildcard $(foreach i,include extras/CUPTI/include,$(CUDA_HOME)/$(i)/cupti.h)))
CUPTI_SO    = $(firstword $(wildcard $(foreach l,lib64 lib extras/CUPTI/lib64,$(CUDA_HOME)/$(l)/libcupti.so)))
GPU_TRACE   = $(if $(and $(CUPTI_H),$(CUPTI_SO)),test/bin/gpu/libgc_cupti_trace.so)

test/bin/gpu/libgc_cupti_trace.so: test/gpu/trace/cupti_trace.c
	@mkdir -p test/bin/gpu
	$(CC) -O2 -Wall -shared -fPIC -I$(dir $(CUPTI_H)) -o $@ $< \
		-L$(dir $(CUPTI_SO)) -Wl,-rpath,'$$ORIGIN':$(dir $(CUPTI_SO)) -lcupti

.PHONY: gpu-build gpu-check gpu-bench
ifeq ($(USE_CUDA),1)
gpu-build: $(GPU_BINS) $(GPU_TRACE)
else
gpu-build:
	@echo "gpu-build: this build has no CUDA (make config says why)"; exit 1
endif
gpu-check: gpu-build
	test/gpu/run_gpu_tests.sh test dbscan-test sanitize
gpu-bench: gpu-build
	test/gpu/run_gpu_tests.sh bench dbscan-bench crossover

.PHONY: unit unit-sanitize cli
cli: test/bin/gpuclust-cli
unit: $(UNIT_BINS)
	@set -e; for t in $(UNIT_BINS); do echo "== $$t"; ./$$t; done

# The same tests, CPU core only, under AddressSanitizer (leaks included) and
# UndefinedBehaviorSanitizer; any report fails the run.
ASAN_BINS   = $(patsubst test/unit/%.c,test/bin/asan/%,$(UNIT_SRCS))
test/bin/asan/%: test/unit/%.c test/unit/testutil.h $(CORE_SRCS) $(CORE_HDRS)
	@mkdir -p test/bin/asan
	$(CC) -std=gnu11 -Wall -Wextra -g -O1 -fopenmp -ffp-contract=off -fno-math-errno -DGC_TESTING \
		-fsanitize=address,undefined -fno-sanitize-recover=undefined -Isrc/core \
		-o $@ $< $(CORE_SRCS) -lm
# LeakSanitizer needs ptrace, which some containers deny: probe it first.
unit-sanitize: $(ASAN_BINS)
	@set -e; leaks=1; \
	printf 'int main(void){return 0;}' | $(CC) -x c - -fsanitize=address -o test/bin/asan/lsan_probe; \
	ASAN_OPTIONS=detect_leaks=1 test/bin/asan/lsan_probe >/dev/null 2>&1 || \
		{ leaks=0; echo "(LeakSanitizer cannot run here: leak checks off)"; }; \
	for t in $(ASAN_BINS); do echo "== $$t"; \
		ASAN_OPTIONS=detect_leaks=$$leaks UBSAN_OPTIONS=print_stacktrace=1 ./$$t; done
