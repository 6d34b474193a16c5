/*
 * test_sysmem.c — the memory-limit readers of sysmem.c on sample trees:
 * /proc/meminfo, /proc/self/cgroup and /sys/fs/cgroup files of cgroup v1
 * (with and without a limit, nested and bind-mounted paths) and v2 ("max"
 * and numbers, nested slices, hybrid mounts), written to a temporary
 * directory; then the real system's answer, which must be a number.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gpuclust_core.h"
#include "testutil.h"

#define MB (UINT64_C(1) << 20)
#define GB (UINT64_C(1) << 30)

static char root[256];			/* the current sample tree */
static int	tree_no;

/* mkdir -p root/rel */
static void
mkdirs(const char *rel)
{
	char		path[2048];

	snprintf(path, sizeof(path), "%s/%s", root, rel);
	for (char *p = path + strlen(root) + 1; *p; p++)
		if (*p == '/')
		{
			*p = '\0';
			mkdir(path, 0755);
			*p = '/';
		}
	mkdir(path, 0755);
}

/* writes root/rel (directories created), printf-style content */
static void
put(const char *rel, const char *fmt,...)
{
	char		path[2048];
	char		dir[512];
	char	   *slash;
	FILE	   *f;
	va_list		ap;

	snprintf(dir, sizeof(dir), "%s", rel);
	slash = strrchr(dir, '/');
	if (slash)
	{
		*slash = '\0';
		mkdirs(dir);
	}
	snprintf(path, sizeof(path), "%s/%s", root, rel);
	f = fopen(path, "w");
	if (f == NULL)
	{
		fprintf(stderr, "cannot write %s: %s\n", path, strerror(errno));
		exit(2);
	}
	va_start(ap, fmt);
	vfprintf(f, fmt, ap);
	va_end(ap);
	fclose(f);
}

/* a fresh, empty sample tree under base */
static void
new_tree(const char *base)
{
	snprintf(root, sizeof(root), "%s/t%d", base, ++tree_no);
	mkdir(root, 0755);
}

/* /proc/meminfo with MemAvailable of mb MB */
static void
put_meminfo(uint64_t mb)
{
	put("proc/meminfo",
		"MemTotal:       32768000 kB\n"
		"MemFree:         1000000 kB\n"
		"MemAvailable:   %llu kB\n"
		"Buffers:          100000 kB\n",
		(unsigned long long) (mb * 1024));
}

/* a cgroup v1 memory directory: limit, usage, inactive file cache */
static void
put_v1(const char *dir, const char *limit, uint64_t usage, uint64_t inactive)
{
	char		rel[512];

	snprintf(rel, sizeof(rel), "sys/fs/cgroup/memory%s/memory.limit_in_bytes", dir);
	put(rel, "%s\n", limit);
	snprintf(rel, sizeof(rel), "sys/fs/cgroup/memory%s/memory.usage_in_bytes", dir);
	put(rel, "%llu\n", (unsigned long long) usage);
	snprintf(rel, sizeof(rel), "sys/fs/cgroup/memory%s/memory.stat", dir);
	/* the local inactive_file comes first and must not be taken */
	put(rel, "cache 1234\nrss 5678\ninactive_file 4096\nactive_file 8192\n"
		"hierarchical_memory_limit 1\ntotal_inactive_file %llu\n",
		(unsigned long long) inactive);
}

/* a cgroup v2 directory under mount ("" or "/unified") */
static void
put_v2(const char *mount, const char *dir, const char *max, uint64_t current,
	   uint64_t inactive)
{
	char		rel[512];

	snprintf(rel, sizeof(rel), "sys/fs/cgroup%s%s/memory.max", mount, dir);
	put(rel, "%s\n", max);
	snprintf(rel, sizeof(rel), "sys/fs/cgroup%s%s/memory.current", mount, dir);
	put(rel, "%llu\n", (unsigned long long) current);
	snprintf(rel, sizeof(rel), "sys/fs/cgroup%s%s/memory.stat", mount, dir);
	put(rel, "anon 1\nfile 2\nactive_file 3\ninactive_file %llu\n",
		(unsigned long long) inactive);
}

static void
test_meminfo(const char *base)
{
	char		path[512];

	new_tree(base);
	snprintf(path, sizeof(path), "%s/proc/meminfo", root);
	CHECK(gc_meminfo_available(path) == GC_MEM_UNLIMITED, "missing file");
	put_meminfo(24000);
	CHECK(gc_meminfo_available(path) == 24000 * MB, "MemAvailable");
	put("proc/meminfo", "MemTotal: 1000 kB\nMemFree: 10 kB\n");
	CHECK(gc_meminfo_available(path) == GC_MEM_UNLIMITED, "no MemAvailable line");
	/* no cgroup file at all: MemAvailable */
	put_meminfo(512);
	CHECK(gc_host_memory_at(root) == 512 * MB, "meminfo only: %llu",
		  (unsigned long long) gc_host_memory_at(root));
	/* nothing at all: no bound */
	new_tree(base);
	CHECK(gc_host_memory_at(root) == GC_MEM_UNLIMITED, "empty tree");
}

static void
test_v1(const char *base)
{
	uint64_t	r;
	char		dir[512];

	/* a docker container, v1, 3 GB limit, 1 GB used of which 200 MB inactive cache */
	new_tree(base);
	put_meminfo(24000);
	put("proc/self/cgroup",
		"12:pids:/docker/abc\n"
		"6:cpu,cpuacct:/docker/abc\n"
		"4:memory:/docker/abc\n"
		"1:name=systemd:/docker/abc\n"
		"0::/docker/abc\n");
	put_v1("", "9223372036854771712", 9 * GB, 0);
	put_v1("/docker", "9223372036854771712", 8 * GB, 0);
	put_v1("/docker/abc", "3221225472", 1 * GB, 200 * MB);
	r = gc_host_memory_at(root);
	CHECK(r == 3 * GB - (1 * GB - 200 * MB), "v1 limit: %llu", (unsigned long long) r);
	snprintf(dir, sizeof(dir), "%s/sys/fs/cgroup/memory/docker/abc", root);
	CHECK(gc_cgroup_dir_room(dir, 1) == 3 * GB - 824 * MB, "one v1 directory");
	CHECK(gc_cgroup_dir_room(dir, 2) == GC_MEM_UNLIMITED, "v2 files in a v1 directory");

	/* the same without a limit ("unlimited" as 4 kB and 64 kB page kernels write it) */
	put_v1("/docker/abc", "9223372036854771712", 1 * GB, 0);
	CHECK(gc_host_memory_at(root) == 24000 * MB, "v1 unlimited (4 kB pages)");
	put_v1("/docker/abc", "9223372036854710272", 1 * GB, 0);
	CHECK(gc_host_memory_at(root) == 24000 * MB, "v1 unlimited (64 kB pages)");

	/* a limit on the parent binds the child */
	put_v1("/docker", "2147483648", 1536 * MB, 0);
	CHECK(gc_host_memory_at(root) == 512 * MB, "v1 parent limit: %llu",
		  (unsigned long long) gc_host_memory_at(root));

	/* usage above the limit (or cache larger than usage): no room, never wrapped */
	put_v1("/docker", "9223372036854771712", 0, 0);
	put_v1("/docker/abc", "1073741824", 2 * GB, 0);
	CHECK(gc_host_memory_at(root) == 0, "v1 over the limit");
	put_v1("/docker/abc", "1073741824", 100 * MB, 300 * MB);
	CHECK(gc_host_memory_at(root) == 1 * GB, "v1 cache beyond usage");

	/* a limit smaller than MemAvailable wins, a larger one does not */
	put_v1("/docker/abc", "107374182400", 1 * GB, 0);
	CHECK(gc_host_memory_at(root) == 24000 * MB, "v1 limit above MemAvailable");

	/*
	 * No cgroup namespace: /proc/self/cgroup names the host's path, but
	 * the container sees its own cgroup at the mount point.
	 */
	new_tree(base);
	put_meminfo(24000);
	put("proc/self/cgroup", "4:memory:/docker/abc\n3:cpuset:/docker/abc\n");
	put_v1("", "3221225472", 1 * GB, 0);
	CHECK(gc_host_memory_at(root) == 2 * GB, "v1 bind-mounted container root: %llu",
		  (unsigned long long) gc_host_memory_at(root));

	/* memory mounted with other controllers in the same line */
	new_tree(base);
	put_meminfo(24000);
	put("proc/self/cgroup", "3:cpu,memory:/a/b\n2:memoryx:/zzz\n");
	put_v1("/a/b", "1073741824", 24 * MB, 0);
	put_v1("/zzz", "1", 1, 0);	/* not the memory controller */
	CHECK(gc_host_memory_at(root) == 1000 * MB, "v1 joint controllers: %llu",
		  (unsigned long long) gc_host_memory_at(root));

	/* malformed lines and files are ignored */
	new_tree(base);
	put_meminfo(100);
	put("proc/self/cgroup", "garbage\n4:memory\n4:memory:relative\n");
	put("sys/fs/cgroup/memory/memory.limit_in_bytes", "-1\n");
	CHECK(gc_host_memory_at(root) == 100 * MB, "malformed");
}

static void
test_v2(const char *base)
{
	uint64_t	r;

	/* a systemd service, nested slices, "max" on the service itself */
	new_tree(base);
	put_meminfo(24000);
	put("proc/self/cgroup", "0::/system.slice/postgresql.service\n");
	put("sys/fs/cgroup/cgroup.controllers", "cpuset cpu io memory pids\n");
	put_v2("", "/system.slice/postgresql.service", "max", 500 * MB, 100 * MB);
	CHECK(gc_host_memory_at(root) == 24000 * MB, "v2 max: %llu",
		  (unsigned long long) gc_host_memory_at(root));

	/* a number on the service */
	put_v2("", "/system.slice/postgresql.service", "4294967296", 500 * MB, 100 * MB);
	r = gc_host_memory_at(root);
	CHECK(r == 4 * GB - 400 * MB, "v2 limit: %llu", (unsigned long long) r);
	/* and a smaller one on its slice */
	put_v2("", "/system.slice", "2147483648", 1 * GB, 0);
	CHECK(gc_host_memory_at(root) == 1 * GB, "v2 parent limit");
	CHECK(gc_cgroup_room(root) == 1 * GB, "v2 room");

	/* a container with a cgroup namespace: "0::/" */
	new_tree(base);
	put_meminfo(24000);
	put("proc/self/cgroup", "0::/\n");
	put("sys/fs/cgroup/cgroup.controllers", "memory\n");
	put_v2("", "", "3221225472", 2 * GB, 0);
	CHECK(gc_host_memory_at(root) == 1 * GB, "v2 namespace root: %llu",
		  (unsigned long long) gc_host_memory_at(root));

	/* hybrid: v2 at /sys/fs/cgroup/unified without memory, v1 memory */
	new_tree(base);
	put_meminfo(24000);
	put("proc/self/cgroup", "4:memory:/user.slice\n0::/user.slice/session-1.scope\n");
	put("sys/fs/cgroup/unified/cgroup.controllers", "\n");
	put("sys/fs/cgroup/unified/user.slice/session-1.scope/cgroup.procs", "1\n");
	put_v1("/user.slice", "1073741824", 0, 0);
	CHECK(gc_host_memory_at(root) == 1 * GB, "hybrid, v1 limit");
	/* and a v2 memory.max there too: the smaller room */
	put_v2("/unified", "/user.slice", "536870912", 0, 0);
	CHECK(gc_host_memory_at(root) == 512 * MB, "hybrid, both limits");
}

static void
test_real(void)
{
	uint64_t	r = gc_host_memory_at("");
	size_t		s = gc_host_memory();

	CHECK(r > 0 && r != GC_MEM_UNLIMITED, "this machine: %llu", (unsigned long long) r);
	CHECK(s > 0 && s != SIZE_MAX, "gc_host_memory: %zu", s);
	printf("test_sysmem: this machine: %.1f MB available (cgroup room %s)\n",
		   (double) s / (double) MB,
		   gc_cgroup_room("") == GC_MEM_UNLIMITED ? "unlimited" : "limited");
}

int
main(void)
{
	char		base[] = "/tmp/gc_sysmem_XXXXXX";
	char		cmd[512];

	if (mkdtemp(base) == NULL)
	{
		perror("mkdtemp");
		return 2;
	}
	test_meminfo(base);
	test_v1(base);
	test_v2(base);
	test_real();
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", base);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", base);
	return test_summary("test_sysmem");
}
