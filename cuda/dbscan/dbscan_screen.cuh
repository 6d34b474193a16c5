/*
 * dbscan_screen.cuh — the tensor-core screen of the kd-tree's count and
 * union passes (dbscan_tree.cu): a tile's decisions gc_dist2(x_i, x_j) <=
 * eps2 from 3xTF32 products (common/tf32.cuh), exact by a rounding bound,
 * with the CPU's own float distance for the pairs the bound cannot decide.
 * Internal to cuda/; after dbscan_gpu.cuh.
 *
 * Why: the exact distance costs three rounded float operations a pair and
 * dimension (no fused multiply-add: gc_dist2's rule); the screen takes one
 * product a pair and dimension on the tensor cores and about ten float
 * operations a pair, decided in registers.  On blobs from 16 dimensions
 * most points still lack min_pts after the count's nearest leaves and
 * every point of the border and noise sees almost its whole blob (the
 * boxes bound little there), so the passes are these decisions, tile
 * after tile, on full warps (docs/benchmarks.md: "The count and the union
 * on the tensor cores").  At 8-d the exact tiles were faster (10M rows:
 * 1.75 s against 2.24), hence TR_SCREEN_D_MIN.
 *
 * The score.  A block's rows are shifted by one origin o (the box centre
 * of its node): a = fl(x - o), b = fl(y - o), and
 *   s^ = fl(fl(||a||² + ||b||²) - 2 a~.b~),
 * a~.b~ the 3xtf32 product (|a~.b~ - a.b| <= kappa ||a|| ||b||,
 * gc_tf32_kappa), ||a||² and ||b||² fma chains (or partial chains summed
 * by shuffles) off by at most (d + 6) u of themselves (u = 2^-24).
 *
 * The bound, with M = ||a|| + ||b|| (so ||a|| ||b|| <= M²/4 and ||a||² +
 * ||b||² <= M²):
 *   |s^ - ||a - b||²| <= (kappa/2 + (d + 6) u + 2.01 u) M²
 *     (the product, the norms, the score's two roundings);
 *   | ||a - b||² - ||x - y||² | <= 2.01 u M²
 *     (||(a - b) - (x - y)|| <= u M: each shift rounds by u of its result);
 *   |D - ||x - y||²| <= (d + 2) u M²
 *     (D = gc_dist2(x, y), float in dimension order: (d + 2) u of itself).
 * So |D - s^| <= E = (kappa/2 + (2d + 12.02) u) M², which the kernel
 * takes with 5% to spare for the rounding of M, E and s^ - eps2 (each
 * within a few u M² or u of themselves), and through the two rows' shares
 * (tr_scr_share: E <= 2 coef (||a||² + ||b||²)).  A pair with s^ - eps2 >
 * E is surely not a neighbour, one with eps2 - s^ > E surely is, and any
 * other (or one whose bound or score is not finite, or whose rows lie
 * within 2^-40 of the origin: tr_scr_share) gets D itself.  The decisions
 * are therefore the CPU's, bit for bit; test_dbscan_gpu compares every
 * label and core flag with the CPU's, on integer lattices (distances
 * exactly eps) too, with the screen at every d (GPUCLUST_DB_SCREEN=all).
 *
 * The tile.  TR_Q query rows (the block's points, shifted and split once
 * a block) by TR_TJ candidate rows (shifted and split as they are loaded,
 * a quad of threads a row, with their norms), both in shared memory with
 * a row stride of dp + 4 words (dp = d rounded up to 8), so that a warp's
 * fragment loads hit 32 different banks.  A tile no warp needs is not
 * loaded.  Each warp takes its 32 rows against the 32 candidates
 * as 2 x 4 m16n8k8 mma a k-step, three each (3xtf32), and decides each
 * pair where its product lies, in the lane's registers; the rows' bits
 * (neighbour, undecided) are gathered by shuffles into the lane of each
 * row, which computes its undecided pairs exactly (a few in a million on
 * the benchmarks' blobs: bench_dbscan_gpu prints the share, from
 * db_phases.exact).  The pass's per-pair work is these decisions: the
 * products themselves are a small part of it.
 */
#ifndef GPUCLUST_DBSCAN_SCREEN_CUH
#define GPUCLUST_DBSCAN_SCREEN_CUH

#include <float.h>
#include <math.h>

#include "common/tf32.cuh"

#define TR_SCREEN_D_MIN 16		/* the screen from this d ... */
#define TR_SCREEN_D_MAX 64		/* ... to this one (shared memory) */

/* d rounded up to the mma's k-step, and the shared rows' stride */
__host__ __device__ __forceinline__ int
tr_scr_dp(int d)
{
	return (d + 7) / 8 * 8;
}

__host__ __device__ __forceinline__ int
tr_scr_ld(int d)
{
	return tr_scr_dp(d) + 4;
}

/*
 * The screen's shared memory, carved from the kernel's dynamic buffer:
 * both operands kept split (tf32_split: big and small parts), the query
 * rows once a block, the candidates once a tile.
 */
struct tr_scr
{
	float	   *o;				/* dp: the origin */
	uint32_t   *Ab,
			   *As;				/* NQ x ld: the block's rows, shifted, split */
	uint32_t   *Bb,
			   *Bs;				/* TJ x ld: the tile's rows, shifted, split */
	float2	   *bn;				/* TJ: their (||b||², share of E) */
	float	   *xq;				/* NQ x xld: the block's rows as they are, or
								 * NULL (d > TR_SCREEN_XQ_MAX) */
	unsigned long long *cnt;	/* 2: pairs decided, pairs left (the block's) */
	int			ld,
				xld;
};

/*
 * The block's rows as they are, kept in shared memory up to this d for
 * the box bounds a point takes against each candidate leaf (read from X
 * they cost a sector a lane); a row stride of d | 1 words, odd, so that a
 * warp's reads hit 32 banks.
 */
#define TR_SCREEN_XQ_MAX 32

__host__ __device__ __forceinline__ int
tr_scr_xld(int d)
{
	return d <= TR_SCREEN_XQ_MAX ? (d | 1) : 0;
}

template <int NQ, int TJ>
__host__ __device__ __forceinline__ size_t
tr_scr_bytes(int d)
{
	const size_t ld = (size_t) tr_scr_ld(d);

	return sizeof(unsigned long long) * 2 +
		sizeof(float) * ((size_t) tr_scr_dp(d) + 2 * (NQ + TJ) * ld + 2 * TJ +
						 (size_t) NQ * tr_scr_xld(d));
}

template <int NQ, int TJ>
__device__ __forceinline__ tr_scr
tr_scr_carve(void *base, int d)
{
	tr_scr		S;
	const size_t ld = (size_t) tr_scr_ld(d);

	S.ld = (int) ld;
	S.cnt = (unsigned long long *) base;
	S.o = (float *) (S.cnt + 2);
	S.Ab = (uint32_t *) (S.o + tr_scr_dp(d));	/* 16-byte aligned: dp, ld of 8k, 8k + 4 */
	S.As = S.Ab + NQ * ld;
	S.Bb = S.As + NQ * ld;
	S.Bs = S.Bb + TJ * ld;
	S.bn = (float2 *) (S.Bs + TJ * ld);
	S.xld = tr_scr_xld(d);
	S.xq = S.xld ? (float *) (S.bn + TJ) : nullptr;
	return S;
}

/*
 * A row's share of E: E <= coef M² <= 2 coef (||a||² + ||b||²) (as (p +
 * q)² <= 2 (p² + q²); the norms' own rounding is within the 5% of coef),
 * so each side brings 2 coef times its squared norm.  A side with a
 * squared norm under 2^-80 brings +inf, which leaves its pairs undecided:
 * then M may be under 2^-40, where the float operations' underflow (and
 * the tensor cores' flush of subnormal sums), up to 2^-126 an operation,
 * could exceed E.
 */
__device__ __forceinline__ float
tr_scr_share(float n2, float coef)
{
	return n2 >= 0x1p-80f ? 2.0f * coef * n2 : INFINITY;
}

/*
 * The block's setup: the origin (the box lo..hi's centre) and the rows of
 * X at positions pos(s) for slots s < tot, shifted and split (zeros
 * elsewhere); *an, *ea: this thread's row's ||a||² and share of E.  Every
 * thread of the block calls it (it synchronises).
 */
template <int NQ, class Pos>
__device__ __forceinline__ void
tr_scr_rows(const tr_scr &S, const float *__restrict__ X, int d,
			const float *__restrict__ lo, const float *__restrict__ hi,
			int tot, Pos pos, float coef, float *an, float *ea)
{
	const int	dp = tr_scr_dp(d),
				tid = threadIdx.x;

	if (tid < 2)
		S.cnt[tid] = 0;
	for (int k = tid; k < dp; k += NQ)
		S.o[k] = k < d ? 0.5f * (lo[k] + hi[k]) : 0.0f;
	__syncthreads();
	for (int e = tid; e < NQ * dp; e += NQ)
	{
		const int	s = e / dp,
					k = e % dp;
		const float v = s < tot && k < d ?
			__fsub_rn(X[(int64_t) pos(s) * d + k], S.o[k]) : 0.0f;

		tf32_split(v, S.Ab[s * S.ld + k], S.As[s * S.ld + k]);
	}
	float		n2 = 0.0f;

	if (tid < tot)
	{
		const float *x = X + (int64_t) pos(tid) * d;

		for (int k = 0; k < d; k++)
		{
			const float v = __fsub_rn(x[k], S.o[k]);

			n2 = fmaf(v, v, n2);
			if (S.xq)
				S.xq[tid * S.xld + k] = x[k];
		}
	}
	*an = n2;
	*ea = tr_scr_share(n2, coef);
	__syncthreads();
}

/*
 * This lane's row's neighbours among the TJ candidate rows from position
 * j0 (rows at or past c1 are none): bit jj set exactly when
 * gc_dist2(x, row j0 + jj) <= eps2, from the exact distance itself where
 * the screen could not decide.  wneed: this warp computes (warp-uniform);
 * mine: this lane needs its row's decisions (0 returned otherwise).  an,
 * ea: tr_scr_rows'; pos(s): slot s's position; coef: E's factor of M²
 * (tr_scr_coef).  Every thread of the block calls it (it synchronises); a
 * warp with wneed false only helps load, and a tile no warp needs is not
 * loaded.
 */
template <int NQ, int TJ, class Pos>
__device__ __forceinline__ unsigned
tr_scr_tile(const tr_scr &S, bool wneed, bool mine, const float *__restrict__ X, int d,
			int j0, int c1, float eps2, float coef, float an, float ea, Pos pos)
{
	static_assert(TJ == 32 && NQ == 4 * TJ, "a warp's tile is 32 x 32, a quad a candidate");
	const int	dp = tr_scr_dp(d),
				lane = threadIdx.x & 31,
				w = threadIdx.x >> 5;

	if (!__syncthreads_or(wneed))	/* (also: the last tile's B is read) */
		return 0;

	/* the candidates: a quad of threads a row, 4 dimensions a thread at a time */
	{
		const int	r = threadIdx.x >> 2,
					p = threadIdx.x & 3,
					j = j0 + r;
		const bool	ok = j < c1;
		const float *y = X + (int64_t) j * d;
		float		n2 = 0.0f;

		for (int k0 = 4 * p; k0 < dp; k0 += 16)
		{
			uint32_t	pb[4],
						ps[4];

#pragma unroll
			for (int c = 0; c < 4; c++)
			{
				const int	k = k0 + c;
				const float v = ok && k < d ? __fsub_rn(y[k], S.o[k]) : 0.0f;

				n2 = fmaf(v, v, n2);
				tf32_split(v, pb[c], ps[c]);
			}
			*(uint4 *) &S.Bb[r * S.ld + k0] = make_uint4(pb[0], pb[1], pb[2], pb[3]);
			*(uint4 *) &S.Bs[r * S.ld + k0] = make_uint4(ps[0], ps[1], ps[2], ps[3]);
		}
		n2 += __shfl_xor_sync(0xffffffffu, n2, 1);
		n2 += __shfl_xor_sync(0xffffffffu, n2, 2);
		if (p == 0)
			S.bn[r] = make_float2(n2, tr_scr_share(n2, coef));
	}
	__syncthreads();
	if (!wneed)
		return 0;

	/* the warp's 32 rows x 32 candidates: 2 x 4 m16n8k8 tiles */
	const int	g = lane >> 2,
				t = lane & 3;
	float		c[2][4][4];

#pragma unroll
	for (int mb = 0; mb < 2; mb++)
#pragma unroll
		for (int nb = 0; nb < 4; nb++)
#pragma unroll
			for (int e = 0; e < 4; e++)
				c[mb][nb][e] = 0.0f;
	for (int k8 = 0; k8 < dp; k8 += 8)
	{
		uint32_t	ab[2][4],
					as[2][4];

#pragma unroll
		for (int mb = 0; mb < 2; mb++)
		{
			const int	o = (w * 32 + mb * 16 + g) * S.ld + k8 + t;

			ab[mb][0] = S.Ab[o];
			ab[mb][1] = S.Ab[o + 8 * S.ld];
			ab[mb][2] = S.Ab[o + 4];
			ab[mb][3] = S.Ab[o + 8 * S.ld + 4];
			as[mb][0] = S.As[o];
			as[mb][1] = S.As[o + 8 * S.ld];
			as[mb][2] = S.As[o + 4];
			as[mb][3] = S.As[o + 8 * S.ld + 4];
		}
#pragma unroll
		for (int nb = 0; nb < 4; nb++)
		{
			const int	o = (nb * 8 + g) * S.ld + k8 + t;
			const uint32_t b0 = S.Bb[o],
						b1 = S.Bb[o + 4],
						s0 = S.Bs[o],
						s1 = S.Bs[o + 4];

#pragma unroll
			for (int mb = 0; mb < 2; mb++)
			{
				mma_tf32(c[mb][nb], as[mb], b0, b1);
				mma_tf32(c[mb][nb], ab[mb], s0, s1);
				mma_tf32(c[mb][nb], ab[mb], b0, b1);
			}
		}
	}

	/*
	 * The decisions where the products lie: this lane holds rows ri 8 + g
	 * (ri = 0..3: c[ri / 2][.][2 (ri % 2) + e]) against candidates nb 8 +
	 * 2t + e.  t = s^ - eps2 decides where |t| > E (and t is finite: s^
	 * may overflow where D does not).  Each row's bits (in: a neighbour;
	 * und: undecided) gather in its quad, then go to the row's own lane.
	 */
	unsigned	in[4],
				und[4];

#pragma unroll
	for (int ri = 0; ri < 4; ri++)
	{
		const int	r = ri * 8 + g;
		const float ar = __shfl_sync(0xffffffffu, an, r),
					er = __shfl_sync(0xffffffffu, ea, r);

		in[ri] = 0;
		und[ri] = 0;
#pragma unroll
		for (int nb = 0; nb < 4; nb++)
#pragma unroll
			for (int e = 0; e < 2; e++)
			{
				const int	col = nb * 8 + 2 * t + e;
				const float2 b = S.bn[col];
				const float tt = __fsub_rn(__fmaf_rn(-2.0f, c[ri >> 1][nb][2 * (ri & 1) + e],
													 __fadd_rn(ar, b.x)), eps2),
							ee = __fadd_rn(er, b.y),
							at = fabsf(tt);
				const bool	u = !(at > ee && at <= FLT_MAX);

				in[ri] |= (unsigned) (!u && tt < 0.0f) << col;
				und[ri] |= (unsigned) u << col;
			}
#pragma unroll
		for (int o = 1; o <= 2; o <<= 1)
		{
			in[ri] |= __shfl_xor_sync(0xffffffffu, in[ri], o);
			und[ri] |= __shfl_xor_sync(0xffffffffu, und[ri], o);
		}
	}
	unsigned	nbr = 0,
				amb = 0;

#pragma unroll
	for (int ri = 0; ri < 4; ri++)
	{
		const unsigned a = __shfl_sync(0xffffffffu, in[ri], (lane & 7) * 4),
					b = __shfl_sync(0xffffffffu, und[ri], (lane & 7) * 4);

		if ((lane >> 3) == ri)
		{
			nbr = a;
			amb = b;
		}
	}
	const int	nvalid = c1 - j0 < TJ ? c1 - j0 : TJ;
	const unsigned valid = nvalid < TJ ? (1u << nvalid) - 1 : ~0u;

	if (!mine)
	{
		nbr = 0;
		amb = 0;
	}
	nbr &= valid;
	amb &= valid;

	/* the counts, then the undecided pairs (rare: a lane computes its own) */
	{
		const int	nmine = __popc(__ballot_sync(0xffffffffu, mine)),
					nund = (int) __reduce_add_sync(0xffffffffu, (unsigned) __popc(amb));

		if (lane == 0)
		{
			atomicAdd(&S.cnt[0], (unsigned long long) (nmine * nvalid - nund));
			atomicAdd(&S.cnt[1], (unsigned long long) nund);
		}
	}
	for (unsigned m = amb; m; m &= m - 1)
	{
		const int	jj = __ffs(m) - 1;

		if (gc_dist2(X + (int64_t) pos(w * 32 + lane) * d, X + (int64_t) (j0 + jj) * d, d) <=
			eps2)
			nbr |= 1u << jj;
	}
	return nbr;
}

/* The block's counts into stats[0..1] (decided, left); after its last tile. */
__device__ __forceinline__ void
tr_scr_flush(const tr_scr &S, unsigned long long *stats)
{
	__syncthreads();
	if (threadIdx.x < 2 && S.cnt[threadIdx.x])
		atomicAdd(&stats[threadIdx.x], S.cnt[threadIdx.x]);
}

/* E's factor of M² (the header's bound, with its 5%). */
static inline float
tr_scr_coef(int d)
{
	return (float) ((gc_tf32_kappa(3, d) / 2 + (2.0 * d + 12.02) * 0x1.0p-24) * 1.05);
}

#endif							/* GPUCLUST_DBSCAN_SCREEN_CUH */
