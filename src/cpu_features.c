/*
 * cpu_features.c - the one place that asks which instruction sets this CPU
 * has (cache_size.c asks its L3 size): feature detection, the PYLAYOUT_SIMD
 * cap, the kernel table every copy and pack then uses, whose cores these are
 * where that decides a plan (_pylayout_intel_cores), and the build
 * facts pylayout_build_info reports.
 *
 * Like libdeflate's lib/x86/cpu_features.c: kernels live in per-architecture
 * files (copy_x86.c, complex_x86.c) compiled with per-function target
 * attributes, never a global -mavx2 or -march=native; this file picks one
 * table of them at run time.
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_features.h"
#include "internal.h"

unsigned _pylayout_cpu_features(void)
{
    unsigned f = 0;
#if defined(PYLAYOUT_HAVE_X86_KERNELS)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2"))
        f |= PL_CPU_AVX2;
    if (__builtin_cpu_supports("avx512f"))
        f |= PL_CPU_AVX512F;
    if (__builtin_cpu_supports("avx512bw"))
        f |= PL_CPU_AVX512BW;
    if (__builtin_cpu_supports("avx512vbmi"))
        f |= PL_CPU_AVX512VBMI;
#endif
    return f;
}

/* The paths this build has, best first, with the features each needs. */
static const struct {
    const _pylayout_kernels *kernels;
    unsigned needs;
} pl_paths[] = {
#if defined(PYLAYOUT_HAVE_X86_KERNELS)
    {&_pylayout_kernels_avx512, PL_CPU_AVX512F | PL_CPU_AVX512BW},
    {&_pylayout_kernels_avx2, PL_CPU_AVX2},
    {&_pylayout_kernels_sse2, 0}, /* baseline x86-64 */
#endif
    {&_pylayout_kernels_scalar, 0},
};
#define PL_NPATHS ((int)(sizeof pl_paths / sizeof pl_paths[0]))

/* The best path the CPU supports, no better than PYLAYOUT_SIMD's. */
static const _pylayout_kernels *pl_kernels_detect(void)
{
    const char *cap = getenv("PYLAYOUT_SIMD");
    int first = 0;
    for (int i = 0; cap != NULL && i < PL_NPATHS; i++)
        if (strcmp(cap, pl_paths[i].kernels->name) == 0)
            first = i;
    const unsigned have = _pylayout_cpu_features();
    for (int i = first; i < PL_NPATHS - 1; i++)
        if ((pl_paths[i].needs & have) == pl_paths[i].needs)
            return pl_paths[i].kernels;
    return pl_paths[PL_NPATHS - 1].kernels; /* portable: runs anywhere */
}

static _Atomic(const _pylayout_kernels *) pl_kernels_chosen;

const _pylayout_kernels *_pylayout_kernels_get(void)
{
    const _pylayout_kernels *k = atomic_load_explicit(&pl_kernels_chosen, memory_order_acquire);
    if (k == NULL) { /* racing first calls all detect the same answer */
        k = pl_kernels_detect();
        atomic_store_explicit(&pl_kernels_chosen, k, memory_order_release);
    }
    return k;
}

bool _pylayout_intel_cores(void)
{
    const char *as = getenv("PYLAYOUT_CORES"); /* for tests: plan as for these cores */
    if (as != NULL && (strcmp(as, "intel") == 0 || strcmp(as, "amd") == 0))
        return as[0] == 'i';
#if defined(PYLAYOUT_HAVE_X86_KERNELS)
    __builtin_cpu_init();
    return __builtin_cpu_is("intel");
#else
    return false;
#endif
}

pylayout_status pylayout_build_info(bool *openmp_ret, const char **simd_ret)
{
    if (openmp_ret == NULL || simd_ret == NULL)
        return _pylayout_fail(PYLAYOUT_ERR_INVALID_ARGUMENT, "pylayout_build_info: %s is NULL",
                              openmp_ret == NULL ? "openmp_ret" : "simd_ret");
#ifdef _OPENMP
    *openmp_ret = true;
#else
    *openmp_ret = false;
#endif
    *simd_ret = _pylayout_kernels_get()->name;
    _pylayout_clear_error();
    return PYLAYOUT_OK;
}
