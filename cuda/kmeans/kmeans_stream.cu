/*
 * kmeans_stream.cu — the GPU k-means on data larger than its device memory
 * (gc_kmeans_gpu_plan in kmeans/kmeans.h says when): X stays in host memory, and
 * every pass over it uploads it in chunks of D.chunk rows.
 *
 * Buffers: two pinned host buffers and two device buffers of one chunk
 * (row-major), the chunk transposed (XTc) and its per-row scratch (the
 * inertia terms, and on the tiled path the shifted row norms and the
 * re-ranked rows).  A pass (km_pass) runs, for chunk c in buffer b = c % 2:
 *   host         waits until buffer b's last upload is done (event up[b]),
 *                copies the chunk into pinned h[b] (gc_copy, the call's
 *                threads);
 *   copy stream  waits until the work on device buffer b's last chunk is
 *                done (event freed[b]), uploads h[b] into it, records up[b];
 *   D.s          waits for up[b], transposes the chunk into XTc, runs the
 *                pass's work on a chunk view of km_dev (km_chunk_view: its
 *                n, XT, labels, d2 and per-row arrays are the chunk's, so
 *                the phases' kernels run unchanged), records freed[b].
 * So the host's copy of chunk c+1, the upload of chunk c and the work on
 * chunk c-1 overlap; the events are blocking-sync (a waiting thread sleeps).
 * The cancel flags are polled before every chunk.  A problem of one chunk
 * (the data fit, but not with the resident path's scratch) is uploaded by
 * its first pass only, and stays.  D.passes counts the uploads.
 *
 * Every result equals the resident path's bit for bit: chunks start at
 * multiples of KM_BLOCK, so the fixed-order double sums (feature means,
 * variance, inertia) see the same blocks in the same order; the update's
 * sums are integers (D.gsum), exact in any order, accumulated chunk after
 * chunk; the assignment of a row depends on that row and the centres
 * only; the feature maxima are maxima.  Re-seeding reads the distances of
 * every row to their old centres, which the iteration's pass keeps (D.d2,
 * n floats, km_d2 per chunk), and the features of the far rows from the
 * host.  Seeding runs on the host (kmeans.cu's km_seed: the CPU's own
 * functions, which the device's k-means++ reproduces bit for bit).
 */
#include <new>
#include <stdlib.h>
#include <string.h>

#include "kmeans_dev.cuh"

struct km_stream
{
	float	   *h[2] = {nullptr, nullptr};	/* pinned, chunk x d */
	float	   *dbuf[2] = {nullptr, nullptr};	/* device, chunk x d */
	float	   *XTc = nullptr;	/* the chunk transposed (d x rows) */
	double	   *qc = nullptr;	/* chunk: inertia terms, distances */
	float	   *xn2c = nullptr;	/* chunk: shifted row norms (tiled) */
	int32_t    *fbc = nullptr;	/* chunk: rows the screen leaves (tiled) */
	int32_t    *fbc2 = nullptr;	/* chunk: rows their window or the 3xtf32 re-screen could not decide */
	cudaStream_t cs = nullptr;	/* the uploads */
	cudaEvent_t up[2] = {nullptr, nullptr};	/* upload of buffer b done */
	cudaEvent_t freed[2] = {nullptr, nullptr};	/* work on buffer b done */
	bool		loaded = false;	/* one chunk: uploaded and transposed, kept */
};

void
km_stream_free(km_dev &D)
{
	km_stream  *S = D.S;

	if (S == nullptr)
		return;
	if (S->cs)
		cudaStreamSynchronize(S->cs);
	if (D.s)
		cudaStreamSynchronize(D.s);
	for (int b = 0; b < 2; b++)
	{
		if (S->h[b])
			cudaFreeHost(S->h[b]);
		gc_dfree(S->dbuf[b], D.s);
		if (S->up[b])
			cudaEventDestroy(S->up[b]);
		if (S->freed[b])
			cudaEventDestroy(S->freed[b]);
	}
	gc_dfree(S->XTc, D.s);
	gc_dfree(S->qc, D.s);
	gc_dfree(S->xn2c, D.s);
	gc_dfree(S->fbc, D.s);
	gc_dfree(S->fbc2, D.s);
	if (S->cs)
		cudaStreamDestroy(S->cs);
	delete S;
	D.S = nullptr;
}

gc_code
km_stream_open(km_dev &D, gc_status *st)
{
	const size_t rows = (size_t) D.chunk,
				bytes = sizeof(float) * rows * D.d;
	km_stream  *S = new (std::nothrow) km_stream;

	if (S == nullptr)
		return gc_fail(st, GC_ENOMEM, "GPU k-means: out of memory");
	D.S = S;
	KM_CK(cudaStreamCreateWithFlags(&S->cs, cudaStreamNonBlocking));
	for (int b = 0; b < 2; b++)
	{
		KM_CK(cudaHostAlloc((void **) &S->h[b], bytes, cudaHostAllocPortable));
		KM_CK(gc_dalloc((void **) &S->dbuf[b], bytes, D.s));
		KM_CK(cudaEventCreateWithFlags(&S->up[b], cudaEventBlockingSync |
									   cudaEventDisableTiming));
		KM_CK(cudaEventCreateWithFlags(&S->freed[b], cudaEventBlockingSync |
									   cudaEventDisableTiming));
	}
	KM_CK(gc_dalloc((void **) &S->XTc, bytes, D.s));
	KM_CK(gc_dalloc((void **) &S->qc, sizeof(double) * rows, D.s));
	if (!D.small)
	{
		KM_CK(gc_dalloc((void **) &S->xn2c, sizeof(float) * rows, D.s));
		KM_CK(gc_dalloc((void **) &S->fbc, sizeof(int32_t) * rows, D.s));
		if (D.screen)
			KM_CK(gc_dalloc((void **) &S->fbc2, sizeof(int32_t) * rows, D.s));
	}
	/* the copy stream uses dbuf: their allocation is done */
	KM_CK(cudaStreamSynchronize(D.s));
	return GC_OK;
}

/*
 * The chunk view of rows [r0, r0 + rows) in buffer b: every array the
 * phases index by row is the chunk's (per-row arrays the chunk's own,
 * labels and d2 offset into the problem's).
 */
static void
km_chunk_view(const km_dev &D, int64_t r0, int64_t rows, int b, km_dev &V)
{
	const km_stream *S = D.S;

	V.is_view = true;
	V.n = rows;
	V.XT = S->XTc;
	V.labels = D.labels + r0;
	V.d2 = D.d2 + r0;
	V.q = S->qc;
	V.xn2 = S->xn2c;
	V.fb_rows = S->fbc;
	V.fb_rows2 = S->fbc2;
	V.XR = D.sorted_upd ? S->dbuf[b] : nullptr;	/* D.perm: a chunk's */
	V.labels_best = nullptr;
}

/* One pass over X: work(V, r0) on the view of every chunk, in order. */
template <class F>
static gc_code
km_pass(km_dev &D, F &&work, gc_status *st)
{
	km_stream  &S = *D.S;
	const int	d = D.d;
	const int	T = gc_team_adapt(D.ctx);
	const double t0 = gc_now_ms();
	gc_code		rc = GC_OK;
	cudaError_t e = cudaSuccess;

	for (int64_t c = 0; c < D.nchunks && rc == GC_OK && e == cudaSuccess; c++)
	{
		const int	b = (int) (c & 1);
		const int64_t r0 = c * D.chunk;
		const int64_t rows = D.n - r0 < D.chunk ? D.n - r0 : D.chunk;
		const size_t bytes = sizeof(float) * (size_t) rows * d;

		if (gc_cancelled(D.ctx))
		{
			rc = gc_fail(st, GC_ECANCEL, "canceled");
			break;
		}
		if (S.loaded)
		{
			/* the one chunk is still on the device (buffer 0, XTc) */
			km_dev		V = D;

			km_chunk_view(D, r0, rows, b, V);
			rc = work(V, r0);
			continue;
		}
		e = cudaEventSynchronize(S.up[b]);	/* h[b] is free */
		if (e != cudaSuccess)
			break;
		gc_copy(S.h[b], D.hX + r0 * d, bytes, T);
		e = cudaStreamWaitEvent(S.cs, S.freed[b], 0);
		if (e == cudaSuccess)
			e = cudaMemcpyAsync(S.dbuf[b], S.h[b], bytes, cudaMemcpyHostToDevice, S.cs);
		if (e == cudaSuccess)
			e = cudaEventRecord(S.up[b], S.cs);
		if (e == cudaSuccess)
			e = cudaStreamWaitEvent(D.s, S.up[b], 0);
		if (e != cudaSuccess)
			break;
		rc = km_transpose(D, S.dbuf[b], rows, S.XTc, rows, 0, st);
		if (rc == GC_OK)
		{
			km_dev		V = D;

			km_chunk_view(D, r0, rows, b, V);
			rc = work(V, r0);
		}
		if (rc == GC_OK)
			e = cudaEventRecord(S.freed[b], D.s);
	}
	if (rc == GC_OK && e == cudaSuccess)
		e = cudaStreamSynchronize(D.s);
	if (rc != GC_OK || e != cudaSuccess)
	{
		cudaStreamSynchronize(S.cs);
		cudaStreamSynchronize(D.s);
		if (rc == GC_OK)
			rc = km_cuda_fail(st, e, "streaming the data");
		return rc;
	}
	if (!S.loaded)
		D.passes++;				/* uploads of the data */
	S.loaded = D.nchunks == 1;
	D.ms_passes += gc_now_ms() - t0;
	return GC_OK;
}

gc_code
km_stream_features(km_dev &D, gc_status *st)
{
	unsigned   *fr = nullptr;
	gc_code		rc = km_features_scratch(D, &fr, st);

	if (rc == GC_OK)
		rc = km_pass(D, [&](km_dev &V, int64_t r0) {
			return km_features_rows(V, r0, fr, st);
		}, st);
	if (rc == GC_OK)
		rc = km_features_finish(D, fr, st);
	gc_dfree(fr, D.s);
	return rc;
}

gc_code
km_stream_variance(km_dev &D, double *out, gc_status *st)
{
	gc_code		rc = km_pass(D, [&](km_dev &V, int64_t r0) {
		return km_var_blocks(V, r0, 1, st);
	}, st);

	return rc != GC_OK ? rc : km_var_reduce(D, 1, out, st);
}

gc_code
km_stream_assign_update(km_dev &D, gc_status *st)
{
	/* the centres as the rows are assigned to them (under cosine, unit rows) */
	const float *Ca = D.Cprep;

	return km_pass(D, [&](km_dev &V, int64_t r0) {
		gc_code		rc = GC_OK;

		(void) r0;
		if (!V.small)
			rc = km_rownorm(V, st);
		if (rc == GC_OK)
			rc = km_assign(V, st);
		if (rc == GC_OK)
			rc = km_d2(V, Ca, st);	/* for a re-seeding */
		if (rc == GC_OK)
			rc = km_update(V, st);
		return rc;
	}, st);
}

gc_code
km_stream_inertia(km_dev &D, const float *C, int32_t *labels,
				  bool assign_first, double *inertia, gc_status *st)
{
	gc_code		rc = km_pass(D, [&](km_dev &V, int64_t r0) {
		gc_code		rc2 = GC_OK;

		if (assign_first)
		{
			if (!V.small)
				rc2 = km_rownorm(V, st);
			if (rc2 == GC_OK)
				rc2 = km_assign(V, st);	/* into V.labels: D.labels + r0 */
		}
		if (rc2 == GC_OK)
			rc2 = km_inertia_rows(V, C, labels + r0, r0, st);
		return rc2;
	}, st);

	return rc != GC_OK ? rc : km_inertia_total(D, inertia, st);
}

gc_code
km_stream_distances(km_dev &D, const float *C, const int32_t *labels,
					double *out, gc_status *st)
{
	return km_pass(D, [&](km_dev &V, int64_t r0) {
		return km_distances(V, C, labels + r0, out + r0, st);
	}, st);
}
