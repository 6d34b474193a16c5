/*
 * hdbscan_tree.c — placeholder: phase 3 is being written.
 */
#include <stdlib.h>

#include "hdbscan/hdbscan.h"

gc_code
gc_hdbscan_from_mst(const gc_ctx *ctx, int64_t n, const gc_mst_edge *edges,
					const gc_hdbscan_params *p, gc_hdbscan_result *res,
					gc_status *st)
{
	(void) ctx, (void) n, (void) edges, (void) p, (void) res;
	return gc_fail(st, GC_EINTERNAL, "HDBSCAN's tree is not written yet");
}

void
gc_hdbscan_tree_free(gc_hdbscan_tree *t)
{
	if (t == NULL)
		return;
	free(t->rows);
	free(t->selected);
	t->rows = NULL;
	t->selected = NULL;
	t->nrows = t->nclusters = 0;
}
