/*
 * transfer_hooks.cu — the pinned ring's test-only entry point (transfer.cu):
 * one upload and one download of a buffer of given size, checked against
 * plain copies, then the buffer's words down as flagged words
 * (gc_xfer_d2h_flagged), through the ring and as when it is busy, checked
 * against their split on the host.  Linked into the GPU tests and benchmarks only (the
 * Makefile's CU_TEST_SRCS).
 */
#define GC_TESTING 1

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/gpu.h"
#include "common/check.cuh"
#include "transfer.cuh"

static uint64_t
xs_next(uint64_t *s)
{
	uint64_t	z = (*s += UINT64_C(0x9e3779b97f4a7c15));

	z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
	return z ^ (z >> 31);
}

static double
ms_since(double t0)
{
	return gc_now_ms() - t0;
}

/* The first byte where a and b differ, or -1. */
static long long
first_diff(const unsigned char *a, const unsigned char *b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (a[i] != b[i])
			return (long long) i;
	return -1;
}

/* The n words at dev (src on the host) down as flagged words: 0 when right. */
static int
flagged1(const unsigned char *src, const unsigned char *dev, size_t n,
		 cudaStream_t s, int threads, char *msg, size_t msglen)
{
	int32_t    *values = (int32_t *) malloc(sizeof(int32_t) * (n + 1));
	uint8_t    *flags = (uint8_t *) malloc(n + 1);
	int			rc = 1;

	if (!values || !flags)
		snprintf(msg, msglen, "flagged: setup failed");
	else
	{
		values[n] = 0x5a5a5a5a;
		flags[n] = 0xa5;
		if (gc_xfer_d2h_flagged(values, flags, (const uint32_t *) dev, n, s, threads) !=
			cudaSuccess)
			snprintf(msg, msglen, "flagged: %s", cudaGetErrorString(cudaGetLastError()));
		else if (values[n] != 0x5a5a5a5a || flags[n] != 0xa5)
			snprintf(msg, msglen, "flagged: wrote past the end");
		else
		{
			rc = 0;
			for (size_t i = 0; i < n && rc == 0; i++)
			{
				uint32_t	w;

				memcpy(&w, src + i * sizeof(w), sizeof(w));
				if (values[i] != (int32_t) (w & 0x7fffffffu) - 1 || flags[i] != (w >> 31) ||
					gc_flagged_word(values[i], flags[i]) != w)
				{
					snprintf(msg, msglen, "flagged: word %zu of %zu differs", i, n);
					rc = 1;
				}
			}
		}
	}
	free(values);
	free(flags);
	return rc;
}

/* flagged1 through the ring, then as when the ring is busy */
static int
flagged(const unsigned char *src, const unsigned char *dev, size_t n,
		cudaStream_t s, int threads, char *msg, size_t msglen)
{
	int			rc = flagged1(src, dev, n, s, threads, msg, msglen);

	if (rc == 0)
	{
		gc_xfer_rings_on(false);
		rc = flagged1(src, dev, n, s, threads, msg, msglen);
		gc_xfer_rings_on(true);
		if (rc != 0)
			strncat(msg, " (the ring busy)", msglen - strlen(msg) - 1);
	}
	return rc;
}

extern "C" int
gc_xfer_test(size_t bytes, int nseg, int threads, uint64_t seed,
			 double *ms_up, double *ms_down, char *msg, size_t msglen)
{
	unsigned char *src = (unsigned char *) malloc(bytes + 1),
			   *ref = (unsigned char *) malloc(bytes + 1),
			   *dst = (unsigned char *) malloc(bytes + 1);
	unsigned char *dev = nullptr;
	cudaStream_t s = nullptr;
	gc_xfer_seg seg[GC_XFER_TEST_MAX_SEGS];
	size_t		cut[GC_XFER_TEST_MAX_SEGS + 1];
	int			rc = 1;
	long long	at;
	double		t0;

	msg[0] = '\0';
	if (nseg < 1 || nseg > GC_XFER_TEST_MAX_SEGS || !src || !ref || !dst ||
		cudaMalloc((void **) &dev, bytes + 1) != cudaSuccess ||
		cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess)
	{
		snprintf(msg, msglen, "setup failed");
		goto done;
	}
	for (size_t i = 0; i < bytes; i += 8)
	{
		uint64_t	v = xs_next(&seed);

		memcpy(src + i, &v, bytes - i < 8 ? bytes - i : 8);
	}
	memset(dst, 0xa5, bytes + 1);

	/* up through the ring; read back with one plain copy */
	t0 = gc_now_ms();
	if (gc_xfer_h2d(dev, src, bytes, s, threads) != cudaSuccess ||
		cudaStreamSynchronize(s) != cudaSuccess)
	{
		snprintf(msg, msglen, "upload: %s", cudaGetErrorString(cudaGetLastError()));
		goto done;
	}
	*ms_up = ms_since(t0);
	if (cudaMemcpy(ref, dev, bytes, cudaMemcpyDeviceToHost) != cudaSuccess)
	{
		snprintf(msg, msglen, "plain download failed");
		goto done;
	}
	if ((at = first_diff(src, ref, bytes)) >= 0)
	{
		snprintf(msg, msglen, "upload: byte %lld of %zu differs", at, bytes);
		goto done;
	}

	/* down through the ring: nseg pieces at random cuts, listed last first */
	cut[0] = 0;
	cut[nseg] = bytes;
	for (int g = 1; g < nseg; g++)
		cut[g] = (size_t) (xs_next(&seed) % (bytes + 1));
	for (int g = 1; g < nseg; g++)	/* sorted (nseg is small) */
		for (int h = g + 1; h < nseg; h++)
			if (cut[h] < cut[g])
			{
				size_t		x = cut[g];

				cut[g] = cut[h];
				cut[h] = x;
			}
	if (nseg >= 3)
		cut[2] = cut[1];		/* an empty piece among them */
	for (int g = 0; g < nseg; g++)
		seg[nseg - 1 - g] = {dst + cut[g], dev + cut[g], cut[g + 1] - cut[g]};
	t0 = gc_now_ms();
	if (gc_xfer_d2h_many(seg, nseg, s, threads) != cudaSuccess)
	{
		snprintf(msg, msglen, "download: %s", cudaGetErrorString(cudaGetLastError()));
		goto done;
	}
	*ms_down = ms_since(t0);
	if ((at = first_diff(src, dst, bytes)) >= 0)
		snprintf(msg, msglen, "download: byte %lld of %zu differs", at, bytes);
	else if (dst[bytes] != 0xa5)
		snprintf(msg, msglen, "download wrote past the end");
	else
		rc = flagged(src, dev, bytes / sizeof(uint32_t), s, threads, msg, msglen);
done:
	if (s)
		cudaStreamDestroy(s);
	cudaFree(dev);
	free(src);
	free(ref);
	free(dst);
	return rc;
}
