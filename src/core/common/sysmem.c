/*
 * sysmem.c — the host's memory: how much of it this process may still
 * allocate (the host's MemAvailable, /proc/meminfo, bounded by the room
 * left under every memory limit of the cgroups the process belongs to,
 * cgroup v1 and v2), and huge pages for large buffers (at the end).
 * The O(n^2) algorithms check their need against it before allocating
 * (a container's limit, not the host's free memory, is what the OOM killer
 * enforces).
 *
 * cgroup v2: /proc/self/cgroup has a line "0::<path>"; the directory is
 * <mount><path> with the unified hierarchy mounted at /sys/fs/cgroup (or,
 * in hybrid mode, /sys/fs/cgroup/unified).  The limit is memory.max
 * ("max": none), the usage memory.current.
 *
 * cgroup v1: a line "<id>:<controllers>:<path>" whose comma-separated
 * controllers include "memory"; the directory is
 * /sys/fs/cgroup/memory<path>.  The limit is memory.limit_in_bytes (no
 * limit reads as PAGE_COUNTER_MAX pages, 9223372036854771712 with 4 kB
 * pages: anything from 2^62 up counts as none), the usage
 * memory.usage_in_bytes.
 *
 * A limit binds the whole subtree, so every directory from the process's
 * own up to the mount point is read, and the smallest room wins.  This also
 * covers a container that sees its own cgroup mounted at the mount point
 * while /proc/self/cgroup still names the host's path (no cgroup
 * namespace): the directories that do not exist have no files and no
 * limit, and the mount point itself has the container's.
 *
 * Room = limit - (usage - inactive file cache).  Usage counts the page
 * cache, and the kernel reclaims its inactive part before it kills
 * anything (memory.stat: total_inactive_file in v1, whose usage is
 * hierarchical; inactive_file in v2, whose statistics are), as
 * MemAvailable counts reclaimable cache as available; container runtimes
 * (docker stats, the kubelet's working set) subtract the same.  Active
 * cache is not subtracted: the estimate errs on the side of refusing.
 *
 * Every reader takes a root directory prepended to the absolute paths
 * above ("" for the real system), so the unit test (test/unit/
 * test_sysmem.c) runs them on sample trees.  Plain C, no allocation
 * beyond the stack; unreadable or malformed files count as no bound
 * (GC_MEM_UNLIMITED).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/core.h"

/* from this value up, a cgroup v1 limit means "no limit" */
#define V1_UNLIMITED_FROM (UINT64_C(1) << 62)

#define PATH_LEN 4096

/* Parses a decimal number of bytes at s (leading spaces allowed). */
static bool
parse_u64(const char *s, uint64_t *out)
{
	char	   *end;
	unsigned long long v;

	while (*s == ' ' || *s == '\t')
		s++;
	if (*s < '0' || *s > '9')
		return false;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno != 0 || (*end != '\0' && *end != '\n' && *end != ' '))
		return false;
	*out = (uint64_t) v;
	return true;
}

/* The first line of a file, without its newline; false if unreadable. */
static bool
read_line(const char *path, char *buf, size_t len)
{
	FILE	   *f = fopen(path, "r");
	bool		ok;

	if (f == NULL)
		return false;
	ok = fgets(buf, (int) len, f) != NULL;
	fclose(f);
	if (ok)
		buf[strcspn(buf, "\n")] = '\0';
	return ok;
}

uint64_t
gc_meminfo_available(const char *path)
{
	FILE	   *f = fopen(path, "r");
	char		line[256];
	uint64_t	avail = GC_MEM_UNLIMITED;

	if (f == NULL)
		return GC_MEM_UNLIMITED;
	while (fgets(line, sizeof(line), f) != NULL)
	{
		unsigned long long kb;

		if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1)
		{
			avail = kb >= UINT64_MAX / 1024 ? GC_MEM_UNLIMITED : (uint64_t) kb * 1024;
			break;
		}
	}
	fclose(f);
	return avail;
}

/* The value of key in a memory.stat file ("key value" lines), if any. */
static bool
stat_value(const char *path, const char *key, uint64_t *out)
{
	FILE	   *f = fopen(path, "r");
	char		line[256];
	size_t		klen = strlen(key);
	bool		found = false;

	if (f == NULL)
		return false;
	while (!found && fgets(line, sizeof(line), f) != NULL)
		found = strncmp(line, key, klen) == 0 && line[klen] == ' ' &&
			parse_u64(line + klen + 1, out);
	fclose(f);
	return found;
}

uint64_t
gc_cgroup_dir_room(const char *dir, int version)
{
	char		path[PATH_LEN];
	char		line[128];
	uint64_t	limit,
				usage = 0,
				inactive;

	snprintf(path, sizeof(path), "%s/%s", dir,
			 version == 1 ? "memory.limit_in_bytes" : "memory.max");
	if (!read_line(path, line, sizeof(line)) || !parse_u64(line, &limit))
		return GC_MEM_UNLIMITED;	/* no file, "max", or unreadable */
	if (version == 1 && limit >= V1_UNLIMITED_FROM)
		return GC_MEM_UNLIMITED;

	snprintf(path, sizeof(path), "%s/%s", dir,
			 version == 1 ? "memory.usage_in_bytes" : "memory.current");
	if (read_line(path, line, sizeof(line)))
		parse_u64(line, &usage);

	snprintf(path, sizeof(path), "%s/memory.stat", dir);
	if (!(version == 1 && stat_value(path, "total_inactive_file", &inactive)) &&
		!stat_value(path, "inactive_file", &inactive))
		inactive = 0;
	usage = inactive < usage ? usage - inactive : 0;

	return limit > usage ? limit - usage : 0;
}

/*
 * The smallest room in the directories from <mount><cgpath> up to <mount>
 * (cgpath absolute, "/" for the mount point itself).
 */
static uint64_t
subtree_room(const char *mount, const char *cgpath, int version)
{
	char		dir[PATH_LEN];
	size_t		base = strlen(mount);
	uint64_t	room = GC_MEM_UNLIMITED;

	if (snprintf(dir, sizeof(dir), "%s%s", mount, cgpath) >= (int) sizeof(dir))
		return GC_MEM_UNLIMITED;
	for (;;)
	{
		size_t		len = strlen(dir);
		uint64_t	r;
		char	   *slash;

		/* no trailing slash ("/" alone leaves the mount point) */
		while (len > base && dir[len - 1] == '/')
			dir[--len] = '\0';
		r = gc_cgroup_dir_room(dir, version);
		if (r < room)
			room = r;
		if (len <= base)
			break;
		slash = strrchr(dir + base, '/');
		if (slash == NULL)
			dir[base] = '\0';
		else
			*slash = '\0';
	}
	return room;
}

/* Whether the comma-separated list has the item name. */
static bool
has_item(const char *list, size_t len, const char *name)
{
	size_t		nlen = strlen(name);
	const char *p = list,
			   *end = list + len;

	while (p < end)
	{
		const char *comma = memchr(p, ',', (size_t) (end - p));
		size_t		ilen = (size_t) ((comma ? comma : end) - p);

		if (ilen == nlen && memcmp(p, name, nlen) == 0)
			return true;
		p += ilen + 1;
	}
	return false;
}

/* Whether root/rel exists. */
static bool
exists(const char *root, const char *rel)
{
	char		path[PATH_LEN];

	snprintf(path, sizeof(path), "%s%s", root, rel);
	return access(path, F_OK) == 0;
}

uint64_t
gc_cgroup_room(const char *root)
{
	char		path[PATH_LEN];
	char		line[PATH_LEN];
	FILE	   *f;
	uint64_t	room = GC_MEM_UNLIMITED;

	snprintf(path, sizeof(path), "%s/proc/self/cgroup", root);
	f = fopen(path, "r");
	if (f == NULL)
		return GC_MEM_UNLIMITED;
	while (fgets(line, sizeof(line), f) != NULL)
	{
		char	   *c1 = strchr(line, ':'),
				   *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
		char		mount[PATH_LEN];
		int			version;
		uint64_t	r;

		if (c2 == NULL)
			continue;
		c2[1 + strcspn(c2 + 1, "\n")] = '\0';
		if (c2[1] != '/')
			continue;			/* not an absolute path */
		if (c1 - line == 1 && line[0] == '0' && c2 == c1 + 1)
		{
			/* v2: "0::/path", at /sys/fs/cgroup or, hybrid, .../unified */
			version = 2;
			snprintf(mount, sizeof(mount), "%s/sys/fs/cgroup%s", root,
					 exists(root, "/sys/fs/cgroup/cgroup.controllers") ||
					 !exists(root, "/sys/fs/cgroup/unified") ? "" : "/unified");
		}
		else if (has_item(c1 + 1, (size_t) (c2 - c1 - 1), "memory"))
		{
			version = 1;
			snprintf(mount, sizeof(mount), "%s/sys/fs/cgroup/memory", root);
		}
		else
			continue;
		r = subtree_room(mount, c2 + 1, version);
		if (r < room)
			room = r;
	}
	fclose(f);
	return room;
}

uint64_t
gc_host_memory_at(const char *root)
{
	char		path[PATH_LEN];
	uint64_t	avail,
				room;

	snprintf(path, sizeof(path), "%s/proc/meminfo", root);
	avail = gc_meminfo_available(path);
	if (avail == GC_MEM_UNLIMITED && root[0] == '\0')
	{
		/* no MemAvailable (kernels before 3.14): free pages */
		long		pages = sysconf(_SC_AVPHYS_PAGES);
		long		psize = sysconf(_SC_PAGESIZE);

		if (pages > 0 && psize > 0)
			avail = (uint64_t) pages * (uint64_t) psize;
	}
	room = gc_cgroup_room(root);
	return room < avail ? room : avail;
}

size_t
gc_host_memory(void)
{
	uint64_t	avail = gc_host_memory_at("");

	return avail >= SIZE_MAX ? SIZE_MAX : (size_t) avail;
}

void
gc_advise_huge_pages(void *p, size_t bytes)
{
#ifdef MADV_HUGEPAGE
	uintptr_t	page,
				start,
				end;

	if (bytes < GC_HUGE_PAGES_MIN)
		return;
	page = (uintptr_t) sysconf(_SC_PAGESIZE);
	start = ((uintptr_t) p + page - 1) & ~(page - 1);
	end = ((uintptr_t) p + bytes) & ~(page - 1);
	if (end > start)
		(void) madvise((void *) start, end - start, MADV_HUGEPAGE);
#else
	(void) p;
	(void) bytes;
#endif
}
