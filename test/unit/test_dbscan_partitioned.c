/*
 * test_dbscan_partitioned.c — the distributed DBSCAN (dbscan/dbscan.h) as a whole
 * pipeline, against gc_dbscan_cpu over all the rows in id order: labels
 * and core flags equal, bit for bit, for every row.
 *
 * partitioned_dbscan runs what gpu_dbscan_distributed runs, in one
 * process: the bounds, the split dimension, a histogram, the cuts, each
 * row's span, each partition's local DBSCAN over its rows in id order,
 * its summary written, copied (as if it crossed a network) and read back,
 * the merge (partitions added in a random order), and every home row's
 * final label.  On the way it checks that the summaries' rows cover every
 * row exactly once and that the links are exactly the core rows held
 * elsewhere too.  Fresh random data every run (the seed is printed; replay
 * with GPUCLUST_TEST_SEED); then targeted tests of the slabs, the cuts, a
 * summary's validation (truncated and corrupted buffers), the merge's
 * errors and its cancel flag.
 */
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dbscan/dbscan.h"
#include "gpuclust_core.h"
#include "testutil.h"

/* AddressSanitizer builds (make unit-sanitize) run fewer random cases. */
#if defined(__SANITIZE_ADDRESS__)
#define CASE_SCALE 5
#else
#define CASE_SCALE 1
#endif

static const gc_ctx one_thread = {.n_threads = 1};
static int	ncases,
			multi_cases,		/* cases of more than one partition */
			max_parts,
			infinite_halo_cases;
static int64_t total_rows,
			total_held;

static bool
starts_with(const char *s, const char *prefix)
{
	return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* ---- random data ---- */

static double
tu_gauss(uint64_t *s)
{
	double		u = tu_uniform(s),
				v = tu_uniform(s);

	return sqrt(-2.0 * log(u + 1e-300)) * cos(6.283185307179586 * v);
}

/* n unique ids in random order: random int64s (negative and huge
 * included, INT64_MIN and INT64_MAX now and then), or a shuffled dense
 * range. */
static int64_t *
make_ids(int64_t n, uint64_t *rs)
{
	int64_t    *ids = malloc(sizeof(int64_t) * (size_t) (n + 1));
	int64_t    *sorted = malloc(sizeof(int64_t) * (size_t) (n + 1));
	bool		dense = tu_next(rs) % 3 == 0;
	bool		again = true;

	for (int64_t i = 0; i < n; i++)
		ids[i] = dense ? i - n / 2 : (int64_t) tu_next(rs);
	if (!dense && n >= 2 && tu_next(rs) % 2 == 0)
	{
		ids[tu_next(rs) % n] = INT64_MIN;
		ids[tu_next(rs) % n] = INT64_MAX;
	}
	while (again)
	{
		again = false;
		memcpy(sorted, ids, sizeof(int64_t) * (size_t) n);
		qsort(sorted, (size_t) n, sizeof(int64_t), gc_cmp_int64);
		for (int64_t i = 1; i < n; i++)
			if (sorted[i] == sorted[i - 1])
			{
				/* replace every copy of a repeated id but one */
				for (int64_t k = 0, seen = 0; k < n; k++)
					if (ids[k] == sorted[i] && seen++ > 0)
						ids[k] = (int64_t) tu_next(rs);
				again = true;
			}
	}
	/* shuffle (dense ids come out in order otherwise) */
	for (int64_t i = n - 1; i > 0; i--)
	{
		int64_t		k = (int64_t) (tu_next(rs) % (uint64_t) (i + 1)),
					t = ids[i];

		ids[i] = ids[k];
		ids[k] = t;
	}
	free(sorted);
	return ids;
}

typedef enum
{
	SHAPE_BLOBS,				/* gaussian blobs */
	SHAPE_UNIFORM,				/* uniform in [0, 10)^d */
	SHAPE_DUPLICATES,			/* a few points, each many times */
	SHAPE_LATTICE,				/* multiples of eps: rows eps apart, on cuts */
	SHAPE_HUGE,					/* blobs and a few huge coordinates */
	SHAPE_CITIES,				/* 2-d: dense cities, heavy-tailed sizes */
	NSHAPES
} shape;

static const char *shape_name[] = {"blobs", "uniform", "duplicates",
"lattice", "huge", "cities"};

/*
 * n x d rows of a shape.  step: the lattice's spacing (the case's eps).
 */
static float *
make_rows(int64_t n, int d, shape sh, double step, uint64_t *rs)
{
	float	   *X = malloc(sizeof(float) * (size_t) (n * d + 1));
	int			nc = 1 + (int) (tu_next(rs) % 8);
	double		ctr[8][16],
				sd[8],
				weight[8],
				wsum = 0.0;
	int			side = 1 << (1 + tu_next(rs) % 5);	/* lattice: 2 .. 32 steps */
	double		huge = 1e17 / sqrt((double) d);

	for (int c = 0; c < nc; c++)
	{
		for (int k = 0; k < d; k++)
			ctr[c][k] = sh == SHAPE_CITIES
				? (k == 0 ? 360.0 : 180.0) * (tu_uniform(rs) - 0.5)
				: tu_uniform(rs) * 10.0;
		sd[c] = 0.1 + tu_uniform(rs);
		/* city sizes: Pareto with alpha 1, so a few dominate */
		weight[c] = sh == SHAPE_CITIES ? 1.0 / (tu_uniform(rs) + 0.01) : 1.0;
		wsum += weight[c];
	}
	for (int64_t i = 0; i < n; i++)
	{
		double		u = tu_uniform(rs) * wsum;
		int			c = 0;

		while (c < nc - 1 && u >= weight[c])
			u -= weight[c++];
		for (int k = 0; k < d; k++)
		{
			double		v;

			switch (sh)
			{
				case SHAPE_BLOBS:
					v = ctr[c][k] + sd[c] * tu_gauss(rs);
					break;
				case SHAPE_UNIFORM:
					v = tu_uniform(rs) * 10.0;
					break;
				case SHAPE_DUPLICATES:
					v = ctr[c][k];
					break;
				case SHAPE_LATTICE:
					v = (double) (tu_next(rs) % (uint64_t) side) * step;
					break;
				case SHAPE_HUGE:
					v = ctr[c][k] + sd[c] * tu_gauss(rs);
					if (tu_next(rs) % 50 == 0)
						v = (tu_uniform(rs) - 0.5) * 2.0 * huge;
					break;
				default:
					/* a city: dense core with a long tail; 10% rural */
					if (tu_next(rs) % 10 == 0)
						v = (k == 0 ? 360.0 : 180.0) * (tu_uniform(rs) - 0.5);
					else
						v = ctr[c][k] + 0.02 * sqrt(weight[c]) * tu_gauss(rs) *
							(tu_next(rs) % 4 == 0 ? 10.0 : 1.0);
					break;
			}
			X[i * d + k] = (float) v;
		}
	}
	return X;
}

/* A typical eps: a low quantile of the distances of random pairs. */
static double
typical_eps(const float *X, int64_t n, int d, uint64_t *rs)
{
	float		s[128];
	double		e;

	if (n < 2)
		return 0.5;
	for (int m = 0; m < 128; m++)
	{
		int64_t		a = (int64_t) (tu_next(rs) % (uint64_t) n),
					b = (int64_t) (tu_next(rs) % (uint64_t) n);

		s[m] = sqrtf(gc_dist2(X + a * d, X + b * d, d));
	}
	for (int a = 1; a < 128; a++)
		for (int b = a; b > 0 && s[b - 1] > s[b]; b--)
		{
			float		t = s[b];

			s[b] = s[b - 1];
			s[b - 1] = t;
		}
	e = s[1 + tu_next(rs) % 12];
	return e > 0 ? e : 0.25;
}

/* ---- the pipeline ---- */

typedef struct id_row
{
	int64_t		id;
	int64_t		row;
} id_row;

static int
cmp_id_row(const void *a, const void *b)
{
	int64_t		x = ((const id_row *) a)->id,
				y = ((const id_row *) b)->id;

	return x < y ? -1 : x > y;
}

static int
cmp_double(const void *a, const void *b)
{
	double		x = *(const double *) a,
				y = *(const double *) b;

	return x < y ? -1 : x > y;
}

/* The rows' positions in id order. */
static int64_t *
id_order(const int64_t *ids, int64_t n)
{
	id_row	   *t = malloc(sizeof(id_row) * (size_t) (n + 1));
	int64_t    *ord = malloc(sizeof(int64_t) * (size_t) (n + 1));

	for (int64_t i = 0; i < n; i++)
		t[i] = (id_row) {ids[i], i};
	qsort(t, (size_t) n, sizeof(id_row), cmp_id_row);
	for (int64_t i = 0; i < n; i++)
		ord[i] = t[i].row;
	free(t);
	return ord;
}

/* Partition i holds v, by the header's definition. */
static bool
holds(const gc_dbscan_plan *p, double v, int i)
{
	double		below = i == 0 ? -INFINITY : p->cuts[i - 1],
				above = i == p->parts - 1 ? INFINITY : p->cuts[i];

	return v - below >= -p->halo && v - above < p->halo;
}

static bool
is_home(const gc_dbscan_plan *p, double v, int i)
{
	double		below = i == 0 ? -INFINITY : p->cuts[i - 1],
				above = i == p->parts - 1 ? INFINITY : p->cuts[i];

	return v >= below && v < above;
}

/* How a case cuts its slabs. */
typedef struct cut_spec
{
	int			parts;			/* partitions asked for */
	int			bins;			/* histogram bins */
	bool		on_rows;		/* cuts at rows' coordinates, not the histogram's */
} cut_spec;

typedef struct partition
{
	int64_t		n;				/* rows held */
	int64_t    *rows;			/* their positions in X, in id order */
	int64_t		nf;
	int64_t    *nf_ids;
	void	   *buf;			/* the summary, as received */
	gc_dbscan_summary s;
} partition;

/*
 * Cuts at the split coordinates of random rows (so rows lie exactly on
 * cuts, and, on a lattice, exactly eps from one); at most parts - 1.
 */
static int
cuts_on_rows(const float *X, int64_t n, int d, int dim, int parts,
			 uint64_t *rs, double *cuts)
{
	int			m = 0,
				k = 0;

	if (n == 0)
		return 1;
	for (; m < parts - 1; m++)
		cuts[m] = X[(tu_next(rs) % (uint64_t) n) * d + dim];
	qsort(cuts, (size_t) m, sizeof(double), cmp_double);
	for (int i = 0; i < m; i++)
		if (k == 0 || cuts[i] > cuts[k - 1])
			cuts[k++] = cuts[i];
	return k + 1;
}

/*
 * The summary of partition p against the local run it summarizes: its
 * rows are exactly the partition's home rows in id order (then the ids
 * without features), its links exactly the rows core here and held
 * elsewhere too, comp_min the lowest home id of each cluster.
 */
static void
check_summary(const char *what, const gc_dbscan_summary *s,
			  const gc_dbscan_local *loc)
{
	int32_t		comps = 0;
	int64_t		r = 0,
				k = 0;
	bool		rows_ok = true,
				links_ok = true,
				min_ok = true;

	for (int64_t i = 0; i < loc->n; i++)
		if (loc->labels[i] + 1 > comps)
			comps = loc->labels[i] + 1;
	CHECK(s->part == loc->part && s->comps == comps,
		  "%s: partition %d summary says partition %d, %d clusters (%d)",
		  what, loc->part, s->part, s->comps, comps);
	if (s->part != loc->part || s->comps != comps)
		return;
	for (int64_t i = 0; i < loc->n; i++)
	{
		bool		link = loc->is_core[i] &&
			(loc->home[i] != loc->part || loc->shared[i]);

		if (loc->home[i] == loc->part)
		{
			if (r >= s->rows || s->row_id[r] != loc->ids[i] ||
				s->row_comp[r] != loc->labels[i] ||
				s->row_core[r] != loc->is_core[i])
				rows_ok = false;
			r++;
		}
		if (link)
		{
			if (k >= s->links || s->link_id[k] != loc->ids[i] ||
				s->link_home[k] != loc->home[i] ||
				s->link_comp[k] != loc->labels[i])
				links_ok = false;
			k++;
		}
	}
	for (int64_t i = 0; i < loc->nf; i++, r++)
		if (r >= s->rows || s->row_id[r] != loc->nf_ids[i] ||
			s->row_comp[r] != GC_DBP_NO_FEATURES || s->row_core[r] != 0)
			rows_ok = false;
	CHECK(rows_ok && r == s->rows, "%s: partition %d: summary rows are not its home rows",
		  what, loc->part);
	CHECK(links_ok && k == s->links,
		  "%s: partition %d: links are not its shared core rows", what, loc->part);
	for (int32_t c = 0; c < comps; c++)
	{
		int64_t		lowest = INT64_MAX;

		for (int64_t i = 0; i < loc->n; i++)
			if (loc->home[i] == loc->part && loc->labels[i] == c &&
				loc->ids[i] < lowest)
				lowest = loc->ids[i];
		if (s->comp_min[c] != lowest)
			min_ok = false;
	}
	CHECK(min_ok, "%s: partition %d: comp_min wrong", what, loc->part);
}

/* The plan's slabs of one row against the header's definitions. */
static bool
span_ok(const gc_dbscan_plan *plan, float x, bool every)
{
	int32_t		h,
				f,
				l;

	gc_dbscan_span(plan, x, &h, &f, &l);
	if (!(0 <= f && f <= h && h <= l && l < plan->parts) ||
		!is_home(plan, x, h) || !holds(plan, x, f) || !holds(plan, x, l) ||
		(f > 0 && holds(plan, x, f - 1)) ||
		(l < plan->parts - 1 && holds(plan, x, l + 1)))
		return false;
	if (every)
		for (int i = 0; i < plan->parts; i++)
			if (holds(plan, x, i) != (f <= i && i <= l) ||
				is_home(plan, x, i) != (i == h))
				return false;
	return true;
}

typedef struct pipe_result
{
	int			parts;			/* P */
	int64_t		held;			/* rows held over all partitions */
	int32_t		clusters;		/* the merge's */
} pipe_result;

/*
 * The distributed run of the n rows of X (any order, ids unique) and nf
 * more ids without features: labels / is_core per row of X.  False when
 * a step failed (counted).
 */
static bool
partitioned_dbscan(const char *what, const float *X, const int64_t *ids,
				   int64_t n, int d, double eps, int64_t min_pts,
				   const cut_spec *cs, const int64_t *nf_ids, int64_t nf,
				   uint64_t *rs, int32_t *labels, uint8_t *is_core,
				   pipe_result *res)
{
	gc_dbscan_params dp = {eps, min_pts, GC_METRIC_EUCLIDEAN, GC_DBSCAN_UNION_FIND};
	double		lo[16],
				hi[16];
	double	   *cuts = malloc(sizeof(double) * (size_t) (cs->parts + 1));
	double	   *counts = calloc((size_t) cs->bins, sizeof(double));
	int64_t    *ord = id_order(ids, n);
	int32_t    *home = malloc(sizeof(int32_t) * (size_t) (n + 1)),
			   *first = malloc(sizeof(int32_t) * (size_t) (n + 1)),
			   *last = malloc(sizeof(int32_t) * (size_t) (n + 1));
	int64_t    *seen = calloc((size_t) (n + 1), sizeof(int64_t));
	partition  *pt = NULL;
	int		   *perm = NULL;
	gc_dbscan_plan plan;
	gc_dbscan_merge *m = NULL;
	gc_status	st;
	gc_code		rc;
	int			dim,
				P;
	bool		ok = false,
				spans = true;
	int64_t		nf_seen = 0,
				once = 0;

	memset(res, 0, sizeof(*res));
	for (int k = 0; k < d; k++)
	{
		lo[k] = n > 0 ? INFINITY : 0.0;
		hi[k] = n > 0 ? -INFINITY : 0.0;
		for (int64_t i = 0; i < n; i++)
		{
			lo[k] = fmin(lo[k], X[i * d + k]);
			hi[k] = fmax(hi[k], X[i * d + k]);
		}
	}
	dim = gc_dbscan_split_dim(lo, hi, d);
	for (int64_t i = 0; i < n; i++)
		counts[gc_dbscan_bin(X[i * d + dim], lo[dim], hi[dim], cs->bins)] += 1.0;
	P = cs->on_rows ? cuts_on_rows(X, n, d, dim, cs->parts, rs, cuts)
		: gc_dbscan_cuts(counts, cs->bins, lo[dim], hi[dim], cs->parts, cuts);
	CHECK(P >= 1 && P <= cs->parts, "%s: %d partitions of %d", what, P, cs->parts);
	plan = (gc_dbscan_plan) {d, dim, P, gc_dbscan_halo(eps), cuts};
	rc = gc_dbscan_plan_check(&plan, &st);
	CHECK(rc == GC_OK, "%s: plan: %s", what, st.message);
	if (rc != GC_OK)
		goto out;
	res->parts = P;

	/* the spans; partitions' rows in id order */
	pt = calloc((size_t) P, sizeof(partition));
	for (int64_t i = 0; i < n; i++)
	{
		float		x = X[i * d + dim];

		gc_dbscan_span(&plan, x, &home[i], &first[i], &last[i]);
		if (!span_ok(&plan, x, P <= 8 || i % 61 == 0))
			spans = false;
		for (int p = first[i]; p <= last[i]; p++)
			pt[p].n++;
	}
	CHECK(spans, "%s: a row's span is not the plan's", what);
	for (int p = 0; p < P; p++)
	{
		pt[p].rows = malloc(sizeof(int64_t) * (size_t) (pt[p].n + 1));
		pt[p].nf_ids = malloc(sizeof(int64_t) * (size_t) (nf + 1));
		res->held += pt[p].n;
		pt[p].n = 0;
	}
	for (int64_t k = 0; k < n; k++)
	{
		int64_t		i = ord[k];

		for (int p = first[i]; p <= last[i]; p++)
			pt[p].rows[pt[p].n++] = i;
	}
	for (int64_t k = 0; k < nf; k++)
	{
		int			p = (int) (tu_next(rs) % (uint64_t) P);

		pt[p].nf_ids[pt[p].nf++] = nf_ids[k];
	}

	/* each partition on its own: local run, summary, "network", read back */
	for (int p = 0; p < P; p++)
	{
		int64_t		np = pt[p].n;
		float	   *Xp = malloc(sizeof(float) * (size_t) (np * d + 1));
		int64_t    *pid = malloc(sizeof(int64_t) * (size_t) (np + 1));
		int32_t    *ph = malloc(sizeof(int32_t) * (size_t) (np + 1));
		uint8_t    *psh = malloc((size_t) np + 1);
		int32_t    *pl = malloc(sizeof(int32_t) * (size_t) (np + 1));
		uint8_t    *pc = malloc((size_t) np + 1);
		gc_dbscan_local loc = {p, np, pid, ph, psh, pl, pc, pt[p].nf, pt[p].nf_ids};
		size_t		bytes = 0;
		void	   *w;

		for (int64_t k = 0; k < np; k++)
		{
			int64_t		i = pt[p].rows[k];

			memcpy(Xp + k * d, X + i * d, sizeof(float) * (size_t) d);
			pid[k] = ids[i];
			ph[k] = home[i];
			psh[k] = first[i] < last[i];
		}
		rc = gc_dbscan_cpu(&one_thread, Xp, np, d, &dp, pl, pc, &st);
		CHECK(rc == GC_OK, "%s: partition %d: %s", what, p, st.message);
		if (rc == GC_OK)
		{
			rc = gc_dbscan_summary_bytes(&loc, &bytes, &st);
			CHECK(rc == GC_OK, "%s: partition %d summary: %s", what, p, st.message);
		}
		if (rc == GC_OK)
		{
			/* written, then copied where nothing else was, as a network would */
			w = malloc(bytes);
			gc_dbscan_summarize(&loc, w);
			pt[p].buf = aligned_alloc(8, (bytes + 7) / 8 * 8);
			memcpy(pt[p].buf, w, bytes);
			free(w);
			rc = gc_dbscan_summary_read(pt[p].buf, bytes, &pt[p].s, &st);
			CHECK(rc == GC_OK, "%s: partition %d read back: %s", what, p, st.message);
			if (rc == GC_OK)
				check_summary(what, &pt[p].s, &loc);
		}
		free(Xp);
		free(pid);
		free(ph);
		free(psh);
		free(pl);
		free(pc);
		if (rc != GC_OK)
			goto out;
	}

	/* the coordinator: partitions arrive in any order */
	m = gc_dbscan_merge_new(P);
	perm = malloc(sizeof(int) * (size_t) P);
	for (int p = 0; p < P; p++)
		perm[p] = p;
	for (int p = P - 1; p > 0; p--)
	{
		int			k = (int) (tu_next(rs) % (uint64_t) (p + 1)),
					t = perm[p];

		perm[p] = perm[k];
		perm[k] = t;
	}
	for (int p = 0; p < P; p++)
	{
		rc = gc_dbscan_merge_add(m, &pt[perm[p]].s, &st);
		CHECK(rc == GC_OK, "%s: add partition %d: %s", what, perm[p], st.message);
		if (rc != GC_OK)
			goto out;
	}
	rc = gc_dbscan_merge_finish(&one_thread, m, &st);
	CHECK(rc == GC_OK, "%s: finish: %s", what, st.message);
	if (rc != GC_OK)
		goto out;
	res->clusters = gc_dbscan_merge_clusters(m);

	/* every home row's final label, from its home partition's summary */
	for (int p = 0; p < P; p++)
	{
		const gc_dbscan_summary *s = &pt[p].s;
		int64_t		r = 0;

		for (int64_t k = 0; k < pt[p].n; k++)
		{
			int64_t		i = pt[p].rows[k];

			if (home[i] != p)
				continue;
			if (r < s->rows && s->row_id[r] == ids[i])
			{
				labels[i] = gc_dbscan_merge_label(m, p, s->row_comp[r]);
				is_core[i] = s->row_core[r];
				seen[i]++;
			}
			r++;
		}
		for (; r < s->rows; r++)
			nf_seen += s->row_comp[r] == GC_DBP_NO_FEATURES &&
				gc_dbscan_merge_label(m, p, s->row_comp[r]) == GC_DBP_NO_FEATURES;
	}
	for (int64_t i = 0; i < n; i++)
		once += seen[i] == 1;
	CHECK(once == n, "%s: %lld of %lld rows come back exactly once",
		  what, (long long) once, (long long) n);
	CHECK(nf_seen == nf, "%s: %lld of %lld rows without features come back",
		  what, (long long) nf_seen, (long long) nf);
	ok = once == n;

out:
	gc_dbscan_merge_free(m);
	if (pt != NULL)
		for (int p = 0; p < P; p++)
		{
			free(pt[p].rows);
			free(pt[p].nf_ids);
			free(pt[p].buf);
		}
	free(pt);
	free(perm);
	free(cuts);
	free(counts);
	free(ord);
	free(home);
	free(first);
	free(last);
	free(seen);
	return ok;
}

/*
 * One case: the pipeline against gc_dbscan_cpu over all rows in id order.
 * Returns the pipeline's result (for the halo overhead).
 */
static pipe_result
run_case(const char *what, const float *X, const int64_t *ids, int64_t n,
		 int d, double eps, int64_t min_pts, const cut_spec *cs,
		 const int64_t *nf_ids, int64_t nf, uint64_t *rs)
{
	gc_dbscan_params dp = {eps, min_pts, GC_METRIC_EUCLIDEAN, GC_DBSCAN_UNION_FIND};
	int64_t    *ord = id_order(ids, n);
	float	   *Xs = malloc(sizeof(float) * (size_t) (n * d + 1));
	int32_t    *rl = malloc(sizeof(int32_t) * (size_t) (n + 1)),
			   *l = malloc(sizeof(int32_t) * (size_t) (n + 1));
	uint8_t    *rc = malloc((size_t) n + 1),
			   *c = malloc((size_t) n + 1);
	int32_t		ref_clusters = 0;
	int64_t		bad = -1;
	gc_status	st;
	pipe_result res;
	gc_code		code;

	for (int64_t k = 0; k < n; k++)
		memcpy(Xs + k * d, X + ord[k] * d, sizeof(float) * (size_t) d);
	code = gc_dbscan_cpu(&one_thread, Xs, n, d, &dp, rl, rc, &st);
	CHECK(code == GC_OK, "%s: reference: %s", what, st.message);
	if (code == GC_OK &&
		partitioned_dbscan(what, X, ids, n, d, eps, min_pts, cs, nf_ids, nf,
						   rs, l, c, &res))
	{
		for (int64_t k = 0; k < n; k++)
		{
			if (rl[k] + 1 > ref_clusters)
				ref_clusters = rl[k] + 1;
			if (bad < 0 && (l[ord[k]] != rl[k] || c[ord[k]] != rc[k]))
				bad = k;
		}
		CHECK(bad < 0,
			  "%s n=%lld d=%d eps=%.9g min_pts=%lld parts=%d/%d bins=%d%s: "
			  "id %lld (id rank %lld) label %d core %d, single node %d core %d",
			  what, (long long) n, d, eps, (long long) min_pts, res.parts,
			  cs->parts, cs->bins, cs->on_rows ? " cuts-on-rows" : "",
			  bad >= 0 ? (long long) ids[ord[bad]] : 0LL, (long long) bad,
			  bad >= 0 ? l[ord[bad]] : 0, bad >= 0 ? c[ord[bad]] : 0,
			  bad >= 0 ? rl[bad] : 0, bad >= 0 ? rc[bad] : 0);
		CHECK(res.clusters == ref_clusters, "%s: %d clusters, single node %d",
			  what, res.clusters, ref_clusters);
		total_rows += n;
		total_held += res.held;
		multi_cases += res.parts > 1;
		infinite_halo_cases += res.parts > 1 && isinf(gc_dbscan_halo(eps));
		if (res.parts > max_parts)
			max_parts = res.parts;
	}
	else
		memset(&res, 0, sizeof(res));
	ncases++;
	free(ord);
	free(Xs);
	free(rl);
	free(l);
	free(rc);
	free(c);
	return res;
}

static void
test_random(uint64_t *rs)
{
	static const int dims[] = {1, 2, 3, 5, 16};
	static const int parts_list[] = {1, 2, 3, 7, 16, 0 /* more than n */ };
	static const double steps[] = {0.5, 0.25, 1.0, 0.1};
	int			cases = 1200 / CASE_SCALE;

	for (int ci = 0; ci < cases; ci++)
	{
		int			d = dims[ci % 5];
		shape		sh = (shape) ((ci / 5) % NSHAPES);
		uint64_t	r = tu_next(rs) % 100;
		int64_t		n,
					nf = tu_next(rs) % 4 == 0 ? (int64_t) (tu_next(rs) % 4) : 0,
					min_pts;
		int			ek = (int) (tu_next(rs) % 20);
		double		step = steps[tu_next(rs) % 4],
					eps;
		cut_spec	cs;
		float	   *X;
		int64_t    *ids;
		char		what[96];

		if (sh == SHAPE_CITIES)
			d = 2;
		n = r < 12 ? (int64_t) (tu_next(rs) % 4)
			: r < 55 ? 4 + (int64_t) (tu_next(rs) % 400)
			: r < 88 ? 400 + (int64_t) (tu_next(rs) % 3600)
			: 4000 + (int64_t) (tu_next(rs) % (d >= 16 ? 4000 : 16000));
		/* every row a neighbour of every other: keep those smaller */
		if (ek >= 17 && n > 2500)
			n = 2500;
		X = make_rows(n, d, sh, step, rs);
		ids = make_ids(n + nf, rs);
		eps = sh == SHAPE_LATTICE && ek < 10 ? step : typical_eps(X, n, d, rs);
		if (ek >= 14 && ek < 17)
			eps /= 30.0;		/* mostly noise */
		else if (ek >= 17 && ek < 19)
			eps = 1e6;			/* everything one cluster */
		else if (ek == 19)
			eps = 1e20;			/* eps2 overflows: the halo is infinite */
		switch (tu_next(rs) % 5)
		{
			case 0:
				min_pts = 1;
				break;
			case 1:
				min_pts = 2;
				break;
			case 2:
				min_pts = n + 1;
				break;
			default:
				min_pts = 3 + (int64_t) (tu_next(rs) % 8);
				break;
		}
		/* more partitions than rows only where that stays quick */
		cs.parts = parts_list[tu_next(rs) % (n <= 2000 && ek < 17 ? 6 : 5)];
		if (cs.parts == 0)
			cs.parts = (int) n + 3;
		cs.bins = 64 << (tu_next(rs) % 7);
		cs.on_rows = tu_next(rs) % 4 == 0 && (cs.parts <= 64 || n <= 3000);
		snprintf(what, sizeof(what), "%s d=%d", shape_name[sh], d);
		run_case(what, X, ids, n, d, eps, min_pts, &cs, ids + n, nf, rs);
		free(X);
		free(ids);
	}
}

/*
 * The halo's cost: rows held over all partitions / n.  Each partition
 * holds its slab and two eps' width more on each side, so the cost is
 * about 1 + 4 eps / (slab width): small where slabs are wide against eps.
 * Printed for the random cases' kind of eps (a low quantile of the pair
 * distances: large against 16 slabs) and for city-like data at 0.1
 * degree.
 */
static void
test_overhead(uint64_t *rs)
{
	static const struct
	{
		shape		sh;
		int			d;
		double		eps;		/* 0: typical_eps */
	}			setups[] = {{SHAPE_BLOBS, 2, 0}, {SHAPE_BLOBS, 16, 0}, {SHAPE_CITIES, 2, 0.1}};

	for (int k = 0; k < 3; k++)
	{
		int			d = setups[k].d;
		int64_t		n = 20000 / CASE_SCALE;
		float	   *X = make_rows(n, d, setups[k].sh, 0.5, rs);
		int64_t    *ids = make_ids(n, rs);
		double		eps = setups[k].eps > 0 ? setups[k].eps : typical_eps(X, n, d, rs);
		cut_spec	cs = {16, 1024, false};
		pipe_result res;

		res = run_case("overhead", X, ids, n, d, eps, 5, &cs, NULL, 0, rs);
		printf("test_dbscan_partitioned: halo overhead, %s n=%lld d=%d eps=%.4g, %d partitions: "
			   "%.3f rows held per row\n",
			   shape_name[setups[k].sh], (long long) n, d, eps, res.parts,
			   (double) res.held / (double) n);
		free(X);
		free(ids);
	}
}

/* ---- the slabs ---- */

/*
 * The halo's margin: every pair of one-dimensional neighbours (walked
 * float by float across the edge of eps) is less than half the halo
 * apart, as the header's argument needs.
 */
static void
test_halo(uint64_t *rs)
{
	int			bad = 0,
				pairs = 0;

	CHECK(isinf(gc_dbscan_halo(1e20)) && gc_dbscan_halo(1e20) > 0,
		  "halo of eps 1e20: %g", gc_dbscan_halo(1e20));
	CHECK(gc_dbscan_halo(1.0) > 2.0 && gc_dbscan_halo(1.0) < 2.0001,
		  "halo of eps 1: %.17g", gc_dbscan_halo(1.0));
	CHECK(isfinite(gc_dbscan_halo(1e-30)) && gc_dbscan_halo(1e-30) > 0,
		  "halo of eps 1e-30: %g", gc_dbscan_halo(1e-30));
	for (int t = 0; t < 4000; t++)
	{
		double		eps = pow(10.0, tu_uniform(rs) * 36.0 - 18.0);
		float		a = (float) ((tu_uniform(rs) - 0.5) * pow(10.0, tu_uniform(rs) * 30.0 - 10.0));
		float		eps2 = gc_eps2(eps);
		double		half = gc_dbscan_halo(eps) / 2.0;

		for (int side = -1; side <= 1; side += 2)
		{
			float		b = (float) ((double) a + side * eps);

			/* from a few floats inside eps to the first one past it */
			for (int k = 0; k < 3; k++)
				b = nextafterf(b, a);
			for (int k = 0; k < 8; k++)
			{
				if (gc_dist2(&a, &b, 1) <= eps2)
				{
					pairs++;
					if (!(fabs((double) b - (double) a) < half))
						bad++;
				}
				b = nextafterf(b, side * INFINITY);
			}
		}
	}
	CHECK(bad == 0 && pairs > 0, "%d of %d neighbour pairs at least half a halo apart",
		  bad, pairs);
}

static void
test_span(uint64_t *rs)
{
	double		cuts[] = {-10.0, 0.0, 10.0, 20.0};
	gc_dbscan_plan p = {1, 0, 5, 0.5, cuts};
	struct
	{
		float		x;
		double		halo;
		int32_t		home,
					first,
					last;
	}			cases[] = {
		{0.0f, 0.5, 2, 1, 2},	/* on a cut: home above it */
		{-0.0f, 0.5, 2, 1, 2},
		{-0.5f, 0.5, 1, 1, 2},	/* exactly cut - halo: the slab above holds it */
		{-0x1.000002p-1f, 0.5, 1, 1, 1},	/* a float below: it does not */
		{0.5f, 0.5, 2, 2, 2},	/* exactly cut + halo: the slab below does not */
		{0x1.fffffep-2f, 0.5, 2, 1, 2},	/* a float below: it does */
		{9.5f, 0.5, 2, 2, 3},
		{10.5f, 0.5, 3, 3, 3},
		{-1e30f, 0.5, 0, 0, 0},
		{1e30f, 0.5, 4, 4, 4},
		{20.0f, 0.5, 4, 3, 4},
		{10.0f, 0.0, 3, 3, 3},	/* no halo: only the home slab */
		{0.0f, INFINITY, 2, 0, 4},	/* an infinite halo: every slab */
		{-3.4e38f, INFINITY, 0, 0, 4},
		{3.4e38f, INFINITY, 4, 0, 4},
		{15.0f, 5.0, 3, 3, 4},	/* 15 - 10 < 5 is false; 15 - 20 >= -5 true */
		{14.99f, 5.0, 3, 2, 3},
	};
	bool		ok;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
	{
		int32_t		h,
					f,
					l;

		p.halo = cases[i].halo;
		gc_dbscan_span(&p, cases[i].x, &h, &f, &l);
		CHECK(h == cases[i].home && f == cases[i].first && l == cases[i].last,
			  "span of %a, halo %g: home %d first %d last %d, expected %d %d %d",
			  cases[i].x, cases[i].halo, h, f, l, cases[i].home,
			  cases[i].first, cases[i].last);
	}
	/* one partition: everything everywhere, cuts never read */
	{
		gc_dbscan_plan one = {2, 1, 1, 0.25, NULL};
		int32_t		h,
					f,
					l;

		gc_dbscan_span(&one, -3.4e38f, &h, &f, &l);
		CHECK(h == 0 && f == 0 && l == 0, "one partition: %d %d %d", h, f, l);
	}

	/* random plans: against the definitions, partition by partition */
	ok = true;
	for (int t = 0; t < 3000 && ok; t++)
	{
		int			P = 1 + (int) (tu_next(rs) % 40);
		double	   *c = malloc(sizeof(double) * (size_t) P);
		gc_dbscan_plan q = {1, 0, P, 0.0, c};
		double		scale = pow(10.0, tu_uniform(rs) * 8.0 - 4.0);
		double		v;

		for (int i = 0; i < P - 1; i++)
			c[i] = (i == 0 ? 0.0 : c[i - 1]) + scale * (tu_next(rs) % 4 == 0 ? 1.0 : tu_uniform(rs) + 1e-9);
		switch (tu_next(rs) % 4)
		{
			case 0:
				q.halo = 0.0;
				break;
			case 1:
				q.halo = INFINITY;
				break;
			default:
				q.halo = scale * tu_uniform(rs) * 3.0;
				break;
		}
		for (int k = 0; k < 40 && ok; k++)
		{
			int			i = P > 1 ? (int) (tu_next(rs) % (uint64_t) (P - 1)) : 0;

			switch (tu_next(rs) % 5)
			{
				case 0:
					v = P > 1 ? c[i] : 0.0;
					break;
				case 1:
					v = P > 1 ? c[i] - q.halo : 1.0;
					break;
				case 2:
					v = P > 1 ? c[i] + q.halo : -1.0;
					break;
				default:
					v = (tu_uniform(rs) * 1.2 - 0.1) * (P > 1 ? c[P - 2] : 1.0);
					break;
			}
			if (!isfinite(v))
				v = 0.0;
			ok = span_ok(&q, (float) v, true) &&
				span_ok(&q, nextafterf((float) v, INFINITY), true) &&
				span_ok(&q, nextafterf((float) v, -INFINITY), true);
			CHECK(ok, "random plan: span of %a (P %d, halo %g) against the definition",
				  (float) v, P, q.halo);
		}
		free(c);
	}
}

static void
test_plan_check(void)
{
	double		cuts[] = {1.0, 2.0, 2.0};
	double		bad[] = {1.0, NAN};
	gc_dbscan_plan p = {3, 1, 3, 0.5, cuts};
	gc_status	st;

	CHECK(gc_dbscan_plan_check(&p, &st) == GC_OK, "plan: %s", st.message);
	p.parts = 4;
	CHECK(gc_dbscan_plan_check(&p, &st) == GC_EINVAL &&
		  strstr(st.message, "strictly increasing") != NULL, "repeated cut: %s", st.message);
	p.parts = 3;
	p.cuts = bad;
	CHECK(gc_dbscan_plan_check(&p, &st) == GC_EINVAL, "NaN cut");
	p.cuts = cuts;
	p.dim = 3;
	CHECK(gc_dbscan_plan_check(&p, &st) == GC_EINVAL, "dim 3 of 3");
	p.dim = -1;
	CHECK(gc_dbscan_plan_check(&p, &st) == GC_EINVAL, "dim -1");
	p.dim = 0;
	p.halo = NAN;
	CHECK(gc_dbscan_plan_check(&p, &st) == GC_EINVAL, "NaN halo");
	p.halo = -1.0;
	CHECK(gc_dbscan_plan_check(&p, &st) == GC_EINVAL, "negative halo");
	p.halo = INFINITY;
	CHECK(gc_dbscan_plan_check(&p, &st) == GC_OK, "infinite halo: %s", st.message);
	p.parts = 0;
	CHECK(gc_dbscan_plan_check(&p, &st) == GC_EINVAL, "0 partitions");
	p.parts = GC_DBP_MAX_PARTS + 1;
	CHECK(gc_dbscan_plan_check(&p, &st) == GC_EINVAL, "too many partitions");
	p.parts = 2;
	p.cuts = NULL;
	CHECK(gc_dbscan_plan_check(&p, &st) == GC_EINVAL, "no cuts");
	p.parts = 1;
	CHECK(gc_dbscan_plan_check(&p, &st) == GC_OK, "one partition, no cuts: %s", st.message);
	p.d = 0;
	CHECK(gc_dbscan_plan_check(&p, &st) == GC_EINVAL, "d 0");
	CHECK(gc_dbscan_plan_check(NULL, &st) == GC_EINVAL, "no plan");
}

/* The cuts' invariants: 1 .. parts partitions, finite, strictly increasing
 * in (lo, hi], and no slab empty by the histogram (where its bins have
 * distinct edges: in a range too narrow for the doubles, bins share edges
 * and cannot be told apart). */
static bool
cuts_sane(const double *counts, int bins, double lo, double hi, int parts,
		  int P, const double *cuts)
{
	if (P < 1 || P > parts)
		return false;
	if (P == 1)
		return true;
	for (int i = 0; i < P - 1; i++)
		if (!isfinite(cuts[i]) || !(cuts[i] > lo) || !(cuts[i] <= hi) ||
			(i > 0 && !(cuts[i] > cuts[i - 1])))
			return false;
	/* slabs by bins, where the bins' edges are distinct in double */
	for (int b = 1; b < bins; b++)
		if (!(lo + (hi - lo) * ((double) b / bins) >
			  lo + (hi - lo) * ((double) (b - 1) / bins)))
			return true;
	for (int i = 0; i < P; i++)
	{
		double		in = 0.0;

		for (int b = 0; b < bins; b++)
		{
			double		edge = lo + (hi - lo) * ((double) b / bins);

			if ((i == 0 || edge >= cuts[i - 1]) && (i == P - 1 || edge < cuts[i]))
				in += counts[b];
		}
		if (!(in > 0.0))
			return false;
	}
	return true;
}

static void
test_cuts(uint64_t *rs)
{
	double		counts[4096],
				cuts[GC_DBP_MAX_PARTS];
	int			P;
	double		lo4[] = {0.0, -1.0, 5.0},
				hi4[] = {1.0, 1.0, 5.0};

	/* gc_dbscan_bin */
	CHECK(gc_dbscan_bin(0.0, 0.0, 1.0, 10) == 0, "bin of lo");
	CHECK(gc_dbscan_bin(1.0, 0.0, 1.0, 10) == 9, "bin of hi");
	CHECK(gc_dbscan_bin(0.55, 0.0, 1.0, 10) == 5, "bin of 0.55");
	CHECK(gc_dbscan_bin(-7.0, 0.0, 1.0, 10) == 0, "below lo");
	CHECK(gc_dbscan_bin(7.0, 0.0, 1.0, 10) == 9, "above hi");
	CHECK(gc_dbscan_bin(NAN, 0.0, 1.0, 10) == 0, "NaN");
	CHECK(gc_dbscan_bin(3.0, 3.0, 3.0, 10) == 0, "lo == hi");
	CHECK(gc_dbscan_bin(1e38, -3e38, 3e38, 4096) == 2730, "wide range: %d",
		  gc_dbscan_bin(1e38, -3e38, 3e38, 4096));

	/* evenly filled: cuts at the quarter edges exactly */
	for (int b = 0; b < 64; b++)
		counts[b] = 10.0;
	P = gc_dbscan_cuts(counts, 64, 0.0, 64.0, 4, cuts);
	CHECK(P == 4 && cuts[0] == 16.0 && cuts[1] == 32.0 && cuts[2] == 48.0,
		  "even: %d partitions, cuts %g %g %g", P, cuts[0], cuts[1], cuts[2]);
	/* degenerate: everything in one bin (anywhere), lo == hi, empty */
	for (int at = 0; at < 64; at++)
	{
		memset(counts, 0, sizeof(double) * 64);
		counts[at] = 1000.0;
		P = gc_dbscan_cuts(counts, 64, -3.0, 5.0, 16, cuts);
		CHECK(P == 1, "all in bin %d: %d partitions", at, P);
	}
	for (int b = 0; b < 64; b++)
		counts[b] = 1.0;
	CHECK(gc_dbscan_cuts(counts, 64, 2.0, 2.0, 8, cuts) == 1, "lo == hi");
	CHECK(gc_dbscan_cuts(counts, 64, 0.0, 1.0, 1, cuts) == 1, "one partition asked");
	CHECK(gc_dbscan_cuts(counts, 1, 0.0, 1.0, 8, cuts) == 1, "one bin");
	memset(counts, 0, sizeof(double) * 64);
	CHECK(gc_dbscan_cuts(counts, 64, 0.0, 1.0, 8, cuts) == 1, "empty histogram");
	/* two masses: two partitions, however many asked for */
	counts[10] = 50.0;
	counts[40] = 50.0;
	P = gc_dbscan_cuts(counts, 64, 0.0, 64.0, 16, cuts);
	CHECK(P == 2 && cuts[0] == 11.0, "two masses: %d partitions, cut %g", P, cuts[0]);
	/* negative and NaN counts count as none */
	counts[20] = -5.0;
	counts[30] = NAN;
	P = gc_dbscan_cuts(counts, 64, 0.0, 64.0, 16, cuts);
	CHECK(P == 2 && cuts[0] == 11.0, "bad counts: %d partitions, cut %g", P, cuts[0]);
	/* a range so narrow that edges repeat in double */
	for (int b = 0; b < 4096; b++)
		counts[b] = 1.0;
	P = gc_dbscan_cuts(counts, 4096, 1e10, nextafter(1e10, INFINITY) + 1e-5, 64, cuts);
	CHECK(cuts_sane(counts, 4096, 1e10, nextafter(1e10, INFINITY) + 1e-5, 64, P, cuts),
		  "narrow range: %d partitions", P);

	/* random histograms */
	for (int t = 0; t < 2000; t++)
	{
		int			bins = 2 + (int) (tu_next(rs) % 300);
		int			parts = 1 + (int) (tu_next(rs) % 70);
		double		lo = (tu_uniform(rs) - 0.5) * pow(10.0, tu_uniform(rs) * 20.0 - 10.0);
		double		hi = lo + pow(10.0, tu_uniform(rs) * 20.0 - 10.0);
		int			sparse = (int) (tu_next(rs) % 4);

		for (int b = 0; b < bins; b++)
			counts[b] = sparse && tu_next(rs) % (uint64_t) (sparse * 4) != 0 ? 0.0
				: (double) (tu_next(rs) % 1000);
		P = gc_dbscan_cuts(counts, bins, lo, hi, parts, cuts);
		if (!cuts_sane(counts, bins, lo, hi, parts, P, cuts))
		{
			CHECK(false, "random histogram %d: %d bins over [%g, %g], %d parts: %d partitions",
				  t, bins, lo, hi, parts, P);
			break;
		}
	}
	CHECK(true, "random histograms");

	/* the split dimension: widest, ties to the lowest */
	CHECK(gc_dbscan_split_dim(lo4, hi4, 3) == 1, "widest: %d",
		  gc_dbscan_split_dim(lo4, hi4, 3));
	hi4[0] = 2.0;
	CHECK(gc_dbscan_split_dim(lo4, hi4, 3) == 0, "tie: %d",
		  gc_dbscan_split_dim(lo4, hi4, 3));
	CHECK(gc_dbscan_split_dim(lo4 + 2, hi4 + 2, 1) == 0, "one dimension, no width");
}

/* ---- the summary ---- */

/*
 * A small partition 1: ids -5 .. 31 in order, homes 1, 0, 1, 1, 2, 1, two
 * ids without features.  Its summary: clusters 0 (min -5) and 1 (min 8);
 * rows -5, 8, 10, 31, 100, 7; links -5 (shared home row), 3, 20.
 */
static int64_t s_ids[] = {-5, 3, 8, 10, 20, 31};
static int32_t s_home[] = {1, 0, 1, 1, 2, 1};
static uint8_t s_shared[] = {1, 1, 0, 1, 1, 0};
static int32_t s_labels[] = {0, 0, 1, -1, 1, 0};
static uint8_t s_core[] = {1, 1, 1, 0, 1, 0};
static int64_t s_nf[] = {100, 7};

static gc_dbscan_local
small_local(void)
{
	gc_dbscan_local loc = {1, 6, s_ids, s_home, s_shared, s_labels, s_core, 2, s_nf};

	return loc;
}

/* A copy of buf in a block of exactly len bytes (ASan sees any overrun). */
static void *
copy_exact(const void *buf, size_t len)
{
	void	   *c = malloc(len > 0 ? len : 1);

	memcpy(c, buf, len);
	return c;
}

/* Read buf[len] through an exact copy: must be malformed, s left empty. */
static void
expect_malformed(const char *what, const void *buf, size_t len)
{
	void	   *c = copy_exact(buf, len);
	gc_dbscan_summary s;
	gc_status	st = {GC_OK, ""};
	gc_code		rc = gc_dbscan_summary_read(c, len, &s, &st);

	CHECK(rc == GC_EINVAL && starts_with(st.message, "malformed partition summary: ") &&
		  s.rows == 0 && s.row_id == NULL,
		  "%s: code %d, \"%s\"", what, rc, st.message);
	free(c);
}

/* A view read back as OK must index only inside its buffer. */
static bool
view_sane(const gc_dbscan_summary *s, const void *buf, size_t len)
{
	const char *b = buf;

	if (s->comps < 0 || s->rows < 0 || s->links < 0 ||
		(const char *) (s->row_core + s->rows) > b + len ||
		(const char *) (s->link_comp + s->links) > b + len ||
		(const char *) (s->comp_min + s->comps) > b + len)
		return false;
	for (int64_t r = 0; r < s->rows; r++)
		if (s->row_comp[r] < GC_DBP_NO_FEATURES || s->row_comp[r] >= s->comps ||
			s->row_core[r] > 1)
			return false;
	for (int64_t k = 0; k < s->links; k++)
		if (s->link_comp[k] < 0 || s->link_comp[k] >= s->comps ||
			s->link_home[k] < 0 || s->link_home[k] >= GC_DBP_MAX_PARTS)
			return false;
	return true;
}

static void
test_summaries(uint64_t *rs)
{
	gc_dbscan_local loc = small_local();
	gc_dbscan_summary s;
	gc_status	st;
	size_t		len = 0;
	char	   *buf,
			   *other,
			   *c;
	int64_t		ids2[6];
	int32_t		lab2[6],
				home2[6];
	uint8_t		sh2[6],
				core2[6];
	int			ok_reads = 0;

	CHECK(gc_dbscan_summary_bytes(&loc, &len, &st) == GC_OK, "%s", st.message);
	buf = malloc(len);
	other = malloc(len);
	memset(buf, 0x55, len);
	memset(other, 0xaa, len);
	gc_dbscan_summarize(&loc, buf);
	gc_dbscan_summarize(&loc, other);
	CHECK(memcmp(buf, other, len) == 0, "summary bytes depend on the buffer's old contents");
	free(other);
	CHECK(gc_dbscan_summary_read(buf, len, &s, &st) == GC_OK, "%s", st.message);
	CHECK(s.part == 1 && s.comps == 2 && s.rows == 6 && s.links == 3,
		  "small summary: part %d comps %d rows %lld links %lld",
		  s.part, s.comps, (long long) s.rows, (long long) s.links);
	CHECK(s.comp_min[0] == -5 && s.comp_min[1] == 8, "comp_min %lld %lld",
		  (long long) s.comp_min[0], (long long) s.comp_min[1]);
	CHECK(s.row_id[0] == -5 && s.row_id[1] == 8 && s.row_id[2] == 10 &&
		  s.row_id[3] == 31 && s.row_id[4] == 100 && s.row_id[5] == 7 &&
		  s.row_comp[0] == 0 && s.row_comp[1] == 1 && s.row_comp[2] == -1 &&
		  s.row_comp[3] == 0 && s.row_comp[4] == -2 && s.row_comp[5] == -2 &&
		  s.row_core[0] == 1 && s.row_core[1] == 1 && s.row_core[2] == 0 &&
		  s.row_core[3] == 0 && s.row_core[4] == 0, "small summary rows");
	CHECK(s.link_id[0] == -5 && s.link_home[0] == 1 && s.link_comp[0] == 0 &&
		  s.link_id[1] == 3 && s.link_home[1] == 0 && s.link_comp[1] == 0 &&
		  s.link_id[2] == 20 && s.link_home[2] == 2 && s.link_comp[2] == 1,
		  "small summary links");

	/* an empty partition */
	{
		gc_dbscan_local e = {7, 0, NULL, NULL, NULL, NULL, NULL, 0, NULL};
		size_t		elen;
		char	   *eb;

		CHECK(gc_dbscan_summary_bytes(&e, &elen, &st) == GC_OK, "%s", st.message);
		eb = malloc(elen);
		gc_dbscan_summarize(&e, eb);
		CHECK(gc_dbscan_summary_read(eb, elen, &s, &st) == GC_OK &&
			  s.part == 7 && s.comps == 0 && s.rows == 0 && s.links == 0,
			  "empty summary: %s", st.message);
		free(eb);
	}

	/* the local input's checks */
	memcpy(ids2, s_ids, sizeof(ids2));
	memcpy(lab2, s_labels, sizeof(lab2));
	memcpy(home2, s_home, sizeof(home2));
	memcpy(sh2, s_shared, sizeof(sh2));
	memcpy(core2, s_core, sizeof(core2));
	loc.ids = ids2;
	loc.labels = lab2;
	loc.home = home2;
	loc.shared = sh2;
	loc.is_core = core2;
	ids2[2] = 3;
	CHECK(gc_dbscan_summary_bytes(&loc, &len, &st) == GC_EINVAL &&
		  strcmp(st.message, "id 3 appears twice in partition 1") == 0, "twice: %s", st.message);
	ids2[2] = 2;
	CHECK(gc_dbscan_summary_bytes(&loc, &len, &st) == GC_EINVAL &&
		  strstr(st.message, "ids out of order") != NULL, "order: %s", st.message);
	ids2[2] = 8;
	lab2[3] = -2;
	CHECK(gc_dbscan_summary_bytes(&loc, &len, &st) == GC_EINVAL, "label -2");
	lab2[3] = INT32_MAX;
	CHECK(gc_dbscan_summary_bytes(&loc, &len, &st) == GC_EINVAL, "label INT32_MAX");
	lab2[3] = -1;
	core2[3] = 1;
	CHECK(gc_dbscan_summary_bytes(&loc, &len, &st) == GC_EINVAL, "core noise");
	core2[3] = 2;
	CHECK(gc_dbscan_summary_bytes(&loc, &len, &st) == GC_EINVAL, "core flag 2");
	core2[3] = 0;
	sh2[1] = 0;
	CHECK(gc_dbscan_summary_bytes(&loc, &len, &st) == GC_EINVAL, "halo row not shared");
	sh2[1] = 1;
	home2[1] = -1;
	CHECK(gc_dbscan_summary_bytes(&loc, &len, &st) == GC_EINVAL, "home -1");
	home2[1] = 0;
	loc.part = -1;
	CHECK(gc_dbscan_summary_bytes(&loc, &len, &st) == GC_EINVAL, "part -1");
	loc.part = 1;
	loc.n = -1;
	CHECK(gc_dbscan_summary_bytes(&loc, &len, &st) == GC_EINVAL, "n -1");
	loc.n = 6;
	CHECK(gc_dbscan_summary_bytes(&loc, &len, &st) == GC_OK, "restored: %s", st.message);
	{
		size_t		none;

		CHECK(gc_dbscan_summary_bytes(NULL, &none, &st) == GC_EINVAL && none == 0,
			  "no input");
	}

	/* truncated, padded, misaligned, missing */
	CHECK(gc_dbscan_summary_read(buf, len, &s, &st) == GC_OK, "%s", st.message);
	for (size_t k = 0; k < len; k++)
		expect_malformed("truncated", buf, k);
	{
		char	   *longer = calloc(1, len + 8);
		char	   *mis = malloc(len + 8);

		memcpy(longer, buf, len);
		expect_malformed("8 bytes longer", longer, len + 8);
		memcpy(mis + 4, buf, len);
		CHECK(gc_dbscan_summary_read(mis + 4, len, &s, &st) == GC_EINVAL &&
			  strstr(st.message, "aligned") != NULL, "misaligned: %s", st.message);
		CHECK(gc_dbscan_summary_read(NULL, len, &s, &st) == GC_EINVAL, "NULL");
		free(longer);
		free(mis);
	}

	/* corrupted fields: each on its own copy */
	c = malloc(len);
#define CORRUPT(what, stmt) \
	do { \
		gc_dbscan_summary v; \
		memcpy(c, buf, len); \
		gc_dbscan_summary_read(c, len, &v, &st); \
		{ stmt; } \
		expect_malformed(what, c, len); \
	} while (0)
#define HDR(type, off) (*(type *) (c + (off)))
	CORRUPT("magic", c[0] = 'X');
	CORRUPT("version", HDR(uint32_t, 4) = 2);
	CORRUPT("byte order", HDR(uint32_t, 4) = 0x01000000);
	CORRUPT("part -1", HDR(int32_t, 8) = -1);
	CORRUPT("part too large", HDR(int32_t, 8) = GC_DBP_MAX_PARTS);
	CORRUPT("comps -1", HDR(int32_t, 12) = -1);
	CORRUPT("comps 3", HDR(int32_t, 12) = 3);
	CORRUPT("comps INT32_MAX", HDR(int32_t, 12) = INT32_MAX);
	CORRUPT("rows -1", HDR(int64_t, 16) = -1);
	CORRUPT("rows 7", HDR(int64_t, 16) = 7);
	CORRUPT("rows INT64_MAX", HDR(int64_t, 16) = INT64_MAX);
	CORRUPT("rows 2^61", HDR(int64_t, 16) = (int64_t) 1 << 61);
	CORRUPT("links INT64_MIN", HDR(int64_t, 24) = INT64_MIN);
	CORRUPT("links 2^60", HDR(int64_t, 24) = (int64_t) 1 << 60);
	CORRUPT("row_comp = comps", v.row_comp[0] = 2);
	CORRUPT("row_comp -3", v.row_comp[0] = -3);
	CORRUPT("no features before features", v.row_comp[1] = -2);
	CORRUPT("features after none", v.row_comp[5] = 0);
	CORRUPT("noise core", v.row_core[2] = 1);
	CORRUPT("core flag 2", v.row_core[0] = 2);
	CORRUPT("core without features", v.row_core[4] = 1);
	CORRUPT("row ids unsorted", { int64_t t = v.row_id[0]; v.row_id[0] = v.row_id[1]; v.row_id[1] = t; });
	CORRUPT("row id twice", v.row_id[1] = v.row_id[0]);
	CORRUPT("link_comp -1", v.link_comp[0] = -1);
	CORRUPT("link_comp = comps", v.link_comp[2] = 2);
	CORRUPT("link_home -1", v.link_home[1] = -1);
	CORRUPT("link_home too large", v.link_home[1] = GC_DBP_MAX_PARTS);
	CORRUPT("link ids unsorted", { int64_t t = v.link_id[0]; v.link_id[0] = v.link_id[1]; v.link_id[1] = t; });
	CORRUPT("comp_min not a row", v.comp_min[0] = -6);
	CORRUPT("comp_min above a row", v.comp_min[0] = 31);
	CORRUPT("comp_min none with rows", v.comp_min[1] = INT64_MAX);
#undef CORRUPT
#undef HDR

	/* random damage: never a crash, and what reads back OK is in range */
	for (int t = 0; t < 20000 / CASE_SCALE; t++)
	{
		gc_dbscan_summary v;
		int			flips = 1 + (int) (tu_next(rs) % 4);
		size_t		clen = len;

		memcpy(c, buf, len);
		for (int f = 0; f < flips; f++)
		{
			size_t		at = (size_t) (tu_next(rs) % len);

			if (tu_next(rs) % 2)
				c[at] ^= (char) (1 << (tu_next(rs) % 8));
			else
				c[at] = (char) tu_next(rs);
		}
		if (tu_next(rs) % 8 == 0)
			clen = (size_t) (tu_next(rs) % len);
		{
			void	   *e = copy_exact(c, clen);
			gc_code		rc = gc_dbscan_summary_read(e, clen, &v, &st);

			if (rc == GC_OK)
			{
				ok_reads++;
				CHECK(view_sane(&v, e, clen), "damaged summary read back out of range");
			}
			else
				CHECK(rc == GC_EINVAL && starts_with(st.message, "malformed partition summary: "),
					  "damaged summary: code %d, %s", rc, st.message);
			free(e);
		}
	}
	printf("test_dbscan_partitioned: %d of %d damaged summaries still read as valid (bits no check can see)\n",
		   ok_reads, 20000 / CASE_SCALE);
	free(c);
	free(buf);
}

/* ---- the merge ---- */

static gc_dbscan_summary
fake(int32_t part, int32_t comps, int64_t *comp_min, int64_t links,
	 int64_t *link_id, int32_t *link_home, int32_t *link_comp)
{
	gc_dbscan_summary s = {part, comps, 0, links, comp_min, NULL, NULL, NULL,
	link_id, link_home, link_comp};

	return s;
}

static void
test_merge(void)
{
	int64_t		min0[] = {10, INT64_MAX},
				min1[] = {50, 5},
				min2[] = {60};
	int64_t		lid0[] = {50},
				lid1[] = {50, 60},
				lid2[] = {60};
	int32_t		lh0[] = {1},
				lh1[] = {1, 2},
				lh2[] = {2};
	int32_t		lc0[] = {1},
				lc1[] = {0, 1},
				lc2[] = {0},
				bad_home[] = {3},
				bad_comp[] = {2};
	gc_dbscan_summary s0 = fake(0, 2, min0, 1, lid0, lh0, lc0),
				s1 = fake(1, 2, min1, 2, lid1, lh1, lc1),
				s2 = fake(2, 1, min2, 1, lid2, lh2, lc2);
	gc_dbscan_merge *m;
	gc_status	st;
	gc_ctx		ctx = {.n_threads = 1, .cancel_flags = {&cancel_flag, NULL}};

	CHECK(gc_dbscan_merge_new(0) == NULL, "0 partitions");
	CHECK(gc_dbscan_merge_new(-3) == NULL, "-3 partitions");
	CHECK(gc_dbscan_merge_new(GC_DBP_MAX_PARTS + 1) == NULL, "too many partitions");
	m = gc_dbscan_merge_new(GC_DBP_MAX_PARTS);
	CHECK(m != NULL, "the most partitions");
	gc_dbscan_merge_free(m);
	gc_dbscan_merge_free(NULL);

	/*
	 * Partition 0's cluster 1 has no home row and links to row 50 of
	 * partition 1's cluster 0; partition 1's cluster 1 and partition 2's
	 * cluster 0 share row 60.  Clusters by lowest id: {1.1, 2.0} (5),
	 * {0.0} (10), {0.1, 1.0} (50).
	 */
	m = gc_dbscan_merge_new(3);
	CHECK(gc_dbscan_merge_clusters(m) == 0, "clusters before finish");
	CHECK(gc_dbscan_merge_label(m, 0, 0) == GC_NOISE, "label before finish");
	CHECK(gc_dbscan_merge_add(m, &s2, &st) == GC_OK, "%s", st.message);
	{
		gc_dbscan_summary b = s0;

		b.part = 3;
		CHECK(gc_dbscan_merge_add(m, &b, &st) == GC_EINVAL &&
			  strstr(st.message, "out of range") != NULL, "part 3 of 3: %s", st.message);
		b.part = -1;
		CHECK(gc_dbscan_merge_add(m, &b, &st) == GC_EINVAL, "part -1");
		b = s0;
		b.link_home = bad_home;
		CHECK(gc_dbscan_merge_add(m, &b, &st) == GC_EINVAL, "link home 3 of 3");
		b = s0;
		b.link_comp = bad_comp;
		CHECK(gc_dbscan_merge_add(m, &b, &st) == GC_EINVAL, "link comp 2 of 2");
	}
	CHECK(gc_dbscan_merge_add(m, &s2, &st) == GC_EINVAL &&
		  strstr(st.message, "twice") != NULL, "twice: %s", st.message);
	CHECK(gc_dbscan_merge_add(m, &s0, &st) == GC_OK, "after failed adds: %s", st.message);
	CHECK(gc_dbscan_merge_add(m, &s1, &st) == GC_OK, "%s", st.message);
	CHECK(gc_dbscan_merge_finish(NULL, m, &st) == GC_OK, "%s", st.message);
	CHECK(gc_dbscan_merge_clusters(m) == 3, "clusters %d", gc_dbscan_merge_clusters(m));
	CHECK(gc_dbscan_merge_label(m, 1, 1) == 0 && gc_dbscan_merge_label(m, 2, 0) == 0 &&
		  gc_dbscan_merge_label(m, 0, 0) == 1 && gc_dbscan_merge_label(m, 0, 1) == 2 &&
		  gc_dbscan_merge_label(m, 1, 0) == 2,
		  "labels %d %d %d %d %d", gc_dbscan_merge_label(m, 1, 1),
		  gc_dbscan_merge_label(m, 2, 0), gc_dbscan_merge_label(m, 0, 0),
		  gc_dbscan_merge_label(m, 0, 1), gc_dbscan_merge_label(m, 1, 0));
	CHECK(gc_dbscan_merge_label(m, 1, GC_NOISE) == GC_NOISE &&
		  gc_dbscan_merge_label(m, 1, GC_DBP_NO_FEATURES) == GC_DBP_NO_FEATURES,
		  "noise and no features map to themselves");
	CHECK(gc_dbscan_merge_label(m, 1, 2) == GC_NOISE &&
		  gc_dbscan_merge_label(m, 3, 0) == GC_NOISE &&
		  gc_dbscan_merge_label(m, -1, 0) == GC_NOISE, "out of range: noise");
	CHECK(gc_dbscan_merge_add(m, &s0, &st) == GC_EINVAL, "add after finish");
	CHECK(gc_dbscan_merge_finish(NULL, m, &st) == GC_EINVAL, "finish twice");
	gc_dbscan_merge_free(m);

	/*
	 * Ties (no home member: only in a partial merge) go by partition, then
	 * cluster, whatever the arrival order; a partition never added has no
	 * clusters.
	 */
	{
		int64_t		none[] = {INT64_MAX, INT64_MAX};
		gc_dbscan_summary a = fake(0, 1, none, 0, NULL, NULL, NULL),
					b = fake(2, 2, none, 0, NULL, NULL, NULL);

		m = gc_dbscan_merge_new(3);
		CHECK(gc_dbscan_merge_add(m, &b, &st) == GC_OK, "%s", st.message);
		CHECK(gc_dbscan_merge_add(m, &a, &st) == GC_OK, "%s", st.message);
		CHECK(gc_dbscan_merge_finish(NULL, m, &st) == GC_OK, "%s", st.message);
		CHECK(gc_dbscan_merge_label(m, 0, 0) == 0 && gc_dbscan_merge_label(m, 2, 0) == 1 &&
			  gc_dbscan_merge_label(m, 2, 1) == 2 && gc_dbscan_merge_label(m, 1, 0) == GC_NOISE,
			  "ties: %d %d %d", gc_dbscan_merge_label(m, 0, 0),
			  gc_dbscan_merge_label(m, 2, 0), gc_dbscan_merge_label(m, 2, 1));
		gc_dbscan_merge_free(m);
	}

	/* cancel: the flag raised, finish stops */
	m = gc_dbscan_merge_new(3);
	gc_dbscan_merge_add(m, &s0, &st);
	gc_dbscan_merge_add(m, &s1, &st);
	cancel_flag = 1;
	CHECK(gc_dbscan_merge_finish(&ctx, m, &st) == GC_ECANCEL &&
		  strcmp(st.message, "canceled") == 0, "cancel: %s", st.message);
	cancel_flag = 0;
	CHECK(gc_dbscan_merge_clusters(m) == 0, "a canceled merge has no clusters");
	gc_dbscan_merge_free(m);
}

/*
 * A merge large enough for the threaded sorts and the cancel polls:
 * 2 partitions of K clusters, cluster c of each sharing row 3c + 1 (ids
 * given in decreasing order), partition 1's cluster c home to id K - c.
 */
static void
test_merge_large(void)
{
	const int32_t K = 100000;
	int64_t    *min0 = malloc(sizeof(int64_t) * K),
			   *min1 = malloc(sizeof(int64_t) * K),
			   *lid = malloc(sizeof(int64_t) * K);
	int32_t    *lh = malloc(sizeof(int32_t) * K),
			   *lc0 = malloc(sizeof(int32_t) * K),
			   *lc1 = malloc(sizeof(int32_t) * K);
	gc_dbscan_merge *m = gc_dbscan_merge_new(2);
	gc_status	st;
	bool		ok = true;

	for (int32_t k = 0; k < K; k++)
	{
		int32_t		c = K - 1 - k;	/* link k names cluster c */

		min0[k] = INT64_MAX;
		min1[k] = (int64_t) (K - k) * 7 - 3 * K;
		lid[k] = 3 * (int64_t) k + 1;
		lh[k] = 1;
		lc0[k] = c;
		lc1[k] = c;
	}
	{
		gc_dbscan_summary a = fake(0, K, min0, K, lid, lh, lc0),
					b = fake(1, K, min1, K, lid, lh, lc1);

		CHECK(gc_dbscan_merge_add(m, &b, &st) == GC_OK, "%s", st.message);
		CHECK(gc_dbscan_merge_add(m, &a, &st) == GC_OK, "%s", st.message);
	}
	CHECK(gc_dbscan_merge_finish(NULL, m, &st) == GC_OK, "%s", st.message);
	CHECK(gc_dbscan_merge_clusters(m) == K, "%d clusters", gc_dbscan_merge_clusters(m));
	/* cluster c's lowest id falls as c rises: numbered K - 1 - c */
	for (int32_t c = 0; c < K; c++)
		if (gc_dbscan_merge_label(m, 0, c) != K - 1 - c ||
			gc_dbscan_merge_label(m, 1, c) != K - 1 - c)
			ok = false;
	CHECK(ok, "large merge labels");
	gc_dbscan_merge_free(m);
	free(min0);
	free(min1);
	free(lid);
	free(lh);
	free(lc0);
	free(lc1);
}

int
main(void)
{
	uint64_t	seed = tu_seed();
	uint64_t	rs = seed;
	double		t0 = now_s();

	printf("test_dbscan_partitioned: seed %llu (GPUCLUST_TEST_SEED to replay)\n",
		   (unsigned long long) seed);
	test_halo(&rs);
	test_span(&rs);
	test_plan_check();
	test_cuts(&rs);
	test_summaries(&rs);
	test_merge();
	test_merge_large();
	test_random(&rs);
	test_overhead(&rs);
	printf("test_dbscan_partitioned: %d pipeline cases (%d of several partitions, up to %d; "
		   "%d with an infinite halo), %lld rows, %.3f rows held per row, %.1f s\n",
		   ncases, multi_cases, max_parts, infinite_halo_cases,
		   (long long) total_rows,
		   total_rows > 0 ? (double) total_held / (double) total_rows : 0.0,
		   now_s() - t0);
	return test_summary("test_dbscan_partitioned");
}
