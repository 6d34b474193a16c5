/*
 * kmeans_assign.c — the k-means assignment step (nearest centre of every
 * row), the double-precision inertia, and the data variance behind tol.
 *
 * The kernel (kmeans_assign_kernel.h) is compiled for AVX-512, AVX2 and
 * baseline SSE2 and chosen at run time; all three compute every distance
 * exactly as gc_dist2 does, so they give identical labels.  The Lloyd
 * loop's assignment (gc_km_assign_bounded) scans only the rows that
 * Hamerly's bounds, widened by gc_dist2's rounding, cannot keep.
 */
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "kmeans/kmeans_internal.h"
#include "common/gpu.h"

#define KM_GLUE_(a, b) a##b
#define KM_GLUE(a, b) KM_GLUE_(a, b)

#define KM_W 16
#define KM_FN assign_block_w16
#define KM_TARGET __attribute__((target("avx512f")))
#include "kmeans/kmeans_assign_kernel.h"
#undef KM_W
#undef KM_FN
#undef KM_TARGET

#define KM_W 8
#define KM_FN assign_block_w8
#define KM_TARGET __attribute__((target("avx2")))
#include "kmeans/kmeans_assign_kernel.h"
#undef KM_W
#undef KM_FN
#undef KM_TARGET

#define KM_W 4
#define KM_FN assign_block_w4
#define KM_TARGET
#include "kmeans/kmeans_assign_kernel.h"
#undef KM_W
#undef KM_FN
#undef KM_TARGET

typedef int64_t (*assign_fn) (const float *, int64_t, int64_t, int,
							  const float *, int, int32_t *, float *);
typedef int64_t (*assign_list_fn) (const float *, const int64_t *, int64_t,
								   int, const float *, int, int32_t *,
								   float *, float *);

#ifdef GC_TESTING
static int	forced_width;
static int	forced_bounds = -1;
int64_t		gc_km_bounds_kept;

void
gc_km_force_width(int w)
{
	forced_width = w;
}

void
gc_km_force_bounds(int on)
{
	forced_bounds = on;
}
#endif

/* The widest kernel the CPU has (tests may force one), plain and listed. */
static int
pick_width(void)
{
#ifdef GC_TESTING
	if (forced_width == 4)
		return 4;
	if (forced_width == 8 && __builtin_cpu_supports("avx2"))
		return 8;
	if (forced_width == 16 && __builtin_cpu_supports("avx512f"))
		return 16;
#endif
	__builtin_cpu_init();
	if (__builtin_cpu_supports("avx512f"))
		return 16;
	if (__builtin_cpu_supports("avx2"))
		return 8;
	return 4;
}

static assign_fn
pick_assign_kernel(void)
{
	const int	w = pick_width();

	return w == 16 ? assign_block_w16 : w == 8 ? assign_block_w8 : assign_block_w4;
}

static assign_list_fn
pick_list_kernel(void)
{
	const int	w = pick_width();

	return w == 16 ? assign_block_w16_list : w == 8 ? assign_block_w8_list :
		assign_block_w4_list;
}

static inline int64_t
min64(int64_t a, int64_t b)
{
	return a < b ? a : b;
}

gc_km_ws *
gc_km_ws_create(int64_t n, int d, int k, int n_threads)
{
	gc_km_ws   *ws = calloc(1, sizeof(gc_km_ws));
	size_t		ct_bytes;

	if (ws == NULL)
		return NULL;
	ws->n = n;
	ws->d = d;
	ws->k = k;
	ws->nt = n_threads > 0 ? n_threads : 1;
	ws->kpad = (k + 15) / 16 * 16;
	ct_bytes = ((size_t) d * ws->kpad * sizeof(float) + 63) / 64 * 64;
	ws->ct = aligned_alloc(64, ct_bytes);
	ws->lab_eff = malloc(sizeof(int32_t) * (size_t) (n > 0 ? n : 1));
	ws->order = malloc(sizeof(int64_t) * (size_t) (n > 0 ? n : 1));
	ws->cnt = malloc(sizeof(int64_t) * (size_t) k);
	ws->start = malloc(sizeof(int64_t) * ((size_t) k + 1));
	ws->hist = malloc(sizeof(int64_t) * (size_t) k * ws->nt);
	/* Segments: one per cluster plus one per GC_KM_SEGMENT rows. */
	ws->max_seg = k + n / GC_KM_SEGMENT + 1;
	ws->seg = malloc(sizeof(gc_km_seg) * (size_t) ws->max_seg);
	/* Partial sums only for clusters of more than one segment. */
	ws->max_part = 2 * (n / GC_KM_SEGMENT) + 2;
	ws->partial = malloc(sizeof(double) * (size_t) ws->max_part * d);
	ws->far = malloc(sizeof(int64_t) * (size_t) k);
	ws->tsum = malloc(sizeof(double) * (size_t) ws->nt * d);
	ws->pcnt = malloc(sizeof(int64_t) * (size_t) k);
	ws->phist = malloc(sizeof(int64_t) * (size_t) k * ws->nt);
	ws->pw = malloc(sizeof(double) * (size_t) ws->max_part);
	if (ws->ct == NULL || ws->lab_eff == NULL || ws->order == NULL ||
		ws->cnt == NULL || ws->start == NULL || ws->hist == NULL ||
		ws->seg == NULL || ws->partial == NULL || ws->far == NULL ||
		ws->tsum == NULL || ws->pcnt == NULL || ws->phist == NULL ||
		ws->pw == NULL)
	{
		gc_km_ws_destroy(ws);
		return NULL;
	}
	return ws;
}

void
gc_km_ws_destroy(gc_km_ws *ws)
{
	if (ws == NULL)
		return;
	free(ws->ct);
	free(ws->lab_eff);
	free(ws->order);
	free(ws->cnt);
	free(ws->start);
	free(ws->hist);
	free(ws->seg);
	free(ws->partial);
	free(ws->far);
	free(ws->tsum);
	free(ws->pcnt);
	free(ws->phist);
	free(ws->pw);
	free(ws->sec);
	free(ws->lb);
	free(ws->cprev);
	free(ws->half);
	free(ws->list);
	free(ws);
}

int
gc_km_team(const gc_ctx *ctx, const gc_km_ws *ws)
{
	int			team = gc_team_adapt(ctx);

	return team < ws->nt ? team : ws->nt;
}

/* The centres transposed to structure-of-arrays; NaN pads never win. */
static void
transpose_centres(gc_km_ws *ws, const float *C, int k, int d)
{
	const int	kpad = ws->kpad;

	for (int j = 0; j < d; j++)
	{
		float	   *row = ws->ct + (size_t) j * kpad;

		for (int c = 0; c < k; c++)
			row[c] = C[(size_t) c * d + j];
		for (int c = k; c < kpad; c++)
			row[c] = NAN;
	}
}

gc_code
gc_km_assign(const gc_ctx *ctx, gc_km_ws *ws, const float *X, int64_t n,
			 int d, const float *C, int k, int32_t *labels, float *d2,
			 int64_t *n_changed, gc_status *st)
{
	const int	kpad = ws->kpad;
	const int64_t nb = (n + GC_KM_BLOCK - 1) / GC_KM_BLOCK;
	const int	nt = gc_region_threads(gc_km_team(ctx, ws), nb);
	assign_fn	kernel = pick_assign_kernel();
	int64_t		changed = 0;
	volatile int cancelled = 0;

	transpose_centres(ws, C, k, d);

#pragma omp parallel for num_threads(nt) schedule(dynamic, 1) reduction(+:changed)
	for (int64_t b = 0; b < nb; b++)
	{
		if (cancelled || gc_cancelled(ctx))
		{
			cancelled = 1;
			continue;
		}
		changed += kernel(X, b * GC_KM_BLOCK, min64(n, (b + 1) * GC_KM_BLOCK),
						  d, ws->ct, kpad, labels, d2);
	}
	if (cancelled)
		return gc_fail(st, GC_ECANCEL, "canceled");
	if (n_changed)
		*n_changed = changed;
	return GC_OK;
}

/*
 * The bounds' rounding: gc_dist2's float result D~ and the real distance²
 * D of the same rows satisfy |D~ - D| <= BOUND_REL(d) D + BOUND_ABS(d): a
 * rounded difference, its rounded square and d rounded additions of
 * non-negative terms ((d + 3) u with u = 2^-24, and room for the double
 * arithmetic on the bounds), plus what underflow can lose.
 */
#define BOUND_REL(d) ((double) ((d) + 6) * 0x1p-24)
#define BOUND_ABS(d) ((double) (d) * 0x1p-140)

/*
 * From GC_KM_BOUNDS_MIN_D dimensions, below which a row's scan costs as
 * little as its test, and with at least 16 rows a centre, below which the
 * centres' k² distances would weigh as much as the rows' nk.
 */
static bool
bounds_wanted(int d, int64_t n, int k)
{
#ifdef GC_TESTING
	if (forced_bounds >= 0)
		return forced_bounds == 1;
#endif
	return d >= GC_KM_BOUNDS_MIN_D && n >= (int64_t) 16 * k;
}

/* ws's bounds arrays (once); false when there is no memory for them. */
static bool
bounds_alloc(gc_km_ws *ws, int nt)
{
	if (ws->lb == NULL)
	{
		ws->sec = malloc(sizeof(float) * (size_t) GC_KM_BLOCK * ws->nt);
		ws->lb = malloc(sizeof(double) * (size_t) (ws->n > 0 ? ws->n : 1));
		ws->cprev = malloc(sizeof(float) * (size_t) ws->k * ws->d);
		ws->half = malloc(sizeof(double) * (size_t) ws->k);
		ws->list = malloc(sizeof(int64_t) * (size_t) GC_KM_BLOCK * ws->nt);
		ws->bounds_valid = false;
	}
	return ws->sec != NULL && ws->lb != NULL && ws->cprev != NULL &&
		ws->half != NULL && ws->list != NULL && nt <= ws->nt;
}

/*
 * For rows labelled against cprev (ws->bounds_valid): half[c] = half the
 * distance from centre c to the nearest other one (gc_dist2_f64's root),
 * lowered past the double rounding (infinite when k = 1), and the largest
 * move of a centre since cprev, raised past it, into *drift.
 */
static void
bounds_centres(gc_km_ws *ws, const float *C, int k, int d, int nt,
			   double *drift)
{
	double		mx = 0.0;

#pragma omp parallel for num_threads(nt) schedule(dynamic, 16) reduction(max:mx)
	for (int c = 0; c < k; c++)
	{
		const float *cc = C + (size_t) c * d;
		double		m = INFINITY,
					t;

		for (int o = 0; o < k; o++)
			if (o != c && (t = gc_dist2_f64(cc, C + (size_t) o * d, d)) < m)
				m = t;
		ws->half[c] = 0.5 * sqrt(m) * (1.0 - 1e-12);
		t = sqrt(gc_dist2_f64(cc, ws->cprev + (size_t) c * d, d));
		mx = t > mx ? t : mx;
	}
	*drift = mx * (1.0 + 1e-12);
}

/*
 * own[r] = gc_dist2(X_i, C_labels[i]) for the OWN_ROWS rows i = i0 + r:
 * the same operations in the same order, the rows' sums interleaved so
 * that each one's chain of additions does not wait for the one before.
 */
#define OWN_ROWS 8

static inline void
own_distances(const float *X, const float *C, const int32_t *labels,
			  int64_t i0, int d, float *own)
{
	const float *x[OWN_ROWS],
			   *c[OWN_ROWS];

	for (int r = 0; r < OWN_ROWS; r++)
	{
		x[r] = X + (size_t) (i0 + r) * d;
		c[r] = C + (size_t) labels[i0 + r] * d;
		own[r] = gc_l2_first(x[r][0], c[r][0]);
	}
	for (int j = 1; j < d; j++)
		for (int r = 0; r < OWN_ROWS; r++)
			own[r] = gc_l2_step(own[r], x[r][j], c[r][j]);
}

/*
 * Whether row x, labelled a, keeps its label: from its exact distance²
 * own to centre a, an upper bound of the real distance, and the lower
 * bound L of its real distance to every other centre (its own lb, and
 * the triangle through the nearest centre to a), every other centre's
 * float distance² is larger than own.
 */
static inline bool
bounds_keep(double lb, double half, float own, double rel, double abs_)
{
	const double up = sqrt(((double) own + abs_) / (1.0 - rel)),
				tri = 2.0 * half - up,
				L = lb > tri ? lb : tri;

	return L > 0.0 && L * L * (1.0 - rel) - abs_ > (double) own;
}

gc_code
gc_km_assign_bounded(const gc_ctx *ctx, gc_km_ws *ws, const float *X,
					 int64_t n, int d, const float *C, int k,
					 int32_t *labels, float *d2, int64_t *n_changed,
					 gc_status *st)
{
	const int64_t nb = (n + GC_KM_BLOCK - 1) / GC_KM_BLOCK;
	const int	nt = gc_region_threads(gc_km_team(ctx, ws), nb);
	const double rel = BOUND_REL(d),
				abs_ = BOUND_ABS(d);
	assign_list_fn kernel;
	int64_t		changed = 0;
	double		drift = 0.0;
	volatile int cancelled = 0;

	if (!bounds_wanted(d, n, k) || n != ws->n || !bounds_alloc(ws, nt))
		return gc_km_assign(ctx, ws, X, n, d, C, k, labels, d2, n_changed, st);
	kernel = pick_list_kernel();
	transpose_centres(ws, C, k, d);
	if (ws->bounds_valid)
		bounds_centres(ws, C, k, d, nt, &drift);

#pragma omp parallel for num_threads(nt) schedule(dynamic, 1) reduction(+:changed)
	for (int64_t b = 0; b < nb; b++)
	{
		int64_t    *list = ws->list + (size_t) omp_get_thread_num() * GC_KM_BLOCK;
		float	   *sec = ws->sec + (size_t) omp_get_thread_num() * GC_KM_BLOCK;
		const int64_t i1 = min64(n, (b + 1) * GC_KM_BLOCK);
		int64_t		m = 0;

		if (cancelled || gc_cancelled(ctx))
		{
			cancelled = 1;
			continue;
		}
		for (int64_t i0 = b * GC_KM_BLOCK; i0 < i1; i0 += OWN_ROWS)
		{
			const int	nr = i1 - i0 < OWN_ROWS ? (int) (i1 - i0) : OWN_ROWS;
			bool		all = ws->bounds_valid && nr == OWN_ROWS;
			float		own[OWN_ROWS];

			for (int r = 0; r < nr && all; r++)
				all = labels[i0 + r] >= 0;
			if (all)
				own_distances(X, C, labels, i0, d, own);
			for (int r = 0; r < nr; r++)
			{
				const int64_t i = i0 + r;
				const int32_t a = labels[i];

				if (all)
				{
					ws->lb[i] -= drift;
					if (bounds_keep(ws->lb[i], ws->half[a], own[r], rel, abs_))
					{
						d2[i] = own[r];
						continue;
					}
				}
				list[m++] = i;
			}
		}
#ifdef GC_TESTING
#pragma omp atomic
		gc_km_bounds_kept += i1 - b * GC_KM_BLOCK - m;
#endif
		changed += kernel(X, list, m, d, ws->ct, ws->kpad, labels, d2, sec);
		for (int64_t q = 0; q < m; q++)
		{
			const double s = ((double) sec[q] - abs_) / (1.0 + rel);

			ws->lb[list[q]] = s > 0.0 ? sqrt(s) : 0.0;
		}
	}
	if (cancelled)
	{
		ws->bounds_valid = false;
		return gc_fail(st, GC_ECANCEL, "canceled");
	}
	memcpy(ws->cprev, C, sizeof(float) * (size_t) k * d);
	ws->bounds_valid = true;
	if (n_changed)
		*n_changed = changed;
	return GC_OK;
}

/* The labels' contract on every device: n >= 0, d >= 1, k >= 1, arrays. */
static gc_code
labels_check(const float *X, int64_t n, int d, const float *C, int k,
			 const int32_t *labels, gc_status *st)
{
	if (n < 0 || d < 1 || k < 1 || C == NULL ||
		(n > 0 && (X == NULL || labels == NULL)))
		return gc_fail(st, GC_EINVAL, "k-means labels: bad arguments");
	return GC_OK;
}

gc_code
gc_kmeans_labels_on_gpu(const gc_ctx *ctx, const float *X, int64_t n, int d,
						const float *C, int k, int32_t *labels, gc_status *st)
{
	gc_code		rc;

	if ((rc = labels_check(X, n, d, C, k, labels, st)) != GC_OK)
		return rc;
	/* the GPU's run sets up the fit's arrays for k centres among n rows */
	if (n == 0 || k > n)
		return gc_fail(st, GC_EINVAL, "k-means labels: bad arguments (GPU: 1 <= k <= n)");
	return gc_kmeans_labels_gpu(ctx, X, n, d, C, k, labels, st);
}

gc_code
gc_kmeans_labels_cpu(const gc_ctx *ctx, const float *X, int64_t n, int d,
					 const float *C, int k, int32_t *labels, gc_status *st)
{
	gc_km_ws   *ws;
	float	   *d2;
	gc_code		rc;

	if ((rc = labels_check(X, n, d, C, k, labels, st)) != GC_OK || n == 0)
		return rc;
	/* only the transposed centres: no per-row scratch */
	ws = gc_km_ws_create(0, d, k, gc_threads(ctx));
	d2 = malloc(sizeof(float) * (size_t) n);
	if (ws == NULL || d2 == NULL)
		rc = gc_fail(st, GC_ENOMEM, "k-means labels: out of memory");
	else
	{
		/* the kernel counts changes against the labels it overwrites */
		memset(labels, 0xff, sizeof(int32_t) * (size_t) n);
		rc = gc_km_assign(ctx, ws, X, n, d, C, k, labels, d2, NULL, st);
	}
	free(d2);
	gc_km_ws_destroy(ws);
	return rc;
}

uint64_t
gc_km_row_hash(const float *x, int d)
{
	uint64_t	h = UINT64_C(0x8a5cd789635d2dff);

	for (int j = 0; j < d; j++)
	{
		uint32_t	bits;

		memcpy(&bits, &x[j], sizeof(bits));
		h = gc_mix64(h ^ bits);
	}
	return h;
}

void
gc_kmeans_block_terms(const gc_ctx *ctx, const float *X, int64_t n, int d,
					  const float *C, int k, const int32_t *labels,
					  double *sums, float *d2, double *dist, uint64_t *hash)
{
	const int	team = gc_team_adapt(ctx);

	/* the rows' own terms: any order */
#pragma omp parallel for num_threads(gc_region_threads(team, n / 1024 + 1)) schedule(static)
	for (int64_t i = 0; i < n; i++)
	{
		const float *x = X + i * d,
				   *c = C + (size_t) labels[i] * d;

		d2[i] = gc_dist2(x, c, d);
		dist[i] = gc_dist2_f64(x, c, d);
		hash[i] = gc_km_row_hash(x, d);
	}

	/*
	 * each cluster's sums in row order: a thread owns the clusters
	 * congruent to it, and adds their rows as they come
	 */
#pragma omp parallel num_threads(gc_region_threads(team, k))
	{
		const int	nt = omp_get_num_threads(),
					t = omp_get_thread_num();

		for (int64_t i = 0; i < n; i++)
		{
			const int	c = labels[i];

			if (c % nt == t)
			{
				double	   *sc = sums + (size_t) c * d;
				const float *x = X + i * d;

				for (int j = 0; j < d; j++)
					sc[j] += (double) x[j];
			}
		}
	}
}

gc_code
gc_km_inertia(const gc_ctx *ctx, const float *X, int64_t n, int d,
			  const float *C, const int32_t *labels, double *distance,
			  double *inertia, gc_status *st)
{
	return gc_km_inertia_w(ctx, X, n, d, C, labels, NULL, GC_METRIC_EUCLIDEAN,
						   distance, inertia, st);
}

gc_code
gc_km_inertia_w(const gc_ctx *ctx, const float *X, int64_t n, int d,
				const float *C, const int32_t *labels, const double *weights,
				gc_metric metric, double *distance, double *inertia,
				gc_status *st)
{
	const int64_t nb = (n + GC_KM_BLOCK - 1) / GC_KM_BLOCK;
	const int	nt = gc_region_threads(gc_team_adapt(ctx), nb);
	double	   *bs = malloc(sizeof(double) * (size_t) (nb > 0 ? nb : 1));
	volatile int cancelled = 0;
	double		tot = 0.0;

	if (bs == NULL)
		return gc_fail(st, GC_ENOMEM, "out of memory computing inertia");
#pragma omp parallel for num_threads(nt) schedule(dynamic, 1)
	for (int64_t b = 0; b < nb; b++)
	{
		double		s = 0.0;

		if (cancelled || gc_cancelled(ctx))
		{
			cancelled = 1;
			continue;
		}
		for (int64_t i = b * GC_KM_BLOCK; i < min64(n, (b + 1) * GC_KM_BLOCK); i++)
		{
			const double q = gc_dist2_f64(X + i * d,
										  C + (size_t) labels[i] * d, d);
			const double cost = gc_km_cost(q, metric);

			if (distance)
				distance[i] = gc_km_distance(q, metric);
			s += weights ? weights[i] * cost : cost;
		}
		bs[b] = s;
	}
	if (cancelled)
	{
		free(bs);
		return gc_fail(st, GC_ECANCEL, "canceled");
	}
	for (int64_t b = 0; b < nb; b++)
		tot += bs[b];
	free(bs);
	*inertia = tot;
	return GC_OK;
}

gc_code
gc_km_mean_variance(const gc_ctx *ctx, const float *X, int64_t n, int d,
					double *out, gc_status *st)
{
	const int64_t nb = (n + GC_KM_BLOCK - 1) / GC_KM_BLOCK;
	const int	nt = gc_region_threads(gc_team_adapt(ctx), nb);
	double	   *bs = malloc(sizeof(double) * (size_t) (nb > 0 ? nb : 1) * d);
	double	   *mean = calloc((size_t) d, sizeof(double));
	volatile int cancelled = 0;
	double		var = 0.0;

	if (bs == NULL || mean == NULL)
	{
		free(bs);
		free(mean);
		return gc_fail(st, GC_ENOMEM, "out of memory computing the data variance");
	}
	/* Two passes (mean, then squared deviations), each in fixed blocks. */
	for (int pass = 0; pass < 2; pass++)
	{
#pragma omp parallel for num_threads(nt) schedule(static)
		for (int64_t b = 0; b < nb; b++)
		{
			double	   *s = bs + b * d;

			if (cancelled || gc_cancelled(ctx))
			{
				cancelled = 1;
				continue;
			}

			for (int j = 0; j < d; j++)
				s[j] = 0.0;
			for (int64_t i = b * GC_KM_BLOCK; i < min64(n, (b + 1) * GC_KM_BLOCK); i++)
				for (int j = 0; j < d; j++)
				{
					double		t = (double) X[i * d + j] - mean[j];

					s[j] += pass == 0 ? (double) X[i * d + j] : t * t;
				}
		}
		if (cancelled)
		{
			free(bs);
			free(mean);
			return gc_fail(st, GC_ECANCEL, "canceled");
		}
		for (int j = 0; j < d; j++)
		{
			double		s = 0.0;

			for (int64_t b = 0; b < nb; b++)
				s += bs[b * d + j];
			if (pass == 0)
				mean[j] = s / (double) n;
			else
				var += s / (double) n;
		}
	}
	free(bs);
	free(mean);
	*out = var / d;
	return GC_OK;
}
