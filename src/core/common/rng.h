/*
 * rng.h — the counter-based random generator shared by the CPU and GPU
 * paths: a value is a pure function of (seed, stream, counter), so the same
 * seed gives the same draws whatever the device or thread count.
 * SplitMix64's finaliser applied twice (a keyed hash of the counter).
 */
#ifndef GPUCLUST_RNG_H
#define GPUCLUST_RNG_H

#include <stdint.h>

#include "common/hostdevice.h"

GC_HD uint64_t
gc_mix64(uint64_t z)
{
	z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
	return z ^ (z >> 31);
}

/* 64 random bits for (seed, stream, counter). */
GC_HD uint64_t
gc_rng_u64(uint64_t seed, uint64_t stream, uint64_t counter)
{
	uint64_t	key = gc_mix64(seed + UINT64_C(0x9e3779b97f4a7c15) * (stream + 1));

	return gc_mix64(key ^ gc_mix64(counter + UINT64_C(0x632be59bd9b4e019)));
}

/* Uniform double in [0, 1). */
GC_HD double
gc_rng_uniform(uint64_t seed, uint64_t stream, uint64_t counter)
{
	return (double) (gc_rng_u64(seed, stream, counter) >> 11) * 0x1.0p-53;
}

#endif							/* GPUCLUST_RNG_H */
