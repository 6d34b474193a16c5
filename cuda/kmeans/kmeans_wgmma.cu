/*
 * kmeans_wgmma.cu — the screen of kmeans_screen.cu on Hopper's warpgroup
 * MMA (wgmma.mma_async, sm_90a), in FP16: the scores
 * s_j = ||c'_j||² - 2 x'.c'_j with x'.c' from FP16-rounded operands and a
 * rounding bound of the same form as km_screen_coef's, the same outputs
 * (the labels of the rows it decides, the queue of the rows it leaves for
 * the exact re-rank, with each one's window threshold).
 *
 *   - mma.sync (kmeans_screen.cu, TF32) loads every fragment into registers
 *     and issues a 16x8x8 product per instruction, its issue slots shared
 *     with the per-score epilogue (running best and second best).
 *   - wgmma reads both operands from shared memory and multiplies 64 rows by
 *     128 centres by 16 dimensions per instruction for a warpgroup of four
 *     warps, asynchronously.
 *
 * Why FP16.  Its 10 mantissa bits round as TF32's do (half an ulp, 2^-11
 * relative), so the bound and the rows it leaves are the same; its
 * products run at twice TF32's rate, and its 2-byte operands halve the
 * shared memory a row takes and the L2 bytes a centre costs: a TF32
 * block holds 128 rows and streams every centre through L2 once per 128
 * rows, 160 GB an iteration at FAISS's shape (1M x 256, k = 20000), about
 * 4 TB/s; this kernel's 256 rows stream 40 GB (docs/benchmarks.md).  Its
 * range is narrower: rows and centres are scaled by a power of two s
 * (km_wg_prep: the largest |x'| and ||c'|| times s below 2^14, so nothing
 * overflows;
 * what underflows is in the measured rounding below), which changes no
 * rounding; the scores are kept times s² (exact) and unscaled where they
 * leave the kernel.
 *
 * The block.  Four warpgroups, 256 rows (warpgroup w: rows 64w..64w+63),
 * kept resident in shared memory, shifted by the feature means, scaled and
 * rounded to FP16.  The centres stream through NST stages of 128 centres x
 * 64 dimensions (16 KiB: one bulk copy of km_wg_prep's layout).  A tile of
 * 128 centres is nkc = wdpad/64 stages (wdpad: d rounded up to 64); each
 * stage is 4 wgmma m64n128k16 per warpgroup into 64 float accumulators per
 * thread.  After a tile, each thread folds its 2 rows x 32 centres into
 * the running best and second best, each score tagged in its 5 low bits
 * with its column (wg_tag: three min/max a score and no index to select;
 * the bound takes the tags' change) and the tile of the best kept aside;
 * at the end the 4 lanes of a row merge and one decides it.
 *
 * The stages' pipeline has no block-wide barrier.  A stage's slab lands
 * by the copy engine and completes the stage's mbarrier; each warpgroup
 * waits for it, multiplies, and once its products are done counts itself
 * out of the stage; the last to do so loads the stage's next slab.  So the
 * warpgroups drift apart, and one's products run on the tensor cores while
 * the others fold their scores (a block-wide barrier a stage would hold
 * every warpgroup to the same phase, the tensor cores idle during folds).
 * The fill loads all of a thread's rows at once (d <= 128), and the
 * decision's inputs are loaded at the start: the block's one wait for
 * global memory each (docs/benchmarks.md).
 *
 * The layout.  wgmma reads K-major operands in the 128-byte swizzle: a
 * slab of rows x 64 halves (128 bytes a row), 16-byte chunk c of row r
 * stored at chunk c ^ (r mod 8), 8-row groups 1024 bytes apart (the
 * descriptor's stride), the slab 1024-byte aligned.  Rows (A, 64 a
 * warpgroup) and centres (B, 128 a tile) are both slabs; the k-th 16 of a
 * slab's 64 dimensions start 32k bytes into it.
 *
 * The accumulators.  wgmma m64nN's result, for warp q of a warpgroup, lane
 * (g, t) = (lane/4, lane%4): d[4j + 2h + e] is row 16q + g + 8h, centre
 * 8j + 2t + e (the mma.sync m16n8 layout, N/8 times).
 *
 * Only sm_90a has wgmma: the kernel is empty in every other build, and
 * km_wg_plan takes it only where km_wg_probe says this build has it on
 * this device (CUDA_ARCHS 90a; an H100 or H200).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_fp16.h>

#include "kmeans_dev.cuh"
#include "screen.cuh"

#define WG_BM 256				/* rows per block */
#define WG_NWG (WG_BM / 64)		/* its warpgroups, 64 rows each */
#define WG_BN 128				/* centres per tile */
#define WG_BK 64				/* dimensions per stage: one swizzled row of halves */
#define WG_THREADS 512
#define WG_SLAB (WG_BN * WG_BK) /* halves of a stage (16 KiB) */
#define WG_FILL 8				/* 16-byte slots a thread loads at once in the fill */
#define WG_TAG 31u				/* a score's low bits that carry its column in the thread's tile */

/*
 * The scaled norm of a padding centre (cnw): finite, so that a tagged
 * score (wg_tag) stays a number, and far above any real score (at the
 * kernel's scale every |x'_j| and ||c'|| lies below 2^14, d <= 256: a
 * score below 2^35); the decision takes a score from WG_PAD_LIM up for +inf.
 */
#define WG_PAD_SCORE 0x1.0p126f
#define WG_PAD_LIM 0x1.0p100f

/*
 * Up to this d kmeans_screen.cu's mma.sync kernel is the faster on an
 * H100 (measured at 4M x 32, k = 256: docs/benchmarks.md): with one stage
 * per tile this kernel's tensor work is short and each tile's wait for its
 * products and its epilogue are exposed.
 */
#define WG_D_MIN 64

/* The fill gives thread t rows t % WG_BM only (the rows' rounding sums). */
static_assert(WG_THREADS == 2 * WG_BM, "two threads fill each row");

/* Half index of (row r, dimension k < 64) in a 128-byte-swizzled slab. */
__host__ __device__ __forceinline__ int
sw128(int r, int k)
{
	return r * WG_BK + ((((k >> 3) ^ (r & 7)) << 3) | (k & 7));
}

/* d rounded up to a stage */
static inline int
wg_dpad(int d)
{
	return (d + WG_BK - 1) / WG_BK * WG_BK;
}

/*
 * The centres for the kernel, one thread per centre c of kp: first the
 * scale s (every thread computes it; thread 0 stores it in cmax2[2]): the
 * power of two with max(xabs, max_j ||c'_j||) s < 2^14, xabs bounding
 * every |x'| (km_features_finish), its exponent kept within [-62, 62] so
 * that s² is a normal float.  Then cnw[c] = ||c'_c||² s² (the product
 * exact but where it underflows; WG_PAD_SCORE on the padding),
 * CW[(tile * nkc + kc) * WG_SLAB +
 * sw128(c, j)] = FP16(s CT[(64 kc + j) x (128 tile + c)]) (stage `step` of
 * the scan is slab `step`), and cmax2[1] = max_j ||c'_j - c^_j||², c^ =
 * FP16(s c') / s, the rounding the bound measures.  CT has dpad rows
 * (zero past d); CW has wdpad.
 */
__global__ void
k_wg_prep(const float *__restrict__ CT, const float *__restrict__ cnrm, int dpad, int wdpad,
		  int kp, int k, float xabs, float *cmax2, __half *__restrict__ CW,
		  float *__restrict__ cnw)
{
	const int	c = blockIdx.x * blockDim.x + threadIdx.x;
	const float m = fmaxf(xabs, sqrtf(cmax2[0]));
	int			ex = 0;

	if (m > 0.0f)
		frexpf(m, &ex);			/* m < 2^ex */
	ex = ex < -48 ? -48 : (ex > 76 ? 76 : ex);
	{
		const float sc = ldexpf(1.0f, 14 - ex),
					isc = ldexpf(1.0f, ex - 14);
		const int	nkc = wdpad / WG_BK;
		float		r = 0.0f;

		if (c == 0)
			cmax2[2] = sc;
		if (c >= kp)
			return;
		cnw[c] = c < k ? cnrm[c] * (sc * sc) : WG_PAD_SCORE;
		for (int j = 0; j < wdpad; j++)
		{
			const float v = j < dpad ? CT[(int64_t) j * kp + c] : 0.0f;
			const __half h = __float2half_rn(v * sc);
			const float e = __fsub_rn(v, __half2float(h) * isc);

			CW[((int64_t) (c / WG_BN) * nkc + j / WG_BK) * WG_SLAB + sw128(c % WG_BN, j % WG_BK)] = h;
			r = __fmaf_rn(e, e, r);
		}
		if (c < k)
			atomicMax((unsigned *) cmax2 + 1, __float_as_uint(r));
	}
}

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define WG_HAVE 1
#else
#define WG_HAVE 0
#endif

/* 1 where this build has the kernel for the device it runs on. */
__global__ void
k_wg_probe(int *out)
{
	*out = WG_HAVE;
}

#if WG_HAVE
/* A K-major, 128-byte-swizzled shared-memory operand at shared address a
 * (start >> 4, leading offset unused, 8-row groups 1024 bytes apart). */
__device__ __forceinline__ uint64_t
wg_desc(uint32_t a)
{
	return (uint64_t) ((a & 0x3FFFF) >> 4) | ((uint64_t) (1024 >> 4) << 32) | (1ull << 62);
}

/* Keeps the compiler from moving reads of the accumulators above the wait
 * for the asynchronous products (the products' own operands order them
 * after any earlier read). */
__device__ __forceinline__ void
wg_fence_acc(float (&d)[64])
{
#pragma unroll
	for (int i = 0; i < 64; i++)
		asm volatile("" : "+f"(d[i]) :: "memory");
}

/* d (+)= A(64 x 16) B(16 x 128)^T: FP16 in (both K-major), float
 * accumulate; scale_d 0 starts the sum. */
__device__ __forceinline__ void
wgmma_f16(float (&d)[64], uint64_t da, uint64_t db, int scale_d)
{
	asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
				 "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 "
				 "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"
				 "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,"
				 "%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,"
				 "%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63},"
				 " %64, %65, p, 1, 1, 0, 0;\n}\n"
				 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]),
				   "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
				   "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]),
				   "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
				   "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]),
				   "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
				   "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]),
				   "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
				   "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]),
				   "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
				   "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]),
				   "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
				   "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]),
				   "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
				   "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]),
				   "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
				 : "l"(da), "l"(db), "r"(scale_d));
}

/* The 4 warps of warpgroup wg (< 4) meet (named barrier 1 + wg). */
__device__ __forceinline__ void
wg_sync(int wg)
{
	switch (wg)
	{
		case 0:
			asm volatile("bar.sync 1, 128;" ::: "memory");
			break;
		case 1:
			asm volatile("bar.sync 2, 128;" ::: "memory");
			break;
		case 2:
			asm volatile("bar.sync 3, 128;" ::: "memory");
			break;
		default:
			asm volatile("bar.sync 4, 128;" ::: "memory");
			break;
	}
}

/* mbarrier at shared address a: one arrival a phase */
__device__ __forceinline__ void
mbar_init(uint32_t a)
{
	asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(a) : "memory");
}

/* Waits until phase `parity` of mbarrier a has completed. */
__device__ __forceinline__ void
mbar_wait(uint32_t a, uint32_t parity)
{
	uint32_t	done = 0;

	while (!done)
		asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
					 "selp.u32 %0, 1, 0, p;\n}\n"
					 : "=r"(done) : "r"(a), "r"(parity) : "memory");
}

/* bytes from global src into shared dst by the copy engine of the SM (a
 * bulk copy), mbarrier a's phase completing when they have landed */
__device__ __forceinline__ void
bulk_load(uint32_t dst, const void *src, uint32_t bytes, uint32_t a)
{
	asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;"
				 :: "r"(a), "r"(bytes) : "memory");
	asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
				 :: "r"(dst), "l"(src), "r"(bytes), "r"(a) : "memory");
}
#endif

/*
 * Score s with its low bits replaced by tag i < 32 (keep = ~WG_TAG): the
 * thread's column 8 (i / 2) + i % 2 of the tile rides with the score, so
 * the tile's running best needs no index of its own.  The change is at
 * most 31 ulps of s (wg_coefs).
 */
__device__ __forceinline__ float
wg_tag(float s, unsigned i, unsigned keep)
{
	return __uint_as_float((__float_as_uint(s) & keep) | i);
}

/*
 * MODE 1: the screen over all n rows (kmeans_screen.cu's
 * k_assign_screen in mode 1, rows_in NULL).  MODE 2: the window pass
 * (kmeans_screen.cu's mode 2) over the queue rows_in, slots below
 * ties.cap, block (x, y) scanning part y of the centres.  CW and cnw
 * from k_wg_prep, coefm and coefr the bound's factors (wg_coefs).  DBG
 * (tests, MODE 1): every score into dbg, n x kp.
 */
template <int MODE, int NST, bool DBG>
__global__ void __launch_bounds__(WG_THREADS, 1)
k_screen_wgmma(const float *__restrict__ XT, int64_t n, int d, int dpad,
			   const float *__restrict__ mu, const __half *__restrict__ CW,
			   const float *__restrict__ cnw, const float *__restrict__ cmax2,
			   const float *__restrict__ xn2, int kp, float coefm, float coefr,
			   int32_t *__restrict__ labels, const int32_t *__restrict__ rows_in,
			   const unsigned *n_in, int32_t *__restrict__ rows_out,
			   unsigned *n_out, km_info *info, float *__restrict__ ub,
			   float *__restrict__ lb, km_ties ties, km_cut cut, float *__restrict__ dbg)
{
#if WG_HAVE
	extern __shared__ float4 wg_smem[];
	const uint32_t raw = (uint32_t) __cvta_generic_to_shared(wg_smem);
	const uint32_t pad = (1024u - (raw & 1023u)) & 1023u;
	__half	   *As = (__half *) ((char *) wg_smem + pad);	/* nkc slabs of WG_BM rows */
	__half	   *Bs = As + (size_t) dpad * WG_BM;	/* NST slabs of 128 centres */
	float	   *dxs = (float *) (Bs + (size_t) NST * WG_SLAB);	/* the fill's ||x' - x^||² parts */
	float	   *mus = dxs + WG_THREADS;	/* dpad: the shift, 0 past d */
	/* per stage: its mbarrier (the slab has landed) and the count of
	 * warpgroups done with it (WG_NWG a use) */
	uint64_t   *full = (uint64_t *) (mus + dpad);	/* dpad: a multiple of 64 */
	unsigned   *used = (unsigned *) (full + NST);
	/* MODE 1: what the decision reads of the block's rows (xn2, cut.d2,
	 * the labels) */
	float	   *px2 = (float *) (used + NST),
			   *pd2 = px2 + WG_BM;
	int32_t    *plab = (int32_t *) (pd2 + WG_BM);
	const uint32_t sA = raw + pad,
				sB = sA + (uint32_t) (dpad * WG_BM * 2);
	const int	tid = threadIdx.x,
				lane = tid & 31,
				warp = tid >> 5;
	const int	wg = warp >> 2;
	const int	g = lane >> 2,
				t = lane & 3;
	const int64_t m0 = (int64_t) blockIdx.x * WG_BM;
	const int64_t r0 = m0 + wg * 64 + (warp & 3) * 16 + g;	/* the thread's rows: r0, r0 + 8 */
	const int	nkc = dpad / WG_BK;
	/* the tiles of centres the block scans: t0 .. t1 - 1 (all but in MODE 2) */
	const int	tpp = (kp / WG_BN + gridDim.y - 1) / gridDim.y,
				t0 = blockIdx.y * tpp,
				t1 = min(kp / WG_BN, t0 + tpp);
	const int	nsteps = (t1 - t0) * nkc;
	/* the rows: m0 + m of all n, or (MODE 2) the queued rows_in[m0 + m] */
	const int64_t nrows = MODE == 2 ? min((int64_t) *n_in, (int64_t) ties.cap) : n;
	float		acc[64];
	float		best[2],
				sec[2],
				thr[2];			/* MODE 2: a row's window ends here */
	int			bidx[2];		/* MODE 1: the tile of best[h] until the end */
	int			ch = 0;
	float		dx2 = 0.0f;		/* of row tid % WG_BM (the only row it fills), its part of ||x' - x^||² */
	const float sc = cmax2[2],	/* the scale (k_wg_prep) */
				isc = 1.0f / sc,	/* exact: powers of two */
				sc2 = sc * sc,
				isc2 = isc * isc;
	/* ~WG_TAG, from a parameter (kp >= 0) so that it sits in a register and
	 * each tag is one logical operation with its index immediate */
	const unsigned keep = ~WG_TAG | ((unsigned) kp >> 31);

	/* the decision bound T (wg_coefs) of the block's row r, ||x'||² = x2;
	 * its last term the tags' change where a score is subnormal (below
	 * 31 2^-149 each at the kernel's scale) */
	auto row_bound = [&](float x2, int64_t r) {
		const float xn = sqrtf(x2),
					cm = sqrtf(cmax2[0]),
					dc = sqrtf(cmax2[1]),
					dx = sqrtf(dxs[r] + dxs[r + WG_BM]);
		const float M = xn + cm;

		return coefm * M * M + coefr * (xn * dc + dx * (cm + dc)) +
			__double2float_ru(ldexp((double) isc2, -143));
	};

	if (m0 >= nrows || t0 >= t1)
		return;					/* MODE 2's grid is sized for more rows */

	/* MODE 1: what the decision reads of row tid (< WG_BM), loaded now so
	 * that the fill hides their latency, into shared memory after it */
	float		dec_x2 = 0.0f,
				dec_d2 = 0.0f;
	int32_t		dec_lab = 0;

	if (MODE == 1 && tid < WG_BM && m0 + tid < n)
	{
		dec_x2 = xn2[m0 + tid];
		dec_lab = labels[m0 + tid];
		if (cut.d2)
			dec_d2 = cut.d2[m0 + tid];
	}

	const uint32_t sFull = (uint32_t) __cvta_generic_to_shared(full);	/* stage s's mbarrier: + 8 s */

	/* stage step % NST <- slab t0 nkc + `step` of CW, by one thread */
	auto load_b = [&](int step) {
		if (step < nsteps)
			bulk_load(sB + (uint32_t) ((step % NST) * WG_SLAB * 2),
					  CW + ((size_t) t0 * nkc + step) * WG_SLAB, WG_SLAB * 2,
					  sFull + 8 * (step % NST));
	};

	if (tid == 0)
	{
		for (int s = 0; s < NST; s++)
		{
			mbar_init(sFull + 8 * s);
			used[s] = 0;
		}
		asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
		for (int s = 0; s < NST; s++)
			load_b(s);
	}

	/*
	 * The block's rows, shifted, scaled and rounded to FP16: 16-byte slot
	 * (r, q) = row r, dimensions 8q..8q+7, a warp's 32 slots 32 consecutive
	 * rows of the same dimensions (coalesced reads of XT; the swizzle
	 * spreads the stores over every bank), WG_FILL slots' loads in flight
	 * (all of a thread's at d <= 128: the block waits for them once).
	 * Thread t fills row r = t % WG_BM, slots q = t / WG_BM + 2u.
	 */
	{
		const int	nq = dpad / 8,	/* slots a row */
					r = tid & (WG_BM - 1);
		const int64_t m = m0 + r;
		const bool	have = m < nrows;
		const float *xr = XT + (have ? (MODE == 2 ? (int64_t) rows_in[m] : m) : 0);
		float		v[WG_FILL][8];

		auto fetch = [&](int q0) {
#pragma unroll
			for (int u = 0; u < WG_FILL; u++)
			{
				const int	q = q0 + 2 * u;
				const float *p = xr + (int64_t) (8 * q) * n;

#pragma unroll
				for (int e = 0; e < 8; e++)
					v[u][e] = have && q < nq && 8 * q + e < d ? p[(int64_t) e * n] : 0.0f;
			}
		};

		fetch(tid / WG_BM);
		/* the shift, while the first loads are in flight */
		for (int j = tid; j < dpad; j += WG_THREADS)
			mus[j] = j < d ? mu[j] : 0.0f;
		__syncthreads();
		for (int q0 = tid / WG_BM; q0 < nq; q0 += 2 * WG_FILL)
		{
			if (q0 != tid / WG_BM)
				fetch(q0);
#pragma unroll
			for (int u = 0; u < WG_FILL; u++)
			{
				const int	q = q0 + 2 * u;
				__align__(16) __half w[8];

				if (q >= nq)
					break;
#pragma unroll
				for (int e = 0; e < 8; e++)
				{
					const float x = __fsub_rn(v[u][e], mus[8 * q + e]);	/* 0 past d */
					const float dd = __fsub_rn(x, __half2float(w[e] = __float2half_rn(x * sc)) * isc);

					dx2 = __fmaf_rn(dd, dd, dx2);
				}
				((uint4 *) As)[((q / 8) * WG_BM + r) * 8 + ((q & 7) ^ (r & 7))] = *(const uint4 *) w;
			}
		}
	}
#pragma unroll
	for (int h = 0; h < 2; h++)
	{
		best[h] = INFINITY;
		sec[h] = INFINITY;
		bidx[h] = 0;
		thr[h] = -INFINITY;
	}
	/* the rows' ||x' - x^||² (threads t and t + WG_BM filled row t) */
	dxs[tid] = dx2;
	if (MODE == 1 && tid < WG_BM)
	{
		px2[tid] = dec_x2;
		pd2[tid] = dec_d2;
		plab[tid] = dec_lab;
	}
	asm volatile("fence.proxy.async.shared::cta;" ::: "memory");	/* the rows, for wgmma */
	__syncthreads();
	if (MODE == 2)
	{
		/* each row's window: thr (its first screen's best + T/2) + this
		 * pass' T/2, times s² as the scores here */
#pragma unroll
		for (int h = 0; h < 2; h++)
		{
			const int64_t q = r0 + 8 * h;

			if (q < nrows)
				thr[h] = __fadd_ru(ties.thr[q], 0.5f * row_bound(xn2[rows_in[q]], q - m0)) * sc2;
		}
	}

	/*
	 * The warpgroup is done with stage `step` (its products have been
	 * waited for; slot = step % NST): the last of the block's warpgroups
	 * to say so loads the stage's next slab.  No block-wide barrier in the
	 * scan, so that one warpgroup's products run on the tensor cores while
	 * others fold scores.
	 */
	auto release = [&](int step, int slot) {
		wg_sync(wg);
		if ((tid & 127) == 0)
		{
			__threadfence_block();
			if (atomicAdd(used + slot, 1u) % WG_NWG == WG_NWG - 1)
			{
				__threadfence_block();
				load_b(step + NST);
			}
		}
	};

	/* the operands' descriptors at the warpgroup's rows and at stage 0;
	 * the rest are offsets in 16-byte units added to them (the shared
	 * window is below 2^18 bytes, so the 14-bit address field does not
	 * carry) */
	const uint64_t dA = wg_desc(sA + (uint32_t) (wg * 64 * 128)),
				dB = wg_desc(sB);
	int			slot = 0,		/* step % NST */
				pslot = 0;		/* (step - 1) % NST */
	uint32_t	parity = 0;		/* (step / NST) & 1 */

	for (int tile = t0, step = 0; tile < t1; tile++)
	{
		const int	cb = tile * WG_BN + 2 * t;

		for (int kc = 0; kc < nkc; kc++, step++)
		{
			const uint64_t da = dA + (uint64_t) (kc * WG_BM * 8),
						db = dB + (uint64_t) (slot * WG_BN * 8);

			mbar_wait(sFull + 8 * slot, parity);
			asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#pragma unroll
			for (int ks = 0; ks < WG_BK / 16; ks++)
				wgmma_f16(acc, da + 2 * ks, db + 2 * ks, (kc | ks) != 0);
			asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
			if (kc > 0)
			{
				asm volatile("wgmma.wait_group.sync.aligned 1;" ::: "memory");
				release(step - 1, pslot);
			}
			pslot = slot;
			if (++slot == NST)
			{
				slot = 0;
				parity ^= 1;
			}
		}
		asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
		release(step - 1, pslot);
		wg_fence_acc(acc);
		/* the tile's scores, times s²: MODE 1 tags them with their column
		 * in the tile and keeps the best two of each of the thread's rows,
		 * and the tile of the best in bidx */
		const float bprev[2] = {best[0], best[1]};

#pragma unroll
		for (int j = 0; j < WG_BN / 8; j++)
		{
			const float2 cn = __ldg((const float2 *) (cnw + cb + 8 * j));

#pragma unroll
			for (int e = 0; e < 2; e++)
#pragma unroll
				for (int h = 0; h < 2; h++)
				{
					const float s = __fmaf_rn(-2.0f, acc[4 * j + 2 * h + e], e ? cn.y : cn.x);

					if (MODE == 1)
					{
						const float q = wg_tag(s, 2 * j + e, keep);

						sec[h] = fminf(sec[h], fmaxf(q, best[h]));
						best[h] = fminf(best[h], q);
					}
					else if (s <= thr[h])	/* the padding's WG_PAD_SCORE never is */
						list_tie(ties, r0 + 8 * h, cb + 8 * j + e);
					if (DBG && r0 + 8 * h < n)
						dbg[(r0 + 8 * h) * kp + cb + 8 * j + e] = s * isc2;
				}
		}
		if (MODE == 1)
#pragma unroll
			for (int h = 0; h < 2; h++)
				bidx[h] = best[h] < bprev[h] ? tile : bidx[h];
	}

	if (MODE == 2)				/* the window pass: its lists are its output */
		return;
	else
	{
		/* the best's column from its tile and tag; the 4 lanes of a row,
		 * by (score, column); lane t = 0 decides it, on the scores
		 * unscaled */
#pragma unroll
		for (int h = 0; h < 2; h++)
		{
			const unsigned i = __float_as_uint(best[h]) & WG_TAG;

			bidx[h] = bidx[h] * WG_BN + 2 * t + 8 * (int) (i >> 1) + (int) (i & 1);
			merge_quad(best[h], sec[h], bidx[h]);
			best[h] *= isc2;
			sec[h] = sec[h] >= WG_PAD_LIM ? INFINITY : sec[h] * isc2;	/* k = 1 */
			if (t == 0 && r0 + 8 * h < n)
			{
				const int64_t gi = r0 + 8 * h;
				const float x2 = px2[gi - m0];
				const float T = row_bound(x2, gi - m0);

				if (screen_cut_d2(cut, pd2[gi - m0], x2, best[h], T))
					labels[gi] = -1;
				else if (sec[h] - best[h] > T)
				{
					ch += plab[gi - m0] != bidx[h];
					labels[gi] = bidx[h];
					if (ub)
						screen_bounds(x2, best[h], sec[h], T, ub + gi, lb + gi);
				}
				else
					queue_tie(gi, best[h], T, rows_out, n_out, ties);
			}
		}
		{
			const unsigned w = __reduce_add_sync(0xffffffffu, (unsigned) ch);

			if (lane == 0 && w != 0)
				atomicAdd(&info->changed, (unsigned long long) w);
		}
	}
#else
	__trap();					/* never launched: km_wg_plan probes for it */
#endif
}

/* ---- host side ---- */

/* mode 1: the screen (dbg: the tests' variant), 2: the window pass */
template <int NST>
static const void *
wg_kernel_n(int mode, bool dbg)
{
	if (mode == 2)
		return (const void *) k_screen_wgmma<2, NST, false>;
	return dbg ? (const void *) k_screen_wgmma<1, NST, true> : (const void *) k_screen_wgmma<1, NST, false>;
}

/* the kernel of a mode with nst stages (6, 5 or 3) */
static const void *
wg_kernel(int mode, int nst, bool dbg)
{
	return nst == 6 ? wg_kernel_n<6>(mode, dbg) : nst == 5 ? wg_kernel_n<5>(mode, dbg) : wg_kernel_n<3>(mode, dbg);
}

/* the 1024-byte alignment's room, the rows and the stages (halves), the
 * rows' rounding (dxs), the shift (mus), the stages' mbarriers and counts,
 * the decision's inputs */
static size_t
wg_smem_bytes(int wdpad, int nst)
{
	return 1024 + sizeof(__half) * ((size_t) wdpad * WG_BM + (size_t) nst * WG_SLAB) +
		sizeof(float) * (WG_THREADS + wdpad) + (sizeof(uint64_t) + sizeof(unsigned)) * nst +
		(2 * sizeof(float) + sizeof(int32_t)) * WG_BM;
}

/*
 * The bound (kmeans_screen.cu's header) with the rounding of the operands
 * measured instead of bounded: x' = x~ + dx and c'_j = c~_j + dc_j exactly
 * (x~, c~ the FP16 values unscaled), so
 *   |x~.c~_j - x'.c'_j| <= ||x~|| ||dc_j|| + ||dx|| ||c~_j|| + ||dx|| ||dc_j||,
 * where kmeans_screen.cu takes ||dx|| <= 2^-11 ||x'|| (and the same for
 * c'): the rounding errors of 10 bits are mostly smaller than half an ulp, and ||x'|| and max ||c'|| are rarely equal, so the measured form
 * is about half as wide and fewer rows are queued.  With
 * E = (1 + 2^-11) (||x'|| dC + ||dx|| C) + ||dx|| dC + 4du ||x~|| C~ (dC =
 * max_j ||dc_j||, C = max_j ||c'_j||; the accumulation term as before) the
 * decision threshold is
 *   T = 4E + (4d + 10.02) u M²
 *     <= coefr (||x'|| dC + ||dx|| (C + dC)) + coefm M²,
 * coefr = 4 (1 + 2^-11), coefm = (4d (1 + 2^-10) + 4d + 10.02 + 128) u
 * (using 4 ||x'|| C <= M²; the 128 for the tags, below), both with 5% for
 * the float rounding of the norms and of T.  ||dx||² is summed in the
 * block's fill, dC² in k_wg_prep (cmax2[1]); both include what the FP16
 * range rounds to zero.  The
 * accumulation term holds for FP16 products as for TF32's: both are exact
 * in float, and test_kmeans_gpu measures every score against T.
 *
 * The tags (wg_tag) move the best and second best the decision reads by
 * below 31 ulps each: 31 2^-23 |s| where s is normal, |s| <= 1.01 M²
 * (|s| <= C² + 2 ||x'|| C with the operands' rounding), else 31 2^-149
 * at the kernel's scale.  So T takes 2^-17 M² = 128 u M² more (coefm) and
 * 2^-143 s^-2 (row_bound's last term): a decided gap is still above the
 * untagged T, and the bounds, windows and cut read from the tagged best
 * with half the wider T stay on their side of the untagged ones.
 */
static void
wg_coefs(int d, float *coefm, float *coefr)
{
	const double u = 0x1.0p-24;

	*coefm = (float) (1.05 * (4.0 * d * (1 + 0x1.0p-10) + 4.0 * d + 138.02) * u);
	*coefr = (float) (1.05 * 4.0 * (1 + 0x1.0p-11));
}

/* Whether this build runs the kernel on the current device (cached per
 * device). */
static bool
km_wg_probe(gc_status *st, gc_code *rc)
{
	static int	known[64];		/* 0 unknown, 1 no, 2 yes */
	int			dev = 0,
				major = 0,
				minor = 0;
	int		   *dflag = nullptr,
				h = 0;
	cudaError_t e;

	*rc = GC_OK;
	if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= 64)
		return false;
	if (known[dev])
		return known[dev] == 2;
	e = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
	if (e == cudaSuccess)
		e = cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev);
	if (e == cudaSuccess && major == 9 && minor == 0)
	{
		e = cudaMalloc(&dflag, sizeof(int));
		if (e == cudaSuccess)
		{
			k_wg_probe<<<1, 1>>>(dflag);
			e = cudaGetLastError();
			if (e == cudaSuccess)
				e = cudaMemcpy(&h, dflag, sizeof(int), cudaMemcpyDeviceToHost);
			cudaFree(dflag);
		}
	}
	if (e != cudaSuccess)
	{
		*rc = km_cuda_fail(st, e, "probing for wgmma");
		return false;
	}
	known[dev] = h == 1 ? 2 : 1;
	return h == 1;
}

/*
 * After km_screen_plan: D.screen_wg (the stages, 0: none).
 * The kernel takes D's tf32 screen where the build and the device have it
 * and d > WG_D_MIN; GPUCLUST_KM_SCREEN=wgmma takes it at every d, =mma
 * never (nor the modes other than tf32).  The most stages that fit (6,
 * else 5: at d = 256 five fit beside the rows and hold more than a tile
 * of 4, so that a warpgroup folding a tile's scores does not hold back the
 * others' next products), or 3 where more blocks an SM fit with them.
 */
gc_code
km_wg_plan(km_dev &D, gc_status *st)
{
	const char *env = getenv("GPUCLUST_KM_SCREEN");
	const bool	force = env && strcmp(env, "wgmma") == 0;
	int			best_per_sm = 0;
	static const int nsts[] = {6, 5, 3};
	gc_code		rc;

	D.screen_wg = 0;
	D.wdpad = wg_dpad(D.d);
	if (D.screen != 1 || D.kp % WG_BN != 0 ||
		(env && !force && strcmp(env, "tf32") != 0) || (!force && D.d <= WG_D_MIN))
		return GC_OK;
	if (!km_wg_probe(st, &rc))
		return rc;
	for (int i = 0; i < 3; i++)
	{
		const int	nst = nsts[i];
		const size_t bytes = wg_smem_bytes(D.wdpad, nst);
		int			per_sm = 0;

		if (bytes > (size_t) D.smem_optin)
			continue;
		for (int v = 0; v < 3; v++)
			KM_CK(gc_allow_dynamic_smem((const void *) wg_kernel(v == 2 ? 2 : 1, nst, v == 1)));
		KM_CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, wg_kernel(1, nst, false),
															 WG_THREADS, bytes));
		if (per_sm > best_per_sm)
		{
			best_per_sm = per_sm;
			D.screen_wg = nst;
		}
	}
	return GC_OK;
}

/* The prepared centres (CT) in the kernel's layout, D.CTw, and their
 * scaled norms, D.cnw (km_prep). */
gc_code
km_wg_prep(km_dev &D, gc_status *st)
{
	k_wg_prep<<<blocks_for(D.kp, 128), 128, 0, D.s>>>(D.CT, D.cnrm, D.dpad, D.wdpad, D.kp, D.k,
														D.xabs, D.cmax2, (__half *) D.CTw,
														D.cnw);
	KM_LAUNCHED();
	return GC_OK;
}

static gc_code
wg_launch(km_dev &D, int mode, dim3 grid, const int32_t *rows_in, const unsigned *n_in,
		  int32_t *rows_out, unsigned *n_out, const km_ties &ties, float *dbg,
		  gc_status *st)
{
	float		coefm,
				coefr;
	float	   *ub = mode == 1 ? D.ub_out() : nullptr,
			   *lb = mode == 1 ? D.lb_out() : nullptr;
	const __half *cw = (const __half *) D.CTw;
	const km_cut cut = mode == 1 ? D.cut : km_cut();
	void	   *args[] = {(void *) &D.XT, (void *) &D.n, (void *) &D.d, (void *) &D.wdpad,
		(void *) &D.mu, (void *) &cw, (void *) &D.cnw, (void *) &D.cmax2,
		(void *) &D.xn2, (void *) &D.kp, (void *) &coefm, (void *) &coefr, (void *) &D.labels,
		(void *) &rows_in, (void *) &n_in, (void *) &rows_out, (void *) &n_out, (void *) &D.info,
		(void *) &ub, (void *) &lb, (void *) &ties, (void *) &cut, (void *) &dbg};

	wg_coefs(D.d, &coefm, &coefr);
	KM_CK(cudaLaunchKernel(wg_kernel(mode, D.screen_wg, dbg != nullptr), grid, dim3(WG_THREADS),
						   args, wg_smem_bytes(D.wdpad, D.screen_wg), D.s));
	return GC_OK;
}

/* The tf32 screen of every row (km_screen's, when D.screen_wg). */
gc_code
km_wg_screen(km_dev &D, int32_t *rows_out, unsigned *n_out, float *dbg, gc_status *st)
{
	return wg_launch(D, 1, dim3(blocks_for(D.n, WG_BM)), nullptr, nullptr, rows_out, n_out,
					 D.ties, dbg, st);
}

/* The window pass on wgmma (km_screen_ties's, when D.screen_wg) over the
 * first `cover` queue slots. */
gc_code
km_wg_ties(km_dev &D, int cover, gc_status *st)
{
	km_ties		t = D.ties;

	t.cap = cover;
	return wg_launch(D, 2, km_ties_grid(D.ties_est, cover, WG_BM, D.kp / WG_BN, D.nsm, 8),
					 D.fb_rows, &D.info->n_fallback, nullptr, nullptr, t, nullptr, st);
}
