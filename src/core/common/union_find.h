/*
 * union_find.h — lock-free concurrent union-find over int64 positions.
 *
 * parent[x] == x marks a root.  A link always hangs the higher root under the
 * lower one, so parent[x] <= x at all times: no cycles can form, and the root
 * of a finished component is its lowest position.  Links are made only by a
 * compare-and-swap on a root, so a lost race just retries; find compresses
 * the path it walked.
 */
#ifndef GPUCLUST_UNION_FIND_H
#define GPUCLUST_UNION_FIND_H

#include <stdbool.h>
#include <stdint.h>

static inline int64_t
gc_uf_find(int64_t *parent, int64_t x)
{
	int64_t		r = x,
				p;

	while ((p = __atomic_load_n(&parent[r], __ATOMIC_RELAXED)) != r)
		r = p;
	/*
	 * Full compression.  A node's ancestors form one chain of decreasing
	 * positions that only ever grows upwards, so r stays an ancestor of every
	 * node below it on x's path.  Store r only while the parent is still
	 * above r (p > r): another thread may meanwhile have compressed the path
	 * past r to a newer, lower root, and writing r into a node above r would
	 * make a cycle (parent[x] > x) and hang every later find.
	 */
	while ((p = __atomic_load_n(&parent[x], __ATOMIC_RELAXED)) > r)
	{
		__atomic_store_n(&parent[x], r, __ATOMIC_RELAXED);
		x = p;
	}
	return r;
}

static inline void
gc_uf_union(int64_t *parent, int64_t a, int64_t b)
{
	for (;;)
	{
		int64_t		expect;

		a = gc_uf_find(parent, a);
		b = gc_uf_find(parent, b);
		if (a == b)
			return;
		if (a < b)
		{
			int64_t		t = a;

			a = b;
			b = t;
		}
		expect = a;				/* a is the higher root: hang it under b */
		if (__atomic_compare_exchange_n(&parent[a], &expect, b, false,
										__ATOMIC_RELAXED, __ATOMIC_RELAXED))
			return;
	}
}

#endif							/* GPUCLUST_UNION_FIND_H */
