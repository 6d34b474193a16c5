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
#include "common/transfer.cuh"

/* ---- inertia and distances ---- */

/*
 * From q = sum_j ((double) x - (double) c)², as gc_km_inertia_w: q[i] =
 * the row's term of the inertia (gc_km_cost, times its weight w[i] when
 * there are weights), or with dist its distance (gc_km_distance).
 */
__global__ void
k_inertia_terms(const float *__restrict__ XT, int64_t n, int d,
				const float *__restrict__ C, const int32_t *__restrict__ labels,
				const double *__restrict__ w, gc_metric metric, bool dist,
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
		if (dist)
			q[i] = gc_km_distance(s, metric);
		else
			q[i] = w ? w[i] * gc_km_cost(s, metric) : gc_km_cost(s, metric);
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

/* The metric of V's problem. */
static gc_metric
km_metric(const km_dev &V)
{
	return V.unit ? GC_METRIC_COSINE : GC_METRIC_EUCLIDEAN;
}

/*
 * The block sums of V's rows' terms: V's rows start at row r0 of the
 * problem, a multiple of KM_BLOCK (the chunks of the streamed path), so
 * its blocks are the problem's blocks r0 / KM_BLOCK on.  C: the centres
 * the rows are measured to (km_assign_centres).
 */
gc_code
km_inertia_rows(km_dev &V, const float *C, const int32_t *labels, int64_t r0,
				gc_status *st)
{
	const int64_t nb = (V.n + KM_BLOCK - 1) / KM_BLOCK;
	const double *w = km_weights(V);

	k_inertia_terms<<<blocks_for(V.n, 256), 256, 0, V.s>>>(V.XT, V.n, V.d, C, labels,
														   w ? w + r0 : nullptr, km_metric(V),
														   false, V.q);
	KM_LAUNCHED();
	k_block_sums<<<blocks_for(nb, 64), 64, 0, V.s>>>(V.q, V.n, V.bsum + r0 / KM_BLOCK);
	KM_LAUNCHED();
	return GC_OK;
}

/* The blocks summed in order, as gc_km_inertia. */
gc_code
km_inertia_total(km_dev &D, double *inertia, gc_status *st)
{
	const int64_t nb = (D.n + KM_BLOCK - 1) / KM_BLOCK;

	k_seq_sum<<<1, 1, 0, D.s>>>(D.bsum, nb, D.dsum);
	KM_LAUNCHED();
	KM_CK(cudaMemcpyAsync(inertia, D.dsum, sizeof(double), cudaMemcpyDeviceToHost, D.s));
	KM_CK(cudaStreamSynchronize(D.s));
	return GC_OK;
}

/* Inertia of (labels, C) as gc_km_inertia; q keeps the per-row terms. */
gc_code
km_inertia(km_dev &D, const float *C, const int32_t *labels, double *inertia,
		   gc_status *st)
{
	gc_code		rc;

	if ((rc = km_inertia_rows(D, C, labels, 0, st)) != GC_OK)
		return rc;
	return km_inertia_total(D, inertia, st);
}

/* Distances of (labels, C) into out (host, V.n doubles), there when this
 * returns (transfer.cu's ring); C as km_inertia_rows'. */
gc_code
km_distances(km_dev &V, const float *C, const int32_t *labels, double *out,
			 gc_status *st)
{
	const int64_t n = V.n;

	k_inertia_terms<<<blocks_for(n, 256), 256, 0, V.s>>>(V.XT, n, V.d, C, labels, nullptr,
														 km_metric(V), true, V.q);
	KM_LAUNCHED();
	KM_CK(gc_xfer_d2h(out, V.q, sizeof(double) * n, V.s, gc_team_adapt(V.ctx)));
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

/* The block sums of one pass over V's rows (from row r0, a multiple of
 * KM_BLOCK): the problem's blocks r0 / KM_BLOCK on. */
gc_code
km_var_blocks(km_dev &V, int64_t r0, int pass, gc_status *st)
{
	const int64_t nb = (V.n + KM_BLOCK - 1) / KM_BLOCK;
	const unsigned g = (unsigned) ((nb * V.d + 127) / 128);

	var_blocks<<<g, 128, 0, V.s>>>(V.XT, V.n, V.d, nb, pass ? V.mean : nullptr,
								   V.vbuf + (r0 / KM_BLOCK) * V.d);
	KM_LAUNCHED();
	return GC_OK;
}

/* After a pass over every row: D.mean (pass 0), or *out (pass 1, host). */
gc_code
km_var_reduce(km_dev &D, int pass, double *out, gc_status *st)
{
	const int64_t nb = (D.n + KM_BLOCK - 1) / KM_BLOCK;
	double	   *varj = D.vbuf + nb * D.d,
			   *o = varj + D.d;

	var_reduce<<<1, 256, 0, D.s>>>(D.vbuf, nb, D.d, D.n, pass, D.mean, varj, o);
	KM_LAUNCHED();
	if (pass == 1)
	{
		KM_CK(cudaMemcpyAsync(out, o, sizeof(double), cudaMemcpyDeviceToHost, D.s));
		KM_CK(cudaStreamSynchronize(D.s));
	}
	return GC_OK;
}
