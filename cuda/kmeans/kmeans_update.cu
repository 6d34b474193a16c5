/*
 * kmeans_update.cu — the update step of the GPU k-means: per-cluster sums
 * of the rows under the current labels, the new means, and the re-seeding
 * of empty clusters (with sample weights the sums are kmeans_weighted.cu's;
 * the means, normalized under cosine, are km_finalize's either way).
 *
 * Sums are 64-bit fixed point (each feature scaled by a power of two chosen
 * from its largest |x| and n so that no sum can overflow: D.scale, set by
 * km_setup).  Integer sums are exact and order-independent: the update is
 * deterministic, and the means equal the CPU's double means (gc_km_update)
 * except where the double sums themselves round.  Three ways to the same
 * slots, bit for bit, chosen once per problem (km_update_plan):
 *   - k_update_smem: accumulated in shared memory (replicated per lane group
 *     when k is small, so a small k does not serialise on a few addresses)
 *     and flushed with one global atomic per slot and block (64-bit shared
 *     adds as two 32-bit atomics with carry);
 *   - when k(d+1) does not fit in shared memory: a counting sort of the
 *     rows by label, then runs of the sorted rows summed from a row-major
 *     copy of X, one global atomic per feature where the label changes
 *     (k_update_segments; buffers: km_update_alloc);
 *   - global atomics (k_update_global) when that copy's memory is not
 *     there.
 * k_finalize takes the means (float), the empty-cluster count and the
 * squared centre shift.  Empty clusters are re-seeded exactly as the CPU
 * does (rows farthest from their centres, farthest to the lowest empty id;
 * never a row on its centre) on an extra, rare path (km_reseed).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cub/block/block_reduce.cuh>
#include <cub/device/device_scan.cuh>

#include "kmeans_dev.cuh"

#define UPD_THREADS 256

__device__ __forceinline__ unsigned long long
to_fixed(float x, double scale)
{
	return (unsigned long long) __double2ll_rn((double) x * scale);
}

/*
 * 64-bit add into shared memory as two native 32-bit atomics (a 64-bit
 * shared atomic add is a compare-and-swap loop): the low word's carry goes
 * into the high word.  Exact once every add has landed.
 */
__device__ __forceinline__ void
shared_add64(unsigned long long *p, unsigned long long v)
{
	unsigned   *q = (unsigned *) p;
	const unsigned lo = (unsigned) v;
	unsigned	hi = (unsigned) (v >> 32);
	const unsigned old = atomicAdd(q, lo);

	hi += (old + lo) < old;
	if (hi != 0)
		atomicAdd(q + 1, hi);
}

/*
 * Shared-memory privatised sums: R replicas of k x (d+1) slots (the last
 * slot counts rows); lane l adds into replica l % R.  Then one global
 * atomic per slot per block.
 */
__global__ void __launch_bounds__(UPD_THREADS)
k_update_smem(const float *__restrict__ XT, int64_t n, int d,
			  const int32_t *__restrict__ labels, int k, int R,
			  const double *__restrict__ scale, unsigned long long *gsum)
{
	extern __shared__ unsigned long long sh[];
	const int	slots = k * (d + 1);
	unsigned long long *my = sh + (size_t) (threadIdx.x & (R - 1)) * slots;

	for (int e = threadIdx.x; e < R * slots; e += blockDim.x)
		sh[e] = 0;
	__syncthreads();
	for (int64_t i = (int64_t) blockIdx.x * blockDim.x + threadIdx.x; i < n;
		 i += (int64_t) gridDim.x * blockDim.x)
	{
		unsigned long long *row = my + (size_t) labels[i] * (d + 1);

		for (int j = 0; j < d; j++)
			shared_add64(row + j, to_fixed(XT[(int64_t) j * n + i], scale[j]));
		atomicAdd((unsigned *) (row + d), 1u);	/* < 2^32 rows per block */
	}
	__syncthreads();
	for (int e = threadIdx.x; e < slots; e += blockDim.x)
	{
		unsigned long long v = 0;

		for (int r = 0; r < R; r++)
			v += sh[(size_t) r * slots + e];
		if (v != 0)
			atomicAdd(gsum + e, v);
	}
}

/*
 * Global atomics: a warp takes 32 consecutive rows, then row by row its
 * lanes add the features (cached lines of XT are reused across the rows).
 */
__global__ void __launch_bounds__(UPD_THREADS)
k_update_global(const float *__restrict__ XT, int64_t n, int d,
				const int32_t *__restrict__ labels,
				const double *__restrict__ scale, unsigned long long *gsum)
{
	const int	lane = threadIdx.x & 31;
	const int64_t nw = (int64_t) gridDim.x * (blockDim.x / 32);

	for (int64_t w = (int64_t) blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
		 w * 32 < n; w += nw)
	{
		const int64_t i0 = w * 32;
		const int	m = (int) (n - i0 < 32 ? n - i0 : 32);
		int			mylab = lane < m ? labels[i0 + lane] : 0;

		for (int p = 0; p < m; p++)
		{
			const int	c = __shfl_sync(0xffffffffu, mylab, p);
			unsigned long long *row = gsum + (size_t) c * (d + 1);

			for (int j = lane; j < d; j += 32)
				atomicAdd(row + j, to_fixed(XT[(int64_t) j * n + i0 + p], scale[j]));
			if (lane == 0)
				atomicAdd(row + d, 1ull);
		}
	}
}

#define LS_THREADS 512
#define LS_ROWS 4096			/* rows per block, at least */

/*
 * Sort-by-label update (the large k(d+1) case, in place of the global
 * atomics): a counting sort of the row numbers by label (the order inside
 * a cluster does not matter, the sums are integers), then
 * k_update_segments.  These two count with warp-aggregated global atomics,
 * for a k whose counts do not fit in shared memory; k_label_sort below
 * otherwise.
 */
__global__ void
k_label_hist(const int32_t *__restrict__ labels, int64_t n, int *cnt)
{
	for (int64_t i = (int64_t) blockIdx.x * blockDim.x + threadIdx.x; i < n;
		 i += (int64_t) gridDim.x * blockDim.x)
	{
		const int	lab = labels[i];
		const unsigned m = __match_any_sync(__activemask(), lab);

		if ((threadIdx.x & 31) == __ffs(m) - 1)
			atomicAdd(cnt + lab, __popc(m));
	}
}

__global__ void
k_label_scatter(const int32_t *__restrict__ labels, int64_t n, int *cursor,
				int32_t *perm)
{
	const int	lane = threadIdx.x & 31;

	for (int64_t i = (int64_t) blockIdx.x * blockDim.x + threadIdx.x; i < n;
		 i += (int64_t) gridDim.x * blockDim.x)
	{
		const int	lab = labels[i];
		const unsigned m = __match_any_sync(__activemask(), lab);
		const int	leader = __ffs(m) - 1;
		int			base = 0;

		if (lane == leader)
			base = atomicAdd(cursor + lab, __popc(m));
		base = __shfl_sync(m, base, leader);
		perm[base + __popc(m & ((1u << lane) - 1))] = (int32_t) i;
	}
}

/*
 * The same counting sort with the counts in shared memory (k ints fit):
 * block b takes the rows [b per_block, (b + 1) per_block), counts them by
 * label in shared memory, then adds each label's count to cnt (PASS 0) or
 * takes that many slots from cursor and writes its rows there (PASS 1:
 * the counts again, the slots' starts in shared memory, then the rows).
 * One global atomic per label and block instead of one per row: at 1M
 * rows, k = 1000, the per-row atomics queued on each label's address (93 µs
 * for the counts, 100 µs for the scatter on an H100).
 */
template <int PASS>
__global__ void __launch_bounds__(LS_THREADS)
k_label_sort(const int32_t *__restrict__ labels, int64_t n, int64_t per_block, int k,
			 int *glob, int32_t *__restrict__ perm)
{
	extern __shared__ int lh[];
	const int64_t r0 = (int64_t) blockIdx.x * per_block,
				r1 = min(n, r0 + per_block);

	for (int c = threadIdx.x; c < k; c += LS_THREADS)
		lh[c] = 0;
	__syncthreads();
	for (int64_t i = r0 + threadIdx.x; i < r1; i += LS_THREADS)
		atomicAdd(&lh[labels[i]], 1);
	__syncthreads();
	for (int c = threadIdx.x; c < k; c += LS_THREADS)
	{
		const int	v = lh[c];

		if (v != 0)
		{
			if (PASS == 0)
				atomicAdd(glob + c, v);
			else
				lh[c] = atomicAdd(glob + c, v);
		}
	}
	if (PASS == 0)
		return;
	__syncthreads();
	for (int64_t i = r0 + threadIdx.x; i < r1; i += LS_THREADS)
		perm[atomicAdd(&lh[labels[i]], 1)] = (int32_t) i;
}

/*
 * The sums of the rows sorted by label, in segments: a block takes a run of
 * the sorted rows (their numbers and labels staged in shared memory), a
 * group of W threads (one per feature) a sub-run of SR rows; a thread adds
 * its feature of consecutive rows in registers and flushes the sum with one
 * global atomic whenever the label changes (a sub-run spans few clusters).
 * The rows are read from the row-major copy XR, coalesced across the
 * group, eight in flight per thread.  Integer sums: the same slots, bit for
 * bit, as the other kernels, however the runs are cut.  The counts come
 * from the sort's histogram (k_counts).
 */
#define SEG_THREADS 256
#define SEG_MAX_ROWS 1024		/* rows per block */

__global__ void __launch_bounds__(SEG_THREADS)
k_update_segments(const float *__restrict__ XR, int64_t n, int d,
				  const int32_t *__restrict__ perm,
				  const int32_t *__restrict__ labels,
				  const double *__restrict__ scale, unsigned long long *gsum)
{
	__shared__ int32_t srow[SEG_MAX_ROWS];
	__shared__ int32_t slab[SEG_MAX_ROWS];
	const int	W = d < SEG_THREADS ? d : SEG_THREADS;
	const int	G = SEG_THREADS / W;
	const int	SR = max(1, min(32, SEG_MAX_ROWS / G));
	const int64_t b0 = (int64_t) blockIdx.x * G * SR;
	const int	nb = (int) min((int64_t) G * SR, n - b0);
	const int	g = threadIdx.x / W,
				jl = threadIdx.x % W;

	for (int e = threadIdx.x; e < nb; e += SEG_THREADS)
	{
		const int32_t row = perm[b0 + e];

		srow[e] = row;
		slab[e] = labels[row];
	}
	__syncthreads();
	if (g >= G || g * SR >= nb)
		return;
	{
		const int	e0 = g * SR,
					e1 = min(e0 + SR, nb);

		for (int j = jl; j < d; j += W)
		{
			const double sc = scale[j];
			int			cur = slab[e0];
			unsigned long long acc = 0;

			for (int e = e0; e < e1; e += 8)
			{
				float		x[8];

#pragma unroll
				for (int u = 0; u < 8; u++)
					x[u] = e + u < e1 ? XR[(int64_t) srow[e + u] * d + j] : 0.0f;
#pragma unroll
				for (int u = 0; u < 8; u++)
					if (e + u < e1)
					{
						const int	lab = slab[e + u];

						if (lab != cur)
						{
							atomicAdd(gsum + (size_t) cur * (d + 1) + j, acc);
							acc = 0;
							cur = lab;
						}
						acc += to_fixed(x[u], sc);
					}
			}
			atomicAdd(gsum + (size_t) cur * (d + 1) + j, acc);
		}
	}
}

/* The counts' slots from the sort's histogram (added: a streamed pass
 * sums chunk after chunk). */
__global__ void
k_counts(const int *__restrict__ cnt, int k, int d, unsigned long long *gsum)
{
	const int	c = blockIdx.x * blockDim.x + threadIdx.x;

	if (c < k)
		gsum[(size_t) c * (d + 1) + d] += (unsigned long long) cnt[c];
}

/* Rows per block of k_update_segments (as the kernel computes it). */
static int
segment_rows(int d)
{
	const int	W = d < SEG_THREADS ? d : SEG_THREADS;
	const int	G = SEG_THREADS / W;

	return G * max(1, min(32, SEG_MAX_ROWS / G));
}

/*
 * Means, shift, empty count, moved flag: k_finalize spreads the k x d means
 * over up to FIN_BLOCKS blocks, each leaving its partial shift (double),
 * empty count and moved flag in part; k_finalize_sum adds the partials in
 * a fixed tree (deterministic for a given k x d).  given: the new centres
 * are already in Cnew (weighted: km_wupdate's; cosine: normalized), only
 * the shift and flags are taken.  A cluster is empty where cnt[c *
 * cstride] is 0 (the fixed-point sums' count slot, or the weighted
 * update's rows of positive weight).
 */
#define FIN_THREADS 256
#define FIN_BLOCKS 512

__global__ void __launch_bounds__(FIN_THREADS)
k_finalize(const unsigned long long *__restrict__ gsum, int k, int d,
		   const double *__restrict__ iscale, const float *__restrict__ Cold,
		   float *__restrict__ Cnew, bool given,
		   const unsigned long long *__restrict__ cnt_of, int cstride,
		   double *part)
{
	typedef cub::BlockReduce<double, FIN_THREADS> BRd;
	typedef cub::BlockReduce<int, FIN_THREADS> BRi;
	__shared__ typename BRd::TempStorage td;
	__shared__ typename BRi::TempStorage ti,
				tm;
	double		sh = 0.0;
	int			ne = 0,
				mv = 0;
	const int64_t kd = (int64_t) k * d;
	const int64_t stride = (int64_t) gridDim.x * blockDim.x;

	for (int64_t e = (int64_t) blockIdx.x * blockDim.x + threadIdx.x; e < kd; e += stride)
	{
		const int64_t c = e / d;
		const int	j = (int) (e % d);
		const float o = Cold[e];
		float		v = o;
		double		t;

		if (given)
			v = Cnew[e];
		else
		{
			const long long cnt = (long long) gsum[c * (d + 1) + d];

			if (cnt > 0)
				v = (float) (((double) (long long) gsum[c * (d + 1) + j] * iscale[j]) /
							 (double) cnt);
			Cnew[e] = v;
		}
		t = (double) v - (double) o;
		sh += t * t;
		mv |= __float_as_uint(v) != __float_as_uint(o);
	}
	for (int64_t c = (int64_t) blockIdx.x * blockDim.x + threadIdx.x; c < k; c += stride)
		ne += cnt_of[c * cstride] == 0;
	sh = BRd(td).Sum(sh);
	ne = BRi(ti).Sum(ne);
	mv = BRi(tm).Reduce(mv, [](int a, int b) { return a | b; });
	if (threadIdx.x == 0)
	{
		part[blockIdx.x] = sh;
		((int *) (part + FIN_BLOCKS))[2 * blockIdx.x] = ne;
		((int *) (part + FIN_BLOCKS))[2 * blockIdx.x + 1] = mv;
	}
}

__global__ void __launch_bounds__(FIN_THREADS)
k_finalize_sum(const double *__restrict__ part, int nb, km_info *info)
{
	typedef cub::BlockReduce<double, FIN_THREADS> BRd;
	typedef cub::BlockReduce<int, FIN_THREADS> BRi;
	__shared__ typename BRd::TempStorage td;
	__shared__ typename BRi::TempStorage ti,
				tm;
	const int  *pi = (const int *) (part + FIN_BLOCKS);
	double		sh = 0.0;
	int			ne = 0,
				mv = 0;

	for (int b = threadIdx.x; b < nb; b += FIN_THREADS)
	{
		sh += part[b];
		ne += pi[2 * b];
		mv |= pi[2 * b + 1];
	}
	sh = BRd(td).Sum(sh);
	ne = BRi(ti).Sum(ne);
	mv = BRi(tm).Reduce(mv, [](int a, int b) { return a | b; });
	if (threadIdx.x == 0)
	{
		info->shift = sh;
		info->n_empty = ne;
		info->moved = mv;
	}
}

/* d2[i] = gc_dist2(X_i, C_{labels[i]}) (float, exact CPU order). */
__global__ void
k_d2(const float *__restrict__ XT, int64_t n, int d,
	 const float *__restrict__ C, const int32_t *__restrict__ labels,
	 float *__restrict__ d2)
{
	int64_t		i = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;

	if (i < n)
	{
		const float *c = C + (int64_t) labels[i] * d;
		float		s = 0.0f;

		for (int j = 0; j < d; j++)
			s = gc_l2_step(s, XT[(int64_t) j * n + i], c[j]);
		d2[i] = s;
	}
}

/*
 * Largest d2 (ties: lowest row) as a 64-bit key, among the rows off their
 * centre (d2 > 0: a row on its centre seeds none; taken rows are -1); 0
 * when there is none.
 */
__global__ void
k_argmax_d2(const float *__restrict__ d2, int64_t n, unsigned long long *out)
{
	typedef cub::BlockReduce<unsigned long long, 256> BR;
	__shared__ typename BR::TempStorage tmp;
	unsigned long long key = 0;

	for (int64_t i = (int64_t) blockIdx.x * blockDim.x + threadIdx.x; i < n;
		 i += (int64_t) gridDim.x * blockDim.x)
	{
		float		v = d2[i];

		if (v > 0.0f)
		{
			unsigned long long kk = ((unsigned long long) __float_as_uint(v) << 32) |
				(0xffffffffull - (unsigned long long) i);

			key = kk > key ? kk : key;
		}
	}
	key = BR(tmp).Reduce(key, [](unsigned long long a, unsigned long long b) { return a > b ? a : b; });
	if (threadIdx.x == 0)
		atomicMax(out, key);
}

__global__ void
k_take_row(float *d2, const unsigned long long *key)
{
	if (*key != 0)
		d2[key_row(*key)] = -1.0f;
}

/*
 * The CPU's re-seeding on the fixed-point sums: far row p moves from its
 * cluster to the p-th lowest empty cluster.  keys: the m farthest rows,
 * farthest first, then 0 where the rows off their centre ran out (the
 * clusters left keep their centres); info->relocated: the rows moved.
 * Their features from XT, or (streamed: XT is not resident) from far, m x d.
 */
__global__ void
k_reseed_apply(const float *__restrict__ XT, int64_t n, int d,
			   const float *__restrict__ far,
			   const int32_t *__restrict__ labels,
			   const unsigned long long *__restrict__ keys, int m, int k,
			   const double *__restrict__ scale, unsigned long long *gsum,
			   int *empty, km_info *info)
{
	int			p;

	if (threadIdx.x == 0)
	{
		int			j = 0;

		for (int c = 0; c < k && j < m; c++)
			if (gsum[(int64_t) c * (d + 1) + d] == 0)
				empty[j++] = c;
	}
	__syncthreads();
	for (p = 0; p < m && keys[p] != 0; p++)
	{
		const int64_t row = key_row(keys[p]);
		const int64_t from = (int64_t) labels[row] * (d + 1);
		const int64_t to = (int64_t) empty[p] * (d + 1);

		for (int j = threadIdx.x; j <= d; j += blockDim.x)
		{
			const float x = j >= d ? 0.0f : far ? far[(int64_t) p * d + j] :
				XT[(int64_t) j * n + row];
			unsigned long long v = j < d ? to_fixed(x, scale[j]) : 1ull;

			gsum[from + j] -= v;
			gsum[to + j] += v;
		}
		__syncthreads();
	}
	if (threadIdx.x == 0)
		info->relocated = p;
}

/* ---- host side ---- */

/*
 * When the sums do not fit in shared memory (see km_update_plan), the
 * update sorts rows by label and needs a row-major copy of X (D.XR, which
 * km_setup then uploads into); if that memory is not there, it falls back
 * to global atomics (D.XR stays NULL).
 */
void
km_update_alloc(km_dev &D)
{
	const int64_t n = D.n;
	const int	d = D.d,
				k = D.k,
				optin = D.smem_optin;
	const size_t one = D.slots * sizeof(unsigned long long);

	if (!(one <= 48 * 1024) && !(one <= (size_t) optin && one <= 160 * 1024) &&
		!getenv("GPUCLUST_KM_NO_SORTED_UPDATE"))
	{
		/* streamed: a chunk's rows, whose upload buffer is its XR */
		const int64_t rows = D.streamed ? D.chunk : n;
		cudaError_t e = D.streamed ? cudaSuccess :
			gc_dalloc((void **) &D.XR, sizeof(float) * (size_t) n * d, D.s);

		if (e == cudaSuccess)
			e = gc_dalloc((void **) &D.perm, sizeof(int32_t) * (size_t) rows, D.s);
		if (e == cudaSuccess)
			e = gc_dalloc((void **) &D.lcnt, sizeof(int) * (3 * (size_t) k + 2), D.s);
		if (e == cudaSuccess)
			e = cub::DeviceScan::ExclusiveSum(nullptr, D.scan_bytes, D.lcnt,
											  D.lcnt + k + 1, k + 1, D.s);
		if (e == cudaSuccess)
			e = gc_dalloc((void **) &D.scan_tmp, D.scan_bytes, D.s);
		if (e != cudaSuccess)
		{
			cudaGetLastError();
			gc_dfree(D.XR, D.s);
			gc_dfree(D.perm, D.s);
			gc_dfree(D.lcnt, D.s);
			gc_dfree(D.scan_tmp, D.s);
			D.XR = nullptr;
			D.perm = nullptr;
			D.lcnt = nullptr;
			D.scan_tmp = nullptr;
		}
		else
		{
			const size_t lsmem = sizeof(int) * (size_t) k;

			D.sorted_upd = true;
			/* k_label_sort's counts in shared memory, where they fit */
			D.label_smem = lsmem <= 48 * 1024;
			if (!D.label_smem && lsmem <= (size_t) optin &&
				gc_allow_dynamic_smem((const void *) k_label_sort<0>) == cudaSuccess &&
				gc_allow_dynamic_smem((const void *) k_label_sort<1>) == cudaSuccess)
				D.label_smem = true;
			cudaGetLastError();
		}
	}
}

/* Update kernel: privatised in shared memory when it fits. */
gc_code
km_update_plan(km_dev &D, gc_status *st)
{
	const int64_t n = D.n;
	const int	nsm = D.nsm,
				optin = D.smem_optin;
	const size_t one = D.slots * sizeof(unsigned long long);
	size_t		budget = 48 * 1024;
	int			per_sm = 0;

	D.R = 0;
	if (one <= budget)
	{
		D.R = 32;
		while (D.R > 1 && D.R * one > budget)
			D.R /= 2;
	}
	else if (one <= (size_t) optin && one <= 160 * 1024)
		D.R = 1;
	if (D.R > 0)
	{
		D.upd_smem = D.R * one;
		if (D.upd_smem > 48 * 1024)
			KM_CK(gc_allow_dynamic_smem((const void *) k_update_smem));
		KM_CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, k_update_smem,
															 UPD_THREADS, D.upd_smem));
		if (per_sm < 1)
			D.R = 0;
	}
	if (D.R > 0)
		D.upd_grid = nsm * per_sm;
	else
		D.upd_grid = nsm * 8;
	if ((int64_t) D.upd_grid * UPD_THREADS > n)
		D.upd_grid = (int) blocks_for(n, UPD_THREADS);
	if (D.upd_grid < 1)
		D.upd_grid = 1;
	return GC_OK;
}

gc_code
km_update(km_dev &D, gc_status *st)
{
	if (D.R > 0)
		k_update_smem<<<D.upd_grid, UPD_THREADS, D.upd_smem, D.s>>>(D.XT, D.n, D.d, D.labels,
																	D.k, D.R, D.scale, D.gsum);
	else if (D.XR)
	{
		int		   *cnt = D.lcnt,
				   *off = D.lcnt + D.k + 1,
				   *cursor = D.lcnt + 2 * (D.k + 1);
		const unsigned g = blocks_for(D.n, 256) < 4096 ? blocks_for(D.n, 256) : 4096;

		const size_t lsmem = sizeof(int) * (size_t) D.k;
		const bool	lshared = D.label_smem;
		/* shared counts: blocks of at least LS_ROWS rows, about 2 per SM */
		const unsigned lg = blocks_for(D.n, LS_ROWS) < (unsigned) (2 * D.nsm) ?
			blocks_for(D.n, LS_ROWS) : (unsigned) (2 * D.nsm);
		const int64_t per_block = (D.n + lg - 1) / lg;

		KM_CK(cudaMemsetAsync(cnt, 0, sizeof(int) * (D.k + 1), D.s));
		if (lshared)
			k_label_sort<0><<<lg, LS_THREADS, lsmem, D.s>>>(D.labels, D.n, per_block, D.k, cnt, nullptr);
		else
			k_label_hist<<<g, 256, 0, D.s>>>(D.labels, D.n, cnt);
		KM_LAUNCHED();
		KM_CK(cub::DeviceScan::ExclusiveSum(D.scan_tmp, D.scan_bytes, cnt, off,
											D.k + 1, D.s));
		KM_CK(cudaMemcpyAsync(cursor, off, sizeof(int) * D.k, cudaMemcpyDeviceToDevice, D.s));
		if (lshared)
			k_label_sort<1><<<lg, LS_THREADS, lsmem, D.s>>>(D.labels, D.n, per_block, D.k, cursor,
															D.perm);
		else
			k_label_scatter<<<g, 256, 0, D.s>>>(D.labels, D.n, cursor, D.perm);
		KM_LAUNCHED();
		k_update_segments<<<blocks_for(D.n, segment_rows(D.d)), SEG_THREADS, 0, D.s>>>(
			D.XR, D.n, D.d, D.perm, D.labels, D.scale, D.gsum);
		KM_LAUNCHED();
		k_counts<<<blocks_for(D.k, 256), 256, 0, D.s>>>(cnt, D.k, D.d, D.gsum);
	}
	else
		k_update_global<<<D.upd_grid, UPD_THREADS, 0, D.s>>>(D.XT, D.n, D.d, D.labels,
															  D.scale, D.gsum);
	KM_LAUNCHED();
	return GC_OK;
}

/*
 * The means: from the fixed-point sums (unweighted), or km_wupdate's
 * (weighted); under cosine normalized as the CPU does (a cluster with no
 * row keeps its old centre as it is, a mean of norm 0 takes it too); then
 * the shift and flags of the centres as they are.
 */
gc_code
km_finalize(km_dev &D, const float *Cold, float *Cnew, gc_status *st)
{
	const int64_t kd = (int64_t) D.k * D.d;
	const int	nb = (int) (blocks_for(kd, FIN_THREADS) < FIN_BLOCKS ? blocks_for(kd, FIN_THREADS)
							: FIN_BLOCKS);
	const unsigned long long *cnt = D.wu ? km_wcounts(D) : D.gsum + D.d;
	const int	cstride = D.wu ? 1 : D.d + 1;

	if (!D.wu)
	{
		k_finalize<<<nb, FIN_THREADS, 0, D.s>>>(D.gsum, D.k, D.d, D.iscale, Cold, Cnew, false,
												cnt, cstride, D.fin_part);
		KM_LAUNCHED();
	}
	if (D.unit)
	{
		gc_code		rc = km_unit_rows(D, Cnew, Cnew, cnt, cstride, Cold, st);

		if (rc != GC_OK)
			return rc;
	}
	if (D.wu || D.unit)
	{
		k_finalize<<<nb, FIN_THREADS, 0, D.s>>>(D.gsum, D.k, D.d, D.iscale, Cold, Cnew, true,
												cnt, cstride, D.fin_part);
		KM_LAUNCHED();
	}
	k_finalize_sum<<<1, FIN_THREADS, 0, D.s>>>(D.fin_part, nb, D.info);
	KM_LAUNCHED();
	return GC_OK;
}

gc_code
km_d2(km_dev &V, const float *C, gc_status *st)
{
	k_d2<<<blocks_for(V.n, 256), 256, 0, V.s>>>(V.XT, V.n, V.d, C, V.labels, V.d2);
	KM_LAUNCHED();
	return GC_OK;
}

/*
 * Streamed: the features of the m far rows (keys, device) from the host
 * matrix into far (device, m x d); none for a key 0 (no row).
 */
static gc_code
km_far_rows(km_dev &D, int m, float *far, gc_status *st)
{
	unsigned long long *hk = (unsigned long long *) malloc(sizeof(*hk) * m);
	float	   *hr = (float *) malloc(sizeof(float) * (size_t) m * D.d);
	cudaError_t e;

	if (hk == NULL || hr == NULL)
	{
		free(hk);
		free(hr);
		return gc_fail(st, GC_ENOMEM, "GPU k-means: out of memory");
	}
	e = cudaMemcpyAsync(hk, D.keys, sizeof(*hk) * m, cudaMemcpyDeviceToHost, D.s);
	if (e == cudaSuccess)
		e = cudaStreamSynchronize(D.s);
	if (e == cudaSuccess)
	{
		for (int p = 0; p < m && hk[p] != 0; p++)
			memcpy(hr + (size_t) p * D.d, D.hX + key_row(hk[p]) * D.d, sizeof(float) * D.d);
		e = cudaMemcpyAsync(far, hr, sizeof(float) * (size_t) m * D.d,
							cudaMemcpyHostToDevice, D.s);
	}
	if (e == cudaSuccess)
		e = cudaStreamSynchronize(D.s);
	free(hk);
	free(hr);
	if (e != cudaSuccess)
		return km_cuda_fail(st, e, "reading the rows of re-seeding");
	return GC_OK;
}

gc_code
km_far_keys(km_dev &D, int m, gc_status *st)
{
	unsigned	g = blocks_for(D.n, 256);
	unsigned	ga = g < 1024 ? g : 1024;

	if (m > D.k)
		return gc_fail(st, GC_EINTERNAL, "GPU k-means: %d empty clusters of %d", m, D.k);
	KM_CK(cudaMemsetAsync(D.keys, 0, sizeof(unsigned long long) * m, D.s));
	for (int p = 0; p < m; p++)
	{
		k_argmax_d2<<<ga, 256, 0, D.s>>>(D.d2, D.n, D.keys + p);
		KM_LAUNCHED();
		k_take_row<<<1, 1, 0, D.s>>>(D.d2, D.keys + p);
		KM_LAUNCHED();
	}
	return GC_OK;
}

/*
 * Re-seeding (rare): the m = n_empty rows farthest from their old centres
 * (of those off them: fewer when fewer are) move to the empty clusters;
 * then the means are taken again.
 */
gc_code
km_reseed(km_dev &D, const float *Cold, float *Cnew, int m, gc_status *st)
{
	float	   *far = nullptr;
	const float *Ca = Cold;
	gc_code		rc;

	if (!D.streamed &&
		((rc = km_assign_centres(D, Cold, &Ca, st)) != GC_OK ||
		 (rc = km_d2(D, Ca, st)) != GC_OK))
		return rc;
	if ((rc = km_far_keys(D, m, st)) != GC_OK)
		return rc;
	if (D.streamed)
	{
		KM_CK(gc_dalloc((void **) &far, sizeof(float) * (size_t) m * D.d, D.s));
		if ((rc = km_far_rows(D, m, far, st)) != GC_OK)
		{
			gc_dfree(far, D.s);
			return rc;
		}
	}
	rc = km_reseed_apply(D, far, D.labels, m, st);
	gc_dfree(far, D.s);
	return rc != GC_OK ? rc : km_finalize(D, Cold, Cnew, st);
}

gc_code
km_reseed_apply(km_dev &D, const float *far, const int32_t *labels, int m,
				gc_status *st)
{
	k_reseed_apply<<<1, 256, 0, D.s>>>(D.XT, D.n, D.d, far, labels, D.keys, m, D.k,
									   D.scale, D.gsum, D.empty, D.info);
	KM_LAUNCHED();
	return GC_OK;
}
