/*
 * tf32.cuh — TF32 products on the tensor cores (mma.sync m16n8k8) and the
 * bound on their error, which the screens of the GPU k-means
 * (kmeans/kmeans_screen.cu) and DBSCAN (dbscan/dbscan_screen.cuh) use to
 * decide what the CPU's float distance decides.  Internal to cuda/.
 *
 * TF32 keeps 10 mantissa bits (u_t = 2^-11 when rounded to nearest,
 * cvt.rna).  Two modes of a dot product a.b:
 *   tf32    one mma per product: rna(a).rna(b);
 *   3xtf32  the split a = big + small (big = rna(a), small = rna(a - big),
 *           |a - big - small| <= 2^-22 |a|) and three mma per product:
 *           small.big + big.small + big.big (the small.small term dropped).
 * |computed - a.b| <= kappa ||a|| ||b|| (u = 2^-24), with
 *   tf32:   kappa = 2^-10 + 2^-22 (the two inputs' rounding)
 *                   + 4 d u (the tensor core's float accumulation: the
 *                     products are exact, the sums of each k-step are
 *                     aligned and may truncate: <= 2u per addition, taken
 *                     twice for the alignment of a k-step's terms);
 *   3xtf32: kappa = 12 u (the dropped term and the split's remainders)
 *                   + 3 * 4 d u (three accumulations).
 */
#ifndef GPUCLUST_TF32_CUH
#define GPUCLUST_TF32_CUH

#include <stdint.h>

/* kappa above for d dimensions: mode 1 tf32, 3 3xtf32. */
static inline double
gc_tf32_kappa(int mode, int d)
{
	const double u = 0x1.0p-24;

	return mode == 3 ? 12 * u + 12.0 * d * u : 0x1.0p-10 + 0x1.0p-22 + 4.0 * d * u;
}

__device__ __forceinline__ uint32_t
to_tf32(float x)
{
	uint32_t	r;

	asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
	return r;
}

/* The 3xtf32 split of x: big = rna(x), small = rna(x - big). */
__device__ __forceinline__ void
tf32_split(float x, uint32_t &big, uint32_t &small)
{
	big = to_tf32(x);
	small = to_tf32(__fsub_rn(x, __uint_as_float(big)));
}

/* d = a(16x8, row) b(8x8, col) + d, TF32 in, FP32 accumulate. */
__device__ __forceinline__ void
mma_tf32(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1)
{
	asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
				 "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
				 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
				 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

#endif							/* GPUCLUST_TF32_CUH */
