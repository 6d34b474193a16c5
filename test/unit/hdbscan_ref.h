/*
 * hdbscan_ref.h — brute-force references for HDBSCAN's first two phases,
 * written apart from src/core/hdbscan: O(n² d) core distances (every
 * distance of a row, sorted) and Prim's algorithm over the full
 * mutual-reachability matrix.  Prim's algorithm with edges compared by
 * (w, a, b), a < b, grows the unique minimum spanning tree under that
 * total order, the tree gpuclust's Borůvka must return.
 */
#ifndef GPUCLUST_HDBSCAN_REF_H
#define GPUCLUST_HDBSCAN_REF_H

#include <math.h>
#include <stdlib.h>

#include "gpuclust_core.h"

/* The squared distance in double: the features widened, in order. */
static double
ref_dist2(const float *a, const float *b, int d)
{
	double		s = 0.0;

	for (int j = 0; j < d; j++)
	{
		double		t = (double) a[j] - (double) b[j];

		s = s + t * t;
	}
	return s;
}

static double
ref_weight_of(int cosine, double s)
{
	return cosine ? s / 2.0 : sqrt(s);
}

static int
ref_cmp_double(const void *a, const void *b)
{
	double		x = *(const double *) a,
				y = *(const double *) b;

	return x < y ? -1 : x > y ? 1 : 0;
}

/* core[i]: the k-th smallest distance from row i, itself counted. */
static void
ref_core(const float *R, int64_t n, int d, int64_t k, int cosine, double *core)
{
	double	   *s = malloc(sizeof(double) * (size_t) n);

	for (int64_t i = 0; i < n; i++)
	{
		for (int64_t j = 0; j < n; j++)
			s[j] = ref_dist2(R + i * d, R + j * d, d);
		qsort(s, (size_t) n, sizeof(double), ref_cmp_double);
		core[i] = ref_weight_of(cosine, s[k - 1]);
	}
	free(s);
}

/* (w, a, b) order: < 0 when edge x comes first. */
static int
ref_edge_cmp(double wx, int64_t ax, int64_t bx, double wy, int64_t ay,
			 int64_t by)
{
	if (wx != wy)
		return wx < wy ? -1 : 1;
	if (ax != ay)
		return ax < ay ? -1 : 1;
	if (bx != by)
		return bx < by ? -1 : 1;
	return 0;
}

static int
ref_edge_qsort(const void *x, const void *y)
{
	const gc_mst_edge *e = x,
			   *f = y;

	return ref_edge_cmp(e->w, e->a, e->b, f->w, f->a, f->b);
}

static double
ref_mr(const float *R, int d, double alpha, int cosine, const double *core,
	   int64_t i, int64_t j)
{
	double		w = ref_weight_of(cosine, ref_dist2(R + i * d, R + j * d, d)) / alpha;

	if (core[i] > w)
		w = core[i];
	if (core[j] > w)
		w = core[j];
	return w;
}

/* The n - 1 edges of the MST, sorted by (w, a, b). */
static void
ref_mst(const float *R, int64_t n, int d, double alpha, int cosine,
		const double *core, gc_mst_edge *edges)
{
	char	   *in = calloc((size_t) n, 1);
	double	   *kw = malloc(sizeof(double) * (size_t) n);
	int64_t    *ka = malloc(sizeof(int64_t) * (size_t) n),
			   *kb = malloc(sizeof(int64_t) * (size_t) n);
	int64_t		cur = 0;

	for (int64_t j = 0; j < n; j++)
		kw[j] = INFINITY, ka[j] = kb[j] = INT64_MAX;
	for (int64_t e = 0; e < n - 1; e++)
	{
		int64_t		best = -1;

		in[cur] = 1;
		for (int64_t j = 0; j < n; j++)
		{
			double		w;
			int64_t		a,
						b;

			if (in[j])
				continue;
			w = ref_mr(R, d, alpha, cosine, core, cur, j);
			a = cur < j ? cur : j;
			b = cur < j ? j : cur;
			if (ref_edge_cmp(w, a, b, kw[j], ka[j], kb[j]) < 0)
				kw[j] = w, ka[j] = a, kb[j] = b;
			if (best < 0 ||
				ref_edge_cmp(kw[j], ka[j], kb[j], kw[best], ka[best], kb[best]) < 0)
				best = j;
		}
		edges[e].a = ka[best];
		edges[e].b = kb[best];
		edges[e].w = kw[best];
		cur = best;
	}
	qsort(edges, (size_t) (n > 0 ? n - 1 : 0), sizeof(gc_mst_edge), ref_edge_qsort);
	free(in);
	free(kw);
	free(ka);
	free(kb);
}

#endif							/* GPUCLUST_HDBSCAN_REF_H */
