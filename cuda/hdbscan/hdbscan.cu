/*
 * hdbscan.cu — placeholder: HDBSCAN's GPU phases are being written.
 */
#include <string.h>

#include "common/gpu.h"

extern "C" gc_code
gc_hdbscan_mst_gpu(const gc_ctx *ctx, const float *R, int64_t n, int d,
				   int64_t min_samples, double alpha, gc_metric metric,
				   double *core, gc_mst_edge *edges, gc_status *st)
{
	(void) ctx, (void) R, (void) n, (void) d, (void) min_samples;
	(void) alpha, (void) metric, (void) core, (void) edges;
	return gc_fail(st, GC_EDEVICE, "HDBSCAN's GPU path is not written yet");
}

extern "C" size_t
gc_hdbscan_gpu_mem_bytes(int64_t n, int d, int64_t min_samples)
{
	(void) n, (void) d, (void) min_samples;
	return 0;
}

extern "C" void
gc_hdbscan_gpu_last_phases(gc_hdbscan_gpu_phases *out)
{
	memset(out, 0, sizeof(*out));
}
