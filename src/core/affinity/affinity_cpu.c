/*
 * affinity_cpu.c — gc_ap_cpu: affinity propagation's passes on all CPU
 * cores (OpenMP), for the one driver (affinity.c, which says what every
 * entry is), in double precision.
 *
 * Every entry is computed by one thread in a fixed order, so the results
 * do not depend on the number of threads.  The median's order statistics
 * come from an exact parallel radix select on the bit patterns of the
 * distances (no copy of the matrix).  One iteration is two passes: the
 * column sums of Rp, then per row the A update, the exemplar flag and the
 * next R update (the row's max and second max of A+S found in the same
 * sweep): 48 bytes of memory traffic per matrix entry, against about 240
 * for numpy's sequence of whole-matrix operations.
 *
 * Memory: S, R and A, n x n doubles each, plus O(n) (gc_ap_mem_bytes);
 * the caller checks it against its limits before calling.  The cancel
 * flags are polled every few rows of every pass.
 */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <omp.h>

#include "affinity/affinity.h"
#include "common/rng.h"

/* members per task of the exemplar refinement */
#define AP_REFINE_CHUNK 512
/* rows between two polls of the cancel flags */
#define AP_POLL_ROWS 16
/* radix select: digit width and number of buckets */
#define AP_RADIX_BITS 16
#define AP_RADIX_SIZE (1 << AP_RADIX_BITS)

/* ------------------------------------------------------------------ */

typedef struct ap_ws
{
	const gc_ctx *ctx;
	int64_t		n;
	int			nthreads;
	double	   *S;				/* n x n similarities, diagonal = preference */
	double	   *R;				/* n x n responsibilities */
	double	   *A;				/* n x n availabilities */
	double	   *cs;				/* n column sums of Rp */
	uint8_t    *E;				/* n exemplar flags of the last iteration */
	uint8_t    *Eprev;			/* and of the one before */
	const float *X;
	int			d;
	int			stop;			/* a cancel flag was seen */
} ap_ws;

/* True when the pass should skip row i: a cancel flag is (or was) up. */
static inline bool
ap_poll(ap_ws *w, int64_t i)
{
	if (__atomic_load_n(&w->stop, __ATOMIC_RELAXED))
		return true;
	if (i % AP_POLL_ROWS == 0 && gc_cancelled(w->ctx))
	{
		__atomic_store_n(&w->stop, 1, __ATOMIC_RELAXED);
		return true;
	}
	return false;
}

/* n x n doubles */
static double *
ap_alloc_matrix(int64_t n)
{
	return malloc((size_t) n * (size_t) n * sizeof(double));
}

/*
 * S[i][j] = -(sum over k of (x_ik - x_jk)^2), in double, in dimension order.
 * When n >= d, X transposed to doubles (d x n, in A's memory) lets the inner
 * loop run over j.  Then zeroes R and A (first touch by the rows' threads).
 */
static void
ap_similarities(ap_ws *w, const float *X, int d)
{
	const int64_t n = w->n;
	double	   *Xt = n >= d ? w->A : NULL;

	if (Xt != NULL)
	{
#pragma omp parallel for num_threads(w->nthreads) schedule(static)
		for (int64_t j = 0; j < n; j++)
			for (int k = 0; k < d; k++)
				Xt[(size_t) k * n + j] = (double) X[(size_t) j * d + k];
	}

#pragma omp parallel for num_threads(w->nthreads) schedule(static)
	for (int64_t i = 0; i < n; i++)
	{
		double	   *restrict Si = w->S + (size_t) i * n;

		if (ap_poll(w, i))
			continue;
		if (Xt != NULL)
		{
			for (int k = 0; k < d; k++)
			{
				const double xi = (double) X[(size_t) i * d + k];
				const double *restrict xk = Xt + (size_t) k * n;

				if (k == 0)
					for (int64_t j = 0; j < n; j++)
					{
						double		t = xi - xk[j];

						Si[j] = t * t;
					}
				else
					for (int64_t j = 0; j < n; j++)
					{
						double		t = xi - xk[j];

						Si[j] += t * t;
					}
			}
			for (int64_t j = 0; j < n; j++)
				Si[j] = -Si[j];
		}
		else
		{
			const float *xi = X + (size_t) i * d;

			for (int64_t j = 0; j < n; j++)
				Si[j] = -gc_dist2_f64(xi, X + (size_t) j * d, d);
		}
	}

#pragma omp parallel for num_threads(w->nthreads) schedule(static)
	for (int64_t i = 0; i < n; i++)
	{
		if (ap_poll(w, i))
			continue;
		memset(w->R + (size_t) i * n, 0, sizeof(double) * (size_t) n);
		memset(w->A + (size_t) i * n, 0, sizeof(double) * (size_t) n);
	}
}

/* Are all off-diagonal similarities equal (n >= 2)? */
static bool
ap_all_equal(ap_ws *w)
{
	const int64_t n = w->n;
	const double s0 = w->S[1];
	int			differ = 0;

#pragma omp parallel for num_threads(w->nthreads) schedule(static) reduction(|:differ)
	for (int64_t i = 0; i < n; i++)
	{
		const double *Si = w->S + (size_t) i * n;
		int			dr = 0;

		if (differ || ap_poll(w, i))
			continue;
		for (int64_t j = 0; j < n; j++)
			dr |= (j != i) & (Si[j] != s0);
		differ |= dr;
	}
	return differ == 0;
}

/*
 * The m-th smallest (0-based) of the upper triangle's distances
 * x = -S[i][j], i < j, all >= 0, by radix select on their bit patterns
 * (monotonic for non-negative doubles): AP_RADIX_BITS bits per pass.
 */
static gc_code
ap_select_upper(ap_ws *w, int64_t m, double *out, gc_status *st)
{
	const int64_t n = w->n;
	/* one histogram of 512 kB per thread of the team */
	const int	nt = w->nthreads;
	int64_t    *hist = malloc(sizeof(int64_t) * (size_t) nt * AP_RADIX_SIZE);
	uint64_t	prefix = 0,
				mask = 0;
	int64_t		rank = m;

	if (hist == NULL)
		return gc_fail(st, GC_ENOMEM, "affinity propagation: no memory for the median");

	for (int shift = 64 - AP_RADIX_BITS; shift >= 0; shift -= AP_RADIX_BITS)
	{
		int64_t		bucket;

		memset(hist, 0, sizeof(int64_t) * (size_t) nt * AP_RADIX_SIZE);
#pragma omp parallel num_threads(nt)
		{
			int64_t    *h = hist + (size_t) omp_get_thread_num() * AP_RADIX_SIZE;

#pragma omp for schedule(dynamic, 16)
			for (int64_t i = 0; i < n - 1; i++)
			{
				const double *Si = w->S + (size_t) i * n;

				if (ap_poll(w, i))
					continue;
				for (int64_t j = i + 1; j < n; j++)
				{
					double		x = -Si[j];
					uint64_t	b;

					memcpy(&b, &x, sizeof(b));
					if ((b & mask) == prefix)
						h[(b >> shift) & (AP_RADIX_SIZE - 1)]++;
				}
			}
		}
		if (w->stop)
		{
			free(hist);
			return gc_fail(st, GC_ECANCEL, "canceled");
		}
		for (bucket = 0; bucket < AP_RADIX_SIZE; bucket++)
		{
			int64_t		cnt = 0;

			for (int t = 0; t < nt; t++)
				cnt += hist[(size_t) t * AP_RADIX_SIZE + bucket];
			if (rank < cnt)
				break;
			rank -= cnt;
		}
		if (bucket == AP_RADIX_SIZE)
		{
			free(hist);
			return gc_fail(st, GC_EINTERNAL, "affinity propagation: median selection lost its rank");
		}
		prefix |= (uint64_t) bucket << shift;
		mask |= (uint64_t) (AP_RADIX_SIZE - 1) << shift;
	}
	free(hist);
	memcpy(out, &prefix, sizeof(*out));
	return GC_OK;
}

/* Keeps the two largest of the values seen (a multiset: ties count twice). */
#define AP_TOP2(v, m1, m2) \
	do { \
		double	ap_lo_ = (v) < (m1) ? (v) : (m1); \
		(m1) = (v) > (m1) ? (v) : (m1); \
		(m2) = ap_lo_ > (m2) ? ap_lo_ : (m2); \
	} while (0)

/*
 * A update of an off-diagonal stretch [j0, j1) of row i, with A+S's top 2.
 * Two-lane vectors (GCC vector extensions, SSE2 on x86-64), two of them
 * per step: four independent top-2 accumulators, which keep the
 * compare-and-select chains short; the multiset's top 2 do not depend on
 * how the values are split among them.  Selects are written as masks, so
 * every value is the one the scalar ternaries give.
 */
typedef double ap_v2d __attribute__((vector_size(16)));
typedef int64_t ap_v2l __attribute__((vector_size(16)));

/* m ? a : b, lane by lane (a lane of m is all ones or all zeros) */
#define AP_VSEL(m, a, b) \
	((ap_v2d) ((((ap_v2l) (a)) & (m)) | (((ap_v2l) (b)) & ~(m))))

static inline ap_v2d
ap_vload(const double *p)
{
	ap_v2d		v;

	memcpy(&v, p, sizeof(v));
	return v;
}

/* one two-lane step of the A update and top 2 at j */
#define AP_A_STEP(j, m1, m2) \
	do { \
		ap_v2d	r_ = ap_vload(Rr + (j)); \
		ap_v2d	t_ = AP_VSEL(r_ > zero, r_, zero) - ap_vload(cs + (j)); \
		ap_v2d	a_, v_, lo_; \
		t_ = AP_VSEL(t_ > zero, t_, zero); \
		a_ = ap_vload(Ar + (j)) * vd - t_ * vo; \
		memcpy(Ar + (j), &a_, sizeof(a_)); \
		v_ = a_ + ap_vload(Sr + (j)); \
		lo_ = AP_VSEL(v_ < (m1), v_, (m1)); \
		(m1) = AP_VSEL(v_ > (m1), v_, (m1)); \
		(m2) = AP_VSEL(lo_ > (m2), lo_, (m2)); \
	} while (0)

static inline void
ap_a_stretch(double *restrict Ar, const double *restrict Rr,
			 const double *restrict Sr, const double *restrict cs,
			 int64_t j0, int64_t j1, double damping, double omd,
			 double *m1p, double *m2p)
{
	const ap_v2d zero = {0.0, 0.0};
	const ap_v2d vd = {damping, damping};
	const ap_v2d vo = {omd, omd};
	ap_v2d		m1a = {-INFINITY, -INFINITY},
				m2a = m1a,
				m1b = m1a,
				m2b = m1a;
	int64_t		j = j0;

	for (; j + 4 <= j1; j += 4)
	{
		AP_A_STEP(j, m1a, m2a);
		AP_A_STEP(j + 2, m1b, m2b);
	}
	for (; j < j1; j++)
	{
		double		rp = Rr[j] > 0.0 ? Rr[j] : 0.0;
		double		t = rp - cs[j];
		double		a,
					v;

		t = t > 0.0 ? t : 0.0;
		a = Ar[j] * damping - t * omd;
		Ar[j] = a;
		v = a + Sr[j];
		AP_TOP2(v, *m1p, *m2p);
	}
	for (int l = 0; l < 2; l++)
	{
		AP_TOP2(m1a[l], *m1p, *m2p);
		AP_TOP2(m2a[l], *m1p, *m2p);
		AP_TOP2(m1b[l], *m1p, *m2p);
		AP_TOP2(m2b[l], *m1p, *m2p);
	}
}

#define AP_LANES 4

/* A+S's top 2 over a whole row, A as it is (the first pass only) */
static inline void
ap_top2_row(const double *restrict Ar, const double *restrict Sr, int64_t n,
			double *m1p, double *m2p)
{
	double		m1[AP_LANES],
				m2[AP_LANES];
	int64_t		j = 0;

	for (int l = 0; l < AP_LANES; l++)
		m1[l] = m2[l] = -INFINITY;
	for (; j + AP_LANES <= n; j += AP_LANES)
		for (int l = 0; l < AP_LANES; l++)
		{
			double		v = Ar[j + l] + Sr[j + l];

			AP_TOP2(v, m1[l], m2[l]);
		}
	for (; j < n; j++)
	{
		double		v = Ar[j] + Sr[j];

		AP_TOP2(v, m1[0], m2[0]);
	}
	for (int l = 0; l < AP_LANES; l++)
	{
		AP_TOP2(m1[l], *m1p, *m2p);
		AP_TOP2(m2[l], *m1p, *m2p);
	}
}

/*
 * The tie-breaking noise of S[i][j]: scikit-learn's
 * (eps*S + 100*tiny) * z, with z uniform on [-sqrt 3, sqrt 3) (mean 0,
 * variance 1) from the counter-based generator at counter i*n + j.
 */
static inline void
ap_noise_row(double *restrict Sr, int64_t n, int64_t i)
{
	const double sqrt3 = sqrt(3.0);
	const double tiny100 = DBL_MIN * 100;

	for (int64_t j = 0; j < n; j++)
	{
		double		u = gc_rng_uniform(GC_AP_NOISE_SEED, GC_AP_NOISE_STREAM,
									   (uint64_t) (i * n + j));
		double		z = (2.0 * u - 1.0) * sqrt3;
		double		t = DBL_EPSILON * Sr[j] + tiny100;

		t = t * z;
		Sr[j] = Sr[j] + t;
	}
}

/* Row i of a pass of ap_rows. */
static void
ap_row(ap_ws *w, int64_t i, double damping, bool update_a, bool update_r)
{
	const int64_t n = w->n;
	const double omd = 1.0 - damping;
	double	   *restrict Ar = w->A + (size_t) i * n;
	double	   *restrict Rr = w->R + (size_t) i * n;
	const double *restrict Sr = w->S + (size_t) i * n;
	double		m1 = -INFINITY,
				m2 = -INFINITY;

	if (update_a)
	{
		double		t,
					a,
					v;

		ap_a_stretch(Ar, Rr, Sr, w->cs, 0, i, damping, omd, &m1, &m2);
		/* the diagonal: R itself, not clipped */
		t = Rr[i] - w->cs[i];
		a = Ar[i] * damping - t * omd;
		Ar[i] = a;
		v = a + Sr[i];
		AP_TOP2(v, m1, m2);
		ap_a_stretch(Ar, Rr, Sr, w->cs, i + 1, n, damping, omd, &m1, &m2);
		w->E[i] = (Ar[i] + Rr[i]) > 0.0;
	}
	else
		ap_top2_row(Ar, Sr, n, &m1, &m2);
	if (update_r)
	{
		/*
		 * Y = m1 everywhere but at the argmax, which gets the second largest
		 * m2; on a tie m2 == m1, so which of the tied entries is "the"
		 * argmax does not matter.
		 */
		for (int64_t j = 0; j < n; j++)
		{
			double		v = Ar[j] + Sr[j];
			double		y = v == m1 ? m2 : m1;

			Rr[j] = Rr[j] * damping + (Sr[j] - y) * omd;
		}
	}
}

/*
 * One pass over the rows.  update_a: A from R and the column sums, and the
 * exemplar flags E; then (update_r) R from the new A.  Without update_a,
 * A is taken as it is (the first pass: A = 0).
 */
static void
ap_rows(ap_ws *w, double damping, bool update_a, bool update_r)
{
	const int64_t n = w->n;

#pragma omp parallel for num_threads(w->nthreads) schedule(static)
	for (int64_t i = 0; i < n; i++)
	{
		if (ap_poll(w, i))
			continue;
		ap_row(w, i, damping, update_a, update_r);
	}
}

/* The preference on the diagonal of S, then the noise on all of it. */
static void
ap_prepare_s(ap_ws *w, double pref)
{
	const int64_t n = w->n;

#pragma omp parallel for num_threads(w->nthreads) schedule(static)
	for (int64_t i = 0; i < n; i++)
	{
		if (ap_poll(w, i))
			continue;
		w->S[(size_t) i * n + i] = pref;
		ap_noise_row(w->S + (size_t) i * n, n, i);
	}
}

/* Rp[i][j] off the diagonal */
#define AP_RP(v) ((v) > 0.0 ? (v) : 0.0)

/*
 * c[j] += Rp[i][j] for rows i0 .. i0+3 in order, columns [a, b), none of
 * them on the diagonal.  Four rows at a time: four streams for the
 * prefetcher and c[j] kept in a register, the additions in row order.
 */
static inline void
ap_colsum4(double *restrict c, const double *restrict R, int64_t n,
		   int64_t i0, int64_t a, int64_t b)
{
	const double *restrict R0 = R + (size_t) i0 * n;
	const double *restrict R1 = R0 + n;
	const double *restrict R2 = R1 + n;
	const double *restrict R3 = R2 + n;

	for (int64_t j = a; j < b; j++)
	{
		double		s = c[j];

		s += AP_RP(R0[j]);
		s += AP_RP(R1[j]);
		s += AP_RP(R2[j]);
		s += AP_RP(R3[j]);
		c[j] = s;
	}
}

/*
 * cs[j] = sum over i, in row order, of Rp[i][j] (Rp = max(R, 0) off the
 * diagonal, R on it).  The sum starts from 0.0 (numpy starts from row 0:
 * the same value, 0 + x == x).  One contiguous block of columns per
 * thread, its rows four at a time.
 */
static void
ap_colsum(ap_ws *w)
{
	const int64_t n = w->n;
	const int	nt = w->nthreads;
	const int64_t nb = n < nt ? n : nt;

#pragma omp parallel for num_threads(nt) schedule(static, 1)
	for (int64_t blk = 0; blk < nb; blk++)
	{
		const int64_t j0 = n * blk / nb;
		const int64_t j1 = n * (blk + 1) / nb;
		double	   *restrict c = w->cs;
		int64_t		i = 0;

		for (int64_t j = j0; j < j1; j++)
			c[j] = 0.0;
		for (; i + 4 <= n; i += 4)
		{
			/* the diagonal entries of these rows within the block */
			const int64_t d0 = i < j0 ? j0 : (i > j1 ? j1 : i);
			const int64_t d1 = i + 4 < j0 ? j0 : (i + 4 > j1 ? j1 : i + 4);

			if (ap_poll(w, i))
				break;
			ap_colsum4(c, w->R, n, i, j0, d0);
			for (int64_t j = d0; j < d1; j++)
			{
				double		s = c[j];

				for (int64_t r = i; r < i + 4; r++)
				{
					double		v = w->R[(size_t) r * n + j];

					s += r == j ? v : AP_RP(v);
				}
				c[j] = s;
			}
			ap_colsum4(c, w->R, n, i, d1, j1);
		}
		for (; i < n; i++)
		{
			const double *restrict Ri = w->R + (size_t) i * n;

			for (int64_t j = j0; j < j1; j++)
				c[j] += j == i ? Ri[j] : AP_RP(Ri[j]);
		}
	}
}

/* c[i] = the k of largest S[i][ex[k]] (first on ties), for every row */
static void
ap_assign(ap_ws *w, const int32_t *ex, int64_t K, int32_t *c)
{
	const int64_t n = w->n;

#pragma omp parallel for num_threads(w->nthreads) schedule(static)
	for (int64_t i = 0; i < n; i++)
	{
		const double *Si = w->S + (size_t) i * n;
		double		best = Si[ex[0]];
		int32_t		bk = 0;

		if (ap_poll(w, i))
			continue;
		for (int64_t k = 1; k < K; k++)
		{
			double		v = Si[ex[k]];

			if (v > best)
			{
				best = v;
				bk = (int32_t) k;
			}
		}
		c[i] = bk;
	}
}


/* ---- the passes, for gc_ap_run ---- */

static gc_code
ap_stopped(ap_ws *w, gc_status *st)
{
	return w->stop ? gc_fail(st, GC_ECANCEL, "canceled") : GC_OK;
}

static gc_code
cpu_similarities(void *v, gc_status *st)
{
	ap_ws	   *w = v;

	ap_similarities(w, w->X, w->d);
	return ap_stopped(w, st);
}

static gc_code
cpu_select_upper(void *v, int64_t m, double *out, gc_status *st)
{
	return ap_select_upper(v, m, out, st);
}

static gc_code
cpu_all_equal(void *v, bool *equal, double *s_last, gc_status *st)
{
	ap_ws	   *w = v;

	*equal = ap_all_equal(w);
	*s_last = w->S[w->n - 1];
	return ap_stopped(w, st);
}

static gc_code
cpu_prepare(void *v, double pref, gc_status *st)
{
	ap_ws	   *w = v;

	ap_prepare_s(w, pref);
	return ap_stopped(w, st);
}

static gc_code
cpu_first(void *v, double damping, gc_status *st)
{
	ap_ws	   *w = v;

	ap_rows(w, damping, false, true);
	return ap_stopped(w, st);
}

static gc_code
cpu_iterate(void *v, double damping, bool update_r, int64_t *K,
			int64_t *changed, gc_status *st)
{
	ap_ws	   *w = v;
	int64_t		k = 0,
				ch = 0;

	w->nthreads = gc_team_adapt(w->ctx);
	ap_colsum(w);
	if (w->stop)
		return ap_stopped(w, st);
	ap_rows(w, damping, true, update_r);
	if (w->stop)
		return ap_stopped(w, st);
	for (int64_t i = 0; i < w->n; i++)
	{
		k += w->E[i];
		ch += w->E[i] != w->Eprev[i];
	}
	memcpy(w->Eprev, w->E, (size_t) w->n);
	*K = k;
	*changed = ch;
	return GC_OK;
}

static gc_code
cpu_exemplars(void *v, uint8_t *E, gc_status *st)
{
	ap_ws	   *w = v;

	(void) st;
	memcpy(E, w->E, (size_t) w->n);
	return GC_OK;
}

static void
cpu_drop_messages(void *v)
{
	ap_ws	   *w = v;

	free(w->R);
	w->R = NULL;
	free(w->A);
	w->A = NULL;
}

static gc_code
cpu_assign(void *v, const int32_t *ex, int64_t K, int32_t *c, gc_status *st)
{
	ap_ws	   *w = v;

	ap_assign(w, ex, K, c);
	return ap_stopped(w, st);
}

/*
 * Tasks: a cluster's members in chunks of AP_REFINE_CHUNK, each chunk
 * summing its columns over the cluster's rows.
 */
static gc_code
cpu_scores(void *v, const int32_t *c, const int32_t *off, const int32_t *mem,
		   int64_t K, double *score, gc_status *st)
{
	ap_ws	   *w = v;
	const int64_t n = w->n;
	int64_t    *task = malloc(sizeof(int64_t) * (size_t) (K + n / AP_REFINE_CHUNK + 1));
	int64_t		ntask = 0;

	if (task == NULL)
		return gc_fail(st, GC_ENOMEM, "affinity propagation: no memory for the labelling (%lld rows)",
					   (long long) n);
	for (int64_t k = 0; k < K; k++)
		for (int64_t q0 = off[k]; q0 < off[k + 1]; q0 += AP_REFINE_CHUNK)
			task[ntask++] = q0;
#pragma omp parallel for num_threads(w->nthreads) schedule(dynamic, 1)
	for (int64_t t = 0; t < ntask; t++)
	{
		const int64_t q0 = task[t];
		const int32_t k = c[mem[q0]];
		const int64_t q1 = q0 + AP_REFINE_CHUNK < off[k + 1] ? q0 + AP_REFINE_CHUNK : off[k + 1];
		double		acc[AP_REFINE_CHUNK];

		if (ap_poll(w, 0))
			continue;
		for (int64_t pm = off[k]; pm < off[k + 1]; pm++)
		{
			const double *Sm = w->S + (size_t) mem[pm] * n;

			if (pm == off[k])
				for (int64_t q = q0; q < q1; q++)
					acc[q - q0] = Sm[mem[q]];
			else
				for (int64_t q = q0; q < q1; q++)
					acc[q - q0] += Sm[mem[q]];
		}
		for (int64_t q = q0; q < q1; q++)
			score[mem[q]] = acc[q - q0];
	}
	free(task);
	return ap_stopped(w, st);
}

static const gc_ap_ops ap_cpu_ops = {
	.similarities = cpu_similarities,
	.select_upper = cpu_select_upper,
	.all_equal = cpu_all_equal,
	.prepare = cpu_prepare,
	.first = cpu_first,
	.iterate = cpu_iterate,
	.exemplars = cpu_exemplars,
	.drop_messages = cpu_drop_messages,
	.assign = cpu_assign,
	.scores = cpu_scores,
};

gc_code
gc_ap_cpu(const gc_ctx *ctx, const float *X, int64_t n, int d,
		  const gc_ap_params *p, gc_ap_result *res, gc_status *st)
{
	ap_ws		w;
	gc_code		rc;

	if ((rc = gc_ap_check(ctx, X, n, d, p, res, st)) != GC_OK || n == 0)
		return rc;
	if (p->precision != GC_AP_FLOAT8)
		return gc_fail(st, GC_EINVAL, "affinity propagation in float4 runs only on the GPU");

	memset(&w, 0, sizeof(w));
	w.ctx = ctx;
	w.n = n;
	w.X = X;
	w.d = d;
	w.nthreads = gc_team_adapt(ctx);	/* again at every iteration */
	w.S = ap_alloc_matrix(n);
	w.R = ap_alloc_matrix(n);
	w.A = ap_alloc_matrix(n);
	w.cs = malloc(sizeof(double) * (size_t) n);
	w.E = calloc((size_t) n, 1);
	w.Eprev = calloc((size_t) n, 1);
	if (w.S == NULL || w.R == NULL || w.A == NULL || w.cs == NULL ||
		w.E == NULL || w.Eprev == NULL)
		rc = gc_fail(st, GC_ENOMEM, "affinity propagation: out of memory (%lld rows need %.1f MB)",
					 (long long) n, (double) gc_ap_mem_bytes(n) / (1024.0 * 1024.0));
	else
		rc = gc_ap_run(&ap_cpu_ops, &w, ctx, n, p, res, st);
	free(w.S);
	free(w.R);
	free(w.A);
	free(w.cs);
	free(w.E);
	free(w.Eprev);
	return rc;
}
