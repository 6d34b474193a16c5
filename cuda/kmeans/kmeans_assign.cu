/*
 * kmeans_assign.cu — the assignment step of the GPU k-means: the nearest
 * centre of every row, fused with the argmin and the count of changed
 * labels (no n x k distance matrix), and the centres in the layout it
 * reads (km_prep).  Every path gives the CPU's labels (gc_km_assign) bit
 * for bit:
 *   - d <= 8 (k_assign_small): one thread holds 8 rows in registers and
 *     scans the centres from shared memory, computing the exact float32
 *     gc_dist2 (dimension order, separate multiply and add); at d <= 3
 *     with many rows, a grid over the data limits each row to a few
 *     candidate centres instead (kmeans_grid.cu);
 *   - d > 8 (k_assign_tiled): a register-blocked tile (128 rows x 128
 *     centres, 8 x 8 per thread, 8 dimensions per stage) accumulates x.c
 *     with FMA, on rows and centres shifted by the feature means, and
 *     ranks ||c||² - 2 x.c, keeping the best and second best score per
 *     row; a row whose two best scores are closer than a rounding bound
 *     (expansion + the CPU's own rounding) is queued and re-ranked with the
 *     exact gc_dist2 by k_assign_fallback (about 0.1-0.5% of rows, RB at a
 *     time per block);
 *   - 8 < d <= 256: the tensor-core screen (kmeans_screen.cu) in its place;
 *     the rows it queues (near ties) are re-ranked among their windows'
 *     candidates (k_assign_ties: the few centres the window pass lists),
 *     and only a row whose window overflows over every centre.
 * The feature means (D.mu) and the row norms (D.xn2) the tiled path reads
 * are computed once, by km_setup.
 */
#include <limits.h>
#include <math.h>

#include "kmeans_dev.cuh"
#include "screen.cuh"

#define SMALL_P 8				/* rows per thread (direct path) */
#define SMALL_KT 1024			/* centres per shared-memory tile */
#define TILE_K 8				/* dimensions per stage */

__device__ __forceinline__ void
count_changed(int ch, unsigned long long *changed)
{
	unsigned	w = __reduce_add_sync(0xffffffffu, (unsigned) ch);

	if ((threadIdx.x & 31) == 0 && w != 0)
		atomicAdd(changed, (unsigned long long) w);
}

/*
 * Exact path, d = D <= 8.  cpk: k centres of W4 float4 each (coordinates,
 * zero-padded).  Every thread keeps SMALL_P rows in registers.
 */
template <int D>
__global__ void __launch_bounds__(256)
k_assign_small(const float *__restrict__ XT, int64_t n,
			   const float4 *__restrict__ cpk, int k,
			   int32_t *__restrict__ labels, float *__restrict__ d2,
			   unsigned long long *changed)
{
	constexpr int W4 = (D + 3) / 4;
	__shared__ float4 sc[SMALL_KT * W4];
	const int64_t base = (int64_t) blockIdx.x * (256 * SMALL_P) + threadIdx.x;
	float		x[SMALL_P][D];
	float		best[SMALL_P];
	int			lab[SMALL_P];
	int			ch = 0;

#pragma unroll
	for (int p = 0; p < SMALL_P; p++)
	{
		int64_t		i = base + p * 256;

#pragma unroll
		for (int j = 0; j < D; j++)
			x[p][j] = i < n ? XT[(int64_t) j * n + i] : 0.0f;
		best[p] = INFINITY;
		lab[p] = 0;
	}
	for (int c0 = 0; c0 < k; c0 += SMALL_KT)
	{
		const int	kt = min(SMALL_KT, k - c0);

		__syncthreads();
		for (int e = threadIdx.x; e < kt * W4; e += 256)
			sc[e] = cpk[(int64_t) c0 * W4 + e];
		__syncthreads();
#pragma unroll 4
		for (int c = 0; c < kt; c++)
		{
			float		cc[W4 * 4];

#pragma unroll
			for (int w = 0; w < W4; w++)
			{
				float4		v = sc[c * W4 + w];

				cc[4 * w] = v.x;
				cc[4 * w + 1] = v.y;
				cc[4 * w + 2] = v.z;
				cc[4 * w + 3] = v.w;
			}
#pragma unroll
			for (int p = 0; p < SMALL_P; p++)
			{
				float		a = gc_l2_first(x[p][0], cc[0]);

#pragma unroll
				for (int j = 1; j < D; j++)
					a = gc_l2_step(a, x[p][j], cc[j]);
				if (a < best[p])
				{
					best[p] = a;
					lab[p] = c0 + c;
				}
			}
		}
	}
#pragma unroll
	for (int p = 0; p < SMALL_P; p++)
	{
		int64_t		i = base + p * 256;

		if (i < n)
		{
			ch += labels[i] != lab[p];
			labels[i] = lab[p];
			if (d2)
				d2[i] = best[p];
		}
	}
	count_changed(ch, changed);
}

/*
 * Register-blocked path: block = 128 rows x all centres, in tiles of 128
 * centres; thread (ty, tx) owns rows {4ty..4ty+3, 64+4ty..} and columns
 * {4tx..4tx+3, 64+4tx..} of each tile.  CT: d x kp centres transposed,
 * zero-padded; cnrm: ||c||², +inf on the padding.  Rows and centres are
 * both shifted by mu (the feature means), so that data far from the origin
 * keeps its precision in the expansion.
 */
template <int MINB>
__global__ void __launch_bounds__(256, MINB)
k_assign_tiled(const float *__restrict__ XT, int64_t n, int d,
			   const float *__restrict__ mu,
			   const float *__restrict__ CT, const float *__restrict__ cnrm,
			   const float *__restrict__ cmax2, const float *__restrict__ xn2,
			   int kp, int32_t *__restrict__ labels, km_info *info,
			   int32_t *__restrict__ fb_rows)
{
	__shared__ __align__(16) float As[TILE_K][TILE];
	__shared__ __align__(16) float Bs[TILE_K][TILE];
	const int	tid = threadIdx.x,
				tx = tid & 15,
				ty = tid >> 4;
	const int64_t m0 = (int64_t) blockIdx.x * TILE;
	float		best[8],
				sec[8];
	int			bidx[8];
	int			ch = 0;

#pragma unroll
	for (int i = 0; i < 8; i++)
	{
		best[i] = INFINITY;
		sec[i] = INFINITY;
		bidx[i] = 0;
	}
	for (int ct = 0; ct < kp; ct += TILE)
	{
		float		acc[8][8];

#pragma unroll
		for (int i = 0; i < 8; i++)
#pragma unroll
			for (int j = 0; j < 8; j++)
				acc[i][j] = 0.0f;
		for (int kk = 0; kk < d; kk += TILE_K)
		{
#pragma unroll
			for (int q = 0; q < (TILE_K * TILE) / 256; q++)
			{
				int			e = tid + 256 * q;
				int			kr = e / TILE,
							m = e % TILE;
				int			j = kk + kr;
				int64_t		i = m0 + m;

				As[kr][m] = (j < d && i < n) ? __fsub_rn(XT[(int64_t) j * n + i], mu[j]) : 0.0f;
				Bs[kr][m] = j < d ? CT[(int64_t) j * kp + ct + m] : 0.0f;
			}
			__syncthreads();
#pragma unroll
			for (int kr = 0; kr < TILE_K; kr++)
			{
				float4		a0 = *(const float4 *) &As[kr][ty * 4];
				float4		a1 = *(const float4 *) &As[kr][64 + ty * 4];
				float4		b0 = *(const float4 *) &Bs[kr][tx * 4];
				float4		b1 = *(const float4 *) &Bs[kr][64 + tx * 4];
				float		a[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
				float		b[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};

#pragma unroll
				for (int i = 0; i < 8; i++)
#pragma unroll
					for (int j = 0; j < 8; j++)
						acc[i][j] = __fmaf_rn(a[i], b[j], acc[i][j]);
			}
			__syncthreads();
		}
#pragma unroll
		for (int j = 0; j < 8; j++)
		{
			const int	col = ct + (j < 4 ? tx * 4 + j : 64 + tx * 4 + j - 4);
			const float cn = cnrm[col];

#pragma unroll
			for (int i = 0; i < 8; i++)
			{
				float		s = __fmaf_rn(-2.0f, acc[i][j], cn);

				/* branch-free: second best, index, best */
				sec[i] = fminf(sec[i], fmaxf(s, best[i]));
				bidx[i] = s < best[i] ? col : bidx[i];
				best[i] = fminf(best[i], s);
			}
		}
	}
	/* Columns were visited in increasing order per thread; combine the 16
	 * threads of a row group by (score, index). */
#pragma unroll
	for (int i = 0; i < 8; i++)
#pragma unroll
		for (int off = 8; off >= 1; off >>= 1)
		{
			float		os = __shfl_xor_sync(0xffffffffu, best[i], off);
			float		o2 = __shfl_xor_sync(0xffffffffu, sec[i], off);
			int			oi = __shfl_xor_sync(0xffffffffu, bidx[i], off);

			if (os < best[i] || (os == best[i] && oi < bidx[i]))
			{
				sec[i] = fminf(best[i], o2);
				best[i] = os;
				bidx[i] = oi;
			}
			else
				sec[i] = fminf(sec[i], os);
		}

	/*
	 * Rows whose two best scores are closer than the rounding bound of the
	 * expansion plus the CPU's direct formula (first-order bound
	 * (5d + 12) u A² with A = ||x'|| + max ||c'||, doubled) are re-ranked
	 * exactly by k_assign_fallback; the others have the CPU's label.
	 */
	{
		const float coef = (float) (12 * d + 48) * 0x1.0p-24f;
		const float rc = sqrtf(*cmax2);

#pragma unroll
		for (int i = 0; i < 8; i++)
			if (tx == i)
			{
				int64_t		gi = m0 + (i < 4 ? ty * 4 + i : 64 + ty * 4 + i - 4);

				if (gi < n)
				{
					float		A = sqrtf(xn2[gi]) + rc;
					float		T = coef * A * A * 1.01f;

					if (sec[i] - best[i] > T)
					{
						ch = labels[gi] != bidx[i];
						labels[gi] = bidx[i];
					}
					else
						fb_rows[atomicAdd(&info->n_fallback, 1u)] = (int32_t) gi;
				}
			}
	}
	count_changed(ch, &info->changed);
}

/*
 * Exact re-ranking of the rows the screen could not decide: a block takes
 * RB queued rows at a time (their coordinates in shared memory), each
 * thread a strided set of centres, in increasing order, with RB distance
 * chains per centre (each centre's coordinates are read once for the RB
 * rows); gc_dist2 on the unshifted centres CTo (d x kp), ties to the lowest
 * index; then the block's best per row by (distance, index).
 */
#define RR_THREADS 256

template <int RB>
__global__ void __launch_bounds__(RR_THREADS)
k_assign_fallback(const float *__restrict__ XT, int64_t n, int d,
				  const float *__restrict__ CTo, int kp, int k,
				  const int32_t *__restrict__ fb_rows, const unsigned *n_rows,
				  km_info *info, int32_t *__restrict__ labels, float *__restrict__ ub,
				  float *__restrict__ lb)
{
	extern __shared__ float4 rr_x4[];	/* RB rows of dp4 = d rounded up to 4 */
	float	   *rr_x = (float *) rr_x4;
	__shared__ float rbest[RB][RR_THREADS / 32];
	__shared__ int ridx[RB][RR_THREADS / 32];
	const int	lane = threadIdx.x & 31,
				warp = threadIdx.x >> 5;
	const int	dp4 = (d + 3) & ~3;
	const unsigned cnt = *n_rows;

	for (unsigned g0 = blockIdx.x * RB; g0 < cnt; g0 += gridDim.x * RB)
	{
		const int	m = cnt - g0 < RB ? (int) (cnt - g0) : RB;
		float		best[RB];
		int			bi[RB];

		__syncthreads();		/* rr_x, rbest of the last group read */
		for (int e = threadIdx.x; e < RB * dp4; e += RR_THREADS)
		{
			const int	r = e / dp4,
						j = e % dp4;

			rr_x[e] = r < m && j < d ? XT[(int64_t) j * n + fb_rows[g0 + r]] : 0.0f;
		}
		__syncthreads();
#pragma unroll
		for (int r = 0; r < RB; r++)
		{
			best[r] = INFINITY;
			bi[r] = 0;
		}
		for (int c = threadIdx.x; c < k; c += RR_THREADS)
		{
			float		a[RB];

			/* gc_dist2 from 0: 0 + (x - c)² is (x - c)² exactly */
#pragma unroll
			for (int r = 0; r < RB; r++)
				a[r] = 0.0f;
			for (int j0 = 0; j0 < d; j0 += 4)
			{
				float		cv[4];

#pragma unroll
				for (int u = 0; u < 4; u++)
					cv[u] = j0 + u < d ? CTo[(int64_t) (j0 + u) * kp + c] : 0.0f;
#pragma unroll
				for (int r = 0; r < RB; r++)
				{
					const float4 x4 = rr_x4[(r * dp4 + j0) / 4];
					const float xv[4] = {x4.x, x4.y, x4.z, x4.w};

#pragma unroll
					for (int u = 0; u < 4; u++)
						if (j0 + u < d)
							a[r] = gc_l2_step(a[r], xv[u], cv[u]);
				}
			}
#pragma unroll
			for (int r = 0; r < RB; r++)
				if (a[r] < best[r])
				{
					best[r] = a[r];
					bi[r] = c;
				}
		}
#pragma unroll
		for (int r = 0; r < RB; r++)
		{
#pragma unroll
			for (int off = 16; off >= 1; off >>= 1)
			{
				const float ob = __shfl_xor_sync(0xffffffffu, best[r], off);
				const int	oi = __shfl_xor_sync(0xffffffffu, bi[r], off);

				if (ob < best[r] || (ob == best[r] && oi < bi[r]))
				{
					best[r] = ob;
					bi[r] = oi;
				}
			}
			if (lane == 0)
			{
				rbest[r][warp] = best[r];
				ridx[r][warp] = bi[r];
			}
		}
		__syncthreads();
		if (threadIdx.x < m)
		{
			const int	r = threadIdx.x;
			const int64_t row = fb_rows[g0 + r];
			float		b = rbest[r][0];
			int			x = ridx[r][0];

			for (int w = 1; w < RR_THREADS / 32; w++)
				if (rbest[r][w] < b || (rbest[r][w] == b && ridx[r][w] < x))
				{
					b = rbest[r][w];
					x = ridx[r][w];
				}
			if (labels[row] != x)
				atomicAdd(&info->changed, 1ull);
			labels[row] = x;
			if (ub)
			{
				/* a near tie: screened again (kmeans_prune.cu) */
				ub[row] = INFINITY;
				lb[row] = 0.0f;
			}
		}
	}
	if (blockIdx.x == 0 && threadIdx.x == 0)
		info->fb_total += cnt;
}

/*
 * The near ties ranked among their windows' candidates (kmeans_dev.cuh's
 * km_ties, listed by the window pass): a warp per queue slot, the row in
 * shared memory, lane l computing candidate l's exact gc_dist2 from the
 * centres as prepared (C, k x d: the values of k_assign_fallback's CTo, in
 * its order), then the least by (distance, index), the CPU's label
 * (kmeans_screen.cu's header says why).  A slot past ties.cap, or whose
 * list was cut (more than KM_TIE_CAP candidates), goes to over_rows.
 */
#define TIES_THREADS 256

__global__ void __launch_bounds__(TIES_THREADS)
k_assign_ties(const float *__restrict__ XT, int64_t n, int d,
			  const float *__restrict__ C,
			  const int32_t *__restrict__ fb_rows, const unsigned *n_rows,
			  km_ties ties, int32_t *__restrict__ over_rows, unsigned *n_over,
			  km_info *info, int32_t *__restrict__ labels, float *__restrict__ ub,
			  float *__restrict__ lb)
{
	extern __shared__ float tie_x[];	/* d floats a warp */
	const int	lane = threadIdx.x & 31;
	float	   *x = tie_x + (threadIdx.x >> 5) * d;
	const unsigned cnt = *n_rows;
	unsigned	rows = 0,
				ch = 0;

	for (unsigned q = (blockIdx.x * blockDim.x + threadIdx.x) >> 5; q < cnt;
		 q += (gridDim.x * blockDim.x) >> 5)
	{
		const int32_t row = fb_rows[q];
		const unsigned m = q < (unsigned) ties.cap ? ties.ccnt[q] : 0;
		float		a = INFINITY;
		int			c = INT_MAX;

		if (m == 0 || m > KM_TIE_CAP)
		{
			if (lane == 0)
				over_rows[atomicAdd(n_over, 1u)] = row;
			continue;
		}
		__syncwarp();			/* the last row's reads are done */
		for (int j = lane; j < d; j += 32)
			x[j] = XT[(int64_t) j * n + row];
		__syncwarp();
		if (lane < m)
		{
			const float *cr;

			c = ties.cand[(int64_t) q * KM_TIE_CAP + lane];
			cr = C + (int64_t) c * d;
			a = 0.0f;			/* gc_dist2 from 0, as k_assign_fallback */
#pragma unroll 8
			for (int j = 0; j < d; j++)
				a = gc_l2_step(a, x[j], cr[j]);
		}
#pragma unroll
		for (int off = 16; off >= 1; off >>= 1)
		{
			const float ob = __shfl_xor_sync(0xffffffffu, a, off);
			const int	oc = __shfl_xor_sync(0xffffffffu, c, off);

			if (ob < a || (ob == a && oc < c))
			{
				a = ob;
				c = oc;
			}
		}
		if (lane == 0)
		{
			ch += labels[row] != c;
			labels[row] = c;
			if (ub)
			{
				/* a near tie: screened again (kmeans_prune.cu) */
				ub[row] = INFINITY;
				lb[row] = 0.0f;
			}
			rows++;
		}
	}
	if (lane == 0 && rows > 0)
	{
		atomicAdd(&info->changed, (unsigned long long) ch);
		atomicAdd(&info->tie_rows, rows);
	}
}

/* Centres for the exact path: W4 float4 per centre, zero-padded. */
__global__ void
k_prep_small(const float *__restrict__ C, int k, int d, int W,
			 float *__restrict__ cpk)
{
	int64_t		e = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;

	if (e < (int64_t) k * W)
	{
		int64_t		c = e / W;
		int			w = (int) (e % W);

		cpk[e] = w < d ? C[c * d + w] : 0.0f;
	}
}

/* Centres for the tiled path: CT (d x kp), shifted by mu, and their
 * squared norms; cmax2[0]: the largest of those. */
__global__ void
k_prep_tiled(const float *__restrict__ C, const float *__restrict__ mu,
			 int k, int d, int kp, float *__restrict__ CT,
			 float *__restrict__ CTo, float *__restrict__ cnrm,
			 float *cmax2)
{
	int			c = blockIdx.x * blockDim.x + threadIdx.x;

	if (c < kp)
	{
		float		s = 0.0f;

		for (int j = 0; j < d; j++)
		{
			float		o = c < k ? C[(int64_t) c * d + j] : 0.0f;
			float		v = c < k ? __fsub_rn(o, mu[j]) : 0.0f;

			CT[(int64_t) j * kp + c] = v;
			CTo[(int64_t) j * kp + c] = o;
			s = __fmaf_rn(v, v, s);
		}
		cnrm[c] = c < k ? s : INFINITY;
		if (c < k)
			atomicMax((unsigned *) cmax2, __float_as_uint(s));
	}
}

/* ---- host side ---- */

/* The centres C (device, k x d) in the layout the next km_assign reads. */
/* One thread a centre: km_unit_rows. */
__global__ void
k_unit_rows(const float *C, int k, int d, float *U,
			const unsigned long long *__restrict__ cnt, int cstride,
			const float *__restrict__ Cold)
{
	const int	c = blockIdx.x * blockDim.x + threadIdx.x;

	if (c >= k || (cnt != nullptr && cnt[(int64_t) c * cstride] == 0))
		return;
	if (gc_unit_row(C + (int64_t) c * d, d, U + (int64_t) c * d) == 0.0 && Cold != nullptr)
		for (int j = 0; j < d; j++)
			U[(int64_t) c * d + j] = Cold[(int64_t) c * d + j];
}

gc_code
km_unit_rows(km_dev &D, const float *C, float *U, const unsigned long long *cnt,
			 int cstride, const float *Cold, gc_status *st)
{
	k_unit_rows<<<blocks_for(D.k, 128), 128, 0, D.s>>>(C, D.k, D.d, U, cnt, cstride, Cold);
	KM_LAUNCHED();
	return GC_OK;
}

gc_code
km_assign_centres(km_dev &D, const float *C, const float **out, gc_status *st)
{
	*out = C;
	if (!D.unit)
		return GC_OK;
	*out = D.Cs;
	return km_unit_rows(D, C, D.Cs, nullptr, 0, nullptr, st);
}

gc_code
km_prep(km_dev &D, const float *C, gc_status *st)
{
	if (D.unit_centres)
	{
		gc_code		rc = km_unit_rows(D, C, D.Cu, nullptr, 0, nullptr, st);

		if (rc != GC_OK)
			return rc;
		C = D.Cu;
	}
	D.Cprep = C;
	if (D.small)
	{
		k_prep_small<<<blocks_for((int64_t) D.k * D.W, 256), 256, 0, D.s>>>(C, D.k, D.d, D.W, D.cpk);
		KM_LAUNCHED();
		if (D.grid)
			return km_grid_build(D, st);
	}
	else
	{
		KM_CK(cudaMemsetAsync(D.cmax2, 0, 2 * sizeof(float), D.s));
		k_prep_tiled<<<blocks_for(D.kp, 128), 128, 0, D.s>>>(C, D.mu, D.k, D.d, D.kp, D.CT,
															 D.CTo, D.cnrm, D.cmax2);
		KM_LAUNCHED();
		if (D.screen)
			return km_screen_prep(D, st);
	}
	KM_LAUNCHED();
	return GC_OK;
}

/* Assignment from the centres last prepared; counts changes in info.
 * During a fit's iterations (D.prune_on) the rows the bounds keep are
 * skipped (kmeans_prune.cu). */
gc_code
km_assign(km_dev &D, gc_status *st)
{
	unsigned long long *ch = &D.info->changed;
	const int32_t *rows_in = nullptr;
	const unsigned *n_in = nullptr;
	gc_code		rc;

	D.screened = D.n;
	if (D.prune_on)
	{
		unsigned	listed = (unsigned) D.n;

		/* the rows the bounds keep are done (none the first time); every
		 * row when they keep fewer than three in four */
		if (D.bounds_ok && (rc = km_prune(D, &listed, st)) != GC_OK)
			return rc;
		/* from here on the bounds are about these centres */
		KM_CK(cudaMemcpyAsync(D.Cbase, D.Cprep, sizeof(float) * (size_t) D.k * D.d,
							  cudaMemcpyDeviceToDevice, D.s));
		D.bounds_ok = true;
		if (listed == 0)
		{
			D.screened = 0;
			return GC_OK;
		}
		if ((int64_t) listed * 4 <= D.n)
		{
			rows_in = D.pr_rows;
			n_in = &D.info->n_listed;
			D.screened = listed;
		}
	}

	if (D.small && D.grid)
		return km_grid_assign(D, st);
	if (D.small)
	{
		const unsigned g = blocks_for(D.n, 256 * SMALL_P);
		const float4 *c = (const float4 *) D.cpk;

		switch (D.d)
		{
#define SMALL_CASE(DD) case DD: k_assign_small<DD><<<g, 256, 0, D.s>>>(D.XT, D.n, c, D.k, D.labels, nullptr, ch); break;
				SMALL_CASE(1) SMALL_CASE(2) SMALL_CASE(3) SMALL_CASE(4)
				SMALL_CASE(5) SMALL_CASE(6) SMALL_CASE(7) SMALL_CASE(8)
#undef SMALL_CASE
			default:
				return gc_fail(st, GC_EINTERNAL, "GPU k-means: no exact kernel for d = %d", D.d);
		}
		KM_LAUNCHED();
		return GC_OK;
	}

	KM_CK(cudaMemsetAsync(&D.info->n_fallback, 0, sizeof(unsigned), D.s));
	if (D.screen)
	{
		rc = km_screen(D, D.screen, rows_in, n_in, D.fb_rows, &D.info->n_fallback, nullptr, st);
		if (rc == GC_OK && D.screen_cascade && D.cascade_now)
		{
			KM_CK(cudaMemsetAsync(&D.info->n_over, 0, sizeof(unsigned), D.s));
			rc = km_screen(D, 3, D.fb_rows, &D.info->n_fallback, D.fb_rows2,
						   &D.info->n_over, nullptr, st);
		}
		if (rc != GC_OK)
			return rc;
	}
	else
	{
		auto		kern = D.tiled_minb == 1 ? k_assign_tiled<1> : k_assign_tiled<2>;

		kern<<<blocks_for(D.n, TILE), 256, 0, D.s>>>(D.XT, D.n, D.d, D.mu, D.CT, D.cnrm,
													 D.cmax2, D.xn2, D.kp, D.labels, D.info,
													 D.fb_rows);
		KM_LAUNCHED();
	}
	return km_rerank(D, st);
}

/*
 * The exact re-rank of the rows the last screen queued (d > 8): with the
 * windows (D.ties.cap), the window pass lists each one's candidates and
 * k_assign_ties ranks them, queueing the rows it cannot decide in
 * fb_rows2 (as the 3xtf32 re-screen does without them, when it ran:
 * km_assign); then k_assign_fallback ranks what is queued over every
 * centre.  The windows cover twice the rows the last screen queued
 * (km_screen_adapt): a row past them goes over every centre, still exact.
 */
gc_code
km_rerank(km_dev &D, gc_status *st)
{
	float	   *ub = D.ub_out(),
			   *lb = D.lb_out();
	const int32_t *rows = D.fb_rows;
	const unsigned *cnt = &D.info->n_fallback;

	if (D.screen && D.ties.cap > 0)
	{
		int64_t		want = 2 * D.ties_est > 8192 ? 2 * D.ties_est : 8192;
		const int	cover = (int) (want < D.ties.cap ? want : D.ties.cap);
		km_ties		t = D.ties;
		gc_code		rc;

		t.cap = cover;
		KM_CK(cudaMemsetAsync(D.ties.ccnt, 0, sizeof(unsigned) * cover, D.s));
		KM_CK(cudaMemsetAsync(&D.info->n_over, 0, sizeof(unsigned), D.s));
		if ((rc = km_screen_ties(D, cover, st)) != GC_OK)
			return rc;
		k_assign_ties<<<D.fb_grid, TIES_THREADS, sizeof(float) * (TIES_THREADS / 32) * D.d, D.s>>>(
			D.XT, D.n, D.d, D.Cprep, D.fb_rows, &D.info->n_fallback, t, D.fb_rows2,
			&D.info->n_over, D.info, D.labels, ub, lb);
		KM_LAUNCHED();
		rows = D.fb_rows2;
		cnt = &D.info->n_over;
	}
	else if (D.screen && D.screen_cascade && D.cascade_now)
	{
		rows = D.fb_rows2;
		cnt = &D.info->n_over;
	}

	/* RB rows per block (each centre's coordinates read once for them) while
	 * their coordinates take at most 32 KiB */
	const size_t row_bytes = sizeof(float) * ((D.d + 3) & ~3);

	if (32 * row_bytes <= 32768)
		k_assign_fallback<32><<<D.fb_grid, RR_THREADS, 32 * row_bytes, D.s>>>(
			D.XT, D.n, D.d, D.CTo, D.kp, D.k, rows, cnt, D.info, D.labels, ub, lb);
	else if (8 * row_bytes <= 32768)
		k_assign_fallback<8><<<D.fb_grid, RR_THREADS, 8 * row_bytes, D.s>>>(
			D.XT, D.n, D.d, D.CTo, D.kp, D.k, rows, cnt, D.info, D.labels, ub, lb);
	else if (2 * row_bytes <= 32768)
		k_assign_fallback<2><<<D.fb_grid, RR_THREADS, 2 * row_bytes, D.s>>>(
			D.XT, D.n, D.d, D.CTo, D.kp, D.k, rows, cnt, D.info, D.labels, ub, lb);
	else
	{
		if (row_bytes > 48 * 1024)
			KM_CK(gc_allow_dynamic_smem((const void *) k_assign_fallback<1>));
		k_assign_fallback<1><<<D.fb_grid, RR_THREADS, row_bytes, D.s>>>(
			D.XT, D.n, D.d, D.CTo, D.kp, D.k, rows, cnt, D.info, D.labels, ub, lb);
	}
	KM_LAUNCHED();
	return GC_OK;
}
