/*
 * kmeans_par.cu — k-means|| seeding on the GPU (Bahmani et al. 2012).
 *
 * It reproduces the CPU's gc_km_init_kmeans_par (kmeans_init.c, defined
 * in kmeans/kmeans.h) bit for bit, unweighted:
 *
 *   par_merge   the first candidate: D² of every row, the exact float32
 *               gc_dist2 (dimension order, separate multiply and add).
 *   par_max,    phi: the round's largest D² gives its grid, par_qsum the
 *   par_qsum    exact integer sum of the D² on it (kmeans/kmeans.h).
 *   par_flags   round r's draws, one thread per row (gc_km_par_keep, the
 *               counter 1 + (r-1) n + i).
 *   the kept rows in row order: cub::DeviceSelect::Flagged.
 *   a round's new candidates, in sub-batches of at most k: the fit's own
 *               assignment step (km_prep + km_assign: the tensor-core
 *               screen, its bound and the exact re-rank, or the exact
 *               small-d kernel) gives every row its nearest candidate of
 *               the sub-batch, the lowest on ties; par_merge takes its
 *               exact gc_dist2 and keeps it where it is strictly smaller
 *               than the row's D² so far, so that the lowest nearest
 *               candidate over all of them wins ties, as the CPU's argmin
 *               in index order.
 *   par_count   the rows nearest each candidate (integer atomics: exact).
 *
 * Then weighted k-means++ over the candidates, on the device too
 * (km_pp_device_w, bit for bit gc_km_init_kmeanspp_w), from the
 * candidates' rows gathered into their own d x m transposed matrix.
 * With fewer than k candidates: k-means++ over all the rows (with the
 * fit's row-major copy, where it screens), as the CPU falls back.
 *
 * About 10k candidates (5 rounds of 2k) against every row: 1M x 128,
 * k = 1000 is 2.6 TFLOP, which the screen does at tensor-core rates where
 * exact FP32 on the CUDA cores (three operations per term) is bounded at
 * 115 ms.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <new>
#include <vector>

#include <cub/block/block_reduce.cuh>
#include <cub/device/device_select.cuh>
#include <cuda/functional>
#include <thrust/iterator/counting_iterator.h>

#include "kmeans_dev.cuh"
#include "common/multi.cuh"
#include "common/rng.h"

#define PAR_THREADS 256

/*
 * After km_assign over candidates m0 .. m0+mc-1 (their coordinates Cc,
 * mc x d, row-major; sub: each row's nearest of them, -1 where the
 * screen's cut showed none is nearer than its D² so far; NULL: candidate
 * m0 alone): the row takes it where its exact distance is strictly below
 * its D² so far (init: always).
 */
__global__ void
par_merge(const float *__restrict__ XT, int64_t n, int d,
		  const float *__restrict__ Cc, const int32_t *__restrict__ sub,
		  int m0, bool init, float *__restrict__ D2, int32_t *__restrict__ lab)
{
	const int64_t i = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;
	const int	c = i < n && sub != nullptr ? sub[i] : 0;

	if (i < n && c >= 0)
	{
		const float *cc = Cc + (int64_t) c * d;
		float		q = 0.0f;

		for (int j = 0; j < d; j++)
			q = gc_l2_step(q, XT[(int64_t) j * n + i], cc[j]);
		if (init || q < D2[i])
		{
			D2[i] = q;
			lab[i] = m0 + c;
		}
	}
}

/* *mx = the largest D² (its bits: non-negative floats order as integers). */
__global__ void __launch_bounds__(PAR_THREADS)
par_max(const float *__restrict__ D2, int64_t n, unsigned long long *mx)
{
	typedef cub::BlockReduce<unsigned, PAR_THREADS> reduce_t;
	__shared__ reduce_t::TempStorage ts;
	unsigned	m = 0;

	for (int64_t i = (int64_t) blockIdx.x * blockDim.x + threadIdx.x; i < n;
		 i += (int64_t) gridDim.x * blockDim.x)
		m = max(m, __float_as_uint(D2[i]));
	m = reduce_t(ts).Reduce(m, ::cuda::maximum<unsigned>());
	if (threadIdx.x == 0)
		atomicMax(mx, (unsigned long long) m);
}

/* *sum += the q of every D² on the grid S. */
__global__ void __launch_bounds__(PAR_THREADS)
par_qsum(const float *__restrict__ D2, int64_t n, double S, unsigned long long *sum)
{
	typedef cub::BlockReduce<unsigned long long, PAR_THREADS> reduce_t;
	__shared__ reduce_t::TempStorage ts;
	unsigned long long s = 0;

	for (int64_t i = (int64_t) blockIdx.x * blockDim.x + threadIdx.x; i < n;
		 i += (int64_t) gridDim.x * blockDim.x)
		s += gc_km_pot_q(gc_km_pot_term(nullptr, i, D2[i]), S);
	s = reduce_t(ts).Sum(s);
	if (threadIdx.x == 0)
		atomicAdd(sum, s);
}

/* Round r's draws of rows i0 .. i0+n-1 of the problem's nall. */
__global__ void
par_flags(const float *__restrict__ D2, int64_t n, int64_t i0, int64_t nall,
		  uint64_t seed, uint64_t stream, int r, double ell, double phi,
		  uint8_t *flags)
{
	const int64_t i = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;

	if (i < n)
		flags[i] = (uint8_t) gc_km_par_keep(seed, stream, r, nall, i0 + i, ell,
											gc_km_pot_term(nullptr, i0 + i, D2[i]), phi);
}

/*
 * The coordinates of rows[0 .. m-1]: out[c * cs + j * js] = XT[j][rows[c]]
 * (cs = d, js = 1: m x d row-major, as km_prep reads centres; cs = 1,
 * js = m: d x m transposed, as k-means++ reads rows).
 */
__global__ void
par_gather(const float *__restrict__ XT, int64_t n, int d,
		   const int32_t *__restrict__ rows, int m, float *out, int cs, int64_t js)
{
	const int64_t e = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;

	if (e < (int64_t) m * d)
	{
		const int	j = (int) (e / m),
					c = (int) (e % m);

		out[(int64_t) c * cs + j * js] = XT[(int64_t) j * n + rows[c]];
	}
}

__global__ void
par_count(const int32_t *__restrict__ lab, int64_t n, unsigned *cnt)
{
	const int64_t i = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;

	if (i < n)
		atomicAdd(cnt + lab[i], 1u);
}

/* chosen[c] = rows[local[c]]. */
__global__ void
par_rows(const int64_t *__restrict__ local, const int32_t *__restrict__ rows,
		 int k, int64_t *chosen)
{
	const int	c = blockIdx.x * blockDim.x + threadIdx.x;

	if (c < k)
		chosen[c] = rows[local[c]];
}

namespace
{
struct par_buffers
{
	cudaStream_t s = nullptr;
	float	   *D2 = nullptr;
	int32_t    *lab = nullptr;
	uint8_t    *flags = nullptr;
	int32_t    *sel = nullptr;	/* the kept rows of a round */
	int32_t    *nsel = nullptr;
	int32_t    *rows = nullptr;	/* every candidate's row */
	unsigned long long *red = nullptr;	/* phi: the largest D², the sum */
	void	   *tmp = nullptr;
	float	   *CT = nullptr;	/* all candidates' coordinates, d x m */
	unsigned   *cnt = nullptr;
	double	   *w = nullptr;
	int64_t    *local = nullptr;

	~par_buffers()
	{
		gc_dfree(D2, s);
		gc_dfree(lab, s);
		gc_dfree(flags, s);
		gc_dfree(sel, s);
		gc_dfree(nsel, s);
		gc_dfree(rows, s);
		gc_dfree(red, s);
		gc_dfree(tmp, s);
		gc_dfree(CT, s);
		gc_dfree(cnt, s);
		gc_dfree(w, s);
		gc_dfree(local, s);
	}
};
}

/*
 * Candidates m0 .. m0+sc-1 (sc at most D.k; their coordinates Cc, sc x d,
 * row-major) against every row of D: D's assignment (the fit's buffers)
 * with D.k and D.kp set to theirs, then par_merge.  The screens leave out
 * the rows none of them can bring below their D² (km_cut): in the later
 * rounds most rows already have a candidate of their own cluster, and
 * those rows then need neither the re-rank of their near ties (the
 * batch's candidates far from them, at about equal distances) nor the
 * merge.  GPUCLUST_KM_PAR_CUT=0 screens every row (tests, benchmarks).
 */
static gc_code
par_take_batch(km_dev &D, par_buffers &B, const float *Cc, int m0, int sc,
			   gc_status *st)
{
	const char *env = getenv("GPUCLUST_KM_PAR_CUT");
	const int	k = D.k,
				kp = D.kp;
	gc_code		rc;

	D.k = sc;
	D.kp = (sc + TILE - 1) / TILE * TILE;
	if (!(env && strcmp(env, "0") == 0))
	{
		D.cut.d2 = B.D2;
		D.cut.keep = (float) (1.0 - (D.d + 2) * 0x1.0p-24);	/* exact */
	}
	rc = km_prep(D, Cc, st);
	if (rc == GC_OK)
		rc = km_assign(D, st);
	D.cut = km_cut();
	D.k = k;
	D.kp = kp;
	if (rc == GC_OK)
	{
		par_merge<<<blocks_for(D.n, PAR_THREADS), PAR_THREADS, 0, D.s>>>(
			D.XT, D.n, D.d, Cc, D.labels, m0, false, B.D2, B.lab);
		KM_LAUNCHED();
	}
	return rc;
}

/*
 * Candidates rows[m0 .. m0+mc-1] against every row, in sub-batches of at
 * most D.k: each sub-batch's coordinates into D.C[1] (free until the fit
 * starts), then par_take_batch.
 */
static gc_code
par_take(km_dev &D, par_buffers &B, int m0, int mc, gc_status *st)
{
	gc_code		rc = GC_OK;

	for (int s0 = 0; s0 < mc && rc == GC_OK; s0 += D.k)
	{
		const int	sc = mc - s0 < D.k ? mc - s0 : D.k;

		par_gather<<<blocks_for((int64_t) sc * D.d, 256), 256, 0, D.s>>>(
			D.XT, D.n, D.d, B.rows + m0 + s0, sc, D.C[1], D.d, 1);
		KM_LAUNCHED();
		rc = par_take_batch(D, B, D.C[1], m0 + s0, sc, st);
	}
	return rc;
}

gc_code
km_par_device(km_dev &D, const gc_ctx *ctx, uint64_t seed, uint64_t stream,
			  float *C, int64_t *chosen, gc_status *st)
{
	const float *XT = D.XT;
	const int64_t n = D.n;
	const int	d = D.d,
				k = D.k;
	cudaStream_t s = D.s;
	const double ell = GC_KM_PAR_OVERSAMPLE * (double) k;
	const unsigned nblk = blocks_for(n, PAR_THREADS);
	const unsigned rgrid = nblk < 1024 ? nblk : 1024;	/* par_max, par_qsum */
	par_buffers B;
	int32_t		first;
	int			m = 1;
	size_t		tmp_bytes = 0;
	gc_code		rc;

	B.s = s;
	KM_CK(gc_dalloc((void **) &B.D2, sizeof(float) * (size_t) n, s));
	KM_CK(gc_dalloc((void **) &B.lab, sizeof(int32_t) * (size_t) n, s));
	KM_CK(gc_dalloc((void **) &B.flags, (size_t) n, s));
	KM_CK(gc_dalloc((void **) &B.sel, sizeof(int32_t) * (size_t) n, s));
	KM_CK(gc_dalloc((void **) &B.nsel, sizeof(int32_t), s));
	KM_CK(gc_dalloc((void **) &B.rows, sizeof(int32_t) * (size_t) n, s));
	KM_CK(gc_dalloc((void **) &B.red, sizeof(unsigned long long) * 2, s));
	KM_CK(cub::DeviceSelect::Flagged(nullptr, tmp_bytes, thrust::counting_iterator<int32_t>(0),
									 B.flags, B.sel, B.nsel, (int64_t) n, s));
	KM_CK(gc_dalloc(&B.tmp, tmp_bytes, s));

	/* the assignment compares with the labels and counts into the info
	 * record: both set (the fit resets them after seeding) */
	KM_CK(cudaMemsetAsync(D.labels, 0xff, sizeof(int32_t) * (size_t) n, s));
	KM_CK(cudaMemsetAsync(D.info, 0, sizeof(km_info), s));

	/* Candidate 0: k-means++'s first centre; D² = its distance. */
	first = (int32_t) (gc_rng_uniform(seed, stream, 0) * (double) n);
	if (first >= n)
		first = (int32_t) (n - 1);
	KM_CK(cudaMemcpyAsync(B.rows, &first, sizeof(int32_t), cudaMemcpyHostToDevice, s));
	par_gather<<<blocks_for(d, 256), 256, 0, s>>>(XT, n, d, B.rows, 1, D.C[1], d, 1);
	KM_LAUNCHED();
	par_merge<<<nblk, PAR_THREADS, 0, s>>>(XT, n, d, D.C[1], nullptr, 0, true, B.D2, B.lab);
	KM_LAUNCHED();

	for (int r = 1; r <= GC_KM_PAR_MAX_ROUNDS; r++)
	{
		double		phi = 0.0,
					S;
		unsigned long long hred[2] = {0, 0};
		float		mx;
		int32_t		ns = 0;

		if (r > GC_KM_PAR_ROUNDS && m >= k)
			break;
		/* phi on the round's grid: its largest D², then the sum */
		KM_CK(cudaMemsetAsync(B.red, 0, sizeof(unsigned long long) * 2, s));
		par_max<<<rgrid, PAR_THREADS, 0, s>>>(B.D2, n, B.red);
		KM_LAUNCHED();
		KM_CK(cudaMemcpyAsync(hred, B.red, sizeof(unsigned long long), cudaMemcpyDeviceToHost, s));
		KM_CK(cudaStreamSynchronize(s));
		if (gc_cancelled(ctx))
			return gc_fail(st, GC_ECANCEL, "canceled");
		{
			const uint32_t bits = (uint32_t) hred[0];

			memcpy(&mx, &bits, sizeof(float));
		}
		S = gc_km_pot_scale((double) mx, n);
		if (S > 0.0)
		{
			par_qsum<<<rgrid, PAR_THREADS, 0, s>>>(B.D2, n, S, B.red + 1);
			KM_LAUNCHED();
			KM_CK(cudaMemcpyAsync(hred + 1, B.red + 1, sizeof(unsigned long long),
								  cudaMemcpyDeviceToHost, s));
			KM_CK(cudaStreamSynchronize(s));
			phi = (double) hred[1] / S;
		}
		if (!(phi > 0.0))
			break;
		par_flags<<<nblk, PAR_THREADS, 0, s>>>(B.D2, n, 0, n, seed, stream, r, ell, phi, B.flags);
		KM_LAUNCHED();
		KM_CK(cub::DeviceSelect::Flagged(B.tmp, tmp_bytes, thrust::counting_iterator<int32_t>(0),
										 B.flags, B.sel, B.nsel, (int64_t) n, s));
		KM_CK(cudaMemcpyAsync(&ns, B.nsel, sizeof(int32_t), cudaMemcpyDeviceToHost, s));
		KM_CK(cudaStreamSynchronize(s));
		if (ns == 0)
			continue;
		if ((int64_t) m + ns > n)
			return gc_fail(st, GC_EINTERNAL, "k-means||: more candidates than rows");
		KM_CK(cudaMemcpyAsync(B.rows + m, B.sel, sizeof(int32_t) * (size_t) ns,
							  cudaMemcpyDeviceToDevice, s));
		if ((rc = par_take(D, B, m, ns, st)) != GC_OK)
			return rc;
		m += ns;
	}

	if (m < k)
		return km_pp_device_w(ctx, s, XT, D.XR, n, d, k, nullptr, nullptr, seed, stream, C,
							  chosen, st);

	/* The candidates' weights, and weighted k-means++ over them. */
	{
		unsigned   *hcnt = (unsigned *) malloc(sizeof(unsigned) * (size_t) m);
		double	   *hw = (double *) malloc(sizeof(double) * (size_t) m);
		cudaError_t e;

		if (hcnt == NULL || hw == NULL)
		{
			free(hcnt);
			free(hw);
			return gc_fail(st, GC_ENOMEM, "GPU k-means: out of memory");
		}
		e = gc_dalloc((void **) &B.cnt, sizeof(unsigned) * (size_t) m, s);
		if (e == cudaSuccess)
			e = cudaMemsetAsync(B.cnt, 0, sizeof(unsigned) * (size_t) m, s);
		if (e == cudaSuccess)
		{
			par_count<<<nblk, PAR_THREADS, 0, s>>>(B.lab, n, B.cnt);
			e = cudaGetLastError();
		}
		if (e == cudaSuccess)
			e = cudaMemcpyAsync(hcnt, B.cnt, sizeof(unsigned) * (size_t) m,
								cudaMemcpyDeviceToHost, s);
		if (e == cudaSuccess)
			e = cudaStreamSynchronize(s);
		for (int c = 0; e == cudaSuccess && c < m; c++)
			hw[c] = (double) hcnt[c];
		if (e == cudaSuccess)
			e = gc_dalloc((void **) &B.w, sizeof(double) * (size_t) m, s);
		if (e == cudaSuccess)
			e = cudaMemcpyAsync(B.w, hw, sizeof(double) * (size_t) m, cudaMemcpyHostToDevice, s);
		/* the candidates' rows, transposed, for k-means++ */
		if (e == cudaSuccess)
			e = gc_dalloc((void **) &B.CT, sizeof(float) * (size_t) m * d, s);
		if (e == cudaSuccess)
		{
			par_gather<<<blocks_for((int64_t) m * d, 256), 256, 0, s>>>(XT, n, d, B.rows, m,
																		  B.CT, 1, m);
			e = cudaGetLastError();
		}
		free(hcnt);
		if (e != cudaSuccess)
		{
			free(hw);
			return km_cuda_fail(st, e, "k-means|| candidate weights");
		}
		if (chosen != nullptr &&
			(e = gc_dalloc((void **) &B.local, sizeof(int64_t) * (size_t) k, s)) != cudaSuccess)
		{
			free(hw);
			return km_cuda_fail(st, e, "k-means|| chosen rows");
		}
		rc = km_pp_device_w(ctx, s, B.CT, nullptr, m, d, k, B.w, hw, seed,
							stream + GC_KM_PAR_REDUCE_STREAM, C, B.local, st);
		/* km_pp_device_w synchronised: hw is no longer read */
		free(hw);
		if (rc != GC_OK)
			return rc;
		if (chosen != nullptr)
		{
			par_rows<<<blocks_for(k, 256), 256, 0, s>>>(B.local, B.rows, k, chosen);
			KM_LAUNCHED();
			KM_CK(cudaStreamSynchronize(s));
		}
	}
	return GC_OK;
}

/* ---- k-means|| over the shards of a split fit ---- */

namespace
{
/* A shard's part of km_par_shards. */
struct par_shard
{
	par_buffers B;
	size_t		tmp_bytes = 0;
	float	   *cc = nullptr;	/* a round's candidates' coordinates, row-major */
	size_t		cc_cap = 0;		/* floats */
	unsigned long long red[2] = {0, 0};	/* its largest D²'s bits, its sum */
	int32_t		ns = 0;			/* its rows a round keeps */
	std::vector<float> kept;	/* their coordinates, ns x d */
	std::vector<unsigned> cnt;	/* its rows nearest each candidate */

	~par_shard()
	{
		gc_dfree(cc, B.s);
	}
};

}

/* P.cc holds at least floats. */
static gc_code
par_room(par_shard &P, size_t floats, gc_status *st)
{
	if (P.cc_cap >= floats)
		return GC_OK;
	gc_dfree(P.cc, P.B.s);
	P.cc = nullptr;
	P.cc_cap = 0;
	KM_CK(gc_dalloc((void **) &P.cc, sizeof(float) * floats, P.B.s));
	P.cc_cap = floats;
	return GC_OK;
}

/* Shard P over Ds: its buffers, its labels and counters reset. */
static gc_code
par_shard_open(km_dev &Ds, par_shard &P, gc_status *st)
{
	par_buffers &B = P.B;
	const int64_t n = Ds.n;

	B.s = Ds.s;
	KM_CK(gc_dalloc((void **) &B.D2, sizeof(float) * (size_t) n, B.s));
	KM_CK(gc_dalloc((void **) &B.lab, sizeof(int32_t) * (size_t) n, B.s));
	KM_CK(gc_dalloc((void **) &B.flags, (size_t) n, B.s));
	KM_CK(gc_dalloc((void **) &B.sel, sizeof(int32_t) * (size_t) n, B.s));
	KM_CK(gc_dalloc((void **) &B.nsel, sizeof(int32_t), B.s));
	KM_CK(gc_dalloc((void **) &B.rows, sizeof(int32_t), B.s));
	KM_CK(gc_dalloc((void **) &B.red, sizeof(unsigned long long) * 2, B.s));
	KM_CK(cub::DeviceSelect::Flagged(nullptr, P.tmp_bytes, thrust::counting_iterator<int32_t>(0),
									 B.flags, B.sel, B.nsel, (int64_t) n, B.s));
	KM_CK(gc_dalloc(&B.tmp, P.tmp_bytes, B.s));
	/* the assignment runs on the candidates as they are, compares with the
	 * labels and counts into the info record (the fit resets all three) */
	Ds.prune_on = false;
	Ds.unit_centres = false;
	KM_CK(cudaMemsetAsync(Ds.labels, 0xff, sizeof(int32_t) * (size_t) n, B.s));
	KM_CK(cudaMemsetAsync(Ds.info, 0, sizeof(km_info), B.s));
	return GC_OK;
}

/* The shard's largest D² (which, 0) or its sum on the grid S (1) into P.red. */
static gc_code
par_shard_phi(km_dev &Ds, par_shard &P, int which, double S, gc_status *st)
{
	const unsigned nblk = blocks_for(Ds.n, PAR_THREADS);
	const unsigned g = nblk < 1024 ? nblk : 1024;

	KM_CK(cudaMemsetAsync(P.B.red + which, 0, sizeof(unsigned long long), P.B.s));
	if (which == 0)
		par_max<<<g, PAR_THREADS, 0, P.B.s>>>(P.B.D2, Ds.n, P.B.red);
	else
		par_qsum<<<g, PAR_THREADS, 0, P.B.s>>>(P.B.D2, Ds.n, S, P.B.red + 1);
	KM_LAUNCHED();
	KM_CK(cudaMemcpyAsync(P.red + which, P.B.red + which, sizeof(unsigned long long),
						  cudaMemcpyDeviceToHost, P.B.s));
	KM_CK(cudaStreamSynchronize(P.B.s));
	return GC_OK;
}

/* Round r's draws of the shard's rows (i0: its first), its kept rows'
 * coordinates into P.kept. */
static gc_code
par_shard_draw(km_dev &Ds, par_shard &P, int64_t i0, int64_t nall, uint64_t seed,
			   uint64_t stream, int r, double ell, double phi, gc_status *st)
{
	par_buffers &B = P.B;
	gc_code		rc;

	P.ns = 0;
	P.kept.clear();				/* none kept: it adds none */
	par_flags<<<blocks_for(Ds.n, PAR_THREADS), PAR_THREADS, 0, B.s>>>(
		B.D2, Ds.n, i0, nall, seed, stream, r, ell, phi, B.flags);
	KM_LAUNCHED();
	KM_CK(cub::DeviceSelect::Flagged(B.tmp, P.tmp_bytes, thrust::counting_iterator<int32_t>(0),
									 B.flags, B.sel, B.nsel, (int64_t) Ds.n, B.s));
	KM_CK(cudaMemcpyAsync(&P.ns, B.nsel, sizeof(int32_t), cudaMemcpyDeviceToHost, B.s));
	KM_CK(cudaStreamSynchronize(B.s));
	if (P.ns == 0)
		return GC_OK;
	if ((rc = par_room(P, (size_t) P.ns * Ds.d, st)) != GC_OK)
		return rc;
	par_gather<<<blocks_for((int64_t) P.ns * Ds.d, 256), 256, 0, B.s>>>(
		Ds.XT, Ds.n, Ds.d, B.sel, P.ns, P.cc, Ds.d, 1);
	KM_LAUNCHED();
	try
	{
		P.kept.resize((size_t) P.ns * Ds.d);
	}
	catch (const std::bad_alloc &)
	{
		return gc_fail(st, GC_ENOMEM, "GPU k-means: out of memory");
	}
	KM_CK(cudaMemcpyAsync(P.kept.data(), P.cc, sizeof(float) * P.kept.size(),
						  cudaMemcpyDeviceToHost, B.s));
	KM_CK(cudaStreamSynchronize(B.s));
	return GC_OK;
}

/* Candidates m0 .. m0+mc-1 (their coordinates cc, host, mc x d) against
 * the shard's rows, in par_take's sub-batches. */
static gc_code
par_shard_take(km_dev &Ds, par_shard &P, const float *cc, int m0, int mc, gc_status *st)
{
	gc_code		rc;

	if ((rc = par_room(P, (size_t) mc * Ds.d, st)) != GC_OK)
		return rc;
	KM_CK(cudaMemcpyAsync(P.cc, cc, sizeof(float) * (size_t) mc * Ds.d,
						  cudaMemcpyHostToDevice, Ds.s));
	for (int s0 = 0; s0 < mc; s0 += Ds.k)
	{
		const int	sc = mc - s0 < Ds.k ? mc - s0 : Ds.k;

		if ((rc = par_take_batch(Ds, P.B, P.cc + (size_t) s0 * Ds.d, m0 + s0, sc, st)) != GC_OK)
			return rc;
	}
	KM_CK(cudaStreamSynchronize(Ds.s));
	return GC_OK;
}

/* The shard's rows nearest each of the m candidates into P.cnt. */
static gc_code
par_shard_count(km_dev &Ds, par_shard &P, int m, gc_status *st)
{
	try
	{
		P.cnt.resize((size_t) m);
	}
	catch (const std::bad_alloc &)
	{
		return gc_fail(st, GC_ENOMEM, "GPU k-means: out of memory");
	}
	KM_CK(gc_dalloc((void **) &P.B.cnt, sizeof(unsigned) * (size_t) m, Ds.s));
	KM_CK(cudaMemsetAsync(P.B.cnt, 0, sizeof(unsigned) * (size_t) m, Ds.s));
	par_count<<<blocks_for(Ds.n, PAR_THREADS), PAR_THREADS, 0, Ds.s>>>(P.B.lab, Ds.n, P.B.cnt);
	KM_LAUNCHED();
	KM_CK(cudaMemcpyAsync(P.cnt.data(), P.B.cnt, sizeof(unsigned) * (size_t) m,
						  cudaMemcpyDeviceToHost, Ds.s));
	KM_CK(cudaStreamSynchronize(Ds.s));
	return GC_OK;
}

/*
 * Weighted k-means++ over the m candidates (cand, host, m x d; their
 * weights hw) on GPU 0 (current), as km_par_device ends: C (host, k x d).
 */
static gc_code
par_reduce(km_dev &D0, par_buffers &B, const gc_ctx *ctx, const std::vector<float> &cand,
		   const std::vector<double> &hw, int m, uint64_t seed, uint64_t stream, float *C,
		   gc_status *st)
{
	const int	d = D0.d,
				k = D0.k;
	std::vector<float> CT;
	gc_code		rc;

	try
	{
		CT.resize((size_t) m * d);
	}
	catch (const std::bad_alloc &)
	{
		return gc_fail(st, GC_ENOMEM, "GPU k-means: out of memory");
	}
	for (int c = 0; c < m; c++)
		for (int j = 0; j < d; j++)
			CT[(size_t) j * m + c] = cand[(size_t) c * d + j];
	KM_CK(gc_dalloc((void **) &B.w, sizeof(double) * (size_t) m, B.s));
	KM_CK(gc_dalloc((void **) &B.CT, sizeof(float) * CT.size(), B.s));
	KM_CK(cudaMemcpyAsync(B.w, hw.data(), sizeof(double) * (size_t) m, cudaMemcpyHostToDevice, B.s));
	KM_CK(cudaMemcpyAsync(B.CT, CT.data(), sizeof(float) * CT.size(), cudaMemcpyHostToDevice, B.s));
	rc = km_pp_device_w(ctx, B.s, B.CT, nullptr, m, d, k, B.w, hw.data(), seed,
						stream + GC_KM_PAR_REDUCE_STREAM, D0.C[1], nullptr, st);
	if (rc != GC_OK)
		return rc;
	KM_CK(cudaMemcpyAsync(C, D0.C[1], sizeof(float) * (size_t) k * d, cudaMemcpyDeviceToHost, B.s));
	KM_CK(cudaStreamSynchronize(B.s));
	return GC_OK;
}

gc_code
km_par_shards(km_dev *const *D, const int *dev, const int64_t *r0, int S,
			  const gc_ctx *ctx, uint64_t seed, uint64_t stream, float *C,
			  gc_status *st)
{
	const int64_t n = r0[S];
	const int	d = D[0]->d,
				k = D[0]->k;
	const double ell = GC_KM_PAR_OVERSAMPLE * (double) k;
	gc_per_gpu<par_shard> PS;
	std::vector<float> cand;	/* every candidate's coordinates, m x d, in order */
	std::vector<double> hw;
	int64_t		first;
	int			m = 1;
	gc_code		rc;
	auto		each = [&](auto &&f) {
		return gc_each_gpu(S, dev, "GPU k-means", f, st);
	};

	PS.S = S;
	PS.dev = dev;
	for (int s = 0; s < S; s++)
		if ((PS.P[s] = new (std::nothrow) par_shard) == nullptr)
			return gc_fail(st, GC_ENOMEM, "GPU k-means: out of memory");
	first = (int64_t) (gc_rng_uniform(seed, stream, 0) * (double) n);
	if (first >= n)
		first = n - 1;
	try
	{
		cand.resize((size_t) d);
	}
	catch (const std::bad_alloc &)
	{
		return gc_fail(st, GC_ENOMEM, "GPU k-means: out of memory");
	}

	/* candidate 0, k-means++'s first centre, gathered by its shard */
	rc = each([&](int s, gc_status *ss) {
		km_dev	   &Ds = *D[s];
		par_shard  &P = *PS.P[s];
		gc_status  *st = ss;	/* KM_CK's */
		const int32_t row = (int32_t) (first - r0[s]);
		gc_code		r;

		if ((r = par_shard_open(Ds, P, ss)) != GC_OK)
			return r;
		if (first >= r0[s] && first < r0[s + 1])
		{
			KM_CK(cudaMemcpyAsync(P.B.rows, &row, sizeof(int32_t), cudaMemcpyHostToDevice, Ds.s));
			par_gather<<<blocks_for(d, 256), 256, 0, Ds.s>>>(Ds.XT, Ds.n, d, P.B.rows, 1,
															  Ds.C[1], d, 1);
			KM_LAUNCHED();
			KM_CK(cudaMemcpyAsync(cand.data(), Ds.C[1], sizeof(float) * d,
								  cudaMemcpyDeviceToHost, Ds.s));
		}
		KM_CK(cudaStreamSynchronize(Ds.s));
		return GC_OK;
	});
	/* D² = the distance to it */
	if (rc == GC_OK)
		rc = each([&](int s, gc_status *ss) {
			km_dev	   &Ds = *D[s];
			par_shard  &P = *PS.P[s];
			gc_status  *st = ss;	/* KM_CK's */

			KM_CK(cudaMemcpyAsync(Ds.C[1], cand.data(), sizeof(float) * d,
								  cudaMemcpyHostToDevice, Ds.s));
			par_merge<<<blocks_for(Ds.n, PAR_THREADS), PAR_THREADS, 0, Ds.s>>>(
				Ds.XT, Ds.n, d, Ds.C[1], nullptr, 0, true, P.B.D2, P.B.lab);
			KM_LAUNCHED();
			return GC_OK;
		});

	for (int r = 1; rc == GC_OK && r <= GC_KM_PAR_MAX_ROUNDS; r++)
	{
		unsigned	bits = 0;
		unsigned long long q = 0;
		double		phi = 0.0,
					grid;
		float		mx;
		int64_t		ns = 0;
		size_t		off;

		if (r > GC_KM_PAR_ROUNDS && m >= k)
			break;
		/* phi on the round's grid: the shards' largest D², then their sums */
		if ((rc = each([&](int s, gc_status *ss) {
			return par_shard_phi(*D[s], *PS.P[s], 0, 0.0, ss);
		})) != GC_OK)
			break;
		if (gc_cancelled(ctx))
			return gc_fail(st, GC_ECANCEL, "canceled");
		for (int s = 0; s < S; s++)
			bits = std::max(bits, (unsigned) PS.P[s]->red[0]);
		memcpy(&mx, &bits, sizeof(float));
		grid = gc_km_pot_scale((double) mx, n);
		if (grid > 0.0)
		{
			if ((rc = each([&](int s, gc_status *ss) {
				return par_shard_phi(*D[s], *PS.P[s], 1, grid, ss);
			})) != GC_OK)
				break;
			for (int s = 0; s < S; s++)
				q += PS.P[s]->red[1];
			phi = (double) q / grid;
		}
		if (!(phi > 0.0))
			break;
		/* the draws: the kept rows in row order, shard by shard */
		if ((rc = each([&](int s, gc_status *ss) {
			return par_shard_draw(*D[s], *PS.P[s], r0[s], n, seed, stream, r, ell, phi, ss);
		})) != GC_OK)
			break;
		for (int s = 0; s < S; s++)
			ns += PS.P[s]->ns;
		if (ns == 0)
			continue;
		if (m + ns > n)
			return gc_fail(st, GC_EINTERNAL, "k-means||: more candidates than rows");
		off = cand.size();
		try
		{
			for (int s = 0; s < S; s++)
				cand.insert(cand.end(), PS.P[s]->kept.begin(), PS.P[s]->kept.end());
		}
		catch (const std::bad_alloc &)
		{
			return gc_fail(st, GC_ENOMEM, "GPU k-means: out of memory");
		}
		/* every shard's rows against them */
		rc = each([&](int s, gc_status *ss) {
			return par_shard_take(*D[s], *PS.P[s], cand.data() + off, m, (int) ns, ss);
		});
		m += (int) ns;
	}
	if (rc != GC_OK)
		return rc;

	/* fewer than k candidates: k-means++ over every row, as km_par_device */
	if (m < k)
		return km_pp_shards(D, dev, r0, S, ctx, seed, stream, C, st);

	/* the candidates' weights: the rows nearest each, every shard's added */
	if ((rc = each([&](int s, gc_status *ss) {
		return par_shard_count(*D[s], *PS.P[s], m, ss);
	})) != GC_OK)
		return rc;
	try
	{
		hw.assign((size_t) m, 0.0);
	}
	catch (const std::bad_alloc &)
	{
		return gc_fail(st, GC_ENOMEM, "GPU k-means: out of memory");
	}
	for (int c = 0; c < m; c++)
	{
		uint64_t	t = 0;

		for (int s = 0; s < S; s++)
			t += PS.P[s]->cnt[c];
		hw[c] = (double) t;
	}
	return par_reduce(*D[0], PS.P[0]->B, ctx, cand, hw, m, seed, stream, C, st);
}
