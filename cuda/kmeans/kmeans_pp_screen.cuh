/*
 * kmeans_pp_screen.cuh — k-means++'s screened pass (kmeans_pp.cu): the
 * trials' FP16 dot products on the tensor cores decide most rows' terms,
 * the rows they leave get the exact float distances, and the winner's D²
 * and the next grid follow.  Internal to kmeans_pp.cu, which includes it
 * after its state (pp_state, pp_scr) and its prefix sums (pp_prefix_of).
 */
#ifndef GPUCLUST_KMEANS_PP_SCREEN_CUH
#define GPUCLUST_KMEANS_PP_SCREEN_CUH

/*
 * The screened pass (from KM_PP_SCREEN_MIN_D dimensions, unweighted).
 * There the pass over the rows is bound both by reading X, 4d bytes a row
 * a step, and by the exact distances' 3dL float operations a row.
 * Screened, a step reads the rows as FP16 mma fragments (2d bytes a row)
 * of (x - mu) s, mu the rows' mean and s a power of two that keeps them in
 * FP16's range, and takes their dot products with the L trials, shifted and
 * scaled alike, on the tensor cores (mma.sync m16n8k16, FP32 accumulate):
 *
 *   v = ||x - mu||² + ||q - mu||² - 2 (x - mu).(q - mu)
 *
 * from the rows' and the trials' float norms (nx, nq).  A pair is decided
 * only where the CPU's float distance² (gc_dist2: d subtractions, squares
 * and additions in float) is sure to be at least the row's D²: then the
 * trial leaves the row's term as it is, its gain is 0 (pp_scr_skip).  A
 * row with any pair undecided goes to the step's queue.  The queued rows get
 * every trial's float distance² in pp_terms's operations (pp_scr_exact), and
 * each gain q(D²) - q(distance²), an exact integer on the step's grid, is
 * taken off the trial's block sums, which started from the D²'s (pp_draw).
 * So the potentials are the full pass's integers and the same trial wins
 * (pp_select); its distances lower its rows' D² (pp_scr_apply), and the
 * blocks whose D² changed give the next grid (pp_scr_rescan): the CPU's
 * centres and rows, bit for bit.
 *
 * The bound.  With X = ||x - mu||, Q = ||q - mu||, u = 2^-24, dp the
 * dimensions padded to 16: each element converted carries a relative
 * error e = 2^-11 + 2^-22 (the subtraction, FP16's rounding) and an
 * absolute one a = 2^-14 / s (FP16's subnormals, flushed or not); the
 * products are exact in FP32 and their sums lose g = 4 dp u of the sum of
 * their magnitudes (tf32.cuh's model of the accumulation); nx and nq are
 * within eta = (dp + 8) u of the squares they sum.  Then
 *
 *   |v - ||x - q||²| <= c2 X Q + c3 (X + Q) + c4 + c1 (nx + nq),
 *   c2 = 2 (2e + e² + g (1 + e)²),  c3 = 2 (1 + e) (1 + g (1 + e)) a sqrt(dp),
 *   c4 = 2 (1 + g (1 + e)²) dp a²,  c1 = 2 eta + 8u (the norms, v's own
 *   three roundings),
 *
 * each taken 0.1% larger, c4 also 2^-125 larger (what underflows in the
 * norms, in v and in the CPU's own squares: at most 3 dp 2^-149), X and Q
 * bounded from above by sqrt(nx)(1 + 2 eta) plus the part of a norm that
 * underflows.  The CPU's distance² is then at least
 * ||x - q||² (1 - eta) less what underflows, so a pair is decided where
 * (v - bound)(1 - eta) >= D².  A product, norm or bound that is not finite
 * decides nothing.  The shift and the scale only make the bound tight: any
 * mu and s give the same centres.
 */
#define PP_SCR_SMEM (48 * 1024)	/* the trials' fragments' shared memory, at most */

namespace
{
/* pp_scr_skip's constants (pp_scr's comment) */
struct pp_scr_k
{
	float		c1,
				c2,
				c3,
				c4,
				eta,
				xabs;			/* a norm's part that may underflow */
};
}

__device__ __forceinline__ pp_scr_k
pp_scr_consts(int dp, float a)
{
	const double u = 0x1p-24,
				e = 0x1p-11 + 0x1p-22,
				g = 4.0 * dp * u,
				eta = (dp + 8) * u;
	pp_scr_k	K;

	K.eta = (float) eta;
	K.c1 = (float) ((2 * eta + 8 * u) * 1.001);
	K.c2 = (float) (2 * (2 * e + e * e + g * (1 + e) * (1 + e)) * 1.001);
	K.c3 = (float) (2 * (1 + e) * (1 + g * (1 + e)) * a * sqrt((double) dp) * 1.001);
	K.c4 = (float) (2 * (1 + g * (1 + e) * (1 + e)) * dp * (double) a * a * 1.001 + 0x1p-125);
	K.xabs = (float) (sqrt((double) dp) * 0x1p-74);
	return K;
}

/* An upper bound of ||x - mu|| from its float square nx (rsqrtf: 2 ulp). */
__device__ __forceinline__ float
pp_scr_norm_ub(const pp_scr_k &K, float nx)
{
	const float r = nx > 0x1p-100f ? __fmul_rn(nx, rsqrtf(nx)) : 0x1p-50f;

	return __fadd_rn(__fmul_rn(r, 1.0f + 2.0f * K.eta + 0x1p-19f), K.xabs);
}

/*
 * A row's or a trial's part of the bound (c3 X + c1 nx; a trial's also
 * c4), NaN where its norm is not finite, so that it decides nothing.
 */
__device__ __forceinline__ float
pp_scr_part(const pp_scr_k &K, float nx, float xb, float c4)
{
	return isfinite(nx) ? __fadd_rn(__fadd_rn(__fmul_rn(K.c3, xb), __fmul_rn(K.c1, nx)), c4) : NAN;
}

/*
 * Whether the CPU's float distance² of a row to a trial is sure to be at
 * least cl, the row's D²: v = nx + nq - 2 acc / s² from their scaled FP16
 * dot product acc (is2x2 = 2 / s²), the bound c2 X Q (c2xb = c2 X) plus
 * the row's and the trial's parts (ab).
 */
__device__ __forceinline__ bool
pp_scr_skip(const pp_scr_k &K, float acc, float is2x2, float nx, float nq, float c2xb, float qb,
			float ab, float cl)
{
	const float v = __fsub_rn(__fadd_rn(nx, nq), __fmul_rn(acc, is2x2)),
				err = __fadd_rn(__fmul_rn(c2xb, qb), ab);

	return isfinite(acc) && __fmul_rn(__fsub_rn(v, err), 1.0f - K.eta) >= cl;
}

/* Two floats as FP16s in one register, lo in the low half. */
__device__ __forceinline__ uint32_t
pp_h2(float lo, float hi)
{
	const __half2 h = __floats2half2_rn(lo, hi);

	return *(const uint32_t *) &h;
}

/* c (16 x 8) += a (16 x 16, row) b (16 x 8, col), FP16 in, FP32 accumulate. */
__device__ __forceinline__ void
mma_f16(float (&c)[4], const uint4 &a, const uint2 &b)
{
	asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
				 "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
				 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
				 : "r"(a.x), "r"(a.y), "r"(a.z), "r"(a.w), "r"(b.x), "r"(b.y));
}

/* mu[j]: the mean of feature j (block j). */
__global__ void __launch_bounds__(PP_THREADS)
pp_scr_mean(const float *__restrict__ XT, int64_t n, float *mu)
{
	typedef cub::BlockReduce<double, PP_THREADS> R;
	__shared__ R::TempStorage ts;
	const float *x = XT + (int64_t) blockIdx.x * n;
	double		s = 0.0;

	for (int64_t i = threadIdx.x; i < n; i += PP_THREADS)
		s += x[i];
	s = R(ts).Sum(s);
	if (threadIdx.x == 0)
		mu[blockIdx.x] = (float) (s / (double) n);
}

/* The largest |x - mu| (blocks of rows x the features), its bits. */
__global__ void __launch_bounds__(PP_THREADS)
pp_scr_amax(const float *__restrict__ XT, int64_t n, const float *mu, unsigned *amax)
{
	typedef cub::BlockReduce<unsigned, PP_THREADS> R;
	__shared__ R::TempStorage ts;
	const float *x = XT + (int64_t) blockIdx.y * n;
	const float m = mu[blockIdx.y];
	unsigned	b = 0;

	for (int64_t i = (int64_t) blockIdx.x * PP_THREADS + threadIdx.x; i < n;
		 i += (int64_t) gridDim.x * PP_THREADS)
		b = max(b, __float_as_uint(fabsf(__fsub_rn(x[i], m))));
	b = R(ts).Reduce(b, cuda::maximum<>{});
	if (threadIdx.x == 0)
		atomicMax(amax, b);
}

/* s = 2^e with the largest |x - mu| s < 2^14 (e within +-60, so that s²
 * is a normal float), 1 / s², and a = 2^-14 / s. */
__global__ void
pp_scr_scale(pp_scr Z)
{
	const float m = __uint_as_float(*Z.amax);
	int			e = m > 0.0f && isfinite(m) ? 13 - ilogbf(m) : 0;

	e = e < -60 ? -60 : e > 60 ? 60 : e;
	Z.sc[0] = ldexpf(1.0f, e);
	Z.sc[1] = ldexpf(1.0f, -2 * e);
	Z.sc[2] = ldexpf(1.0f, -14 - e);
}

/* XR (n x d) = XT's rows, row-major, a 32 x 32 tile a block of 32 x 8. */
__global__ void
pp_scr_rows(const float *__restrict__ XT, int64_t n, int d, float *__restrict__ XR)
{
	__shared__ float t[32][33];
	const int64_t i0 = (int64_t) blockIdx.x * 32;
	const int	j0 = blockIdx.y * 32;

	for (int y = threadIdx.y; y < 32; y += 8)
		if (j0 + y < d && i0 + threadIdx.x < n)
			t[y][threadIdx.x] = XT[(int64_t) (j0 + y) * n + i0 + threadIdx.x];
	__syncthreads();
	for (int y = threadIdx.y; y < 32; y += 8)
		if (i0 + y < n && j0 + threadIdx.x < d)
			XR[(i0 + y) * d + j0 + threadIdx.x] = t[threadIdx.x][y];
}

/* nx[i] = ||x_i - mu||² in float, dimension by dimension. */
__global__ void __launch_bounds__(PP_THREADS)
pp_scr_norms(const float *__restrict__ XT, int64_t n, int d, const float *mu, float *nx)
{
	const int64_t i = (int64_t) blockIdx.x * PP_THREADS + threadIdx.x;
	float		s = 0.0f;

	if (i >= n)
		return;
	for (int j = 0; j < d; j++)
	{
		const float v = __fsub_rn(XT[(int64_t) j * n + i], mu[j]);

		s = __fadd_rn(s, __fmul_rn(v, v));
	}
	nx[i] = s;
}

/*
 * The rows as mma A fragments: warp w takes tile w (16 rows), its lane l
 * each k-step's 8 elements lane l of a mma holds (rows l/4 and l/4 + 8,
 * columns 2(l%4), +1, +8, +9), (x - mu) s in FP16, 0 past n and d.
 */
__global__ void __launch_bounds__(PP_THREADS)
pp_scr_convert(const float *__restrict__ XT, int64_t n, int d, pp_scr Z)
{
	const int	lane = threadIdx.x % 32;
	const int64_t tile = ((int64_t) blockIdx.x * PP_THREADS + threadIdx.x) / 32,
				r0 = tile * 16 + lane / 4;
	const float s = Z.sc[0];

	if (tile >= Z.ntile)
		return;
	for (int ks = 0; ks < Z.ks; ks++)
	{
		const int	c0 = ks * 16 + (lane % 4) * 2;
		float		v[8];

#pragma unroll
		for (int u = 0; u < 8; u++)
		{
			const int64_t r = r0 + (u & 2 ? 8 : 0);
			const int	c = c0 + (u & 1) + (u & 4 ? 8 : 0);

			v[u] = r < n && c < d ? __fmul_rn(__fsub_rn(XT[(int64_t) c * n + r], Z.mu[c]), s) : 0.0f;
		}
		Z.XH[(tile * Z.ks + ks) * 32 + lane] = make_uint4(pp_h2(v[0], v[1]), pp_h2(v[2], v[3]),
														  pp_h2(v[4], v[5]), pp_h2(v[6], v[7]));
	}
}

#define PP_QB 128				/* pp_scr_pass: a warp's queued rows held back */

/*
 * A warp's n queued rows in buf out to the queue, one atomic for them (the
 * whole warp; its lanes see buf's writes): 0, the rows left in buf.
 */
__device__ __forceinline__ unsigned
pp_scr_flush(const pp_scr &Z, unsigned *buf, unsigned n)
{
	unsigned	base = 0;

	__syncwarp();
	if (n == 0)
		return 0;
	if (threadIdx.x % 32 == 0)
		base = atomicAdd(Z.qn, n);
	base = __shfl_sync(0xffffffffu, base, 0);
	for (unsigned i = threadIdx.x % 32; i < n; i += 32)
		Z.qrow[base + i] = buf[i];
	__syncwarp();
	return 0;
}

/* pp_scr_pass's least blocks an SM: TPW tiles' fragments and sums in registers */
constexpr int
pp_scr_blocks(int TPW)
{
	return TPW == 1 ? 4 : TPW == 2 ? 3 : TPW == 4 ? 2 : 1;
}

/*
 * The step's screen: NT groups of 8 trials as mma B fragments in shared
 * memory (bf: ks x NT x 32), their norms and parts of the bound; then each
 * warp TPW tiles of 16 rows at a time, their rows' norms and D² and up to
 * 8 fragments a lane loaded at once (TPW tiles of at most 8 / TPW k-steps,
 * or one tile's k-steps 8 at a time), and the rows with a pair undecided
 * (pp_scr_skip) queued: held in the warp's buffer, PP_QB at a time out
 * with one atomic, so that a warp seldom waits on one.
 */
template <int NT, int TPW>
__global__ void __launch_bounds__(PP_THREADS, pp_scr_blocks(TPW))
pp_scr_pass(pp_state P, int L)
{
	constexpr int W = PP_THREADS / 32,
				KC = TPW > 1 ? 8 / TPW : 8;	/* k-steps a tile loads at once */
	extern __shared__ uint2 bf[];
	__shared__ float nq[NT * 8],
				qb[NT * 8],
				qa[NT * 8];
	__shared__ unsigned wbuf[W][PP_QB];	/* each warp's queued rows, before they go out */
	const pp_scr &Z = P.Z;
	const int	lane = threadIdx.x % 32,
				warp = threadIdx.x / 32,
				ks = Z.ks;
	const float s = Z.sc[0],
				is2x2 = 2.0f * Z.sc[1];
	const pp_scr_k K = pp_scr_consts(ks * 16, Z.sc[2]);
	const unsigned full = 0xffffffffu,
				below = (1u << lane) - 1;
	unsigned	wn = 0;			/* rows in the warp's buffer */

	for (int e = threadIdx.x; e < ks * NT * 32; e += PP_THREADS)
	{
		const int	l = e % 32,
					t = e / 32 % NT * 8 + l / 4,
					k0 = e / (32 * NT) * 16 + (l % 4) * 2;
		float		v[4];

#pragma unroll
		for (int u = 0; u < 4; u++)
		{
			const int	k = k0 + (u & 1) + (u & 2 ? 8 : 0);

			v[u] = t < L && k < P.d ?
				__fmul_rn(__fsub_rn(P.cand[k * KM_PP_LMAX + t], Z.mu[k]), s) : 0.0f;
		}
		bf[e] = make_uint2(pp_h2(v[0], v[1]), pp_h2(v[2], v[3]));
	}
	if (threadIdx.x < NT * 8)
	{
		const int	t = threadIdx.x;
		float		q = 0.0f;

		for (int j = 0; t < L && j < P.d; j++)
		{
			const float w = __fsub_rn(P.cand[j * KM_PP_LMAX + t], Z.mu[j]);

			q = __fadd_rn(q, __fmul_rn(w, w));
		}
		nq[t] = q;
		qb[t] = pp_scr_norm_ub(K, q);
		qa[t] = pp_scr_part(K, q, qb[t], K.c4);
	}
	__syncthreads();

	/* 32-bit rows and fragments: n < 2^32, n d <= KM_PP_SCREEN_MAX_ND */
	for (unsigned t0 = (blockIdx.x * W + warp) * TPW; t0 < (unsigned) Z.ntile; t0 += gridDim.x * W * TPW)
	{
		float		acc[TPW][NT][4] = {},
					nx[TPW][2],
					cl[TPW][2];

		/* the epilogue's operands first: their loads in flight with the fragments' */
#pragma unroll
		for (int p = 0; p < TPW; p++)
#pragma unroll
			for (int h = 0; h < 2; h++)
			{
				const unsigned r = (t0 + p) * 16 + lane / 4 + 8 * h;

				nx[p][h] = r < (unsigned) P.n ? Z.nx[r] : 0.0f;
				cl[p][h] = r < (unsigned) P.n ? P.terms[r] : 0.0f;
			}
		for (int k0 = 0; k0 < ks; k0 += KC)
		{
			uint4		a[TPW][KC];

#pragma unroll
			for (int p = 0; p < TPW; p++)
#pragma unroll
				for (int u = 0; u < KC; u++)
					if (k0 + u < ks)
						a[p][u] = t0 + p < (unsigned) Z.ntile ?
							__ldcs(Z.XH + ((t0 + p) * ks + k0 + u) * 32 + lane) : make_uint4(0, 0, 0, 0);
#pragma unroll
			for (int p = 0; p < TPW; p++)
#pragma unroll
				for (int u = 0; u < KC; u++)
					if (k0 + u < ks)
#pragma unroll
						for (int nt = 0; nt < NT; nt++)
							mma_f16(acc[p][nt], a[p][u], bf[((k0 + u) * NT + nt) * 32 + lane]);
		}
#pragma unroll
		for (int p = 0; p < TPW; p++)
#pragma unroll
			for (int h = 0; h < 2; h++)
			{
				const unsigned r = (t0 + p) * 16 + lane / 4 + 8 * h;
				unsigned	m = 0;

				if (r < (unsigned) P.n)
				{
					const float xb = pp_scr_norm_ub(K, nx[p][h]),
								c2xb = __fmul_rn(K.c2, xb),
								rp = pp_scr_part(K, nx[p][h], xb, 0.0f);

#pragma unroll
					for (int nt = 0; nt < NT; nt++)
#pragma unroll
						for (int v = 0; v < 2; v++)
						{
							const int	t = nt * 8 + (lane % 4) * 2 + v;

							if (t < L && !pp_scr_skip(K, acc[p][nt][2 * h + v], is2x2, nx[p][h], nq[t],
													  c2xb, qb[t], __fadd_rn(rp, qa[t]), cl[p][h]))
								m |= 1u << t;
						}
				}
				m |= __shfl_xor_sync(full, m, 1);
				m |= __shfl_xor_sync(full, m, 2);
				{
					const unsigned bq = __ballot_sync(full, lane % 4 == 0 && m != 0);

					if (wn + __popc(bq) > PP_QB)
						wn = pp_scr_flush(Z, wbuf[warp], wn);
					if (bq >> lane & 1)
						wbuf[warp][wn + __popc(bq & below)] = r;
					wn += __popc(bq);
				}
			}
	}
	pp_scr_flush(Z, wbuf[warp], wn);
}

/*
 * The queued rows' float distances² to the LT >= L trials, pp_terms's
 * operations in its order, kept for the winner (qd); each lowered term's
 * gain taken off its trial's block sum, a warp's at once where its rows
 * share a block.  A block takes 32 queued rows at a time, a warp 4 of
 * them, lane l trials l % 8 + 8v of row l / 8.  The rows come from their
 * row-major copy (a row's floats in a few sectors, where XT would give
 * each its own) and, with the trials, through shared memory, PP_XC
 * dimensions at a time: every load of a chunk is in flight at once,
 * where a thread reading its own row would wait on them one by one.
 */
#define PP_XR 4					/* pp_scr_exact: rows a warp */
#define PP_XC 128				/* pp_scr_exact: dimensions staged at once */

template <int LT>
__global__ void __launch_bounds__(PP_THREADS)
pp_scr_exact(pp_state P, int L)
{
	constexpr int W = PP_THREADS / 32;
	__shared__ float xs[W][PP_XR][PP_XC + 1],	/* + 1: the 4 rows in 4 banks */
				cs[PP_XC][LT];
	const unsigned nq = *P.Z.qn,
				full = 0xffffffffu;
	const int	lane = threadIdx.x % 32,
				warp = threadIdx.x / 32,
				rr = lane / 8,
				tl = lane % 8;
	const double S = P.g->S;

	for (int64_t e0 = (int64_t) blockIdx.x * W * PP_XR; e0 < nq; e0 += (int64_t) gridDim.x * W * PP_XR)
	{
		const int64_t e = e0 + warp * PP_XR + rr;
		const bool	on = e < nq;
		const int64_t i = P.Z.qrow[on ? e : e0],
					b = i / KM_BLOCK;
		float		q[LT / 8];

#pragma unroll
		for (int v = 0; v < LT / 8; v++)
			q[v] = 0.0f;
		for (int j0 = 0; j0 < P.d; j0 += PP_XC)
		{
			const int	dc = P.d - j0 < PP_XC ? P.d - j0 : PP_XC;

			__syncthreads();
			for (int x = threadIdx.x; x < dc * LT; x += PP_THREADS)
				cs[x / LT][x % LT] = P.cand[(j0 + x / LT) * KM_PP_LMAX + x % LT];
#pragma unroll
			for (int r = 0; r < PP_XR; r++)
			{
				const int64_t ir = __shfl_sync(full, i, r * 8);

				for (int j = lane; j < dc; j += 32)
					xs[warp][r][j] = P.Z.XR[ir * P.d + j0 + j];
			}
			__syncthreads();
			for (int j = 0; j < dc; j++)
			{
				const float x = xs[warp][rr][j];

#pragma unroll
				for (int v = 0; v < LT / 8; v++)
					q[v] = gc_l2_step(q[v], x, cs[j][tl + 8 * v]);
			}
		}
		{
			const float cl = P.terms[i];
			const uint64_t qc = gc_km_pot_q(gc_km_pot_term(nullptr, i, cl), S);
			const bool	one = __all_sync(full, b == __shfl_sync(full, b, 0));

#pragma unroll
			for (int v = 0; v < LT / 8; v++)
			{
				const int	t = tl + 8 * v;
				uint64_t	g = 0;

				if (on && t < L)
				{
					P.Z.qd[e * L + t] = q[v];
					if (q[v] < cl)
						g = qc - gc_km_pot_q(gc_km_pot_term(nullptr, i, q[v]), S);
				}
				if (one)
				{
					g += __shfl_xor_sync(full, g, 8);
					g += __shfl_xor_sync(full, g, 16);
					if (rr == 0 && g != 0)
						atomicAdd(P.bs + (int64_t) t * P.nb + b, (unsigned long long) (0 - g));
				}
				else if (g != 0)
					atomicAdd(P.bs + (int64_t) t * P.nb + b, (unsigned long long) (0 - g));
			}
		}
	}
}

/* The winner's distances lower its queued rows' D²; their blocks dirty. */
__global__ void __launch_bounds__(PP_THREADS)
pp_scr_apply(pp_state P, int L)
{
	const unsigned nq = *P.Z.qn;
	const int	best = *P.best;

	for (int64_t e = (int64_t) blockIdx.x * PP_THREADS + threadIdx.x; e < nq;
		 e += (int64_t) gridDim.x * PP_THREADS)
	{
		const int64_t i = P.Z.qrow[e];
		const float v = P.Z.qd[e * L + best];

		if (v < P.terms[i])
		{
			P.terms[i] = v;
			P.Z.dirty[i / KM_BLOCK] = 1;
		}
	}
}

/*
 * Block b of KM_BLOCK rows: its largest D² again where the winner changed
 * one; the last block done takes the largest of all, the next grid from
 * it and, on the same grid, the winner's block sums as the draws' (bq and
 * their prefix off); on a new one pp_regrid's.
 */
__global__ void __launch_bounds__(PP_THREADS)
pp_scr_rescan(pp_state P)
{
	typedef cub::BlockReduce<unsigned, PP_THREADS> R;
	__shared__ union
	{
		R::TempStorage r;
		pp_scan_t::TempStorage s;
	}			ts;
	__shared__ bool last,
				same;
	const int64_t b = blockIdx.x;
	const bool	dirty = P.Z.dirty[b] != 0;
	unsigned	m = 0;

	if (dirty)
	{
		const int64_t i1 = (b + 1) * KM_BLOCK < P.n ? (b + 1) * KM_BLOCK : P.n;

		for (int64_t i = b * KM_BLOCK + threadIdx.x; i < i1; i += PP_THREADS)
			m = max(m, __float_as_uint(P.terms[i]));
		m = R(ts.r).Reduce(m, cuda::maximum<>{});
		if (threadIdx.x == 0)
		{
			P.Z.bmx[b] = m;
			P.Z.dirty[b] = 0;
		}
	}
	if (threadIdx.x == 0)
	{
		__threadfence();
		last = atomicAdd(P.Z.done, 1u) == gridDim.x - 1;
	}
	__syncthreads();
	if (!last)
		return;
	__threadfence();
	m = 0;
	for (int64_t c = threadIdx.x; c < P.nb; c += PP_THREADS)
		m = max(m, __ldcg(P.Z.bmx + c));
	m = R(ts.r).Reduce(m, cuda::maximum<>{});
	if (threadIdx.x == 0)
	{
		const double S = gc_km_pot_scale((double) __uint_as_float(m), P.n);

		same = S == P.g->S;
		P.g->S = S;
		P.g->regrid = !same;
		*P.Z.done = 0;
	}
	__syncthreads();
	if (same)
	{
		const uint64_t *w = (const uint64_t *) P.bs + (int64_t) *P.best * P.nb;

		for (int64_t c = threadIdx.x; c < P.nb; c += PP_THREADS)
			P.bq[c] = __ldcg(w + c);
		pp_prefix_of(w, P.nb, P.off, ts.s);
	}
}

/* pp_scr_pass with TPW tiles a warp at once: 8 / ks of them up to 8 k-steps, so
 * that a lane has 8 fragments' loads in flight, or 4 at 5 to 7 */
template <int NT>
static void
pp_scr_pass_tpw(const pp_state &P, int L, unsigned grid, size_t smem, cudaStream_t s)
{
	const int	ks = P.Z.ks;

	if (ks >= 8)
		pp_scr_pass<NT, 1><<<grid, PP_THREADS, smem, s>>>(P, L);
	else if (ks >= 4)
		pp_scr_pass<NT, 2><<<grid, PP_THREADS, smem, s>>>(P, L);
	else if (ks >= 2)
		pp_scr_pass<NT, 4><<<grid, PP_THREADS, smem, s>>>(P, L);
	else
		pp_scr_pass<NT, 8><<<grid, PP_THREADS, smem, s>>>(P, L);
}

/* One screened step's pass: the screen, then the queued rows' distances. */
static void
pp_scr_launch(const pp_state &P, int L, int nsm, cudaStream_t s)
{
	const int	nt = (L + 7) / 8;
	const size_t smem = sizeof(uint2) * (size_t) P.Z.ks * nt * 32;
	const unsigned grid = (unsigned) std::min<int64_t>(blocks_for(P.Z.ntile * 32, PP_THREADS),
														(int64_t) nsm * 4);

	if (nt == 1)
		pp_scr_pass_tpw<1>(P, L, grid, smem, s);
	else if (nt == 2)
		pp_scr_pass_tpw<2>(P, L, grid, smem, s);
	else
		pp_scr_pass_tpw<3>(P, L, grid, smem, s);
	if (L <= 8)
		pp_scr_exact<8><<<nsm * 4, PP_THREADS, 0, s>>>(P, L);
	else if (L <= 16)
		pp_scr_exact<16><<<nsm * 4, PP_THREADS, 0, s>>>(P, L);
	else
		pp_scr_exact<KM_PP_LMAX><<<nsm * 4, PP_THREADS, 0, s>>>(P, L);
}

/*
 * Whether k-means++ over d dimensions with L trials (weights w) runs
 * screened (the screened pass): GPUCLUST_KM_PP_SCREEN=0 never, =1 wherever
 * it can (tests, benchmarks), else from KM_PP_SCREEN_MIN_D dimensions.
 * Not weighted, not on the persistent path, and only where the trials'
 * fragments fit PP_SCR_SMEM, a row's number 32 bits (the queue) and the
 * rows' copies KM_PP_SCREEN_MAX_ND floats (gc_kmeans_gpu_mem_bytes counts
 * them).
 */
static bool
pp_scr_wanted(int64_t n, int d, int L, const double *w, bool persist)
{
	const char *env = getenv("GPUCLUST_KM_PP_SCREEN");
	const size_t smem = sizeof(uint2) * (size_t) ((d + 15) / 16) * ((L + 7) / 8) * 32;

	if (w != nullptr || persist || (env && atoi(env) == 0) || smem > PP_SCR_SMEM ||
		n > (int64_t) UINT32_MAX || (double) n * d > KM_PP_SCREEN_MAX_ND)
		return false;
	return (env && atoi(env) == 1) || d >= KM_PP_SCREEN_MIN_D;
}

/*
 * The screen's buffers and the rows' fragments (the screened pass): the
 * mean, the scale from the largest |x - mu|, the norms, the fragments;
 * the rows row-major (XR, or the caller's).
 */
static gc_code
pp_scr_open(pp_state &P, cudaStream_t s, const float *XR, int L, gc_status *st)
{
	pp_scr	   &Z = P.Z;
	const int64_t n = P.n;

	Z.ks = (P.d + 15) / 16;
	Z.ntile = (n + 15) / 16;
	Z.XR = XR;
	if (XR == nullptr)
	{
		KM_CK(gc_dalloc((void **) &Z.XRown, sizeof(float) * (size_t) n * P.d, s));
		pp_scr_rows<<<dim3((unsigned) blocks_for(n, 32), (unsigned) blocks_for(P.d, 32)), dim3(32, 8), 0, s>>>(
			P.XT, n, P.d, Z.XRown);
		KM_LAUNCHED();
		Z.XR = Z.XRown;
	}
	KM_CK(gc_dalloc((void **) &Z.XH, sizeof(uint4) * (size_t) Z.ntile * Z.ks * 32, s));
	KM_CK(gc_dalloc((void **) &Z.nx, sizeof(float) * (size_t) n, s));
	KM_CK(gc_dalloc((void **) &Z.mu, sizeof(float) * (size_t) P.d, s));
	KM_CK(gc_dalloc((void **) &Z.sc, sizeof(float) * 4, s));
	KM_CK(gc_dalloc((void **) &Z.amax, sizeof(unsigned), s));
	KM_CK(gc_dalloc((void **) &Z.qrow, sizeof(unsigned) * (size_t) n, s));
	KM_CK(gc_dalloc((void **) &Z.qd, sizeof(float) * (size_t) n * L, s));
	KM_CK(gc_dalloc((void **) &Z.qn, sizeof(unsigned), s));
	KM_CK(gc_dalloc((void **) &Z.bmx, sizeof(unsigned) * (size_t) P.nb, s));
	KM_CK(gc_dalloc((void **) &Z.dirty, (size_t) P.nb, s));
	KM_CK(gc_dalloc((void **) &Z.done, sizeof(unsigned), s));
	KM_CK(cudaMemsetAsync(Z.amax, 0, sizeof(unsigned), s));
	KM_CK(cudaMemsetAsync(Z.qn, 0, sizeof(unsigned), s));
	KM_CK(cudaMemsetAsync(Z.dirty, 1, (size_t) P.nb, s));
	KM_CK(cudaMemsetAsync(Z.done, 0, sizeof(unsigned), s));
	pp_scr_mean<<<P.d, PP_THREADS, 0, s>>>(P.XT, n, Z.mu);
	KM_LAUNCHED();
	pp_scr_amax<<<dim3((unsigned) std::min<int64_t>(blocks_for(n, PP_THREADS), 64), P.d),
		PP_THREADS, 0, s>>>(P.XT, n, Z.mu, Z.amax);
	KM_LAUNCHED();
	pp_scr_scale<<<1, 1, 0, s>>>(Z);
	KM_LAUNCHED();
	pp_scr_norms<<<blocks_for(n, PP_THREADS), PP_THREADS, 0, s>>>(P.XT, n, P.d, Z.mu, Z.nx);
	KM_LAUNCHED();
	pp_scr_convert<<<blocks_for(Z.ntile * 32, PP_THREADS), PP_THREADS, 0, s>>>(P.XT, n, P.d, Z);
	KM_LAUNCHED();
	return GC_OK;
}

#endif							/* GPUCLUST_KMEANS_PP_SCREEN_CUH */
