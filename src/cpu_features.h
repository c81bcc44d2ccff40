/*
 * cpu_features.h - which SIMD path this process runs (cpu_features.c).
 * Not installed.
 */
#ifndef PYLAYOUT_CPU_FEATURES_H
#define PYLAYOUT_CPU_FEATURES_H

#include "kernels.h"

/* Instruction-set extensions the kernels use, as bits. */
enum {
    PL_CPU_AVX2 = 1u << 0,
    PL_CPU_AVX512F = 1u << 1,
    PL_CPU_AVX512BW = 1u << 2,
    PL_CPU_AVX512VBMI = 1u << 3, /* byte permutes: gather_x86.c's 1-byte kernel of the AVX-512 table */
};

/* The PL_CPU_* bits this CPU (and its OS) supports; 0 off x86-64. */
unsigned _pylayout_cpu_features(void);

/* The kernel table for this process: the best path the CPU supports, at
 * most the one PYLAYOUT_SIMD names (scalar, sse2, avx2, avx512; for testing
 * the fallbacks: a path the CPU lacks is never chosen, an unknown name caps
 * nothing).  The first call decides; thread-safe. */
const _pylayout_kernels *_pylayout_kernels_get(void);

/* Whether transposes built in a buffer (plan.c's stream_out units) should
 * prefetch the src rows they read in software: true except on Intel cores,
 * whose L2 streamer follows the few dozen rows of such a unit by itself
 * (see PL_PREFETCH_UNITS).  Asks __builtin_cpu_is each call: a read of
 * what the runtime detected once, so the same answer every time;
 * thread-safe. */
bool _pylayout_prefetch_rows(void);

/* Bytes of the last-level (L3) cache the calling CPU shares with its
 * neighbours, from Linux's /sys/devices/system/cpu/cpu0/cache; 0 where
 * unknown (another OS, no sysfs).  Read once; thread-safe. */
int64_t _pylayout_l3_bytes(void);

#endif /* PYLAYOUT_CPU_FEATURES_H */
