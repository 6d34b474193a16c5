/*
 * hostdevice.h — GC_HD marks a function the C core and the CUDA code both
 * compile: static inline in C, __host__ __device__ under nvcc.  GC_UNROLL
 * unrolls a loop fully on the GPU, where its bound is a constant.
 */
#ifndef GPUCLUST_HOSTDEVICE_H
#define GPUCLUST_HOSTDEVICE_H

#ifdef __CUDACC__
#define GC_HD __host__ __device__ __forceinline__
#else
#define GC_HD static inline
#endif

#ifdef __CUDA_ARCH__
#define GC_UNROLL _Pragma("unroll")
#else
#define GC_UNROLL
#endif

#endif							/* GPUCLUST_HOSTDEVICE_H */
