/*
 * rows_x86.c - rows of bytes copied with AVX2 and AVX-512 moves (see
 * _pylayout_rows_fn in kernels.h): the units of a copy whose innermost dim
 * is unit-stride in both tensors (plan.c's PL_ROWS), a permute that keeps
 * the last dim, (B,H,S,D) -> (B,S,H,D).  Each row in vectors of the
 * path's width, the last one ending at the row's end (overlapping the one
 * before); rows shorter than a vector in two overlapping moves of the
 * widest size that fits.  Then rows filled from one element, a source
 * broadcast along them (_pylayout_fill_fn), the same way.  Compiled with
 * per-function target attributes; copy_x86.c puts them in the AVX2 and
 * AVX-512 tables.
 */
#include <stdint.h>
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

/* Rows filled from one element (see _pylayout_fill_fn in kernels.h), a
 * source broadcast along the row, x[..., :1].expand(...): the element
 * repeated across a vector, stored along the row, the last store ending at
 * the row's end (the pattern repeats every SIZE bytes, which divide the
 * vector, so an overlapping store writes the same bytes); rows shorter
 * than a vector in two overlapping stores of the widest size that fits.
 * plan.c's portable pl_fill_row, 16 bytes a store from a pattern on the
 * stack, ran at 0.5-0.85x torch's fill.  On the 2-core Zen 5 dev VM,
 * copy_into of torch tensors, GB/s at 1 / 2 threads, before -> after
 * (torch): float32 (16,3,224,224) 66 / 127 -> 111 / 182 (107 / 175);
 * float16 (4096,4096) 44 / 136 -> 51 / 183 (53 / 207); float32 (256,256)
 * in cache 63 -> 112 (111); float64 (1M,3) 9.9 / 18 -> 29 / 61 (19 / 40);
 * uint8 (64,1000,12) 4.9 / 5.7 -> 16 / 26 (3.1 / 6.2); complex128
 * (4096,100) 80 / 139 -> 96 / 163 (94 / 179) (/tmp/s50/fillcmp.py,
 * session 50). */
static inline uint16_t pl_load16(const char *s)
{
    uint16_t v;
    memcpy(&v, s, 2);
    return v;
}

static inline uint32_t pl_load32(const char *s)
{
    uint32_t v;
    memcpy(&v, s, 4);
    return v;
}

static inline uint64_t pl_load64(const char *s)
{
    uint64_t v;
    memcpy(&v, s, 8);
    return v;
}

/* A row of total < 32 bytes (a multiple of size) from the 16-byte pattern
 * p: two overlapping stores of the widest size that fits (each a multiple
 * of size where the row is at least that long), or one element. */
static inline void pl_fill_short(char *d, __m128i p, const char *s, int64_t total, int64_t size)
{
    if (total >= 16) {
        _mm_storeu_si128((__m128i *)d, p);
        _mm_storeu_si128((__m128i *)(d + total - 16), p);
    } else if (total >= 8) {
        _mm_storel_epi64((__m128i *)d, p);
        _mm_storel_epi64((__m128i *)(d + total - 8), p);
    } else if (total >= 4) {
        const uint32_t v = (uint32_t)_mm_cvtsi128_si32(p);
        memcpy(d, &v, 4);
        memcpy(d + total - 4, &v, 4);
    } else {
        for (int64_t o = 0; o < total; o += size)
            memcpy(d + o, s, (size_t)size);
    }
}

/* A row of total < 64 bytes from the 32-byte pattern p: two overlapping
 * 32-byte stores from 32 bytes on, else pl_fill_short. */
PL_AVX2 static inline void pl_fill_below64(char *d, __m256i p, const char *s, int64_t total, int64_t size)
{
    if (total >= 32) {
        _mm256_storeu_si256((__m256i *)d, p);
        _mm256_storeu_si256((__m256i *)(d + total - 32), p);
    } else {
        pl_fill_short(d, _mm256_castsi256_si128(p), s, total, size);
    }
}

PL_AVX2 static inline void pl_store256(char *d, __m256i v) { _mm256_storeu_si256((__m256i *)d, v); }
PL_AVX512 static inline void pl_store512(char *d, __m512i v) { _mm512_storeu_si512(d, v); }
PL_AVX2 static inline __m256i pl_low256(__m256i v) { return v; }

/* The fill kernel of element size SIZE on path PATH (function attribute
 * ATTR), vectors of type VEC and W bytes: STORE stores one, LOW256 takes
 * its low 32 bytes, pl_splat_PATH_SIZE makes one from an element. */
#define PL_DEFINE_FILL(SIZE, PATH, ATTR, VEC, W, STORE, LOW256)                                          \
    ATTR void _pylayout_fill##SIZE##_##PATH(const char *src, int64_t ssb, char *dst, int64_t dsb, int64_t n, \
                                            int64_t rows)                                                \
    {                                                                                                    \
        const int64_t total = n * (SIZE);                                                                \
        for (int64_t r = 0; r < rows; r++) {                                                             \
            const char *s = src + r * ssb;                                                               \
            char *d = dst + r * dsb;                                                                     \
            const VEC v = pl_splat_##PATH##_##SIZE(s);                                                   \
            if (total < (W)) {                                                                           \
                pl_fill_below64(d, LOW256(v), s, total, (SIZE));                                         \
                continue;                                                                                \
            }                                                                                            \
            for (int64_t o = 0; o + (W) < total; o += (W))                                               \
                STORE(d + o, v);                                                                         \
            STORE(d + total - (W), v);                                                                   \
        }                                                                                                \
    }
#define PL_DEFINE_FILL_AVX2(SIZE) PL_DEFINE_FILL(SIZE, avx2, PL_AVX2, __m256i, 32, pl_store256, pl_low256)
#define PL_DEFINE_FILL_AVX512(SIZE)                                                                      \
    PL_DEFINE_FILL(SIZE, avx512, PL_AVX512, __m512i, 64, pl_store512, _mm512_castsi512_si256)

PL_AVX2 static inline __m256i pl_splat_avx2_1(const char *s) { return _mm256_set1_epi8(*s); }
PL_AVX2 static inline __m256i pl_splat_avx2_2(const char *s) { return _mm256_set1_epi16((short)pl_load16(s)); }
PL_AVX2 static inline __m256i pl_splat_avx2_4(const char *s) { return _mm256_set1_epi32((int)pl_load32(s)); }
PL_AVX2 static inline __m256i pl_splat_avx2_8(const char *s) { return _mm256_set1_epi64x((long long)pl_load64(s)); }
PL_AVX2 static inline __m256i pl_splat_avx2_16(const char *s)
{
    return _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)s));
}
PL_AVX512 static inline __m512i pl_splat_avx512_1(const char *s) { return _mm512_set1_epi8(*s); }
PL_AVX512 static inline __m512i pl_splat_avx512_2(const char *s) { return _mm512_set1_epi16((short)pl_load16(s)); }
PL_AVX512 static inline __m512i pl_splat_avx512_4(const char *s) { return _mm512_set1_epi32((int)pl_load32(s)); }
PL_AVX512 static inline __m512i pl_splat_avx512_8(const char *s) { return _mm512_set1_epi64((long long)pl_load64(s)); }
PL_AVX512 static inline __m512i pl_splat_avx512_16(const char *s)
{
    return _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)s));
}

PL_DEFINE_FILL_AVX2(1)
PL_DEFINE_FILL_AVX2(2)
PL_DEFINE_FILL_AVX2(4)
PL_DEFINE_FILL_AVX2(8)
PL_DEFINE_FILL_AVX2(16)
PL_DEFINE_FILL_AVX512(1)
PL_DEFINE_FILL_AVX512(2)
PL_DEFINE_FILL_AVX512(4)
PL_DEFINE_FILL_AVX512(8)
PL_DEFINE_FILL_AVX512(16)

#else

/* ISO C forbids an empty translation unit. */
typedef int pylayout_rows_x86_unused;

#endif
