/*
 * complex_x86.c - AVX2 kernels for complex packing (see
 * _pylayout_interleave_fn in kernels.h): 8 complex64 or 4 complex128 per
 * step, the tail through the portable loop.  Compiled with per-function
 * target attributes; copy_x86.c puts them in the AVX2 and AVX-512 tables.
 */
#include "kernels.h"

#if defined(PYLAYOUT_HAVE_X86_KERNELS)

#include <immintrin.h>

#define PL_AVX2 __attribute__((target("avx2")))

/* 8 complex64 per step: unpack (re, im) pairs within 128-bit lanes, then put
 * the lanes in order.  With stream (a constant once inlined), z gets whole
 * lines of streaming stores: past the cache the output is not read back
 * soon, and skipping the read-for-ownership saves a third of the traffic;
 * z + 8 * k0 must then be 32-byte aligned, and the caller fences. */
PL_AVX2 __attribute__((always_inline)) static inline void pl_pack4_with(char *z, char *re, char *im, int64_t k0,
                                                                        int64_t k1, bool stream)
{
    int64_t k = k0;
    for (; k + 8 <= k1; k += 8) {
        __m256 r = _mm256_loadu_ps((const float *)(re + 4 * k)), i = _mm256_loadu_ps((const float *)(im + 4 * k));
        __m256 lo = _mm256_unpacklo_ps(r, i), hi = _mm256_unpackhi_ps(r, i);
        __m256 a = _mm256_permute2f128_ps(lo, hi, 0x20), b = _mm256_permute2f128_ps(lo, hi, 0x31);
        if (stream) {
            _mm256_stream_ps((float *)(z + 8 * k), a);
            _mm256_stream_ps((float *)(z + 8 * k + 32), b);
        } else {
            _mm256_storeu_ps((float *)(z + 8 * k), a);
            _mm256_storeu_ps((float *)(z + 8 * k + 32), b);
        }
    }
    _pl_pack_4(z, re, im, k, k1);
}

PL_AVX2 void _pylayout_pack4_avx2(char *z, char *re, char *im, int64_t k0, int64_t k1)
{
    pl_pack4_with(z, re, im, k0, k1, false);
}

PL_AVX2 void _pylayout_pack4_avx2_stream(char *z, char *re, char *im, int64_t k0, int64_t k1)
{
    pl_pack4_with(z, re, im, k0, k1, true);
}

PL_AVX2 void _pylayout_unpack4_avx2(char *z, char *re, char *im, int64_t k0, int64_t k1)
{
    int64_t k = k0;
    const __m256i even = _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7);
    for (; k + 8 <= k1; k += 8) {
        __m256 a = _mm256_permutevar8x32_ps(_mm256_loadu_ps((const float *)(z + 8 * k)), even);
        __m256 b = _mm256_permutevar8x32_ps(_mm256_loadu_ps((const float *)(z + 8 * k + 32)), even);
        _mm256_storeu_ps((float *)(re + 4 * k), _mm256_permute2f128_ps(a, b, 0x20));
        _mm256_storeu_ps((float *)(im + 4 * k), _mm256_permute2f128_ps(a, b, 0x31));
    }
    _pl_unpack_4(z, re, im, k, k1);
}

/* 4 complex128 per step. */
PL_AVX2 void _pylayout_pack8_avx2(char *z, char *re, char *im, int64_t k0, int64_t k1)
{
    int64_t k = k0;
    for (; k + 4 <= k1; k += 4) {
        __m256d r = _mm256_loadu_pd((const double *)(re + 8 * k)), i = _mm256_loadu_pd((const double *)(im + 8 * k));
        __m256d lo = _mm256_unpacklo_pd(r, i), hi = _mm256_unpackhi_pd(r, i);
        _mm256_storeu_pd((double *)(z + 16 * k), _mm256_permute2f128_pd(lo, hi, 0x20));
        _mm256_storeu_pd((double *)(z + 16 * k + 32), _mm256_permute2f128_pd(lo, hi, 0x31));
    }
    _pl_pack_8(z, re, im, k, k1);
}

PL_AVX2 void _pylayout_unpack8_avx2(char *z, char *re, char *im, int64_t k0, int64_t k1)
{
    int64_t k = k0;
    for (; k + 4 <= k1; k += 4) {
        __m256d a = _mm256_loadu_pd((const double *)(z + 16 * k)), b = _mm256_loadu_pd((const double *)(z + 16 * k + 32));
        __m256d p = _mm256_permute2f128_pd(a, b, 0x20), q = _mm256_permute2f128_pd(a, b, 0x31);
        _mm256_storeu_pd((double *)(re + 8 * k), _mm256_unpacklo_pd(p, q));
        _mm256_storeu_pd((double *)(im + 8 * k), _mm256_unpackhi_pd(p, q));
    }
    _pl_unpack_8(z, re, im, k, k1);
}

#else

/* ISO C forbids an empty translation unit. */
typedef int pylayout_complex_x86_unused;

#endif
