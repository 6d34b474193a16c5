/*
 * kmeans_dev.cuh — internal to the CUDA k-means (cuda/kmeans*.cu): the
 * device state of one problem (km_dev), the per-iteration status record,
 * the error plumbing, and the host functions each phase's file provides to
 * the driver (kmeans.cu).  Not a public header: the core sees the k-means
 * GPU only through gpu.h.
 */
#ifndef GPUCLUST_KMEANS_DEV_CUH
#define GPUCLUST_KMEANS_DEV_CUH

#include <cuda_runtime.h>
#include <stdint.h>

#include "common/check.cuh"
#include "common/gpu.h"
#include "kmeans/kmeans.h"

/* Rows of a block of seeding's prefix sums (any blocking gives the same). */
#define KM_BLOCK GC_KM_BLOCK

/* Most local trials k-means++ draws (2 + ln k, k < 2^31: 23). */
#define KM_PP_LMAX 24
/* k-means++ screened (kmeans_pp.cu) from this d (H200: at 1M x 32 it lost,
 * 9.8 -> 11.4 ms for k = 100, at 1M x 64, k = 256 it gained, 37.3 -> 31.6),
 * up to n d of this */
#define KM_PP_SCREEN_MIN_D 64
#define KM_PP_SCREEN_MAX_ND ((double) (1 << 28))

#define SMALL_D_MAX 8			/* exact direct path up to this d */
#define TILE 128				/* tiled path: rows and centres per block */
#define SCREEN_D_MAX 256		/* tensor-core screen up to this d */

/* The one small record read back per Lloyd iteration. */
struct km_info
{
	unsigned long long changed;	/* rows whose label changed */
	double		shift;			/* sum of squared centre moves */
	int			n_empty;		/* clusters with no row */
	int			relocated;		/* of those, re-seeded with a row (km_reseed) */
	int			moved;			/* some centre coordinate changed */
	unsigned	n_fallback;		/* rows the screen left (one km_assign) */
	unsigned	fb_total;		/* rows re-ranked over every centre this iteration (every km_assign) */
	unsigned	n_over;			/* of n_fallback, rows their window or the 3xtf32 re-screen could not decide (one km_assign) */
	unsigned	fb_screen;		/* rows re-screened in 3xtf32 this iteration */
	unsigned	tie_rows;		/* rows decided among their window's candidates this iteration */
	unsigned	n_listed;		/* rows the bounds could not keep (one km_assign; kmeans_prune.cu) */
	unsigned long long grid_tries;	/* distances the grid's warps paid for (kmeans_grid.cu) */
};

/*
 * The near ties' windows (kmeans_assign.cu's header).  The screen queues
 * the rows it cannot decide; for queue slot q < cap it also keeps thr[q],
 * the row's best screened score plus half its bound.  The window pass
 * (kmeans_screen.cu, mode 2) lists in cand[q * KM_TIE_CAP ..] the centres
 * whose screened score is within both screens' bounds of that, ccnt[q] of
 * them (more than KM_TIE_CAP: the list is cut, the row re-ranked over every
 * centre); k_assign_ties ranks them with the exact distance.
 */
#define KM_TIE_CAP 16

/*
 * Windows where k d is at least this (GPUCLUST_KM_TIES=1: always, =0:
 * never).  Below it the re-rank over every centre of the few queued rows
 * is the cheaper (H100, with the window pass on mma.sync: at 4M x 32, k =
 * 256, 16k rows a pass, 0.15 ms for the windows against about 0.03; at 1M
 * x 128, k = 1000, level, 0.22 ms; at k d = 5.1M, with the pass on wgmma,
 * 2.4 ms against about 21 for the 3xtf32 re-screen and the re-rank).
 */
#define KM_TIES_MIN_KD (1 << 17)

struct km_ties
{
	float	   *thr = nullptr;	/* cap */
	int32_t    *cand = nullptr;	/* cap x KM_TIE_CAP */
	unsigned   *ccnt = nullptr;	/* cap */
	int			cap = 0;		/* 0: no windows (GPUCLUST_KM_TIES=0, d > 256) */
};

/*
 * k-means|| (kmeans_par.cu): each row's D² so far, d2 (NULL: no cut), and
 * keep = 1 - (d + 2) u.  A screen leaves out (label -1, neither decided
 * nor queued) a row none of whose centres can come below its D², as
 * par_merge would leave it (screen.cuh's screen_cut).
 */
struct km_cut
{
	const float *d2 = nullptr;
	float		keep = 1.0f;
};

/* The queue slots with a window for passes over `rows` rows: at most an
 * eighth of them, at least 2^18. */
static inline int64_t
km_ties_cap(int64_t rows)
{
	const int64_t c = rows / 8 > (1 << 18) ? rows / 8 : (1 << 18);

	return c < rows ? c : rows;
}

/*
 * The window pass' grid (km_screen_ties): blocks of bm queue slots over
 * the first cover slots, times parts of the ntiles tiles of centres enough
 * for about per_sm blocks an SM over the row blocks the last iteration's
 * queue (est rows) needed, so that a few queued rows still fill the
 * device.  More parts refill the rows more often: on wgmma at FAISS's
 * shape (H100) 8 blocks an SM took 2.45 ms, 16 took 4.1.
 */
static inline dim3
km_ties_grid(int64_t est, int cover, int bm, int ntiles, int nsm, int per_sm)
{
	const int64_t rb = ((est < cover ? est : cover) + bm - 1) / bm;
	int64_t		ny = ((int64_t) per_sm * nsm + (rb > 0 ? rb : 1) - 1) / (rb > 0 ? rb : 1);

	ny = ny > ntiles ? ntiles : ny;
	return dim3((unsigned) ((cover + bm - 1) / bm), (unsigned) (ny > 0 ? ny : 1));
}

/* A CUDA error as a gc_code (check.cuh), named for k-means. */
#define km_cuda_fail(st, e, what) gc_cuda_fail((st), (e), "GPU k-means", (what))
#define KM_CK(expr) GC_CUDA_CK("GPU k-means", expr)
#define KM_LAUNCHED() KM_CK(cudaGetLastError())
#define KM_ALLOC(p, count) KM_CK(gc_dalloc((void **) &(p), sizeof(*(p)) * (size_t) (count), D.s))

static inline unsigned
blocks_for(int64_t n, int t)
{
	return (unsigned) ((n + t - 1) / t);
}

/*
 * The exact path's grid at d <= 3 (kmeans_grid.cu): G[t] cells along
 * feature t (1 past d), ncell in all; a row's cell along t is
 * (x_t - lo[t]) * invw[t], clamped; that cell's float edges along t are
 * gedge[eoff[t] + i] (low) and gedge[eoff[t] + G[t] + i] (high).
 */
struct km_grid_geo
{
	float		lo[3] = {0.0f, 0.0f, 0.0f};
	float		invw[3] = {0.0f, 0.0f, 0.0f};
	int			G[3] = {1, 1, 1};
	int			eoff[3] = {0, 0, 0};
	int			ncell = 0;
};

/* The cell of row coordinates x (d features) and whether x lies within
 * its edges: the kernel's rule (kmeans_grid.cu), and the tests'. */
__host__ __device__ __forceinline__ int
km_grid_cell(const km_grid_geo &g, const float *__restrict__ edge, const float *x,
			 int d, bool *inside)
{
	int			cell = 0,
				mul = 1;
	bool		in = true;

#pragma unroll
	for (int t = 0; t < d; t++)
	{
#ifdef __CUDA_ARCH__
		int			q = (int) __fmul_rn(gc_fsub(x[t], g.lo[t]), g.invw[t]);
#else
		int			q = (int) (gc_fsub(x[t], g.lo[t]) * g.invw[t]);
#endif

		q = q < 0 ? 0 : (q >= g.G[t] ? g.G[t] - 1 : q);
		in &= x[t] >= edge[g.eoff[t] + q] && x[t] <= edge[g.eoff[t] + g.G[t] + q];
		cell += q * mul;
		mul *= g.G[t];
	}
	*inside = in;
	return cell;
}

/* The row of a re-seeding key (km_far_keys; not 0). */
__device__ __host__ __forceinline__ int64_t
key_row(unsigned long long key)
{
	return (int64_t) (0xffffffffull - (key & 0xffffffffull));
}

struct km_stream;				/* the streamed path's buffers (kmeans_stream.cu) */
struct km_wupd;					/* the weighted update's buffers (kmeans_weighted.cu) */
struct km_dev;

/* Waits for the streamed path's copies and frees its buffers (none: no-op). */
void		km_stream_free(km_dev &D) __attribute__((visibility("hidden")));

/* Frees the weighted update's buffers (none: no-op). */
void		km_wupd_free(km_dev &D) __attribute__((visibility("hidden")));

/*
 * Device state of one k-means problem (n, d, k).
 *
 * Streamed (kmeans_stream.cu): X stays on the host (hX) and each pass
 * uploads it in nchunks chunks of chunk rows; the per-row arrays the
 * kernels read (XT, q, xn2, fb_rows, perm, XR) then hold one chunk, and
 * the phases run on a chunk view: a copy of km_dev (is_view: it owns
 * nothing) whose n, XT, labels, d2 and per-row arrays are the chunk's.  A
 * new per-row array must be set in km_chunk_view (kmeans_stream.cu).
 */
struct km_dev
{
	int64_t		n = 0;
	int			d = 0,
				k = 0,
				kp = 0,
				W = 0;			/* floats per centre, exact path */
	bool		small = false;
	int			R = 0;			/* replicas; 0 = global-atomic update */
	size_t		upd_smem = 0;
	int			upd_grid = 0;
	size_t		slots = 0;
	int			nsm = 0;		/* the device's multiprocessors */
	int			smem_optin = 0;	/* its opt-in shared memory per block */
	cudaStream_t s = nullptr;
	float	   *XT = nullptr;
	float	   *XR = nullptr;	/* row-major copy: sort-by-label update only */
	int32_t    *perm = nullptr;	/* n: rows sorted by label */
	int		   *lcnt = nullptr;	/* k+1 counts, then k+1 offsets, then k cursors */
	void	   *scan_tmp = nullptr;
	size_t		scan_bytes = 0;
	int32_t    *labels = nullptr;
	int32_t    *labels_best = nullptr;
	float	   *C[2] = {nullptr, nullptr};
	float	   *C_best = nullptr;
	float	   *cpk = nullptr;
	float	   *CT = nullptr;
	float	   *cnrm = nullptr;
	float	   *CTo = nullptr;
	float	   *CTf = nullptr;	/* screen: CT in fragment order, float (3xtf32 screen only) */
	float	   *CTt = nullptr;	/* screen: CT in fragment order, TF32 (mma.sync's tf32 passes) */
	uint16_t   *CTw = nullptr;	/* wgmma screen: CT in its swizzled slabs, FP16 scaled (screen_wg) */
	float	   *cnw = nullptr;	/* wgmma screen: ||c'||² at its scale, finite on the padding */
	float	   *cmax2 = nullptr;	/* 3: max ||c'_j||²; the wgmma screen's max ||c'_j - c^_j||² and scale */
	int32_t    *fb_rows = nullptr;
	int32_t    *fb_rows2 = nullptr;	/* screen: the rows their window or the 3xtf32 re-screen could not decide */
	km_ties		ties;			/* screen: the near ties' windows */
	int64_t		ties_est = 0;	/* rows the last screen left (km_screen_adapt) */
	float	   *xn2 = nullptr;
	int			fb_grid = 0;
	int			tiled_minb = 2;	/* blocks per SM the tiled kernel is built for */
	int			screen = 0;		/* 0: FP32 tiled kernel; 1: tf32; 3: 3xtf32 */
	bool		screen_cascade = false;	/* without windows: tf32, then 3xtf32 on the rows it leaves ... */
	bool		cascade_now = true;	/* ... in this iteration (km_screen_adapt) */
	int			dpad = 0;		/* rows of CT: d rounded up to the screen's stage */
	size_t		screen_smem = 0;
	int			screen_minb = 1;	/* blocks per SM of the tf32 kernel */
	int			screen_res = 0;	/* blocks per SM of the tf32 kernel with the centres
								 * resident (kmeans_screen.cu); 0: they stream */
	int			screen_wg = 0;	/* the screen on wgmma (kmeans_wgmma.cu): its stages; 0 none */
	int			wdpad = 0;		/* its dimensions: d rounded up to 64 */
	float		xabs = 0.0f;	/* at least every |x - mu| (km_features_finish) */
	float	   *mu = nullptr;
	unsigned long long *gsum = nullptr;	/* slots, then km_info */
	km_info    *info = nullptr;
	km_info    *h_info = nullptr;	/* pinned */
	double	   *scale = nullptr;	/* d, then iscale d */
	double	   *iscale = nullptr;
	double	   *q = nullptr;	/* n: inertia terms / distances */
	double	   *bsum = nullptr;
	double	   *dsum = nullptr;
	double	   *fin_part = nullptr;	/* km_finalize's partials: 512 doubles, 1024 ints */
	float	   *d2 = nullptr;	/* n, re-seeding */
	unsigned long long *keys = nullptr;	/* k */
	int		   *empty = nullptr;	/* k */
	double	   *vbuf = nullptr;	/* variance: nb x d block sums, then varj (d), out (1) */
	double	   *mean = nullptr;	/* d: the feature means (double), in vbuf */
	bool		sorted_upd = false;	/* sort-by-label update (XR, perm) */
	bool		label_smem = false;	/* ... its counts in shared memory (k_label_sort) */

	/* spherical k-means (metric cosine): the rows are unit rows */
	bool		unit = false;
	bool		unit_rows = false;	/* X came as given: km_setup makes its rows
									 * unit rows on the device (else the host did) */
	bool		unit_centres = false;	/* km_prep prepares C's unit rows (a fit's
										 * iterations; not while seeding) */
	float	   *Cu = nullptr;	/* k x d: the unit rows km_prep prepared */
	float	   *Cs = nullptr;	/* k x d: km_assign_centres' */

	/* sample weights: the update in the CPU's order (kmeans_weighted.cu) */
	const double *hw = nullptr;	/* the host's, n (NULL: unweighted) */
	km_wupd    *wu = nullptr;	/* its device buffers (the weights among them) */

	/* the bounds that keep rows out of the assignment (kmeans_prune.cu) */
	bool		prune_ok = false;	/* this problem can keep bounds (km_prune_plan) */
	bool		prune_on = false;	/* the assignment uses them (Lloyd's iterations) */
	bool		bounds_ok = false;	/* ub, lb hold bounds for every row, about Cbase */
	float	   *ub = nullptr;	/* n: upper bound of ||x - c_label|| */
	float	   *lb = nullptr;	/* n: lower bound of the distance to every other centre */
	int32_t    *pr_rows = nullptr;	/* n: the rows the bounds could not keep */
	float	   *Cbase = nullptr;	/* k x d: the centres the bounds are about */
	float	   *drift = nullptr;	/* k + 1: each centre's move from Cbase, then the largest */
	float	   *csep = nullptr;	/* k: half the distance to the nearest other centre (small k) */
	const float *Cprep = nullptr;	/* the centres last prepared (km_prep) */
	km_cut		cut;			/* the screens' cut (k-means||'s rounds only) */
	int64_t		screened = 0;	/* rows the last km_assign screened */

	/* where the assignment writes each row's bounds: only while a fit's
	 * iterations keep them */
	float	   *ub_out() const { return prune_on ? ub : nullptr; }
	float	   *lb_out() const { return prune_on ? lb : nullptr; }

	/* the exact path's grid (kmeans_grid.cu; d <= 3) */
	bool		grid = false;	/* km_assign goes through it (km_grid_plan) */
	km_grid_geo geo;
	float	   *gedge = nullptr;	/* the cells' edges, per feature */
	uint32_t   *ghdr = nullptr;	/* ncell: a cell's candidates, offset << 8 | count */
	uint16_t   *gids = nullptr;	/* gpool (+1): the candidates' centre numbers */
	unsigned   *gused = nullptr;	/* entries of gids taken by the last build */
	int			gpool = 0;

	/* streamed */
	bool		is_view = false;	/* a chunk view: owns nothing */
	bool		streamed = false;
	int64_t		chunk = 0;		/* rows per chunk (a multiple of KM_BLOCK) */
	int64_t		nchunks = 0;
	const float *hX = nullptr;	/* the host matrix */
	const gc_ctx *ctx = nullptr;	/* cancel flags, host threads */
	km_stream  *S = nullptr;
	int			passes = 0;		/* passes over X so far */
	double		ms_passes = 0.0;

	~km_dev()
	{
		if (is_view)
			return;
		km_stream_free(*this);
		km_wupd_free(*this);
		gc_dfree(XT, s);
		gc_dfree(XR, s);
		gc_dfree(perm, s);
		gc_dfree(lcnt, s);
		gc_dfree(scan_tmp, s);
		gc_dfree(labels, s);
		gc_dfree(labels_best, s);
		gc_dfree(C[0], s);
		gc_dfree(C[1], s);
		gc_dfree(C_best, s);
		gc_dfree(cpk, s);
		gc_dfree(CT, s);
		gc_dfree(cnrm, s);
		gc_dfree(CTo, s);
		gc_dfree(CTf, s);
		gc_dfree(CTt, s);
		gc_dfree(CTw, s);
		gc_dfree(cnw, s);
		gc_dfree(cmax2, s);
		gc_dfree(fb_rows, s);
		gc_dfree(fb_rows2, s);
		gc_dfree(ties.thr, s);
		gc_dfree(ties.cand, s);
		gc_dfree(ties.ccnt, s);
		gc_dfree(xn2, s);
		gc_dfree(mu, s);
		gc_dfree(gsum, s);
		gc_dfree(scale, s);
		gc_dfree(q, s);
		gc_dfree(bsum, s);
		gc_dfree(fin_part, s);
		gc_dfree(d2, s);
		gc_dfree(keys, s);
		gc_dfree(empty, s);
		gc_dfree(vbuf, s);
		gc_dfree(ub, s);
		gc_dfree(lb, s);
		gc_dfree(pr_rows, s);
		gc_dfree(Cbase, s);
		gc_dfree(drift, s);
		gc_dfree(csep, s);
		gc_dfree(gedge, s);
		gc_dfree(ghdr, s);
		gc_dfree(gids, s);
		gc_dfree(gused, s);
		gc_dfree(Cu, s);
		gc_dfree(Cs, s);
		if (h_info)
			cudaFreeHost(h_info);
		if (s)
			cudaStreamDestroy(s);
	}
};

/*
 * The phases of one problem, by file; each enqueues on D.s.  The driver
 * (kmeans.cu) and the test hooks (kmeans_hooks.cu) are built from them.
 * They are internal to the library: gpuclust.so does not export them (the
 * objects linked together still see each other).
 */
#pragma GCC visibility push(hidden)

/* ---- kmeans_setup.cu ---- */

/*
 * Allocates, uploads X (chunked, transposed), takes the feature statistics
 * and picks the kernels.  chunk > 0: streamed in chunks of that many rows
 * (a multiple of KM_BLOCK; ctx: the cancel flags and host threads of the
 * passes): X is not uploaded but read by one pass.
 */
gc_code		km_setup(km_dev &D, const float *X, int64_t n, int d, int k,
					 bool keep_best, gc_status *st, int64_t chunk = 0,
					 const gc_ctx *ctx = nullptr);

/* km_setup up to the upload (and the unit rows): the feature statistics
 * and the update's plan (km_update_plan) are the caller's, as a problem
 * split over several GPUs takes them over every GPU's rows
 * (kmeans_multi.cu). */
gc_code		km_setup_rows(km_dev &D, const float *X, int64_t n, int d, int k,
						  bool keep_best, gc_status *st, int64_t chunk = 0,
						  const gc_ctx *ctx = nullptr);

/* XT[j*ld + r0 + r] = in[r*d + j] for rows rows (device, on D.s). */
gc_code		km_transpose(km_dev &D, const float *in, int64_t rows, float *XT,
						 int64_t ld, int64_t r0, gc_status *st);

/* The feature ranges' scratch (3d device words: largest |x|, minimum,
 * maximum per feature), cleared; the caller frees *fr. */
gc_code		km_features_scratch(km_dev &D, unsigned **fr, gc_status *st);

/* The feature pass over V's rows: the feature ranges into fr (atomics)
 * and the means' block sums (km_var_blocks). */
gc_code		km_features_rows(km_dev &V, int64_t r0, unsigned *fr,
							 gc_status *st);

/* After km_features_rows over every row: D.mean, D.mu, the scales,
 * (resident, tiled path) D.xn2, and the exact path's grid. */
gc_code		km_features_finish(km_dev &D, unsigned *fr, gc_status *st);

/* The same from the means already in D.mean and the feature ranges h
 * (host, 3d words as fr) of a problem of n rows (D's rows, or more: a
 * problem split over GPUs). */
gc_code		km_features_set(km_dev &D, const unsigned *h, int64_t n,
							gc_status *st);

/* V.xn2 = the shifted row norms of V's rows (tiled path). */
gc_code		km_rownorm(km_dev &V, gc_status *st);

/* ---- kmeans_pp.cu ---- */

/*
 * k-means++ seeding on the device, bit for bit the CPU's
 * gc_km_init_kmeanspp_w (same draws, same float distances, same blocked
 * integer sums): XT is the d x n transposed data, XR the same rows
 * row-major or NULL (read where it screens, else made); w (device, n
 * doubles >= 0, at least k positive) and the same weights on the host
 * (w_host: the first centre, gc_km_weighted_first, and the last row of
 * positive weight), or both NULL (gc_km_init_kmeanspp); C (k x d, device)
 * receives the centres, chosen (k, device, may be NULL) the rows.
 */
gc_code		km_pp_device_w(const gc_ctx *ctx, cudaStream_t s, const float *XT,
						   const float *XR, int64_t n, int d, int k, const double *w,
						   const double *w_host, uint64_t seed,
						   uint64_t stream, float *C, int64_t *chosen,
						   gc_status *st);

/*
 * k-means++ over the S shards of a split fit (kmeans_multi.cu): shard s is
 * D[s], the problem's rows r0[s] .. r0[s+1] - 1 (whole blocks), on GPU
 * dev[s], after the shards' setup (unweighted).  C (host, k x d) receives
 * km_pp_device_w's centres over the whole problem, bit for bit.  Each step
 * the host draws every trial over the shards' totals and sends it to the
 * shard that holds its row, which takes it as a candidate; every shard
 * computes the candidates' terms over its rows, the host adds the shards'
 * potentials (integers: exact in any order) and picks the winner and the
 * grid, and every shard makes the next draws' prefix sums.  One host
 * thread drives the shards' streams (three round trips a centre).
 */
gc_code		km_pp_shards(km_dev *const *D, const int *dev, const int64_t *r0,
						 int S, const gc_ctx *ctx, uint64_t seed,
						 uint64_t stream, float *C, gc_status *st);

/* ---- kmeans_par.cu ---- */

/*
 * k-means|| seeding on the device, bit for bit the CPU's
 * gc_km_init_kmeans_par (unweighted), over D's resident rows (after
 * km_setup), through D's assignment step; D.C[1] is its scratch.  C (k x d,
 * device) receives the centres, chosen (k, device, may be NULL) the rows.
 */
gc_code		km_par_device(km_dev &D, const gc_ctx *ctx, uint64_t seed,
						  uint64_t stream, float *C, int64_t *chosen,
						  gc_status *st);

/*
 * The same over the S shards of a split fit (kmeans_multi.cu): shard s is
 * D[s], the problem's rows r0[s] .. r0[s+1] - 1 (whole blocks), on GPU
 * dev[s], dev[0] current, after the shards' setup.  C (host, k x d)
 * receives the centres: km_par_device's over the whole problem, bit for
 * bit (with fewer than k candidates, km_pp_shards').  Each
 * round the shards' largest D² and integer sums on its grid combine on
 * the host (exact in any order), every shard draws its rows by their
 * numbers in the problem, and the kept rows' coordinates go through the
 * host, in row order, to every shard, which runs them against its rows in
 * km_par_device's sub-batches; the candidates' weights add the shards'
 * counts, and weighted k-means++ over them runs on GPU 0.
 */
gc_code		km_par_shards(km_dev *const *D, const int *dev, const int64_t *r0,
						  int S, const gc_ctx *ctx, uint64_t seed,
						  uint64_t stream, float *C, gc_status *st);

/* ---- kmeans_assign.cu ---- */

/* The centres C (device, k x d) in the layout the next km_assign reads:
 * under cosine, during a fit's iterations (D.unit_centres), C's unit rows
 * (D.Cu), as the CPU assigns to them. */
gc_code		km_prep(km_dev &D, const float *C, gc_status *st);

/* The centres the rows of C's clusters are measured to: C, or under
 * cosine its unit rows (into D.Cs), as the CPU measures the inertia,
 * the distances and re-seeding's d2. */
gc_code		km_assign_centres(km_dev &D, const float *C, const float **out,
							  gc_status *st);

/*
 * U = the unit rows of C (k x d, gc_unit_row; U may be C).  cnt (stride
 * cstride), when given: a cluster counted 0 is left as it is (its old
 * centre); Cold, when given: a row of norm 0 (no direction) takes Cold's.
 */
gc_code		km_unit_rows(km_dev &D, const float *C, float *U,
						 const unsigned long long *cnt, int cstride,
						 const float *Cold, gc_status *st);

/* Assignment from the centres last prepared; counts changes in info. */
gc_code		km_assign(km_dev &D, gc_status *st);

/* The exact re-rank of the rows the last screen left (d > 8): among their
 * windows' candidates, or over every centre. */
gc_code		km_rerank(km_dev &D, gc_status *st);

/* ---- kmeans_screen.cu ---- */

/* The tensor-core screen's mode and occupancy (D.screen, D.dpad ...). */
gc_code		km_screen_plan(km_dev &D, gc_status *st);

/* The prepared centres in the screen's fragment order (km_prep). */
gc_code		km_screen_prep(km_dev &D, gc_status *st);

/* After an iteration (its record in D.h_info): how many rows the next
 * screen will likely leave (the window pass' grid), and, without windows,
 * whether it re-screens them in 3xtf32. */
void		km_screen_adapt(km_dev &D);

/*
 * The screen in `mode` over D's rows (rows_in NULL) or over the *n_in rows
 * listed in rows_in, into D.labels and the queue rows_out / *n_out of the
 * rows it cannot decide (with D.ties.thr); dbg (tests): every score.
 * Mode 2 is the window pass over the queue D.fb_rows (km_rerank).
 */
gc_code		km_screen(km_dev &D, int mode, const int32_t *rows_in,
					  const unsigned *n_in, int32_t *rows_out, unsigned *n_out,
					  float *dbg, gc_status *st);

/* The window pass over the first `cover` slots of the queue D.fb_rows
 * (kmeans_dev.cuh's km_ties; their ccnt zeroed by the caller). */
gc_code		km_screen_ties(km_dev &D, int cover, gc_status *st);

/* The bound's factor of M² for a screen mode (1 tf32, 3 3xtf32) at d, with
 * 5% for the float rounding of M and the bound. */
float		km_screen_coef(int mode, int d);

/* ---- kmeans_wgmma.cu ---- */

/* After km_screen_plan: the FP16 screen on wgmma where this build and
 * device have it (D.screen_wg). */
gc_code		km_wg_plan(km_dev &D, gc_status *st);

/* The prepared centres (CT) in the wgmma screen's layout (D.CTw). */
gc_code		km_wg_prep(km_dev &D, gc_status *st);

/* The window pass on wgmma (km_screen_ties's, when D.screen_wg) over the
 * first `cover` slots of the queue D.fb_rows. */
gc_code		km_wg_ties(km_dev &D, int cover, gc_status *st);

/* The tf32 screen of every row on wgmma (km_screen's, when D.screen_wg). */
gc_code		km_wg_screen(km_dev &D, int32_t *rows_out, unsigned *n_out,
						 float *dbg, gc_status *st);

/* ---- kmeans_prune.cu ---- */

/* Whether D can keep bounds (D.prune_ok): resident, screened (8 < d <=
 * 256), and GPUCLUST_KM_PRUNE is not 0.  Before km_alloc. */
void		km_prune_plan(km_dev &D);

/* Its buffers (km_alloc, when D.prune_ok). */
gc_code		km_prune_alloc(km_dev &D, gc_status *st);

/* From the centres last prepared: the bounds moved by the centres' drift
 * since Cbase, the rows they cannot keep listed in D.pr_rows, their count
 * read back into *listed (km_assign then makes those centres Cbase). */
gc_code		km_prune(km_dev &D, unsigned *listed, gc_status *st);

/* ---- kmeans_grid.cu ---- */

/* Whether the exact path (d <= 3) goes through a grid, from the features'
 * minima lo and maxima hi (host, d each): its geometry and buffers. */
gc_code		km_grid_plan(km_dev &D, const float *lo, const float *hi,
						 gc_status *st);

/* Each cell's candidate centres, from the centres last prepared (km_prep). */
gc_code		km_grid_build(km_dev &D, gc_status *st);

/* The exact assignment through the grid (km_assign, D.grid): labels and
 * the changed count. */
gc_code		km_grid_assign(km_dev &D, gc_status *st);

/* After an iteration (its record in D.h_info): the grid is dropped for the
 * rest of the fit when its warps paid for more than a third of n k
 * distances (rows crowded into a few cells, as beside a far outlier). */
void		km_grid_adapt(km_dev &D);

/* ---- kmeans_update.cu ---- */

/* The sort-by-label update's buffers, when its sums need them and they
 * can be had (else D.XR stays NULL: global atomics). */
void		km_update_alloc(km_dev &D);

/* Which update kernel, its shared memory and grid (D.R, D.upd_*). */
gc_code		km_update_plan(km_dev &D, gc_status *st);

/* Per-cluster fixed-point sums of the current labels into D.gsum. */
gc_code		km_update(km_dev &D, gc_status *st);

/* Means of D.gsum into Cnew (C_old for an empty cluster; weighted: the
 * means km_wupdate left there), normalized under cosine; info: shift,
 * empty count, moved flag. */
gc_code		km_finalize(km_dev &D, const float *Cold, float *Cnew,
						gc_status *st);

/* V.d2 = gc_dist2 of V's rows to their centres in C (re-seeding). */
gc_code		km_d2(km_dev &V, const float *C, gc_status *st);

/* The keys (D.keys) of the m rows of largest D.d2 above 0, farthest
 * first (ties: the lower row), 0 past the last; D.d2 of those taken -1. */
gc_code		km_far_keys(km_dev &D, int m, gc_status *st);

/* k_reseed_apply: the rows of keys (D.keys, m; their old labels in
 * labels, their features in far, m x d, or when far is NULL in D.XT) move
 * from their clusters' sums to the empty clusters'. */
gc_code		km_reseed_apply(km_dev &D, const float *far, const int32_t *labels,
							int m, gc_status *st);

/* Re-seeds m empty clusters as the CPU does (only rows off their centre:
 * fewer when fewer rows are; the count in info's relocated), then
 * km_finalize again.  Streamed: D.d2 already holds the distances to Cold
 * (km_d2 per chunk), and the far rows are read from the host matrix. */
gc_code		km_reseed(km_dev &D, const float *Cold, float *Cnew, int m,
					  gc_status *st);

/* ---- kmeans_weighted.cu ---- */

/* The weighted update's buffers and the weights' upload (km_setup, when
 * D.hw). */
gc_code		km_wupd_alloc(km_dev &D, gc_status *st);

/* The device's copy of the weights (n doubles). */
const double *km_weights(const km_dev &D);

/* The weighted means of the clusters of labels into Cnew (Cold where a
 * cluster has no weight), summed as the CPU's gc_km_update sums them; the
 * clusters' counts of rows of positive weight for km_finalize. */
gc_code		km_wupdate(km_dev &D, const int32_t *labels, const float *Cold,
					   float *Cnew, gc_status *st);

/* The positive-weight counts km_finalize reads (stride 1). */
const unsigned long long *km_wcounts(const km_dev &D);

/* Re-seeds the m clusters of no weight as the CPU does (the rows of
 * positive weight farthest from their centres), then km_wupdate and
 * km_finalize again. */
gc_code		km_wreseed(km_dev &D, const float *Cold, float *Cnew, int m,
					   gc_status *st);

/* ---- kmeans_stats.cu ---- */

/* Inertia of (labels, C) as gc_km_inertia; D.q keeps the per-row terms. */
gc_code		km_inertia(km_dev &D, const float *C, const int32_t *labels,
					   double *inertia, gc_status *st);

/* The inertia's block sums of V's rows (from row r0 of the problem; labels:
 * V's rows') into D.bsum; then km_inertia_total sums the blocks. */
gc_code		km_inertia_rows(km_dev &V, const float *C, const int32_t *labels,
							int64_t r0, gc_status *st);
gc_code		km_inertia_total(km_dev &D, double *inertia, gc_status *st);

/* Distances of (labels, C) to out (host, V.n doubles), enqueued on V.s. */
gc_code		km_distances(km_dev &V, const float *C, const int32_t *labels,
						 double *out, gc_status *st);

/*
 * The variance behind tol, blocked as gc_km_mean_variance: pass 0 sums
 * the features, pass 1 the squared deviations from D.mean, over V's rows
 * (from row r0) into the block sums D.vbuf; km_var_reduce then takes
 * D.mean (pass 0) or the mean variance into *out (pass 1, host).
 */
gc_code		km_var_blocks(km_dev &V, int64_t r0, int pass, gc_status *st);
gc_code		km_var_reduce(km_dev &D, int pass, double *out, gc_status *st);

/* ---- kmeans_stream.cu (the streamed path) ---- */

/* The streamed buffers (two pinned host and device chunk buffers, the
 * chunk's transposed rows and per-row scratch, a copy stream). */
gc_code		km_stream_open(km_dev &D, gc_status *st);

/* The feature pass over every chunk (km_features_rows, _finish). */
gc_code		km_stream_features(km_dev &D, gc_status *st);

/* The variance behind tol: a pass (pass 0 came with the features). */
gc_code		km_stream_variance(km_dev &D, double *out, gc_status *st);

/* The assignment and update of an iteration from the centres last
 * prepared, streamed: one pass (assign, d2 for re-seeding, update per
 * chunk). */
gc_code		km_stream_assign_update(km_dev &D, gc_status *st);

/* The inertia of (labels, C) in one pass; assign first: the labels are
 * re-assigned from the prepared centres in the same pass. */
gc_code		km_stream_inertia(km_dev &D, const float *C, int32_t *labels,
							  bool assign_first, double *inertia,
							  gc_status *st);

/* The distances of (labels, C) to out (host, n), in one pass. */
gc_code		km_stream_distances(km_dev &D, const float *C,
								const int32_t *labels, double *out,
								gc_status *st);

/* ---- kmeans.cu (the driver) ---- */

/* Tests (gc_kmeans_gpu_force_chunk): stream in chunks of this many rows. */
extern thread_local int64_t km_force_chunk;

/* The budget of a call given none: the free device memory, less a margin. */
gc_code		km_free_budget(size_t *budget, gc_status *st);

/* Phases of this thread's last gc_kmeans_gpu call. */
extern thread_local gc_kmeans_gpu_phases km_last_phases;

/* Initial centres into D.C[0] (device). */
gc_code		km_seed(km_dev &D, const gc_ctx *ctx, const float *X,
					gc_kmeans_init init, uint64_t seed, uint64_t stream,
					int64_t *chosen_dev, gc_status *st);

/* Whether init (resolved) seeds on the host: random always; every init
 * when X is streamed; k-means|| with weights. */
bool		km_seeds_on_host(gc_kmeans_init init, bool streamed, bool weighted);

/* The CPU's own seeding of init on the host matrix into C (host, k x d):
 * what the device's seeding reproduces. */
gc_code		km_seed_host(const gc_ctx *ctx, const float *X, int64_t n, int d,
						 int k, const double *w, gc_kmeans_init init,
						 uint64_t seed, uint64_t stream, float *C,
						 gc_status *st);

/* The given centroids into D.C[0] (under cosine their unit rows). */
gc_code		km_given_centres(km_dev &D, const gc_kmeans_params *p, gc_status *st);

/* D.info into D.h_info (synchronises D.s). */
gc_code		km_read_info(km_dev &D, gc_status *st);

/* ---- kmeans_multi.cu ---- */

/* The fit split over the GPUs of ctx (ctx->n_gpus >= 2, unweighted): the
 * result of gc_kmeans_gpu on one GPU, bit for bit. */
gc_code		km_fit_multi(const gc_ctx *ctx, const float *X, int64_t n, int d,
						 const gc_kmeans_params *p, gc_kmeans_result *res,
						 gc_status *st);

/* One Lloyd iteration from D.C[cur] (prepared) into D.C[1-cur]; info read
 * back into D.h_info. */
gc_code		km_iteration(km_dev &D, int cur, gc_status *st);

#pragma GCC visibility pop

#endif
