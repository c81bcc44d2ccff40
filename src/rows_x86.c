/*
 * rows_x86.c - rows of bytes copied with AVX2 and AVX-512 moves (see
 * _pylayout_rows_fn in kernels.h): the units of a copy whose innermost dim
 * is unit-stride in both tensors (plan.c's PL_ROWS), a permute that keeps
 * the last dim, (B,H,S,D) -> (B,S,H,D).  Each row in vectors of the
 * path's width, the last one ending at the row's end (overlapping the one
 * before); rows shorter than a vector in two overlapping moves of the
 * widest size that fits.  Compiled with per-function target attributes;
 * copy_x86.c puts them in the AVX2 and AVX-512 tables.
 */
#include <string.h>

#include "kernels.h"

#if defined(PYLAYOUT_HAVE_X86_KERNELS)

#include <immintrin.h>

#define PL_AVX2 __attribute__((target("avx2")))
#define PL_AVX512 __attribute__((target("avx512f,avx512bw")))

/* n < 32 bytes in two overlapping moves (one below 2), src and dst apart. */
static inline void pl_row_below32(char *d, const char *s, int64_t n)
{
    if (n >= 16) {
        __m128i a = _mm_loadu_si128((const __m128i *)s), b = _mm_loadu_si128((const __m128i *)(s + n - 16));
        _mm_storeu_si128((__m128i *)d, a);
        _mm_storeu_si128((__m128i *)(d + n - 16), b);
    } else if (n >= 8) {
        uint64_t a, b;
        memcpy(&a, s, 8);
        memcpy(&b, s + n - 8, 8);
        memcpy(d, &a, 8);
        memcpy(d + n - 8, &b, 8);
    } else if (n >= 4) {
        uint32_t a, b;
        memcpy(&a, s, 4);
        memcpy(&b, s + n - 4, 4);
        memcpy(d, &a, 4);
        memcpy(d + n - 4, &b, 4);
    } else if (n >= 2) {
        uint16_t a, b;
        memcpy(&a, s, 2);
        memcpy(&b, s + n - 2, 2);
        memcpy(d, &a, 2);
        memcpy(d + n - 2, &b, 2);
    } else if (n == 1) {
        *d = *s;
    }
}

PL_AVX2 static inline void pl_row_avx2(char *d, const char *s, int64_t n)
{
    if (n < 32) {
        pl_row_below32(d, s, n);
        return;
    }
    int64_t o = 0;
    for (; o + 32 < n; o += 32)
        _mm256_storeu_si256((__m256i *)(d + o), _mm256_loadu_si256((const __m256i *)(s + o)));
    _mm256_storeu_si256((__m256i *)(d + n - 32), _mm256_loadu_si256((const __m256i *)(s + n - 32)));
}

PL_AVX2 void _pylayout_rows_avx2(const char *src, int64_t ssb, char *dst, int64_t dsb, int64_t n, int64_t rows)
{
    for (int64_t r = 0; r < rows; r++)
        pl_row_avx2(dst + r * dsb, src + r * ssb, n);
}

PL_AVX512 static inline void pl_row_avx512(char *d, const char *s, int64_t n)
{
    if (n < 64) {
        if (n < 32) {
            pl_row_below32(d, s, n);
            return;
        }
        __m256i a = _mm256_loadu_si256((const __m256i *)s), b = _mm256_loadu_si256((const __m256i *)(s + n - 32));
        _mm256_storeu_si256((__m256i *)d, a);
        _mm256_storeu_si256((__m256i *)(d + n - 32), b);
        return;
    }
    int64_t o = 0;
    for (; o + 64 < n; o += 64)
        _mm512_storeu_si512(d + o, _mm512_loadu_si512(s + o));
    _mm512_storeu_si512(d + n - 64, _mm512_loadu_si512(s + n - 64));
}

PL_AVX512 void _pylayout_rows_avx512(const char *src, int64_t ssb, char *dst, int64_t dsb, int64_t n, int64_t rows)
{
    for (int64_t r = 0; r < rows; r++)
        pl_row_avx512(dst + r * dsb, src + r * ssb, n);
}

#else

/* ISO C forbids an empty translation unit. */
typedef int pylayout_rows_x86_unused;

#endif
