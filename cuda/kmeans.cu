/*
 * kmeans.cu — k-means (Lloyd) on the GPU: gc_kmeans_gpu, with the same
 * result contract as gc_kmeans_cpu (kmeans.c), and hooks for tests and
 * benchmarks.
 *
 * Layout.  X is uploaded once and transposed to structure-of-arrays
 * (XT, d rows of n floats), so every kernel reads points coalesced.
 *
 * One Lloyd iteration is five kernels and one 32-byte read-back:
 *   assign    nearest centre of every row, fused with the argmin and the
 *             count of changed labels (no n x k distance matrix):
 *             - d <= 8: one thread holds 8 rows in registers and scans the
 *               centres from shared memory, computing the exact float32
 *               gc_dist2 (dimension order, separate multiply and add), so
 *               the labels equal the CPU's bit for bit;
 *             - d > 8: a register-blocked tile (128 rows x 128 centres,
 *               8 x 8 per thread, 8 dimensions per stage) accumulates x.c
 *               with FMA, on rows and centres shifted by the feature means,
 *               and ranks ||c||² - 2 x.c, keeping the best and second
 *               best score per row; a row whose two best scores are closer
 *               than a rounding bound (expansion + the CPU's own rounding)
 *               is queued and re-ranked with the exact gc_dist2 by
 *               k_assign_fallback (about 0.1-0.5% of rows), so this path
 *               too gives the CPU's labels.
 *   update    per-cluster sums in 64-bit fixed point (each feature scaled by
 *             a power of two chosen from its largest |x| and n so no sum can
 *             overflow), accumulated in shared memory (replicated per lane
 *             group when k is small, so a small k does not serialise on a
 *             few addresses) and flushed with one global atomic per slot
 *             and block (64-bit shared adds as two 32-bit atomics with
 *             carry); when k(d+1) does not fit in shared memory, a
 *             counting sort of the rows by label and one block per cluster
 *             summing its rows from a row-major copy of X (global atomics
 *             when that copy's memory is not there).  Integer sums are exact and
 *             order-independent: the update is deterministic, and the
 *             means equal the CPU's double means except where the double
 *             sums themselves round.
 *   finalize  means (float), empty-cluster count, squared centre shift.
 *   prep      the centres in the layout the next assign reads.
 *   read-back {changed, shift, n_empty, moved}: the convergence test
 *             (scikit-learn's: labels unchanged, or shift <= tol * mean
 *             feature variance) and the cancel poll happen on the host.
 * Empty clusters are re-seeded exactly as the CPU does (rows farthest from
 * their centres, farthest to the lowest empty id) on an extra, rare path.
 *
 * Seeding: k-means++ runs on the device (kmeans_pp.cu) and reproduces the
 * CPU's centres bit for bit; random seeding calls the CPU's own function.
 * The final inertia and distances are the CPU's blocked double sums.
 *
 * Memory.  X stays resident on the device (XT, plus XR for the sorted
 * update) for the whole call; it is not streamed.  gc_kmeans_gpu_mem_bytes
 * bounds what a call allocates, and dispatch (src/core/dispatch.c) sends a
 * problem that does not fit the free GPU memory to the CPU under 'auto'
 * (with a NOTICE) and refuses it under 'gpu'; an allocation that fails
 * anyway returns GC_ENOMEM, which the SQL glue also answers under 'auto'
 * by running on the CPU.
 */
/* Interim: the test hooks (gc_kmeans_gpu_seed, _step, _bench) still live in
 * this file, so it sees their declarations; they move to kmeans_hooks.cu. */
#define GC_TESTING 1

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <time.h>

#include <cub/block/block_reduce.cuh>
#include <cub/device/device_scan.cuh>

#include "kmeans_dev.cuh"

#define UPD_THREADS 256

/* ------------------------------------------------------------------ */
/* small kernels                                                       */
/* ------------------------------------------------------------------ */

/* XT[j*n + r0 + r] = in[r*d + j] for a chunk of rows. */
__global__ void
k_transpose(const float *__restrict__ in, int64_t rows, int d,
			float *__restrict__ XT, int64_t n, int64_t r0)
{
	__shared__ float t[32][33];
	const int64_t rb = (int64_t) blockIdx.x * 32;
	const int	jb = blockIdx.y * 32;

	for (int y = threadIdx.y; y < 32; y += 8)
	{
		int64_t		r = rb + y;
		int			j = jb + threadIdx.x;

		if (r < rows && j < d)
			t[y][threadIdx.x] = in[r * d + j];
	}
	__syncthreads();
	for (int y = threadIdx.y; y < 32; y += 8)
	{
		int			j = jb + y;
		int64_t		r = rb + threadIdx.x;

		if (r < rows && j < d)
			XT[(int64_t) j * n + r0 + r] = t[threadIdx.x][y];
	}
}

/*
 * amax[j] = bits of max |x| over feature j (non-negative floats order as
 * ints); part[j*gridDim.x + b] = block b's double sum of feature j (fixed
 * grid and tree: deterministic).
 */
__global__ void
k_absmax(const float *__restrict__ XT, int64_t n, unsigned *amax, double *part)
{
	const float *x = XT + (int64_t) blockIdx.y * n;
	float		m = 0.0f;
	double		sum = 0.0;

	for (int64_t i = (int64_t) blockIdx.x * blockDim.x + threadIdx.x; i < n;
		 i += (int64_t) gridDim.x * blockDim.x)
	{
		m = fmaxf(m, fabsf(x[i]));
		sum += (double) x[i];
	}
	typedef cub::BlockReduce<float, 256> BR;
	typedef cub::BlockReduce<double, 256> BRd;
	__shared__ typename BR::TempStorage tmp;
	__shared__ typename BRd::TempStorage tmpd;
	m = BR(tmp).Reduce(m, [](float a, float b) { return fmaxf(a, b); });
	sum = BRd(tmpd).Sum(sum);
	if (threadIdx.x == 0)
	{
		atomicMax(amax + blockIdx.y, __float_as_uint(m));
		part[(int64_t) blockIdx.y * gridDim.x + blockIdx.x] = sum;
	}
}

/* mu[j] = mean of feature j (the shift of the tiled path), from part. */
__global__ void
k_mu(const double *part, int g, int d, int64_t n, float *mu)
{
	for (int j = threadIdx.x; j < d; j += blockDim.x)
	{
		double		s = 0.0;

		for (int b = 0; b < g; b++)
			s += part[(int64_t) j * g + b];
		mu[j] = (float) (s / (double) n);
	}
}

/* ------------------------------------------------------------------ */
/* update                                                              */
/* ------------------------------------------------------------------ */

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

/*
 * Sort-by-label update (the large k(d+1) case, in place of the global
 * atomics): a counting sort of the row numbers by label (warp-aggregated
 * atomics for the counts and the cursors; the order inside a cluster does
 * not matter, the sums are integers), then one block per cluster sums its
 * rows from the row-major copy XR, coalesced, in the same 64-bit fixed
 * point: the same slots, bit for bit, as the atomic kernels.
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

#define SORTED_THREADS 256

__global__ void __launch_bounds__(SORTED_THREADS)
k_update_sorted(const float *__restrict__ XR, int d,
				const int32_t *__restrict__ perm, const int *__restrict__ off,
				const double *__restrict__ scale, unsigned long long *gsum)
{
	__shared__ unsigned long long red[SORTED_THREADS];
	const int	c = blockIdx.x;
	const int	b = off[c],
				e = off[c + 1];
	const int	W = d < SORTED_THREADS ? d : SORTED_THREADS;	/* features per pass */
	const int	G = SORTED_THREADS / W;	/* row groups */
	const int	g = threadIdx.x / W,
				jl = threadIdx.x % W;
	unsigned long long *out = gsum + (size_t) c * (d + 1);

	for (int j0 = 0; j0 < d; j0 += W)
	{
		const int	j = j0 + jl;
		unsigned long long acc = 0;

		if (g < G && j < d)
		{
			const double sc = scale[j];
			int			r = b + g;

			/* four rows in flight per thread */
			for (; r + 3 * G < e; r += 4 * G)
			{
				const int64_t p0 = perm[r],
							p1 = perm[r + G],
							p2 = perm[r + 2 * G],
							p3 = perm[r + 3 * G];
				const float x0 = XR[p0 * d + j],
							x1 = XR[p1 * d + j],
							x2 = XR[p2 * d + j],
							x3 = XR[p3 * d + j];

				acc += to_fixed(x0, sc);
				acc += to_fixed(x1, sc);
				acc += to_fixed(x2, sc);
				acc += to_fixed(x3, sc);
			}
			for (; r < e; r += G)
				acc += to_fixed(XR[(int64_t) perm[r] * d + j], sc);
		}
		red[threadIdx.x] = acc;
		__syncthreads();
		if (threadIdx.x < W && j0 + (int) threadIdx.x < d)
		{
			unsigned long long v = 0;

			for (int q = 0; q < G; q++)
				v += red[q * W + threadIdx.x];
			out[j0 + threadIdx.x] = v;
		}
		__syncthreads();
	}
	if (threadIdx.x == 0)
		out[d] = (unsigned long long) (e - b);
}

/* Means, shift, empty count, moved flag.  One block of 1024 threads. */
__global__ void __launch_bounds__(1024)
k_finalize(const unsigned long long *__restrict__ gsum, int k, int d,
		   const double *__restrict__ iscale, const float *__restrict__ Cold,
		   float *__restrict__ Cnew, km_info *info)
{
	typedef cub::BlockReduce<double, 1024> BRd;
	typedef cub::BlockReduce<int, 1024> BRi;
	__shared__ typename BRd::TempStorage td;
	__shared__ typename BRi::TempStorage ti,
				tm;
	double		sh = 0.0;
	int			ne = 0,
				mv = 0;
	const int64_t kd = (int64_t) k * d;

	for (int64_t e = threadIdx.x; e < kd; e += blockDim.x)
	{
		const int64_t c = e / d;
		const int	j = (int) (e % d);
		const long long cnt = (long long) gsum[c * (d + 1) + d];
		const float o = Cold[e];
		float		v = o;
		double		t;

		if (cnt > 0)
			v = (float) (((double) (long long) gsum[c * (d + 1) + j] * iscale[j]) /
						 (double) cnt);
		Cnew[e] = v;
		t = (double) v - (double) o;
		sh += t * t;
		mv |= __float_as_uint(v) != __float_as_uint(o);
	}
	for (int c = threadIdx.x; c < k; c += blockDim.x)
		ne += gsum[(int64_t) c * (d + 1) + d] == 0;
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

/* xn2[i] = ||x_i - mu||² as the tiled kernel sees the row. */
__global__ void
k_rownorm(const float *__restrict__ XT, int64_t n, int d,
		  const float *__restrict__ mu, float *__restrict__ xn2)
{
	int64_t		i = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;

	if (i < n)
	{
		float		s = 0.0f;

		for (int j = 0; j < d; j++)
		{
			float		v = __fsub_rn(XT[(int64_t) j * n + i], mu[j]);

			s = __fmaf_rn(v, v, s);
		}
		xn2[i] = s;
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
		{
			float		t = __fsub_rn(XT[(int64_t) j * n + i], c[j]);

			s = __fadd_rn(s, __fmul_rn(t, t));
		}
		d2[i] = s;
	}
}

/* Largest d2 (ties: lowest row) as a 64-bit key; negative d2 = taken. */
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

		if (v >= 0.0f)
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
	d2[0xffffffffull - (*key & 0xffffffffull)] = -1.0f;
}

/*
 * The CPU's re-seeding on the fixed-point sums: far row p moves from its
 * cluster to the p-th lowest empty cluster.  keys: m farthest rows.
 */
__global__ void
k_reseed_apply(const float *__restrict__ XT, int64_t n, int d,
			   const int32_t *__restrict__ labels,
			   const unsigned long long *__restrict__ keys, int m, int k,
			   const double *__restrict__ scale, unsigned long long *gsum,
			   int *empty)
{
	if (threadIdx.x == 0)
	{
		int			j = 0;

		for (int c = 0; c < k && j < m; c++)
			if (gsum[(int64_t) c * (d + 1) + d] == 0)
				empty[j++] = c;
	}
	__syncthreads();
	for (int p = 0; p < m; p++)
	{
		const int64_t row = (int64_t) (0xffffffffull - (keys[p] & 0xffffffffull));
		const int64_t from = (int64_t) labels[row] * (d + 1);
		const int64_t to = (int64_t) empty[p] * (d + 1);

		for (int j = threadIdx.x; j <= d; j += blockDim.x)
		{
			unsigned long long v = j < d ? to_fixed(XT[(int64_t) j * n + row], scale[j]) : 1ull;

			gsum[from + j] -= v;
			gsum[to + j] += v;
		}
		__syncthreads();
	}
}

/* q[i] = sum_j ((double) x - (double) c)², as gc_km_inertia. */
__global__ void
k_inertia_terms(const float *__restrict__ XT, int64_t n, int d,
				const float *__restrict__ C, const int32_t *__restrict__ labels,
				double *__restrict__ q)
{
	int64_t		i = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;

	if (i < n)
	{
		const float *c = C + (int64_t) labels[i] * d;
		double		s = 0.0;

		for (int j = 0; j < d; j++)
		{
			double		t = (double) XT[(int64_t) j * n + i] - (double) c[j];

			s += t * t;
		}
		q[i] = s;
	}
}

/* bsum[b] = sequential sum of q over block b of GC_KM_BLOCK rows. */
__global__ void
k_block_sums(const double *__restrict__ q, int64_t n, double *bsum)
{
	int64_t		b = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;
	int64_t		nb = (n + KM_BLOCK - 1) / KM_BLOCK;

	if (b < nb)
	{
		int64_t		i1 = (b + 1) * KM_BLOCK < n ? (b + 1) * KM_BLOCK : n;
		double		s = 0.0;

		for (int64_t i = b * KM_BLOCK; i < i1; i++)
			s += q[i];
		bsum[b] = s;
	}
}

__global__ void
k_seq_sum(const double *v, int64_t m, double *out)
{
	double		s = 0.0;

	for (int64_t i = 0; i < m; i++)
		s += v[i];
	*out = s;
}

__global__ void
k_sqrt(double *q, int64_t n)
{
	int64_t		i = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;

	if (i < n)
		q[i] = sqrt(q[i]);
}

/* ------------------------------------------------------------------ */
/* host side                                                           */
/* ------------------------------------------------------------------ */

/* Phases of the last gc_kmeans_gpu call (gc_kmeans_gpu_last_phases). */
static gc_kmeans_gpu_phases last_phases;

/* Allocates, uploads X (chunked, transposed) and picks the kernels. */
gc_code
km_setup(km_dev &D, const float *X, int64_t n, int d, int k, bool keep_best,
		 gc_status *st)
{
	int			dev,
				nsm,
				optin;
	const int64_t nb = (n + KM_BLOCK - 1) / KM_BLOCK;

	D.n = n;
	D.d = d;
	D.k = k;
	D.small = d <= SMALL_D_MAX;
	D.W = (d + 3) / 4 * 4;
	D.kp = (k + TILE - 1) / TILE * TILE;
	D.slots = (size_t) k * (d + 1);

	KM_CK(cudaGetDevice(&dev));
	KM_CK(cudaDeviceGetAttribute(&nsm, cudaDevAttrMultiProcessorCount, dev));
	KM_CK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
	KM_CK(cudaStreamCreateWithFlags(&D.s, cudaStreamNonBlocking));
	D.fb_grid = nsm * 8;
	/* GPUCLUST_KM_TILED_MINB=1: the 1-block variant (no spills, 165 regs). */
	if (getenv("GPUCLUST_KM_TILED_MINB") && atoi(getenv("GPUCLUST_KM_TILED_MINB")) == 1)
		D.tiled_minb = 1;

	KM_ALLOC(D.XT, (int64_t) n * d);
	KM_ALLOC(D.labels, n);
	if (keep_best)
	{
		KM_ALLOC(D.labels_best, n);
		KM_ALLOC(D.C_best, (int64_t) k * d);
	}
	KM_ALLOC(D.C[0], (int64_t) k * d);
	KM_ALLOC(D.C[1], (int64_t) k * d);
	if (D.small)
		KM_ALLOC(D.cpk, (int64_t) k * D.W);
	else
	{
		KM_ALLOC(D.CT, (int64_t) d * D.kp);
		KM_ALLOC(D.cnrm, D.kp);
		KM_ALLOC(D.CTo, (int64_t) d * D.kp);
		KM_ALLOC(D.cmax2, 1);
		KM_ALLOC(D.fb_rows, n);
		KM_ALLOC(D.xn2, n);
	}
	KM_ALLOC(D.mu, d);
	/* gsum (slots) followed by the info record, one memset per iteration. */
	KM_CK(cudaMalloc(&D.gsum, sizeof(unsigned long long) * D.slots + sizeof(km_info)));
	D.info = (km_info *) (D.gsum + D.slots);
	KM_CK(cudaMallocHost(&D.h_info, sizeof(km_info)));
	KM_ALLOC(D.scale, 2 * d);
	D.iscale = D.scale + d;
	KM_ALLOC(D.q, n);
	KM_ALLOC(D.bsum, nb + 1);
	D.dsum = D.bsum + nb;
	KM_ALLOC(D.d2, n);
	KM_ALLOC(D.keys, k);
	KM_ALLOC(D.empty, k);

	/*
	 * When the sums do not fit in shared memory (see the update choice
	 * below), the update sorts rows by label and needs a row-major copy of
	 * X; if that memory is not there, it falls back to global atomics.
	 */
	{
		const size_t one = D.slots * sizeof(unsigned long long);

		if (!(one <= 48 * 1024) && !(one <= (size_t) optin && one <= 160 * 1024) &&
			!getenv("GPUCLUST_KM_NO_SORTED_UPDATE"))
		{
			cudaError_t e = cudaMalloc(&D.XR, sizeof(float) * (size_t) n * d);

			if (e == cudaSuccess)
				e = cudaMalloc(&D.perm, sizeof(int32_t) * (size_t) n);
			if (e == cudaSuccess)
				e = cudaMalloc(&D.lcnt, sizeof(int) * (3 * (size_t) k + 2));
			if (e == cudaSuccess)
				e = cub::DeviceScan::ExclusiveSum(nullptr, D.scan_bytes, D.lcnt,
												  D.lcnt + k + 1, k + 1, D.s);
			if (e == cudaSuccess)
				e = cudaMalloc(&D.scan_tmp, D.scan_bytes);
			if (e != cudaSuccess)
			{
				cudaGetLastError();
				cudaFree(D.XR);
				cudaFree(D.perm);
				cudaFree(D.lcnt);
				cudaFree(D.scan_tmp);
				D.XR = nullptr;
				D.perm = nullptr;
				D.lcnt = nullptr;
				D.scan_tmp = nullptr;
			}
		}
	}

	/*
	 * Upload in chunks, transposing: into the row-major copy when there is
	 * one, otherwise through a staging buffer of at most 64 MiB.
	 */
	if (D.XR)
	{
		int64_t		chunk = (int64_t) (16u << 20) / d;
		cudaError_t e = cudaSuccess;

		if (chunk < 1)
			chunk = 1;
		for (int64_t r0 = 0; r0 < n && e == cudaSuccess; r0 += chunk)
		{
			int64_t		rows = n - r0 < chunk ? n - r0 : chunk;
			dim3		g(blocks_for(rows, 32), blocks_for(d, 32));

			e = cudaMemcpyAsync(D.XR + r0 * d, X + r0 * d, sizeof(float) * rows * d,
								cudaMemcpyHostToDevice, D.s);
			if (e == cudaSuccess)
			{
				k_transpose<<<g, dim3(32, 8), 0, D.s>>>(D.XR + r0 * d, rows, d, D.XT, n, r0);
				e = cudaGetLastError();
			}
		}
		if (e == cudaSuccess)
			e = cudaStreamSynchronize(D.s);
		if (e != cudaSuccess)
			return km_cuda_fail(st, e, "uploading the data");
	}
	else
	{
		int64_t		chunk = (int64_t) (16u << 20) / d;
		float	   *stage = nullptr;
		cudaError_t e;

		if (chunk < 1)
			chunk = 1;
		if (chunk > n)
			chunk = n;
		KM_CK(cudaMalloc(&stage, sizeof(float) * (size_t) chunk * d));
		e = cudaSuccess;
		for (int64_t r0 = 0; r0 < n && e == cudaSuccess; r0 += chunk)
		{
			int64_t		rows = n - r0 < chunk ? n - r0 : chunk;
			dim3		g(blocks_for(rows, 32), blocks_for(d, 32));

			e = cudaMemcpyAsync(stage, X + r0 * d, sizeof(float) * rows * d,
								cudaMemcpyHostToDevice, D.s);
			if (e == cudaSuccess)
			{
				k_transpose<<<g, dim3(32, 8), 0, D.s>>>(stage, rows, d, D.XT, n, r0);
				e = cudaGetLastError();
			}
			if (e == cudaSuccess)
				e = cudaStreamSynchronize(D.s);	/* stage is reused */
		}
		cudaFree(stage);
		if (e != cudaSuccess)
			return km_cuda_fail(st, e, "uploading the data");
	}

	/* Fixed-point scales: 2^s_j with n * max|x_j| * 2^s_j <= 2^61. */
	{
		unsigned   *amax = nullptr;
		double	   *part = nullptr;
		const unsigned gx0 = blocks_for(n, 256 * 8);
		const unsigned gx = gx0 < 512 ? gx0 : 512;
		unsigned   *h = (unsigned *) malloc(sizeof(unsigned) * d);
		double	   *hs = (double *) malloc(sizeof(double) * 2 * d);
		cudaError_t e;
		int			lg = 0;

		if (h == NULL || hs == NULL)
		{
			free(h);
			free(hs);
			return gc_fail(st, GC_ENOMEM, "GPU k-means: out of memory");
		}
		while (lg < 63 && ((int64_t) 1 << lg) < n)
			lg++;
		e = cudaMalloc(&amax, sizeof(unsigned) * d);
		if (e == cudaSuccess)
			e = cudaMalloc(&part, sizeof(double) * gx * d);
		if (e == cudaSuccess)
			e = cudaMemsetAsync(amax, 0, sizeof(unsigned) * d, D.s);
		if (e == cudaSuccess)
		{
			k_absmax<<<dim3(gx, d), 256, 0, D.s>>>(D.XT, n, amax, part);
			e = cudaGetLastError();
		}
		if (e == cudaSuccess)
		{
			k_mu<<<1, 256, 0, D.s>>>(part, (int) gx, d, n, D.mu);
			e = cudaGetLastError();
		}
		if (e == cudaSuccess && !D.small)
		{
			k_rownorm<<<blocks_for(n, 256), 256, 0, D.s>>>(D.XT, n, d, D.mu, D.xn2);
			e = cudaGetLastError();
		}
		if (e == cudaSuccess)
			e = cudaMemcpyAsync(h, amax, sizeof(unsigned) * d, cudaMemcpyDeviceToHost, D.s);
		if (e == cudaSuccess)
			e = cudaStreamSynchronize(D.s);
		if (e == cudaSuccess)
		{
			for (int j = 0; j < d; j++)
			{
				float		m;
				int			ex = 0,
							sc;

				memcpy(&m, &h[j], sizeof(m));
				if (m > 0.0f)
					frexp((double) m, &ex);	/* m < 2^ex */
				sc = m > 0.0f ? 61 - lg - ex : 0;
				hs[j] = ldexp(1.0, sc);
				hs[d + j] = ldexp(1.0, -sc);
			}
			e = cudaMemcpyAsync(D.scale, hs, sizeof(double) * 2 * d,
								cudaMemcpyHostToDevice, D.s);
		}
		if (e == cudaSuccess)
			e = cudaStreamSynchronize(D.s);
		cudaFree(amax);
		cudaFree(part);
		free(h);
		free(hs);
		if (e != cudaSuccess)
			return km_cuda_fail(st, e, "feature scales");
	}

	/* Update kernel: privatised in shared memory when it fits. */
	{
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
				KM_CK(cudaFuncSetAttribute(k_update_smem,
										   cudaFuncAttributeMaxDynamicSharedMemorySize,
										   (int) D.upd_smem));
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
	}
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

		KM_CK(cudaMemsetAsync(cnt, 0, sizeof(int) * (D.k + 1), D.s));
		k_label_hist<<<g, 256, 0, D.s>>>(D.labels, D.n, cnt);
		KM_LAUNCHED();
		KM_CK(cub::DeviceScan::ExclusiveSum(D.scan_tmp, D.scan_bytes, cnt, off,
											D.k + 1, D.s));
		KM_CK(cudaMemcpyAsync(cursor, off, sizeof(int) * D.k, cudaMemcpyDeviceToDevice, D.s));
		k_label_scatter<<<g, 256, 0, D.s>>>(D.labels, D.n, cursor, D.perm);
		KM_LAUNCHED();
		k_update_sorted<<<D.k, SORTED_THREADS, 0, D.s>>>(D.XR, D.d, D.perm, off,
														 D.scale, D.gsum);
	}
	else
		k_update_global<<<D.upd_grid, UPD_THREADS, 0, D.s>>>(D.XT, D.n, D.d, D.labels,
															  D.scale, D.gsum);
	KM_LAUNCHED();
	return GC_OK;
}

gc_code
km_finalize(km_dev &D, const float *Cold, float *Cnew, gc_status *st)
{
	k_finalize<<<1, 1024, 0, D.s>>>(D.gsum, D.k, D.d, D.iscale, Cold, Cnew, D.info);
	KM_LAUNCHED();
	return GC_OK;
}

static gc_code
km_read_info(km_dev &D, gc_status *st)
{
	KM_CK(cudaMemcpyAsync(D.h_info, D.info, sizeof(km_info), cudaMemcpyDeviceToHost, D.s));
	KM_CK(cudaStreamSynchronize(D.s));
	return GC_OK;
}

/*
 * Re-seeding (rare): the m = n_empty rows farthest from their old centres
 * move to the empty clusters; then the means are taken again.
 */
gc_code
km_reseed(km_dev &D, const float *Cold, float *Cnew, int m, gc_status *st)
{
	unsigned	g = blocks_for(D.n, 256);
	unsigned	ga = g < 1024 ? g : 1024;

	if (m > D.k)
		return gc_fail(st, GC_EINTERNAL, "GPU k-means: %d empty clusters of %d", m, D.k);
	k_d2<<<g, 256, 0, D.s>>>(D.XT, D.n, D.d, Cold, D.labels, D.d2);
	KM_LAUNCHED();
	KM_CK(cudaMemsetAsync(D.keys, 0, sizeof(unsigned long long) * m, D.s));
	for (int p = 0; p < m; p++)
	{
		k_argmax_d2<<<ga, 256, 0, D.s>>>(D.d2, D.n, D.keys + p);
		KM_LAUNCHED();
		k_take_row<<<1, 1, 0, D.s>>>(D.d2, D.keys + p);
		KM_LAUNCHED();
	}
	k_reseed_apply<<<1, 256, 0, D.s>>>(D.XT, D.n, D.d, D.labels, D.keys, m, D.k,
									   D.scale, D.gsum, D.empty);
	KM_LAUNCHED();
	return km_finalize(D, Cold, Cnew, st);
}

/* One Lloyd iteration from D.C[cur] (prepared) into D.C[1-cur]; info read. */
gc_code
km_iteration(km_dev &D, int cur, gc_status *st)
{
	gc_code		rc;

	KM_CK(cudaMemsetAsync(D.gsum, 0, sizeof(unsigned long long) * D.slots + sizeof(km_info), D.s));
	if ((rc = km_assign(D, st)) != GC_OK ||
		(rc = km_update(D, st)) != GC_OK ||
		(rc = km_finalize(D, D.C[cur], D.C[1 - cur], st)) != GC_OK ||
		(rc = km_prep(D, D.C[1 - cur], st)) != GC_OK ||
		(rc = km_read_info(D, st)) != GC_OK)
		return rc;
	if (D.h_info->n_empty > 0)
	{
		unsigned long long changed = D.h_info->changed;

		if ((rc = km_reseed(D, D.C[cur], D.C[1 - cur], D.h_info->n_empty, st)) != GC_OK ||
			(rc = km_prep(D, D.C[1 - cur], st)) != GC_OK ||
			(rc = km_read_info(D, st)) != GC_OK)
			return rc;
		D.h_info->changed = changed;
	}
	return GC_OK;
}

/* Inertia of (labels, C) as gc_km_inertia; q keeps the per-row terms. */
gc_code
km_inertia(km_dev &D, const float *C, const int32_t *labels, double *inertia,
		   gc_status *st)
{
	const int64_t nb = (D.n + KM_BLOCK - 1) / KM_BLOCK;

	k_inertia_terms<<<blocks_for(D.n, 256), 256, 0, D.s>>>(D.XT, D.n, D.d, C, labels, D.q);
	KM_LAUNCHED();
	k_block_sums<<<blocks_for(nb, 64), 64, 0, D.s>>>(D.q, D.n, D.bsum);
	KM_LAUNCHED();
	k_seq_sum<<<1, 1, 0, D.s>>>(D.bsum, nb, D.dsum);
	KM_LAUNCHED();
	KM_CK(cudaMemcpyAsync(inertia, D.dsum, sizeof(double), cudaMemcpyDeviceToHost, D.s));
	KM_CK(cudaStreamSynchronize(D.s));
	return GC_OK;
}

/* Initial centres into D.C[0] (device). */
gc_code
km_seed(km_dev &D, const gc_ctx *ctx, const float *X, gc_kmeans_init init,
		uint64_t seed, uint64_t stream, int64_t *chosen_dev, gc_status *st)
{
	if (init == GC_INIT_RANDOM)
	{
		float	   *h = (float *) malloc(sizeof(float) * (size_t) D.k * D.d);
		gc_code		rc;

		if (h == NULL)
			return gc_fail(st, GC_ENOMEM, "GPU k-means: out of memory");
		rc = gc_km_init_random(ctx, X, D.n, D.d, D.k, seed, stream, h, NULL, st);
		if (rc == GC_OK)
		{
			cudaError_t e = cudaMemcpyAsync(D.C[0], h, sizeof(float) * (size_t) D.k * D.d,
											cudaMemcpyHostToDevice, D.s);

			if (e == cudaSuccess)
				e = cudaStreamSynchronize(D.s);
			if (e != cudaSuccess)
				rc = km_cuda_fail(st, e, "uploading the initial centres");
		}
		free(h);
		return rc;
	}
	return km_pp_device(ctx, D.s, D.XT, D.n, D.d, D.k, seed, stream, D.C[0],
						chosen_dev, st);
}

/* One seeding + Lloyd run, as kmeans_run of kmeans.c.  *cur: final C. */
static gc_code
km_run(km_dev &D, const gc_ctx *ctx, const float *X, const gc_kmeans_params *p,
	   int run, double tol_scaled, int *cur_out, double *inertia,
	   int *iterations, bool *converged, gc_status *st)
{
	gc_code		rc;
	int			cur = 0,
				it;
	bool		moved = true;

	double		t0 = gc_now_ms(),
				t1;

	rc = km_seed(D, ctx, X, p->init, p->seed,
				 (p->init == GC_INIT_RANDOM ? GC_KM_STREAM_RANDOM : GC_KM_STREAM_KMEANSPP) +
				 (uint64_t) run, nullptr, st);
	if (rc != GC_OK)
		return rc;
	KM_CK(cudaStreamSynchronize(D.s));
	t1 = gc_now_ms();
	last_phases.ms_init += t1 - t0;
	*converged = false;
	KM_CK(cudaMemsetAsync(D.labels, 0xff, sizeof(int32_t) * D.n, D.s));
	if ((rc = km_prep(D, D.C[0], st)) != GC_OK)
		return rc;
	for (it = 0; it < p->max_iter; it++)
	{
		if (gc_cancelled(ctx))
		{
			cudaStreamSynchronize(D.s);
			return gc_fail(st, GC_ECANCEL, "canceled");
		}
		if ((rc = km_iteration(D, cur, st)) != GC_OK)
			return rc;
		moved = D.h_info->moved != 0;
		cur = 1 - cur;
		if (D.h_info->changed == 0 || D.h_info->shift <= tol_scaled)
		{
			*converged = true;
			it++;
			break;
		}
	}
	*iterations = it;
	if (moved)
	{
		/* C[cur] is already prepared; labels must match it. */
		KM_CK(cudaMemsetAsync(D.info, 0, sizeof(km_info), D.s));
		if ((rc = km_assign(D, st)) != GC_OK)
			return rc;
	}
	*cur_out = cur;
	rc = km_inertia(D, D.C[cur], D.labels, inertia, st);
	last_phases.ms_lloyd += gc_now_ms() - t1;
	return rc;
}

/* ------------------------------------------------------------------ */
/* entry points                                                        */
/* ------------------------------------------------------------------ */

extern "C" void
gc_kmeans_gpu_last_phases(gc_kmeans_gpu_phases *out)
{
	*out = last_phases;
}

/*
 * What km_setup, k-means++ (kmeans_pp.cu), the variance and the final
 * read-back allocate, with room for the allocator's rounding: an upper
 * bound.  The sort-by-label update's row-major copy is counted (when the
 * sums do not fit in shared memory), although km_setup does without it if
 * it cannot be had.
 */
extern "C" size_t
gc_kmeans_gpu_mem_bytes(int64_t n, int d, int k, int n_init)
{
	const double nn = (double) n,
				dd = (double) d,
				kk = (double) k;
	const double nb = (double) ((n + KM_BLOCK - 1) / KM_BLOCK + 1);
	const double kp = (double) ((k + TILE - 1) / TILE * TILE);
	const double slots8 = kk * (dd + 1) * 8;
	double		b = 0;

	b += nn * dd * 4;			/* XT */
	b += nn * (4 + 8 + 4);		/* labels, q, d2 */
	if (n_init > 1)
		b += nn * 4 + kk * dd * 4;	/* labels_best, C_best */
	b += 2 * kk * dd * 4;		/* C[2] */
	if (d <= SMALL_D_MAX)
		b += kk * ((d + 3) / 4 * 4) * 4;
	else
		b += 2 * dd * kp * 4 + kp * 4 + nn * 8;	/* CT, CTo, cnrm, fb_rows, xn2 */
	b += slots8 + dd * 4 + 2 * dd * 8 + nb * 8 + kk * 12 + 4096;
	if (!(slots8 <= 48 * 1024) && !(slots8 <= 160 * 1024))
		b += nn * dd * 4 + nn * 4 + 3 * kk * 4 + (1 << 20);	/* XR, perm, counts, scan */
	else
		b += fmin(64.0 * 1024 * 1024, nn * dd * 4);	/* staging */
	b += 512 * dd * 8;			/* absmax partials */
	b += nn * 4 + nb * (8 + 8 * KM_PP_LMAX) + dd * 4 * KM_PP_LMAX;	/* k-means++ */
	b += nn * 4 * (3 + log(kk));	/* its terms, L = 2 + ln k (random init: unused) */
	b += nb * dd * 8;			/* variance */
	b += 40 * 2.0 * 1024 * 1024;	/* rounding of ~40 allocations */
	return (size_t) (b * 1.02);
}

extern "C" gc_code
gc_kmeans_gpu(const gc_ctx *ctx, const float *X, int64_t n, int d,
			  const gc_kmeans_params *p, gc_kmeans_result *res, gc_status *st)
{
	gc_code		rc;
	double		tol_scaled = 0.0;

	if ((rc = gc_kmeans_check(X, n, d, p, res, st)) != GC_OK || n == 0)
		return rc;
	if (n > INT32_MAX)
		return gc_fail(st, GC_EINVAL, "k-means: the GPU path takes at most %d rows, got %lld",
					   INT32_MAX, (long long) n);

	{
		km_dev		D;
		const bool	keep = p->n_init > 1;
		int			best_cur = 0;
		double		t0 = gc_now_ms();

		memset(&last_phases, 0, sizeof(last_phases));
		if ((rc = km_setup(D, X, n, d, p->k, keep, st)) != GC_OK)
			return rc;
		last_phases.ms_upload = gc_now_ms() - t0;
		if (p->tol > 0.0)
		{
			double		mv;

			if ((rc = km_mean_variance_device(D.s, D.XT, n, d, &mv, st)) != GC_OK)
				return rc;
			tol_scaled = p->tol * mv;
		}
		for (int run = 0; run < p->n_init; run++)
		{
			double		inertia;
			int			iters,
						cur;
			bool		conv;

			if ((rc = km_run(D, ctx, X, p, run, tol_scaled, &cur, &inertia, &iters,
							 &conv, st)) != GC_OK)
				return rc;
			last_phases.total_iterations += iters;
			if (run == 0 || inertia < res->inertia)
			{
				res->inertia = inertia;
				res->iterations = iters;
				res->converged = conv;
				best_cur = cur;
				if (keep)
				{
					KM_CK(cudaMemcpyAsync(D.labels_best, D.labels, sizeof(int32_t) * n,
										  cudaMemcpyDeviceToDevice, D.s));
					KM_CK(cudaMemcpyAsync(D.C_best, D.C[cur], sizeof(float) * (size_t) p->k * d,
										  cudaMemcpyDeviceToDevice, D.s));
				}
			}
		}
		t0 = gc_now_ms();
		{
			const int32_t *lab = keep ? D.labels_best : D.labels;
			const float *C = keep ? D.C_best : D.C[best_cur];

			KM_CK(cudaMemcpyAsync(res->labels, lab, sizeof(int32_t) * n,
								  cudaMemcpyDeviceToHost, D.s));
			KM_CK(cudaMemcpyAsync(res->centroids, C, sizeof(float) * (size_t) p->k * d,
								  cudaMemcpyDeviceToHost, D.s));
			if (res->distance != NULL)
			{
				double		dummy;

				if ((rc = km_inertia(D, C, lab, &dummy, st)) != GC_OK)
					return rc;
				k_sqrt<<<blocks_for(n, 256), 256, 0, D.s>>>(D.q, n);
				KM_LAUNCHED();
				KM_CK(cudaMemcpyAsync(res->distance, D.q, sizeof(double) * n,
									  cudaMemcpyDeviceToHost, D.s));
			}
			KM_CK(cudaStreamSynchronize(D.s));
		}
		last_phases.ms_download = gc_now_ms() - t0;
	}
	return GC_OK;
}

extern "C" gc_code
gc_kmeans_gpu_seed(const gc_ctx *ctx, const float *X, int64_t n, int d, int k,
				   gc_kmeans_init init, uint64_t seed, uint64_t stream,
				   float *centroids, int64_t *chosen, gc_status *st)
{
	km_dev		D;
	gc_code		rc;
	int64_t    *ch = nullptr;

	if (n < 1 || d < 1 || k < 1 || k > n || n > INT32_MAX)
		return gc_fail(st, GC_EINVAL, "gc_kmeans_gpu_seed: bad sizes");
	if ((rc = km_setup(D, X, n, d, k, false, st)) != GC_OK)
		return rc;
	if (chosen && init == GC_INIT_KMEANSPP)
		KM_CK(cudaMalloc(&ch, sizeof(int64_t) * k));
	rc = km_seed(D, ctx, X, init, seed, stream, ch, st);
	if (rc == GC_OK)
	{
		cudaError_t e = cudaMemcpy(centroids, D.C[0], sizeof(float) * (size_t) k * d,
								   cudaMemcpyDeviceToHost);

		if (e == cudaSuccess && ch)
			e = cudaMemcpy(chosen, ch, sizeof(int64_t) * k, cudaMemcpyDeviceToHost);
		if (e != cudaSuccess)
			rc = km_cuda_fail(st, e, "reading the centres");
	}
	cudaFree(ch);
	return rc;
}

extern "C" gc_code
gc_kmeans_gpu_step(const float *X, int64_t n, int d, int k, const float *C_in,
				   int32_t *labels, float *C_out, double *shift,
				   int64_t *n_changed, gc_status *st)
{
	km_dev		D;
	gc_code		rc;

	if (n < 1 || d < 1 || k < 1 || k > n || n > INT32_MAX)
		return gc_fail(st, GC_EINVAL, "gc_kmeans_gpu_step: bad sizes");
	if ((rc = km_setup(D, X, n, d, k, false, st)) != GC_OK)
		return rc;
	KM_CK(cudaMemcpyAsync(D.C[0], C_in, sizeof(float) * (size_t) k * d, cudaMemcpyHostToDevice, D.s));
	KM_CK(cudaMemsetAsync(D.labels, 0xff, sizeof(int32_t) * n, D.s));
	if ((rc = km_prep(D, D.C[0], st)) != GC_OK ||
		(rc = km_iteration(D, 0, st)) != GC_OK)
		return rc;
	KM_CK(cudaMemcpyAsync(labels, D.labels, sizeof(int32_t) * n, cudaMemcpyDeviceToHost, D.s));
	KM_CK(cudaMemcpyAsync(C_out, D.C[1], sizeof(float) * (size_t) k * d, cudaMemcpyDeviceToHost, D.s));
	KM_CK(cudaStreamSynchronize(D.s));
	*shift = D.h_info->shift;
	*n_changed = (int64_t) D.h_info->changed;
	return GC_OK;
}

extern "C" gc_code
gc_kmeans_gpu_bench(const float *X, int64_t n, int d, int k, const float *C0,
					int iters, gc_kmeans_gpu_timing *t, gc_status *st)
{
	km_dev		D;
	gc_code		rc;
	cudaEvent_t e0 = nullptr,
				e1 = nullptr;
	float		ms;
	int			cur = 0;

	memset(t, 0, sizeof(*t));
	if (n < 1 || d < 1 || k < 1 || k > n || n > INT32_MAX || iters < 1)
		return gc_fail(st, GC_EINVAL, "gc_kmeans_gpu_bench: bad sizes");
	if ((rc = km_setup(D, X, n, d, k, false, st)) != GC_OK)
		return rc;
	t->small_path = D.small;
	t->update_replicas = D.R > 0 ? D.R : (D.XR ? -1 : 0);
	KM_CK(cudaEventCreate(&e0));
	KM_CK(cudaEventCreate(&e1));
	KM_CK(cudaMemcpyAsync(D.C[0], C0, sizeof(float) * (size_t) k * d, cudaMemcpyHostToDevice, D.s));
	KM_CK(cudaMemsetAsync(D.labels, 0xff, sizeof(int32_t) * n, D.s));
	rc = km_prep(D, D.C[0], st);
	/* warm-up */
	for (int i = 0; i < 3 && rc == GC_OK; i++, cur = 1 - cur)
		rc = km_iteration(D, cur, st);
	/* whole iterations, read-back and host test included */
	if (rc == GC_OK)
	{
		KM_CK(cudaEventRecord(e0, D.s));
		for (int i = 0; i < iters && rc == GC_OK; i++, cur = 1 - cur)
			rc = km_iteration(D, cur, st);
		KM_CK(cudaEventRecord(e1, D.s));
		KM_CK(cudaEventSynchronize(e1));
		KM_CK(cudaEventElapsedTime(&ms, e0, e1));
		t->ms_iter = ms / iters;
		t->empty_seen = D.h_info->n_empty;
		t->fallback_rows = D.h_info->n_fallback;
	}
	/* the phases alone */
	if (rc == GC_OK)
	{
		KM_CK(cudaEventRecord(e0, D.s));
		for (int i = 0; i < iters && rc == GC_OK; i++)
			rc = km_assign(D, st);
		KM_CK(cudaEventRecord(e1, D.s));
		KM_CK(cudaEventSynchronize(e1));
		KM_CK(cudaEventElapsedTime(&ms, e0, e1));
		t->ms_assign = ms / iters;
	}
	if (rc == GC_OK)
	{
		KM_CK(cudaEventRecord(e0, D.s));
		for (int i = 0; i < iters && rc == GC_OK; i++)
		{
			KM_CK(cudaMemsetAsync(D.gsum, 0, sizeof(unsigned long long) * D.slots, D.s));
			rc = km_update(D, st);
		}
		KM_CK(cudaEventRecord(e1, D.s));
		KM_CK(cudaEventSynchronize(e1));
		KM_CK(cudaEventElapsedTime(&ms, e0, e1));
		t->ms_update = ms / iters;
	}
	cudaEventDestroy(e0);
	cudaEventDestroy(e1);
	return rc;
}
