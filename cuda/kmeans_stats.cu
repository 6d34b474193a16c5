/*
 * kmeans_stats.cu — the double-precision statistics of the GPU k-means,
 * each the CPU's own number bit for bit (kmeans_assign.c): the inertia of
 * a result and the distances of its rows (as gc_km_inertia), and the mean
 * feature variance that scales tol (as gc_km_mean_variance).  Every term is
 * computed in parallel; every double sum runs over the CPU's fixed blocks
 * of GC_KM_BLOCK rows, sequentially inside a block and then block after
 * block, on one thread each.
 */
#include <math.h>

#include "kmeans_dev.cuh"

/* ---- inertia and distances ---- */

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

/* Distances of (labels, C) into out (host, n doubles): the square roots of
 * km_inertia's terms, copied on D.s (the caller synchronises). */
gc_code
km_distances(km_dev &D, const float *C, const int32_t *labels, double *out,
			 gc_status *st)
{
	const int64_t n = D.n;
	double		dummy;
	gc_code		rc;

	if ((rc = km_inertia(D, C, labels, &dummy, st)) != GC_OK)
		return rc;
	k_sqrt<<<blocks_for(n, 256), 256, 0, D.s>>>(D.q, n);
	KM_LAUNCHED();
	KM_CK(cudaMemcpyAsync(out, D.q, sizeof(double) * n,
						  cudaMemcpyDeviceToHost, D.s));
	return GC_OK;
}

/* ---- mean feature variance, blocked as gc_km_mean_variance ---- */

/* bsv[b*d + j]: block b's sequential double sum for feature j. */
__global__ void
var_blocks(const float *__restrict__ XT, int64_t n, int d, int64_t nb,
		   const double *mean, double *bsv)
{
	int64_t		e = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;

	if (e < nb * d)
	{
		int64_t		b = e % nb;
		int			j = (int) (e / nb);
		int64_t		i0 = b * KM_BLOCK,
					i1 = i0 + KM_BLOCK < n ? i0 + KM_BLOCK : n;
		const float *x = XT + (int64_t) j * n;
		double		s = 0.0;

		if (mean == nullptr)
			for (int64_t i = i0; i < i1; i++)
				s += (double) x[i];
		else
		{
			const double m = mean[j];

			for (int64_t i = i0; i < i1; i++)
			{
				double		t = (double) x[i] - m;

				s += t * t;
			}
		}
		bsv[b * d + j] = s;
	}
}

__global__ void
var_reduce(const double *bsv, int64_t nb, int d, int64_t n, int pass,
		   double *mean, double *varj, double *out)
{
	for (int j = threadIdx.x; j < d; j += blockDim.x)
	{
		double		s = 0.0;

		for (int64_t b = 0; b < nb; b++)
			s += bsv[b * d + j];
		if (pass == 0)
			mean[j] = s / (double) n;
		else
			varj[j] = s / (double) n;
	}
	__syncthreads();
	if (pass == 1 && threadIdx.x == 0)
	{
		double		var = 0.0;

		for (int j = 0; j < d; j++)
			var += varj[j];
		*out = var / d;
	}
}

gc_code
km_mean_variance_device(cudaStream_t s, const float *XT, int64_t n, int d,
						double *out, gc_status *st)
{
	const int64_t nb = (n + KM_BLOCK - 1) / KM_BLOCK;
	double	   *buf = nullptr;
	double		h = 0.0;
	cudaError_t e;

	/* bsv (nb*d), mean (d), varj (d), out (1) */
	e = gc_dalloc((void **) &buf, sizeof(double) * (nb * d + 2 * (int64_t) d + 1), s);
	if (e != cudaSuccess)
		return km_cuda_fail(st, e, "cudaMalloc (variance)");
	{
		double	   *bsv = buf,
				   *mean = buf + nb * d,
				   *varj = mean + d,
				   *o = varj + d;
		unsigned	g = (unsigned) ((nb * d + 127) / 128);

		for (int pass = 0; pass < 2 && e == cudaSuccess; pass++)
		{
			var_blocks<<<g, 128, 0, s>>>(XT, n, d, nb, pass ? mean : nullptr, bsv);
			var_reduce<<<1, 256, 0, s>>>(bsv, nb, d, n, pass, mean, varj, o);
			e = cudaGetLastError();
		}
		if (e == cudaSuccess)
			e = cudaMemcpyAsync(&h, o, sizeof(double), cudaMemcpyDeviceToHost, s);
		if (e == cudaSuccess)
			e = cudaStreamSynchronize(s);
	}
	gc_dfree(buf, s);
	if (e != cudaSuccess)
		return km_cuda_fail(st, e, "data variance");
	*out = h;
	return GC_OK;
}
