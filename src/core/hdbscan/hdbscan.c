/*
 * hdbscan.c — placeholder: the driver, phases 1 and 2 are being written.
 */
#include "hdbscan/hdbscan.h"
#include "common/gpu.h"

#define HD_TODO(...) return gc_fail(st, GC_EINTERNAL, "HDBSCAN is not written yet")

bool
gc_parse_hdbscan_method(const char *s, gc_hdbscan_method *out)
{
	(void) s, (void) out;
	return false;
}

const char *
gc_hdbscan_method_name(gc_hdbscan_method method)
{
	return method == GC_HDBSCAN_LEAF ? "leaf" : "eom";
}

gc_code
gc_hdbscan_check(const gc_ctx *ctx, const float *X, int64_t n, int d,
				 const gc_hdbscan_params *p, bool mst_only, gc_status *st)
{
	(void) ctx, (void) X, (void) n, (void) d, (void) p, (void) mst_only;
	HD_TODO();
}

gc_code
gc_hdbscan_cpu(const gc_ctx *ctx, const float *X, int64_t n, int d,
			   const gc_hdbscan_params *p, gc_hdbscan_result *res,
			   gc_status *st)
{
	(void) ctx, (void) X, (void) n, (void) d, (void) p, (void) res;
	HD_TODO();
}

gc_code
gc_hdbscan_on_gpu(const gc_ctx *ctx, const float *X, int64_t n, int d,
				  const gc_hdbscan_params *p, gc_hdbscan_result *res,
				  gc_status *st)
{
	(void) ctx, (void) X, (void) n, (void) d, (void) p, (void) res;
	HD_TODO();
}

gc_code
gc_hdbscan_mst_cpu(const gc_ctx *ctx, const float *X, int64_t n, int d,
				   const gc_hdbscan_params *p, double *core,
				   gc_mst_edge *edges, gc_status *st)
{
	(void) ctx, (void) X, (void) n, (void) d, (void) p, (void) core, (void) edges;
	HD_TODO();
}

gc_code
gc_hdbscan_mst_on_gpu(const gc_ctx *ctx, const float *X, int64_t n, int d,
					  const gc_hdbscan_params *p, double *core,
					  gc_mst_edge *edges, gc_status *st)
{
	(void) ctx, (void) X, (void) n, (void) d, (void) p, (void) core, (void) edges;
	HD_TODO();
}

gc_code
gc_hdbscan_core_cpu(const gc_ctx *ctx, const float *R, int64_t n, int d,
					int64_t min_samples, gc_metric metric, double *core,
					gc_status *st)
{
	(void) ctx, (void) R, (void) n, (void) d, (void) min_samples, (void) metric, (void) core;
	HD_TODO();
}

gc_code
gc_hdbscan_mst_edges_cpu(const gc_ctx *ctx, const float *R, int64_t n, int d,
						 double alpha, gc_metric metric, const double *core,
						 gc_mst_edge *edges, gc_status *st)
{
	(void) ctx, (void) R, (void) n, (void) d, (void) alpha, (void) metric, (void) core, (void) edges;
	HD_TODO();
}
