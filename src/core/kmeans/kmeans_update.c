/*
 * kmeans_update.c — the k-means update step: new centres as the means of
 * their rows, with scikit-learn's re-seeding of empty clusters.
 *
 * To make the sums independent of the thread count, rows are first put in
 * cluster order by a stable counting sort (the sorted order is unique
 * whatever the threads); each cluster's members are then summed in double,
 * sequentially within fixed segments of GC_KM_SEGMENT rows, and the segment
 * sums added in order.  Segments also spread one big cluster over threads.
 * With sample weights (ws->weights), each segment also sums its weights,
 * the rows are summed as w * x, and a mean is the weighted sum over the
 * weight sum: the same fixed order, so the same result on any thread count.
 */
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "kmeans/kmeans_internal.h"

typedef struct far_row
{
	float		d2;
	int64_t		row;
} far_row;

/* a is farther than b: larger d2, ties to the lower row. */
static inline int
farther(const far_row *a, const far_row *b)
{
	return a->d2 > b->d2 || (a->d2 == b->d2 && a->row < b->row);
}

static int
cmp_farthest_first(const void *pa, const void *pb)
{
	const far_row *a = pa,
			   *b = pb;

	return farther(a, b) ? -1 : farther(b, a) ? 1 : 0;
}

/*
 * ws->far[0..*found-1] = the m rows farthest from their centres, farthest
 * first (fewer when fewer rows qualify).  A row on its centre (d2 0) is no
 * candidate: the centre it would seed duplicates its own, and ties keep it
 * there (re-seeding with it would be a no-op that never ends).  With
 * weights, rows of weight 0 are not candidates either (their cluster would
 * have no weight).  A min-heap (root = least far) of size m over one
 * sequential scan.
 */
static gc_code
pick_farthest(gc_km_ws *ws, int64_t n, const float *d2, int m, int *found,
			  gc_status *st)
{
	far_row    *h = malloc(sizeof(far_row) * (size_t) m);
	int			size = 0;

	if (h == NULL)
		return gc_fail(st, GC_ENOMEM, "out of memory re-seeding empty clusters");
	for (int64_t i = 0; i < n; i++)
	{
		far_row		x = {d2[i], i};
		int			p;

		if (!(d2[i] > 0.0f) || (ws->weights != NULL && !(ws->weights[i] > 0.0)))
			continue;

		if (size < m)
		{
			/* sift up */
			p = size++;
			while (p > 0 && farther(&h[(p - 1) / 2], &x))
			{
				h[p] = h[(p - 1) / 2];
				p = (p - 1) / 2;
			}
			h[p] = x;
		}
		else if (farther(&x, &h[0]))
		{
			/* replace the root, sift down */
			p = 0;
			for (;;)
			{
				int			c = 2 * p + 1;

				if (c >= size)
					break;
				if (c + 1 < size && farther(&h[c], &h[c + 1]))
					c++;
				if (!farther(&x, &h[c]))
					break;
				h[p] = h[c];
				p = c;
			}
			h[p] = x;
		}
	}
	qsort(h, (size_t) size, sizeof(far_row), cmp_farthest_first);
	for (int j = 0; j < size; j++)
		ws->far[j] = h[j].row;
	*found = size;
	free(h);
	return GC_OK;
}

/*
 * hist[t*k + c] = rows of chunk t (of ws->nt fixed chunks) labelled c;
 * cnt = column sums; pcnt = the rows of positive weight among them (cnt
 * without weights).  team threads share the chunks.
 */
static void
histogram(gc_km_ws *ws, int64_t n, int k, const int32_t *lab, int team)
{
	const int	nt = ws->nt;
	const double *w = ws->weights;

#pragma omp parallel for num_threads(team) schedule(static, 1)
	for (int t = 0; t < nt; t++)
	{
		int64_t    *h = ws->hist + (size_t) t * k;
		int64_t    *ph = ws->phist + (size_t) t * k;

		memset(h, 0, sizeof(int64_t) * (size_t) k);
		if (w == NULL)
			for (int64_t i = n * t / nt; i < n * (t + 1) / nt; i++)
				h[lab[i]]++;
		else
		{
			memset(ph, 0, sizeof(int64_t) * (size_t) k);
			for (int64_t i = n * t / nt; i < n * (t + 1) / nt; i++)
			{
				h[lab[i]]++;
				ph[lab[i]] += w[i] > 0.0;
			}
		}
	}
	for (int c = 0; c < k; c++)
	{
		int64_t		s = 0,
					ps = 0;

		for (int t = 0; t < nt; t++)
		{
			s += ws->hist[(size_t) t * k + c];
			if (w != NULL)
				ps += ws->phist[(size_t) t * k + c];
		}
		ws->cnt[c] = s;
		ws->pcnt[c] = w != NULL ? ps : s;
	}
}

/*
 * Row r + PREFETCH_AHEAD of segment g asked into the cache: the rows come
 * in cluster order, scattered over X, where the hardware's prefetchers do
 * not follow, and each row's sum waits for its load otherwise (1M x 32,
 * k = 100, 2 threads: the update 34 -> 13 ms).  A macro: GCC drops a
 * prefetch made in a function of its own, which has no other effect.
 */
#define PREFETCH_AHEAD 16
#define PREFETCH_ROW(ws, g, r, X, d) \
	do { \
		if ((r) + PREFETCH_AHEAD < (g)->end) \
		{ \
			const char *p_ = (const char *) ((X) + (ws)->order[(r) + PREFETCH_AHEAD] * (d)); \
			for (size_t o_ = 0; o_ < (size_t) (d) * sizeof(float); o_ += 64) \
				__builtin_prefetch(p_ + o_); \
		} \
	} while (0)

/*
 * The sums of segment g: sum[j] = sum of its rows' x_j (weighted: w x_j),
 * in order, in double; returns its weight (unweighted: its row count).
 */
static double
segment_sums(const gc_km_ws *ws, const gc_km_seg *g, const float *X, int d,
			 double *sum)
{
	const double *w = ws->weights;
	double		wsum = 0.0;

	for (int j = 0; j < d; j++)
		sum[j] = 0.0;
	if (w == NULL)
	{
		for (int64_t r = g->begin; r < g->end; r++)
		{
			const float *x = X + ws->order[r] * d;

			PREFETCH_ROW(ws, g, r, X, d);
			for (int j = 0; j < d; j++)
				sum[j] += (double) x[j];
		}
		return (double) (g->end - g->begin);
	}
	for (int64_t r = g->begin; r < g->end; r++)
	{
		const int64_t row = ws->order[r];
		const float *x = X + row * d;
		const double wr = w[row];

		PREFETCH_ROW(ws, g, r, X, d);
		wsum += wr;
		for (int j = 0; j < d; j++)
			sum[j] += wr * (double) x[j];
	}
	return wsum;
}

gc_code
gc_km_update(const gc_ctx *ctx, gc_km_ws *ws, const float *X, int64_t n,
			 int d, int k, const int32_t *labels, const float *d2,
			 const float *C_old, float *C_new, double *shift,
			 int *n_relocated, gc_status *st)
{
	const int	nt = ws->nt;	/* chunks of the counting sort */
	const int	team = gc_km_team(ctx, ws);
	const int32_t *lab = labels;
	int			n_empty = 0;
	int64_t		nseg = 0,
				npart = 0;
	volatile int cancelled = 0;
	double		sh = 0.0;

	histogram(ws, n, k, lab, team);

	/* Re-seed empty clusters with the farthest rows (scikit-learn). */
	for (int c = 0; c < k; c++)
		n_empty += ws->pcnt[c] == 0;
	if (n_empty > 0)
	{
		int			n_far = 0;
		gc_code		rc = pick_farthest(ws, n, d2, n_empty, &n_far, st);
		int			j = 0;

		if (rc != GC_OK)
			return rc;
		memcpy(ws->lab_eff, labels, sizeof(int32_t) * (size_t) n);
		for (int c = 0; c < k && j < n_far; c++)
			if (ws->pcnt[c] == 0)
				ws->lab_eff[ws->far[j++]] = c;
		n_empty = j;
		lab = ws->lab_eff;
		histogram(ws, n, k, lab, team);
	}
	if (n_relocated)
		*n_relocated = n_empty;
	if (gc_cancelled(ctx))
		return gc_fail(st, GC_ECANCEL, "canceled");

	/* Stable counting sort of the rows by cluster. */
	ws->start[0] = 0;
	for (int c = 0; c < k; c++)
	{
		int64_t		s = ws->start[c];

		ws->start[c + 1] = s + ws->cnt[c];
		for (int t = 0; t < nt; t++)
		{
			int64_t		h = ws->hist[(size_t) t * k + c];

			ws->hist[(size_t) t * k + c] = s;	/* now: chunk t's next slot */
			s += h;
		}
	}
#pragma omp parallel for num_threads(team) schedule(static, 1)
	for (int t = 0; t < nt; t++)
	{
		int64_t    *h = ws->hist + (size_t) t * k;

		for (int64_t i = n * t / nt; i < n * (t + 1) / nt; i++)
			ws->order[h[lab[i]]++] = i;
	}

	/* Segments: one per small cluster, several (with partial sums) per big. */
	for (int c = 0; c < k; c++)
	{
		int64_t		b = ws->start[c],
					e = ws->start[c + 1];

		if (e == b)
			continue;
		if (e - b <= GC_KM_SEGMENT)
			ws->seg[nseg++] = (gc_km_seg) {c, -1, b, e};
		else
			for (int64_t s = b; s < e; s += GC_KM_SEGMENT)
				ws->seg[nseg++] = (gc_km_seg) {c, (int32_t) npart++, s,
				s + GC_KM_SEGMENT < e ? s + GC_KM_SEGMENT : e};
	}

#pragma omp parallel for num_threads(gc_region_threads(team, nseg)) schedule(dynamic, 16)
	for (int64_t s = 0; s < nseg; s++)
	{
		const gc_km_seg *g = &ws->seg[s];
		double	   *sum,
					wsum;

		if (cancelled || ((s & 63) == 0 && gc_cancelled(ctx)))
		{
			cancelled = 1;
			continue;
		}
		sum = g->slot >= 0 ? ws->partial + (size_t) g->slot * d
			: ws->tsum + (size_t) omp_get_thread_num() * d;
		wsum = segment_sums(ws, g, X, d, sum);
		if (g->slot >= 0)
			ws->pw[g->slot] = wsum;
		else if (ws->pcnt[g->cluster] > 0)
			for (int j = 0; j < d; j++)
				C_new[(size_t) g->cluster * d + j] = (float) (sum[j] / wsum);
	}
	if (cancelled)
		return gc_fail(st, GC_ECANCEL, "canceled");

	/* Big clusters: add their segment sums in order. */
	for (int64_t s = 0; s < nseg;)
	{
		const gc_km_seg *g = &ws->seg[s];
		int64_t		e = s;

		if (g->slot < 0)
		{
			s++;
			continue;
		}
		while (e < nseg && ws->seg[e].cluster == g->cluster)
			e++;
		if (ws->pcnt[g->cluster] > 0)
		{
			double		tw = 0.0;	/* unweighted: the count, exactly */

			for (int64_t q = s; q < e; q++)
				tw += ws->pw[ws->seg[q].slot];
			for (int j = 0; j < d; j++)
			{
				double		v = 0.0;

				for (int64_t q = s; q < e; q++)
					v += ws->partial[(size_t) ws->seg[q].slot * d + j];
				C_new[(size_t) g->cluster * d + j] = (float) (v / tw);
			}
		}
		s = e;
	}

	/*
	 * Clusters left with no row (or no weight) keep their centre; never
	 * divide by zero.  Spherical: the means normalized, and one of 0 (no
	 * direction) keeps its centre too.
	 */
	for (int c = 0; c < k; c++)
		if (ws->pcnt[c] == 0 ||
			(ws->unit_centres &&
			 gc_unit_row(C_new + (size_t) c * d, d, C_new + (size_t) c * d) == 0.0))
			memcpy(C_new + (size_t) c * d, C_old + (size_t) c * d,
				   sizeof(float) * d);

	for (size_t i = 0; i < (size_t) k * d; i++)
	{
		double		t = (double) C_new[i] - (double) C_old[i];

		sh += t * t;
	}
	*shift = sh;
	return GC_OK;
}
