/*
 * kmeans_grid.cu — the exact assignment at d <= 3 through a uniform grid
 * over the data's bounding box, so that a row computes its distance to a
 * few candidate centres instead of all k.  The labels are the CPU's
 * (gc_km_assign) bit for bit, with no tolerance:
 *
 *   - Every cell has float edges (rounded outwards, widened by 2^-20 of the
 *     feature's range), and a row goes to the cell its coordinates fall in
 *     ((x - lo) * invw in float, three roundings: at most 3.01 u of the
 *     range off, well inside the widening).  The kernel checks that the
 *     row lies within its cell's edges; a row that did not would be
 *     compared with every centre.
 *   - metric.h's box bounds are exact in float: for every row x in the
 *     cell, gc_box_mindist2(c, cell) <= gc_dist2(x, c) <=
 *     gc_box_maxdist2(c, cell).  With U = the least gc_box_maxdist2 over
 *     the centres (centre m), a centre whose gc_box_mindist2 > U has
 *     gc_dist2(x, c) > U >= gc_dist2(x, c_m) for every such x: it is
 *     never a row's nearest, and never ties with it.  The candidates are
 *     the other centres (m among them), in increasing order, and the row
 *     takes the first smallest gc_dist2 among them: the CPU's argmin over
 *     all k, ties to the lowest index.
 *
 * Each prepared set of centres (km_prep: Lloyd's, the inertia's, k-means||'s
 * batches) rebuilds the lists: one warp per cell, one pass for U and one
 * per 32 centres to list them (ballot), a cell's entries taken from a
 * shared pool with one atomic.  A cell with more than GRID_CAP candidates,
 * or past the pool's end, is marked full: its rows compare with every
 * centre.  The cells number about 16 per centre (d <= 2) or 32 (d = 3),
 * at most 32768 and n / 8: in a host simulation of this rule on the benchmark's
 * blobs after a few Lloyd steps (k = 100 and 1000), a row has 1.6-4.5
 * candidates on average, and the worst of a warp's 32 rows, which is what
 * the warp pays, 3.7-10.  The assignment reads the lists (4 bytes a cell,
 * 2 a candidate) and the candidates' coordinates through the L1 cache.
 *
 * Used when d <= 3, 16 <= k <= 65535, n >= 256 k and the features are not
 * all constant, until an iteration's warps pay for more than a third of
 * the n k distances of the exact path (rows crowded into a few cells, as
 * beside a far outlier: km_grid_adapt); GPUCLUST_KM_GRID=0 turns it off
 * (tests compare both).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <type_traits>

#include "kmeans_dev.cuh"

#define GRID_CAP 254			/* candidates a cell lists; past this, full */
#define GRID_FULL 0xFFu
#define GRID_THREADS 256
#define GRID_P 8				/* rows a thread assigns */
#define GRID_BUILD_WARPS 8

/* A cell's edges (D features) from its number. */
template <int D>
__device__ __forceinline__ void
grid_box(const km_grid_geo &g, const float *__restrict__ edge, int cell,
		 float *blo, float *bhi)
{
#pragma unroll
	for (int t = 0; t < D; t++)
	{
		const int	q = cell % g.G[t];

		cell /= g.G[t];
		blo[t] = edge[g.eoff[t] + q];
		bhi[t] = edge[g.eoff[t] + g.G[t] + q];
	}
}

/*
 * One warp per cell: U, then the centres whose lower bound is at most U,
 * in increasing order.  cpk: k centres of 4 floats (the exact path's
 * layout, km_prep).
 */
template <int D>
__global__ void __launch_bounds__(32 * GRID_BUILD_WARPS)
k_grid_build(km_grid_geo g, const float *__restrict__ edge,
			 const float4 *__restrict__ cpk, int k, uint32_t *__restrict__ hdr,
			 uint16_t *__restrict__ ids, int pool, unsigned *used)
{
	const int	lane = threadIdx.x & 31;
	const int	cell = blockIdx.x * GRID_BUILD_WARPS + threadIdx.x / 32;
	float		blo[D],
				bhi[D],
				U = INFINITY;
	int			cnt = 0;
	unsigned	off = 0;

	if (cell >= g.ncell)
		return;
	grid_box<D>(g, edge, cell, blo, bhi);
	for (int j = lane; j < k; j += 32)
	{
		const float4 c4 = cpk[j];
		const float c[4] = {c4.x, c4.y, c4.z, c4.w};

		U = fminf(U, gc_box_maxdist2(c, blo, bhi, D));
	}
#pragma unroll
	for (int o = 16; o >= 1; o >>= 1)
		U = fminf(U, __shfl_xor_sync(0xffffffffu, U, o));
	for (int pass = 0; pass < 2; pass++)
	{
		int			pos = 0;

		for (int j0 = 0; j0 < k; j0 += 32)
		{
			const int	j = j0 + lane;
			bool		cand = false;

			if (j < k)
			{
				const float4 c4 = cpk[j];
				const float c[4] = {c4.x, c4.y, c4.z, c4.w};

				cand = gc_box_mindist2_nb(c, blo, bhi, D) <= U;
			}
			const unsigned m = __ballot_sync(0xffffffffu, cand);

			if (pass == 1 && cand)
				ids[off + pos + __popc(m & ((1u << lane) - 1))] = (uint16_t) j;
			pos += __popc(m);
			if (pass == 0 && pos > GRID_CAP)
				break;
		}
		if (pass == 0)
		{
			cnt = pos;
			if (lane == 0 && cnt <= GRID_CAP)
				off = atomicAdd(used, (unsigned) cnt);
			off = __shfl_sync(0xffffffffu, off, 0);
			if (cnt > GRID_CAP || off + cnt > (unsigned) pool)
			{
				if (lane == 0)
					hdr[cell] = GRID_FULL;
				return;
			}
		}
	}
	if (lane == 0)
		hdr[cell] = off << 8 | (unsigned) cnt;
}

/* The running argmin of row x over centre j (the CPU's gc_dist2). */
template <int D>
__device__ __forceinline__ void
grid_try(const float *x, const float4 *__restrict__ cpk, int j, float *best,
		 int *lab)
{
	const float4 c4 = __ldg(cpk + j);
	const float c[4] = {c4.x, c4.y, c4.z, c4.w};
	float		a = gc_l2_first(x[0], c[0]);

#pragma unroll
	for (int t = 1; t < D; t++)
		a = gc_l2_step(a, x[t], c[t]);
	if (a < *best)
	{
		*best = a;
		*lab = j;
	}
}

/*
 * The assignment: a thread takes GRID_P rows 256 apart, loads their
 * coordinates and old labels at once (so that a thread has that many rows'
 * loads in flight), then walks each row's candidates.  The lists, edges
 * and centres are small and read through the L1 cache.
 */
template <int D>
__global__ void __launch_bounds__(GRID_THREADS)
k_assign_grid(const float *__restrict__ XT, int64_t n, km_grid_geo g,
			  const float *__restrict__ edge, const float4 *__restrict__ cpk,
			  int k, const uint32_t *__restrict__ hdr,
			  const uint16_t *__restrict__ ids, int32_t *__restrict__ labels,
			  unsigned long long *changed, unsigned long long *tries)
{
	const int64_t base = (int64_t) blockIdx.x * (GRID_THREADS * GRID_P) + threadIdx.x;
	float		x[GRID_P][D];
	int			old[GRID_P];
	int			ch = 0;
	unsigned	paid = 0;		/* the warp's: the most distances of its rows, summed */

#pragma unroll
	for (int p = 0; p < GRID_P; p++)
	{
		const int64_t i = base + p * GRID_THREADS;

#pragma unroll
		for (int t = 0; t < D; t++)
			x[p][t] = i < n ? XT[(int64_t) t * n + i] : 0.0f;
		old[p] = i < n ? labels[i] : 0;
	}
	static_assert(GRID_P == 8, "the unroll below");
#pragma unroll 8					/* GRID_P, or the loop is left rolled at D = 1 */
	for (int p = 0; p < GRID_P; p++)
	{
		const int64_t i = base + p * GRID_THREADS;
		bool		inside;
		float		best = INFINITY;
		int			lab = 0;
		uint32_t	h = 0;

		if (i < n)
		{
			const int	cell = km_grid_cell(g, edge, x[p], D, &inside);

			/* the loops rolled: a list is a few centres, and unrolled
			 * copies spilled at D = 1 */
			h = inside ? __ldg(hdr + cell) : GRID_FULL;
			if ((h & 0xFFu) == GRID_FULL)
#pragma unroll 1
				for (int j = 0; j < k; j++)
					grid_try<D>(x[p], cpk, j, &best, &lab);
			else
			{
				const uint16_t *l = ids + (h >> 8);

#pragma unroll 1
				for (int m = 0; m < (int) (h & 0xFFu); m++)
					grid_try<D>(x[p], cpk, __ldg(l + m), &best, &lab);
			}
			ch += old[p] != lab;
			labels[i] = lab;
		}
		paid += __reduce_max_sync(0xffffffffu, i >= n ? 0u :
								  (h & 0xFFu) == GRID_FULL ? (unsigned) k : h & 0xFFu);
	}
	{
		const unsigned w = __reduce_add_sync(0xffffffffu, (unsigned) ch);

		if ((threadIdx.x & 31) == 0 && w != 0)
			atomicAdd(changed, (unsigned long long) w);
		if ((threadIdx.x & 31) == 0)
			atomicAdd(tries, 32ull * paid);
	}
}

/* ---- host side ---- */

/* The float at or below (dir < 0) / above (dir > 0) the double v. */
static float
round_out(double v, int dir)
{
	float		f = (float) v;

	if (dir < 0 && (double) f > v)
		f = nextafterf(f, -INFINITY);
	if (dir > 0 && (double) f < v)
		f = nextafterf(f, INFINITY);
	return f;
}

gc_code
km_grid_plan(km_dev &D, const float *lo, const float *hi, gc_status *st)
{
	const char *env = getenv("GPUCLUST_KM_GRID");
	const int	d = D.d,
				k = D.k;
	double		ext[3] = {0, 0, 0},
				vol = 1.0;
	int			nd = 0;
	int64_t		target;
	km_grid_geo &g = D.geo;
	float	   *h;

	D.grid = false;
	if (!D.small || d > 3 || k < 16 || k > 65535 || D.n < (int64_t) 256 * k ||
		(env && strcmp(env, "0") == 0))
		return GC_OK;
	for (int t = 0; t < d; t++)
	{
		ext[t] = (double) hi[t] - (double) lo[t];
		if (ext[t] > 0)
		{
			nd++;
			vol *= ext[t];
		}
	}
	if (nd == 0)
		return GC_OK;
	target = (int64_t) (d == 3 ? 32 : 16) * k;
	if (target > 32768)
		target = 32768;
	if (target > D.n / 8)
		target = D.n / 8;
	{
		const double s = pow((double) target / vol, 1.0 / nd);

		g.ncell = 1;
		for (int t = 0; t < 3; t++)
		{
			double		c = t < d && ext[t] > 0 ? floor(ext[t] * s) : 1.0;

			g.G[t] = c < 1 ? 1 : (c > 4096 ? 4096 : (int) c);
			g.ncell *= g.G[t];
		}
		/* a feature far narrower than the others keeps one cell, which
		 * can leave the others too many: halve the finest */
		while (g.ncell > target)
		{
			int			f = g.G[0] >= g.G[1] ? 0 : 1;

			f = g.G[f] >= g.G[2] ? f : 2;
			g.ncell /= g.G[f];
			g.G[f] = (g.G[f] + 1) / 2;
			g.ncell *= g.G[f];
		}
	}
	if (g.ncell < 2)
		return GC_OK;
	g.eoff[0] = 0;
	g.eoff[1] = 2 * g.G[0];
	g.eoff[2] = g.eoff[1] + 2 * g.G[1];
	h = (float *) malloc(sizeof(float) * 2 * (g.G[0] + g.G[1] + g.G[2]));
	if (h == NULL)
		return gc_fail(st, GC_ENOMEM, "GPU k-means: out of memory");
	for (int t = 0; t < 3; t++)
	{
		const double w = t < d ? ext[t] / g.G[t] : 0.0,
					marg = t < d ? ext[t] * 0x1.0p-20 : 0.0,
					l = t < d ? (double) lo[t] : 0.0;

		g.lo[t] = (float) l;
		g.invw[t] = ext[t] > 0 ? (float) (g.G[t] / ext[t]) : 0.0f;
		for (int i = 0; i < g.G[t]; i++)
		{
			h[g.eoff[t] + i] = t < d ? round_out(l + i * w - marg, -1) : 0.0f;
			h[g.eoff[t] + g.G[t] + i] = t < d ?
				(i == g.G[t] - 1 ? round_out((double) hi[t] + marg, 1) :
				 round_out(l + (i + 1) * w + marg, 1)) : 0.0f;
		}
	}
	D.gpool = (int) (8 * (int64_t) g.ncell > 16384 ? 8 * (int64_t) g.ncell : 16384);
	{
		const size_t eb = sizeof(float) * 2 * (g.G[0] + g.G[1] + g.G[2]);
		cudaError_t e = gc_dalloc((void **) &D.gedge, eb, D.s);

		if (e == cudaSuccess)
			e = cudaMemcpyAsync(D.gedge, h, eb, cudaMemcpyHostToDevice, D.s);
		if (e == cudaSuccess)
			e = cudaStreamSynchronize(D.s);
		free(h);
		if (e != cudaSuccess)
			return km_cuda_fail(st, e, "the grid's edges");
	}
	KM_ALLOC(D.ghdr, g.ncell);
	KM_ALLOC(D.gids, D.gpool);
	KM_ALLOC(D.gused, 1);
	D.grid = true;
	return GC_OK;
}

/* launch(std::integral_constant<int, d>) for D.d in 1..3 */
template <class F>
static gc_code
grid_launch(const km_dev &D, F &&launch, gc_status *st)
{
	switch (D.d)
	{
		case 1:
			launch(std::integral_constant<int, 1>());
			break;
		case 2:
			launch(std::integral_constant<int, 2>());
			break;
		case 3:
			launch(std::integral_constant<int, 3>());
			break;
		default:
			return gc_fail(st, GC_EINTERNAL, "GPU k-means: no grid for d = %d", D.d);
	}
	KM_LAUNCHED();
	return GC_OK;
}

gc_code
km_grid_build(km_dev &D, gc_status *st)
{
	const unsigned g = blocks_for(D.geo.ncell, GRID_BUILD_WARPS);
	const float4 *c = (const float4 *) D.cpk;

	KM_CK(cudaMemsetAsync(D.gused, 0, sizeof(unsigned), D.s));
	return grid_launch(D, [&](auto dd) {
		k_grid_build<dd.value><<<g, 32 * GRID_BUILD_WARPS, 0, D.s>>>(
			D.geo, D.gedge, c, D.k, D.ghdr, D.gids, D.gpool, D.gused);
	}, st);
}

gc_code
km_grid_assign(km_dev &D, gc_status *st)
{
	const float4 *c = (const float4 *) D.cpk;
	const unsigned g = blocks_for(D.n, GRID_THREADS * GRID_P);

	return grid_launch(D, [&](auto dd) {
		k_assign_grid<dd.value><<<g, GRID_THREADS, 0, D.s>>>(
			D.XT, D.n, D.geo, D.gedge, c, D.k, D.ghdr, D.gids, D.labels,
			&D.info->changed, &D.info->grid_tries);
	}, st);
}

void
km_grid_adapt(km_dev &D)
{
	if (D.grid && D.h_info->grid_tries * 3 > (unsigned long long) D.n * D.k)
		D.grid = false;
}
