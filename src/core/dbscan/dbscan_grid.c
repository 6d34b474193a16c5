/*
 * dbscan_grid.c — DBSCAN on a uniform grid, for d <= 3.
 *
 * The cells are grid_plan.h's (shared with the GPU grid): a neighbour of a
 * point lies at most 2 cells away in each dimension, and a cell's points
 * are often all mutual neighbours ("dense" cell, proved per cell with the
 * float-exact box bound of metric.h).  Points are sorted by cell key; a
 * cell's neighbourhood is 5^(d-1) runs of adjacent keys.  This file also
 * makes the plan (gc_grid_plan_make, gc_grid_rows) for both devices.
 *
 * Phases, each parallel over cells:
 *   core:   a dense cell holding >= min_pts points is all core, untested;
 *           otherwise count per point, whole cells at a time where the box
 *           bounds decide, stopping at min_pts;
 *   union:  the core points of a dense cell are chained together; between
 *           two dense cells a single core pair within eps suffices;
 *   border: each non-core point looks for its nearest core neighbour.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <omp.h>

#include "common/metric.h"
#include "dbscan/dbscan_internal.h"
#include "dbscan/grid_plan.h"
#include "common/radix_sort.h"
#include "common/union_find.h"

#define ALWAYS_INLINE inline __attribute__((always_inline))

typedef struct grid
{
	int			d;
	int64_t		ncell;
	uint64_t   *ckey;			/* ncell, increasing */
	int64_t    *cstart;			/* ncell + 1: first position of each cell */
	float	   *lo,
			   *hi;				/* ncell * d: bounding box of the cell's points */
	uint8_t    *dense;			/* gc_dist2(lo, hi) <= eps2 */
	int64_t    *ncore;			/* core points in the cell */
	int64_t    *rep;			/* first core position of the cell, or -1 */
	uint64_t	nkeys;			/* keys are 0 .. nkeys-1 */
	int64_t    *ktab;			/* nkeys + 1: first cell with key >= k; or NULL */
	int			nrows;
	int64_t		rowoff[GC_GRID_MAX_ROWS];	/* key offset of each row's centre */
} grid;

/* First cell whose key is >= k. */
static ALWAYS_INLINE int64_t
cell_at_or_after(const grid *g, uint64_t k)
{
	int64_t		lo = 0,
				hi = g->ncell;

	if (g->ktab != NULL)
		return g->ktab[k];
	while (lo < hi)
	{
		int64_t		mid = lo + (hi - lo) / 2;

		if (g->ckey[mid] < k)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* The runs of cells around cell c: cells [c0[r], c1[r]). */
static ALWAYS_INLINE int
cell_rows(const grid *g, int64_t c, int64_t *c0, int64_t *c1)
{
	int			nr = 0;

	for (int r = 0; r < g->nrows; r++)
	{
		uint64_t	klo = g->ckey[c] + (uint64_t) g->rowoff[r] - 2;
		int64_t		a = cell_at_or_after(g, klo),
					b = cell_at_or_after(g, klo + 5);

		if (a < b)
		{
			c0[nr] = a;
			c1[nr] = b;
			nr++;
		}
	}
	return nr;
}

bool
gc_grid_plan_make(int d, float eps2, const float *mn, const float *mx,
				  gc_grid_plan *gp)
{
	double		side,
				nk = 1.0;

	if (!isfinite(eps2))
		return false;
	side = gc_l2_axis_bound(eps2) / sqrt((double) d) * (1.0 - 1.0 / 256.0);
	if (!isfinite(side) || !(side > 0.0) || !isfinite(1.0 / side))
		return false;
	gp->inv_side = 1.0 / side;
	for (int k = 0; k < 3; k++)
	{
		gp->min[k] = 0.0f;
		gp->m[k] = 1;
		gp->stride[k] = 0;
	}
	for (int k = 0; k < d; k++)
	{
		double		ext = ((double) mx[k] - (double) mn[k]) * gp->inv_side;

		if (!(ext <= 0x1p40))
			return false;
		gp->min[k] = mn[k];
		gp->m[k] = (int64_t) floor(ext) + 1;
		gp->stride[k] = (uint64_t) nk;
		nk *= (double) (gp->m[k] + 4);	/* 2 cells of padding each side */
	}
	if (nk > 0x1p62)
		return false;
	gp->nkeys = (uint64_t) nk;
	gp->key_bits = 0;
	while (gp->key_bits < 64 && (UINT64_C(1) << gp->key_bits) < gp->nkeys)
		gp->key_bits++;
	return true;
}

int
gc_grid_rows(const gc_grid_plan *gp, int d, int64_t rowoff[GC_GRID_MAX_ROWS])
{
	static const int order[5] = {0, -1, 1, -2, 2};
	int			nrows = 0;

	for (int ia = 0; ia < 5; ia++)
		for (int ib = 0; ib < 5; ib++)
		{
			int			a = order[ia],
						b = order[ib];

			if ((d < 2 && a != 0) || (d < 3 && b != 0))
				continue;
			rowoff[nrows++] =
				(d >= 2 ? a * (int64_t) gp->stride[1] : 0) +
				(d >= 3 ? b * (int64_t) gp->stride[2] : 0);
		}
	return nrows;
}

/* The extent of the points (in parallel), then the plan. */
static bool
grid_plan_for(gc_dbscan_job *j, gc_grid_plan *gp)
{
	int			d = j->d;
	int64_t		n = j->n;
	float		mn[3],
				mx[3];

	if (!isfinite(j->eps2))
		return false;			/* before the pass over the data */
	for (int k = 0; k < d; k++)
	{
		float		a = INFINITY,
					b = -INFINITY;

#pragma omp parallel for num_threads(j->nthreads) reduction(min:a) reduction(max:b)
		for (int64_t i = 0; i < n; i++)
		{
			float		v = j->X[i * d + k];

			a = gc_fmin(a, v);
			b = gc_fmax(b, v);
		}
		mn[k] = a;
		mx[k] = b;
	}
	return gc_grid_plan_make(d, j->eps2, mn, mx, gp);
}

static void
grid_free(grid *g)
{
	free(g->ckey);
	free(g->cstart);
	free(g->lo);
	free(g->hi);
	free(g->dense);
	free(g->ncore);
	free(g->rep);
	free(g->ktab);
}

/* Sorts the points by cell, fills perm and pts and the cell tables. */
static gc_code
grid_build(gc_dbscan_job *j, const gc_grid_plan *gp, grid *g)
{
	int64_t		n = j->n;
	int			d = j->d;
	int			T = j->nthreads;
	uint64_t   *keys;
	bool		nomem;
	int64_t    *tcount;

	keys = malloc(sizeof(uint64_t) * (size_t) n);
	tcount = calloc((size_t) T + 1, sizeof(int64_t));
	if (keys == NULL || tcount == NULL)
	{
		free(keys);
		free(tcount);
		return gc_fail(j->st, GC_ENOMEM, "out of memory");
	}

#pragma omp parallel for num_threads(T) schedule(static)
	for (int64_t i = 0; i < n; i++)
	{
		keys[i] = gc_grid_key(gp, j->X + i * d, d);
		j->perm[i] = i;
	}
	/* parent and croot serve as the sort's scratch; both are reset later */
	if (!gc_radix_sort_kv(keys, j->perm, n, gp->key_bits,
						  (uint64_t *) j->parent, j->croot, T, j->ctx, &nomem))
	{
		free(keys);
		free(tcount);
		if (nomem)
			return gc_fail(j->st, GC_ENOMEM, "out of memory");
		return gc_fail(j->st, GC_ECANCEL, "canceled");
	}

	/* cell boundaries: count per thread slice, then write */
#pragma omp parallel num_threads(T)
	{
		int			t = omp_get_thread_num();
		int			nt = omp_get_num_threads();
		int64_t		lo = n * t / nt,
					hi = n * (t + 1) / nt,
					c = 0;

		for (int64_t i = lo; i < hi; i++)
			c += (i == 0 || keys[i] != keys[i - 1]);
		tcount[t + 1] = c;
#pragma omp barrier
#pragma omp single
		{
			for (int u = 0; u < nt; u++)
				tcount[u + 1] += tcount[u];
			g->ncell = tcount[nt];
			g->ckey = malloc(sizeof(uint64_t) * (size_t) g->ncell);
			g->cstart = malloc(sizeof(int64_t) * (size_t) (g->ncell + 1));
		}
		if (g->ckey != NULL && g->cstart != NULL)
		{
			c = tcount[t];
			for (int64_t i = lo; i < hi; i++)
				if (i == 0 || keys[i] != keys[i - 1])
				{
					g->ckey[c] = keys[i];
					g->cstart[c] = i;
					c++;
				}
		}
	}
	free(keys);
	free(tcount);
	if (g->ckey == NULL || g->cstart == NULL)
		return gc_fail(j->st, GC_ENOMEM, "out of memory");
	g->cstart[g->ncell] = n;

	g->lo = malloc(sizeof(float) * (size_t) g->ncell * d);
	g->hi = malloc(sizeof(float) * (size_t) g->ncell * d);
	g->dense = malloc((size_t) g->ncell);
	g->ncore = malloc(sizeof(int64_t) * (size_t) g->ncell);
	g->rep = malloc(sizeof(int64_t) * (size_t) g->ncell);
	if (!g->lo || !g->hi || !g->dense || !g->ncore || !g->rep)
		return gc_fail(j->st, GC_ENOMEM, "out of memory");

	/* dense key table when the key space is not much larger than n */
	g->nkeys = gp->nkeys;
	if (gp->nkeys <= (uint64_t) (n > (1 << 20) ? 4 * n : (1 << 22)))
	{
		g->ktab = malloc(sizeof(int64_t) * (size_t) (gp->nkeys + 1));
		if (g->ktab == NULL)
			return gc_fail(j->st, GC_ENOMEM, "out of memory");
	}

#pragma omp parallel num_threads(T)
	{
#pragma omp for schedule(static)
		for (int64_t s = 0; s < n; s++)
			memcpy(j->pts + s * d, j->X + j->perm[s] * d, sizeof(float) * d);
#pragma omp for schedule(dynamic, 1024)
		for (int64_t c = 0; c < g->ncell; c++)
		{
			float	   *lo = g->lo + c * d,
					   *hi = g->hi + c * d;

			for (int k = 0; k < d; k++)
			{
				lo[k] = INFINITY;
				hi[k] = -INFINITY;
			}
			for (int64_t s = g->cstart[c]; s < g->cstart[c + 1]; s++)
				for (int k = 0; k < d; k++)
				{
					lo[k] = gc_fmin(lo[k], j->pts[s * d + k]);
					hi[k] = gc_fmax(hi[k], j->pts[s * d + k]);
				}
			g->dense[c] = gc_dist2(lo, hi, d) <= j->eps2;
			if (g->ktab != NULL)
			{
				uint64_t	from = c == 0 ? 0 : g->ckey[c - 1] + 1;

				for (uint64_t k = from; k <= g->ckey[c]; k++)
					g->ktab[k] = c;
			}
		}
	}
	if (g->ktab != NULL)
		for (uint64_t k = g->ckey[g->ncell - 1] + 1; k <= gp->nkeys; k++)
			g->ktab[k] = g->ncell;

	g->d = d;
	g->nrows = gc_grid_rows(gp, d, g->rowoff);
	return GC_OK;
}

/*
 * Runs of few points are scanned point by point without looking at cells
 * (cells are tiny, about one point each on uniform data); longer runs go
 * cell by cell so that the box bounds can settle whole cells at once.
 */
#define FLAT_RUN 48

/* ---- core phase ---- */

/* Neighbours of x among cells [q0, q1), stopping once cnt reaches minp. */
static ALWAYS_INLINE int64_t
count_cells(const grid *g, const gc_dbscan_job *j, const float *x,
			int64_t q0, int64_t q1, int64_t cnt, const int D)
{
	const float *pts = j->pts;
	float		eps2 = j->eps2;
	int64_t		minp = j->min_pts;

	for (int64_t q = q0; q < q1 && cnt < minp; q++)
	{
		int64_t		qb = g->cstart[q],
					qe = g->cstart[q + 1];

		if (qe - qb > 2)
		{
			const float *lo = g->lo + q * D,
					   *hi = g->hi + q * D;

			if (gc_box_mindist2(x, lo, hi, D) > eps2)
				continue;
			if (gc_box_maxdist2(x, lo, hi, D) <= eps2)
			{
				cnt += qe - qb;
				continue;
			}
		}
		for (int64_t s = qb; s < qe; s++)
			cnt += gc_dist2(x, pts + s * D, D) <= eps2;
	}
	return cnt;
}

static ALWAYS_INLINE void
core_cell(const grid *g, gc_dbscan_job *j, int64_t c, const int D)
{
	const float *pts = j->pts;
	float		eps2 = j->eps2;
	int64_t		minp = j->min_pts;
	int64_t		b = g->cstart[c],
				e = g->cstart[c + 1];
	int64_t		r0[GC_GRID_MAX_ROWS],
				r1[GC_GRID_MAX_ROWS];
	int			nr;

	if (e - b >= minp && g->dense[c])
	{
		memset(j->core + b, 1, (size_t) (e - b));
		return;
	}
	nr = cell_rows(g, c, r0, r1);
	for (int64_t p = b; p < e; p++)
	{
		const float *x = pts + p * D;
		int64_t		cnt = 0;

		for (int r = 0; r < nr && cnt < minp; r++)
		{
			int64_t		pb = g->cstart[r0[r]],
						pe = g->cstart[r1[r]];

			if (pe - pb <= FLAT_RUN)
			{
				int64_t		k = 0;

				for (int64_t s = pb; s < pe; s++)
					k += gc_dist2(x, pts + s * D, D) <= eps2;
				cnt += k;
			}
			else
				cnt = count_cells(g, j, x, r0[r], r1[r], cnt, D);
		}
		j->core[p] = cnt >= minp;
	}
}

/* ---- union phase ---- */

/* Unites the core points of cell c with those of a later cell q. */
static ALWAYS_INLINE void
union_cell_pair(const grid *g, gc_dbscan_job *j, int64_t c, int64_t q,
				const int D)
{
	const float *pts = j->pts;
	const uint8_t *core = j->core;
	int64_t    *parent = j->parent;
	float		eps2 = j->eps2;
	int64_t		e = g->cstart[c + 1];
	const float *clo = g->lo + c * D,
			   *chi = g->hi + c * D;
	const float *qlo = g->lo + q * D,
			   *qhi = g->hi + q * D;
	int64_t		qb = g->cstart[q],
				qe = g->cstart[q + 1];

	if (g->ncore[q] == 0 ||
		gc_boxbox_mindist2(clo, chi, qlo, qhi, D) > eps2)
		return;
	if (g->dense[c] && g->dense[q])
	{
		/* both internally connected: one edge is enough */
		if (gc_uf_find(parent, g->rep[c]) == gc_uf_find(parent, g->rep[q]))
			return;
		if (gc_boxbox_maxdist2(clo, chi, qlo, qhi, D) <= eps2)
		{
			gc_uf_union(parent, g->rep[c], g->rep[q]);
			return;
		}
		for (int64_t s = g->rep[c]; s < e; s++)
		{
			if (!core[s] ||
				(qe - qb > 2 &&
				 gc_box_mindist2(pts + s * D, qlo, qhi, D) > eps2))
				continue;
			for (int64_t t = g->rep[q]; t < qe; t++)
				if (core[t] && gc_dist2(pts + s * D, pts + t * D, D) <= eps2)
				{
					gc_uf_union(parent, s, t);
					return;
				}
		}
	}
	else
	{
		for (int64_t s = g->rep[c]; s < e; s++)
		{
			if (!core[s])
				continue;
			for (int64_t t = g->rep[q]; t < qe; t++)
				if (core[t] && gc_dist2(pts + s * D, pts + t * D, D) <= eps2)
				{
					gc_uf_union(parent, s, t);
					if (g->dense[q])
						break;
				}
		}
	}
}

static ALWAYS_INLINE void
union_cell(const grid *g, gc_dbscan_job *j, int64_t c, const int D)
{
	const float *pts = j->pts;
	const uint8_t *core = j->core;
	int64_t    *parent = j->parent;
	float		eps2 = j->eps2;
	int64_t		b = g->cstart[c],
				e = g->cstart[c + 1];
	int64_t		r0[GC_GRID_MAX_ROWS],
				r1[GC_GRID_MAX_ROWS];
	int			nr;

	if (g->ncore[c] == 0)
		return;
	/* inside the cell */
	if (g->dense[c])
	{
		for (int64_t s = g->rep[c] + 1; s < e; s++)
			if (core[s])
				gc_uf_union(parent, g->rep[c], s);
	}
	else
	{
		for (int64_t s = b; s < e; s++)
			if (core[s])
				for (int64_t t = s + 1; t < e; t++)
					if (core[t] && gc_dist2(pts + s * D, pts + t * D, D) <= eps2)
						gc_uf_union(parent, s, t);
	}

	/* with the later cells around it (each pair of cells once) */
	nr = cell_rows(g, c, r0, r1);
	for (int r = 0; r < nr; r++)
	{
		int64_t		q0 = r0[r] > c ? r0[r] : c + 1;
		int64_t		pb,
					pe;

		if (q0 >= r1[r])
			continue;
		pb = g->cstart[q0];
		pe = g->cstart[r1[r]];
		if ((pe - pb) * g->ncore[c] <= 4 * FLAT_RUN)
		{
			/*
			 * Few pairs: test them all.  The hits are gathered without
			 * branching (a hit is a coin toss the predictor would lose),
			 * then united, skipping those already in s's component.
			 */
			int64_t		hit[4 * FLAT_RUN];

			for (int64_t s = g->rep[c]; s < e; s++)
			{
				int			k = 0;
				int64_t		rs;

				if (!core[s])
					continue;
				for (int64_t t = pb; t < pe; t++)
				{
					hit[k] = t;
					k += core[t] & (gc_dist2(pts + s * D, pts + t * D, D) <= eps2);
				}
				if (k == 0)
					continue;
				rs = gc_uf_find(parent, s);
				for (int i = 0; i < k; i++)
				{
					int64_t		rt = gc_uf_find(parent, hit[i]);

					if (rt != rs)
					{
						gc_uf_union(parent, rs, rt);
						rs = gc_uf_find(parent, rs);
					}
				}
			}
		}
		else
			for (int64_t q = q0; q < r1[r]; q++)
				union_cell_pair(g, j, c, q, D);
	}
}

/* ---- border phase ---- */

static ALWAYS_INLINE void
nearest_in_cells(const grid *g, const gc_dbscan_job *j, const float *x,
				 int64_t q0, int64_t q1, float *bestd, int64_t *best, const int D)
{
	const float *pts = j->pts;
	const uint8_t *core = j->core;
	const int64_t *perm = j->perm;

	for (int64_t q = q0; q < q1; q++)
	{
		if (g->ncore[q] == 0 ||
			gc_box_mindist2(x, g->lo + q * D, g->hi + q * D, D) > *bestd)
			continue;
		for (int64_t t = g->rep[q]; t < g->cstart[q + 1]; t++)
		{
			float		dd;

			if (!core[t])
				continue;
			dd = gc_dist2(x, pts + t * D, D);
			if (dd <= *bestd &&
				(*best < 0 || dd < *bestd || perm[t] < perm[*best]))
			{
				*best = t;
				*bestd = dd;
			}
		}
	}
}

static ALWAYS_INLINE void
border_cell(const grid *g, gc_dbscan_job *j, int64_t c, const int D)
{
	const int64_t *perm = j->perm;
	int64_t		b = g->cstart[c],
				e = g->cstart[c + 1];
	int64_t		r0[GC_GRID_MAX_ROWS],
				r1[GC_GRID_MAX_ROWS];
	int			nr;

	if (g->ncore[c] == e - b)
		return;
	nr = cell_rows(g, c, r0, r1);
	for (int64_t p = b; p < e; p++)
	{
		const float *x = j->pts + p * D;
		float		bestd = j->eps2;
		int64_t		best = -1;

		if (j->core[p])
			continue;
		for (int r = 0; r < nr; r++)
		{
			int64_t		pb = g->cstart[r0[r]],
						pe = g->cstart[r1[r]];

			if (pe - pb > FLAT_RUN)
				nearest_in_cells(g, j, x, r0[r], r1[r], &bestd, &best, D);
			else
				for (int64_t t = pb; t < pe; t++)
				{
					float		dd = gc_dist2(x, j->pts + t * D, D);

					if (j->core[t] && dd <= bestd &&
						(best < 0 || dd < bestd || perm[t] < perm[best]))
					{
						best = t;
						bestd = dd;
					}
				}
		}
		j->croot[perm[p]] = best >= 0 ? gc_uf_find(j->parent, best) : -1;
	}
}

/* Runs one phase over all cells, in parallel, with d specialised. */
typedef enum
{
	PHASE_CORE,
	PHASE_UNION,
	PHASE_BORDER
} grid_phase;

static ALWAYS_INLINE void
run_cell(const grid *g, gc_dbscan_job *j, int64_t c, grid_phase ph, const int D)
{
	if (ph == PHASE_CORE)
		core_cell(g, j, c, D);
	else if (ph == PHASE_UNION)
		union_cell(g, j, c, D);
	else
		border_cell(g, j, c, D);
}

static gc_code
grid_phase_run(const grid *g, gc_dbscan_job *j, grid_phase ph)
{
#pragma omp parallel for num_threads(j->nthreads) schedule(dynamic, 256)
	for (int64_t c = 0; c < g->ncell; c++)
	{
		if (gc_job_stopped(j))
			continue;
		switch (g->d)
		{
			case 1:
				run_cell(g, j, c, ph, 1);
				break;
			case 2:
				run_cell(g, j, c, ph, 2);
				break;
			default:
				run_cell(g, j, c, ph, 3);
				break;
		}
	}
	if (j->stop)
		return gc_fail(j->st, GC_ECANCEL, "canceled");
	return GC_OK;
}

gc_code
gc_dbscan_grid_run(gc_dbscan_job *j, bool *applied)
{
	gc_grid_plan gp;
	grid		g;
	gc_code		rc;

	*applied = false;
	if (j->d > 3 || !grid_plan_for(j, &gp))
		return GC_OK;
	*applied = true;
	memset(&g, 0, sizeof(g));
	rc = grid_build(j, &gp, &g);
	if (rc == GC_OK)
		rc = grid_phase_run(&g, j, PHASE_CORE);
	if (rc == GC_OK)
	{
#pragma omp parallel for num_threads(j->nthreads) schedule(static)
		for (int64_t s = 0; s < j->n; s++)
			j->parent[s] = s;
#pragma omp parallel for num_threads(j->nthreads) schedule(dynamic, 1024)
		for (int64_t c = 0; c < g.ncell; c++)
		{
			int64_t		k = 0,
						first = -1;

			for (int64_t s = g.cstart[c]; s < g.cstart[c + 1]; s++)
				if (j->core[s])
				{
					if (first < 0)
						first = s;
					k++;
				}
			g.ncore[c] = k;
			g.rep[c] = first;
		}
		rc = grid_phase_run(&g, j, PHASE_UNION);
	}
	if (rc == GC_OK)
		rc = grid_phase_run(&g, j, PHASE_BORDER);
	grid_free(&g);
	return rc;
}
