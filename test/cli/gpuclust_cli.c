/*
 * gpuclust_cli.c — a command-line driver over the clustering core, for tests
 * and benchmarks on machines without PostgreSQL.
 *
 *   gpuclust-cli dbscan --input FILE [--dim D] --eps E --min-pts M
 *   gpuclust-cli kmeans --input FILE [--dim D] --k K [--max-iter N] [--tol T]
 *                       [--init k-means++ (or k-means||, random, auto)] [--n-init N] [--seed S]
 *   common options:     [--threads T] [--labels OUT] [--repeat R]
 *                       [--cols C1,C2,...]  (CSV only: 0-based columns to use)
 *                       [--centroids OUT]   (k-means: k*d float32, raw)
 *                       [--core OUT]        (DBSCAN: n uint8 core flags, raw)
 *
 * Input: raw float32, row-major (needs --dim D), or a .csv / .csv.gz file
 * (a non-numeric first line is taken for a header; quoted fields are allowed;
 * without --cols every column must be numeric).
 *
 * Output: one JSON line on stdout, e.g.
 *   {"algo":"dbscan","n":1000000,"d":2,"threads":2,"eps":0.002,"min_pts":10,
 *    "clusters":1234,"noise":5678,"core":900000,"ms":812.345,"ms_all":[...]}
 * "ms" is the best wall time of the core call over --repeat runs (input
 * reading and label writing excluded); "ms_all" lists every run.
 * Exit status: 0 ok, 1 core error (message on stderr), 2 usage or I/O error.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <stdarg.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "gpuclust_core.h"

static void
usage(void)
{
	fprintf(stderr,
			"usage:\n"
			"  gpuclust-cli dbscan --input FILE [--dim D] --eps E --min-pts M [options]\n"
			"  gpuclust-cli kmeans --input FILE [--dim D] --k K [--max-iter N] [--tol T]\n"
			"               [--init k-means++ (or k-means||, random, auto)] [--n-init N] [--seed S] [options]\n"
			"options: --threads T (0 = all cores)  --repeat R  --labels OUT (int32 raw)\n"
			"         --cols C1,C2,... (CSV: 0-based columns)  --centroids OUT (k-means,\n"
			"         float32 raw)  --core OUT (DBSCAN, uint8 raw)\n"
			"input:   raw float32 row-major with --dim D, or .csv / .csv.gz\n");
	exit(2);
}

static void
die(const char *fmt,...)
{
	va_list		ap;

	va_start(ap, fmt);
	fprintf(stderr, "gpuclust-cli: ");
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	exit(2);
}

static double
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int
ends_with(const char *s, const char *suffix)
{
	size_t		ls = strlen(s),
				lx = strlen(suffix);

	return ls >= lx && strcasecmp(s + ls - lx, suffix) == 0;
}

/* ---------------------------------------------------------------- input */

typedef struct matrix
{
	float	   *x;
	int64_t		n;
	int			d;
} matrix;

static void
read_raw(const char *path, int d, matrix *m)
{
	FILE	   *f = fopen(path, "rb");
	long long	bytes;
	size_t		got;

	if (d <= 0)
		die("raw float32 input needs --dim D (D >= 1)");
	if (f == NULL)
		die("cannot open %s: %s", path, strerror(errno));
	if (fseeko(f, 0, SEEK_END) != 0 || (bytes = ftello(f)) < 0)
		die("cannot size %s", path);
	rewind(f);
	if (bytes % ((long long) sizeof(float) * d) != 0)
		die("%s: %lld bytes is not a whole number of %d-float rows", path, bytes, d);
	m->d = d;
	m->n = bytes / ((long long) sizeof(float) * d);
	m->x = malloc(bytes > 0 ? (size_t) bytes : 1);
	if (m->x == NULL)
		die("out of memory reading %s", path);
	got = fread(m->x, 1, (size_t) bytes, f);
	if ((long long) got != bytes)
		die("short read on %s", path);
	fclose(f);
}

/* Splits one CSV line in place into fields (handles "quoted, fields"). */
static int
split_csv(char *line, char **fields, int maxf)
{
	int			nf = 0;
	char	   *p = line;

	for (;;)
	{
		char	   *out,
				   *start;

		if (nf == maxf)
			die("more than %d CSV columns", maxf);
		if (*p == '"')
		{
			p++;
			start = out = p;
			for (;;)
			{
				if (*p == '\0')
					break;
				if (*p == '"')
				{
					if (p[1] == '"')
					{
						*out++ = '"';
						p += 2;
						continue;
					}
					p++;
					break;
				}
				*out++ = *p++;
			}
			while (*p && *p != ',')
				p++;
			fields[nf++] = start;
			if (*p == ',')
			{
				*out = '\0';
				p++;
				continue;
			}
			*out = '\0';
			break;
		}
		start = p;
		while (*p && *p != ',')
			p++;
		fields[nf++] = start;
		if (*p == ',')
		{
			*p++ = '\0';
			continue;
		}
		break;
	}
	return nf;
}

static int
parse_float(const char *s, float *out)
{
	char	   *end;
	double		v;

	while (isspace((unsigned char) *s))
		s++;
	if (*s == '\0')
		return 0;
	errno = 0;
	v = strtod(s, &end);
	while (isspace((unsigned char) *end))
		end++;
	if (*end != '\0' || end == s)
		return 0;
	*out = (float) v;
	return 1;
}

#define MAX_COLS 4096

static void
read_csv(const char *path, const int *cols, int ncols, matrix *m)
{
	FILE	   *f;
	char	   *line = NULL;
	size_t		cap = 0;
	ssize_t		len;
	char	  **fields = malloc(sizeof(char *) * MAX_COLS);
	int64_t		rows_cap = 1024,
				lineno = 0;
	int			gz = ends_with(path, ".gz");

	if (gz)
	{
		char	   *cmd;

		if (asprintf(&cmd, "gzip -dc '%s'", path) < 0)
			die("out of memory");
		f = popen(cmd, "r");
		free(cmd);
	}
	else
		f = fopen(path, "r");
	if (f == NULL)
		die("cannot open %s: %s", path, strerror(errno));

	m->n = 0;
	m->d = ncols;				/* 0 until the first data line when no --cols */
	m->x = NULL;
	while ((len = getline(&line, &cap, f)) >= 0)
	{
		int			nf,
					d;
		float		v;

		lineno++;
		while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
			line[--len] = '\0';
		if (len == 0)
			continue;
		nf = split_csv(line, fields, MAX_COLS);
		if (m->n == 0 && m->x == NULL)
		{
			/* header? the first used field is not a number */
			int			c0 = ncols > 0 ? cols[0] : 0;

			if (c0 < nf && !parse_float(fields[c0], &v))
			{
				if (lineno == 1)
					continue;
			}
			if (ncols == 0)
				m->d = nf;
			if (m->d <= 0)
				die("%s: no columns", path);
			m->x = malloc(sizeof(float) * rows_cap * m->d);
			if (m->x == NULL)
				die("out of memory");
		}
		d = m->d;
		if (m->n == rows_cap)
		{
			rows_cap *= 2;
			m->x = realloc(m->x, sizeof(float) * rows_cap * d);
			if (m->x == NULL)
				die("out of memory");
		}
		for (int j = 0; j < d; j++)
		{
			int			c = ncols > 0 ? cols[j] : j;

			if (ncols == 0 && nf != d)
				die("%s:%lld: %d columns, expected %d", path, (long long) lineno, nf, d);
			if (c >= nf)
				die("%s:%lld: no column %d", path, (long long) lineno, c);
			if (!parse_float(fields[c], &m->x[m->n * d + j]))
				die("%s:%lld: column %d is not a number: \"%s\"", path,
					(long long) lineno, c, fields[c]);
		}
		m->n++;
	}
	free(line);
	free(fields);
	if (gz)
	{
		if (pclose(f) != 0)
			die("gzip -dc %s failed", path);
	}
	else
		fclose(f);
	if (m->x == NULL)
	{
		if (m->d <= 0)
			m->d = 1;
		m->x = malloc(sizeof(float));
	}
}

static void
write_file(const char *path, const void *data, size_t bytes)
{
	FILE	   *f = fopen(path, "wb");

	if (f == NULL)
		die("cannot create %s: %s", path, strerror(errno));
	if (bytes > 0 && fwrite(data, 1, bytes, f) != bytes)
		die("short write on %s", path);
	if (fclose(f) != 0)
		die("cannot write %s: %s", path, strerror(errno));
}

static void *
xmalloc(size_t bytes)
{
	void	   *p = malloc(bytes > 0 ? bytes : 1);

	if (p == NULL)
		die("out of memory (%zu bytes)", bytes);
	return p;
}

/* ---------------------------------------------------------------- main */

static long long
arg_ll(const char *opt, const char *v)
{
	char	   *end;
	long long	x;

	errno = 0;
	x = strtoll(v, &end, 10);
	if (errno != 0 || *end != '\0' || end == v)
		die("%s: not an integer: %s", opt, v);
	return x;
}

static double
arg_d(const char *opt, const char *v)
{
	char	   *end;
	double		x;

	errno = 0;
	x = strtod(v, &end);
	if (errno != 0 || *end != '\0' || end == v)
		die("%s: not a number: %s", opt, v);
	return x;
}

static void
print_times(const double *ms, int repeat)
{
	double		best = ms[0];

	for (int r = 1; r < repeat; r++)
		if (ms[r] < best)
			best = ms[r];
	printf("\"ms\":%.3f,\"ms_all\":[", best);
	for (int r = 0; r < repeat; r++)
		printf("%s%.3f", r ? "," : "", ms[r]);
	printf("]}\n");
}

int
main(int argc, char **argv)
{
	const char *algo,
			   *input = NULL,
			   *labels_out = NULL,
			   *centroids_out = NULL,
			   *core_out = NULL,
			   *init_name = "k-means++";
	int			dim = 0,
				threads = 0,
				repeat = 1,
				ncols = 0;
	int			cols[MAX_COLS];
	double		eps = -1;
	long long	min_pts = -1;
	gc_kmeans_params kp = {.k = -1, .max_iter = 300, .tol = 1e-4,
	.init = GC_INIT_KMEANSPP, .n_init = 1, .seed = 0};
	matrix		m = {0};
	gc_ctx		ctx = {0};
	gc_status	st = {GC_OK, ""};
	double	   *ms;
	int			is_dbscan;

	if (argc < 2 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0)
		usage();
	algo = argv[1];
	if (strcmp(algo, "dbscan") == 0)
		is_dbscan = 1;
	else if (strcmp(algo, "kmeans") == 0)
		is_dbscan = 0;
	else
	{
		fprintf(stderr, "gpuclust-cli: unknown command \"%s\"\n", algo);
		usage();
	}

	for (int i = 2; i < argc; i++)
	{
		const char *o = argv[i],
				   *v;

		if (strcmp(o, "-h") == 0 || strcmp(o, "--help") == 0)
			usage();
		if (i + 1 >= argc)
			die("%s needs a value", o);
		v = argv[++i];
		if (strcmp(o, "--input") == 0)
			input = v;
		else if (strcmp(o, "--dim") == 0)
			dim = (int) arg_ll(o, v);
		else if (strcmp(o, "--eps") == 0)
			eps = arg_d(o, v);
		else if (strcmp(o, "--min-pts") == 0)
			min_pts = arg_ll(o, v);
		else if (strcmp(o, "--k") == 0)
			kp.k = (int) arg_ll(o, v);
		else if (strcmp(o, "--max-iter") == 0)
			kp.max_iter = (int) arg_ll(o, v);
		else if (strcmp(o, "--tol") == 0)
			kp.tol = arg_d(o, v);
		else if (strcmp(o, "--init") == 0)
		{
			init_name = v;
			if (strcasecmp(v, "k-means++") == 0 || strcasecmp(v, "kmeans++") == 0)
				kp.init = GC_INIT_KMEANSPP;
			else if (strcasecmp(v, "random") == 0)
				kp.init = GC_INIT_RANDOM;
			else if (strcasecmp(v, "k-means||") == 0)
				kp.init = GC_INIT_KMEANS_PARALLEL;
			else if (strcasecmp(v, "auto") == 0)
				kp.init = GC_INIT_AUTO;
			else
				die("--init: k-means++, k-means||, random or auto, not %s", v);
		}
		else if (strcmp(o, "--n-init") == 0)
			kp.n_init = (int) arg_ll(o, v);
		else if (strcmp(o, "--seed") == 0)
			kp.seed = (uint64_t) arg_ll(o, v);
		else if (strcmp(o, "--threads") == 0)
			threads = (int) arg_ll(o, v);
		else if (strcmp(o, "--labels") == 0)
			labels_out = v;
		else if (strcmp(o, "--centroids") == 0)
			centroids_out = v;
		else if (strcmp(o, "--core") == 0)
			core_out = v;
		else if (strcmp(o, "--repeat") == 0)
			repeat = (int) arg_ll(o, v);
		else if (strcmp(o, "--cols") == 0)
		{
			char	   *s = strdup(v),
					   *tok,
					   *save = NULL;

			for (tok = strtok_r(s, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
			{
				long long	c = arg_ll(o, tok);

				if (c < 0 || ncols == MAX_COLS)
					die("--cols: bad column list %s", v);
				cols[ncols++] = (int) c;
			}
			free(s);
		}
		else
			die("unknown option %s", o);
	}
	if (input == NULL)
		die("--input FILE is required");
	if (repeat < 1)
		die("--repeat must be >= 1");
	if (threads < 0)
		die("--threads must be >= 0");
	if (is_dbscan && (eps < 0 || min_pts < 0))
		die("dbscan needs --eps and --min-pts");
	if (!is_dbscan && kp.k < 0)
		die("kmeans needs --k");

	if (ends_with(input, ".csv") || ends_with(input, ".csv.gz"))
	{
		read_csv(input, cols, ncols, &m);
		if (dim > 0 && dim != m.d)
			die("--dim %d but the CSV has %d columns", dim, m.d);
	}
	else
	{
		if (ncols > 0)
			die("--cols applies to CSV input only");
		read_raw(input, dim, &m);
	}

	ctx.n_threads = threads;
	ms = xmalloc(sizeof(double) * repeat);

	if (is_dbscan)
	{
		gc_dbscan_params dp = {.eps = eps, .min_pts = min_pts};
		int32_t    *labels = xmalloc(sizeof(int32_t) * (size_t) m.n);
		uint8_t    *is_core = xmalloc((size_t) m.n);
		int64_t		noise = 0,
					ncore = 0;
		int32_t		maxlab = -1;

		for (int r = 0; r < repeat; r++)
		{
			double		t0 = now_ms();
			gc_code		rc = gc_dbscan_cpu(&ctx, m.x, m.n, m.d, &dp, labels, is_core, &st);

			ms[r] = now_ms() - t0;
			if (rc != GC_OK)
			{
				fprintf(stderr, "gpuclust-cli: dbscan failed (code %d): %s\n",
						(int) rc, st.message);
				return 1;
			}
		}
		for (int64_t i = 0; i < m.n; i++)
		{
			if (labels[i] == GC_NOISE)
				noise++;
			else if (labels[i] > maxlab)
				maxlab = labels[i];
			ncore += is_core[i] != 0;
		}
		if (labels_out)
			write_file(labels_out, labels, sizeof(int32_t) * (size_t) m.n);
		if (core_out)
			write_file(core_out, is_core, (size_t) m.n);
		printf("{\"algo\":\"dbscan\",\"n\":%lld,\"d\":%d,\"threads\":%d,"
			   "\"eps\":%.9g,\"min_pts\":%lld,\"clusters\":%d,\"noise\":%lld,"
			   "\"core\":%lld,",
			   (long long) m.n, m.d, gc_threads(&ctx), eps, min_pts,
			   (int) (maxlab + 1), (long long) noise, (long long) ncore);
		print_times(ms, repeat);
	}
	else
	{
		int32_t    *labels = xmalloc(sizeof(int32_t) * (size_t) m.n);
		double	   *dist = xmalloc(sizeof(double) * (size_t) m.n);
		float	   *cent = xmalloc(sizeof(float) * (size_t) (kp.k > 0 ? kp.k : 1) * m.d);
		gc_kmeans_result res = {.labels = labels, .distance = dist, .centroids = cent};

		for (int r = 0; r < repeat; r++)
		{
			double		t0 = now_ms();
			gc_code		rc = gc_kmeans_cpu(&ctx, m.x, m.n, m.d, &kp, &res, &st);

			ms[r] = now_ms() - t0;
			if (rc != GC_OK)
			{
				fprintf(stderr, "gpuclust-cli: kmeans failed (code %d): %s\n",
						(int) rc, st.message);
				return 1;
			}
		}
		if (labels_out)
			write_file(labels_out, labels, sizeof(int32_t) * (size_t) m.n);
		if (centroids_out)
			write_file(centroids_out, cent, sizeof(float) * (size_t) kp.k * m.d);
		printf("{\"algo\":\"kmeans\",\"n\":%lld,\"d\":%d,\"threads\":%d,"
			   "\"k\":%d,\"init\":\"%s\",\"n_init\":%d,\"max_iter\":%d,\"tol\":%.9g,"
			   "\"seed\":%llu,\"inertia\":%.10g,\"iterations\":%d,\"converged\":%s,",
			   (long long) m.n, m.d, gc_threads(&ctx), kp.k, init_name, kp.n_init,
			   kp.max_iter, kp.tol, (unsigned long long) kp.seed, res.inertia,
			   res.iterations, res.converged ? "true" : "false");
		print_times(ms, repeat);
	}
	return 0;
}
