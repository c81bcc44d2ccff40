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

/* Whether this process runs on Intel cores, where a plan's choice was
 * measured to go the other way there than on AMD's: buffered transposes
 * prefetch their src rows in software except on Intel cores, whose L2
 * streamer follows them by itself (plan.c, PL_PREFETCH_UNITS), and
 * transposes into dst rows a page apart go through L1 buffers on Intel
 * cores only from L2 (PL_FUSE_CROWDED_DST_INTEL_BYTES), and uint8 src rows
 * a page apart only on others (PL_FUSE_CROWDED_SRC_GATHER_BYTES).
 * PYLAYOUT_CORES=intel or =amd answers instead, read each call, so that a
 * test can run both vendors' plans on any CPU (they differ in speed only);
 * else __builtin_cpu_is, a read of what the runtime detected once.  False
 * off x86-64; thread-safe.  Only plans of such copies ask (not small ones). */
bool _pylayout_intel_cores(void);

/* Bytes of the last-level (L3) cache the calling CPU shares with its
 * neighbours, from Linux's /sys/devices/system/cpu/cpu0/cache; 0 where
 * unknown (another OS, no sysfs).  Read once; thread-safe. */
int64_t _pylayout_l3_bytes(void);

#endif /* PYLAYOUT_CPU_FEATURES_H */
