/*
 * kmeans_setup.cu — the device state of one GPU k-means problem, from the
 * host matrix to the first iteration: km_setup reads the device's
 * properties, allocates every buffer of km_dev, uploads X in chunks and
 * transposes it to structure-of-arrays (XT, d rows of n floats, so that
 * every kernel reads points coalesced; X stays resident for the whole
 * call), and takes in one pass over XT what the later phases need of the
 * features: the fixed-point scales of the update's sums (a power of two per
 * feature, from its largest |x| and n, so that no sum can overflow), the
 * feature means by which the tiled assignment shifts rows and centres (the
 * double means of the variance behind tol, blocked as the CPU's, rounded
 * to float), and the shifted row norms of its rounding bound.  The pass
 * runs over any range of rows (km_features_rows), so that a streamed
 * problem (kmeans_stream.cu) takes the same statistics chunk by chunk.
 * The update's own choices and buffers are kmeans_update.cu's
 * (km_update_alloc, km_update_plan), with sample weights
 * kmeans_weighted.cu's (km_wupd_alloc).  Under cosine km_setup makes the
 * resident rows unit rows when the host did not (D.unit_rows).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cub/block/block_reduce.cuh>

#include "kmeans_dev.cuh"
#include "common/transfer.cuh"

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
 * The feature ranges, fr (3d): bits of max |x| of feature j at fr[j]
 * (non-negative floats order as ints), then the ordered keys (km_fkey) of
 * its minimum at fr[d + j] and its maximum at fr[2d + j]; maxima and
 * minima, so any grid and any split of the rows give the same.
 */
__device__ __forceinline__ unsigned
km_fkey(float f)
{
	const unsigned b = __float_as_uint(f);

	return (b & 0x80000000u) ? ~b : b | 0x80000000u;
}

static float
km_unkey(unsigned k)
{
	const unsigned b = (k & 0x80000000u) ? k & 0x7fffffffu : ~k;
	float		f;

	memcpy(&f, &b, sizeof(f));
	return f;
}

__global__ void
k_feature_range(const float *__restrict__ XT, int64_t n, int d, unsigned *fr)
{
	const float *x = XT + (int64_t) blockIdx.y * n;
	float		m = 0.0f,
				lo = INFINITY,
				hi = -INFINITY;

	for (int64_t i = (int64_t) blockIdx.x * blockDim.x + threadIdx.x; i < n;
		 i += (int64_t) gridDim.x * blockDim.x)
	{
		m = fmaxf(m, fabsf(x[i]));
		lo = fminf(lo, x[i]);
		hi = fmaxf(hi, x[i]);
	}
	typedef cub::BlockReduce<float, 256> BR;
	__shared__ typename BR::TempStorage tmp;
	m = BR(tmp).Reduce(m, [](float a, float b) { return fmaxf(a, b); });
	__syncthreads();
	lo = BR(tmp).Reduce(lo, [](float a, float b) { return fminf(a, b); });
	__syncthreads();
	hi = BR(tmp).Reduce(hi, [](float a, float b) { return fmaxf(a, b); });
	if (threadIdx.x == 0)
	{
		atomicMax(fr + blockIdx.y, __float_as_uint(m));
		atomicMin(fr + d + blockIdx.y, km_fkey(lo));
		atomicMax(fr + 2 * d + blockIdx.y, km_fkey(hi));
	}
}

/* mu[j] = the mean of feature j (the shift of the tiled path). */
__global__ void
k_mu(const double *mean, int d, float *mu)
{
	for (int j = threadIdx.x; j < d; j += blockDim.x)
		mu[j] = (float) mean[j];
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

/* ---- host side ---- */

/* Sizes and the path choices that follow from (n, d, k) alone. */
static void
km_dims(km_dev &D, int64_t n, int d, int k)
{
	D.n = n;
	D.d = d;
	D.k = k;
	D.small = d <= SMALL_D_MAX;
	D.W = (d + 3) / 4 * 4;
	D.kp = (k + TILE - 1) / TILE * TILE;
	D.dpad = d;
	D.slots = (size_t) k * (d + 1);
}

/* The current device's properties, the stream, and the grids and kernel
 * variants chosen from them. */
static gc_code
km_open(km_dev &D, gc_status *st)
{
	int			dev;

	KM_CK(cudaGetDevice(&dev));
	KM_CK(cudaDeviceGetAttribute(&D.nsm, cudaDevAttrMultiProcessorCount, dev));
	KM_CK(cudaDeviceGetAttribute(&D.smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
	KM_CK(cudaStreamCreateWithFlags(&D.s, cudaStreamNonBlocking));
	D.fb_grid = D.nsm * 8;
	/* GPUCLUST_KM_TILED_MINB=1: the 1-block variant (no spills, 165 regs). */
	if (getenv("GPUCLUST_KM_TILED_MINB") && atoi(getenv("GPUCLUST_KM_TILED_MINB")) == 1)
		D.tiled_minb = 1;
	return GC_OK;
}

/* Every buffer of the iterations but the sort-by-label update's. */
static gc_code
km_alloc(km_dev &D, bool keep_best, gc_status *st)
{
	const int64_t n = D.n;
	const int	d = D.d,
				k = D.k;
	const int64_t nb = (n + KM_BLOCK - 1) / KM_BLOCK;

	/* streamed: the per-row arrays of one chunk are km_stream_open's */
	const int64_t nr = D.streamed ? 0 : n;

	if (!D.streamed)
		KM_ALLOC(D.XT, (int64_t) n * d);
	KM_ALLOC(D.labels, n);
	if (keep_best)
	{
		KM_ALLOC(D.labels_best, n);
		KM_ALLOC(D.C_best, (int64_t) k * d);
	}
	KM_ALLOC(D.C[0], (int64_t) k * d);
	KM_ALLOC(D.C[1], (int64_t) k * d);
	if (D.unit)
	{
		KM_ALLOC(D.Cu, (int64_t) k * d);
		KM_ALLOC(D.Cs, (int64_t) k * d);
	}
	if (D.small)
		KM_ALLOC(D.cpk, (int64_t) k * D.W);
	else
	{
		KM_ALLOC(D.CT, (int64_t) D.dpad * D.kp);
		KM_CK(cudaMemsetAsync(D.CT, 0, sizeof(float) * D.dpad * D.kp, D.s));	/* rows d.. */
		KM_ALLOC(D.cnrm, D.kp);
		KM_ALLOC(D.CTo, (int64_t) d * D.kp);
		if (D.screen)
		{
			const char *env = getenv("GPUCLUST_KM_TIES");
			const int64_t cap = km_ties_cap(D.streamed ? D.chunk : n);

			/* the near ties' windows (kmeans_screen.cu's header) where a
			 * re-rank over every centre costs more: k d >= 2^17 */
			if (env ? strcmp(env, "1") == 0 : (int64_t) k * d >= KM_TIES_MIN_KD)
			{
				D.ties.cap = (int) cap;
				D.ties_est = cap / 4;
				D.screen_cascade = false;
				KM_ALLOC(D.ties.thr, cap);
				KM_ALLOC(D.ties.cand, cap * KM_TIE_CAP);
				KM_ALLOC(D.ties.ccnt, cap);
			}
			if (D.screen == 3 || D.screen_cascade)
				KM_ALLOC(D.CTf, (int64_t) D.dpad * D.kp);
			/* the pass over every row and the window pass read wgmma's
			 * layout (FP16) or mma.sync's (TF32); the rows the bounds list
			 * (kmeans_prune.cu) go through mma.sync */
			if (D.screen_wg)
			{
				KM_ALLOC(D.CTw, (int64_t) D.wdpad * D.kp);
				KM_ALLOC(D.cnw, D.kp);
			}
			if (!D.screen_wg || D.prune_ok)
				KM_ALLOC(D.CTt, (int64_t) D.dpad * D.kp);
		}
		KM_ALLOC(D.cmax2, 3);	/* max ||c'||²; the wgmma screen's rounding and scale */
		if (nr > 0)
		{
			KM_ALLOC(D.fb_rows, nr);
			if (D.screen)
				KM_ALLOC(D.fb_rows2, nr);
			KM_ALLOC(D.xn2, nr);
		}
	}
	if (D.prune_ok)
	{
		gc_code		rc = km_prune_alloc(D, st);

		if (rc != GC_OK)
			return rc;
	}
	KM_ALLOC(D.mu, d);
	/* gsum (slots) followed by the info record, one memset per iteration. */
	KM_CK(gc_dalloc((void **) &D.gsum, sizeof(unsigned long long) * D.slots + sizeof(km_info), D.s));
	D.info = (km_info *) (D.gsum + D.slots);
	KM_CK(cudaMallocHost(&D.h_info, sizeof(km_info)));
	KM_ALLOC(D.scale, 2 * d);
	D.iscale = D.scale + d;
	if (nr > 0)
		KM_ALLOC(D.q, nr);
	KM_ALLOC(D.bsum, nb + 1);
	KM_ALLOC(D.fin_part, 1024);
	D.dsum = D.bsum + nb;
	KM_ALLOC(D.d2, n);
	KM_ALLOC(D.keys, k);
	KM_ALLOC(D.empty, k);
	/* the variance's block sums (nb x d), varj (d), out (1); the means (d) */
	KM_ALLOC(D.vbuf, nb * d + 2 * (int64_t) d + 1);
	D.mean = D.vbuf + nb * d + d + 1;
	return GC_OK;
}

gc_code
km_transpose(km_dev &D, const float *in, int64_t rows, float *XT, int64_t ld,
			 int64_t r0, gc_status *st)
{
	dim3		g(blocks_for(rows, 32), blocks_for(D.d, 32));

	k_transpose<<<g, dim3(32, 8), 0, D.s>>>(in, rows, D.d, XT, ld, r0);
	KM_LAUNCHED();
	return GC_OK;
}

/*
 * Upload through transfer.cu's pinned ring (the call's host threads copy
 * into it while the copy engine moves the chunk before), transposing: into
 * the row-major copy when there is one (km_upload_rowmajor), otherwise
 * through a staging buffer of at most 64 MiB (km_upload_staged).
 */
static gc_code
km_upload_rowmajor(km_dev &D, const float *X, gc_status *st)
{
	const int64_t n = D.n;
	const int	d = D.d;
	cudaError_t e = gc_xfer_h2d(D.XR, X, sizeof(float) * (size_t) n * d, D.s,
								gc_team_adapt(D.ctx));

	if (e == cudaSuccess)
	{
		k_transpose<<<dim3(blocks_for(n, 32), blocks_for(d, 32)), dim3(32, 8), 0, D.s>>>(D.XR, n, d, D.XT, n, 0);
		e = cudaGetLastError();
	}
	if (e == cudaSuccess)
		e = cudaStreamSynchronize(D.s);
	if (e != cudaSuccess)
		return km_cuda_fail(st, e, "uploading the data");
	return GC_OK;
}

static gc_code
km_upload_staged(km_dev &D, const float *X, gc_status *st)
{
	const int64_t n = D.n;
	const int	d = D.d;
	const int	threads = gc_team_adapt(D.ctx);
	int64_t		chunk = (int64_t) (16u << 20) / d;
	float	   *stage = nullptr;
	cudaError_t e;

	if (chunk < 1)
		chunk = 1;
	if (chunk > n)
		chunk = n;
	KM_CK(gc_dalloc((void **) &stage, sizeof(float) * (size_t) chunk * d, D.s));
	e = cudaSuccess;
	/* the stage's next copy is queued after the transpose that reads it */
	for (int64_t r0 = 0; r0 < n && e == cudaSuccess; r0 += chunk)
	{
		int64_t		rows = n - r0 < chunk ? n - r0 : chunk;
		dim3		g(blocks_for(rows, 32), blocks_for(d, 32));

		e = gc_xfer_h2d(stage, X + r0 * d, sizeof(float) * rows * d, D.s, threads);
		if (e == cudaSuccess)
		{
			k_transpose<<<g, dim3(32, 8), 0, D.s>>>(stage, rows, d, D.XT, n, r0);
			e = cudaGetLastError();
		}
	}
	if (e == cudaSuccess)
		e = cudaStreamSynchronize(D.s);
	gc_dfree(stage, D.s);
	if (e != cudaSuccess)
		return km_cuda_fail(st, e, "uploading the data");
	return GC_OK;
}

/* The feature ranges' scratch (3d), cleared for km_features_rows. */
gc_code
km_features_scratch(km_dev &D, unsigned **fr, gc_status *st)
{
	*fr = nullptr;
	KM_CK(gc_dalloc((void **) fr, sizeof(unsigned) * 3 * D.d, D.s));
	KM_CK(cudaMemsetAsync(*fr, 0, sizeof(unsigned) * 3 * D.d, D.s));
	KM_CK(cudaMemsetAsync(*fr + D.d, 0xff, sizeof(unsigned) * D.d, D.s));
	return GC_OK;
}

/* The feature pass over V's rows (from row r0 of the problem). */
gc_code
km_features_rows(km_dev &V, int64_t r0, unsigned *fr, gc_status *st)
{
	const unsigned gx0 = blocks_for(V.n, 256 * 8);
	const unsigned gx = gx0 < 512 ? gx0 : 512;

	k_feature_range<<<dim3(gx, V.d), 256, 0, V.s>>>(V.XT, V.n, V.d, fr);
	KM_LAUNCHED();
	return km_var_blocks(V, r0, 0, st);
}

/* The shifted row norms of V's rows (tiled path). */
gc_code
km_rownorm(km_dev &V, gc_status *st)
{
	k_rownorm<<<blocks_for(V.n, 256), 256, 0, V.s>>>(V.XT, V.n, V.d, V.mu, V.xn2);
	KM_LAUNCHED();
	return GC_OK;
}

/* Fixed-point scales: 2^s_j with n * max|x_j| * 2^s_j <= 2^61; hs (2d):
 * the scales, then their inverses. */
static void
km_scales_from_amax(const unsigned *h, int d, int64_t n, double *hs)
{
	int			lg = 0;

	while (lg < 63 && ((int64_t) 1 << lg) < n)
		lg++;
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
}

/*
 * After the feature pass over every row (fr: its ranges, km_features_rows):
 * the means (D.mean, from the block sums), then km_features_set.
 */
gc_code
km_features_finish(km_dev &D, unsigned *fr, gc_status *st)
{
	unsigned   *hp = (unsigned *) malloc(sizeof(unsigned) * 3 * D.d);
	gc_code		rc;

	if (hp == NULL)
		return gc_fail(st, GC_ENOMEM, "GPU k-means: out of memory");
	rc = km_var_reduce(D, 0, nullptr, st);
	if (rc == GC_OK)
	{
		cudaError_t e = cudaMemcpyAsync(hp, fr, sizeof(unsigned) * 3 * D.d,
										cudaMemcpyDeviceToHost, D.s);

		if (e == cudaSuccess)
			e = cudaStreamSynchronize(D.s);
		rc = e == cudaSuccess ? km_features_set(D, hp, D.n, st) :
			km_cuda_fail(st, e, "feature ranges");
	}
	free(hp);
	return rc;
}

/*
 * From the means (D.mean) and the feature ranges h (host, fr's layout) of
 * the n rows of the problem: D.mu, the scales (D.scale, D.iscale), resident
 * on the tiled path the row norms (D.xn2), D.xabs, and the exact path's
 * grid (km_grid_plan, from the features' minima and maxima).
 */
gc_code
km_features_set(km_dev &D, const unsigned *h, int64_t n, gc_status *st)
{
	const int	d = D.d;
	double	   *hs = (double *) malloc(sizeof(double) * 2 * d);
	float	   *lo = (float *) malloc(sizeof(float) * 2 * d);
	gc_code		rc = GC_OK;
	cudaError_t e = cudaSuccess;

	if (hs == NULL || lo == NULL)
	{
		free(hs);
		free(lo);
		return gc_fail(st, GC_ENOMEM, "GPU k-means: out of memory");
	}
	k_mu<<<1, 256, 0, D.s>>>(D.mean, d, D.mu);
	e = cudaGetLastError();
	if (e == cudaSuccess && !D.small && !D.streamed)
	{
		k_rownorm<<<blocks_for(D.n, 256), 256, 0, D.s>>>(D.XT, D.n, d, D.mu, D.xn2);
		e = cudaGetLastError();
	}
	if (e == cudaSuccess)
	{
		km_scales_from_amax(h, d, n, hs);
		e = cudaMemcpyAsync(D.scale, hs, sizeof(double) * 2 * d,
							cudaMemcpyHostToDevice, D.s);
	}
	if (e == cudaSuccess)
		e = cudaStreamSynchronize(D.s);
	if (e != cudaSuccess)
		rc = km_cuda_fail(st, e, "feature scales");
	if (rc == GC_OK)
	{
		for (int j = 0; j < 2 * d; j++)
		{
			lo[j] = km_unkey(h[d + j]);
			/* |x - mu| <= |x| + |mu| <= 2 max |x|, rounded up (kmeans_wgmma.cu's scale) */
			D.xabs = fmaxf(D.xabs, 2.0f * fabsf(lo[j]) * (1.0f + 0x1.0p-20f));
		}
		rc = km_grid_plan(D, lo, lo + d, st);
	}
	free(hs);
	free(lo);
	return rc;
}

/* Cosine: each row of XT (and XR) its unit row (gc_unit_row_strided), in place. */
__global__ void
k_unit_x(float *XT, int64_t n, int d, float *XR)
{
	const int64_t i = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;

	if (i < n)
	{
		(void) gc_unit_row_strided(XT + i, n, d, XT + i, n);
		for (int j = 0; XR != nullptr && j < d; j++)
			XR[i * d + j] = XT[(int64_t) j * n + i];
	}
}

/* The feature statistics of the resident XT. */
static gc_code
km_features(km_dev &D, gc_status *st)
{
	unsigned   *fr = nullptr;
	gc_code		rc = km_features_scratch(D, &fr, st);

	if (rc == GC_OK)
		rc = km_features_rows(D, 0, fr, st);
	if (rc == GC_OK)
		rc = km_features_finish(D, fr, st);
	gc_dfree(fr, D.s);
	return rc;
}

/* Allocates and uploads X (chunked, transposed): km_setup but the
 * feature statistics and the update's plan. */
gc_code
km_setup_rows(km_dev &D, const float *X, int64_t n, int d, int k, bool keep_best,
			  gc_status *st, int64_t chunk, const gc_ctx *ctx)
{
	gc_code		rc;

	km_dims(D, n, d, k);
	D.ctx = ctx;
	if (chunk > 0)
	{
		D.streamed = true;
		D.chunk = chunk;
		D.nchunks = (n + chunk - 1) / chunk;
		D.hX = X;
	}
	if ((rc = km_open(D, st)) != GC_OK ||
		(rc = km_screen_plan(D, st)) != GC_OK)
		return rc;
	km_prune_plan(D);
	if ((rc = km_alloc(D, keep_best, st)) != GC_OK)
		return rc;
	if (D.hw != nullptr)
	{
		if ((rc = km_wupd_alloc(D, st)) != GC_OK)
			return rc;
	}
	else
		km_update_alloc(D);
	if (D.streamed)
		return km_stream_open(D, st);
	rc = D.XR ? km_upload_rowmajor(D, X, st) : km_upload_staged(D, X, st);
	if (rc == GC_OK && D.unit_rows)
	{
		k_unit_x<<<blocks_for(n, 256), 256, 0, D.s>>>(D.XT, n, d, D.XR);
		KM_LAUNCHED();
	}
	return rc;
}

/* Allocates, uploads X (chunked, transposed) and picks the kernels. */
gc_code
km_setup(km_dev &D, const float *X, int64_t n, int d, int k, bool keep_best,
		 gc_status *st, int64_t chunk, const gc_ctx *ctx)
{
	gc_code		rc = km_setup_rows(D, X, n, d, k, keep_best, st, chunk, ctx);

	if (rc == GC_OK)
		rc = D.streamed ? km_stream_features(D, st) : km_features(D, st);
	return rc != GC_OK ? rc : km_update_plan(D, st);
}
