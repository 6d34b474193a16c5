/*
 * dbscan_brute.cu — the GPU DBSCAN's tiled brute force, for any d (and for
 * d <= 3 when the grid's cell numbers would overflow): O(n^2) pairs, O(n)
 * memory, never an n x n matrix.
 *
 * 128 query rows per block against shared-memory tiles of 32 candidates x
 * 4/8/16 dimensions; zero padding adds +0, so each sum is gc_dist2's
 * exactly.  Core counts stop at min_pts (per block); the core rows are then
 * compacted (index order = row order), unions run between core points only
 * (pairs i < j), and each other row scans the core rows for the least
 * (dist2 bits, core row): the nearest core point, ties to the lowest row.
 * The work is split into launches over query x candidate ranges of bounded
 * size, so the cancel flags are seen between them.
 */
#include "dbscan_gpu.cuh"

#define BF_Q 128				/* query rows per block */
#define BF_TJ 32				/* candidates per tile */
#define BF_WORK 2.0e11			/* pair-dimensions per launch */

enum
{
	BF_COUNT,
	BF_UNION,
	BF_BORDER
};

struct bf_args
{
	const float *Xq;			/* query rows (row-major, d) */
	const int  *qrows;			/* query i -> row of Xq, or NULL (identity) */
	const float *Xc;			/* candidate rows */
	int			d;
	int			dpad;			/* db_tile_dpad(d) */
	float		eps2;
	unsigned	minp;
	unsigned   *cnt;			/* BF_COUNT: per query */
	int		   *parent;			/* BF_UNION: over candidates = queries */
	unsigned long long *best;	/* BF_BORDER: per query */
};

template <int DC, int MODE>
__global__ void __launch_bounds__(BF_Q)
k_bf(bf_args A, int q0, int q1, int c0, int c1)
{
	__shared__ float4 sh[BF_TJ * DC / 4];
	const int	tid = threadIdx.x;
	const int	ib = q0 + blockIdx.x * BF_Q;
	const int	i = ib + tid;
	const bool	valid = i < q1;
	const int	row = valid ? (A.qrows ? A.qrows[i] : i) : 0;
	const int	d = A.d;
	const float eps2 = A.eps2;
	unsigned	cnt = 0;
	unsigned long long best = ~0ULL;
	int			rs = -1;
	int			jbeg = c0;

	if (MODE == BF_COUNT)
	{
		cnt = valid ? A.cnt[i] : A.minp;
		if (__syncthreads_and(cnt >= A.minp))
			return;
	}
	if (MODE == BF_BORDER && valid)
		best = A.best[i];
	if (MODE == BF_UNION && jbeg < ib + 1)
		jbeg = ib + 1;

	for (int j0 = jbeg; j0 < c1; j0 += BF_TJ)
	{
		float		acc[BF_TJ];

		db_tile_dist2<BF_TJ, DC, BF_Q>(acc, A.Xq + (int64_t) row * d, valid, A.Xc,
									   j0, c1, d, A.dpad, sh);
		if (MODE == BF_COUNT)
		{
#pragma unroll
			for (int jj = 0; jj < BF_TJ; jj++)
				cnt += (j0 + jj < c1) & (acc[jj] <= eps2);
			if (__syncthreads_and(!valid || cnt >= A.minp))
				break;
		}
		else if (MODE == BF_UNION)
		{
#pragma unroll
			for (int jj = 0; jj < BF_TJ; jj++)
			{
				int			j = j0 + jj;

				if (valid && j > i && j < c1 && acc[jj] <= eps2)
				{
					int			rt = uf_find(A.parent, j);

					if (rs < 0)
						rs = uf_find(A.parent, i);
					if (rt != rs)
					{
						uf_union(A.parent, rs, rt);
						rs = uf_find(A.parent, rs);
					}
				}
			}
		}
		else
		{
#pragma unroll
			for (int jj = 0; jj < BF_TJ; jj++)
			{
				int			j = j0 + jj;

				if (j < c1 && acc[jj] <= eps2)
				{
					unsigned long long key =
						((unsigned long long) __float_as_uint(acc[jj]) << 32) | (unsigned) j;

					best = key < best ? key : best;
				}
			}
		}
	}
	if (MODE == BF_COUNT && valid)
		A.cnt[i] = cnt;
	if (MODE == BF_BORDER && valid)
		A.best[i] = best;
}

__global__ void
k_core_flags(const unsigned *__restrict__ cnt, int n, unsigned minp,
			 uint8_t *core, int *flag)
{
	int			i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i < n)
	{
		int			c = cnt[i] >= minp;

		core[i] = (uint8_t) c;
		flag[i] = c;
	}
}

/* Core rows compacted (rows and coordinates), the others listed. */
__global__ void
k_compact(const float *__restrict__ X, const uint8_t *__restrict__ core,
		  const int *__restrict__ cidx, int n, int d, int *crow, float *Xc,
		  int *nrow)
{
	int			i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i >= n)
		return;
	int			ci = cidx[i];

	if (core[i])
	{
		crow[ci] = i;
		for (int k = 0; k < d; k++)
			Xc[(int64_t) ci * d + k] = X[(int64_t) i * d + k];
	}
	else
		nrow[i - ci] = i;
}

__global__ void
k_bf_resolve_core(int *parent, const int *__restrict__ crow, int nc, int *rp)
{
	int			ci = blockIdx.x * blockDim.x + threadIdx.x;

	if (ci < nc)
		rp[crow[ci]] = crow[uf_find(parent, ci)];
}

__global__ void
k_bf_resolve_border(int *parent, const int *__restrict__ crow,
					const int *__restrict__ nrow,
					const unsigned long long *__restrict__ best, int nb, int *rp)
{
	int			q = blockIdx.x * blockDim.x + threadIdx.x;

	if (q < nb)
		rp[nrow[q]] = best[q] == ~0ULL ? -1 :
			crow[uf_find(parent, (int) (best[q] & 0xffffffffu))];
}

/* One brute-force pass over queries [0, nq) x candidates [0, nc). */
template <int MODE>
static gc_code
bf_pass(db_dev &D, const gc_ctx *ctx, bf_args A, int nq, int nc, gc_status *st)
{
	const int	DC = db_tile_dc(A.d);
	int64_t		qc = nq < (1 << 20) ? nq : (1 << 20);
	double		cc_d;
	int64_t		cc;

	if (nq == 0 || nc == 0)
		return GC_OK;
	cc_d = BF_WORK / ((double) qc * (double) A.dpad);
	cc = cc_d > (double) nc ? nc : (int64_t) cc_d;
	if (cc < 4096)
		cc = 4096;
	cc = (cc + BF_TJ - 1) / BF_TJ * BF_TJ;
	for (int64_t q0 = 0; q0 < nq; q0 += qc)
	{
		int			q1 = (int) (nq - q0 < qc ? nq : q0 + qc);

		for (int64_t c0 = 0; c0 < nc; c0 += cc)
		{
			int			c1 = (int) (nc - c0 < cc ? nc : c0 + cc);
			void		(*kern) (bf_args, int, int, int, int) =
				DC == 4 ? k_bf<4, MODE> : DC == 8 ? k_bf<8, MODE> : k_bf<16, MODE>;

			if (MODE == BF_UNION && c1 <= q0 + 1)
				continue;		/* only pairs i < j */
			DB_CK(gc_launch(kern, q1 - q0, BF_Q, BF_Q, D.s, A, (int) q0, q1, (int) c0, c1));
			gc_code		rc = db_sync_poll(D, ctx, st);

			if (rc != GC_OK)
				return rc;
			db_trace(MODE == BF_COUNT ? "brute count launch" : MODE == BF_UNION ? "brute union launch" : "brute border launch", c1);
		}
	}
	return GC_OK;
}

gc_code
db_brute(db_dev &D, const gc_ctx *ctx, const float *X, int n, int d,
		 float eps2, unsigned minp, const db_out &out, gc_status *st)
{
	bf_args		A;
	unsigned   *cnt;
	uint8_t    *core;
	int		   *flag,
			   *cidx,
			   *crow,
			   *nrow,
			   *parent,
			   *rp;
	float	   *Xc;
	unsigned long long *best;
	double		t0 = gc_now_ms();
	gc_code		rc;
	int			nc,
				last[2];

	db_phases.grid = 0;
	db_phases.ncell = 0;
	memset(&A, 0, sizeof(A));
	A.d = d;
	A.dpad = db_tile_dpad(d);
	A.eps2 = eps2;
	A.minp = minp;

	DB_ALLOC(cnt, n);
	DB_ALLOC(core, n);
	DB_ALLOC(flag, n);
	DB_ALLOC(cidx, n);
	DB_CK(cudaMemsetAsync(cnt, 0, sizeof(unsigned) * (size_t) n, D.s));
	db_phases.ms_index = gc_now_ms() - t0;

	/* core counts */
	t0 = gc_now_ms();
	A.Xq = X;
	A.Xc = X;
	A.cnt = cnt;
	if ((rc = bf_pass<BF_COUNT>(D, ctx, A, n, n, st)) != GC_OK)
		return rc;
	DB_CK(gc_launch(k_core_flags, n, DB_THREADS, DB_THREADS, D.s, (const unsigned *) cnt,
					n, minp, core, flag));
	if ((rc = db_exclusive_sum(D, flag, cidx, n, st)) != GC_OK)
		return rc;
	DB_CK(cudaMemcpyAsync(&last[0], cidx + n - 1, sizeof(int), cudaMemcpyDeviceToHost, D.s));
	DB_CK(cudaMemcpyAsync(&last[1], flag + n - 1, sizeof(int), cudaMemcpyDeviceToHost, D.s));
	DB_CK(cudaStreamSynchronize(D.s));
	nc = last[0] + last[1];
	DB_ALLOC(crow, nc);
	DB_ALLOC(nrow, n - nc);
	DB_ALLOC(Xc, (int64_t) nc * d);
	DB_CK(gc_launch(k_compact, n, DB_THREADS, DB_THREADS, D.s, X, (const uint8_t *) core,
					(const int *) cidx, n, d, crow, Xc, nrow));
	db_phases.ms_core = gc_now_ms() - t0;

	/* unions between core points (compacted index order = row order) */
	t0 = gc_now_ms();
	parent = cidx;				/* free now */
	DB_CK(gc_launch(k_iota, nc, DB_THREADS, DB_THREADS, D.s, parent, nc));
	A.Xq = Xc;
	A.Xc = Xc;
	A.parent = parent;
	if ((rc = bf_pass<BF_UNION>(D, ctx, A, nc, nc, st)) != GC_OK)
		return rc;
	db_phases.ms_union = gc_now_ms() - t0;

	/* border: nearest core row, ties to the lowest (compacted = row order) */
	t0 = gc_now_ms();
	DB_ALLOC(best, n - nc);
	DB_ALLOC(rp, n);
	if (n - nc > 0)
		DB_CK(cudaMemsetAsync(best, 0xff, sizeof(unsigned long long) * (size_t) (n - nc), D.s));
	A.Xq = X;
	A.qrows = nrow;
	A.Xc = Xc;
	A.best = best;
	if ((rc = bf_pass<BF_BORDER>(D, ctx, A, n - nc, nc, st)) != GC_OK)
		return rc;
	DB_CK(gc_launch(k_bf_resolve_core, nc, DB_THREADS, DB_THREADS, D.s, parent,
					(const int *) crow, nc, rp));
	DB_CK(gc_launch(k_bf_resolve_border, n - nc, DB_THREADS, DB_THREADS, D.s, parent,
					(const int *) crow, (const int *) nrow,
					(const unsigned long long *) best, n - nc, rp));
	if ((rc = db_sync_poll(D, ctx, st)) != GC_OK)
		return rc;
	db_phases.ms_border = gc_now_ms() - t0;

	return db_finish(D, n, rp, nullptr, core, out, st);
}
