/*
 * bench_dbscan_gpu.c — GPU DBSCAN (cuda/dbscan*.cu) against the CPU path
 * (gc_dbscan_cpu, all cores) on the same machine, same data; labels and
 * core flags checked identical on every row (diff: rows that differ).
 * Prints one table: each row names the index that ran (grid, brute, tree:
 * with its leaves and the leaf pairs within eps) and the algorithm
 * (uf: union-find, dclust: CUDA-DClust).
 *
 *   A  10M 2-d: 20 Gaussian blobs (sigma 1, centres in [0,100]^2) + 10%
 *      uniform noise; eps = 2 sigma sqrt(30 / blob size), which gives 30
 *      neighbours on average inside a blob (E|N(x)| = N_b eps^2 / (4 sigma^2)
 *      for a 2-d Gaussian); min_pts 10.
 *   B  15.6M 2-d: 50 blobs in [0,200]^2 + 10% noise, ~300 neighbours
 *      inside blobs, min_pts 100.
 *   C  1M x 16-d: 20 blobs (sigma 1, centres in [-10,10]^16), eps the
 *      median distance to the 30th neighbour (24 sampled rows, eps_knn),
 *      min_pts 10: the tree with union-find and with DClust; the brute
 *      force too with BENCH_C_BRUTE=1 (4.6 s a call on the H100).
 *   D  world cities (lon, lat), eps 0.25, min_pts 10: the grid.
 *   E  1M x 64-d: 50 blobs (sigma 1, centres in [0,20]^64), eps_knn 30,
 *      min_pts 10: tree, union-find and DClust.
 *   F  10M x 8-d: 20 blobs (sigma 1, centres in [0,100]^8: ~115 apart,
 *      blobs ~4 across) + 10% uniform noise, eps_knn 30, min_pts 10:
 *      tree, union-find and DClust.
 *   G  world cities as D on the tree: union-find and DClust.
 *   X  crossover for 'auto' (d <= 3, grid): blobs + noise as A in 2-d and
 *      3-d, n = 1k .. 2M.
 *   Z  crossover for 'auto' at d > 3 (the tree, union-find) against the
 *      CPU: 20 blobs in [0,20]^d + 5% noise, eps_knn 30, min_pts 10, at
 *      d = 4, 8, 16, 32, 64 and n = 5k .. 1M; at each d the sizes stop
 *      where the CPU would take more than BENCH_Z_CPU_MAX seconds (10),
 *      predicted from the last size as quadratic in n.
 *   Y  (only when named in BENCH_ONLY) the brute force (forced) against
 *      the CPU kd-tree: blobs in 8-d and 16-d, n = 5k .. 200k.
 *   T  the limits: host-to-device bandwidth from pageable and from pinned
 *      memory, device-to-host from pinned, device-to-device (HBM).
 *
 * GPU: one warm-up call, then the median of R calls (whole call: upload,
 * clustering, numbering, download, release), with the phases of the median
 * call; "cluster" = index + core + union + border (device work, no
 * transfers); a warm-up over 2 s leaves one timed call.  CPU: gc_dbscan_cpu
 * on all cores, the median of Rcpu calls (one when the first took over
 * 2 s), once per data set: the rows on one data set share it.  Each row's
 * data come from its own seed (BENCH_ONLY=C draws what a full run draws).
 * BENCH_ONLY=A,B,... (default: every row but Y); BENCH_SKIP_C=1 skips C;
 * BENCH_GPU=0 times the CPU alone (one line per data set, no GPU call);
 * BENCH_CYCLIC=1 adds to C and E the tree split in dimension order, level
 * l along dimension l mod d (CUDA-DClust's directory's schedule), beside
 * the default widest-dimension splits.  A/B runs, each row the means
 * reaches first with it off, then as by default: BENCH_SCREEN_AB=1 the
 * tree's exact tiles (GPUCLUST_DB_SCREEN=0) against the tensor-core screen
 * of its count and union from 16-d (dbscan_screen.cuh; C, E and F);
 * BENCH_GATHER_AB=1 the count's second pass by query node
 * (GPUCLUST_DB_GATHER=0) against gathered (dbscan_tree.cu's
 * tr_count_gathered; C, E and F); BENCH_FACES_AB=1 the
 * grid's dense unions without (GPUCLUST_DB_FACES=0) and with their faces
 * first (dbscan_grid.cu's k_grid_union_faces; A, B and D).
 * BENCH_KEEP_POOL=1: the device's memory pool keeps what a call frees, as
 * in the GPU worker, so that calls after the first allocate nothing new.
 * Exit status 1 when a row failed or its labels differ from the CPU's.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime.h>

#include "common/gpu.h"
#include "knn_eps.h"

static uint64_t rs = 12345;

static uint64_t
next(void)
{
	uint64_t	z = (rs += UINT64_C(0x9e3779b97f4a7c15));

	z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
	return z ^ (z >> 31);
}

static double
unif(void)
{
	return (double) (next() >> 11) * 0x1.0p-53;
}

static double
gauss(void)
{
	double		u = unif(),
				v = unif();

	return sqrt(-2.0 * log(u + 1e-300)) * cos(6.283185307179586 * v);
}

static double
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

/* blobs + noise: m blobs in [0, box]^d, sigma 1, frac noise in the box. */
static float *
blobs(int64_t n, int d, int m, double box, double noise_frac)
{
	float	   *X = malloc(sizeof(float) * n * d);
	double	   *c = malloc(sizeof(double) * m * d);

	for (int i = 0; i < m * d; i++)
		c[i] = box * unif();
	for (int64_t i = 0; i < n; i++)
	{
		bool		noise = unif() < noise_frac;
		int			b = (int) (unif() * m);

		for (int j = 0; j < d; j++)
			X[i * d + j] = (float) (noise ? box * unif() : c[b * d + j] + gauss());
	}
	free(c);
	return X;
}

static int
cmp_d(const void *a, const void *b)
{
	double		x = *(const double *) a,
				y = *(const double *) b;

	return (x > y) - (x < y);
}

/* pinned host-to-device GB/s, measured by limits() (0 until then) */
static double pcie_gbs;

/* GB/s of one copy of bytes, the median of 5 after a warm-up */
static double
copy_gbs(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind)
{
	double		t[5];

	cudaMemcpy(dst, src, bytes, kind);
	for (int r = 0; r < 5; r++)
	{
		double		t0 = now_ms();

		cudaMemcpy(dst, src, bytes, kind);
		cudaDeviceSynchronize();
		t[r] = now_ms() - t0;
	}
	for (int a = 0; a < 5; a++)
		for (int b = a + 1; b < 5; b++)
			if (t[b] < t[a])
			{
				double		x = t[a];

				t[a] = t[b];
				t[b] = x;
			}
	return (double) bytes / (t[2] * 1e6);
}

/* The transfer and memory limits every row is measured against. */
static void
limits(void)
{
	const size_t bytes = (size_t) 80 << 20;	/* 10M 2-d points */
	void	   *h = malloc(bytes),
			   *hp = NULL,
			   *dv = NULL,
			   *dv2 = NULL;

	memset(h, 1, bytes);
	if (cudaMallocHost(&hp, bytes) != cudaSuccess || cudaMalloc(&dv, bytes) != cudaSuccess ||
		cudaMalloc(&dv2, bytes) != cudaSuccess)
	{
		printf("T  limits: allocation failed\n");
		return;
	}
	memset(hp, 1, bytes);
	{
		double		pageable = copy_gbs(dv, h, bytes, cudaMemcpyHostToDevice);
		double		pinned = copy_gbs(dv, hp, bytes, cudaMemcpyHostToDevice);
		double		down = copy_gbs(hp, dv, bytes, cudaMemcpyDeviceToHost);
		double		d2d = 2.0 * copy_gbs(dv2, dv, bytes, cudaMemcpyDeviceToDevice);

		pcie_gbs = pinned;
		printf("T  limits (80 MB): host-to-device pageable %.1f GB/s (%.2f ms), pinned %.1f GB/s (%.2f ms); "
			   "device-to-host pinned %.1f GB/s; device-to-device %.0f GB/s (read + write)\n",
			   pageable, bytes / (pageable * 1e6), pinned, bytes / (pinned * 1e6), down, d2d);
	}
	cudaFreeHost(hp);
	cudaFree(dv);
	cudaFree(dv2);
	free(h);
	/* the pinned ring every call's copies go through (best of 5) */
	for (int th = 4; th <= 16; th *= 2)
	{
		double		up = 1e30,
					down = 1e30;
		char		msg[160];

		for (int r = 0; r < 5; r++)
		{
			double		u,
						w;

			if (gc_xfer_test(bytes, 2, th, 7 + r, &u, &w, msg, sizeof(msg)) != 0)
			{
				printf("T  ring: %s\n", msg);
				return;
			}
			up = u < up ? u : up;
			down = w < down ? w : down;
		}
		printf("T  the pinned ring (80 MB, %d host threads): host-to-device %.1f GB/s (%.2f ms), "
			   "device-to-host %.1f GB/s (%.2f ms)\n",
			   th, bytes / (up * 1e6), up, bytes / (down * 1e6), down);
	}
}

/* Row tag in BENCH_ONLY (every row but the opt-in ones when unset). */
static bool
wanted(const char *tag)
{
	const char *o = getenv("BENCH_ONLY");

	if (o == NULL)
		return strcmp(tag, "Y") != 0;
	return strstr(o, tag) != NULL;
}

/* Each row draws from its own seed (A: the seed every row once shared). */
static void
seed_row(char tag)
{
	rs = 12345 + (uint64_t) (tag - 'A') * UINT64_C(0x9e3779b97f4a7c15);
}

/* knn_eps over KNN_EPS_ROWS rows drawn first, in order, from this program's generator */
static double
eps_knn(const float *X, int64_t n, int d, int k)
{
	int64_t		rows[KNN_EPS_ROWS];

	for (int s = 0; s < KNN_EPS_ROWS; s++)
		rows[s] = (int64_t) (unif() * n);
	return knn_eps(X, n, d, k, rows);
}

/* The CPU's answer on one data set, shared by the rows run on it. */
typedef struct cpu_ref
{
	int32_t    *l;
	uint8_t    *c;
	double		ms;				/* median call */
	int			calls;
	bool		done;
} cpu_ref;

static void
ref_free(cpu_ref *r)
{
	free(r->l);
	free(r->c);
	memset(r, 0, sizeof(*r));
}

static int	bad_rows;

/* BENCH_GPU=0: the CPU's times alone (sizing the rows on a new machine) */
static bool no_gpu;
static bool cyclic;				/* BENCH_CYCLIC=1 */
/*
 * The rows ab_rows name first with one means off, then as by default:
 * BENCH_SCREEN_AB=1 the tree's screen (GPUCLUST_DB_SCREEN=0; C, E, F),
 * BENCH_GATHER_AB=1 the tree's gathered second pass (GPUCLUST_DB_GATHER=0;
 * C, E, F), BENCH_FACES_AB=1 the grid's unions by faces first
 * (GPUCLUST_DB_FACES=0; A, B, D).  Other rows, which that means does not
 * reach, run once.
 */
static const char *ab_env,
		   *ab_what,
		   *ab_rows = "";

static const char *
index_name(gc_dbscan_gpu_index_kind k)
{
	return k == GC_DBSCAN_GPU_GRID ? "grid" : k == GC_DBSCAN_GPU_BRUTE ? "brute" :
		k == GC_DBSCAN_GPU_TREE ? "tree" : k == GC_DBSCAN_GPU_TREE_CYCLIC ? "cyclic" : "auto";
}

static double
median(double *t, int R)
{
	double		s[16];

	memcpy(s, t, sizeof(double) * R);
	qsort(s, R, sizeof(double), cmp_d);
	return s[R / 2];
}

/*
 * One row: the GPU with this index and algorithm (a warm-up, then the
 * median of R <= 16 calls; one call when the warm-up took over 2 s)
 * against the CPU (ref: computed here on first use, the median of Rcpu <=
 * 16 calls, one when the first took over 2 s).  Returns the CPU's median
 * ms (-1 when the CPU failed).
 */
static double
run(const char *tag, const char *what, const float *X, int64_t n, int d,
	double eps, int64_t min_pts, gc_dbscan_gpu_index_kind index, gc_dbscan_algorithm alg,
	int R, int Rcpu, cpu_ref *ref)
{
	gc_dbscan_params p = {.eps = eps, .min_pts = min_pts, .algorithm = alg};
	gc_dbscan_params pc = {.eps = eps, .min_pts = min_pts, .algorithm = GC_DBSCAN_UNION_FIND};
	int32_t    *lg = malloc(sizeof(int32_t) * n);
	uint8_t    *cg = malloc(n);
	gc_status	st = {0};
	gc_dbscan_gpu_index_kind used = GC_DBSCAN_GPU_AUTO;
	double		tg[16],
				tc[16];
	gc_dbscan_gpu_phases ph[16],
				pm;
	int64_t		diff = 0,
				noise = 0;
	int32_t		maxl = -1;
	double		gmed;
	char		tree_s[192] = "";

	R = R < 1 ? 1 : R > 16 ? 16 : R;
	Rcpu = Rcpu < 1 ? 1 : Rcpu > 16 ? 16 : Rcpu;
	if (no_gpu)
		goto cpu;
	/* warm-up (R > 1) */
	if (R > 1)
	{
		double		t0 = now_ms();

		if (gc_dbscan_gpu_index(NULL, X, n, d, &p, index, &used, lg, cg, &st) != GC_OK)
		{
			printf("%-2s %-34s n=%-9lld d=%-2d %s %s: GPU failed: %s\n", tag, what, (long long) n, d,
				   index_name(index), alg == GC_DBSCAN_DCLUST ? "dclust" : "uf", st.message);
			bad_rows++;
			goto out;
		}
		if (now_ms() - t0 > 2000.0)
			R = 1;
	}
	for (int r = 0; r < R; r++)
	{
		double		t0 = now_ms();

		if (gc_dbscan_gpu_index(NULL, X, n, d, &p, index, &used, lg, cg, &st) != GC_OK)
		{
			printf("%-2s %-34s n=%-9lld d=%-2d %s %s: GPU failed: %s\n", tag, what, (long long) n, d,
				   index_name(index), alg == GC_DBSCAN_DCLUST ? "dclust" : "uf", st.message);
			bad_rows++;
			goto out;
		}
		tg[r] = now_ms() - t0;
		gc_dbscan_gpu_last_phases(&ph[r]);
	}
cpu:
	if (!ref->done)
	{
		ref->l = malloc(sizeof(int32_t) * n);
		ref->c = malloc(n);
		ref->calls = 0;
		for (int r = 0; r < Rcpu; r++)
		{
			double		t0 = now_ms();

			if (gc_dbscan_cpu(NULL, X, n, d, &pc, ref->l, ref->c, &st) != GC_OK)
			{
				printf("%-2s %-34s: CPU failed: %s\n", tag, what, st.message);
				bad_rows++;
				ref_free(ref);
				goto out;
			}
			tc[r] = now_ms() - t0;
			ref->calls++;
			if (tc[0] > 2000.0)
				break;
		}
		ref->ms = median(tc, ref->calls);
		ref->done = true;
	}
	if (no_gpu)
	{
		printf("%-2s %-34s n=%-9lld d=%-2d eps=%-8.4g mp=%-4lld | CPU %9.2f ms x%d (no GPU run: BENCH_GPU=0)\n",
			   tag, what, (long long) n, d, eps, (long long) min_pts, ref->ms, ref->calls);
		goto out;
	}
	for (int64_t i = 0; i < n; i++)
	{
		diff += (ref->l[i] != lg[i]) | (ref->c[i] != cg[i]);
		noise += lg[i] == GC_NOISE;
		maxl = lg[i] > maxl ? lg[i] : maxl;
	}
	if (diff)
		bad_rows++;
	/* median GPU call and its phases */
	gmed = median(tg, R);
	pm = ph[0];
	for (int r = 0; r < R; r++)
		if (tg[r] == gmed)
			pm = ph[r];
	if (pm.tree)
		snprintf(tree_s, sizeof(tree_s), " | leaves %lld, leaf pairs %lld (%.1f a leaf), lists %.2f ms",
				 (long long) pm.ncell, (long long) pm.pairs,
				 pm.ncell > 0 ? (double) pm.pairs / (double) pm.ncell : 0.0, pm.ms_lists);
	if (pm.screened + pm.exact > 0)
		snprintf(tree_s + strlen(tree_s), sizeof(tree_s) - strlen(tree_s),
				 " | screened %lld pairs, %.3f%% exact", (long long) (pm.screened + pm.exact),
				 100.0 * (double) pm.exact / (double) (pm.screened + pm.exact));
	if (index == GC_DBSCAN_GPU_TREE_CYCLIC)
		snprintf(tree_s + strlen(tree_s), sizeof(tree_s) - strlen(tree_s),
				 " | splits in dimension order (the directory's)");
	else if (index != GC_DBSCAN_GPU_AUTO && used != index)
		snprintf(tree_s + strlen(tree_s), sizeof(tree_s) - strlen(tree_s), " | %s asked",
				 index_name(index));
	{
		double		cl = pm.ms_index + pm.ms_core + pm.ms_union + pm.ms_border;
		double		io = (double) n * d * 4 + (double) n * 5;	/* bytes up + down */

		printf("%-2s %-34s n=%-9lld d=%-2d eps=%-8.4g mp=%-4lld %-5s %-6s | GPU call %9.2f ms x%d "
			   "(upload %6.2f, cluster %8.2f = idx %6.2f core %7.2f union %7.2f border %6.2f; "
			   "number %5.2f, download %6.2f, free %5.2f; of all, cudaMalloc %5.2f) "
			   "| transfer floor %6.2f ms | CPU %9.2f ms x%d | CPU/GPU %6.2f (cluster alone %6.2f) "
			   "| clusters %d noise %lld | diff %lld%s\n",
			   tag, what, (long long) n, d, eps, (long long) min_pts, index_name(used),
			   alg == GC_DBSCAN_DCLUST ? "dclust" : "uf",
			   gmed, R, pm.ms_upload, cl, pm.ms_index, pm.ms_core, pm.ms_union, pm.ms_border,
			   pm.ms_number, pm.ms_download, pm.ms_free, pm.ms_alloc,
			   pcie_gbs > 0 ? io / (pcie_gbs * 1e6) : 0.0,
			   ref->ms, ref->calls, ref->ms / gmed, cl > 0 ? ref->ms / cl : 0.0,
			   maxl + 1, (long long) noise, (long long) diff, tree_s);
	}
out:
	fflush(stdout);
	free(lg);
	free(cg);
	return ref->done ? ref->ms : -1.0;
}

/* World cities (lon, lat) into X (2 x 200,000 floats); the row count. */
static int64_t
load_cities(float *X)
{
	FILE	   *f = popen("gzip -dc test/data/world_cities.csv.gz", "r");
	char		line[4096];
	int64_t		n = 0;

	if (f && fgets(line, sizeof(line), f))
		while (fgets(line, sizeof(line), f) != NULL && n < 200000)
		{
			char	   *c3 = strrchr(line, ','),
					   *c2,
					   *c1;

			if (!c3)
				continue;
			*c3 = 0;
			if (!(c2 = strrchr(line, ',')))
				continue;
			*c2 = 0;
			if (!(c1 = strrchr(line, ',')))
				continue;
			X[2 * n] = (float) strtod(c2 + 1, NULL);
			X[2 * n + 1] = (float) strtod(c1 + 1, NULL);
			n++;
		}
	if (f)
		pclose(f);
	return n;
}

/* run() once, or twice under an A/B: the mean off first, then the default */
static void
run_ab(const char *tag, const char *what, const float *X, int64_t n, int d,
	   double eps, int64_t min_pts, gc_dbscan_algorithm alg, int R, int Rcpu,
	   cpu_ref *ref)
{
	for (int ab = ab_env && strchr(ab_rows, tag[0]) ? 0 : 1; ab < 2; ab++)
	{
		char		w[96];

		snprintf(w, sizeof(w), "%s%s", what, ab == 0 ? ab_what : "");
		if (ab == 0)
			setenv(ab_env, "0", 1);
		run(tag, w, X, n, d, eps, min_pts, GC_DBSCAN_GPU_AUTO, alg, R, Rcpu, ref);
		if (ab == 0)
			unsetenv(ab_env);
	}
}

/*
 * Rows C, E, F: blobs (nb in [0, box]^d, moved by shift, a noise fraction
 * of uniform rows), eps_knn 30, min_pts 10; union-find and DClust on the
 * tree, the dimension-order tree (BENCH_CYCLIC=1, C and E) and the brute
 * force when asked.
 */
static void
blob_rows(char tag, const char *what, int64_t n, int d, int nb, double box,
		  double noise, float shift, bool brute)
{
	const char	t[2] = {tag, 0};
	float	   *X;
	double		eps;
	cpu_ref		ref = {0};

	seed_row(tag);
	X = blobs(n, d, nb, box, noise);
	for (int64_t i = 0; shift != 0.0f && i < n * d; i++)
		X[i] += shift;
	eps = eps_knn(X, n, d, 30);
	run_ab(t, what, X, n, d, eps, 10, GC_DBSCAN_UNION_FIND, 3, 1, &ref);
	run_ab(t, what, X, n, d, eps, 10, GC_DBSCAN_DCLUST, 3, 1, &ref);
	if (brute)
		run(t, what, X, n, d, eps, 10, GC_DBSCAN_GPU_BRUTE, GC_DBSCAN_UNION_FIND, 1, 1, &ref);
	if (cyclic && tag != 'F')
		run(t, what, X, n, d, eps, 10, GC_DBSCAN_GPU_TREE_CYCLIC, GC_DBSCAN_UNION_FIND, 3, 1,
			&ref);
	ref_free(&ref);
	free(X);
}

int
main(void)
{
	gc_cuda_device_info info;
	double		t0 = now_ms();

	setvbuf(stdout, NULL, _IOLBF, 0);
	gc_cuda_probe(0, &info);
	if (!info.usable)
	{
		printf("no usable GPU: %s\n", info.reason);
		return 1;
	}
	printf("device %s; CUDA initialisation %.1f ms; CPU threads: all\n", info.name, now_ms() - t0);
	no_gpu = getenv("BENCH_GPU") != NULL && atoi(getenv("BENCH_GPU")) == 0;
	cyclic = getenv("BENCH_CYCLIC") != NULL && atoi(getenv("BENCH_CYCLIC")) == 1;
	if (getenv("BENCH_SCREEN_AB") != NULL && atoi(getenv("BENCH_SCREEN_AB")) == 1)
	{
		ab_env = "GPUCLUST_DB_SCREEN";
		ab_what = " [exact tiles]";
		ab_rows = "CEF";
	}
	else if (getenv("BENCH_GATHER_AB") != NULL && atoi(getenv("BENCH_GATHER_AB")) == 1)
	{
		ab_env = "GPUCLUST_DB_GATHER";
		ab_what = " [by query node]";
		ab_rows = "CEF";
	}
	else if (getenv("BENCH_FACES_AB") != NULL && atoi(getenv("BENCH_FACES_AB")) == 1)
	{
		ab_env = "GPUCLUST_DB_FACES";
		ab_what = " [no faces first]";
		ab_rows = "ABD";
	}
	if (getenv("BENCH_KEEP_POOL") != NULL && atoi(getenv("BENCH_KEEP_POOL")) == 1)
	{
		/* as the GPU worker does: the pool keeps what a call frees */
		gc_cuda_keep_memory(info.total_mem);
		printf("the device's memory pool keeps what calls free (gc_cuda_keep_memory), as in the GPU worker\n");
	}
	limits();

	if (wanted("A"))
	{
		int64_t		n = 10000000;
		float	   *X;
		double		nb = 0.9 * n / 20;
		cpu_ref		ref = {0};

		seed_row('A');
		X = blobs(n, 2, 20, 100.0, 0.10);
		run_ab("A", "10M 2-d, 20 blobs + 10% noise", X, n, 2, 2.0 * sqrt(30.0 / nb), 10,
			   GC_DBSCAN_UNION_FIND, 5, 2, &ref);
		ref_free(&ref);
		free(X);
	}
	if (wanted("B"))
	{
		int64_t		n = 15600000;
		float	   *X;
		double		nb = 0.9 * n / 50;
		cpu_ref		ref = {0};

		seed_row('B');
		X = blobs(n, 2, 50, 200.0, 0.10);
		run_ab("B", "15.6M 2-d, 50 blobs + 10% noise", X, n, 2, 2.0 * sqrt(300.0 / nb), 100,
			   GC_DBSCAN_UNION_FIND, 5, 2, &ref);
		ref_free(&ref);
		free(X);
	}
	if (wanted("D") || wanted("G"))
	{
		float	   *X = malloc(sizeof(float) * 2 * 200000);
		int64_t		n = load_cities(X);
		cpu_ref		ref = {0};

		if (wanted("D"))
			run_ab("D", "world cities (lon, lat)", X, n, 2, 0.25, 10,
				   GC_DBSCAN_UNION_FIND, 9, 5, &ref);
		if (wanted("G"))
		{
			run("G", "world cities (lon, lat)", X, n, 2, 0.25, 10,
				GC_DBSCAN_GPU_TREE, GC_DBSCAN_UNION_FIND, 9, 5, &ref);
			run("G", "world cities (lon, lat)", X, n, 2, 0.25, 10,
				GC_DBSCAN_GPU_AUTO, GC_DBSCAN_DCLUST, 9, 5, &ref);
		}
		ref_free(&ref);
		free(X);
	}
	if (wanted("X"))
	{
		static const int64_t ns[] = {1000, 2000, 5000, 10000, 20000, 50000, 100000,
		200000, 500000, 1000000, 2000000};

		seed_row('X');
		for (int d = 2; d <= 3; d++)
			for (size_t i = 0; i < sizeof(ns) / sizeof(ns[0]); i++)
			{
				int64_t		n = ns[i];
				float	   *X;
				double		nb = 0.9 * n / 20;
				char		w[64];
				cpu_ref		ref = {0};

				if (d == 3 && n > 1000000)
					continue;
				X = blobs(n, d, 20, 100.0, 0.10);
				/* 2-d: 30 neighbours in a blob (see A); 3-d: the ball of
				 * radius eps holds 30 at the blob's centre density */
				snprintf(w, sizeof(w), "crossover %d-d %lldk", d, (long long) (n / 1000));
				run("X", w, X, n, d, d == 2 ? 2.0 * sqrt(30.0 / nb) :
					cbrt(30.0 / nb * pow(2.0 * 3.141592653589793, 1.5) * 3.0 / (4.0 * 3.141592653589793)),
					10, GC_DBSCAN_GPU_AUTO, GC_DBSCAN_UNION_FIND, 9, 5, &ref);
				ref_free(&ref);
				free(X);
			}
	}
	if (wanted("Y"))
	{
		static const int64_t ns[] = {5000, 20000, 50000, 100000, 200000};
		static const int ds[] = {8, 16};

		seed_row('Y');
		for (size_t a = 0; a < 2; a++)
			for (size_t i = 0; i < sizeof(ns) / sizeof(ns[0]); i++)
			{
				int64_t		n = ns[i];
				int			d = ds[a];
				float	   *X = blobs(n, d, 20, 20.0, 0.05);
				char		w[64];
				cpu_ref		ref = {0};

				snprintf(w, sizeof(w), "brute vs kd-tree %d-d %lldk", d, (long long) (n / 1000));
				run("Y", w, X, n, d, 0.8 * sqrt((double) d), 10,
					GC_DBSCAN_GPU_BRUTE, GC_DBSCAN_UNION_FIND, 5, 3, &ref);
				ref_free(&ref);
				free(X);
			}
	}
	if (wanted("C") && !getenv("BENCH_SKIP_C"))
		blob_rows('C', "1M 16-d, 20 blobs", 1000000, 16, 20, 20.0, 0.0, -10.0f,
				  getenv("BENCH_C_BRUTE") != NULL && atoi(getenv("BENCH_C_BRUTE")) == 1);
	if (wanted("E"))
		blob_rows('E', "1M 64-d, 50 blobs", 1000000, 64, 50, 20.0, 0.0, 0.0f, false);
	if (wanted("F"))
		blob_rows('F', "10M 8-d, 20 blobs + 10% noise", 10000000, 8, 20, 100.0, 0.10, 0.0f,
				  false);
	if (wanted("Z"))
	{
		static const int64_t ns[] = {5000, 20000, 50000, 100000, 200000, 500000, 1000000};
		static const int ds[] = {4, 8, 16, 32, 64};
		const char *zm = getenv("BENCH_Z_CPU_MAX");
		double		cpu_max_ms = (zm ? atof(zm) : 10.0) * 1e3;

		seed_row('Z');
		for (size_t a = 0; a < sizeof(ds) / sizeof(ds[0]); a++)
		{
			double		last_ms = -1.0;
			int64_t		last_n = 0;

			for (size_t i = 0; i < sizeof(ns) / sizeof(ns[0]); i++)
			{
				int64_t		n = ns[i];
				int			d = ds[a];
				float	   *X;
				char		w[64];
				cpu_ref		ref = {0};
				double		pred = last_ms < 0 ? 0.0 :
					last_ms * ((double) n / (double) last_n) * ((double) n / (double) last_n);

				if (pred > cpu_max_ms)
				{
					printf("Z  tree vs CPU %d-d: %lldk and above skipped (CPU predicted %.1f s > %.0f s)\n",
						   d, (long long) (n / 1000), pred / 1e3, cpu_max_ms / 1e3);
					break;
				}
				X = blobs(n, d, 20, 20.0, 0.05);
				snprintf(w, sizeof(w), "tree vs CPU %d-d %lldk", d, (long long) (n / 1000));
				last_ms = run("Z", w, X, n, d, eps_knn(X, n, d, 30), 10,
							  GC_DBSCAN_GPU_AUTO, GC_DBSCAN_UNION_FIND,
							  n <= 200000 ? 5 : 3, pred < 500.0 ? 3 : 1, &ref);
				last_n = n;
				ref_free(&ref);
				free(X);
				if (last_ms < 0)
					break;
			}
		}
	}
	printf("bench_dbscan_gpu: %.1f s; %d rows failed or differ from the CPU\n",
		   (now_ms() - t0) / 1e3, bad_rows);
	return bad_rows ? 1 : 0;
}
