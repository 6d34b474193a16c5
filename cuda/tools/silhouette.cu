/*
 * silhouette.cu — the silhouette's values on the GPU: gc_silhouette_gpu
 * (common/gpu.h), so that silhouette.c's driver (gc_silhouette_on_gpu)
 * gives gc_silhouette_cpu's score bit for bit.
 *
 * The rows scored are the driver's: it makes every check, draws the
 * sample and counts the clusters, for both devices (gc_sil_rows,
 * tools/tools.h).  The CPU forms, for each scored row i, sum[c] += sqrt(
 * gc_dist2_f64(x_i, x_j)) over the scored rows j in ascending order, then
 * a, b and s from the sums (gc_sil_nearer, gc_sil_value), and sums s in
 * row order.  To give the same doubles the GPU adds the same terms in the
 * same order:
 *   - the host sorts the scored rows by cluster (a stable counting sort:
 *     ascending label, row order kept inside a cluster), so each non-empty
 *     cluster is one segment of the sorted rows and, inside it, its rows
 *     come in the CPU's j order: a running sum over a segment is the CPU's
 *     sum[c], term for term;
 *   - each term is gc_dist2_f64's, formed one dimension at a time with its
 *     own step (gc_l2_step_f64: the difference, square and sum each rounded
 *     once, in dimension order 0 .. d-1) and rooted with __dsqrt_rn; CUDA's
 *     double +, x, / and sqrt round correctly, and -fmad=false (and the
 *     CPU's -ffp-contract=off) keep every product apart from its sum;
 *   - a thread folds each finished segment into its a or b with the CPU's
 *     own gc_sil_nearer and gc_sil_value; the driver sums s in the CPU's
 *     row order.
 *
 * The kernel, sil_rows: one thread a query row (sorted position q), a block
 * of SIL_Q of them.  The block walks j = 0 .. r-1 in tiles of SIL_TJ rows;
 * each tile's features are staged in shared memory SIL_KC dimensions at a
 * time (as doubles: the conversion is exact and done once a tile), and each
 * thread keeps the tile's SIL_TJ partial distances in registers (acc),
 * adding dimension k to all of them before dimension k+1, so each acc[t]
 * goes through gc_dist2_f64's steps in its order.  A tile done, the thread
 * adds sqrt(acc[t]) to its running segment sum for t in j order; the
 * segment boundaries are at the same j for every thread (a uniform branch).
 * The features are uploaded as float32, transposed (d x r, in sorted
 * order), so a warp's loads of one dimension are coalesced; the cluster of
 * each sorted row and the segment starts go with them.
 *
 * Work per call, r scored rows of d features: r^2 d x 3 double operations
 * (difference, square, sum) + r^2 square roots and r^2 additions; as
 * bytes, 4 r d + 4 r + 4 (clusters + 1) up and 8 r down.  Each block reads
 * the whole of the features once (4 r d bytes, from L2: r^2 d / 32 bytes
 * in all, 96 double operations a byte) and its threads their own rows'
 * features once a tile (r^2 d / 8 bytes in all, from L1); a tile's
 * features are read from shared memory two doubles at a time, broadcast
 * (one load for 6 double operations): the kernel is bound by double
 * arithmetic (and by the square roots when d is small).
 *
 * The query rows go in launches of about SIL_CHUNK_WORK pair-dimensions
 * (at least one full wave of blocks, so a launch keeps every
 * multiprocessor busy); between launches the cancel flags are polled
 * (GC_ECANCEL "canceled") and progress is reported as the CPU reports it:
 * GC_PHASE_ITERATE, rows scored of r.  A launch is then a few tens of ms,
 * longer only when a single wave of query rows (about 67k on an H100) over
 * every scored row is more.
 *
 * Every CUDA call is checked (check.cuh: GC_ENOMEM for allocation
 * failures, else GC_EDEVICE).  At most INT32_MAX scored rows.  Device
 * memory: gc_silhouette_gpu_mem_bytes.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>

#include "common/check.cuh"
#include "common/gpu.h"
#include "common/launch.cuh"
#include "common/metric.h"
#include "tools/tools.h"
#include "common/transfer.cuh"

#pragma GCC visibility push(hidden)	/* internal to cuda/ */

#define SIL_CK(expr) GC_CUDA_CK("GPU silhouette", expr)

/* query rows a block (a thread each) */
#define SIL_Q 128
/* rows of a tile: the partial distances a thread keeps in registers */
#define SIL_TJ 32
/* dimensions of a tile staged in shared memory at once */
#define SIL_KC 32
/*
 * The work of one launch, in pairs x (d + 8) (a square root and its sum
 * count as about 8 dimensions): 2^36, about 25 ms on an H100.
 */
#define SIL_CHUNK_WORK ((int64_t) 1 << 36)

/* ------------------------------------------------------------------ */
/* the kernel                                                          */
/* ------------------------------------------------------------------ */

/*
 * s of the query rows q0 .. q1-1 (sorted positions) into s[q].  XT: the
 * features, d x r, column q the sorted row q; seg: the K + 1 segment
 * starts (seg[K] = r); cl[q]: the segment of row q.
 */
__global__ void __launch_bounds__(SIL_Q)
sil_rows(const float *__restrict__ XT, int r, int d,
		 const int *__restrict__ seg, const int *__restrict__ cl,
		 int q0, int q1, double *__restrict__ s)
{
	__shared__ __align__(16) double tile[SIL_KC][SIL_TJ];
	const int64_t q = q0 + (int64_t) blockIdx.x * SIL_Q + threadIdx.x;
	/* rows past the launch compute along (on row q1 - 1) and write nothing */
	const int	qr = q < q1 ? (int) q : q1 - 1;
	const int	own = cl[qr];
	double		sum = 0.0,		/* the running segment's distances */
				own_sum = 0.0,
				b = INFINITY;
	int			own_size = 1,
				c = 0,			/* the running segment */
				start = 0,		/* its first row */
				next = seg[1];	/* the next one's */

	/* j0 64-bit: the last tile's end may pass INT32_MAX */
	for (int64_t j0 = 0; j0 < r; j0 += SIL_TJ)
	{
		const int	tn = r - j0 < SIL_TJ ? (int) (r - j0) : SIL_TJ;
		double		acc[SIL_TJ];

		GC_UNROLL
		for (int t = 0; t < SIL_TJ; t++)
			acc[t] = 0.0;
		for (int k0 = 0; k0 < d; k0 += SIL_KC)
		{
			const int	kc = d - k0 < SIL_KC ? d - k0 : SIL_KC;
			const float *xq = XT + (size_t) k0 * r + qr;

			__syncthreads();
			for (int e = threadIdx.x; e < kc * SIL_TJ; e += SIL_Q)
			{
				const int	kk = e / SIL_TJ,
							t = e % SIL_TJ;

				tile[kk][t] = t < tn ? (double) XT[(size_t) (k0 + kk) * r + j0 + t] : 0.0;
			}
			__syncthreads();
#pragma unroll 4
			for (int kk = 0; kk < kc; kk++)
			{
				const double x = (double) xq[(size_t) kk * r];

				GC_UNROLL
				for (int t = 0; t < SIL_TJ; t++)
					acc[t] = gc_l2_step_f64(acc[t], x, tile[kk][t]);
			}
		}
		/* the tile's distances into the running sums, in j order */
		GC_UNROLL
		for (int t = 0; t < SIL_TJ; t++)
		{
			if (t >= tn)
				break;
			if (j0 + t == next)
			{
				/* segment c ends (the same j for every thread) */
				if (c == own)
				{
					own_sum = sum;
					own_size = next - start;
				}
				else
					b = gc_sil_nearer(b, sum, next - start);
				c++;
				start = next;
				next = seg[c + 1];
				sum = 0.0;
			}
			sum = __dadd_rn(sum, __dsqrt_rn(acc[t]));
		}
	}
	/* the last segment ends at r */
	if (c == own)
	{
		own_sum = sum;
		own_size = r - start;
	}
	else
		b = gc_sil_nearer(b, sum, r - start);
	if (q < q1)
		s[q] = gc_sil_value(own_sum, own_size, b);
}

/* ------------------------------------------------------------------ */
/* the host side                                                       */
/* ------------------------------------------------------------------ */

/* The call's host buffers, freed on every path out. */
struct sil_host
{
	int32_t    *order = nullptr;	/* r: sorted position -> scored index */
	int32_t    *cl = nullptr;	/* r: sorted position -> segment */
	int32_t    *seg = nullptr;	/* K + 1: segment starts, seg[K] = r */
	int64_t    *at = nullptr;	/* m: the counting sort's next position */
	float	   *XT = nullptr;	/* d x r: the features, sorted, transposed */
	double	   *s = nullptr;	/* r: s by sorted position */

	~sil_host()
	{
		free(order);
		free(cl);
		free(seg);
		free(at);
		free(XT);
		free(s);
	}
};

/*
 * The scored rows sorted by cluster (stable: ascending label, row order
 * kept inside a cluster): H.order, H.cl, H.seg, and the features in that
 * order, transposed, in H.XT.
 */
static gc_code
sil_sort(const float *X, int d, const gc_sil_rows *sel, sil_host &H,
		 gc_status *st)
{
	const int64_t r = sel->r;
	int64_t		pos = 0;
	int32_t		k = 0;

	H.order = (int32_t *) malloc(sizeof(int32_t) * (size_t) r);
	H.cl = (int32_t *) malloc(sizeof(int32_t) * (size_t) r);
	H.seg = (int32_t *) malloc(sizeof(int32_t) * (size_t) (sel->clusters + 1));
	H.at = (int64_t *) malloc(sizeof(int64_t) * (size_t) (sel->m > 0 ? sel->m : 1));
	H.XT = (float *) malloc(sizeof(float) * ((size_t) r * (size_t) d > 0 ? (size_t) r * (size_t) d : 1));
	H.s = (double *) malloc(sizeof(double) * (size_t) r);
	if (H.order == NULL || H.cl == NULL || H.seg == NULL || H.at == NULL ||
		H.XT == NULL || H.s == NULL)
		return gc_fail(st, GC_ENOMEM, "GPU silhouette: out of memory for %lld rows of %d features",
					   (long long) r, d);
	/* each label's first position; the segment of each non-empty one */
	for (int32_t c = 0; c < sel->m; c++)
	{
		H.at[c] = pos;
		if (sel->size[c] > 0)
			H.seg[k++] = (int32_t) pos;
		pos += sel->size[c];
	}
	H.seg[k] = (int32_t) r;
	for (int64_t i = 0; i < r; i++)
		H.order[H.at[sel->lab[i]]++] = (int32_t) i;
	for (int32_t c = 0; c < k; c++)
		for (int32_t p = H.seg[c]; p < H.seg[c + 1]; p++)
			H.cl[p] = c;
	for (int64_t p = 0; p < r; p++)
	{
		const float *x = X + sel->rows[H.order[p]] * d;

		for (int j = 0; j < d; j++)
			H.XT[(size_t) j * r + p] = x[j];
	}
	return GC_OK;
}

static gc_code
sil_poll(const gc_ctx *ctx, gc_status *st)
{
	if (gc_cancelled(ctx))
		return gc_fail(st, GC_ECANCEL, "canceled");
	return GC_OK;
}

/* s of every scored row, in scored order, into s_row. */
static gc_code
sil_run(const gc_ctx *ctx, const float *X, int d, const gc_sil_rows *sel,
		sil_host &H, double *s_row, gc_status *st)
{
	const int	r = (int) sel->r;
	const int	K = (int) sel->clusters;
	gc_dev		D;
	float	   *XTd;
	int		   *segd,
			   *cld;
	double	   *sd;
	int			dev,
				sms,
				per_sm;
	int64_t		chunk;
	gc_code		rc;
	gc_loop_progress lp;

	if ((rc = sil_sort(X, d, sel, H, st)) != GC_OK)
		return rc;
	gc_loop_progress_start(&lp, ctx, GC_PHASE_ITERATE, r);
	if ((rc = sil_poll(ctx, st)) != GC_OK)
		return rc;

	D.host_threads = gc_team_adapt(ctx);	/* the copies through the ring */
	SIL_CK(cudaGetDevice(&dev));
	SIL_CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
	SIL_CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, sil_rows, SIL_Q, 0));
	SIL_CK(cudaStreamCreateWithFlags(&D.s, cudaStreamNonBlocking));
	SIL_CK(D.alloc(XTd, (int64_t) r * d));
	SIL_CK(D.alloc(segd, K + 1));
	SIL_CK(D.alloc(cld, r));
	SIL_CK(D.alloc(sd, r));
	SIL_CK(gc_xfer_h2d(XTd, H.XT, sizeof(float) * (size_t) r * (size_t) d, D.s, D.host_threads));
	SIL_CK(gc_xfer_h2d(segd, H.seg, sizeof(int32_t) * (size_t) (K + 1), D.s, D.host_threads));
	SIL_CK(gc_xfer_h2d(cld, H.cl, sizeof(int32_t) * (size_t) r, D.s, D.host_threads));

	/* query rows a launch: SIL_CHUNK_WORK, at least a wave, whole blocks */
	chunk = SIL_CHUNK_WORK / ((int64_t) r * ((int64_t) d + 8));
	if (chunk < (int64_t) (per_sm > 0 ? per_sm : 1) * sms * SIL_Q)
		chunk = (int64_t) (per_sm > 0 ? per_sm : 1) * sms * SIL_Q;
	chunk = (chunk + SIL_Q - 1) / SIL_Q * SIL_Q;
	for (int64_t q0 = 0; q0 < r; q0 += chunk)
	{
		const int64_t q1 = q0 + chunk < r ? q0 + chunk : r;

		if ((rc = sil_poll(ctx, st)) != GC_OK)
			return rc;
		SIL_CK(gc_launch(sil_rows, q1 - q0, SIL_Q, SIL_Q, D.s,
						 (const float *) XTd, r, d, (const int *) segd,
						 (const int *) cld, (int) q0, (int) q1, sd));
		SIL_CK(cudaStreamSynchronize(D.s));
		gc_loop_progress_add(&lp, q1 - q0, true);
	}
	SIL_CK(gc_xfer_d2h(H.s, sd, sizeof(double) * (size_t) r, D.s, D.host_threads));
	D.release();
	for (int p = 0; p < r; p++)
		s_row[H.order[p]] = H.s[p];
	gc_loop_progress_end(&lp);
	return GC_OK;
}

#pragma GCC visibility pop

/* ------------------------------------------------------------------ */
/* entry points                                                        */
/* ------------------------------------------------------------------ */

extern "C" gc_code
gc_silhouette_gpu(const gc_ctx *ctx, const float *X, int d,
				  const gc_sil_rows *sel, double *s, gc_status *st)
{
	sil_host	H;

	if (sel->r > INT32_MAX)
		return gc_fail(st, GC_EDEVICE, "GPU silhouette handles at most %d scored rows, got %lld",
					   INT32_MAX, (long long) sel->r);
	return sil_run(ctx, X, d, sel, H, s, st);
}

/* pool rounding: each of the call's 4 allocations may take a 2 MiB page */
#define SIL_GPU_FIXED ((size_t) 4 << 21)

extern "C" size_t
gc_silhouette_gpu_mem_bytes(int64_t rows, int d, int32_t m)
{
	int64_t		segs;

	if (rows <= 0)
		return 0;
	if (rows > INT32_MAX || d < 0)
		return SIZE_MAX;
	/* the segment starts: one a non-empty cluster, and the end */
	segs = (m < rows ? (int64_t) m : rows);
	segs = (segs > 0 ? segs : 0) + 1;
	/* features (float, d x rows), each row's segment (int), its s (double) */
	return (size_t) rows * ((size_t) d * sizeof(float) + sizeof(int32_t) + sizeof(double)) +
		(size_t) segs * sizeof(int32_t) + SIL_GPU_FIXED;
}
