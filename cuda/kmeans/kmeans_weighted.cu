/*
 * kmeans_weighted.cu — the update step of the GPU k-means with sample
 * weights: the weighted means summed exactly as the CPU's gc_km_update
 * sums them (kmeans_update.c), so the centres are the CPU's bit for bit.
 *
 * The unweighted update's 64-bit fixed-point sums (kmeans_update.cu) are
 * exact because a float row scales into an integer; a weighted term w x
 * (double w, float x) does not, and fixed point over weights that span
 * many decades would lose the light rows.  So this update repeats the
 * CPU's double sums in the CPU's order instead:
 *   - the rows in cluster order, stable (CUB's radix sort of the labels
 *     with the row numbers: ascending rows within a cluster, the order of
 *     the CPU's stable counting sort);
 *   - each cluster's rows in segments of GC_KM_SEGMENT from its first row;
 *     a segment's w_i x_ij and w_i summed in double, row after row (one
 *     thread per feature, a block per segment);
 *   - a cluster's segment sums added in order from 0.0, the mean their
 *     quotient rounded to float (one thread per coordinate).
 * Every operation is the CPU's, IEEE double with no contraction
 * (-fmad=false), so the sums and the means are the same numbers.  A
 * cluster is empty when none of its rows has a positive weight (the CPU's
 * pcnt): it keeps its centre, and an iteration that leaves one re-seeds
 * it as the CPU does (km_wreseed: the rows of positive weight farthest
 * from their centres), then sums again.
 *
 * Cost: the segments' sums are sequential chains of at most GC_KM_SEGMENT
 * rows, staged tile by tile in shared memory from the row-major copy D.XR
 * (coalesced); the sort is one pass over the labels per 8 bits of k.
 */
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_scan.cuh>

#include "kmeans_dev.cuh"

#define WS_THREADS 256			/* a segment's block: its features and weight */

struct km_wupd
{
	double	   *w = nullptr;	/* n: the weights */
	int32_t    *iota = nullptr;	/* n: 0 .. n-1, the sort's values */
	uint32_t   *keys_out = nullptr;	/* n: the sorted labels */
	int32_t    *order = nullptr;	/* n: the rows in cluster order */
	int32_t    *lab_eff = nullptr;	/* n: the labels after a re-seeding */
	int		   *start = nullptr;	/* k + 1: a cluster's first sorted row, then n */
	int		   *nseg = nullptr;	/* k + 1: segments a cluster, then segoff (k + 1) */
	int		   *segoff = nullptr;
	unsigned long long *pcnt = nullptr;	/* k: 1 where a row has a positive weight, else 0 */
	double	   *part = nullptr; /* smax x (d + 1): the segments' sums, weight last */
	int64_t		smax = 0;		/* segments at most: n / GC_KM_SEGMENT + k */
	void	   *tmp = nullptr;	/* the sort's and the scans' */
	size_t		tmp_bytes = 0;
	int			end_bit = 1;	/* the labels' bits */
};

void
km_wupd_free(km_dev &D)
{
	km_wupd    *W = D.wu;

	if (W == nullptr || D.is_view)
		return;
	gc_dfree(W->w, D.s);
	gc_dfree(W->iota, D.s);
	gc_dfree(W->keys_out, D.s);
	gc_dfree(W->order, D.s);
	gc_dfree(W->lab_eff, D.s);
	gc_dfree(W->start, D.s);
	gc_dfree(W->nseg, D.s);
	gc_dfree(W->pcnt, D.s);
	gc_dfree(W->part, D.s);
	gc_dfree(W->tmp, D.s);
	delete W;
	D.wu = nullptr;
}

const double *
km_weights(const km_dev &D)
{
	return D.wu ? D.wu->w : nullptr;
}

const unsigned long long *
km_wcounts(const km_dev &D)
{
	return D.wu->pcnt;
}

__global__ void
k_iota(int32_t *v, int64_t n)
{
	const int64_t i = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;

	if (i < n)
		v[i] = (int32_t) i;
}

gc_code
km_wupd_alloc(km_dev &D, gc_status *st)
{
	const int64_t n = D.n;
	const int	k = D.k;
	size_t		sort_bytes = 0,
				scan_bytes = 0;
	km_wupd    *W;

	if (D.streamed)
		return gc_fail(st, GC_EINTERNAL, "GPU k-means: weighted rows are not streamed");
	W = D.wu = new (std::nothrow) km_wupd;
	if (W == nullptr)
		return gc_fail(st, GC_ENOMEM, "GPU k-means: out of memory");
	while (W->end_bit < 31 && (1ll << W->end_bit) < k)
		W->end_bit++;
	W->smax = n / GC_KM_SEGMENT + k;
	/* the row-major copy the segments read (km_setup uploads into it) */
	if (D.XR == nullptr)
		KM_ALLOC(D.XR, n * D.d);
	KM_ALLOC(W->w, n);
	KM_ALLOC(W->iota, n);
	KM_ALLOC(W->keys_out, n);
	KM_ALLOC(W->order, n);
	KM_ALLOC(W->lab_eff, n);
	KM_ALLOC(W->start, (int64_t) k + 1);
	KM_ALLOC(W->nseg, 2 * ((int64_t) k + 1));
	W->segoff = W->nseg + k + 1;
	KM_ALLOC(W->pcnt, k);
	KM_ALLOC(W->part, W->smax * (D.d + 1));
	KM_CK(cub::DeviceRadixSort::SortPairs(nullptr, sort_bytes, (const uint32_t *) nullptr,
										  (uint32_t *) nullptr, (const int32_t *) nullptr,
										  (int32_t *) nullptr, n, 0, W->end_bit, D.s));
	KM_CK(cub::DeviceScan::ExclusiveSum(nullptr, scan_bytes, W->nseg, W->segoff, k + 1, D.s));
	W->tmp_bytes = sort_bytes > scan_bytes ? sort_bytes : scan_bytes;
	KM_CK(gc_dalloc(&W->tmp, W->tmp_bytes, D.s));
	k_iota<<<blocks_for(n, 256), 256, 0, D.s>>>(W->iota, n);
	KM_LAUNCHED();
	KM_CK(cudaMemcpyAsync(W->w, D.hw, sizeof(double) * (size_t) n, cudaMemcpyHostToDevice, D.s));
	KM_CK(cudaStreamSynchronize(D.s));
	return GC_OK;
}

/* The first position of label c in the sorted labels (n: none past it). */
__device__ __forceinline__ int64_t
first_of(const uint32_t *__restrict__ sorted, int64_t n, int c)
{
	int64_t		lo = 0,
				hi = n;

	while (lo < hi)
	{
		const int64_t mid = (lo + hi) / 2;

		if (sorted[mid] < (uint32_t) c)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/*
 * start[c]: cluster c's first position in the sorted labels (start[k] =
 * n); nseg[c]: its segments of GC_KM_SEGMENT rows (0: no rows; nseg[k] = 0,
 * so that their exclusive sum's slot k is the number of segments).
 */
__global__ void
k_wsegments(const uint32_t *__restrict__ sorted, int64_t n, int k, int *start,
			int *nseg)
{
	const int	c = blockIdx.x * blockDim.x + threadIdx.x;

	if (c <= k)
	{
		const int64_t b = first_of(sorted, n, c);

		start[c] = (int) b;
		nseg[c] = c < k ? (int) ((first_of(sorted, n, c + 1) - b + GC_KM_SEGMENT - 1) /
								 GC_KM_SEGMENT) : 0;
	}
}

/*
 * Block s: segment s (of segoff[k]) of the rows in cluster order, as the
 * CPU's segment_sums: for each feature j, the double sum of w x_j over its
 * rows in order; in slot d, the sum of w.  Its cluster is the last c with
 * segoff[c] <= s (a cluster of no rows has no segment).  The block stages
 * tiles of the segment's rows (their weights and features, coalesced) in
 * shared memory; then thread j adds feature j of the tile's rows, in
 * order, to its sum in part.
 */
#define WS_TILE_FLOATS 8192		/* a tile's features: 32 KB */

__global__ void __launch_bounds__(WS_THREADS)
k_wsums(const float *__restrict__ XR, int d, const double *__restrict__ w,
		const int32_t *__restrict__ order, const int *__restrict__ start,
		const int *__restrict__ segoff, int k,
		double *__restrict__ part)
{
	__shared__ float xs[WS_TILE_FLOATS];
	__shared__ double sw[128];
	__shared__ int32_t srow[128];
	const int	s = blockIdx.x;
	const int	tr = max(1, min(128, WS_TILE_FLOATS / d));	/* rows a tile */
	const bool	staged = d <= WS_TILE_FLOATS;	/* else read from XR */
	int			lo = 0,
				hi = k - 1;
	int64_t		b,
				e;

	if (s >= segoff[k])
		return;
	while (lo < hi)
	{
		const int	mid = (lo + hi + 1) / 2;

		if (segoff[mid] <= s)
			lo = mid;
		else
			hi = mid - 1;
	}
	b = (int64_t) start[lo] + (int64_t) (s - segoff[lo]) * GC_KM_SEGMENT;
	e = start[lo + 1];
	if (e > b + GC_KM_SEGMENT)
		e = b + GC_KM_SEGMENT;
	for (int64_t t0 = b; t0 < e; t0 += tr)
	{
		const int	m = (int) min((int64_t) tr, e - t0);

		__syncthreads();		/* the last tile is added */
		for (int q = threadIdx.x; q < m; q += blockDim.x)
		{
			const int32_t row = order[t0 + q];

			srow[q] = row;
			sw[q] = w[row];
		}
		__syncthreads();
		/* eight loads in flight a thread: the tile's latency, not eight times it */
		for (int q0 = threadIdx.x; staged && q0 < m * d; q0 += 8 * blockDim.x)
		{
			float		v[8];

#pragma unroll
			for (int u = 0; u < 8; u++)
			{
				const int	q = q0 + u * blockDim.x;

				v[u] = q < m * d ? XR[(int64_t) srow[q / d] * d + q % d] : 0.0f;
			}
#pragma unroll
			for (int u = 0; u < 8; u++)
				if (q0 + u * (int) blockDim.x < m * d)
					xs[q0 + u * blockDim.x] = v[u];
		}
		__syncthreads();
		for (int j = threadIdx.x; j <= d; j += blockDim.x)
		{
			double	   *out = part + (int64_t) s * (d + 1) + j;
			double		acc = t0 == b ? 0.0 : *out;

			if (j < d)
				for (int q = 0; q < m; q++)
					acc += sw[q] * (double) (staged ? xs[q * d + j] :
											 XR[(int64_t) srow[q] * d + j]);
			else
				for (int q = 0; q < m; q++)
					acc += sw[q];
			*out = acc;
		}
	}
}

/*
 * Cnew[c][j]: the sum of cluster c's segment sums of feature j over that
 * of their weights, each added in order from 0.0 (the CPU's: a cluster of
 * one segment is its sums' quotient, as 0.0 + a = a), rounded to float;
 * Cold's where no row of c has a positive weight: where that sum of
 * weights is 0 (weights are >= 0, and a sum of them with one positive is
 * positive).  pcnt[c]: whether one has (the CPU's count of them, > 0).
 */
__global__ void
k_wmeans(const double *__restrict__ part, const int *__restrict__ segoff,
		 int k, int d, const float *__restrict__ Cold,
		 float *__restrict__ Cnew, unsigned long long *__restrict__ pcnt)
{
	const int64_t e = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;

	if (e < (int64_t) k * d)
	{
		const int	c = (int) (e / d),
					j = (int) (e % d);
		double		v = 0.0,
					tw = 0.0;

		for (int s = segoff[c]; s < segoff[c + 1]; s++)
		{
			tw += part[(int64_t) s * (d + 1) + d];
			v += part[(int64_t) s * (d + 1) + j];
		}
		Cnew[e] = tw > 0.0 ? (float) (v / tw) : Cold[e];
		if (j == 0)
			pcnt[c] = tw > 0.0;
	}
}

gc_code
km_wupdate(km_dev &D, const int32_t *labels, const float *Cold, float *Cnew,
		   gc_status *st)
{
	km_wupd    *W = D.wu;
	const int64_t n = D.n;
	const int	k = D.k,
				d = D.d;
	size_t		bytes = W->tmp_bytes;

	KM_CK(cub::DeviceRadixSort::SortPairs(W->tmp, bytes, (const uint32_t *) labels, W->keys_out,
										  W->iota, W->order, n, 0, W->end_bit, D.s));
	k_wsegments<<<blocks_for(k + 1, 256), 256, 0, D.s>>>(W->keys_out, n, k, W->start, W->nseg);
	KM_LAUNCHED();
	bytes = W->tmp_bytes;
	KM_CK(cub::DeviceScan::ExclusiveSum(W->tmp, bytes, W->nseg, W->segoff, k + 1, D.s));
	k_wsums<<<(unsigned) W->smax, WS_THREADS, 0, D.s>>>(D.XR, d, W->w, W->order, W->start,
														 W->segoff, k, W->part);
	KM_LAUNCHED();
	k_wmeans<<<blocks_for((int64_t) k * d, 256), 256, 0, D.s>>>(W->part, W->segoff, k, d,
																 Cold, Cnew, W->pcnt);
	KM_LAUNCHED();
	return GC_OK;
}

/* d2 of the rows of no positive weight: -1, no candidate (the CPU's). */
__global__ void
k_wmask(const double *__restrict__ w, int64_t n, float *d2)
{
	const int64_t i = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;

	if (i < n && !(w[i] > 0.0))
		d2[i] = -1.0f;
}

/*
 * The CPU's re-seeding: far row p (keys, farthest first, 0 where they ran
 * out) takes the p-th lowest cluster of no positive weight in lab_eff (a
 * copy of the labels); info->relocated: the rows moved.
 */
__global__ void
k_wreseed_apply(const unsigned long long *__restrict__ keys, int m,
				const unsigned long long *__restrict__ pcnt, int k,
				int32_t *lab_eff, km_info *info)
{
	int			p = 0;

	for (int c = 0; c < k && p < m && keys[p] != 0; c++)
		if (pcnt[c] == 0)
			lab_eff[key_row(keys[p++])] = c;
	info->relocated = p;
}

gc_code
km_wreseed(km_dev &D, const float *Cold, float *Cnew, int m, gc_status *st)
{
	km_wupd    *W = D.wu;
	const float *Ca = Cold;
	gc_code		rc;

	if ((rc = km_assign_centres(D, Cold, &Ca, st)) != GC_OK ||
		(rc = km_d2(D, Ca, st)) != GC_OK)
		return rc;
	k_wmask<<<blocks_for(D.n, 256), 256, 0, D.s>>>(W->w, D.n, D.d2);
	KM_LAUNCHED();
	if ((rc = km_far_keys(D, m, st)) != GC_OK)
		return rc;
	KM_CK(cudaMemcpyAsync(W->lab_eff, D.labels, sizeof(int32_t) * (size_t) D.n,
						  cudaMemcpyDeviceToDevice, D.s));
	/* the counts of the labels as they were, which name the empty clusters */
	k_wreseed_apply<<<1, 1, 0, D.s>>>(D.keys, m, W->pcnt, D.k, W->lab_eff, D.info);
	KM_LAUNCHED();
	if ((rc = km_wupdate(D, W->lab_eff, Cold, Cnew, st)) != GC_OK)
		return rc;
	return km_finalize(D, Cold, Cnew, st);
}
