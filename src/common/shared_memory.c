/*-------------------------------------------------------------------------
 *
 * shared_memory.c
 *	  Shared memory (DSM segments) for what the GPU worker reads and writes:
 *	  the matrix ingest builds, a job's outputs.  Whether a matrix goes
 *	  there is the worker layer's to say (gc_shared_wanted).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <sys/statvfs.h>

#include "storage/dsm_impl.h"

#include "common/shared_memory.h"

/* room left in /dev/shm beside a segment of ours */
#define GC_SHM_MARGIN ((uint64) 64 << 20)

bool		(*gc_shared_wanted) (void) = NULL;

static void
shared_release(void *arg)
{
	GcShared   *s = (GcShared *) arg;

	if (s->seg != NULL)
		dsm_detach(s->seg);
	s->seg = NULL;
}

/* Whether a DSM segment of bytes fits (posix DSM lives in /dev/shm). */
static bool
shm_has_room(Size bytes)
{
	struct statvfs fs;

	if (dynamic_shared_memory_type != DSM_IMPL_POSIX)
		return true;
	if (statvfs("/dev/shm", &fs) != 0)
		return true;			/* let dsm_create say what is wrong */
	return (uint64) fs.f_bavail * fs.f_frsize >= (uint64) bytes + GC_SHM_MARGIN;
}

/* A segment of bytes, or NULL when /dev/shm or the segment slots are full. */
dsm_segment *
gc_shared_segment(Size bytes)
{
	if (!shm_has_room(bytes))
		return NULL;
	return dsm_create(Max(bytes, 1), DSM_CREATE_NULL_IF_MAXSEGMENTS);
}

void *
gc_shared_alloc(MemoryContext cxt, Size bytes, GcShared **shared)
{
	GcShared   *s;

	*shared = NULL;
	if (gc_shared_wanted == NULL || !gc_shared_wanted())
		return NULL;
	s = MemoryContextAllocZero(cxt, sizeof(GcShared));
	if ((s->seg = gc_shared_segment(bytes)) == NULL)
	{
		pfree(s);
		return NULL;
	}
	/* mapped for cxt's life, not the resource owner's */
	dsm_pin_mapping(s->seg);
	s->cb.func = shared_release;
	s->cb.arg = s;
	MemoryContextRegisterResetCallback(cxt, &s->cb);
	*shared = s;
	return dsm_segment_address(s->seg);
}

void
gc_shared_free(GcShared *shared)
{
	shared_release(shared);
}
