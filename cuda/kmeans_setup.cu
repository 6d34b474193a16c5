/*
 * kmeans_setup.cu — the device state of one GPU k-means problem, from the
 * host matrix to the first iteration: km_setup reads the device's
 * properties, allocates every buffer of km_dev, uploads X in chunks and
 * transposes it to structure-of-arrays (XT, d rows of n floats, so that
 * every kernel reads points coalesced; X stays resident for the whole
 * call), and takes in one pass over XT what the later phases need of the
 * features: the fixed-point scales of the update's sums (a power of two per
 * feature, from its largest |x| and n, so that no sum can overflow), the
 * feature means by which the tiled assignment shifts rows and centres, and
 * the shifted row norms of its rounding bound.  The update's own choices
 * and buffers are kmeans_update.cu's (km_update_alloc, km_update_plan).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cub/block/block_reduce.cuh>

#include "kmeans_dev.cuh"

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
		KM_ALLOC(D.CT, (int64_t) D.dpad * D.kp);
		KM_CK(cudaMemsetAsync(D.CT, 0, sizeof(float) * D.dpad * D.kp, D.s));	/* rows d.. */
		KM_ALLOC(D.cnrm, D.kp);
		KM_ALLOC(D.CTo, (int64_t) d * D.kp);
		if (D.screen)
		{
			KM_ALLOC(D.CTf, (int64_t) D.dpad * D.kp);
			KM_ALLOC(D.CTt, (int64_t) D.dpad * D.kp);
		}
		KM_ALLOC(D.cmax2, 1);
		KM_ALLOC(D.fb_rows, n);
		if (D.screen_cascade)
			KM_ALLOC(D.fb_rows2, n);
		KM_ALLOC(D.xn2, n);
	}
	KM_ALLOC(D.mu, d);
	/* gsum (slots) followed by the info record, one memset per iteration. */
	KM_CK(gc_dalloc((void **) &D.gsum, sizeof(unsigned long long) * D.slots + sizeof(km_info), D.s));
	D.info = (km_info *) (D.gsum + D.slots);
	KM_CK(cudaMallocHost(&D.h_info, sizeof(km_info)));
	KM_ALLOC(D.scale, 2 * d);
	D.iscale = D.scale + d;
	KM_ALLOC(D.q, n);
	KM_ALLOC(D.bsum, nb + 1);
	KM_ALLOC(D.fin_part, 1024);
	D.dsum = D.bsum + nb;
	KM_ALLOC(D.d2, n);
	KM_ALLOC(D.keys, k);
	KM_ALLOC(D.empty, k);
	return GC_OK;
}

/*
 * Upload in chunks, transposing: into the row-major copy when there is
 * one (km_upload_rowmajor), otherwise through a staging buffer of at most
 * 64 MiB (km_upload_staged).
 */
static gc_code
km_upload_rowmajor(km_dev &D, const float *X, gc_status *st)
{
	const int64_t n = D.n;
	const int	d = D.d;
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
	return GC_OK;
}

static gc_code
km_upload_staged(km_dev &D, const float *X, gc_status *st)
{
	const int64_t n = D.n;
	const int	d = D.d;
	int64_t		chunk = (int64_t) (16u << 20) / d;
	float	   *stage = nullptr;
	cudaError_t e;

	if (chunk < 1)
		chunk = 1;
	if (chunk > n)
		chunk = n;
	KM_CK(gc_dalloc((void **) &stage, sizeof(float) * (size_t) chunk * d, D.s));
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
	gc_dfree(stage, D.s);
	if (e != cudaSuccess)
		return km_cuda_fail(st, e, "uploading the data");
	return GC_OK;
}

/*
 * The pass over XT: largest |x| of each feature into h (host, d; the bits
 * of a non-negative float), the feature means into D.mu and, for the tiled
 * path, the shifted row norms into D.xn2.  amax (d) and part (gx x d) are
 * device scratch.
 */
static cudaError_t
km_feature_pass(km_dev &D, unsigned *amax, double *part, unsigned gx,
				unsigned *h)
{
	const int64_t n = D.n;
	const int	d = D.d;
	cudaError_t e;

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
	return e;
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

/* The feature statistics: D.scale and D.iscale, D.mu, D.xn2. */
static gc_code
km_features(km_dev &D, gc_status *st)
{
	const int64_t n = D.n;
	const int	d = D.d;
	unsigned   *amax = nullptr;
	double	   *part = nullptr;
	const unsigned gx0 = blocks_for(n, 256 * 8);
	const unsigned gx = gx0 < 512 ? gx0 : 512;
	unsigned   *h = (unsigned *) malloc(sizeof(unsigned) * d);
	double	   *hs = (double *) malloc(sizeof(double) * 2 * d);
	cudaError_t e;

	if (h == NULL || hs == NULL)
	{
		free(h);
		free(hs);
		return gc_fail(st, GC_ENOMEM, "GPU k-means: out of memory");
	}
	e = gc_dalloc((void **) &amax, sizeof(unsigned) * d, D.s);
	if (e == cudaSuccess)
		e = gc_dalloc((void **) &part, sizeof(double) * gx * d, D.s);
	if (e == cudaSuccess)
		e = km_feature_pass(D, amax, part, gx, h);
	if (e == cudaSuccess)
	{
		km_scales_from_amax(h, d, n, hs);
		e = cudaMemcpyAsync(D.scale, hs, sizeof(double) * 2 * d,
							cudaMemcpyHostToDevice, D.s);
	}
	if (e == cudaSuccess)
		e = cudaStreamSynchronize(D.s);
	gc_dfree(amax, D.s);
	gc_dfree(part, D.s);
	free(h);
	free(hs);
	if (e != cudaSuccess)
		return km_cuda_fail(st, e, "feature scales");
	return GC_OK;
}

/* Allocates, uploads X (chunked, transposed) and picks the kernels. */
gc_code
km_setup(km_dev &D, const float *X, int64_t n, int d, int k, bool keep_best,
		 gc_status *st)
{
	gc_code		rc;

	km_dims(D, n, d, k);
	if ((rc = km_open(D, st)) != GC_OK ||
		(rc = km_screen_plan(D, st)) != GC_OK ||
		(rc = km_alloc(D, keep_best, st)) != GC_OK)
		return rc;
	km_update_alloc(D);
	rc = D.XR ? km_upload_rowmajor(D, X, st) : km_upload_staged(D, X, st);
	if (rc != GC_OK || (rc = km_features(D, st)) != GC_OK)
		return rc;
	return km_update_plan(D, st);
}
