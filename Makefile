# gpuclust — PGXS build.
#   make                 build (with CUDA when nvcc is found)
#   make USE_CUDA=0      CPU-only build
#   make install         install into the server of pg_config
#   make unit            build and run the core's unit tests (no server)
#   make installcheck    pg_regress against a running server

EXTENSION   = gpuclust
MODULE_big  = gpuclust
DATA        = $(wildcard sql/gpuclust--*.sql)
REGRESS     = $(patsubst sql/%.sql,%,$(filter-out sql/gpuclust--%,$(wildcard sql/*.sql)))
REGRESS_OPTS = --inputdir=. --outputdir=test/regress_out

CORE_SRCS   = $(wildcard src/core/*.c)
GLUE_SRCS   = $(wildcard src/*.c)
CORE_OBJS   = $(CORE_SRCS:.c=.o)
OBJS        = $(GLUE_SRCS:.c=.o) $(CORE_OBJS)

# CUDA: found on PATH or in /usr/local/cuda, unless USE_CUDA=0.
CUDA_HOME  ?= /usr/local/cuda
NVCC       ?= $(firstword $(shell command -v nvcc 2>/dev/null) $(wildcard $(CUDA_HOME)/bin/nvcc))
ifeq ($(NVCC),)
USE_CUDA   ?= 0
else
USE_CUDA   ?= 1
endif
ifeq ($(USE_CUDA),1)
CUDA_LIB    = $(dir $(NVCC))../lib64
CU_SRCS     = $(wildcard cuda/*.cu)
CU_OBJS     = $(CU_SRCS:.cu=.o)
OBJS       += $(CU_OBJS)
GC_CUDA_DEF = -DGPUCLUST_CUDA
# sm_80 and sm_90 machine code plus sm_90 PTX for later GPUs.
NVCC_FLAGS  = -O3 -std=c++17 -Xcompiler -fPIC -fmad=false \
              -gencode arch=compute_80,code=sm_80 \
              -gencode arch=compute_90,code=sm_90 \
              -gencode arch=compute_90,code=compute_90
# Static runtime: the library loads on servers with no CUDA installed.
CUDA_LINK   = -L$(CUDA_LIB) -lcudart_static -ldl -lrt -lpthread -lstdc++
endif

# -ffp-contract=off: no FMA, so CPU and GPU decide dist² <= eps² alike.
GC_CFLAGS   = -O3 -fopenmp -ffp-contract=off -fno-math-errno $(GC_CUDA_DEF)
PG_CFLAGS   = $(GC_CFLAGS) -Wno-declaration-after-statement
SHLIB_LINK  = -fopenmp $(CUDA_LINK)
EXTRA_CLEAN = $(CU_OBJS) test/regress_out test/bin

# No LLVM bitcode (it needs clang and cannot cover the CUDA objects).
override with_llvm = no

PG_CONFIG  ?= pg_config
PGXS       := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

cuda/%.o: cuda/%.cu $(wildcard cuda/*.h cuda/*.cuh) src/core/gpuclust_core.h src/core/kmeans_internal.h src/core/rng.h
	$(NVCC) $(NVCC_FLAGS) -c $< -o $@

# GPU tests and benchmarks: run on a machine with a GPU (no PostgreSQL needed).
.PHONY: gpu-test gpu-bench
gpu-test:
	test/gpu/run_gpu_tests.sh build test sanitize
gpu-bench:
	test/gpu/run_gpu_tests.sh build bench

$(OBJS): $(wildcard src/core/*.h cuda/*.h src/*.h)

# ---- core unit tests and the command-line driver (no PostgreSQL) ----
TEST_CC     = $(CC) -std=gnu11 -Wall -Wextra -g $(GC_CFLAGS) -Isrc/core
TEST_LIBS   = -fopenmp -lm $(CUDA_LINK)
UNIT_SRCS   = $(wildcard test/unit/test_*.c)
UNIT_BINS   = $(patsubst test/unit/%.c,test/bin/%,$(UNIT_SRCS))
CORE_ALL    = $(CORE_SRCS) $(if $(filter 1,$(USE_CUDA)),$(CU_OBJS))

test/bin/%: test/unit/%.c test/unit/testutil.h $(CORE_ALL) $(wildcard src/core/*.h)
	@mkdir -p test/bin
	$(TEST_CC) -o $@ $< $(CORE_ALL) $(TEST_LIBS)

test/bin/gpuclust-cli: test/cli/gpuclust_cli.c $(CORE_ALL) $(wildcard src/core/*.h)
	@mkdir -p test/bin
	$(TEST_CC) -o $@ $< $(CORE_ALL) $(TEST_LIBS)

.PHONY: unit cli
cli: test/bin/gpuclust-cli
unit: $(UNIT_BINS)
	@set -e; for t in $(UNIT_BINS); do echo "== $$t"; ./$$t; done
