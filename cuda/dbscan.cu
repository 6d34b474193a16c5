/*
 * dbscan.cu — exact DBSCAN on the GPU: gc_dbscan_gpu, with the labels and
 * core flags of gc_dbscan_cpu (src/core/dbscan.c) on every input.
 *
 * The one distance is gc_dist2: float32, sum of squared differences in
 * dimension order, each operation rounded on its own (written here with
 * __fsub_rn / __fmul_rn / __fadd_rn, which are never contracted to FMA,
 * whatever -fmad says), compared with gc_eps2(eps).  Every shortcut below is
 * an exact bound in float (src/core/box_dist.h's argument), so it changes
 * the speed, never the answer.
 *
 * Two indexes:
 *   grid   (d <= 3) the CPU grid's plan (cells of side a little under
 *          R/sqrt(d), R bounding |a_j - b_j| of any two neighbours, so a
 *          neighbour is at most 2 cells away per dimension and a cell's
 *          points whose box has gc_dist2(lo, hi) <= eps2 are mutual
 *          neighbours: "dense").  Cell keys in double, points sorted by key
 *          with CUB's radix sort; cells found by a scan; neighbour cells
 *          through a key -> cell table (key space <= 8n) or a binary search.
 *          One thread per point for core (stops at min_pts; a dense cell
 *          with >= min_pts points is all core), union and border.
 *   brute  (d > 3, or the grid's key space overflows) tiled all-pairs:
 *          128 query rows per block against shared-memory tiles of 32
 *          candidates x 4/8/16 dimensions, O(n) memory.  Core counts stop
 *          at min_pts (per block); unions between core points only (core
 *          rows compacted first, pairs i < j); border points scan the core
 *          rows.  Split into launches over query x candidate ranges of
 *          bounded work so the cancel flags are seen between them.
 *
 * Components: lock-free union-find over int32 positions (parent[x] <= x;
 * an atomicCAS hangs the higher root under the lower; finds compress).
 * Unions only join core points that are neighbours, or imply such a join
 * (dense cells: the core points of a dense cell are one component, and a
 * point joins a dense cell when it reaches one of its core points).
 * Border: a non-core point takes the core neighbour of least
 * (dist2 bits, input row) — the CPU's nearest-core rule, ties to the lowest
 * row.  Numbering: atomicMin of the input row per root, a flag for each
 * cluster's first row, a CUB exclusive scan — clusters numbered by lowest
 * input row, as the CPU.
 *
 * Every CUDA call is checked (GC_ENOMEM for allocation failures, else
 * GC_EDEVICE); the cancel flags are polled between phases and launches.
 * Device memory: O(n) beyond the input (gc_dbscan_gpu_mem_bytes), never
 * an n x n matrix.  At most 2^31 - 2 points.
 */
/* Interim: gc_dbscan_gpu_index (a test hook) still lives in this file; it
 * moves to dbscan_hooks.cu. */
#define GC_TESTING 1

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <vector>

#include <cuda_runtime.h>
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_scan.cuh>

#include "gpu.h"
#include "launch.cuh"
#include "transfer.cuh"

#define DB_THREADS 256
#define FLAT_RUN 48				/* as dbscan_grid.c: runs this short go point by point */
#define GRID_MAX_ROWS 25
#define BF_Q 128				/* brute force: query rows per block */
#define BF_TJ 32				/* brute force: candidates per tile */
#define GRID_CHUNK (1 << 22)	/* points per grid launch (cancel granularity) */
#define BF_WORK 2.0e11			/* pair-dimensions per brute-force launch */

/* ------------------------------------------------------------------ */
/* error plumbing                                                      */
/* ------------------------------------------------------------------ */

static gc_code
db_cuda_fail(gc_status *st, cudaError_t e, const char *what)
{
	gc_code		c = (e == cudaErrorMemoryAllocation) ? GC_ENOMEM : GC_EDEVICE;

	cudaGetLastError();			/* clear a non-sticky error */
	return gc_fail(st, c, "GPU DBSCAN: %s: %s (%s)",
				   c == GC_ENOMEM ? "out of GPU memory" : "CUDA error",
				   cudaGetErrorString(e), what);
}

#define DB_CK(expr) \
	do { \
		cudaError_t db_e_ = (expr); \
		if (db_e_ != cudaSuccess) \
			return db_cuda_fail(st, db_e_, #expr); \
	} while (0)
#define DB_LAUNCHED() DB_CK(cudaGetLastError())

static gc_dbscan_gpu_phases last_phases;

/* GPUCLUST_DB_TRACE=1: each step's end on stderr (debugging hangs). */
static int	trace_on = -1;

static void
tr(const char *what, long long v)
{
	if (trace_on < 0)
		trace_on = getenv("GPUCLUST_DB_TRACE") != NULL;
	if (trace_on)
	{
		fprintf(stderr, "  [dbscan-gpu %.3f] %s %lld\n", gc_now_ms(), what, v);
		fflush(stderr);
	}
}

extern "C" void
gc_dbscan_gpu_last_phases(gc_dbscan_gpu_phases *out)
{
	*out = last_phases;
}

/* ------------------------------------------------------------------ */
/* float-exact arithmetic                                              */
/* ------------------------------------------------------------------ */

/* s + (a - b)^2, each step rounded on its own (gc_dist2's step). */
__device__ __forceinline__ float
sq_step(float s, float a, float b)
{
	float		t = __fsub_rn(a, b);

	return __fadd_rn(s, __fmul_rn(t, t));
}

template <int D>
__device__ __forceinline__ float
dist2(const float *a, const float *b)
{
	float		s = 0.0f;

#pragma unroll
	for (int k = 0; k < D; k++)
		s = sq_step(s, a[k], b[k]);
	return s;
}

/* box_dist.h's bounds, same order of operations. */
template <int D>
__device__ __forceinline__ float
box_mindist2(const float *p, const float *lo, const float *hi)
{
	float		s = 0.0f;

#pragma unroll
	for (int j = 0; j < D; j++)
	{
		float		t = 0.0f;

		if (p[j] < lo[j])
			t = __fsub_rn(lo[j], p[j]);
		else if (p[j] > hi[j])
			t = __fsub_rn(p[j], hi[j]);
		s = __fadd_rn(s, __fmul_rn(t, t));
	}
	return s;
}

template <int D>
__device__ __forceinline__ float
box_maxdist2(const float *p, const float *lo, const float *hi)
{
	float		s = 0.0f;

#pragma unroll
	for (int j = 0; j < D; j++)
	{
		float		a = fabsf(__fsub_rn(p[j], lo[j])),
					b = fabsf(__fsub_rn(hi[j], p[j]));
		float		t = a > b ? a : b;

		s = __fadd_rn(s, __fmul_rn(t, t));
	}
	return s;
}

/* Points of the grid: d = 1, 2 as is, d = 3 padded to float4. */
template <int D>
__device__ __forceinline__ void
ldp(const float *__restrict__ P, int pos, float *x)
{
	if (D == 1)
		x[0] = P[pos];
	else if (D == 2)
	{
		float2		t = reinterpret_cast<const float2 *>(P)[pos];

		x[0] = t.x;
		x[1] = t.y;
	}
	else
	{
		float4		t = reinterpret_cast<const float4 *>(P)[pos];

		x[0] = t.x;
		x[1] = t.y;
		x[2] = t.z;
	}
}

/* ------------------------------------------------------------------ */
/* union-find                                                          */
/* ------------------------------------------------------------------ */

__device__ __forceinline__ int
uf_find(int *parent, int x)
{
	volatile int *vp = parent;
	int			r = x,
				p;

	while ((p = vp[r]) != r)
		r = p;

	/*
	 * Compress, storing r only into nodes whose parent is still above
	 * index r.  Ancestors of x form one chain whose indices fall as it
	 * rises, so a parent p > r has r among its ancestors: the store keeps
	 * every parent an ancestor and parent[x] <= x, hence no cycle.  (The
	 * unguarded "until p == r" walk can pass above r when another thread
	 * has compressed the path to a newer root meanwhile, and then store
	 * r > x into x: a cycle, and finds that never end.)
	 */
	while ((p = vp[x]) > r)
	{
		vp[x] = r;
		x = p;
	}
	return r;
}

__device__ __forceinline__ void
uf_union(int *parent, int a, int b)
{
	for (;;)
	{
		a = uf_find(parent, a);
		b = uf_find(parent, b);
		if (a == b)
			return;
		if (a < b)
		{
			int			t = a;

			a = b;
			b = t;
		}
		/* a is the higher root: hang it under b */
		if (atomicCAS(&parent[a], a, b) == a)
			return;
	}
}

/* ------------------------------------------------------------------ */
/* small kernels                                                       */
/* ------------------------------------------------------------------ */

__global__ void
k_iota(int *a, int n)
{
	int			i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i < n)
		a[i] = i;
}

__global__ void
k_fill(int *a, int n, int v)
{
	int			i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i < n)
		a[i] = v;
}

/* Order-preserving int image of a float (for atomicMin/Max). */
__device__ __forceinline__ int
f2o(float f)
{
	int			i = __float_as_int(f);

	return i >= 0 ? i : i ^ 0x7fffffff;
}

/* mm[k] = min of column k, mm[3 + k] = max (order images), d <= 3. */
__global__ void
k_minmax(const float *__restrict__ X, int n, int d, int *mm)
{
	float		lo[3] = {INFINITY, INFINITY, INFINITY},
				hi[3] = {-INFINITY, -INFINITY, -INFINITY};
	__shared__ float slo[3][DB_THREADS / 32],
				shi[3][DB_THREADS / 32];

	for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n;
		 i += gridDim.x * blockDim.x)
		for (int k = 0; k < d; k++)
		{
			float		v = X[(int64_t) i * d + k];

			lo[k] = v < lo[k] ? v : lo[k];
			hi[k] = v > hi[k] ? v : hi[k];
		}
	for (int k = 0; k < d; k++)
	{
		for (int o = 16; o > 0; o >>= 1)
		{
			float		a = __shfl_xor_sync(0xffffffffu, lo[k], o),
						b = __shfl_xor_sync(0xffffffffu, hi[k], o);

			lo[k] = a < lo[k] ? a : lo[k];
			hi[k] = b > hi[k] ? b : hi[k];
		}
		if ((threadIdx.x & 31) == 0)
		{
			slo[k][threadIdx.x >> 5] = lo[k];
			shi[k][threadIdx.x >> 5] = hi[k];
		}
	}
	__syncthreads();
	if (threadIdx.x < d)
	{
		int			k = threadIdx.x;
		float		a = INFINITY,
					b = -INFINITY;

		for (int w = 0; w < DB_THREADS / 32; w++)
		{
			a = slo[k][w] < a ? slo[k][w] : a;
			b = shi[k][w] > b ? shi[k][w] : b;
		}
		atomicMin(&mm[k], f2o(a));
		atomicMax(&mm[3 + k], f2o(b));
	}
}

/* ------------------------------------------------------------------ */
/* grid                                                                */
/* ------------------------------------------------------------------ */

/* The CPU grid's plan (dbscan_grid.c, grid_plan_make), host side. */
struct grid_plan
{
	double		inv_side;
	float		min[3];
	int64_t		m[3];
	uint64_t	stride[3];
	uint64_t	nkeys;
	int			key_bits;
};

static bool
grid_plan_make(int d, float eps2, const float *mn, const float *mx,
			   grid_plan *gp)
{
	double		R,
				side,
				nk = 1.0;

	if (!isfinite(eps2))
		return false;
	R = sqrt((double) nextafterf(eps2, INFINITY)) * (1.0 + 0x1p-20) + 1e-44;
	side = R / sqrt((double) d) * (1.0 - 1.0 / 256.0);
	if (!isfinite(side) || !(side > 0.0) || !isfinite(1.0 / side))
		return false;
	gp->inv_side = 1.0 / side;
	for (int k = 0; k < 3; k++)
	{
		gp->min[k] = 0.0f;
		gp->m[k] = 1;
		gp->stride[k] = 0;
	}
	for (int k = 0; k < d; k++)
	{
		double		ext = ((double) mx[k] - (double) mn[k]) * gp->inv_side;

		if (!(ext <= 0x1p40))
			return false;
		gp->min[k] = mn[k];
		gp->m[k] = (int64_t) floor(ext) + 1;
		gp->stride[k] = (uint64_t) nk;
		nk *= (double) (gp->m[k] + 4);
	}
	if (nk > 0x1p62)
		return false;
	gp->nkeys = (uint64_t) nk;
	gp->key_bits = 0;
	while (gp->key_bits < 64 && (UINT64_C(1) << gp->key_bits) < gp->nkeys)
		gp->key_bits++;
	return true;
}

__global__ void
k_keys(const float *__restrict__ X, int n, int d, grid_plan gp,
	   unsigned long long *keys, int *idx)
{
	int			i = blockIdx.x * blockDim.x + threadIdx.x;
	uint64_t	key = 0;

	if (i >= n)
		return;
	for (int k = 0; k < d; k++)
	{
		double		q = __dmul_rn(__dsub_rn((double) X[(int64_t) i * d + k],
											(double) gp.min[k]), gp.inv_side);
		int64_t		c = (int64_t) floor(q);

		if (c < 0)
			c = 0;
		if (c > gp.m[k] - 1)
			c = gp.m[k] - 1;
		key += (uint64_t) (c + 2) * gp.stride[k];
	}
	keys[i] = key;
	idx[i] = i;
}

/* P[pos] = X[perm[pos]] (stride dp); flag[pos] = first point of a cell. */
__global__ void
k_gather(const float *__restrict__ X, const int *__restrict__ perm, int n,
		 int d, int dp, const unsigned long long *__restrict__ keys,
		 float *P, int *flag)
{
	int			pos = blockIdx.x * blockDim.x + threadIdx.x;

	if (pos >= n)
		return;
	int			row = perm[pos];

	for (int k = 0; k < dp; k++)
		P[(int64_t) pos * dp + k] = k < d ? X[(int64_t) row * d + k] : 0.0f;
	flag[pos] = pos == 0 || keys[pos] != keys[pos - 1];
}

/* cellOf = inclusive scan of flags (1-based on input): fix to 0-based,
 * and record cell starts and keys. */
__global__ void
k_cells(const unsigned long long *__restrict__ keys, const int *__restrict__ flag,
		int *cellOf, int n, int ncell, int *cstart, unsigned long long *ckey)
{
	int			pos = blockIdx.x * blockDim.x + threadIdx.x;

	if (pos >= n)
		return;
	int			c = cellOf[pos] - 1;

	cellOf[pos] = c;
	if (flag[pos])
	{
		cstart[c] = pos;
		ckey[c] = keys[pos];
	}
	if (pos == 0)
		cstart[ncell] = n;
}

__global__ void
k_key_present(const unsigned long long *__restrict__ ckey, int ncell, int *present)
{
	int			c = blockIdx.x * blockDim.x + threadIdx.x;

	if (c < ncell)
		present[ckey[c]] = 1;
}

/* Everything the per-point grid kernels read. */
struct grid_dev
{
	const float *P;				/* positions, stride 1/2/4 */
	const int  *cellOf;			/* n */
	const int  *cstart;			/* ncell + 1 */
	const unsigned long long *ckey;	/* ncell */
	const float *lo,
			   *hi;				/* ncell * D */
	const uint8_t *dense;		/* ncell */
	const int  *ncore;			/* ncell */
	const int  *rep;			/* ncell: first core position, or -1 */
	const int  *ktab;			/* nkeys + 1, or NULL */
	const int  *perm;			/* position -> input row */
	uint8_t    *core;			/* n */
	int		   *parent;			/* n */
	int		   *rp;				/* n: root (position) of the cluster, or -1 */
	int			ncell;
	int			nrows;
	float		eps2;
	unsigned	minp;
	int64_t		rowoff[GRID_MAX_ROWS];
};

/* Boxes and density of each cell: one warp per cell. */
template <int D>
__global__ void
k_cell_box(const float *__restrict__ P, const int *__restrict__ cstart,
		   int ncell, float eps2, float *lo, float *hi, uint8_t *dense)
{
	const int	c = (int) (((int64_t) blockIdx.x * blockDim.x + threadIdx.x) >> 5);
	int			lane = threadIdx.x & 31;

	if (c >= ncell)
		return;
	int			b = cstart[c],
				e = cstart[c + 1];
	float		l[D],
				h[D],
				x[D];

#pragma unroll
	for (int k = 0; k < D; k++)
	{
		l[k] = INFINITY;
		h[k] = -INFINITY;
	}
	for (int s = b + lane; s < e; s += 32)
	{
		ldp<D>(P, s, x);
#pragma unroll
		for (int k = 0; k < D; k++)
		{
			l[k] = x[k] < l[k] ? x[k] : l[k];
			h[k] = x[k] > h[k] ? x[k] : h[k];
		}
	}
#pragma unroll
	for (int k = 0; k < D; k++)
		for (int o = 16; o > 0; o >>= 1)
		{
			float		a = __shfl_xor_sync(0xffffffffu, l[k], o),
						bb = __shfl_xor_sync(0xffffffffu, h[k], o);

			l[k] = a < l[k] ? a : l[k];
			h[k] = bb > h[k] ? bb : h[k];
		}
	if (lane == 0)
	{
#pragma unroll
		for (int k = 0; k < D; k++)
		{
			lo[(int64_t) c * D + k] = l[k];
			hi[(int64_t) c * D + k] = h[k];
		}
		dense[c] = dist2<D>(l, h) <= eps2;
	}
}

/* Core points per cell and the first of them: one warp per cell. */
__global__ void
k_cell_core(const uint8_t *__restrict__ core, const int *__restrict__ cstart,
			int ncell, int *ncore, int *rep)
{
	const int	c = (int) (((int64_t) blockIdx.x * blockDim.x + threadIdx.x) >> 5);
	int			lane = threadIdx.x & 31;

	if (c >= ncell)
		return;
	int			b = cstart[c],
				e = cstart[c + 1];
	int			cnt = 0,
				first = -1;

	for (int s0 = b; s0 < e; s0 += 32)
	{
		int			s = s0 + lane;
		unsigned	m = __ballot_sync(0xffffffffu, s < e && core[s]);

		if (m != 0 && first < 0)
			first = s0 + __ffs(m) - 1;
		cnt += __popc(m);
	}
	if (lane == 0)
	{
		ncore[c] = cnt;
		rep[c] = first;
	}
}

__device__ __forceinline__ int
cell_at_or_after(const grid_dev &g, uint64_t k)
{
	if (g.ktab != nullptr)
		return g.ktab[k];
	int			lo = 0,
				hi = g.ncell;

	while (lo < hi)
	{
		int			mid = (int) (((unsigned) lo + (unsigned) hi) >> 1);

		if (g.ckey[mid] < k)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Cells [a, b) of row r around cell c; false when empty. */
__device__ __forceinline__ bool
row_cells(const grid_dev &g, uint64_t kc, int r, int &a, int &b)
{
	uint64_t	klo = kc + (uint64_t) g.rowoff[r] - 2;

	a = cell_at_or_after(g, klo);
	b = cell_at_or_after(g, klo + 5);
	return a < b;
}

template <int D>
__global__ void __launch_bounds__(DB_THREADS)
k_grid_core(grid_dev g, int p0, int p1)
{
	int			p = p0 + blockIdx.x * blockDim.x + threadIdx.x;

	if (p >= p1)
		return;
	const int	c = g.cellOf[p];
	const int	b = g.cstart[c],
				e = g.cstart[c + 1];
	const unsigned minp = g.minp;
	const float eps2 = g.eps2;

	if ((unsigned) (e - b) >= minp && g.dense[c])
	{
		g.core[p] = 1;
		return;
	}
	float		x[D],
				y[D];
	unsigned	cnt = 0;
	const uint64_t kc = g.ckey[c];

	ldp<D>(g.P, p, x);
	for (int r = 0; r < g.nrows && cnt < minp; r++)
	{
		int			a,
					bb;

		if (!row_cells(g, kc, r, a, bb))
			continue;
		int			pb = g.cstart[a],
					pe = g.cstart[bb];

		if (pe - pb <= FLAT_RUN)
		{
			for (int s = pb; s < pe; s++)
			{
				ldp<D>(g.P, s, y);
				cnt += dist2<D>(x, y) <= eps2;
			}
		}
		else
			for (int q = a; q < bb && cnt < minp; q++)
			{
				int			qb = g.cstart[q],
							qe = g.cstart[q + 1];

				if (qe - qb > 2)
				{
					const float *lo = g.lo + (int64_t) q * D,
							   *hi = g.hi + (int64_t) q * D;

					if (box_mindist2<D>(x, lo, hi) > eps2)
						continue;
					if (box_maxdist2<D>(x, lo, hi) <= eps2)
					{
						cnt += qe - qb;
						continue;
					}
				}
				for (int s = qb; s < qe; s++)
				{
					ldp<D>(g.P, s, y);
					cnt += dist2<D>(x, y) <= eps2;
				}
			}
	}
	g.core[p] = cnt >= minp;
}

/*
 * Unions of core point p (cell c) with the core points around it.  Each
 * edge between core points is made, or implied, by one of:
 *   c dense:               p joins rep[c] (the dense cell is one component);
 *   q dense, q != c:       p joins q at its first core neighbour in q, when
 *                          c is not dense or q > c (dense pairs once);
 *   c, q both not dense:   every core neighbour t > p in q.
 * (p in a dense cell and t in a non-dense one: t's thread, by rule 2.)
 */
template <int D>
__global__ void __launch_bounds__(DB_THREADS)
k_grid_union(grid_dev g, int p0, int p1)
{
	int			p = p0 + blockIdx.x * blockDim.x + threadIdx.x;

	if (p >= p1 || !g.core[p])
		return;
	const int	c = g.cellOf[p];
	const bool	cd = g.dense[c];
	const float eps2 = g.eps2;
	const uint64_t kc = g.ckey[c];
	int		   *parent = g.parent;
	float		x[D],
				y[D];
	int			rs = -1;

	if (cd && g.rep[c] != p)
		uf_union(parent, p, g.rep[c]);
	ldp<D>(g.P, p, x);
	for (int r = 0; r < g.nrows; r++)
	{
		int			a,
					bb;

		if (!row_cells(g, kc, r, a, bb))
			continue;
		for (int q = a; q < bb; q++)
		{
			if (g.ncore[q] == 0)
				continue;
			const bool	qd = g.dense[q];
			const int	qe = g.cstart[q + 1];

			if (cd)
			{
				if (!qd || q <= c)
					continue;
			}
			else if (!qd && qe - 1 <= p)
				continue;
			const float *lo = g.lo + (int64_t) q * D,
					   *hi = g.hi + (int64_t) q * D;

			if (box_mindist2<D>(x, lo, hi) > eps2)
				continue;
			if (qd)
			{
				const int	rq = g.rep[q];

				if (uf_find(parent, p) == uf_find(parent, rq))
					continue;
				if (box_maxdist2<D>(x, lo, hi) <= eps2)
				{
					uf_union(parent, p, rq);
					continue;
				}
				for (int t = rq; t < qe; t++)
				{
					if (!g.core[t])
						continue;
					ldp<D>(g.P, t, y);
					if (dist2<D>(x, y) <= eps2)
					{
						uf_union(parent, p, t);
						break;
					}
				}
			}
			else
			{
				int			qb = g.cstart[q];

				for (int t = qb > p + 1 ? qb : p + 1; t < qe; t++)
				{
					if (!g.core[t])
						continue;
					ldp<D>(g.P, t, y);
					if (dist2<D>(x, y) <= eps2)
					{
						int			rt = uf_find(parent, t);

						if (rs < 0)
							rs = uf_find(parent, p);
						if (rt != rs)
						{
							uf_union(parent, rs, rt);
							rs = uf_find(parent, rs);
						}
					}
				}
			}
		}
	}
}

/* rp[p]: the root of p's cluster (core: own; border: nearest core's). */
template <int D>
__global__ void __launch_bounds__(DB_THREADS)
k_grid_resolve(grid_dev g, int p0, int p1)
{
	int			p = p0 + blockIdx.x * blockDim.x + threadIdx.x;

	if (p >= p1)
		return;
	if (g.core[p])
	{
		g.rp[p] = uf_find(g.parent, p);
		return;
	}
	const int	c = g.cellOf[p];
	const uint64_t kc = g.ckey[c];
	float		x[D],
				y[D];
	float		bestd = g.eps2;
	unsigned long long best = ~0ULL;
	int			bt = -1;

	ldp<D>(g.P, p, x);
	for (int r = 0; r < g.nrows; r++)
	{
		int			a,
					bb;

		if (!row_cells(g, kc, r, a, bb))
			continue;
		for (int q = a; q < bb; q++)
		{
			if (g.ncore[q] == 0 ||
				box_mindist2<D>(x, g.lo + (int64_t) q * D, g.hi + (int64_t) q * D) > bestd)
				continue;
			const int	qe = g.cstart[q + 1];

			for (int t = g.rep[q]; t < qe; t++)
			{
				if (!g.core[t])
					continue;
				ldp<D>(g.P, t, y);
				float		dd = dist2<D>(x, y);

				if (dd <= bestd)
				{
					unsigned long long key =
						((unsigned long long) __float_as_uint(dd) << 32) |
						(unsigned) g.perm[t];

					if (key < best)
					{
						best = key;
						bestd = dd;
						bt = t;
					}
				}
			}
		}
	}
	g.rp[p] = bt >= 0 ? uf_find(g.parent, bt) : -1;
}

/* ------------------------------------------------------------------ */
/* brute force                                                         */
/* ------------------------------------------------------------------ */

enum
{
	BF_COUNT,
	BF_UNION,
	BF_BORDER
};

struct bf_args
{
	const float *Xq;			/* query rows (row-major, d) */
	const int  *qrows;			/* query i -> row of Xq, or NULL (identity) */
	const float *Xc;			/* candidate rows */
	int			d;
	int			dpad;			/* d rounded up to DC */
	float		eps2;
	unsigned	minp;
	unsigned   *cnt;			/* BF_COUNT: per query */
	int		   *parent;			/* BF_UNION: over candidates = queries */
	unsigned long long *best;	/* BF_BORDER: per query */
};

template <int DC, int MODE>
__global__ void __launch_bounds__(BF_Q)
k_bf(bf_args A, int q0, int q1, int c0, int c1)
{
	__shared__ float4 sh[BF_TJ * DC / 4];
	const int	tid = threadIdx.x;
	const int	ib = q0 + blockIdx.x * BF_Q;
	const int	i = ib + tid;
	const bool	valid = i < q1;
	const int	row = valid ? (A.qrows ? A.qrows[i] : i) : 0;
	const int	d = A.d;
	const float eps2 = A.eps2;
	unsigned	cnt = 0;
	unsigned long long best = ~0ULL;
	int			rs = -1;
	int			jbeg = c0;

	if (MODE == BF_COUNT)
	{
		cnt = valid ? A.cnt[i] : A.minp;
		if (__syncthreads_and(cnt >= A.minp))
			return;
	}
	if (MODE == BF_BORDER && valid)
		best = A.best[i];
	if (MODE == BF_UNION && jbeg < ib + 1)
		jbeg = ib + 1;

	for (int j0 = jbeg; j0 < c1; j0 += BF_TJ)
	{
		float		acc[BF_TJ];

#pragma unroll
		for (int jj = 0; jj < BF_TJ; jj++)
			acc[jj] = 0.0f;
		for (int k0 = 0; k0 < A.dpad; k0 += DC)
		{
			float		q[DC];

			__syncthreads();
			for (int e = tid; e < BF_TJ * DC; e += BF_Q)
			{
				int			jj = e / DC,
							kk = e % DC;
				int			j = j0 + jj,
							k = k0 + kk;

				((float *) sh)[e] = (j < c1 && k < d) ? A.Xc[(int64_t) j * d + k] : 0.0f;
			}
#pragma unroll
			for (int kk = 0; kk < DC; kk++)
			{
				int			k = k0 + kk;

				q[kk] = (valid && k < d) ? A.Xq[(int64_t) row * d + k] : 0.0f;
			}
			__syncthreads();
			/* zero padding adds +0: the sums stay gc_dist2's exactly */
#pragma unroll
			for (int jj = 0; jj < BF_TJ; jj++)
			{
				float		s = acc[jj];

#pragma unroll
				for (int k4 = 0; k4 < DC / 4; k4++)
				{
					float4		v = sh[jj * (DC / 4) + k4];

					s = sq_step(s, q[4 * k4 + 0], v.x);
					s = sq_step(s, q[4 * k4 + 1], v.y);
					s = sq_step(s, q[4 * k4 + 2], v.z);
					s = sq_step(s, q[4 * k4 + 3], v.w);
				}
				acc[jj] = s;
			}
		}
		if (MODE == BF_COUNT)
		{
#pragma unroll
			for (int jj = 0; jj < BF_TJ; jj++)
				cnt += (j0 + jj < c1) & (acc[jj] <= eps2);
			if (__syncthreads_and(!valid || cnt >= A.minp))
				break;
		}
		else if (MODE == BF_UNION)
		{
#pragma unroll
			for (int jj = 0; jj < BF_TJ; jj++)
			{
				int			j = j0 + jj;

				if (valid && j > i && j < c1 && acc[jj] <= eps2)
				{
					int			rt = uf_find(A.parent, j);

					if (rs < 0)
						rs = uf_find(A.parent, i);
					if (rt != rs)
					{
						uf_union(A.parent, rs, rt);
						rs = uf_find(A.parent, rs);
					}
				}
			}
		}
		else
		{
#pragma unroll
			for (int jj = 0; jj < BF_TJ; jj++)
			{
				int			j = j0 + jj;

				if (j < c1 && acc[jj] <= eps2)
				{
					unsigned long long key =
						((unsigned long long) __float_as_uint(acc[jj]) << 32) | (unsigned) j;

					best = key < best ? key : best;
				}
			}
		}
	}
	if (MODE == BF_COUNT && valid)
		A.cnt[i] = cnt;
	if (MODE == BF_BORDER && valid)
		A.best[i] = best;
}

__global__ void
k_core_flags(const unsigned *__restrict__ cnt, int n, unsigned minp,
			 uint8_t *core, int *flag)
{
	int			i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i < n)
	{
		int			c = cnt[i] >= minp;

		core[i] = (uint8_t) c;
		flag[i] = c;
	}
}

/* Core rows compacted (rows and coordinates), the others listed. */
__global__ void
k_compact(const float *__restrict__ X, const uint8_t *__restrict__ core,
		  const int *__restrict__ cidx, int n, int d, int *crow, float *Xc,
		  int *nrow)
{
	int			i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i >= n)
		return;
	int			ci = cidx[i];

	if (core[i])
	{
		crow[ci] = i;
		for (int k = 0; k < d; k++)
			Xc[(int64_t) ci * d + k] = X[(int64_t) i * d + k];
	}
	else
		nrow[i - ci] = i;
}

__global__ void
k_bf_resolve_core(int *parent, const int *__restrict__ crow, int nc, int *rp)
{
	int			ci = blockIdx.x * blockDim.x + threadIdx.x;

	if (ci < nc)
		rp[crow[ci]] = crow[uf_find(parent, ci)];
}

__global__ void
k_bf_resolve_border(int *parent, const int *__restrict__ crow,
					const int *__restrict__ nrow,
					const unsigned long long *__restrict__ best, int nb, int *rp)
{
	int			q = blockIdx.x * blockDim.x + threadIdx.x;

	if (q < nb)
		rp[nrow[q]] = best[q] == ~0ULL ? -1 :
			crow[uf_find(parent, (int) (best[q] & 0xffffffffu))];
}

/* ------------------------------------------------------------------ */
/* numbering                                                           */
/* ------------------------------------------------------------------ */

__global__ void
k_fin1(const int *__restrict__ rp, const int *__restrict__ perm,
	   const uint8_t *__restrict__ core, int n, int *rootOfRow,
	   uint8_t *coreRow, int *minrow)
{
	int			pos = blockIdx.x * blockDim.x + threadIdx.x;

	if (pos >= n)
		return;
	int			row = perm ? perm[pos] : pos;
	int			r = rp[pos];

	rootOfRow[row] = r;
	coreRow[row] = core[pos];
	if (r >= 0)
		atomicMin(&minrow[r], row);
}

__global__ void
k_fin2(const int *__restrict__ rootOfRow, const int *__restrict__ minrow,
	   int n, int *flag)
{
	int			row = blockIdx.x * blockDim.x + threadIdx.x;

	if (row < n)
	{
		int			r = rootOfRow[row];

		flag[row] = r >= 0 && minrow[r] == row;
	}
}

__global__ void
k_fin3(const int *__restrict__ rootOfRow, const int *__restrict__ minrow,
	   const int *__restrict__ idx, int n, int32_t *labels)
{
	int			row = blockIdx.x * blockDim.x + threadIdx.x;

	if (row < n)
	{
		int			r = rootOfRow[row];

		labels[row] = r < 0 ? GC_NOISE : idx[minrow[r]];
	}
}

/* ------------------------------------------------------------------ */
/* host side                                                           */
/* ------------------------------------------------------------------ */

/*
 * The device resources of one call, released on every path out of it
 * (release(), or the destructor after an error): the stream, each
 * allocation, the CUB scratch.  Time spent allocating is counted in
 * last_phases.ms_alloc.
 */
struct db_dev
{
	cudaStream_t s = nullptr;
	std::vector<void *> allocs;
	void	   *cub_tmp = nullptr;
	size_t		cub_bytes = 0;
	int			host_threads = 1;	/* for the host side of transfers */

	~db_dev()
	{
		release();
	}

	void		release()
	{
		if (s)
			cudaStreamSynchronize(s);
		for (void *p : allocs)
			cudaFree(p);
		allocs.clear();
		cudaFree(cub_tmp);
		cub_tmp = nullptr;
		cub_bytes = 0;
		if (s)
			cudaStreamDestroy(s);
		s = nullptr;
	}

	template <typename T>
	cudaError_t alloc(T *&p, int64_t count)
	{
		void	   *v = nullptr;
		double		t0 = gc_now_ms();
		cudaError_t e = cudaMalloc(&v, sizeof(T) * (size_t) (count > 0 ? count : 1));

		last_phases.ms_alloc += gc_now_ms() - t0;
		if (e == cudaSuccess)
			allocs.push_back(v);
		p = (T *) v;
		return e;
	}

	/* CUB scratch of at least bytes. */
	cudaError_t scratch(size_t bytes)
	{
		if (bytes <= cub_bytes)
			return cudaSuccess;
		double		t0 = gc_now_ms();

		cudaFree(cub_tmp);
		cub_tmp = nullptr;
		cub_bytes = 0;
		cudaError_t e = cudaMalloc(&cub_tmp, bytes);

		last_phases.ms_alloc += gc_now_ms() - t0;
		if (e == cudaSuccess)
			cub_bytes = bytes;
		return e;
	}
};

#define DB_ALLOC(p, count) DB_CK(D.alloc((p), (count)))

/* Synchronise, then poll the cancel flags. */
static gc_code
db_sync_poll(db_dev &D, const gc_ctx *ctx, gc_status *st)
{
	DB_CK(cudaStreamSynchronize(D.s));
	if (gc_cancelled(ctx))
		return gc_fail(st, GC_ECANCEL, "canceled");
	return GC_OK;
}

/* Exclusive sum of n ints (in may equal neither out). */
static gc_code
db_exclusive_sum(db_dev &D, const int *in, int *out, int64_t n, gc_status *st)
{
	size_t		bytes = 0;

	DB_CK(cub::DeviceScan::ExclusiveSum(nullptr, bytes, in, out, (int) n, D.s));
	DB_CK(D.scratch(bytes));
	bytes = D.cub_bytes;
	DB_CK(cub::DeviceScan::ExclusiveSum(D.cub_tmp, bytes, in, out, (int) n, D.s));
	return GC_OK;
}

/*
 * The result (labels, is_core in input order) from rp/core by position
 * (perm: position -> row, NULL for the identity).
 */
static gc_code
db_finish(db_dev &D, int n, const int *rp, const int *perm,
		  const uint8_t *core, int32_t *labels, uint8_t *is_core,
		  gc_status *st)
{
	int		   *rootOfRow,
			   *minrow,
			   *flag,
			   *idx;
	int32_t    *dlab;
	uint8_t    *dcore;
	double		t0 = gc_now_ms();

	DB_ALLOC(rootOfRow, n);
	DB_ALLOC(minrow, n);
	DB_ALLOC(flag, n);
	DB_ALLOC(idx, n);
	DB_ALLOC(dlab, n);
	DB_ALLOC(dcore, n);
	DB_CK(gc_launch(k_fill, n, DB_THREADS, DB_THREADS, D.s, minrow, n, INT32_MAX));
	DB_CK(gc_launch(k_fin1, n, DB_THREADS, DB_THREADS, D.s, rp, perm, core, n,
					rootOfRow, dcore, minrow));
	DB_CK(gc_launch(k_fin2, n, DB_THREADS, DB_THREADS, D.s, rootOfRow,
					(const int *) minrow, n, flag));
	gc_code		rc = db_exclusive_sum(D, flag, idx, n, st);

	if (rc != GC_OK)
		return rc;
	DB_CK(gc_launch(k_fin3, n, DB_THREADS, DB_THREADS, D.s, rootOfRow,
					(const int *) minrow, (const int *) idx, n, dlab));
	DB_CK(cudaStreamSynchronize(D.s));
	last_phases.ms_number = gc_now_ms() - t0;
	t0 = gc_now_ms();
	DB_CK(gc_xfer_d2h(labels, dlab, sizeof(int32_t) * (size_t) n, D.s, D.host_threads));
	DB_CK(gc_xfer_d2h(is_core, dcore, (size_t) n, D.s, D.host_threads));
	last_phases.ms_download = gc_now_ms() - t0;
	return GC_OK;
}

/* Runs one grid kernel over all positions in chunks, polling between. */
template <int DD>
static gc_code
grid_phase(db_dev &D, const gc_ctx *ctx, const grid_dev &g, int n, int which,
		   gc_status *st)
{
	for (int p0 = 0; p0 < n; p0 += GRID_CHUNK)
	{
		int			p1 = n - p0 < GRID_CHUNK ? n : p0 + GRID_CHUNK;
		void		(*kern) (grid_dev, int, int) =
			which == 0 ? k_grid_core<DD> : which == 1 ? k_grid_union<DD> : k_grid_resolve<DD>;

		DB_CK(gc_launch(kern, p1 - p0, DB_THREADS, DB_THREADS, D.s, g, p0, p1));
		gc_code		rc = db_sync_poll(D, ctx, st);

		if (rc != GC_OK)
			return rc;
		tr(which == 0 ? "grid core chunk" : which == 1 ? "grid union chunk" : "grid border chunk", p1);
	}
	return GC_OK;
}

/*
 * The grid path.  Returns GC_OK with *applied false (nothing done) when
 * the plan does not fit.
 */
template <int DD>
static gc_code
db_grid(db_dev &D, const gc_ctx *ctx, const float *X, int n, int d,
		float eps2, unsigned minp, int32_t *labels, uint8_t *is_core,
		bool *applied, gc_status *st)
{
	const int	dp = DD == 3 ? 4 : DD;
	int		   *mm;
	int			hmm[6];
	float		mn[3],
				mx[3];
	grid_plan	gp;
	double		t0 = gc_now_ms();
	gc_code		rc;

	*applied = false;
	DB_ALLOC(mm, 6);
	DB_CK(gc_launch(k_fill, 3, 32, 32, D.s, mm, 3, INT32_MAX));
	DB_CK(gc_launch(k_fill, 3, 32, 32, D.s, mm + 3, 3, INT32_MIN));
	/* grid-stride: at most 1024 blocks */
	DB_CK(gc_launch(k_minmax, n < 1024 * DB_THREADS ? n : 1024 * DB_THREADS,
					DB_THREADS, DB_THREADS, D.s, X, n, d, mm));
	DB_CK(cudaMemcpyAsync(hmm, mm, sizeof(hmm), cudaMemcpyDeviceToHost, D.s));
	DB_CK(cudaStreamSynchronize(D.s));
	for (int k = 0; k < d; k++)
	{
		int			a = hmm[k] >= 0 ? hmm[k] : hmm[k] ^ 0x7fffffff,
					b = hmm[3 + k] >= 0 ? hmm[3 + k] : hmm[3 + k] ^ 0x7fffffff;

		memcpy(&mn[k], &a, sizeof(float));
		memcpy(&mx[k], &b, sizeof(float));
	}
	if (!grid_plan_make(d, eps2, mn, mx, &gp))
	{
		tr("grid plan refused", 0);
		return GC_OK;
	}
	*applied = true;
	tr("grid plan: key bits", gp.key_bits);

	/* keys, sort */
	unsigned long long *keys_in,
			   *keys;
	int		   *idx_in,
			   *perm,
			   *flag,
			   *cellOf;
	float	   *P;

	DB_ALLOC(keys_in, n);
	DB_ALLOC(keys, n);
	DB_ALLOC(idx_in, n);
	DB_ALLOC(perm, n);
	DB_CK(gc_launch(k_keys, n, DB_THREADS, DB_THREADS, D.s, X, n, d, gp, keys_in, idx_in));
	{
		size_t		bytes = 0;

		DB_CK(cub::DeviceRadixSort::SortPairs(nullptr, bytes, keys_in, keys, idx_in, perm,
											  n, 0, gp.key_bits, D.s));
		DB_CK(D.scratch(bytes));
		bytes = D.cub_bytes;
		DB_CK(cub::DeviceRadixSort::SortPairs(D.cub_tmp, bytes, keys_in, keys, idx_in, perm,
											  n, 0, gp.key_bits, D.s));
	}
	/* keys_in / idx_in are free now: reuse as flag / cellOf */
	flag = idx_in;
	cellOf = (int *) keys_in;
	DB_ALLOC(P, (int64_t) n * dp);
	DB_CK(gc_launch(k_gather, n, DB_THREADS, DB_THREADS, D.s, X, (const int *) perm, n, d,
					dp, (const unsigned long long *) keys, P, flag));
	{
		size_t		bytes = 0;

		DB_CK(cub::DeviceScan::InclusiveSum(nullptr, bytes, flag, cellOf, n, D.s));
		DB_CK(D.scratch(bytes));
		bytes = D.cub_bytes;
		DB_CK(cub::DeviceScan::InclusiveSum(D.cub_tmp, bytes, flag, cellOf, n, D.s));
	}
	int			ncell;

	DB_CK(cudaMemcpyAsync(&ncell, cellOf + n - 1, sizeof(int), cudaMemcpyDeviceToHost, D.s));
	DB_CK(cudaStreamSynchronize(D.s));
	tr("sorted; cells", ncell);

	grid_dev	g;
	int		   *cstart,
			   *ncore,
			   *rep,
			   *ktab = nullptr;
	unsigned long long *ckey;
	float	   *lo,
			   *hi;
	uint8_t    *dense,
			   *core;

	memset(&g, 0, sizeof(g));
	DB_ALLOC(cstart, (int64_t) ncell + 1);
	DB_ALLOC(ckey, ncell);
	DB_ALLOC(lo, (int64_t) ncell * DD);
	DB_ALLOC(hi, (int64_t) ncell * DD);
	DB_ALLOC(dense, ncell);
	DB_ALLOC(ncore, ncell);
	DB_ALLOC(rep, ncell);
	DB_ALLOC(core, n);
	DB_CK(gc_launch(k_cells, n, DB_THREADS, DB_THREADS, D.s,
					(const unsigned long long *) keys, (const int *) flag, cellOf, n,
					ncell, cstart, ckey));
	/* one warp per cell */
	DB_CK(gc_launch(k_cell_box<DD>, (int64_t) ncell * 32, DB_THREADS, DB_THREADS, D.s,
					(const float *) P, (const int *) cstart, ncell, eps2, lo, hi, dense));
	/* key -> cell table when the key space is not much larger than n
	 * (8n ints: O(n) memory, and O(1) neighbour-run lookups) */
	if (gp.nkeys <= (uint64_t) (n > (1 << 20) ? 8 * (int64_t) n : (1 << 23)) &&
		gp.nkeys < (uint64_t) INT32_MAX)
	{
		int		   *present;
		int64_t		nk1 = (int64_t) gp.nkeys + 1;

		DB_ALLOC(ktab, nk1);
		DB_ALLOC(present, nk1);
		DB_CK(cudaMemsetAsync(present, 0, sizeof(int) * (size_t) nk1, D.s));
		DB_CK(gc_launch(k_key_present, ncell, DB_THREADS, DB_THREADS, D.s,
						(const unsigned long long *) ckey, ncell, present));
		if ((rc = db_exclusive_sum(D, present, ktab, nk1, st)) != GC_OK)
			return rc;
	}

	g.P = P;
	g.cellOf = cellOf;
	g.cstart = cstart;
	g.ckey = ckey;
	g.lo = lo;
	g.hi = hi;
	g.dense = dense;
	g.ncore = ncore;
	g.rep = rep;
	g.ktab = ktab;
	g.perm = perm;
	g.core = core;
	g.ncell = ncell;
	g.eps2 = eps2;
	g.minp = minp;
	g.nrows = 0;
	{
		static const int order[5] = {0, -1, 1, -2, 2};

		for (int ia = 0; ia < 5; ia++)
			for (int ib = 0; ib < 5; ib++)
			{
				int			a = order[ia],
							b = order[ib];

				if ((d < 2 && a != 0) || (d < 3 && b != 0))
					continue;
				g.rowoff[g.nrows++] =
					(d >= 2 ? a * (int64_t) gp.stride[1] : 0) +
					(d >= 3 ? b * (int64_t) gp.stride[2] : 0);
			}
	}
	if ((rc = db_sync_poll(D, ctx, st)) != GC_OK)
		return rc;
	tr("cells built; ktab", ktab != nullptr);
	last_phases.ms_index = gc_now_ms() - t0;
	last_phases.grid = 1;
	last_phases.ncell = ncell;

	/* core */
	t0 = gc_now_ms();
	if ((rc = grid_phase<DD>(D, ctx, g, n, 0, st)) != GC_OK)
		return rc;
	DB_CK(gc_launch(k_cell_core, (int64_t) ncell * 32, DB_THREADS, DB_THREADS, D.s,
					(const uint8_t *) core, (const int *) cstart, ncell, ncore, rep));
	last_phases.ms_core = gc_now_ms() - t0;

	/* union */
	t0 = gc_now_ms();
	int		   *parent,
			   *rp;

	DB_ALLOC(parent, n);
	DB_ALLOC(rp, n);
	g.parent = parent;
	g.rp = rp;
	DB_CK(gc_launch(k_iota, n, DB_THREADS, DB_THREADS, D.s, parent, n));
	if ((rc = grid_phase<DD>(D, ctx, g, n, 1, st)) != GC_OK)
		return rc;
	last_phases.ms_union = gc_now_ms() - t0;

	/* border and roots */
	t0 = gc_now_ms();
	if ((rc = grid_phase<DD>(D, ctx, g, n, 2, st)) != GC_OK)
		return rc;
	last_phases.ms_border = gc_now_ms() - t0;

	return db_finish(D, n, rp, perm, core, labels, is_core, st);
}

/* One brute-force pass over queries [0, nq) x candidates [0, nc). */
template <int MODE>
static gc_code
bf_pass(db_dev &D, const gc_ctx *ctx, bf_args A, int nq, int nc, gc_status *st)
{
	int			DC = A.dpad <= 4 ? 4 : A.dpad <= 8 ? 8 : 16;
	int64_t		qc = nq < (1 << 20) ? nq : (1 << 20);
	double		cc_d;
	int64_t		cc;

	if (nq == 0 || nc == 0)
		return GC_OK;
	cc_d = BF_WORK / ((double) qc * (double) A.dpad);
	cc = cc_d > (double) nc ? nc : (int64_t) cc_d;
	if (cc < 4096)
		cc = 4096;
	cc = (cc + BF_TJ - 1) / BF_TJ * BF_TJ;
	for (int64_t q0 = 0; q0 < nq; q0 += qc)
	{
		int			q1 = (int) (nq - q0 < qc ? nq : q0 + qc);
		for (int64_t c0 = 0; c0 < nc; c0 += cc)
		{
			int			c1 = (int) (nc - c0 < cc ? nc : c0 + cc);
			void		(*kern) (bf_args, int, int, int, int) =
				DC == 4 ? k_bf<4, MODE> : DC == 8 ? k_bf<8, MODE> : k_bf<16, MODE>;

			if (MODE == BF_UNION && c1 <= q0 + 1)
				continue;		/* only pairs i < j */
			DB_CK(gc_launch(kern, q1 - q0, BF_Q, BF_Q, D.s, A, (int) q0, q1, (int) c0, c1));
			gc_code		rc = db_sync_poll(D, ctx, st);

			if (rc != GC_OK)
				return rc;
			tr(MODE == BF_COUNT ? "brute count launch" : MODE == BF_UNION ? "brute union launch" : "brute border launch", c1);
		}
	}
	return GC_OK;
}

static gc_code
db_brute(db_dev &D, const gc_ctx *ctx, const float *X, int n, int d,
		 float eps2, unsigned minp, int32_t *labels, uint8_t *is_core,
		 gc_status *st)
{
	const int	DC = d <= 4 ? 4 : d <= 8 ? 8 : 16;
	bf_args		A;
	unsigned   *cnt;
	uint8_t    *core;
	int		   *flag,
			   *cidx,
			   *crow,
			   *nrow,
			   *parent,
			   *rp;
	float	   *Xc;
	unsigned long long *best;
	double		t0 = gc_now_ms();
	gc_code		rc;
	int			nc,
				last[2];

	last_phases.grid = 0;
	last_phases.ncell = 0;
	memset(&A, 0, sizeof(A));
	A.d = d;
	A.dpad = (d + DC - 1) / DC * DC;
	A.eps2 = eps2;
	A.minp = minp;

	DB_ALLOC(cnt, n);
	DB_ALLOC(core, n);
	DB_ALLOC(flag, n);
	DB_ALLOC(cidx, n);
	DB_CK(cudaMemsetAsync(cnt, 0, sizeof(unsigned) * (size_t) n, D.s));
	last_phases.ms_index = gc_now_ms() - t0;

	/* core counts */
	t0 = gc_now_ms();
	A.Xq = X;
	A.Xc = X;
	A.cnt = cnt;
	if ((rc = bf_pass<BF_COUNT>(D, ctx, A, n, n, st)) != GC_OK)
		return rc;
	DB_CK(gc_launch(k_core_flags, n, DB_THREADS, DB_THREADS, D.s, (const unsigned *) cnt,
					n, minp, core, flag));
	if ((rc = db_exclusive_sum(D, flag, cidx, n, st)) != GC_OK)
		return rc;
	DB_CK(cudaMemcpyAsync(&last[0], cidx + n - 1, sizeof(int), cudaMemcpyDeviceToHost, D.s));
	DB_CK(cudaMemcpyAsync(&last[1], flag + n - 1, sizeof(int), cudaMemcpyDeviceToHost, D.s));
	DB_CK(cudaStreamSynchronize(D.s));
	nc = last[0] + last[1];
	DB_ALLOC(crow, nc);
	DB_ALLOC(nrow, n - nc);
	DB_ALLOC(Xc, (int64_t) nc * d);
	DB_CK(gc_launch(k_compact, n, DB_THREADS, DB_THREADS, D.s, X, (const uint8_t *) core,
					(const int *) cidx, n, d, crow, Xc, nrow));
	last_phases.ms_core = gc_now_ms() - t0;

	/* unions between core points (compacted index order = row order) */
	t0 = gc_now_ms();
	parent = cidx;				/* free now */
	DB_CK(gc_launch(k_iota, nc, DB_THREADS, DB_THREADS, D.s, parent, nc));
	A.Xq = Xc;
	A.Xc = Xc;
	A.parent = parent;
	if ((rc = bf_pass<BF_UNION>(D, ctx, A, nc, nc, st)) != GC_OK)
		return rc;
	last_phases.ms_union = gc_now_ms() - t0;

	/* border: nearest core row, ties to the lowest (compacted = row order) */
	t0 = gc_now_ms();
	DB_ALLOC(best, n - nc);
	DB_ALLOC(rp, n);
	if (n - nc > 0)
		DB_CK(cudaMemsetAsync(best, 0xff, sizeof(unsigned long long) * (size_t) (n - nc), D.s));
	A.Xq = X;
	A.qrows = nrow;
	A.Xc = Xc;
	A.best = best;
	if ((rc = bf_pass<BF_BORDER>(D, ctx, A, n - nc, nc, st)) != GC_OK)
		return rc;
	DB_CK(gc_launch(k_bf_resolve_core, nc, DB_THREADS, DB_THREADS, D.s, parent,
					(const int *) crow, nc, rp));
	DB_CK(gc_launch(k_bf_resolve_border, n - nc, DB_THREADS, DB_THREADS, D.s, parent,
					(const int *) crow, (const int *) nrow,
					(const unsigned long long *) best, n - nc, rp));
	if ((rc = db_sync_poll(D, ctx, st)) != GC_OK)
		return rc;
	last_phases.ms_border = gc_now_ms() - t0;

	return db_finish(D, n, rp, nullptr, core, labels, is_core, st);
}

extern "C" gc_code
gc_dbscan_gpu_index(const gc_ctx *ctx, const float *X, int64_t n, int d,
					const gc_dbscan_params *p, gc_dbscan_gpu_index_kind index,
					gc_dbscan_gpu_index_kind *used, int32_t *labels,
					uint8_t *is_core, gc_status *st)
{
	gc_code		rc;
	float		eps2;
	unsigned	minp;
	bool		applied = false;
	double		t0 = gc_now_ms(),
				t_all = t0;

	if (st != NULL)
	{
		st->code = GC_OK;
		st->message[0] = '\0';
	}
	memset(&last_phases, 0, sizeof(last_phases));
	if (used != NULL)
		*used = GC_DBSCAN_GPU_AUTO;
	/* gc_dbscan_cpu's checks and messages */
	{
		gc_code		rc = gc_dbscan_check(n, d, p, st);

		if (rc != GC_OK)
			return rc;
	}
	if (index == GC_DBSCAN_GPU_GRID && d > 3)
		return gc_fail(st, GC_EINVAL, "the DBSCAN grid index needs d <= 3");
	if (n == 0)
		return GC_OK;
	if (X == NULL || labels == NULL || is_core == NULL)
		return gc_fail(st, GC_EINVAL, "DBSCAN input or output array missing");
	if (n > GC_DBSCAN_GPU_MAX_N)
		return gc_fail(st, GC_EDEVICE, "GPU DBSCAN handles at most %d points, got %lld",
					   GC_DBSCAN_GPU_MAX_N, (long long) n);
	if (gc_cancelled(ctx))
		return gc_fail(st, GC_ECANCEL, "canceled");

	eps2 = gc_eps2(p->eps);
	minp = p->min_pts > n + 1 ? (unsigned) (n + 1) : (unsigned) p->min_pts;

	db_dev		D;
	float	   *Xd;
	int			ni = (int) n;

	D.host_threads = gc_threads(ctx);
	DB_CK(cudaStreamCreateWithFlags(&D.s, cudaStreamNonBlocking));
	DB_ALLOC(Xd, (int64_t) n * d);
	DB_CK(gc_xfer_h2d(Xd, X, sizeof(float) * (size_t) n * d, D.s, D.host_threads));
	DB_CK(cudaStreamSynchronize(D.s));
	last_phases.ms_upload = gc_now_ms() - t0;
	tr("uploaded; n", n);

	if (index != GC_DBSCAN_GPU_BRUTE && d <= 3)
	{
		if (d == 1)
			rc = db_grid<1>(D, ctx, Xd, ni, d, eps2, minp, labels, is_core, &applied, st);
		else if (d == 2)
			rc = db_grid<2>(D, ctx, Xd, ni, d, eps2, minp, labels, is_core, &applied, st);
		else
			rc = db_grid<3>(D, ctx, Xd, ni, d, eps2, minp, labels, is_core, &applied, st);
		if (rc != GC_OK)
			return rc;
		if (applied && used != NULL)
			*used = GC_DBSCAN_GPU_GRID;
	}
	if (!applied)
	{
		rc = db_brute(D, ctx, Xd, ni, d, eps2, minp, labels, is_core, st);
		if (rc != GC_OK)
			return rc;
		if (used != NULL)
			*used = GC_DBSCAN_GPU_BRUTE;
	}
	t0 = gc_now_ms();
	D.release();
	last_phases.ms_free = gc_now_ms() - t0;
	last_phases.ms_total = gc_now_ms() - t_all;
	tr("done", 0);
	return GC_OK;
}

extern "C" gc_code
gc_dbscan_gpu(const gc_ctx *ctx, const float *X, int64_t n, int d,
			  const gc_dbscan_params *p, int32_t *labels, uint8_t *is_core,
			  gc_status *st)
{
	return gc_dbscan_gpu_index(ctx, X, n, d, p, GC_DBSCAN_GPU_AUTO, NULL,
							   labels, is_core, st);
}

extern "C" size_t
gc_dbscan_gpu_mem_bytes(int64_t n, int d)
{
	/*
	 * Input (4d) plus, per point: grid — sorted copy (<= 16), keys and
	 * values twice (24), cells (<= 4 + 4 + 8 + 24 + 1 + 8), ktab and its
	 * scan (<= 32), core, parent, roots (9), numbering (21), CUB scratch
	 * (<= 24); brute force — compacted copy (4d) and ~40.  An upper bound.
	 */
	size_t		per = (size_t) 8 * (size_t) d + 200;

	return (size_t) n * per + ((size_t) 16 << 20);
}
