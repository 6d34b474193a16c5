/*
 * dbscan_number.cu — the last phase of the GPU DBSCAN: clusters numbered 0,
 * 1, 2 ... in order of their lowest input row, as the CPU numbers them, and
 * the labels and core flags brought back to the host.
 *
 * From rp (each position's cluster root, or -1): an atomicMin of the input
 * row per root, a flag on each cluster's first row, a CUB exclusive scan of
 * the flags; a row's label is the scan at its root's first row.  The
 * download goes through the pinned ring (transfer.cu); a slab of a split
 * call keeps both on its GPU (db_out).
 */
#include <cub/device/device_scan.cuh>

#include "dbscan_gpu.cuh"
#include "common/transfer.cuh"

/*
 * rootOfRow by input row, and minrow[r] = the least row of root r.
 * rootOfRow holds a row's root and core flag as one flagged word
 * (transfer.cuh: the flag in bit 31, the root plus one below), so that
 * these scattered writes are whole words and k_fin3 writes the flags in
 * row order.  Neighbouring positions mostly share a root (points are in
 * cell order): db_warp_min makes one atomic per root and warp.
 */
__global__ void
k_fin1(const int *__restrict__ rp, const int *__restrict__ perm,
	   const uint8_t *__restrict__ core, int n, int *rootOfRow, int *minrow)
{
	int			pos = blockIdx.x * blockDim.x + threadIdx.x;
	int			row = INT32_MAX,
				r = -1;

	if (pos < n)
	{
		row = perm ? perm[pos] : pos;
		r = rp[pos];
		rootOfRow[row] = (int) gc_flagged_word(r, core[pos] != 0);
	}
	/* every lane takes part: blockDim is a multiple of 32 */
	db_warp_min(minrow, r, row);
}

__global__ void
k_fin2(const int *__restrict__ rootOfRow, const int *__restrict__ minrow,
	   int n, int *flag)
{
	int			row = blockIdx.x * blockDim.x + threadIdx.x;

	if (row < n)
	{
		int			r = gc_flagged_value((uint32_t) rootOfRow[row]);

		flag[row] = r >= 0 && minrow[r] == row;
	}
}

/*
 * Each row's label and core flag: into labels and coreRow, or, for the
 * download, into packed (non-NULL) as one flagged word (the label plus one
 * and the flag in bit 31: gc_xfer_d2h_flagged).
 */
__global__ void
k_fin3(const int *__restrict__ rootOfRow, const int *__restrict__ minrow,
	   const int *__restrict__ idx, int n, int32_t *labels, uint8_t *coreRow,
	   uint32_t *packed)
{
	int			row = blockIdx.x * blockDim.x + threadIdx.x;

	if (row < n)
	{
		const uint32_t v = (uint32_t) rootOfRow[row];
		const int	r = gc_flagged_value(v);
		const int32_t label = r < 0 ? GC_NOISE : idx[minrow[r]];

		if (packed != nullptr)
			packed[row] = gc_flagged_word(label, gc_flagged_flag(v));
		else
		{
			labels[row] = label;
			coreRow[row] = gc_flagged_flag(v);
		}
	}
}

gc_code
db_exclusive_sum(db_dev &D, const int *in, int *out, int64_t n, gc_status *st)
{
	size_t		bytes = 0;

	DB_CK(cub::DeviceScan::ExclusiveSum(nullptr, bytes, in, out, (int) n, D.s));
	DB_CK(D.scratch(bytes));
	bytes = D.cub_bytes;
	DB_CK(cub::DeviceScan::ExclusiveSum(D.cub_tmp, bytes, in, out, (int) n, D.s));
	return GC_OK;
}

gc_code
db_finish(db_dev &D, int n, const int *rp, const int *perm,
		  const uint8_t *core, const db_out &out, gc_status *st)
{
	int		   *rootOfRow,
			   *minrow,
			   *flag,
			   *idx;
	double		t0 = gc_now_ms();

	DB_ALLOC(rootOfRow, n);
	DB_ALLOC(minrow, n);
	DB_ALLOC(flag, n);
	DB_ALLOC(idx, n);
	DB_CK(gc_launch(k_fill, n, DB_THREADS, DB_THREADS, D.s, minrow, n, INT32_MAX));
	DB_CK(gc_launch(k_fin1, n, DB_THREADS, DB_THREADS, D.s, rp, perm, core, n,
					rootOfRow, minrow));
	DB_CK(gc_launch(k_fin2, n, DB_THREADS, DB_THREADS, D.s, rootOfRow,
					(const int *) minrow, n, flag));
	gc_code		rc = db_exclusive_sum(D, flag, idx, n, st);

	if (rc != GC_OK)
		return rc;
	/* the flags are spent once scanned: a download packs the rows into them */
	DB_CK(gc_launch(k_fin3, n, DB_THREADS, DB_THREADS, D.s, rootOfRow,
					(const int *) minrow, (const int *) idx, n, out.labels,
					out.is_core, out.device ? nullptr : (uint32_t *) flag));
	if (out.device)
	{
		/* the clusters: the scan's last value and the last flag */
		int			last[2];

		DB_CK(cudaMemcpyAsync(&last[0], idx + n - 1, sizeof(int), cudaMemcpyDeviceToHost, D.s));
		DB_CK(cudaMemcpyAsync(&last[1], flag + n - 1, sizeof(int), cudaMemcpyDeviceToHost, D.s));
		DB_CK(cudaStreamSynchronize(D.s));
		*out.clusters = last[0] + last[1];
		db_phases.ms_number = gc_now_ms() - t0;
		return GC_OK;
	}
	DB_CK(cudaStreamSynchronize(D.s));
	db_phases.ms_number = gc_now_ms() - t0;
	t0 = gc_now_ms();
	DB_CK(gc_xfer_d2h_flagged(out.labels, out.is_core, (const uint32_t *) flag,
							  (size_t) n, D.s, D.host_threads));
	db_phases.ms_download = gc_now_ms() - t0;
	return GC_OK;
}
