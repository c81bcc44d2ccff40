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

/* Rows of n < 32 bytes, each in two overlapping moves of the widest size
 * that fits (one below 2 bytes).  The width is chosen once, outside the
 * loop over rows: chosen row by row it cost a quarter of the time of rows
 * of 7 bytes (uint8 (16,512,7,7) by (0,2,1,3), 9.1 -> 6.9 GB/s). */
#define PL_ROWS_OF(T)                                                                                    \
    for (int64_t r = 0; r < rows; r++) {                                                                 \
        const char *s = src + r * ssb;                                                                   \
        char *d = dst + r * dsb;                                                                         \
        T a, b;                                                                                          \
        memcpy(&a, s, sizeof a);                                                                         \
        memcpy(&b, s + n - (int64_t)sizeof b, sizeof b);                                                 \
        memcpy(d, &a, sizeof a);                                                                         \
        memcpy(d + n - (int64_t)sizeof b, &b, sizeof b);                                                 \
    }

static inline void pl_rows_below32(const char *src, int64_t ssb, char *dst, int64_t dsb, int64_t n, int64_t rows)
{
    if (n >= 16) {
        PL_ROWS_OF(__m128i)
    } else if (n >= 8) {
        PL_ROWS_OF(uint64_t)
    } else if (n >= 4) {
        PL_ROWS_OF(uint32_t)
    } else if (n >= 2) {
        PL_ROWS_OF(uint16_t)
    } else if (n == 1) {
        for (int64_t r = 0; r < rows; r++)
            dst[r * dsb] = src[r * ssb];
    }
}

PL_AVX2 void _pylayout_rows_avx2(const char *src, int64_t ssb, char *dst, int64_t dsb, int64_t n, int64_t rows)
{
    if (n < 32) {
        pl_rows_below32(src, ssb, dst, dsb, n, rows);
        return;
    }
    for (int64_t r = 0; r < rows; r++) {
        const char *s = src + r * ssb;
        char *d = dst + r * dsb;
        for (int64_t o = 0; o + 32 < n; o += 32)
            _mm256_storeu_si256((__m256i *)(d + o), _mm256_loadu_si256((const __m256i *)(s + o)));
        _mm256_storeu_si256((__m256i *)(d + n - 32), _mm256_loadu_si256((const __m256i *)(s + n - 32)));
    }
}

PL_AVX512 void _pylayout_rows_avx512(const char *src, int64_t ssb, char *dst, int64_t dsb, int64_t n, int64_t rows)
{
    if (n < 32) {
        pl_rows_below32(src, ssb, dst, dsb, n, rows);
    } else if (n < 64) {
        PL_ROWS_OF(__m256i)
    } else {
        for (int64_t r = 0; r < rows; r++) {
            const char *s = src + r * ssb;
            char *d = dst + r * dsb;
            for (int64_t o = 0; o + 64 < n; o += 64)
                _mm512_storeu_si512(d + o, _mm512_loadu_si512(s + o));
            _mm512_storeu_si512(d + n - 64, _mm512_loadu_si512(s + n - 64));
        }
    }
}

#else

/* ISO C forbids an empty translation unit. */
typedef int pylayout_rows_x86_unused;

#endif
