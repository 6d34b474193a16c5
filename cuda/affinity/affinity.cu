/*
 * affinity.cu — affinity propagation on the GPU, or on several: gc_ap_gpu (src/core/common/gpu.h),
 * the device's passes for the one driver, gc_ap_run (src/core/affinity/affinity.c,
 * which says what every entry is and in which order its operations run).
 * In float8 every entry is the CPU's (affinity_cpu.c) bit for bit: the same
 * double operations, each rounded on its own (-fmad=false), in the same
 * order.  In float4 S, R and A are floats: each entry is computed in double
 * from the stored values and rounded once when stored.
 *
 * One iteration is two kernels (Winter's structure), T the stored type:
 *   ap_colsum  cs[j] = sum over rows in order of Rp[i][j]: a thread a
 *              column, walking the rows with AP_COL_AHEAD loads in flight;
 *              reads R (sizeof(T) bytes an entry);
 *   ap_rows    a block a row: sweep 1 updates A from R, S and cs and
 *              keeps the row's top two of A+S (and an argmax), the exemplar
 *              flag on the diagonal; sweep 2 updates R from R, S and the
 *              top two.  Sweep 2 needs the row's R and S again: sweep 1
 *              keeps the first nk columns of both in shared memory (all a
 *              multiprocessor has: 14.5k doubles, 29k floats), and the rest
 *              are re-read from L2, where sweep 1 has just brought them.
 *              So from memory it reads R, A, S and writes A and R, 5
 *              sizeof(T) bytes an entry.  (Re-read from L2 alone, the rows
 *              in flight, 264 of 20k floats' R and S = 42 MB, missed the
 *              H100's L2 and read 7.)  When the whole row is kept, sweep 2
 *              reads no memory: while the block reduces its top two and
 *              runs sweep 2, the head of its next row's S, R and A is
 *              prefetched into L2, so that the multiprocessor keeps reading.
 * So 6 sizeof(T) bytes an entry an iteration: 24 in float4, 48 in float8,
 * and no n x n temporary beyond S, R and A.  Damping is in both passes.
 * Where the CPU tests v == max for the row's argmax, the row keeps one
 * index of its maximum: any other index holding the maximum means a tie,
 * where the second largest equals the largest, so Y is the same.
 *
 * Split over several GPUs (ctx->gpus), each holds a part of S, R and A's
 * rows; every entry's operations stay one GPU's (see "Split over P GPUs"
 * below).
 *
 * The median (when no preference is given) is a radix select on the bits
 * of -S over the upper triangle, 8 bits a pass, counted in shared memory.
 * The labelling's two assignments and the exemplar scores run here; the
 * driver does the rest on the host from O(n) results.
 *
 * Every CUDA call is checked (check.cuh: GC_ENOMEM for allocation
 * failures, else GC_EDEVICE); the cancel flags are polled between
 * launches.  Device memory: gc_ap_gpu_mem_bytes.
 */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <algorithm>

#include <cuda_runtime.h>
#include <thrust/binary_search.h>
#include <thrust/execution_policy.h>

#include "common/check.cuh"
#include "common/multi.cuh"
#include "common/launch.cuh"
#include "common/gpu.h"
#include "affinity/affinity.h"
#include "common/rng.h"

#define AP_CK(expr) GC_CUDA_CK("GPU affinity propagation", expr)

/* ap_rows: threads a block (a row), and units (ap_vec) a thread loads at once */
#define AP_ROW_THREADS 1024
#define AP_ROW_BATCH 2
/*
 * ap_rows runs one block a multiprocessor (its 1024 threads take the
 * registers), which keeps a whole row of 20k floats in shared memory (two
 * blocks of 512 kept 72% of it: 4.05 against 4.00 ms an iteration; 8.12
 * against 7.16 for doubles).  The most shared memory a block keeps its
 * row's columns in (-1: all a block can have); the tests and the bench
 * set it (gc_ap_gpu_set_row_keep, cuda/affinity/affinity_hooks.cu).
 */
long		gc_ap_row_keep_bytes = -1;
/*
 * Bytes of each of S, R and A at the head of its next row that an ap_rows
 * block prefetches into L2 after its sweep 1, when it keeps whole rows.
 * Measured on the H100 at 20k floats (row pass, ms): none 3.35, 16 KB
 * 3.26, 24 KB 3.23, 32 KB 3.15, 40 KB 3.17, 48 KB 3.21, 64 KB 3.45.  Where
 * sweep 2 re-reads from L2 (rows longer than the shared memory: 20k and 40k
 * doubles, 40k floats) it was slower (6.17 against 5.99 ms at 20k doubles),
 * so there is none.  The tests and the bench set it
 * (gc_ap_gpu_set_row_prefetch; -1: this rule).
 */
#define AP_ROW_PREFETCH 32768
long		gc_ap_row_prefetch_bytes = -1;
/* ap_colsum: threads a block, and rows each thread loads ahead (20k floats:
 * 0.690 ms with 32, 0.653 with 64) */
#define AP_COL_THREADS 64
#define AP_COL_AHEAD 64
/* ap_sim: a block computes AP_SIM_TILE x AP_SIM_TILE entries */
#define AP_SIM_TILE 32
#define AP_SIM_DCHUNK 32
/* the median's radix select */
#define AP_RADIX_BITS 8
#define AP_RADIX_SIZE (1 << AP_RADIX_BITS)

/* ------------------------------------------------------------------ */
/* kernels                                                             */
/* ------------------------------------------------------------------ */

/* the stored type's epsilon and smallest normal, for the noise */
template <typename T> struct ap_limits;
template <> struct ap_limits<double>
{
	static __device__ __forceinline__ double eps() { return DBL_EPSILON; }
	static __device__ __forceinline__ double tiny() { return DBL_MIN; }
};
template <> struct ap_limits<float>
{
	static __device__ __forceinline__ double eps() { return (double) FLT_EPSILON; }
	static __device__ __forceinline__ double tiny() { return (double) FLT_MIN; }
};

/*
 * Every kernel over S, R or A takes a part's rows: rows r0 .. r0+m-1 of
 * the n x n matrices, stored m x n (row i at (i - r0) n).  One GPU's part
 * is all of them (r0 = 0, m = n).
 */

/*
 * S[i][j] = -gc_dist2_f64(x_i, x_j): the squared differences summed in
 * double in dimension order (the CPU's operations, s = 0.0 then s += t*t).
 * A block: rows i0 .. i0+31 by columns j0 .. j0+31, threads 32 x 8, each
 * 4 entries; the features staged in shared memory 32 dimensions at a time.
 */
template <typename T>
__global__ void
ap_sim(const float *__restrict__ X, int n, int d, int r0, int m,
	   T *__restrict__ S)
{
	__shared__ double xi[AP_SIM_TILE][AP_SIM_DCHUNK + 1];
	__shared__ double xj[AP_SIM_TILE][AP_SIM_DCHUNK + 1];
	const int	i0 = r0 + blockIdx.y * AP_SIM_TILE,
				j0 = blockIdx.x * AP_SIM_TILE;
	const int	tx = threadIdx.x,
				ty = threadIdx.y;
	double		s[4] = {0.0, 0.0, 0.0, 0.0};

	for (int k0 = 0; k0 < d; k0 += AP_SIM_DCHUNK)
	{
		const int	kc = d - k0 < AP_SIM_DCHUNK ? d - k0 : AP_SIM_DCHUNK;

		__syncthreads();
		for (int r = ty; r < AP_SIM_TILE; r += blockDim.y)
		{
			int			i = i0 + r,
						j = j0 + r;

			if (tx < kc)
			{
				xi[r][tx] = i < r0 + m ? (double) X[(size_t) i * d + k0 + tx] : 0.0;
				xj[r][tx] = j < n ? (double) X[(size_t) j * d + k0 + tx] : 0.0;
			}
		}
		__syncthreads();
		for (int k = 0; k < kc; k++)
		{
			const double b = xj[tx][k];

			GC_UNROLL
			for (int q = 0; q < 4; q++)
			{
				double		t = xi[ty + 8 * q][k] - b;

				s[q] = __dadd_rn(s[q], __dmul_rn(t, t));
			}
		}
	}
	GC_UNROLL
	for (int q = 0; q < 4; q++)
	{
		int			i = i0 + ty + 8 * q,
					j = j0 + tx;

		if (i < r0 + m && j < n)
			S[(size_t) (i - r0) * n + j] = (T) (-s[q]);
	}
}

/* Counts, over the part's i < j, the digit at shift of the bits of
 * x = -S[i][j] whose higher bits (mask) equal prefix.  A block a row
 * (grid-stride). */
template <typename T>
__global__ void
ap_hist(const T *__restrict__ S, int n, int r0, int m, uint64_t prefix,
		uint64_t mask, int shift, unsigned long long *__restrict__ hist)
{
	__shared__ unsigned int h[AP_RADIX_SIZE];

	for (int b = threadIdx.x; b < AP_RADIX_SIZE; b += blockDim.x)
		h[b] = 0;
	__syncthreads();
	for (int l = blockIdx.x; l < m; l += gridDim.x)
	{
		const int	i = r0 + l;
		const T    *Si = S + (size_t) l * n;

		for (int j = i + 1 + threadIdx.x; j < n; j += blockDim.x)
		{
			double		x = -(double) Si[j];
			uint64_t	bits = (uint64_t) __double_as_longlong(x);

			if ((bits & mask) == prefix)
				atomicAdd(&h[(bits >> shift) & (AP_RADIX_SIZE - 1)], 1u);
		}
	}
	__syncthreads();
	for (int b = threadIdx.x; b < AP_RADIX_SIZE; b += blockDim.x)
		if (h[b] != 0)
			atomicAdd(&hist[b], (unsigned long long) h[b]);
}

/* *differ = 1 when some S[i][j] of the part, i != j, is not s01 (S[0][1]) */
template <typename T>
__global__ void
ap_all_equal(const T *__restrict__ S, int n, int r0, int m, T s01,
			 int *__restrict__ differ)
{
	const size_t mn = (size_t) m * n;

	for (size_t x = (size_t) blockIdx.x * blockDim.x + threadIdx.x; x < mn;
		 x += (size_t) gridDim.x * blockDim.x)
	{
		size_t		l = x / n,
					i = r0 + l,
					j = x - l * n;

		if (i != j && S[x] != s01)
		{
			*differ = 1;
			return;
		}
	}
}

/*
 * The preference on the diagonal, then the noise on every entry:
 * S += (eps*S + 100*tiny) * z, z = (2u - 1) sqrt 3, u the generator's draw
 * at counter i*n + j (affinity_cpu.c's ap_noise_row).
 */
template <typename T>
__global__ void
ap_prepare(T *__restrict__ S, int n, int r0, int m, double pref)
{
	const size_t mn = (size_t) m * n,
				x0 = (size_t) r0 * n;	/* the part's first entry's counter */
	const double sqrt3 = sqrt(3.0);
	const double tiny100 = __dmul_rn(ap_limits<T>::tiny(), 100.0);
	const double eps = ap_limits<T>::eps();

	for (size_t x = (size_t) blockIdx.x * blockDim.x + threadIdx.x; x < mn;
		 x += (size_t) gridDim.x * blockDim.x)
	{
		size_t		l = x / n;
		double		s = (r0 + l == x - l * n) ? (double) (T) pref : (double) S[x];
		double		u = gc_rng_uniform(GC_AP_NOISE_SEED, GC_AP_NOISE_STREAM, (uint64_t) (x0 + x));
		double		z = __dmul_rn(__dsub_rn(__dmul_rn(2.0, u), 1.0), sqrt3);
		double		t = __dadd_rn(__dmul_rn(eps, s), tiny100);

		t = __dmul_rn(t, z);
		S[x] = (T) __dadd_rn(s, t);
	}
}

/*
 * A load the compiler keeps in place (volatile asm): a batch of them is
 * issued before the first use, so the batch is in flight at once (plain
 * loads are sunk next to their additions, one or two in flight).
 */
static __device__ __forceinline__ double
ap_load_early(const double *p)
{
	double		v;

	asm volatile("ld.global.nc.f64 %0, [%1];" : "=d"(v) : "l"(p));
	return v;
}

static __device__ __forceinline__ float
ap_load_early(const float *p)
{
	float		v;

	asm volatile("ld.global.nc.f32 %0, [%1];" : "=f"(v) : "l"(p));
	return v;
}

/*
 * V entries of T in 8 bytes, loaded and stored at once: a warp's access is
 * 256 bytes of a matrix row (floats 4 bytes at a time: the row pass at 20k
 * took 3.36 against 3.32 ms).  The address must be 8 bytes aligned.
 */
template <typename T> struct ap_vec;
template <> struct ap_vec<double>
{
	static constexpr int V = 1;
};
template <> struct ap_vec<float>
{
	static constexpr int V = 2;
};

static __device__ __forceinline__ void
ap_load8(const double *p, double *v)
{
	v[0] = ap_load_early(p);
}

static __device__ __forceinline__ void
ap_load8(const float *p, float *v)
{
	asm volatile("ld.global.nc.v2.f32 {%0, %1}, [%2];" : "=f"(v[0]), "=f"(v[1]) : "l"(p));
}

static __device__ __forceinline__ void
ap_store8(double *p, const double *v)
{
	*p = v[0];
}

static __device__ __forceinline__ void
ap_store8(float *p, const float *v)
{
	*(float2 *) p = make_float2(v[0], v[1]);
}

/* a column sum's next term: R[i][j] on the diagonal, else max(R[i][j], 0) */
template <typename T>
static __device__ __forceinline__ double
ap_col_term(double c, T v, bool diagonal)
{
	double		r = (double) v;

	return __dadd_rn(c, diagonal ? r : (r > 0.0 ? r : 0.0));
}

/*
 * For the columns j0 <= j < j1: cs[j] = (carry ? cs[j] : 0.0) plus, over
 * the part's rows i in order, (i == j ? R[i][j] : max(R[i][j], 0)): the
 * column sums over every row when a part carries on from the sums of the
 * parts above it.  A thread a column, AP_COL_AHEAD rows loaded ahead.
 * (Two float columns a thread, 8-byte loads, ran slower: 0.89 against
 * 0.69 ms at 20k.)
 */
template <typename T>
__global__ void
__launch_bounds__(AP_COL_THREADS, 1)
ap_colsum(const T *__restrict__ R, int n, int r0, int m, int j0, int j1,
		  bool carry, double *__restrict__ cs)
{
	const int	j = j0 + blockIdx.x * blockDim.x + threadIdx.x;
	const T    *Rj = R + j;
	double		c;
	int			l0 = 0;

	if (j >= j1)
		return;
	c = carry ? cs[j] : 0.0;
	/* whole batches: the loads first, all in flight, then the sums */
	for (; l0 + AP_COL_AHEAD <= m; l0 += AP_COL_AHEAD)
	{
		T			v[AP_COL_AHEAD];

		GC_UNROLL
		for (int u = 0; u < AP_COL_AHEAD; u++)
			v[u] = ap_load_early(Rj + (size_t) (l0 + u) * n);
		GC_UNROLL
		for (int u = 0; u < AP_COL_AHEAD; u++)
			c = ap_col_term(c, v[u], r0 + l0 + u == j);
	}
	for (; l0 < m; l0++)
		c = ap_col_term(c, Rj[(size_t) l0 * n], r0 + l0 == j);
	cs[j] = c;
}

/*
 * The first `bytes` of row l of M (m x n) into L2, as a bulk prefetch
 * (sm_90; none before): from the 16-byte boundary at or below the row's
 * start, at most the row's length, inside the matrix.
 */
template <typename T>
static __device__ __forceinline__ void
ap_prefetch_row(const T *M, int n, int m, int l, int bytes)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
	const uintptr_t a = (uintptr_t) (M + (size_t) l * n) & ~(uintptr_t) 15,
				end = (uintptr_t) (M + (size_t) m * n);
	size_t		len = (size_t) n * sizeof(T) + 15;

	len = len < (size_t) bytes ? len : (size_t) bytes;
	len = (len < end - a ? len : end - a) & ~(size_t) 15;
	if (len > 0)
		asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;"
					 :: "l"(a), "r"((unsigned) len) : "memory");
#endif
}

/* the top two of a multiset, and an index of the largest */
struct ap_top2
{
	double		m1,
				m2;
	int			k;

	__device__ __forceinline__ void add(double v, int j)
	{
		double		lo = v < m1 ? v : m1;

		if (v > m1)
		{
			m1 = v;
			k = j;
		}
		m2 = lo > m2 ? lo : m2;
	}
	__device__ __forceinline__ void merge(double b1, double b2, int bk)
	{
		double		lo = b1 < m1 ? b1 : m1;

		if (b1 > m1)
		{
			m1 = b1;
			k = bk;
		}
		m2 = lo > m2 ? lo : m2;
		m2 = b2 > m2 ? b2 : m2;
	}
};

/*
 * Sweep 1 on entry (i, j) of S, R, A (s, r, a), cs[j] = c: with update_a,
 * A's update (affinity.c's rule) and on the diagonal the exemplar flag
 * E[l] = (A[i][i] + R[i][i]) > 0 (l: the row's place in the part) with the
 * counts of exemplars and of flags changed from Eprev; else A is 0 (the
 * first pass).  Adds A+S to the row's top two; returns the new A.
 */
template <typename T, bool UPDATE_A>
static __device__ __forceinline__ T
ap_sweep1(int i, int l, int j, T s, T r, T a, double c, double damping, double omd,
		  ap_top2 &t, uint8_t *E, const uint8_t *Eprev,
		  unsigned long long *counts)
{
	double		ad = 0.0;

	if (UPDATE_A)
	{
		double		rd = (double) r,
					x;

		if (j != i)
		{
			x = __dsub_rn(rd > 0.0 ? rd : 0.0, c);
			x = x > 0.0 ? x : 0.0;
		}
		else
			x = __dsub_rn(rd, c);
		ad = (double) (T) __dsub_rn(__dmul_rn((double) a, damping), __dmul_rn(x, omd));
		if (j == i)
		{
			uint8_t		e = __dadd_rn(ad, rd) > 0.0;

			E[l] = e;
			if (e)
				atomicAdd(&counts[0], 1ull);
			if (e != Eprev[l])
				atomicAdd(&counts[1], 1ull);
		}
	}
	t.add(__dadd_rn(ad, (double) s), j);
	return (T) ad;
}

/* sweep 2 on an entry: R = R*damping + (S - y)*omd, y the row's Y there */
template <typename T>
static __device__ __forceinline__ T
ap_sweep2(T r, T s, double y, double damping, double omd)
{
	return (T) __dadd_rn(__dmul_rn((double) r, damping),
						 __dmul_rn(__dsub_rn((double) s, y), omd));
}

/*
 * Row i of the part (a block a row, grid-stride): sweep 1 (ap_sweep1) over the row,
 * the row's top two reduced over the block, then with update_r sweep 2
 * (ap_sweep2) with Y the largest, or at the argmax the second largest.
 * Each thread takes units of V columns (8 bytes of each matrix), AP_ROW_BATCH
 * units at a time; a row of floats that starts off 8 bytes (n and i odd)
 * has its column 0 apart, and a last column left over apart, each taken by
 * a thread of its own.  Sweep 1 keeps S[i][j] and R[i][j] for j < nk
 * (update_a only) in the dynamic shared memory, 2 nk values: both sweeps
 * give a thread the same columns, so a thread reads back only what it
 * kept; the rest sweep 2 re-reads from L2.  After sweep 1, three threads
 * prefetch the first pf bytes of the block's next row of S, R and A.
 */
template <typename T, bool UPDATE_A>
__global__ void
__launch_bounds__(AP_ROW_THREADS, 1)
ap_rows(const T *__restrict__ S, T *__restrict__ R, T *__restrict__ A,
		const double *__restrict__ cs, int n, int r0, int m, int nk, int pf, double damping,
		double omd, bool update_r, uint8_t *__restrict__ E,
		const uint8_t *__restrict__ Eprev,
		unsigned long long *__restrict__ counts)
{
	constexpr int V = ap_vec<T>::V,
				B = AP_ROW_BATCH;
	extern __shared__ __align__(16) unsigned char ap_row_keep[];
	__shared__ double w1[AP_ROW_THREADS / 32],
				w2[AP_ROW_THREADS / 32];
	__shared__ int wk[AP_ROW_THREADS / 32];
	const int	kn = UPDATE_A ? nk : 0;	/* the first pass keeps nothing */
	T		   *Sk = (T *) ap_row_keep,
			   *Rk = Sk + kn;
	const int	lane = threadIdx.x & 31,
				warp = threadIdx.x >> 5;

	for (int l = blockIdx.x; l < m; l += gridDim.x)
	{
		const int	i = r0 + l;
		const size_t off = (size_t) l * n;
		const T    *Si = S + off;
		T		   *Ri = R + off,
				   *Ai = A + off;
		const int	h = (int) (off % V);	/* 1: column 0 apart */
		const int	units = (n - h) / V;
		/* this thread's column apart: 0 (h = 1) or n - 1 (left over) */
		const int	single = threadIdx.x == AP_ROW_THREADS - 1 && h == 1 ? 0 :
			threadIdx.x == AP_ROW_THREADS - 2 && h + units * V < n ? n - 1 : -1;
		ap_top2		t = {-INFINITY, -INFINITY, 0};

		for (int q0 = threadIdx.x; q0 < units; q0 += AP_ROW_THREADS * B)
		{
			T			sv[B][V],
						rv[B][V],
						av[B][V];
			double		cv[B][V];

			/* the batch's loads first, in flight together */
			GC_UNROLL
			for (int u = 0; u < B; u++)
			{
				const int	q = q0 + u * AP_ROW_THREADS,
							j = h + V * q;

				if (q >= units)
					break;
				ap_load8(Si + j, sv[u]);
				if (UPDATE_A)
				{
					ap_load8(Ri + j, rv[u]);
					ap_load8(Ai + j, av[u]);
					GC_UNROLL
					for (int e = 0; e < V; e++)
						cv[u][e] = ap_load_early(cs + j + e);
				}
			}
			GC_UNROLL
			for (int u = 0; u < B; u++)
			{
				const int	q = q0 + u * AP_ROW_THREADS,
							j = h + V * q;
				T			an[V];

				if (q >= units)
					break;
				GC_UNROLL
				for (int e = 0; e < V; e++)
				{
					if (j + e < kn)
					{
						Sk[j + e] = sv[u][e];
						Rk[j + e] = rv[u][e];
					}
					an[e] = ap_sweep1<T, UPDATE_A>(i, l, j + e, sv[u][e], rv[u][e], av[u][e],
												   cv[u][e], damping, omd, t, E, Eprev, counts);
				}
				if (UPDATE_A)
					ap_store8(Ai + j, an);
			}
		}
		if (single >= 0)
		{
			const int	j = single;
			const T		sv = Si[j],
						rv = UPDATE_A ? Ri[j] : (T) 0;
			T			an;

			if (j < kn)
			{
				Sk[j] = sv;
				Rk[j] = rv;
			}
			an = ap_sweep1<T, UPDATE_A>(i, l, j, sv, rv, UPDATE_A ? Ai[j] : (T) 0,
										UPDATE_A ? cs[j] : 0.0, damping, omd, t, E, Eprev, counts);
			if (UPDATE_A)
				Ai[j] = an;
		}

		if (pf > 0 && threadIdx.x < 3 && l + (int) gridDim.x < m)
			ap_prefetch_row(threadIdx.x == 0 ? S : threadIdx.x == 1 ? R : A, n, m,
							l + gridDim.x, pf);

		/* the block's top two: warps, then the first warp over the warps */
		for (int o = 16; o > 0; o >>= 1)
			t.merge(__shfl_down_sync(0xffffffffu, t.m1, o),
					__shfl_down_sync(0xffffffffu, t.m2, o),
					__shfl_down_sync(0xffffffffu, t.k, o));
		if (lane == 0)
		{
			w1[warp] = t.m1;
			w2[warp] = t.m2;
			wk[warp] = t.k;
		}
		__syncthreads();
		if (warp == 0)
		{
			if (lane < AP_ROW_THREADS / 32)
				t = {w1[lane], w2[lane], wk[lane]};
			else
				t = {-INFINITY, -INFINITY, 0};
			for (int o = 16; o > 0; o >>= 1)
				t.merge(__shfl_down_sync(0xffffffffu, t.m1, o),
						__shfl_down_sync(0xffffffffu, t.m2, o),
						__shfl_down_sync(0xffffffffu, t.k, o));
			if (lane == 0)
			{
				w1[0] = t.m1;
				w2[0] = t.m2;
				wk[0] = t.k;
			}
		}
		__syncthreads();
		if (update_r)
		{
			const double m1 = w1[0],
						m2 = w2[0];
			const int	k = wk[0];

			for (int q0 = threadIdx.x; q0 < units; q0 += AP_ROW_THREADS * B)
			{
				T			rv[B][V],
							sv[B][V];

				GC_UNROLL
				for (int u = 0; u < B; u++)
				{
					const int	q = q0 + u * AP_ROW_THREADS,
								j = h + V * q;

					if (q >= units)
						break;
					if (j + V > kn)
					{
						ap_load8(Ri + j, rv[u]);
						ap_load8(Si + j, sv[u]);
					}
				}
				GC_UNROLL
				for (int u = 0; u < B; u++)
				{
					const int	q = q0 + u * AP_ROW_THREADS,
								j = h + V * q;
					T			rn[V];

					if (q >= units)
						break;
					GC_UNROLL
					for (int e = 0; e < V; e++)
					{
						const bool	kept = j + e < kn;

						rn[e] = ap_sweep2(kept ? Rk[j + e] : rv[u][e], kept ? Sk[j + e] : sv[u][e],
										  j + e == k ? m2 : m1, damping, omd);
					}
					ap_store8(Ri + j, rn);
				}
			}
			if (single >= 0)
			{
				const int	j = single;

				Ri[j] = ap_sweep2(j < kn ? Rk[j] : Ri[j], j < kn ? Sk[j] : Si[j],
								  j == k ? m2 : m1, damping, omd);
			}
		}
		__syncthreads();		/* w1, w2, wk are the next row's */
	}
}

/* c[l] = the k of largest S[i][ex[k]] for the part's row i = r0 + l, first
 * k on ties: a warp a row */
template <typename T>
__global__ void
ap_assign(const T *__restrict__ S, int n, int m, const int32_t *__restrict__ ex,
		  int K, int32_t *__restrict__ c)
{
	const int	lane = threadIdx.x & 31;
	const int	l = (int) (((int64_t) blockIdx.x * blockDim.x + threadIdx.x) >> 5);
	double		best = -INFINITY;
	int			bk = INT32_MAX;

	if (l >= m)
		return;
	for (int k = lane; k < K; k += 32)
	{
		double		v = (double) S[(size_t) l * n + ex[k]];

		if (v > best || bk == INT32_MAX)
		{
			best = v;
			bk = k;
		}
	}
	for (int o = 16; o > 0; o >>= 1)
	{
		double		ob = __shfl_down_sync(0xffffffffu, best, o);
		int			ok = __shfl_down_sync(0xffffffffu, bk, o);

		if (ok != INT32_MAX && (bk == INT32_MAX || ob > best || (ob == best && ok < bk)))
		{
			best = ob;
			bk = ok;
		}
	}
	if (lane == 0)
		c[l] = bk;
}

/*
 * score[q] = sum over the members v of q's cluster, in order, of S[v][q],
 * from the first member's term: the part adds its members (rows r0 ..
 * r0+m-1), carrying on from score[q] when the cluster's first member is
 * above the part (the parts above it have summed theirs).
 */
template <typename T>
__global__ void
ap_scores(const T *__restrict__ S, int n, int r0, int m,
		  const int32_t *__restrict__ c, const int32_t *__restrict__ off,
		  const int32_t *__restrict__ mem, double *__restrict__ score)
{
	const int	q = blockIdx.x * blockDim.x + threadIdx.x;

	if (q >= n)
		return;
	{
		const int	k = c[q];
		bool		begun = mem[off[k]] < r0;
		double		s = begun ? score[q] : 0.0;
		/* the first member in the part: members ascend */
		const int32_t *first = thrust::lower_bound(thrust::seq, mem + off[k], mem + off[k + 1], r0);

		for (int p = (int) (first - mem); p < off[k + 1] && mem[p] < r0 + m; p++)
		{
			const double v = (double) S[(size_t) (mem[p] - r0) * n + q];

			s = begun ? __dadd_rn(s, v) : v;
			begun = true;
		}
		if (begun)
			score[q] = s;
	}
}

/* ------------------------------------------------------------------ */
/* the passes                                                          */
/* ------------------------------------------------------------------ */

/* per thread: the GPU worker runs jobs on several */
static thread_local gc_ap_gpu_phases ap_phases;

extern "C" void
gc_ap_gpu_last_phases(gc_ap_gpu_phases *out)
{
	*out = ap_phases;
}

/*
 * Split over P GPUs, part p holds rows r0 .. r0+m-1 of S, R and A, so each
 * GPU holds about 1/P of the matrices.  Every pass but two runs on each
 * part alone, side by side: its entries' operations are the one-GPU
 * pass's, in the same order.  The two that cross the parts keep one GPU's
 * order of additions:
 *   column sums  a chain down the parts: part p carries on from part
 *                p-1's sums (copied over), and the last part's, the sums
 *                over every row, go back to the others.  The columns are
 *                cut in AP_COL_CHUNKS chunks, so part p sums a chunk while
 *                part p-1 sums the next;
 *   scores       the same chain, once, over the members of each cluster.
 * The median's histograms and the counts of exemplars and changes are
 * counts, summed on the host.
 */
#define AP_COL_CHUNKS 4

/* A part's device resources (check.cuh); the events timing the passes
 * (part 0's) and marking its chain's chunks done. */
struct ap_dev : gc_dev
{
	cudaEvent_t ev[3] = {nullptr, nullptr, nullptr};
	cudaEvent_t chain[AP_COL_CHUNKS] = {};

	void		destroy()
	{
		release();
		for (cudaEvent_t &e : ev)
			if (e)
				cudaEventDestroy(e), e = nullptr;
		for (cudaEvent_t &e : chain)
			if (e)
				cudaEventDestroy(e), e = nullptr;
	}

	~ap_dev()
	{
		destroy();
	}
};

/* one GPU's part: rows r0 .. r0+m-1 of S, R and A, stored m x n */
template <typename T>
struct ap_part
{
	ap_dev		D;
	int			dev = 0;
	int			r0 = 0,
				m = 0;
	int			sms = 0;
	int			nk = 0;			/* columns ap_rows keeps in shared memory */
	int			pf = 0;			/* bytes of its next row it prefetches */
	T		   *S = nullptr,
			   *R = nullptr,
			   *A = nullptr;
	double	   *cs = nullptr;	/* the column sums, n */
	uint8_t    *E = nullptr,	/* the part's rows' exemplar flags */
			   *Eprev = nullptr;
	unsigned long long *counts = nullptr;	/* exemplars, changed; the histogram */
	unsigned long long h_counts[AP_RADIX_SIZE];	/* their copies read back */
};

template <typename T>
struct ap_gpu_ws
{
	const gc_ctx *ctx;
	const float *X;				/* host */
	int			n,
				d;
	int			P = 0;			/* parts, one a GPU */
	ap_part<T>	part[GC_GPUS_MAX];

	~ap_gpu_ws()
	{
		for (int p = 0; p < P; p++)
		{
			cudaSetDevice(part[p].dev);
			part[p].D.destroy();
		}
	}
};

#define AP_ALLOC(q, ptr, count) AP_CK((q).D.alloc((ptr), (count)))

/*
 * The row pass's settings.  The columns of its row an ap_rows block keeps
 * in shared memory: as many as a block can have (at most
 * gc_ap_row_keep_bytes); and the bytes of its next row it prefetches:
 * AP_ROW_PREFETCH when it keeps whole rows on sm_90 or later, else none
 * (or gc_ap_row_prefetch_bytes).  The kernel's attributes are the same for
 * every call (calls on other threads, the GPU worker's, share them): all
 * the shared memory a block can have, and the multiprocessor's L1 given to
 * shared memory.  The part's GPU is current.
 */
template <typename T>
static gc_code
ap_row_setup(ap_part<T> &q, int n, gc_status *st)
{
	cudaFuncAttributes fa;
	int			optin,
				major;
	long		avail;

	AP_CK(cudaFuncGetAttributes(&fa, ap_rows<T, true>));
	AP_CK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, q.dev));
	AP_CK(gc_allow_dynamic_smem((const void *) ap_rows<T, true>));
	AP_CK(cudaFuncSetAttribute(ap_rows<T, true>, cudaFuncAttributePreferredSharedMemoryCarveout,
							   (int) cudaSharedmemCarveoutMaxShared));
	avail = optin - (long) fa.sharedSizeBytes;
	if (gc_ap_row_keep_bytes >= 0 && avail > gc_ap_row_keep_bytes)
		avail = gc_ap_row_keep_bytes;
	if (avail < 0)
		avail = 0;
	q.nk = (int) std::min<long>(n, avail / (long) (2 * sizeof(T)));
	AP_CK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, q.dev));
	q.pf = major >= 9 && q.nk == n ? AP_ROW_PREFETCH : 0;
	if (gc_ap_row_prefetch_bytes >= 0)
		q.pf = (int) std::min<long>(gc_ap_row_prefetch_bytes, INT32_MAX);
	ap_phases.row_keep = q.nk;
	ap_phases.row_prefetch = q.pf;
	return GC_OK;
}

/* launch grid for a grid-stride kernel over many items */
static inline unsigned
ap_grid(int sms, int per_sm)
{
	return (unsigned) sms * (unsigned) per_sm;
}

/* every part's stream done, then the cancel flags */
template <typename T>
static gc_code
ap_sync_poll(ap_gpu_ws<T> *w, gc_status *st)
{
	for (int p = 0; p < w->P; p++)
	{
		AP_CK(cudaSetDevice(w->part[p].dev));
		AP_CK(cudaStreamSynchronize(w->part[p].D.s));
	}
	if (gc_cancelled(w->ctx))
		return gc_fail(st, GC_ECANCEL, "canceled");
	return GC_OK;
}

/* the parts' chain of count values: part p copies part p-1's, from v0, into
 * its own (at v0 + ... of part p's pointer), once part p-1 has marked
 * chain[c] */
template <typename T, typename V>
static gc_code
ap_chain_in(ap_gpu_ws<T> *w, int p, int c, V *mine, const V *theirs,
			size_t count, gc_status *st)
{
	ap_part<T> &q = w->part[p],
			   &b = w->part[p - 1];

	AP_CK(cudaStreamWaitEvent(q.D.s, b.D.chain[c], 0));
	AP_CK(cudaMemcpyPeerAsync(mine, q.dev, theirs, b.dev, sizeof(V) * count, q.D.s));
	return GC_OK;
}

/*
 * Each part's counts[first .. first+count) into its h_counts, after every
 * part's launches: a copy into pageable memory returns when its stream
 * is done.
 */
template <typename T>
static gc_code
ap_read_back(ap_gpu_ws<T> *w, int first, int count, gc_status *st)
{
	for (int p = 0; p < w->P; p++)
	{
		ap_part<T> &q = w->part[p];

		AP_CK(cudaSetDevice(q.dev));
		AP_CK(cudaMemcpyAsync(q.h_counts, q.counts + first, sizeof(unsigned long long) * count,
							  cudaMemcpyDeviceToHost, q.D.s));
	}
	return GC_OK;
}

template <typename T>
static gc_code
g_similarities(void *v, gc_status *st)
{
	ap_gpu_ws<T> *w = (ap_gpu_ws<T> *) v;
	float	   *Xd[GC_GPUS_MAX];
	double		t0 = gc_now_ms();
	gc_code		rc;

	for (int p = 0; p < w->P; p++)
	{
		ap_part<T> &q = w->part[p];
		const size_t mn = (size_t) q.m * w->n;
		dim3		grid((w->n + AP_SIM_TILE - 1) / AP_SIM_TILE,
						 (q.m + AP_SIM_TILE - 1) / AP_SIM_TILE);

		AP_CK(cudaSetDevice(q.dev));
		AP_ALLOC(q, Xd[p], (size_t) w->n * w->d);
		AP_CK(cudaMemcpyAsync(Xd[p], w->X, sizeof(float) * (size_t) w->n * w->d,
							  cudaMemcpyHostToDevice, q.D.s));
		AP_CK(cudaMemsetAsync(q.R, 0, sizeof(T) * mn, q.D.s));
		AP_CK(cudaMemsetAsync(q.A, 0, sizeof(T) * mn, q.D.s));
		ap_sim<T><<<grid, dim3(32, 8), 0, q.D.s>>>(Xd[p], w->n, w->d, q.r0, q.m, q.S);
		AP_CK(cudaGetLastError());
	}
	rc = ap_sync_poll(w, st);
	for (int p = 0; p < w->P; p++)
	{
		AP_CK(cudaSetDevice(w->part[p].dev));
		w->part[p].D.drop(Xd[p]);
	}
	ap_phases.ms_similarity = gc_now_ms() - t0;
	return rc;
}

template <typename T>
static gc_code
g_select_upper(void *v, int64_t m, double *out, gc_status *st)
{
	ap_gpu_ws<T> *w = (ap_gpu_ws<T> *) v;
	uint64_t	prefix = 0,
				mask = 0;
	int64_t		rank = m;
	double		t0 = gc_now_ms();
	gc_code		rc;

	for (int shift = 64 - AP_RADIX_BITS; shift >= 0; shift -= AP_RADIX_BITS)
	{
		int			bucket;

		for (int p = 0; p < w->P; p++)
		{
			ap_part<T> &q = w->part[p];
			unsigned long long *hist = q.counts + 2;

			AP_CK(cudaSetDevice(q.dev));
			AP_CK(cudaMemsetAsync(hist, 0, sizeof(unsigned long long) * AP_RADIX_SIZE, q.D.s));
			ap_hist<T><<<ap_grid(q.sms, 8), 256, 0, q.D.s>>>(q.S, w->n, q.r0, q.m, prefix, mask,
															 shift, hist);
			AP_CK(cudaGetLastError());
		}
		if ((rc = ap_read_back(w, 2, AP_RADIX_SIZE, st)) != GC_OK ||
			(rc = ap_sync_poll(w, st)) != GC_OK)
			return rc;
		for (bucket = 0; bucket < AP_RADIX_SIZE; bucket++)
		{
			int64_t		cnt = 0;

			for (int p = 0; p < w->P; p++)
				cnt += (int64_t) w->part[p].h_counts[bucket];
			if (rank < cnt)
				break;
			rank -= cnt;
		}
		if (bucket == AP_RADIX_SIZE)
			return gc_fail(st, GC_EINTERNAL, "GPU affinity propagation: median selection lost its rank");
		prefix |= (uint64_t) bucket << shift;
		mask |= (uint64_t) (AP_RADIX_SIZE - 1) << shift;
	}
	memcpy(out, &prefix, sizeof(*out));
	ap_phases.ms_median += gc_now_ms() - t0;
	return GC_OK;
}

template <typename T>
static gc_code
g_all_equal(void *v, bool *equal, double *s_last, gc_status *st)
{
	ap_gpu_ws<T> *w = (ap_gpu_ws<T> *) v;
	ap_part<T> &q0 = w->part[0];	/* row 0 */
	T			s01,
				last;
	gc_code		rc;

	AP_CK(cudaSetDevice(q0.dev));
	AP_CK(cudaMemcpyAsync(&s01, q0.S + 1, sizeof(T), cudaMemcpyDeviceToHost, q0.D.s));
	AP_CK(cudaMemcpyAsync(&last, q0.S + (w->n - 1), sizeof(T), cudaMemcpyDeviceToHost, q0.D.s));
	AP_CK(cudaStreamSynchronize(q0.D.s));
	for (int p = 0; p < w->P; p++)
	{
		ap_part<T> &q = w->part[p];
		unsigned long long *differ = q.counts + 2;

		AP_CK(cudaSetDevice(q.dev));
		AP_CK(cudaMemsetAsync(differ, 0, sizeof(*differ), q.D.s));
		ap_all_equal<T><<<ap_grid(q.sms, 8), 256, 0, q.D.s>>>(q.S, w->n, q.r0, q.m, s01, (int *) differ);
		AP_CK(cudaGetLastError());
	}
	if ((rc = ap_read_back(w, 2, 1, st)) != GC_OK ||
		(rc = ap_sync_poll(w, st)) != GC_OK)
		return rc;
	*equal = true;
	for (int p = 0; p < w->P; p++)
		*equal = *equal && (int) w->part[p].h_counts[0] == 0;
	*s_last = (double) last;
	return GC_OK;
}

template <typename T>
static gc_code
g_prepare(void *v, double pref, gc_status *st)
{
	ap_gpu_ws<T> *w = (ap_gpu_ws<T> *) v;

	for (int p = 0; p < w->P; p++)
	{
		ap_part<T> &q = w->part[p];

		AP_CK(cudaSetDevice(q.dev));
		ap_prepare<T><<<ap_grid(q.sms, 8), 256, 0, q.D.s>>>(q.S, w->n, q.r0, q.m, pref);
		AP_CK(cudaGetLastError());
	}
	return ap_sync_poll(w, st);
}

template <typename T>
static gc_code
g_first(void *v, double damping, gc_status *st)
{
	ap_gpu_ws<T> *w = (ap_gpu_ws<T> *) v;
	double		t0 = gc_now_ms();
	gc_code		rc;

	for (int p = 0; p < w->P; p++)
	{
		ap_part<T> &q = w->part[p];

		AP_CK(cudaSetDevice(q.dev));
		ap_rows<T, false><<<q.sms, AP_ROW_THREADS, 0, q.D.s>>>(
			q.S, q.R, q.A, q.cs, w->n, q.r0, q.m, 0, 0, damping, 1.0 - damping, true,
			q.E, q.Eprev, q.counts);
		AP_CK(cudaGetLastError());
	}
	rc = ap_sync_poll(w, st);
	ap_phases.ms_first = gc_now_ms() - t0;
	return rc;
}

/*
 * The column sums over every row into each part's cs: one part's kernel;
 * else the chain down the parts by chunks of columns, then the last
 * part's sums copied to the others.  Each copy is queued on the receiving
 * part's stream after the event of the part it reads.
 */
template <typename T>
static gc_code
ap_colsums(ap_gpu_ws<T> *w, gc_status *st)
{
	const int	n = w->n,
				P = w->P;
	/* chunks of whole blocks of columns */
	const int	cw = P < 2 ? n :
		((n + AP_COL_CHUNKS - 1) / AP_COL_CHUNKS + AP_COL_THREADS - 1) / AP_COL_THREADS * AP_COL_THREADS;
	gc_code		rc;

	for (int c = 0, j0 = 0; j0 < n; c++, j0 += cw)
	{
		const int	j1 = std::min(n, j0 + cw);

		for (int p = 0; p < P; p++)
		{
			ap_part<T> &q = w->part[p];

			AP_CK(cudaSetDevice(q.dev));
			if (p > 0 &&
				(rc = ap_chain_in(w, p, c, q.cs + j0, (const double *) w->part[p - 1].cs + j0,
								  (size_t) (j1 - j0), st)) != GC_OK)
				return rc;
			ap_colsum<T><<<(j1 - j0 + AP_COL_THREADS - 1) / AP_COL_THREADS, AP_COL_THREADS, 0, q.D.s>>>(
				q.R, n, q.r0, q.m, j0, j1, p > 0, q.cs);
			AP_CK(cudaGetLastError());
			if (P > 1)
				AP_CK(cudaEventRecord(q.D.chain[c], q.D.s));
		}
	}
	for (int c = 0, j0 = 0; P > 1 && j0 < n; c++, j0 += cw)
	{
		const int	j1 = std::min(n, j0 + cw);
		ap_part<T> &z = w->part[P - 1];

		for (int p = 0; p < P - 1; p++)
		{
			ap_part<T> &q = w->part[p];

			AP_CK(cudaSetDevice(q.dev));
			AP_CK(cudaStreamWaitEvent(q.D.s, z.D.chain[c], 0));
			AP_CK(cudaMemcpyPeerAsync(q.cs + j0, q.dev, z.cs + j0, z.dev,
									  sizeof(double) * (size_t) (j1 - j0), q.D.s));
		}
	}
	return GC_OK;
}

template <typename T>
static gc_code
g_iterate(void *v, double damping, bool update_r, int64_t *K,
		  int64_t *changed, gc_status *st)
{
	ap_gpu_ws<T> *w = (ap_gpu_ws<T> *) v;
	ap_part<T> &q0 = w->part[0];
	float		ms_col = 0,
				ms_rows = 0;
	gc_code		rc;

	for (int p = 0; p < w->P; p++)
	{
		AP_CK(cudaSetDevice(w->part[p].dev));
		AP_CK(cudaMemsetAsync(w->part[p].counts, 0, 2 * sizeof(unsigned long long), w->part[p].D.s));
	}
	AP_CK(cudaSetDevice(q0.dev));
	AP_CK(cudaEventRecord(q0.D.ev[0], q0.D.s));
	if ((rc = ap_colsums(w, st)) != GC_OK)
		return rc;
	for (int p = 0; p < w->P; p++)
	{
		ap_part<T> &q = w->part[p];

		AP_CK(cudaSetDevice(q.dev));
		if (p == 0)
			AP_CK(cudaEventRecord(q.D.ev[1], q.D.s));
		ap_rows<T, true><<<q.sms, AP_ROW_THREADS,
			2 * sizeof(T) * (size_t) q.nk, q.D.s>>>(
			q.S, q.R, q.A, q.cs, w->n, q.r0, q.m, q.nk, q.pf, damping, 1.0 - damping,
			update_r, q.E, q.Eprev, q.counts);
		AP_CK(cudaGetLastError());
		if (p == 0)
			AP_CK(cudaEventRecord(q.D.ev[2], q.D.s));
	}
	if ((rc = ap_read_back(w, 0, 2, st)) != GC_OK ||
		(rc = ap_sync_poll(w, st)) != GC_OK)
		return rc;
	AP_CK(cudaSetDevice(q0.dev));
	AP_CK(cudaEventElapsedTime(&ms_col, q0.D.ev[0], q0.D.ev[1]));
	AP_CK(cudaEventElapsedTime(&ms_rows, q0.D.ev[1], q0.D.ev[2]));
	ap_phases.ms_colsum += ms_col;
	ap_phases.ms_rows += ms_rows;
	ap_phases.iterations++;
	*K = *changed = 0;
	for (int p = 0; p < w->P; p++)
	{
		ap_part<T> &q = w->part[p];
		uint8_t    *e = q.E;

		*K += (int64_t) q.h_counts[0];
		*changed += (int64_t) q.h_counts[1];
		/* this iteration's flags are the next one's previous */
		q.E = q.Eprev;
		q.Eprev = e;
	}
	return GC_OK;
}

template <typename T>
static gc_code
g_exemplars(void *v, uint8_t *E, gc_status *st)
{
	ap_gpu_ws<T> *w = (ap_gpu_ws<T> *) v;

	/* after the swap, the last iteration's flags are Eprev */
	for (int p = 0; p < w->P; p++)
	{
		ap_part<T> &q = w->part[p];

		AP_CK(cudaSetDevice(q.dev));
		AP_CK(cudaMemcpyAsync(E + q.r0, q.Eprev, (size_t) q.m, cudaMemcpyDeviceToHost, q.D.s));
	}
	return ap_sync_poll(w, st);
}

template <typename T>
static void
g_drop_messages(void *v)
{
	ap_gpu_ws<T> *w = (ap_gpu_ws<T> *) v;

	for (int p = 0; p < w->P; p++)
	{
		ap_part<T> &q = w->part[p];

		if (cudaSetDevice(q.dev) != cudaSuccess)
			cudaGetLastError();
		q.D.drop(q.R);
		q.R = nullptr;
		q.D.drop(q.A);
		q.A = nullptr;
	}
}

template <typename T>
static gc_code
g_assign(void *v, const int32_t *ex, int64_t K, int32_t *c, gc_status *st)
{
	ap_gpu_ws<T> *w = (ap_gpu_ws<T> *) v;
	int32_t    *exd[GC_GPUS_MAX] = {},
			   *cd[GC_GPUS_MAX] = {};
	gc_code		rc;

	for (int p = 0; p < w->P; p++)
	{
		ap_part<T> &q = w->part[p];

		AP_CK(cudaSetDevice(q.dev));
		AP_ALLOC(q, exd[p], (size_t) K);
		AP_ALLOC(q, cd[p], (size_t) q.m);
		AP_CK(cudaMemcpyAsync(exd[p], ex, sizeof(int32_t) * (size_t) K, cudaMemcpyHostToDevice, q.D.s));
		AP_CK(gc_launch(ap_assign<T>, (int64_t) q.m * 32, 256, 256, q.D.s,
						(const T *) q.S, w->n, q.m, (const int32_t *) exd[p], (int) K, cd[p]));
	}
	/* copies into pageable memory wait for their stream: after every launch */
	for (int p = 0; p < w->P; p++)
	{
		ap_part<T> &q = w->part[p];

		AP_CK(cudaSetDevice(q.dev));
		AP_CK(cudaMemcpyAsync(c + q.r0, cd[p], sizeof(int32_t) * (size_t) q.m,
							  cudaMemcpyDeviceToHost, q.D.s));
	}
	rc = ap_sync_poll(w, st);
	for (int p = 0; p < w->P; p++)
	{
		AP_CK(cudaSetDevice(w->part[p].dev));
		w->part[p].D.drop(exd[p]);
		w->part[p].D.drop(cd[p]);
	}
	return rc;
}

template <typename T>
static gc_code
g_scores(void *v, const int32_t *c, const int32_t *off, const int32_t *mem,
		 int64_t K, double *score, gc_status *st)
{
	ap_gpu_ws<T> *w = (ap_gpu_ws<T> *) v;
	const size_t n = (size_t) w->n;
	int32_t    *cd[GC_GPUS_MAX] = {},
			   *offd[GC_GPUS_MAX] = {},
			   *memd[GC_GPUS_MAX] = {};
	double	   *scd[GC_GPUS_MAX] = {};
	gc_code		rc;

	/* the chain down the parts: each adds its members' terms */
	for (int p = 0; p < w->P; p++)
	{
		ap_part<T> &q = w->part[p];

		AP_CK(cudaSetDevice(q.dev));
		AP_ALLOC(q, cd[p], n);
		AP_ALLOC(q, offd[p], (size_t) K + 1);
		AP_ALLOC(q, memd[p], n);
		AP_ALLOC(q, scd[p], n);
		AP_CK(cudaMemcpyAsync(cd[p], c, sizeof(int32_t) * n, cudaMemcpyHostToDevice, q.D.s));
		AP_CK(cudaMemcpyAsync(offd[p], off, sizeof(int32_t) * ((size_t) K + 1), cudaMemcpyHostToDevice, q.D.s));
		AP_CK(cudaMemcpyAsync(memd[p], mem, sizeof(int32_t) * n, cudaMemcpyHostToDevice, q.D.s));
		if (p > 0 && (rc = ap_chain_in(w, p, 0, scd[p], (const double *) scd[p - 1], n, st)) != GC_OK)
			return rc;
		AP_CK(gc_launch(ap_scores<T>, (int64_t) n, 128, 128, q.D.s,
						(const T *) q.S, w->n, q.r0, q.m, (const int32_t *) cd[p],
						(const int32_t *) offd[p], (const int32_t *) memd[p], scd[p]));
		AP_CK(cudaEventRecord(q.D.chain[0], q.D.s));
		if (p == w->P - 1)
			AP_CK(cudaMemcpyAsync(score, scd[p], sizeof(double) * n, cudaMemcpyDeviceToHost, q.D.s));
	}
	rc = ap_sync_poll(w, st);
	for (int p = 0; p < w->P; p++)
	{
		ap_part<T> &q = w->part[p];

		AP_CK(cudaSetDevice(q.dev));
		q.D.drop(cd[p]);
		q.D.drop(offd[p]);
		q.D.drop(memd[p]);
		q.D.drop(scd[p]);
	}
	return rc;
}

template <typename T>
static const gc_ap_ops ap_gpu_ops = {
	g_similarities<T>, g_select_upper<T>, g_all_equal<T>, g_prepare<T>,
	g_first<T>, g_iterate<T>, g_exemplars<T>, g_drop_messages<T>,
	g_assign<T>, g_scores<T>,
};

/* part p's GPU, rows and matrices (its GPU current) */
template <typename T>
static gc_code
ap_part_setup(ap_gpu_ws<T> *w, int p, int dev, gc_status *st)
{
	ap_part<T> &q = w->part[p];
	const int64_t n = w->n;

	q.dev = dev;
	q.r0 = (int) (n * p / w->P);
	q.m = (int) (n * (p + 1) / w->P) - q.r0;
	q.D.ms_alloc = &ap_phases.ms_alloc;
	AP_CK(cudaSetDevice(dev));
	AP_CK(cudaDeviceGetAttribute(&q.sms, cudaDevAttrMultiProcessorCount, dev));
	AP_CK(cudaStreamCreateWithFlags(&q.D.s, cudaStreamNonBlocking));
	for (cudaEvent_t &e : q.D.ev)
		AP_CK(cudaEventCreate(&e));
	for (cudaEvent_t &e : q.D.chain)
		AP_CK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
	AP_ALLOC(q, q.S, (size_t) q.m * n);
	AP_ALLOC(q, q.R, (size_t) q.m * n);
	AP_ALLOC(q, q.A, (size_t) q.m * n);
	AP_ALLOC(q, q.cs, (size_t) n);
	AP_ALLOC(q, q.E, (size_t) q.m);
	AP_ALLOC(q, q.Eprev, (size_t) q.m);
	AP_ALLOC(q, q.counts, 2 + AP_RADIX_SIZE);
	AP_CK(cudaMemsetAsync(q.E, 0, (size_t) q.m, q.D.s));
	AP_CK(cudaMemsetAsync(q.Eprev, 0, (size_t) q.m, q.D.s));
	return ap_row_setup(q, w->n, st);
}

/*
 * On the calling thread's GPU, or split by rows over the GPUs of
 * ctx->gpus (ctx->n_gpus >= 2; at most one part a row), the caller's GPU
 * current again on the way out.
 */
template <typename T>
static gc_code
ap_gpu_run(const gc_ctx *ctx, const float *X, int64_t n, int d,
		   const gc_ap_params *p, gc_ap_result *res, gc_status *st)
{
	gc_device_kept caller;
	ap_gpu_ws<T> ws;
	ap_gpu_ws<T> *w = &ws;
	const bool	split = ctx != NULL && ctx->n_gpus >= 2 && ctx->gpus != NULL;
	gc_code		rc;

	AP_CK(cudaGetDevice(&caller.dev));
	w->ctx = ctx;
	w->X = X;
	w->n = (int) n;
	w->d = d;
	w->P = split ? (int) std::min<int64_t>(std::min(ctx->n_gpus, GC_GPUS_MAX), n) : 1;
	ap_phases.gpus = w->P;
	if (split)
		gc_gpus_connect(w->P, ctx->gpus);
	for (int q = 0; q < w->P; q++)
		if ((rc = ap_part_setup(w, q, split ? ctx->gpus[q] : caller.dev, st)) != GC_OK)
			return rc;
	return gc_ap_run(&ap_gpu_ops<T>, w, ctx, n, p, res, st);
}

extern "C" gc_code
gc_ap_gpu(const gc_ctx *ctx, const float *X, int64_t n, int d,
		  const gc_ap_params *p, gc_ap_result *res, gc_status *st)
{
	gc_code		rc;
	double		t0 = gc_now_ms();

	/* gc_ap_on_gpu has checked the arguments: n >= 1 */
	memset(&ap_phases, 0, sizeof(ap_phases));
	if (n > INT32_MAX)
		return gc_fail(st, GC_EDEVICE, "GPU affinity propagation handles at most %d rows, got %lld",
					   INT32_MAX, (long long) n);
	if (gc_ap_gpu_mem_bytes(n, d, p->precision) == SIZE_MAX)
		return gc_fail(st, GC_ENOMEM, "GPU affinity propagation: %lld rows need more memory than can be addressed",
					   (long long) n);
	ap_phases.precision = p->precision;
	rc = p->precision == GC_AP_FLOAT4 ?
		ap_gpu_run<float>(ctx, X, n, d, p, res, st) :
		ap_gpu_run<double>(ctx, X, n, d, p, res, st);
	ap_phases.ms_total = gc_now_ms() - t0;
	return rc;
}

/* O(n) bytes a row beyond the matrices: X, cs, the flags, the labelling */
#define AP_GPU_BYTES_PER_ROW(d) (4 * (size_t) (d) + 64)
#define AP_GPU_FIXED ((size_t) 1 << 20)

/* the rows of the largest part when n rows split over gpus GPUs */
static int64_t
ap_part_rows(int64_t n, int gpus)
{
	return gpus > 1 ? (n + gpus - 1) / gpus : n;
}

extern "C" size_t
gc_ap_gpu_split_mem_bytes(int64_t n, int d, gc_ap_precision precision, int gpus)
{
	const size_t sz = precision == GC_AP_FLOAT4 ? sizeof(float) : sizeof(double);
	uint64_t	mn;

	if (n <= 0)
		return 0;
	if (n > INT32_MAX || d < 1 || gpus < 1)
		return SIZE_MAX;
	mn = (uint64_t) ap_part_rows(n, gpus) * (uint64_t) n;
	if (mn > (SIZE_MAX - AP_GPU_FIXED - (uint64_t) n * AP_GPU_BYTES_PER_ROW(d)) / (3 * sz))
		return SIZE_MAX;
	return (size_t) (mn * 3 * sz + (uint64_t) n * AP_GPU_BYTES_PER_ROW(d) + AP_GPU_FIXED);
}

extern "C" size_t
gc_ap_gpu_mem_bytes(int64_t n, int d, gc_ap_precision precision)
{
	return gc_ap_gpu_split_mem_bytes(n, d, precision, 1);
}

extern "C" int64_t
gc_ap_gpu_split_max_rows(size_t bytes, int d, gc_ap_precision precision, int gpus)
{
	const double sz = precision == GC_AP_FLOAT4 ? sizeof(float) : sizeof(double);
	int64_t		n = (int64_t) sqrt((double) bytes * (gpus > 1 ? gpus : 1) / (3.0 * sz)) + gpus + 2;

	if (n > INT32_MAX)
		n = INT32_MAX;
	while (n > 0 && gc_ap_gpu_split_mem_bytes(n, d, precision, gpus) > bytes)
		n--;
	return n;
}

extern "C" int64_t
gc_ap_gpu_max_rows(size_t bytes, int d, gc_ap_precision precision)
{
	return gc_ap_gpu_split_max_rows(bytes, d, precision, 1);
}
