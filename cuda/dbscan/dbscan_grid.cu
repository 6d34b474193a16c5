/*
 * dbscan_grid.cu — the GPU DBSCAN's uniform grid, for d <= 3.
 *
 * The cells are the CPU grid's (grid_plan.h: the same plan, the same cell
 * key of each point): a neighbour is at most 2 cells away per dimension,
 * and a cell whose box has gc_dist2(lo, hi) <= eps2 holds mutual
 * neighbours only ("dense").  The extent is a device reduction; points are
 * sorted by key (32 bits when the keys fit) with CUB's radix sort; cells
 * found by a scan; neighbour cells through a key -> cell table (key space
 * <= 8n) or a binary search.  Then one thread per point (per cell for the
 * cells' boxes and the dense unions), in chunks so the cancel flags are
 * seen:
 *   core    count neighbours, stopping at min_pts, whole cells at once
 *           where the box bounds decide; a dense cell with >= min_pts
 *           points is all core;
 *   union   join core neighbours in the union-find, or what implies their
 *           join: the core points of a dense cell start as one component;
 *           two dense cells are joined once, by a thread that finds one pair
 *           of neighbouring core points (most cells in clustered data are
 *           dense, so this is the bulk of the work, done per cell pair and
 *           not per point), first with the cells on their upper faces, so
 *           that the pass over every pair finds most already joined; a
 *           core point of a cell that is not dense joins its core
 *           neighbours, or a dense cell at the first one it reaches;
 *   border  a non-core point takes the core neighbour of least
 *           (dist2 bits, input row): the nearest, ties to the lowest row.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_scan.cuh>

#include "dbscan_gpu.cuh"
#include "dbscan/grid_plan.h"

#define FLAT_RUN 48				/* as dbscan_grid.c: runs this short go point by point */
#define GRID_CHUNK (1 << 22)	/* points per grid launch (cancel granularity) */

/* Order-preserving int image of a float (for atomicMin/Max). */
__device__ __forceinline__ int
f2o(float f)
{
	int			i = __float_as_int(f);

	return i >= 0 ? i : i ^ 0x7fffffff;
}

/* lo, hi: the least and greatest over the warp, in every lane. */
__device__ __forceinline__ void
warp_minmax(float &lo, float &hi)
{
	for (int o = 16; o > 0; o >>= 1)
	{
		float		a = __shfl_xor_sync(0xffffffffu, lo, o),
					b = __shfl_xor_sync(0xffffffffu, hi, o);

		lo = a < lo ? a : lo;
		hi = b > hi ? b : hi;
	}
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
		warp_minmax(lo[k], hi[k]);
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

/*
 * The kernels up to the cells take the keys as K: 32 bits when the plan's
 * keys fit (gp.key_bits <= 32), which halves the bytes the sort moves for
 * them, else 64.
 */
template <typename K>
__global__ void
k_keys(const float *__restrict__ X, int n, int d, gc_grid_plan gp,
	   K *keys, int *idx)
{
	int			i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i >= n)
		return;
	keys[i] = (K) gc_grid_key(&gp, X + (int64_t) i * d, d);
	idx[i] = i;
}

/* P[pos] = X[perm[pos]] (stride dp); flag[pos] = first point of a cell. */
template <typename K>
__global__ void
k_gather(const float *__restrict__ X, const int *__restrict__ perm, int n,
		 int d, int dp, const K *__restrict__ keys, float *P, int *flag)
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
template <typename K>
__global__ void
k_cells(const K *__restrict__ keys, const int *__restrict__ flag,
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
	int		   *croot;			/* ncell: a dense cell's root after the faces' joins, or -1 */
	int			ncell;
	int			nrows;
	float		eps2;
	unsigned	minp;
	int64_t		rowoff[GC_GRID_MAX_ROWS];
	uint64_t	stride[3];		/* the plan's: a cell's upper face neighbours */
};

/*
 * Boxes and density of each cell: one thread per cell.  Cells hold a few
 * points (a cell's diagonal is under eps), so a warp per cell would leave
 * most of its lanes idle.
 */
template <int D>
__global__ void
k_cell_box(const float *__restrict__ P, const int *__restrict__ cstart,
		   int ncell, float eps2, float *lo, float *hi, uint8_t *dense)
{
	const int	c = blockIdx.x * blockDim.x + threadIdx.x;

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
	for (int s = b; s < e; s++)
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
	{
		lo[(int64_t) c * D + k] = l[k];
		hi[(int64_t) c * D + k] = h[k];
	}
	dense[c] = gc_dist2(l, h, D) <= eps2;
}

/* Core points per cell and the first of them: one thread per cell. */
__global__ void
k_cell_core(const uint8_t *__restrict__ core, const int *__restrict__ cstart,
			int ncell, int *ncore, int *rep)
{
	const int	c = blockIdx.x * blockDim.x + threadIdx.x;

	if (c >= ncell)
		return;
	int			b = cstart[c],
				e = cstart[c + 1];
	int			cnt = 0,
				first = -1;

	for (int s = b; s < e; s++)
		if (core[s])
		{
			first = first < 0 ? s : first;
			cnt++;
		}
	ncore[c] = cnt;
	rep[c] = first;
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
				cnt += gc_dist2(x, y, D) <= eps2;
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

					if (gc_box_mindist2(x, lo, hi, D) > eps2)
						continue;
					if (gc_box_maxdist2(x, lo, hi, D) <= eps2)
					{
						cnt += qe - qb;
						continue;
					}
				}
				for (int s = qb; s < qe; s++)
				{
					ldp<D>(g.P, s, y);
					cnt += gc_dist2(x, y, D) <= eps2;
				}
			}
	}
	g.core[p] = cnt >= minp;
}

/*
 * The union-find's start: the core points of a dense cell hang under its
 * first core point (rep, the least position among them): a dense cell's
 * core points are one component.  Every other point is its own root.
 */
__global__ void
k_uf_init(const uint8_t *__restrict__ core, const int *__restrict__ cellOf,
		  const uint8_t *__restrict__ dense, const int *__restrict__ rep,
		  int n, int *parent)
{
	int			p = blockIdx.x * blockDim.x + threadIdx.x;

	if (p >= n)
		return;
	int			c = cellOf[p];

	parent[p] = core[p] && dense[c] ? rep[c] : p;
}

/*
 * Joins dense cells c < q, both with core points, when some core point of
 * c and some core point of q are neighbours.  Pairs already in one
 * component are skipped, the box bounds decide many of the others, and
 * the search stops at the first pair found.
 */
template <int D>
__device__ __forceinline__ void
dense_pair(const grid_dev &g, int c, int q)
{
	/* one component already when the faces' joins were done (croot[c] >= 0) */
	if (g.croot != nullptr && g.croot[c] == g.croot[q])
		return;
	if (!g.dense[q] || g.ncore[q] == 0)
		return;
	const float eps2 = g.eps2;
	const float *clo = g.lo + (int64_t) c * D,
			   *chi = g.hi + (int64_t) c * D,
			   *qlo = g.lo + (int64_t) q * D,
			   *qhi = g.hi + (int64_t) q * D;

	if (gc_boxbox_mindist2(clo, chi, qlo, qhi, D) > eps2)
		return;
	const int	rc = g.rep[c],
				rq = g.rep[q];
	int		   *parent = g.parent;

	if (uf_find(parent, rc) == uf_find(parent, rq))
		return;
	bool		hit = gc_boxbox_maxdist2(clo, chi, qlo, qhi, D) <= eps2;
	const int	ce = g.cstart[c + 1],
				qe = g.cstart[q + 1];

	for (int i = rc; i < ce && !hit; i++)
	{
		if (!g.core[i])
			continue;
		float		x[D],
					y[D];

		ldp<D>(g.P, i, x);
		if (gc_box_mindist2(x, qlo, qhi, D) > eps2)
			continue;
		for (int j = rq; j < qe; j++)
		{
			if (!g.core[j])
				continue;
			ldp<D>(g.P, j, y);
			if (gc_dist2(x, y, D) <= eps2)
			{
				hit = true;
				break;
			}
		}
	}
	if (hit)
		uf_union(parent, rc, rq);
}

/*
 * Unions between dense cells, one thread per dense cell c with core
 * points, with each dense cell q > c around it (dense_pair).  (A thread
 * per cell, not per point: the work is per cell pair.  Measured on an
 * H100, 10M 2-d points in cells of about 5: 3.4 ms, against 11.8 ms a
 * thread per point and 15.1 ms a warp per cell.)
 */
template <int D>
__global__ void __launch_bounds__(DB_THREADS)
k_grid_union_dense(grid_dev g, int c0, int c1)
{
	const int	c = c0 + blockIdx.x * blockDim.x + threadIdx.x;

	if (c >= c1 || !g.dense[c] || g.ncore[c] == 0)
		return;
	const uint64_t kc = g.ckey[c];

	for (int r = 0; r < g.nrows; r++)
	{
		int			a,
					bb;

		if (!row_cells(g, kc, r, a, bb))
			continue;
		for (int q = a > c + 1 ? a : c + 1; q < bb; q++)
			dense_pair<D>(g, c, q);
	}
}

/*
 * The same unions, first with the cells that share a face with c on its
 * upper side only (key + stride[k]): inside a cluster these make most of
 * the joins, so that k_grid_union_dense, run after, finds most of its
 * pairs already in one component and skips them.  The components, and so
 * every label, are the same either way: only joins that
 * k_grid_union_dense would make are made, and each component's root is
 * its least position whatever the order of the joins.
 */
template <int D>
__global__ void __launch_bounds__(DB_THREADS)
k_grid_union_faces(grid_dev g, int c0, int c1)
{
	const int	c = c0 + blockIdx.x * blockDim.x + threadIdx.x;

	if (c >= c1 || !g.dense[c] || g.ncore[c] == 0)
		return;
	const uint64_t kc = g.ckey[c];

#pragma unroll
	for (int k = 0; k < D; k++)
	{
		const uint64_t kq = kc + g.stride[k];
		const int	q = cell_at_or_after(g, kq);

		if (q < g.ncell && g.ckey[q] == kq)
			dense_pair<D>(g, c, q);
	}
}

/*
 * Each dense cell's root after the faces' joins (croot; -1 for a cell that
 * is not dense or has no core point), found once (uf_find compresses the
 * path).  k_grid_union_dense skips a pair of cells whose roots were equal
 * here, with one load, and the finds of the pairs left are short.
 * Components only merge, so equal roots here stay one component.
 */
__global__ void
k_grid_flatten(grid_dev g, int c0, int c1)
{
	const int	c = c0 + blockIdx.x * blockDim.x + threadIdx.x;

	if (c < c1)
		g.croot[c] = g.dense[c] && g.ncore[c] > 0 ? uf_find(g.parent, g.rep[c]) : -1;
}

/*
 * Unions of core point p in a cell c that is not dense with the core
 * points around it (edges between two dense cells: k_grid_union_dense):
 *   q dense:      p joins q at its first core neighbour in q;
 *   q not dense:  every core neighbour t > p in q.
 */
template <int D>
__global__ void __launch_bounds__(DB_THREADS)
k_grid_union(grid_dev g, int p0, int p1)
{
	int			p = p0 + blockIdx.x * blockDim.x + threadIdx.x;

	if (p >= p1 || !g.core[p])
		return;
	const int	c = g.cellOf[p];

	if (g.dense[c])
		return;
	const float eps2 = g.eps2;
	const uint64_t kc = g.ckey[c];
	int		   *parent = g.parent;
	float		x[D],
				y[D];
	int			rs = -1;

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

			if (!qd && qe - 1 <= p)
				continue;
			const float *lo = g.lo + (int64_t) q * D,
					   *hi = g.hi + (int64_t) q * D;

			if (gc_box_mindist2(x, lo, hi, D) > eps2)
				continue;
			if (qd)
			{
				const int	rq = g.rep[q];

				if (uf_find(parent, p) == uf_find(parent, rq))
					continue;
				if (gc_box_maxdist2(x, lo, hi, D) <= eps2)
				{
					uf_union(parent, p, rq);
					continue;
				}
				for (int t = rq; t < qe; t++)
				{
					if (!g.core[t])
						continue;
					ldp<D>(g.P, t, y);
					if (gc_dist2(x, y, D) <= eps2)
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
					if (gc_dist2(x, y, D) <= eps2)
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
				gc_box_mindist2(x, g.lo + (int64_t) q * D, g.hi + (int64_t) q * D, D) > bestd)
				continue;
			const int	qe = g.cstart[q + 1];

			for (int t = g.rep[q]; t < qe; t++)
			{
				if (!g.core[t])
					continue;
				ldp<D>(g.P, t, y);
				float		dd = gc_dist2(x, y, D);

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

/* The grid's per-point and per-cell phases (grid_phase). */
enum grid_step
{
	GS_CORE,					/* k_grid_core, per point */
	GS_UNION_FACES,				/* k_grid_union_faces, per cell */
	GS_FLATTEN,					/* k_grid_flatten, per cell */
	GS_UNION_DENSE,				/* k_grid_union_dense, per cell */
	GS_UNION,					/* k_grid_union, per point */
	GS_BORDER					/* k_grid_resolve, per point */
};

/*
 * Runs one grid step, a thread per point (or cell), in chunks of
 * GRID_CHUNK threads, polling the cancel flags between chunks.
 */
template <int DD>
static gc_code
grid_phase(db_dev &D, const gc_ctx *ctx, const grid_dev &g, int n,
		   grid_step step, gc_status *st)
{
	static const char *const what[] = {"grid core chunk", "grid faces union chunk",
		"grid flatten chunk", "grid dense union chunk", "grid union chunk",
	"grid border chunk"};
	const bool	per_cell = step == GS_UNION_FACES || step == GS_FLATTEN ||
		step == GS_UNION_DENSE;
	const int	items = per_cell ? g.ncell : n;
	void		(*kern) (grid_dev, int, int) =
		step == GS_CORE ? k_grid_core<DD> :
		step == GS_UNION_FACES ? k_grid_union_faces<DD> :
		step == GS_FLATTEN ? k_grid_flatten :
		step == GS_UNION_DENSE ? k_grid_union_dense<DD> :
		step == GS_UNION ? k_grid_union<DD> : k_grid_resolve<DD>;

	for (int i0 = 0; i0 < items; i0 += GRID_CHUNK)
	{
		int			i1 = items - i0 < GRID_CHUNK ? items : i0 + GRID_CHUNK;

		DB_CK(gc_launch(kern, i1 - i0, DB_THREADS, DB_THREADS, D.s, g, i0, i1));
		gc_code		rc = db_sync_poll(D, ctx, st);

		if (rc != GC_OK)
			return rc;
		db_trace(what[step], i1);
	}
	return GC_OK;
}

/*
 * Whether the dense cells' unions start with their faces
 * (k_grid_union_faces); GPUCLUST_DB_FACES=0 leaves that out, read once a
 * call.
 */
static bool
grid_faces_first(void)
{
	return db_env_on("GPUCLUST_DB_FACES");
}

/*
 * The points in cell order, with keys of K bits: each point's cell key
 * (k_keys), the keys sorted with their rows (CUB's radix sort: perm, a
 * position's input row), the points gathered in that order (P, stride
 * dp) with a 1 at each cell's first position, scanned (cellOf), and the
 * cells' starts and keys (cstart, ckey; ncell cells).  The keys and the
 * flags are freed in stream order once spent: later allocations reuse
 * them.
 */
template <typename K>
static gc_code
grid_sort(db_dev &D, const float *X, int n, int d, int dp, const gc_grid_plan &gp,
		  int *&perm, float *&P, int *&cellOf, int &ncell, int *&cstart,
		  unsigned long long *&ckey, gc_status *st)
{
	K		   *keys_in,
			   *keys;
	int		   *idx_in,
			   *flag;
	size_t		bytes = 0;

	DB_ALLOC(keys_in, n);
	DB_ALLOC(keys, n);
	DB_ALLOC(idx_in, n);
	DB_ALLOC(perm, n);
	DB_CK(gc_launch(k_keys<K>, n, DB_THREADS, DB_THREADS, D.s, X, n, d, gp, keys_in, idx_in));
	DB_CK(cub::DeviceRadixSort::SortPairs(nullptr, bytes, keys_in, keys, idx_in, perm,
										  n, 0, gp.key_bits, D.s));
	DB_CK(D.scratch(bytes));
	bytes = D.cub_bytes;
	DB_CK(cub::DeviceRadixSort::SortPairs(D.cub_tmp, bytes, keys_in, keys, idx_in, perm,
										  n, 0, gp.key_bits, D.s));
	/* the unsorted keys and rows are spent: they hold cellOf and flag */
	cellOf = (int *) keys_in;
	flag = idx_in;
	DB_ALLOC(P, (int64_t) n * dp);
	DB_CK(gc_launch(k_gather<K>, n, DB_THREADS, DB_THREADS, D.s, X, (const int *) perm, n, d,
					dp, (const K *) keys, P, flag));
	bytes = 0;
	DB_CK(cub::DeviceScan::InclusiveSum(nullptr, bytes, flag, cellOf, n, D.s));
	DB_CK(D.scratch(bytes));
	bytes = D.cub_bytes;
	DB_CK(cub::DeviceScan::InclusiveSum(D.cub_tmp, bytes, flag, cellOf, n, D.s));
	DB_CK(cudaMemcpyAsync(&ncell, cellOf + n - 1, sizeof(int), cudaMemcpyDeviceToHost, D.s));
	DB_CK(cudaStreamSynchronize(D.s));
	db_trace("sorted; cells", ncell);
	DB_ALLOC(cstart, (int64_t) ncell + 1);
	DB_ALLOC(ckey, ncell);
	DB_CK(gc_launch(k_cells<K>, n, DB_THREADS, DB_THREADS, D.s, (const K *) keys,
					(const int *) flag, cellOf, n, ncell, cstart, ckey));
	D.drop(keys);
	D.drop(flag);
	return GC_OK;
}

/* db_grid for DD = d. */
template <int DD>
static gc_code
db_grid_d(db_dev &D, const gc_ctx *ctx, const float *X, int n, int d,
		float eps2, unsigned minp, const db_out &out, bool *applied,
		gc_status *st)
{
	const int	dp = DD == 3 ? 4 : DD;
	int		   *mm;
	int			hmm[6];
	float		mn[3],
				mx[3];
	gc_grid_plan gp;
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
	if (!gc_grid_plan_make(d, eps2, mn, mx, &gp))
	{
		db_trace("grid plan refused", 0);
		return GC_OK;
	}
	*applied = true;
	db_trace("grid plan: key bits", gp.key_bits);

	int		   *perm,
			   *cellOf,
			   *cstart;
	unsigned long long *ckey;
	float	   *P;
	int			ncell;

	rc = gp.key_bits <= 32 ?
		grid_sort<uint32_t>(D, X, n, d, dp, gp, perm, P, cellOf, ncell, cstart, ckey, st) :
		grid_sort<unsigned long long>(D, X, n, d, dp, gp, perm, P, cellOf, ncell, cstart,
									  ckey, st);
	if (rc != GC_OK)
		return rc;

	grid_dev	g;
	int		   *ncore,
			   *rep,
			   *ktab = nullptr;
	float	   *lo,
			   *hi;
	uint8_t    *dense,
			   *core;

	memset(&g, 0, sizeof(g));
	DB_ALLOC(lo, (int64_t) ncell * DD);
	DB_ALLOC(hi, (int64_t) ncell * DD);
	DB_ALLOC(dense, ncell);
	DB_ALLOC(ncore, ncell);
	DB_ALLOC(rep, ncell);
	DB_ALLOC(core, n);
	/* one thread per cell */
	DB_CK(gc_launch(k_cell_box<DD>, ncell, DB_THREADS, DB_THREADS, D.s,
					(const float *) P, (const int *) cstart, ncell, eps2, lo, hi, dense));
	/* key -> cell table when the key space is not much larger than n
	 * (8n ints: O(n) memory, and O(1) neighbour-run lookups) */
	if (gp.nkeys <= (uint64_t) (n > (1 << 20) ? 8 * (int64_t) n : (1 << 23)) &&
		gp.nkeys < (uint64_t) INT32_MAX)
	{
		int64_t		nk1 = (int64_t) gp.nkeys + 1;

		/* 1 at each present key, then scanned in place */
		DB_ALLOC(ktab, nk1);
		DB_CK(cudaMemsetAsync(ktab, 0, sizeof(int) * (size_t) nk1, D.s));
		DB_CK(gc_launch(k_key_present, ncell, DB_THREADS, DB_THREADS, D.s,
						(const unsigned long long *) ckey, ncell, ktab));
		if ((rc = db_exclusive_sum(D, ktab, ktab, nk1, st)) != GC_OK)
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
	g.nrows = gc_grid_rows(&gp, d, g.rowoff);
	for (int k = 0; k < d; k++)
		g.stride[k] = gp.stride[k];
	if ((rc = db_sync_poll(D, ctx, st)) != GC_OK)
		return rc;
	db_trace("cells built; ktab", ktab != nullptr);
	db_phases.ms_index = gc_now_ms() - t0;
	db_phases.grid = 1;
	db_phases.ncell = ncell;

	/* core */
	t0 = gc_now_ms();
	if ((rc = grid_phase<DD>(D, ctx, g, n, GS_CORE, st)) != GC_OK)
		return rc;
	DB_CK(gc_launch(k_cell_core, ncell, DB_THREADS, DB_THREADS, D.s,
					(const uint8_t *) core, (const int *) cstart, ncell, ncore, rep));
	db_phases.ms_core = gc_now_ms() - t0;

	/* union */
	t0 = gc_now_ms();
	int		   *parent,
			   *rp;

	DB_ALLOC(parent, n);
	DB_ALLOC(rp, n);
	g.parent = parent;
	g.rp = rp;
	DB_CK(gc_launch(k_uf_init, n, DB_THREADS, DB_THREADS, D.s, (const uint8_t *) core,
					(const int *) cellOf, (const uint8_t *) dense, (const int *) rep,
					n, parent));
	if (grid_faces_first())
	{
		int		   *croot;

		DB_ALLOC(croot, ncell);
		if ((rc = grid_phase<DD>(D, ctx, g, n, GS_UNION_FACES, st)) != GC_OK)
			return rc;
		/* the roots are read from the next step on, once k_grid_flatten wrote them */
		g.croot = croot;
		if ((rc = grid_phase<DD>(D, ctx, g, n, GS_FLATTEN, st)) != GC_OK)
			return rc;
	}
	if ((rc = grid_phase<DD>(D, ctx, g, n, GS_UNION_DENSE, st)) != GC_OK ||
		(rc = grid_phase<DD>(D, ctx, g, n, GS_UNION, st)) != GC_OK)
		return rc;
	db_phases.ms_union = gc_now_ms() - t0;

	/* border and roots */
	t0 = gc_now_ms();
	if ((rc = grid_phase<DD>(D, ctx, g, n, GS_BORDER, st)) != GC_OK)
		return rc;
	db_phases.ms_border = gc_now_ms() - t0;

	/* only rp, perm and core are read from here on: the numbering reuses the rest */
	for (void *p : {(void *) P, (void *) parent, (void *) cellOf, (void *) cstart,
		(void *) ckey, (void *) lo, (void *) hi, (void *) dense, (void *) ncore,
		(void *) rep, (void *) ktab, (void *) g.croot})
		D.drop(p);
	return db_finish(D, n, rp, perm, core, out, st);
}

gc_code
db_grid(db_dev &D, const gc_ctx *ctx, const float *X, int n, int d,
		float eps2, unsigned minp, const db_out &out, bool *applied,
		gc_status *st)
{
	if (d == 1)
		return db_grid_d<1>(D, ctx, X, n, d, eps2, minp, out, applied, st);
	if (d == 2)
		return db_grid_d<2>(D, ctx, X, n, d, eps2, minp, out, applied, st);
	return db_grid_d<3>(D, ctx, X, n, d, eps2, minp, out, applied, st);
}
