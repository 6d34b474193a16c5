/*
 * kmeans_screen.cu — the tensor-core screen of the GPU k-means'
 * assignment (SMALL_D_MAX < d <= SCREEN_D_MAX): the nearest centre of every
 * row from x.c products on the tensor cores (TF32 mma.sync), fused with the
 * argmin (no n x k matrix is written), kept exact by a rounding bound and
 * the exact re-rank of kmeans_assign.cu (k_assign_fallback).
 *
 * The score.  Rows and centres are shifted by the feature means mu (as the
 * FP32 tiled kernel does): x' = fl(x - mu), c' = fl(c - mu).  A centre's
 * score is s_j = ||c'_j||² - 2 x'.c'_j, which orders centres as ||x' - c'_j||²
 * does.  The block keeps, per row, the best and the second best screened
 * score ŝ.
 *
 * The products: common/tf32.cuh's tf32 and 3xtf32 modes, whose error
 * |x~.c~ - x'.c'| <= kappa ||x'|| ||c'_j|| (gc_tf32_kappa) is bounded there.
 *
 * The bound (u = 2^-24, M = ||x'|| + max_j ||c'_j||).  For every centre j:
 *   ||c'_j||² (fma chain, k_prep_tiled) is off by at most d u ||c'_j||²,
 *   the score's fma by u |ŝ_j|, so |ŝ_j - s_j| <= (kappa/2 + (d + 1.01) u) M²
 *   (||x'|| ||c'_j|| <= M²/4, ||c'_j||² <= M², |ŝ_j| <= 1.01 M²).
 * The CPU's distance D_j = gc_dist2(x, c_j) (float, dimension order) is
 * within (d + 2) u ||x - c_j||² of the exact ||x - c_j||², and shifting
 * moves that by at most 2u M² : |D_j - (||x'||² + s_j)| <= (d + 4) u M².
 * So for every j other than the screened best b,
 *   D_j - D_b >= (ŝ_sec - ŝ_b) - T,  T = (kappa + (4d + 10.02) u) M²,
 * and when ŝ_sec - ŝ_b > T the CPU's label is b (strictly nearer: no tie).
 * A row under the bound goes to k_assign_fallback, which ranks every
 * centre with the CPU's exact float distance.  The kernel evaluates T with
 * 5% to spare for the float rounding of M and T themselves.  test_kmeans_gpu
 * measures |ŝ - s| against the bound on random and adversarial data
 * (gc_kmeans_gpu_screen_scores).
 *
 * The near ties.  A row under the bound is queued with its best screened
 * score and half its bound (km_ties.thr); the window pass (mode 2: the
 * screen's kernel, this file's or kmeans_wgmma.cu's, over the queued
 * rows, its centres split over blockIdx.y) lists every centre j whose own
 * screened score s~_j is at most thr + T2/2, T2 this pass' bound for the
 * row.  Every other centre is
 * strictly farther from the row than the first screen's best b in the
 * CPU's distance (D_j >= |x'|² + s~_j - e2 - c > |x'|² + s^_b + e1 + c >=
 * D_b, with e the screens' score errors and c the CPU's rounding, T/2 =
 * e + c), and b itself is listed, so the nearest of the listed centres
 * by (exact distance, index) is the CPU's label: kmeans_assign.cu's
 * k_assign_ties ranks them.  A row whose window holds more than
 * KM_TIE_CAP centres is re-ranked over every centre (k_assign_fallback).
 * Measured on an H100: FAISS's 1M uniform rows (d = 256, k = 20000) leave
 * 2.8-4.4% of the rows, and every one is decided in its window.
 * GPUCLUST_KM_SCREEN=tf32|3xtf32 screens in that mode, =fp32 takes the
 * FP32 tiled kernel of kmeans_assign.cu, =mma takes this file's kernel
 * where kmeans_wgmma.cu's would run, =wgmma that one at every d (tests and
 * benchmarks).  The windows are used where k d >= KM_TIES_MIN_KD (below
 * it a re-rank over every centre is the cheaper); GPUCLUST_KM_TIES=1 uses
 * them at every k d, =0 never.
 *
 * Without the windows, the cascade: the rows the tf32 screen leaves are
 * screened again in 3xtf32 (the same kernel over a list of rows), and only
 * the rows that one leaves go to the re-rank over every centre.  A row
 * costs about 2.7 rows of tf32 screen in 3xtf32 and 18 in the exact
 * re-rank, but the re-screen of a few rows takes as long as a block's
 * whole scan, so it runs only while the last iteration's tf32 screen left
 * more than 1% of the rows (and in the first); =tf32 and =3xtf32 screen
 * once.  Measured on an H100 through SQL (1M x 32, k = 100, its rows on a
 * 0.001 grid: many near ties; the same rows in other orders), without the
 * re-screen an iteration took 1.6 ms, with it 0.8-0.9; with the windows
 * instead, 2.5.
 *
 * On an H100/H200 (sm_90a builds) the tf32 screen of every row runs on
 * wgmma in FP16 instead (kmeans_wgmma.cu: the same rounding, a bound of
 * the same form, the same outputs), and so does the window pass; the
 * screen of the rows the bounds list stays here.
 *
 * The kernel.  A block takes SC_BM = 128 rows and keeps them, shifted, in
 * shared memory for the whole scan (dpad x 128 floats, dpad = d rounded up
 * to SC_BK); the centres stream through two cp.async stages of SC_BK x 128;
 * 8 warps as 2 (rows) x 4 (centres), a warp tile of 64 x 32 as 4 x 4
 * m16n8k8 mma, 64 accumulators per thread.  Both operands are kept in the
 * mma's fragment order (below), so every fragment is one 16-byte load
 * without bank conflicts.  After each tile of 128 centres the
 * scores go straight into each thread's running best / second best of its
 * 8 rows; at the end the 4 lanes and the 4 warps that share a row combine
 * by (score, index), and thread r of the block decides row r.
 *
 * Where every centre fits in shared memory beside the rows (d <= 64, small
 * k: km_dev.screen_res), k_assign_screen_res runs the tf32 screen instead:
 * the same scores, kept as integer keys, over tile after tile of rows.
 */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kmeans_dev.cuh"
#include "screen.cuh"

/* Asynchronous copies into shared memory (cp.async): 16 bytes, 4 bytes (any
 * alignment: rows of XT start anywhere), their groups' commit and wait. */
__device__ __forceinline__ void
cp_async16(float *smem, const float *gmem)
{
	unsigned	s = (unsigned) __cvta_generic_to_shared(smem);

	asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" :: "r"(s), "l"(gmem));
}

__device__ __forceinline__ void
cp_async4(void *smem, const void *gmem)
{
	unsigned	s = (unsigned) __cvta_generic_to_shared(smem);

	asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" :: "r"(s), "l"(gmem));
}

__device__ __forceinline__ void
cp_async_commit()
{
	asm volatile("cp.async.commit_group;");
}

template <int N>
__device__ __forceinline__ void
cp_async_wait()
{
	asm volatile("cp.async.wait_group %0;" :: "n"(N));
}

#define SC_BM 128				/* rows per block */
#define SC_BN 128				/* centres per tile */
#define SC_BK 32				/* dimensions per centre stage */
#define SC_THREADS 256
#define SC_RS (SC_BM + 8)		/* floats a dimension of a resident kernel's row stage */
#define SC_RC 64				/* centres per tile of the resident kernel */

/*
 * The fragment order.  A k-step of mma m16n8k8 gives lane (g, t) = (lane/4,
 * lane%4) the A values (row g, dim t), (g+8, t), (g, t+4), (g+8, t+4) and
 * the B values (dim t, centre g), (dim t+4, centre g).  Both operands are
 * stored in that order, so a lane reads its fragments with 16-byte loads
 * (a warp reads 512 contiguous bytes: no bank conflict):
 *   A (shared, per block): [dim/8][row/16][lane][4];
 *   B (global, km_screen_prep): [dim/8][centre/16][lane][4], the 4 being
 *     (b0, b1) of the even 8 centres, then of the odd 8; a stage of SC_BK
 *     dims x 128 centres is SC_BK/8 contiguous runs of 4 KiB.
 * In tf32 mode both hold the TF32-rounded values (rounded once: in the
 * block's fill, in km_screen_prep); in 3xtf32 mode the float values, split
 * into big and small parts as they are loaded.
 */
/* CTf/CTt (fragment order) from CT (dpad x kp, row-major); one thread per
 * element.  CTf NULL: no 3xtf32 screen; CTt NULL: the screen runs only on
 * wgmma (kmeans_wgmma.cu's own layout). */
__global__ void
k_screen_prep(const float *__restrict__ CT, int dpad, int kp,
			  float *__restrict__ CTf, float *__restrict__ CTt)
{
	const int64_t e = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;

	if (e < (int64_t) dpad * kp)
	{
		const int	j = (int) (e / kp),
					c = (int) (e % kp);
		const int	kin = j & 7,
					c8 = c >> 3;
		const int	lane = (c & 7) * 4 + (kin & 3);
		const int64_t idx = (((int64_t) (j >> 3) * (kp / 16) + (c8 >> 1)) * 32 + lane) * 4 +
			(c8 & 1) * 2 + (kin >> 2);
		const float v = CT[e];

		if (CTf)
			CTf[idx] = v;
		if (CTt)
			CTt[idx] = __uint_as_float(to_tf32(v));
	}
}

/*
 * One k-step of 8 dimensions of a warp's (16 MT) x 32 tile: MT x 4 mma (x3
 * in 3xtf32).  af: the warp's A fragments of the k-step (MT groups of 16
 * rows, 32 float4 apart); bf: its B fragments (2 groups of 16 centres, 32
 * float4 apart).
 */
template <int MODE, int MT = 4>
__device__ __forceinline__ void
sc_kstep(float (&acc)[MT][4][4], const float4 *af, const float4 *bf)
{
	uint32_t	a[MT][4];
	uint32_t	as[MT][4];
	float		bv[8];

#pragma unroll
	for (int mt = 0; mt < MT; mt++)
	{
		const float4 v = af[mt * 32];
		const float vv[4] = {v.x, v.y, v.z, v.w};

#pragma unroll
		for (int q = 0; q < 4; q++)
		{
			if (MODE == 1)
				a[mt][q] = __float_as_uint(vv[q]);
			else
				tf32_split(vv[q], a[mt][q], as[mt][q]);
		}
	}
	{
		const float4 v0 = bf[0],
					v1 = bf[32];

		bv[0] = v0.x;
		bv[1] = v0.y;
		bv[2] = v0.z;
		bv[3] = v0.w;
		bv[4] = v1.x;
		bv[5] = v1.y;
		bv[6] = v1.z;
		bv[7] = v1.w;
	}
#pragma unroll
	for (int nt = 0; nt < 4; nt++)
	{
		uint32_t	b0,
					b1;

		if (MODE == 1)
		{
			b0 = __float_as_uint(bv[2 * nt]);
			b1 = __float_as_uint(bv[2 * nt + 1]);
		}
		else
		{
			uint32_t	s0,
						s1;

			tf32_split(bv[2 * nt], b0, s0);
			tf32_split(bv[2 * nt + 1], b1, s1);

#pragma unroll
			for (int mt = 0; mt < MT; mt++)
			{
				mma_tf32(acc[mt][nt], as[mt], b0, b1);
				mma_tf32(acc[mt][nt], a[mt], s0, s1);
			}
		}
#pragma unroll
		for (int mt = 0; mt < MT; mt++)
			mma_tf32(acc[mt][nt], a[mt], b0, b1);
	}
}

/*
 * A tile's scores into the running best of the thread's 8 rows (MODE 1, 3)
 * or into the windows' lists (MODE 2, rows past thr): row (mt, h) is
 * mrow + mt*16 + 8h (its slot in MODE 2), centre (nt, e) is col0 + nt*8 +
 * e, its score from acc[mt][nt][2h + e] and cn[nt*8 + e] = ||c'||².
 */
template <int MODE>
__device__ __forceinline__ void
sc_scores(const float (&acc)[4][4][4], const float *cn, int col0, float (&best)[8],
		  float (&sec)[8], int (&bidx)[8], const float (&thr)[8], const km_ties &ties,
		  int64_t mrow)
{
#pragma unroll
	for (int nt = 0; nt < 4; nt++)
#pragma unroll
		for (int e = 0; e < 2; e++)
		{
			const int	col = col0 + nt * 8 + e;
			const float c2 = cn[nt * 8 + e];

#pragma unroll
			for (int mt = 0; mt < 4; mt++)
#pragma unroll
				for (int h = 0; h < 2; h++)
				{
					const float s = __fmaf_rn(-2.0f, acc[mt][nt][2 * h + e], c2);

					if (MODE != 2)
						keep_best(s, col, best[mt * 2 + h], sec[mt * 2 + h], bidx[mt * 2 + h]);
					else if (s <= thr[mt * 2 + h])	/* the padding's +inf never is */
						list_tie(ties, mrow + mt * 16 + 8 * h, col);
				}
		}
}

/* The decision bound T of a row, ||x'||² = x2 (the header's). */
__device__ __forceinline__ float
sc_row_bound(float x2, const float *cmax2, float coef)
{
	const float M = sqrtf(x2) + sqrtf(*cmax2);

	return coef * M * M;
}

/*
 * After the scan of every centre: the 4 lanes of a row group, then the 4
 * warps that share a row, merge by (score, index) through sh (12 x SC_BM
 * words); thread r < SC_BM decides the block's row r (m0 + r of nrows,
 * listed in rows_in or not): labelled where the bound allows, with its
 * bounds for the next iterations, else queued.  Every thread of the block
 * calls it; returns 1 where the thread changed a label.
 */
__device__ __forceinline__ int
sc_decide(float (&best)[8], float (&sec)[8], int (&bidx)[8], float *sh, int64_t m0,
		  int64_t nrows, const int32_t *__restrict__ rows_in, const float *__restrict__ xn2,
		  const float *__restrict__ cmax2, float coef, int32_t *__restrict__ labels,
		  float *__restrict__ ub, float *__restrict__ lb, int32_t *__restrict__ rows_out,
		  unsigned *n_out, const km_ties &ties, const km_cut &cut)
{
	const int	tid = threadIdx.x,
				lane = tid & 31,
				warp = tid >> 5;
	const int	wm = warp >> 2,
				wn = warp & 3;
	const int	g = lane >> 2,
				t = lane & 3;
	float	   *rb = sh;		/* 4 x SC_BM best, then sec; then indices */
	float	   *rs = sh + 4 * SC_BM;
	int		   *ri = (int *) (sh + 8 * SC_BM);
	int			ch = 0;

#pragma unroll
	for (int r = 0; r < 8; r++)
		merge_quad(best[r], sec[r], bidx[r]);
	if (t == 0)
#pragma unroll
		for (int r = 0; r < 8; r++)
		{
			const int	row = wm * 64 + (r >> 1) * 16 + g + 8 * (r & 1);

			rb[wn * SC_BM + row] = best[r];
			rs[wn * SC_BM + row] = sec[r];
			ri[wn * SC_BM + row] = bidx[r];
		}
	__syncthreads();
	if (tid < SC_BM && m0 + tid < nrows)
	{
		const int64_t gi = rows_in ? rows_in[m0 + tid] : m0 + tid;
		float		b = rb[tid],
					s2 = rs[tid];
		int			bi = ri[tid];

		for (int w = 1; w < 4; w++)
			merge_best(rb[w * SC_BM + tid], rs[w * SC_BM + tid], ri[w * SC_BM + tid], b, s2, bi);
		{
			const float x2 = xn2[gi];
			const float T = sc_row_bound(x2, cmax2, coef);

			if (screen_cut(cut, gi, x2, b, T))
				labels[gi] = -1;
			else if (s2 - b > T)
			{
				ch = labels[gi] != bi;
				labels[gi] = bi;
				if (ub)
					screen_bounds(x2, b, s2, T, ub + gi, lb + gi);
			}
			else
				queue_tie(gi, b, T, rows_out, n_out, ties);
		}
	}
	return ch;
}

/* The block's changed labels into info (every thread calls it). */
__device__ __forceinline__ void
sc_count_changed(int ch, km_info *info)
{
	const unsigned w = __reduce_add_sync(0xffffffffu, (unsigned) ch);

	if ((threadIdx.x & 31) == 0 && w != 0)
		atomicAdd(&info->changed, (unsigned long long) w);
}

/*
 * MODE 1: tf32, MODE 3: 3xtf32, MODE 2: the window pass (tf32 over the
 * queue rows_in, slots below ties.cap; block (x, y) scans part y of the
 * centres).  CTB: the centres in fragment order (CTt for tf32, CTf for
 * 3xtf32; dims d..dpad and centres k..kp zero); cnrm: ||c'||², +inf on the
 * padding.  coef: the bound's factor of M² (with its margin).  DBG
 * (tests): every score into dbg, n x kp.
 */
template <int MODE, int MINB, bool DBG>
__global__ void __launch_bounds__(SC_THREADS, MINB)
k_assign_screen(const float *__restrict__ XT, int64_t n, int d, int dpad,
				const float *__restrict__ mu, const float *__restrict__ CTB,
				const float *__restrict__ cnrm, const float *__restrict__ cmax2,
				const float *__restrict__ xn2, int kp, float coef,
				int32_t *__restrict__ labels, const int32_t *__restrict__ rows_in,
				const unsigned *n_in, int32_t *__restrict__ rows_out,
				unsigned *n_out, km_info *info, float *__restrict__ ub,
				float *__restrict__ lb, km_ties ties, km_cut cut, float *__restrict__ dbg)
{
	extern __shared__ float4 sc_smem[];
	float	   *As = (float *) sc_smem;	/* dpad x SC_BM, fragment order */
	float	   *Bs = As + (size_t) dpad * SC_BM;	/* 2 stages of SC_BK x SC_BN */
	float	   *Cn = Bs + 2 * SC_BK * SC_BN;	/* 2 x SC_BN: ||c'||² of a tile, by parity */
	const int	tid = threadIdx.x,
				lane = tid & 31,
				warp = tid >> 5;
	const int	wm = warp >> 2,	/* rows wm*64 .. +63 */
				wn = warp & 3;	/* centres wn*32 .. +31 of a tile */
	const int	g = lane >> 2,
				t = lane & 3;
	const int64_t m0 = (int64_t) blockIdx.x * SC_BM;
	const int	nkc = dpad / SC_BK;
	/* the tiles of centres the block scans: t0 .. t1 - 1 (all but in the
	 * window pass) */
	const int	tpp = (kp / SC_BN + gridDim.y - 1) / gridDim.y,
				t0 = blockIdx.y * tpp,
				t1 = min(kp / SC_BN, t0 + tpp);
	const int	nsteps = (t1 - t0) * nkc;
	const int	d8 = (d + 7) & ~7;
	float		best[8],
				sec[8];
	int			bidx[8];
	float		thr[8];			/* MODE 2: a row's window ends here */
	float		acc[4][4][4];
	int			ch = 0;
	/* the rows: m0 + m of all n, or the listed rows_in[m0 + m] */
	const int64_t nrows = !rows_in ? n : MODE == 2 ? min((int64_t) *n_in, (int64_t) ties.cap)
		: (int64_t) *n_in;

	if (m0 >= nrows || t0 >= t1)
		return;					/* a listed screen's grid is sized for every row */
	if (MODE == 3 && rows_in && blockIdx.x == 0 && tid == 0)
		atomicAdd(&info->fb_screen, (unsigned) nrows);	/* the cascade's re-screen */

	/* stage `st` <- the centres of step `step` (tile t0 + step / nkc,
	 * chunk step % nkc); Cn by the parity of step / nkc */
	auto load_b = [&](int step, int st) {
		const int	lt = step / nkc,
					tile = t0 + lt,
					kb0 = (step % nkc) * (SC_BK / 8);
		float	   *dst = Bs + (size_t) st * SC_BK * SC_BN;

#pragma unroll
		for (int q = 0; q < (SC_BK * SC_BN / 4) / SC_THREADS; q++)
		{
			const int	e = tid + q * SC_THREADS;	/* 16-byte chunk */
			const int	kb = e / (SC_BN / 16 * 32),	/* 256 chunks per 8 dims */
						w = e % (SC_BN / 16 * 32);

			cp_async16(dst + (size_t) e * 4,
					   CTB + (((int64_t) (kb0 + kb) * (kp / 16) + tile * (SC_BN / 16)) * 32) * 4 + w * 4);
		}
		if (kb0 == 0 && tid < SC_BN / 4)
			cp_async16(Cn + (lt & 1) * SC_BN + tid * 4, cnrm + (int64_t) tile * SC_BN + tid * 4);
		cp_async_commit();
	};

	load_b(0, 0);
	/*
	 * The block's rows, shifted (and rounded to TF32 in tf32 mode), resident:
	 * each thread fills whole 16-byte fragment slots (conflict-free stores),
	 * four slots' loads in flight before their stores.
	 */
	{
		const int	nslots = dpad * SC_BM / 4;

		for (int s0 = tid; s0 < nslots; s0 += 4 * SC_THREADS)
		{
			float		v[4][4];

#pragma unroll
			for (int u = 0; u < 4; u++)
			{
				const int	sl = s0 + u * SC_THREADS;	/* slot: [dim/8][row/16][lane] */
				const int	ln = sl & 31,
							mt16 = (sl >> 5) & (SC_BM / 16 - 1),
							kb = sl / (32 * (SC_BM / 16));
				const int	j0 = kb * 8 + (ln & 3),
							r0 = mt16 * 16 + (ln >> 2);

#pragma unroll
				for (int q = 0; q < 4; q++)
				{
					const int	j = j0 + 4 * (q >> 1);
					const int64_t m = m0 + r0 + 8 * (q & 1);

					if (sl < nslots && j < d && m < nrows)
					{
						const int64_t i = rows_in ? rows_in[m] : m;

						v[u][q] = XT[(int64_t) j * n + i];
					}
					else
						v[u][q] = 0.0f;
				}
			}
#pragma unroll
			for (int u = 0; u < 4; u++)
			{
				const int	sl = s0 + u * SC_THREADS;
				const int	kb = sl / (32 * (SC_BM / 16)),
							j0 = kb * 8 + (sl & 3);
				float		w[4];

				if (sl >= nslots)
					break;
#pragma unroll
				for (int q = 0; q < 4; q++)
				{
					const int	j = j0 + 4 * (q >> 1);

					w[q] = j < d ? __fsub_rn(v[u][q], mu[j]) : 0.0f;
					if (MODE == 1)
						w[q] = __uint_as_float(to_tf32(w[q]));
				}
				((float4 *) As)[sl] = make_float4(w[0], w[1], w[2], w[3]);
			}
		}
	}
#pragma unroll
	for (int r = 0; r < 8; r++)
	{
		best[r] = INFINITY;
		sec[r] = INFINITY;
		bidx[r] = 0;
		thr[r] = -INFINITY;
		if (MODE == 2)
		{
			const int64_t m = m0 + wm * 64 + (r >> 1) * 16 + g + 8 * (r & 1);

			if (m < nrows)
				thr[r] = __fadd_ru(ties.thr[m], 0.5f * sc_row_bound(xn2[rows_in[m]], cmax2, coef));
		}
	}

	for (int step = 0; step < nsteps; step++)
	{
		const int	kc = step % nkc,
					k0 = kc * SC_BK;
		const float *Bst = Bs + (size_t) (step & 1) * SC_BK * SC_BN;
		const int	ksteps = min(SC_BK, d8 - k0) / 8;

		if (step + 1 < nsteps)
		{
			load_b(step + 1, (step + 1) & 1);
			cp_async_wait<1>();
		}
		else
			cp_async_wait<0>();
		__syncthreads();
		if (kc == 0)
		{
#pragma unroll
			for (int mt = 0; mt < 4; mt++)
#pragma unroll
				for (int nt = 0; nt < 4; nt++)
#pragma unroll
					for (int q = 0; q < 4; q++)
						acc[mt][nt][q] = 0.0f;
		}
		{
			const float4 *af0 = (const float4 *) As + ((k0 / 8) * (SC_BM / 16) + wm * 4) * 32 + lane;
			const float4 *bf0 = (const float4 *) Bst + (wn * 2) * 32 + lane;
			if (ksteps == SC_BK / 8)
			{
#pragma unroll
				for (int ks = 0; ks < SC_BK / 8; ks++)
					sc_kstep<MODE>(acc, af0 + ks * (SC_BM / 16 * 32), bf0 + ks * (SC_BN / 16 * 32));
			}
			else
			{
#pragma unroll 1
				for (int ks = 0; ks < ksteps; ks++)
					sc_kstep<MODE>(acc, af0 + ks * (SC_BM / 16 * 32), bf0 + ks * (SC_BN / 16 * 32));
			}
		}
		if (kc == nkc - 1)
		{
			/* this tile's scores into the running best of the thread's rows:
			 * row (mt, h) = wm*64 + mt*16 + g + 8h, centre (nt, e) = ct +
			 * wn*32 + nt*8 + 2t + e; acc[mt][nt][2h + e] */
			const int	ct = (t0 + step / nkc) * SC_BN + wn * 32 + 2 * t;

			sc_scores<MODE>(acc, Cn + ((step / nkc) & 1) * SC_BN + wn * 32 + 2 * t, ct,
							best, sec, bidx, thr, ties, m0 + wm * 64 + g);
			if (DBG)
			{
#pragma unroll
				for (int nt = 0; nt < 4; nt++)
#pragma unroll
					for (int e = 0; e < 2; e++)
#pragma unroll
						for (int mt = 0; mt < 4; mt++)
#pragma unroll
							for (int h = 0; h < 2; h++)
							{
								const int64_t gi = m0 + wm * 64 + mt * 16 + g + 8 * h;
								const int	col = ct + nt * 8 + e;

								if (gi < n)
									dbg[gi * kp + col] = __fmaf_rn(-2.0f, acc[mt][nt][2 * h + e], cnrm[col]);
							}
			}
		}
		__syncthreads();		/* the stage read here is refilled next step */
	}
	if (MODE == 2)				/* the window pass: its lists are its output */
		return;
	ch = sc_decide(best, sec, bidx, Bs, m0, nrows, rows_in, xn2, cmax2, coef, labels, ub, lb,
				   rows_out, n_out, ties, cut);
	sc_count_changed(ch, info);
}

/*
 * The resident kernel's keys.  A row's score s^ (the streamed kernel's,
 * bit for bit) is moved into [C, 2C) by adding 1.5 C, C a power of two
 * above 8 M² (M = ||x'|| + max ||c'||, so |s^| <= 1.01 M² < C / 8): the
 * sum's sign and exponent are C's, and its 23 fraction bits, shifted up
 * by SC_KEY_BITS with the centre's number below them, order (score,
 * number) as unsigned integers.  The addition rounds to C's float step
 * u_C = C 2^-23 (at most u_C / 2 off), so a row's keys decide it with the
 * bound T + u_C.  Rows whose C would pass 2^100 are never decided here.
 */
#define SC_KEY_BITS 9			/* centre numbers below 2^9: kp <= 512 */

struct sc_key_base
{
	float		base;			/* 1.5 C */
	float		ulp;			/* u_C; +inf: the row is not decided by keys */
	uint32_t	hi;				/* C's sign and exponent bits */
};

__device__ __forceinline__ sc_key_base
sc_key_base_of(float x2, const float *cmax2)
{
	const float M = sqrtf(x2) + sqrtf(*cmax2);
	const float y = 8.0f * M * M;
	const int	e = max((int) ((__float_as_uint(y) >> 23) & 0xff) + 1, 1);
	sc_key_base b;

	if (!(y < 0x1.0p100f))
	{
		b.base = 0x1.0p100f;
		b.ulp = INFINITY;
		b.hi = __float_as_uint(0x1.0p100f);
		return b;
	}
	b.hi = (uint32_t) e << 23;
	b.base = __uint_as_float(b.hi | 0x400000u);
	b.ulp = __uint_as_float(b.hi) * 0x1.0p-23f;
	return b;
}

/* The key of score s (float) of centre col for a row of base `base`. */
__device__ __forceinline__ uint32_t
sc_key(float s, float base, int col)
{
	return __float_as_uint(__fadd_rn(s, base)) * (1u << SC_KEY_BITS) + (uint32_t) col;
}

/* A key's score (exact: the moved score minus 1.5 C) and centre. */
__device__ __forceinline__ float
sc_key_score(uint32_t key, const sc_key_base &b)
{
	return __fsub_rn(__uint_as_float((key >> SC_KEY_BITS) | b.hi), b.base);
}

/* (best, second best) of two keys' running pairs */
__device__ __forceinline__ void
sc_key_merge(uint32_t ob, uint32_t os, uint32_t &best, uint32_t &sec)
{
	sec = min(max(ob, best), min(sec, os));
	best = min(best, ob);
}

/*
 * The tf32 screen with the centres resident (km_dev.screen_res): where
 * every centre fits in shared memory beside the rows (small k d), a block
 * copies them there once and then takes tile after tile of SC_BM rows
 * (blockIdx.x, + gridDim.x, ...; a grid of a few blocks an SM).  A tile's
 * rows, norms and labels come in by cp.async (the rows as they are in XT,
 * SC_RS floats a dimension) while the tile before is scanned; its rows
 * are shifted and rounded into the fragment order of As and scanned with
 * the streamed kernel's products and scores, on warp tiles of 32 rows x
 * 32 centres (4 x 2 warps over 128 rows x 64 centres: under 85 registers,
 * three blocks an SM where the streamed kernel's 64 x 32 tiles take two).
 * Each score goes into the running best and second best of its row as a
 * key (sc_key_base_of): an addition and an integer multiply-add, then two
 * integer minima and a maximum, where the streamed kernel spends five
 * comparisons and selections (the integer pipe bounds both).  Rows and
 * centres as in k_assign_screen's MODE 1 (rows_in: the listed rows, *n_in
 * of them); kp <= 2^SC_KEY_BITS, dpad = 8 KS (the k-steps unrolled).
 */
template <int KS>
__global__ void __launch_bounds__(SC_THREADS, 3)
k_assign_screen_res(const float *__restrict__ XT, int64_t n, int d, int dpad,
					const float *__restrict__ mu, const float *__restrict__ CTB,
					const float *__restrict__ cnrm, const float *__restrict__ cmax2,
					const float *__restrict__ xn2, int kp, float coef,
					int32_t *__restrict__ labels, const int32_t *__restrict__ rows_in,
					const unsigned *n_in, int32_t *__restrict__ rows_out,
					unsigned *n_out, km_info *info, float *__restrict__ ub,
					float *__restrict__ lb, km_ties ties, km_cut cut)
{
	extern __shared__ float4 sc_smem[];
	float	   *Bs = (float *) sc_smem;	/* dpad x kp: every centre, fragment order */
	float	   *Cn = Bs + (size_t) dpad * kp;	/* kp: ||c'||², the padding's FLT_MAX */
	float	   *Mu = Cn + kp;	/* dpad: the shift (0 past d) */
	float	   *As = Mu + dpad;	/* dpad x SC_BM: a tile's rows, fragment order */
	float	   *Rw = As + (size_t) dpad * SC_BM;	/* dpad x SC_RS: the next tile's rows as in XT (0 past d) */
	float	   *Xn = Rw + (size_t) dpad * SC_RS;	/* 2 x SC_BM: ||x'||², by tile parity */
	int32_t    *Lb = (int32_t *) (Xn + 2 * SC_BM);	/* 2 x SC_BM: the labels, by parity */
	float	   *Kb = (float *) (Lb + 2 * SC_BM);	/* SC_BM: the rows' key bases */
	uint32_t   *Sh = (uint32_t *) (Kb + SC_BM);	/* 4 x SC_BM: the warps' keys */
	const int	tid = threadIdx.x,
				lane = tid & 31,
				warp = tid >> 5;
	const int	wm = warp >> 1,	/* rows wm*32 .. +31 */
				wn = warp & 1;	/* centres wn*32 .. +31 of a tile of SC_RC */
	const int	g = lane >> 2,
				t = lane & 3;
	const int64_t nrows = rows_in ? (int64_t) *n_in : n;
	const int64_t ntiles = (nrows + SC_BM - 1) / SC_BM;
	const int	nks = ((d + 7) & ~7) / 8;	/* k-steps: the streamed kernel's */
	const int	r = tid & (SC_BM - 1);	/* the row this thread copies */
	int			ch = 0;

	if ((int64_t) blockIdx.x >= ntiles)
		return;

	/* row r of tile tl in XT (-1: past the rows) */
	auto row_of = [&](int64_t tl) -> int64_t {
		const int64_t m = tl * SC_BM + r;

		return m < nrows ? (rows_in ? (int64_t) rows_in[m] : m) : -1;
	};
	/* row i's dimensions (and, thread r < SC_BM, its norm and label) into
	 * Rw and the buffers of parity par */
	auto load_rows = [&](int64_t i, int par) {
		const int	j0 = tid / SC_BM;
		const float *src = XT + (int64_t) j0 * n + i;
		float	   *dst = Rw + (size_t) j0 * SC_RS + r;

		if (i < 0)
			return;
		for (int j = j0; j < d; j += SC_THREADS / SC_BM)
		{
			cp_async4(dst, src);
			src += (SC_THREADS / SC_BM) * n;
			dst += (SC_THREADS / SC_BM) * SC_RS;
		}
		if (tid < SC_BM)
		{
			cp_async4(Xn + par * SC_BM + r, xn2 + i);
			cp_async4(Lb + par * SC_BM + r, labels + i);
		}
	};

	for (int e = tid; e < dpad * kp / 4; e += SC_THREADS)
		cp_async16(Bs + (size_t) e * 4, CTB + (size_t) e * 4);
	for (int e = tid; e < kp; e += SC_THREADS)
		Cn[e] = fminf(cnrm[e], FLT_MAX);
	for (int j = tid; j < dpad; j += SC_THREADS)
		Mu[j] = j < d ? mu[j] : 0.0f;
	for (int e = d * SC_RS + tid; e < dpad * SC_RS; e += SC_THREADS)
		Rw[e] = 0.0f;			/* the dimensions past d: never copied */

	int64_t		tile = blockIdx.x;
	int64_t		i_cur = row_of(tile),
				i_next = row_of(tile + gridDim.x);

	load_rows(i_cur, 0);
	cp_async_commit();
	for (int par = 0; tile < ntiles; tile += gridDim.x, par ^= 1)
	{
		const int64_t m0 = tile * SC_BM;
		uint32_t	best[4],
					sec[4];
		sc_key_base kbase;		/* thread r < SC_BM: row r's, for its decision */

		cp_async_wait<0>();
		__syncthreads();
		if (tid < SC_BM)
		{
			kbase = sc_key_base_of(m0 + tid < nrows ? Xn[par * SC_BM + tid] : 0.0f, cmax2);
			Kb[tid] = kbase.base;
		}
		/*
		 * This tile, shifted and rounded as k_assign_screen fills it (0 past
		 * d, where Rw and Mu are 0).  A row past the last is whatever Rw
		 * holds: its scores are never read, and a row's products involve
		 * only that row.
		 */
		for (int sl = tid; sl < dpad * SC_BM / 4; sl += SC_THREADS)
		{
			const int	ln = sl & 31,
						j0 = (sl / (32 * (SC_BM / 16))) * 8 + (ln & 3);	/* slot: [dim/8][row/16][lane] */
			const float *v = Rw + (size_t) j0 * SC_RS + ((sl >> 5) & (SC_BM / 16 - 1)) * 16 + (ln >> 2);
			const float u0 = Mu[j0],
						u1 = Mu[j0 + 4];

			((float4 *) As)[sl] = make_float4(__uint_as_float(to_tf32(__fsub_rn(v[0], u0))),
											  __uint_as_float(to_tf32(__fsub_rn(v[8], u0))),
											  __uint_as_float(to_tf32(__fsub_rn(v[4 * SC_RS], u1))),
											  __uint_as_float(to_tf32(__fsub_rn(v[4 * SC_RS + 8], u1))));
		}
		__syncthreads();
		/* the next tile in flight while this one is scanned */
		load_rows(i_next, par ^ 1);
		cp_async_commit();
#pragma unroll
		for (int q = 0; q < 4; q++)
		{
			best[q] = 0xffffffffu;
			sec[q] = 0xffffffffu;
		}
		for (int ct = 0; ct < kp / SC_RC; ct++)
		{
			float		acc[2][4][4];
			const float4 *af0 = (const float4 *) As + (wm * 2) * 32 + lane;
			const float4 *bf0 = (const float4 *) Bs + (ct * (SC_RC / 16) + wn * 2) * 32 + lane;
			const int	col0 = ct * SC_RC + wn * 32 + 2 * t;

#pragma unroll
			for (int mt = 0; mt < 2; mt++)
#pragma unroll
				for (int nt = 0; nt < 4; nt++)
#pragma unroll
					for (int q = 0; q < 4; q++)
						acc[mt][nt][q] = 0.0f;
#pragma unroll
			for (int ks = 0; ks < KS; ks++)
				if (ks < nks)
					sc_kstep<1, 2>(acc, af0 + ks * (SC_BM / 16 * 32), bf0 + (size_t) ks * (kp / 16 * 32));
			/* as sc_scores, into keys: row (mt, h) = wm*32 + mt*16 + g + 8h,
			 * centre (nt, e) = col0 + nt*8 + e */
			float		base[4];

#pragma unroll
			for (int q = 0; q < 4; q++)
				base[q] = Kb[wm * 32 + (q >> 1) * 16 + g + 8 * (q & 1)];
#pragma unroll
			for (int nt = 0; nt < 4; nt++)
#pragma unroll
				for (int e = 0; e < 2; e++)
				{
					const float c2 = Cn[col0 + nt * 8 + e];

#pragma unroll
					for (int mt = 0; mt < 2; mt++)
#pragma unroll
						for (int h = 0; h < 2; h++)
						{
							const int	q = mt * 2 + h;
							const uint32_t key = sc_key(__fmaf_rn(-2.0f, acc[mt][nt][2 * h + e], c2),
														base[q], col0 + nt * 8 + e);

							sec[q] = min(sec[q], max(key, best[q]));
							best[q] = min(best[q], key);
						}
				}
		}
		/* the 4 lanes of a row group, then the 2 warps of a row */
#pragma unroll
		for (int q = 0; q < 4; q++)
#pragma unroll
			for (int off = 1; off <= 2; off <<= 1)
				sc_key_merge(__shfl_xor_sync(0xffffffffu, best[q], off),
							 __shfl_xor_sync(0xffffffffu, sec[q], off), best[q], sec[q]);
		if (t == 0)
#pragma unroll
			for (int q = 0; q < 4; q++)
			{
				const int	rr = wm * 32 + (q >> 1) * 16 + g + 8 * (q & 1);

				Sh[wn * SC_BM + rr] = best[q];
				Sh[(2 + wn) * SC_BM + rr] = sec[q];
			}
		__syncthreads();
		if (tid < SC_BM && m0 + tid < nrows)
		{
			uint32_t	kb = Sh[tid],
						ks = Sh[2 * SC_BM + tid];

			sc_key_merge(Sh[SC_BM + tid], Sh[3 * SC_BM + tid], kb, ks);
			{
				const float x2 = Xn[par * SC_BM + tid];
				const float T = __fadd_ru(sc_row_bound(x2, cmax2, coef), kbase.ulp);
				const float b = sc_key_score(kb, kbase),
							s2 = sc_key_score(ks, kbase);
				const int	bi = (int) (kb & ((1u << SC_KEY_BITS) - 1));

				if (screen_cut(cut, i_cur, x2, b, T))
					labels[i_cur] = -1;
				else if (s2 - b > T)
				{
					ch += Lb[par * SC_BM + tid] != bi;
					labels[i_cur] = bi;
					if (ub)
						screen_bounds(x2, b, s2, T, ub + i_cur, lb + i_cur);
				}
				else
					queue_tie(i_cur, b, T, rows_out, n_out, ties);
			}
		}
		i_cur = i_next;
		i_next = row_of(tile + 2 * (int64_t) gridDim.x);
	}
	sc_count_changed(ch, info);
}

/* ---- host side ---- */

/* The kernel of a mode: tf32 with 1 or 2 blocks per SM (128 registers
 * without spills), 3xtf32 and the window pass with 1 (2 would spill); the
 * tests' variant writes every score. */
static const void *
screen_kernel(int mode, int minb, bool dbg)
{
	if (dbg)
		return mode == 3 ? (const void *) k_assign_screen<3, 1, true>
			: (const void *) k_assign_screen<1, 1, true>;
	if (mode == 3)
		return (const void *) k_assign_screen<3, 1, false>;
	if (mode == 2)
		return (const void *) k_assign_screen<2, 1, false>;
	return minb == 2 ? (const void *) k_assign_screen<1, 2, false>
		: (const void *) k_assign_screen<1, 1, false>;
}

/* The bound's factor of M² for a mode (the header above), with 5% for the
 * rounding of M and T in float. */
float
km_screen_coef(int mode, int d)
{
	const double u = 0x1.0p-24;

	return (float) ((gc_tf32_kappa(mode, d) + (4.0 * d + 10.02) * u) * 1.05);
}

/* The resident kernel for dpad dimensions (NULL: none). */
static const void *
res_kernel(int dpad)
{
	return dpad == 32 ? (const void *) k_assign_screen_res<4>
		: dpad == 64 ? (const void *) k_assign_screen_res<8> : nullptr;
}

/* The resident kernel's shared memory for D (k_assign_screen_res). */
static size_t
res_smem(const km_dev &D)
{
	return sizeof(float) * ((size_t) D.dpad * D.kp + D.kp + D.dpad + (size_t) D.dpad * SC_BM +
							(size_t) D.dpad * SC_RS + 9 * SC_BM);
}

/*
 * Whether the tf32 screen keeps the centres resident (D.screen_res, its
 * blocks an SM): where two blocks fit an SM, as the streamed kernel's do
 * at most.  GPUCLUST_KM_SCREEN_RES=0: never; =1: wherever one fits.
 */
static gc_code
res_plan(km_dev &D, gc_status *st)
{
	const char *env = getenv("GPUCLUST_KM_SCREEN_RES");
	const void *f = res_kernel(D.dpad);
	const size_t smem = res_smem(D);
	int			per_sm = 0;

	D.screen_res = 0;
	if (D.screen != 1 || (env && strcmp(env, "0") == 0) || D.kp > (1 << SC_KEY_BITS) ||
		f == nullptr || smem > (size_t) D.smem_optin)
		return GC_OK;
	KM_CK(gc_allow_dynamic_smem(f));
	KM_CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, f, SC_THREADS, smem));
	if (per_sm >= 2 || (per_sm >= 1 && env && strcmp(env, "1") == 0))
		D.screen_res = per_sm;
	return GC_OK;
}

/* Picks the screen's mode and occupancy for D (km_setup, after km_dims). */
gc_code
km_screen_plan(km_dev &D, gc_status *st)
{
	static const struct
	{
		int			mode,
					minb;
		bool		dbg;
	}			variants[] = {{1, 1, false}, {1, 2, false}, {3, 1, false}, {2, 1, false},
		{1, 1, true}, {3, 1, true}};
	const char *env = getenv("GPUCLUST_KM_SCREEN");
	gc_code		rc;

	D.screen = 0;
	D.screen_res = 0;
	D.screen_cascade = false;
	if (D.small || D.d > SCREEN_D_MAX || (env && strcmp(env, "fp32") == 0))
		return GC_OK;
	D.screen = env && strcmp(env, "3xtf32") == 0 ? 3 : 1;
	/* km_alloc drops it where the windows are used */
	D.screen_cascade = !(env && (strcmp(env, "tf32") == 0 || strcmp(env, "3xtf32") == 0));
	D.dpad = (D.d + SC_BK - 1) / SC_BK * SC_BK;
	D.screen_smem = sizeof(float) * ((size_t) (D.dpad + 2 * SC_BK) * SC_BM + 2 * SC_BN);
	D.screen_minb = 1;
	for (const auto &v : variants)
	{
		const void *f = screen_kernel(v.mode, v.minb, v.dbg);
		int			per_sm = 0;

		KM_CK(gc_allow_dynamic_smem(f));
		KM_CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, f, SC_THREADS,
															 D.screen_smem));
		if (per_sm < 1)
			return gc_fail(st, GC_EINTERNAL,
						   "GPU k-means: the tensor-core screen does not fit (d = %d, %zu bytes of shared memory)",
						   D.d, D.screen_smem);
		if (v.mode == 1 && v.minb == 2 && per_sm >= 2)
			D.screen_minb = 2;
	}
	if ((rc = res_plan(D, st)) != GC_OK)
		return rc;
	return km_wg_plan(D, st);
}

/* After an iteration: the rows its (last) screen queued, for the next
 * window pass' grid; without windows, a re-screen in the next one when
 * this one's tf32 screen left more than 1% of the rows it screened (all of
 * them, or those the bounds listed: kmeans_prune.cu). */
void
km_screen_adapt(km_dev &D)
{
	const km_info *h = D.h_info;
	const unsigned long long left = D.cascade_now ? h->fb_screen : h->fb_total;

	D.ties_est = h->n_fallback;
	if (D.screen_cascade)
		D.cascade_now = left * 100 > (unsigned long long) D.screened;
}

static gc_code
screen_launch(km_dev &D, int mode, dim3 grid, const int32_t *rows_in, const unsigned *n_in,
			  int32_t *rows_out, unsigned *n_out, const km_ties &ties, float *dbg,
			  gc_status *st)
{
	const float coef = km_screen_coef(mode == 3 ? 3 : 1, D.d);
	float	   *ub = mode == 2 ? nullptr : D.ub_out(),
			   *lb = mode == 2 ? nullptr : D.lb_out();
	const int	minb = mode == 1 && !dbg ? D.screen_minb : 1;
	const float *ctb = mode == 3 ? D.CTf : D.CTt;
	/* the resident kernel: a few blocks an SM, each over tile after tile */
	const bool	res = mode == 1 && !dbg && D.screen_res;
	const unsigned most = (unsigned) (D.screen_res * D.nsm);
	const km_cut cut = mode == 2 ? km_cut() : D.cut;

	if (ctb == nullptr)			/* mode 1 over listed rows with the wgmma screen: no caller */
		return gc_fail(st, GC_EINTERNAL, "GPU k-means: no centres prepared for the %s screen",
					   mode == 3 ? "3xtf32" : "tf32");
	void	   *args[] = {(void *) &D.XT, (void *) &D.n, (void *) &D.d, (void *) &D.dpad,
		(void *) &D.mu, (void *) &ctb, (void *) &D.cnrm, (void *) &D.cmax2,
		(void *) &D.xn2, (void *) &D.kp, (void *) &coef, (void *) &D.labels,
		(void *) &rows_in, (void *) &n_in, (void *) &rows_out, (void *) &n_out,
		(void *) &D.info, (void *) &ub, (void *) &lb, (void *) &ties, (void *) &cut, (void *) &dbg};

	/* the resident kernel's parameters are the first 21 of these */
	if (res)
		KM_CK(cudaLaunchKernel(res_kernel(D.dpad), dim3(grid.x < most ? grid.x : most),
							   dim3(SC_THREADS), args, res_smem(D), D.s));
	else
		KM_CK(cudaLaunchKernel(screen_kernel(mode, minb, dbg != nullptr), grid,
							   dim3(SC_THREADS), args, D.screen_smem, D.s));
	return GC_OK;
}

/*
 * The screen in `mode` over D's rows (rows_in NULL) or over the *n_in rows
 * listed in rows_in (the grid covers n rows; blocks past *n_in return at
 * once), into D.labels and the queue rows_out / *n_out (zeroed by the
 * caller); dbg (tests): every score, n x kp.
 */
gc_code
km_screen(km_dev &D, int mode, const int32_t *rows_in, const unsigned *n_in,
		  int32_t *rows_out, unsigned *n_out, float *dbg, gc_status *st)
{
	if (mode == 1 && rows_in == nullptr && D.screen_wg)
		return km_wg_screen(D, rows_out, n_out, dbg, st);
	/* listed rows: at most the rows the assignment screens (km_assign) */
	return screen_launch(D, mode, dim3(blocks_for(rows_in ? D.screened : D.n, SC_BM)),
						 rows_in, n_in, rows_out, n_out, D.ties, dbg, st);
}

/* The window pass over the first `cover` slots of the queue D.fb_rows
 * (ccnt zeroed by the caller), on the kernel of the screen of every row. */
gc_code
km_screen_ties(km_dev &D, int cover, gc_status *st)
{
	km_ties		t = D.ties;

	if (D.screen_wg)
		return km_wg_ties(D, cover, st);
	t.cap = cover;
	return screen_launch(D, 2, km_ties_grid(D.ties_est, cover, SC_BM, D.kp / SC_BN, D.nsm, 16),
						 D.fb_rows, &D.info->n_fallback, nullptr, nullptr, t, nullptr, st);
}

/* The prepared centres (CT, after k_prep_tiled) in the screen's fragment
 * order, float and TF32. */
gc_code
km_screen_prep(km_dev &D, gc_status *st)
{
	const int64_t e = (int64_t) D.dpad * D.kp;

	k_screen_prep<<<blocks_for(e, 256), 256, 0, D.s>>>(D.CT, D.dpad, D.kp, D.CTf, D.CTt);
	KM_LAUNCHED();
	return D.screen_wg ? km_wg_prep(D, st) : GC_OK;
}
