/*
 * cupti_trace.c — a timeline of a CUDA program without nsys: loaded by the
 * driver at CUDA's start (CUDA_INJECTION64_PATH=.../libgc_cupti_trace.so),
 * it records through CUPTI's activity API every kernel, copy and memset on
 * the device and every runtime and driver API call on the host, and writes
 * them at exit to $GC_CUPTI_TRACE (default cupti_trace.txt), a line each:
 *
 *   K start end stream name        a kernel
 *   C start end stream bytes kind  a copy (kind: CUPTI's copy kind)
 *   M start end stream bytes       a memset
 *   R start end thread name        a runtime API call
 *   D start end thread name        a driver API call
 *
 * start and end in ns on CUPTI's one clock.  trace_summary.py splits the
 * file into calls and says where their time goes.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <cupti.h>

#define BUF_BYTES ((size_t) 8 << 20)

static FILE *out;

static void CUPTIAPI
buf_request(uint8_t **buf, size_t *size, size_t *max_records)
{
	*buf = aligned_alloc(ACTIVITY_RECORD_ALIGNMENT, BUF_BYTES);
	*size = *buf != NULL ? BUF_BYTES : 0;
	*max_records = 0;
}

static void
api_line(char tag, CUpti_CallbackDomain dom, const CUpti_ActivityAPI *a)
{
	const char *name = NULL;

	if (cuptiGetCallbackName(dom, a->cbid, &name) != CUPTI_SUCCESS || name == NULL)
		name = "?";
	fprintf(out, "%c %llu %llu %u %s\n", tag, (unsigned long long) a->start,
			(unsigned long long) a->end, a->threadId, name);
}

static void CUPTIAPI
buf_complete(CUcontext ctx, uint32_t stream, uint8_t *buf, size_t size, size_t valid)
{
	CUpti_Activity *r = NULL;

	(void) ctx;
	(void) stream;
	(void) size;
	while (out != NULL && cuptiActivityGetNextRecord(buf, valid, &r) == CUPTI_SUCCESS)
	{
		switch (r->kind)
		{
			case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
			case CUPTI_ACTIVITY_KIND_KERNEL:
				{
					const CUpti_ActivityKernel10 *k = (const CUpti_ActivityKernel10 *) r;

					fprintf(out, "K %llu %llu %u %s\n", (unsigned long long) k->start,
							(unsigned long long) k->end, k->streamId, k->name);
					break;
				}
			case CUPTI_ACTIVITY_KIND_MEMCPY:
				{
					const CUpti_ActivityMemcpy6 *m = (const CUpti_ActivityMemcpy6 *) r;

					fprintf(out, "C %llu %llu %u %llu %u\n", (unsigned long long) m->start,
							(unsigned long long) m->end, m->streamId,
							(unsigned long long) m->bytes, (unsigned) m->copyKind);
					break;
				}
			case CUPTI_ACTIVITY_KIND_MEMSET:
				{
					const CUpti_ActivityMemset4 *m = (const CUpti_ActivityMemset4 *) r;

					fprintf(out, "M %llu %llu %u %llu\n", (unsigned long long) m->start,
							(unsigned long long) m->end, m->streamId,
							(unsigned long long) m->bytes);
					break;
				}
			case CUPTI_ACTIVITY_KIND_RUNTIME:
				api_line('R', CUPTI_CB_DOMAIN_RUNTIME_API, (const CUpti_ActivityAPI *) r);
				break;
			case CUPTI_ACTIVITY_KIND_DRIVER:
				api_line('D', CUPTI_CB_DOMAIN_DRIVER_API, (const CUpti_ActivityAPI *) r);
				break;
			default:
				break;
		}
	}
	free(buf);
}

static void
at_exit(void)
{
	cuptiActivityFlushAll(1);
	if (out != NULL)
		fclose(out);
	out = NULL;
}

int
InitializeInjection(void)
{
	const char *path = getenv("GC_CUPTI_TRACE");

	out = fopen(path != NULL ? path : "cupti_trace.txt", "w");
	if (out == NULL)
		return 0;
	if (cuptiActivityRegisterCallbacks(buf_request, buf_complete) != CUPTI_SUCCESS ||
		cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) != CUPTI_SUCCESS ||
		cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY) != CUPTI_SUCCESS ||
		cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMSET) != CUPTI_SUCCESS ||
		cuptiActivityEnable(CUPTI_ACTIVITY_KIND_RUNTIME) != CUPTI_SUCCESS ||
		cuptiActivityEnable(CUPTI_ACTIVITY_KIND_DRIVER) != CUPTI_SUCCESS)
	{
		fprintf(stderr, "cupti_trace: CUPTI would not start\n");
		return 0;
	}
	atexit(at_exit);
	return 1;
}
