/*
 * copy_x86.c - x86-64 tile kernels for pylayout_copy: in-register transposes
 * with SSE2 (baseline x86-64, always available) and AVX2 (compiled with a
 * per-function target attribute, chosen at run time by copy.c; never a global
 * -mavx2 or -march=native).
 *
 * Every micro-kernel moves a VxV block: src rows are ssa bytes apart and
 * unit-stride along the block's columns; dst rows are dsb bytes apart.  The
 * shuffles are bit-exact (no arithmetic), so float loads are fine for any data.
 */
#include "copy_kernels.h"

#if defined(PYLAYOUT_HAVE_X86_KERNELS)

#include <emmintrin.h>
#include <immintrin.h>

#define PL_SSE2 /* baseline */
#define PL_AVX2 __attribute__((target("avx2")))

/* ------------------------------------------------------------------ SSE2 */

/* 16x16 bytes: four rounds of interleaving (8, 16, 32, 64-bit units). */
static inline void pl_micro1_sse2(const char *s, int64_t ssa, char *d, int64_t dsb)
{
    __m128i r[16], a[16], b[16], c[16];
#pragma GCC unroll 16
    for (int k = 0; k < 16; k++)
        r[k] = _mm_loadu_si128((const __m128i *)(const void *)(s + k * ssa));
#pragma GCC unroll 8
    for (int k = 0; k < 8; k++) {
        a[2 * k] = _mm_unpacklo_epi8(r[2 * k], r[2 * k + 1]);     /* rows 2k,2k+1; cols 0-7 */
        a[2 * k + 1] = _mm_unpackhi_epi8(r[2 * k], r[2 * k + 1]); /* cols 8-15 */
    }
#pragma GCC unroll 4
    for (int k = 0; k < 4; k++) { /* rows 4k..4k+3, four columns per register */
        b[4 * k + 0] = _mm_unpacklo_epi16(a[4 * k], a[4 * k + 2]);
        b[4 * k + 1] = _mm_unpackhi_epi16(a[4 * k], a[4 * k + 2]);
        b[4 * k + 2] = _mm_unpacklo_epi16(a[4 * k + 1], a[4 * k + 3]);
        b[4 * k + 3] = _mm_unpackhi_epi16(a[4 * k + 1], a[4 * k + 3]);
    }
#pragma GCC unroll 2
    for (int h = 0; h < 2; h++) { /* rows 8h..8h+7, two columns per register */
#pragma GCC unroll 4
        for (int m = 0; m < 4; m++) {
            c[8 * h + 2 * m] = _mm_unpacklo_epi32(b[8 * h + m], b[8 * h + 4 + m]);
            c[8 * h + 2 * m + 1] = _mm_unpackhi_epi32(b[8 * h + m], b[8 * h + 4 + m]);
        }
    }
#pragma GCC unroll 8
    for (int q = 0; q < 8; q++) {
        _mm_storeu_si128((__m128i *)(void *)(d + (2 * q) * dsb), _mm_unpacklo_epi64(c[q], c[8 + q]));
        _mm_storeu_si128((__m128i *)(void *)(d + (2 * q + 1) * dsb), _mm_unpackhi_epi64(c[q], c[8 + q]));
    }
}

/* 8x8 of 16-bit elements. */
static inline void pl_micro2_sse2(const char *s, int64_t ssa, char *d, int64_t dsb)
{
    __m128i r[8];
#pragma GCC unroll 8
    for (int k = 0; k < 8; k++)
        r[k] = _mm_loadu_si128((const __m128i *)(const void *)(s + k * ssa));
    __m128i a0 = _mm_unpacklo_epi16(r[0], r[1]), a1 = _mm_unpackhi_epi16(r[0], r[1]);
    __m128i a2 = _mm_unpacklo_epi16(r[2], r[3]), a3 = _mm_unpackhi_epi16(r[2], r[3]);
    __m128i a4 = _mm_unpacklo_epi16(r[4], r[5]), a5 = _mm_unpackhi_epi16(r[4], r[5]);
    __m128i a6 = _mm_unpacklo_epi16(r[6], r[7]), a7 = _mm_unpackhi_epi16(r[6], r[7]);
    __m128i b0 = _mm_unpacklo_epi32(a0, a2), b1 = _mm_unpackhi_epi32(a0, a2);
    __m128i b2 = _mm_unpacklo_epi32(a4, a6), b3 = _mm_unpackhi_epi32(a4, a6);
    __m128i b4 = _mm_unpacklo_epi32(a1, a3), b5 = _mm_unpackhi_epi32(a1, a3);
    __m128i b6 = _mm_unpacklo_epi32(a5, a7), b7 = _mm_unpackhi_epi32(a5, a7);
    _mm_storeu_si128((__m128i *)(void *)(d + 0 * dsb), _mm_unpacklo_epi64(b0, b2));
    _mm_storeu_si128((__m128i *)(void *)(d + 1 * dsb), _mm_unpackhi_epi64(b0, b2));
    _mm_storeu_si128((__m128i *)(void *)(d + 2 * dsb), _mm_unpacklo_epi64(b1, b3));
    _mm_storeu_si128((__m128i *)(void *)(d + 3 * dsb), _mm_unpackhi_epi64(b1, b3));
    _mm_storeu_si128((__m128i *)(void *)(d + 4 * dsb), _mm_unpacklo_epi64(b4, b6));
    _mm_storeu_si128((__m128i *)(void *)(d + 5 * dsb), _mm_unpackhi_epi64(b4, b6));
    _mm_storeu_si128((__m128i *)(void *)(d + 6 * dsb), _mm_unpacklo_epi64(b5, b7));
    _mm_storeu_si128((__m128i *)(void *)(d + 7 * dsb), _mm_unpackhi_epi64(b5, b7));
}

/* 4x4 of 32-bit elements. */
static inline void pl_micro4_sse2(const char *s, int64_t ssa, char *d, int64_t dsb)
{
    __m128 r0 = _mm_loadu_ps((const float *)(const void *)(s));
    __m128 r1 = _mm_loadu_ps((const float *)(const void *)(s + ssa));
    __m128 r2 = _mm_loadu_ps((const float *)(const void *)(s + 2 * ssa));
    __m128 r3 = _mm_loadu_ps((const float *)(const void *)(s + 3 * ssa));
    __m128 t0 = _mm_unpacklo_ps(r0, r1), t1 = _mm_unpacklo_ps(r2, r3);
    __m128 t2 = _mm_unpackhi_ps(r0, r1), t3 = _mm_unpackhi_ps(r2, r3);
    _mm_storeu_ps((float *)(void *)(d), _mm_movelh_ps(t0, t1));
    _mm_storeu_ps((float *)(void *)(d + dsb), _mm_movehl_ps(t1, t0));
    _mm_storeu_ps((float *)(void *)(d + 2 * dsb), _mm_movelh_ps(t2, t3));
    _mm_storeu_ps((float *)(void *)(d + 3 * dsb), _mm_movehl_ps(t3, t2));
}

/* 2x2 of 64-bit elements. */
static inline void pl_micro8_sse2(const char *s, int64_t ssa, char *d, int64_t dsb)
{
    __m128d r0 = _mm_loadu_pd((const double *)(const void *)(s));
    __m128d r1 = _mm_loadu_pd((const double *)(const void *)(s + ssa));
    _mm_storeu_pd((double *)(void *)(d), _mm_unpacklo_pd(r0, r1));
    _mm_storeu_pd((double *)(void *)(d + dsb), _mm_unpackhi_pd(r0, r1));
}

/* 1x1 of 128-bit elements: a transpose of whole vectors is a plain move. */
static inline void pl_micro16_sse2(const char *s, int64_t ssa, char *d, int64_t dsb)
{
    (void)ssa;
    (void)dsb;
    _mm_storeu_si128((__m128i *)(void *)d, _mm_loadu_si128((const __m128i *)(const void *)s));
}

PL_DEFINE_TILE(pl_tile1_sse2, PL_SSE2, 1, 16, pl_micro1_sse2, _pl_move2d_1)
PL_DEFINE_TILE(pl_tile2_sse2, PL_SSE2, 2, 8, pl_micro2_sse2, _pl_move2d_2)
PL_DEFINE_TILE(pl_tile4_sse2, PL_SSE2, 4, 4, pl_micro4_sse2, _pl_move2d_4)
PL_DEFINE_TILE(pl_tile8_sse2, PL_SSE2, 8, 2, pl_micro8_sse2, _pl_move2d_8)
PL_DEFINE_TILE(pl_tile16_sse2, PL_SSE2, 16, 1, pl_micro16_sse2, _pl_move2d_16)

const _pylayout_copy_kernels _pylayout_copy_kernels_sse2 = {
    "sse2",
    {pl_tile1_sse2, pl_tile2_sse2, pl_tile4_sse2, pl_tile8_sse2, pl_tile16_sse2},
};

/* ------------------------------------------------------------------ AVX2 */

/* 8x8 of 32-bit elements in registers: interleave pairs, then quads, then
 * swap 128-bit halves. */
PL_AVX2 static inline void pl_micro4_avx2(const char *s, int64_t ssa, char *d, int64_t dsb)
{
    __m256 r0 = _mm256_loadu_ps((const float *)(const void *)(s));
    __m256 r1 = _mm256_loadu_ps((const float *)(const void *)(s + ssa));
    __m256 r2 = _mm256_loadu_ps((const float *)(const void *)(s + 2 * ssa));
    __m256 r3 = _mm256_loadu_ps((const float *)(const void *)(s + 3 * ssa));
    __m256 r4 = _mm256_loadu_ps((const float *)(const void *)(s + 4 * ssa));
    __m256 r5 = _mm256_loadu_ps((const float *)(const void *)(s + 5 * ssa));
    __m256 r6 = _mm256_loadu_ps((const float *)(const void *)(s + 6 * ssa));
    __m256 r7 = _mm256_loadu_ps((const float *)(const void *)(s + 7 * ssa));
    __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1);
    __m256 t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3);
    __m256 t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5);
    __m256 t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
    __m256 u0 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(1, 0, 1, 0));
    __m256 u1 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(3, 2, 3, 2));
    __m256 u2 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(1, 0, 1, 0));
    __m256 u3 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(3, 2, 3, 2));
    __m256 u4 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(1, 0, 1, 0));
    __m256 u5 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(3, 2, 3, 2));
    __m256 u6 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(1, 0, 1, 0));
    __m256 u7 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(3, 2, 3, 2));
    _mm256_storeu_ps((float *)(void *)(d), _mm256_permute2f128_ps(u0, u4, 0x20));
    _mm256_storeu_ps((float *)(void *)(d + dsb), _mm256_permute2f128_ps(u1, u5, 0x20));
    _mm256_storeu_ps((float *)(void *)(d + 2 * dsb), _mm256_permute2f128_ps(u2, u6, 0x20));
    _mm256_storeu_ps((float *)(void *)(d + 3 * dsb), _mm256_permute2f128_ps(u3, u7, 0x20));
    _mm256_storeu_ps((float *)(void *)(d + 4 * dsb), _mm256_permute2f128_ps(u0, u4, 0x31));
    _mm256_storeu_ps((float *)(void *)(d + 5 * dsb), _mm256_permute2f128_ps(u1, u5, 0x31));
    _mm256_storeu_ps((float *)(void *)(d + 6 * dsb), _mm256_permute2f128_ps(u2, u6, 0x31));
    _mm256_storeu_ps((float *)(void *)(d + 7 * dsb), _mm256_permute2f128_ps(u3, u7, 0x31));
}

/* 4x4 of 64-bit elements. */
PL_AVX2 static inline void pl_micro8_avx2(const char *s, int64_t ssa, char *d, int64_t dsb)
{
    __m256d r0 = _mm256_loadu_pd((const double *)(const void *)(s));
    __m256d r1 = _mm256_loadu_pd((const double *)(const void *)(s + ssa));
    __m256d r2 = _mm256_loadu_pd((const double *)(const void *)(s + 2 * ssa));
    __m256d r3 = _mm256_loadu_pd((const double *)(const void *)(s + 3 * ssa));
    __m256d t0 = _mm256_unpacklo_pd(r0, r1), t1 = _mm256_unpackhi_pd(r0, r1);
    __m256d t2 = _mm256_unpacklo_pd(r2, r3), t3 = _mm256_unpackhi_pd(r2, r3);
    _mm256_storeu_pd((double *)(void *)(d), _mm256_permute2f128_pd(t0, t2, 0x20));
    _mm256_storeu_pd((double *)(void *)(d + dsb), _mm256_permute2f128_pd(t1, t3, 0x20));
    _mm256_storeu_pd((double *)(void *)(d + 2 * dsb), _mm256_permute2f128_pd(t0, t2, 0x31));
    _mm256_storeu_pd((double *)(void *)(d + 3 * dsb), _mm256_permute2f128_pd(t1, t3, 0x31));
}

/* The 1- and 2-byte SSE2 kernels, recompiled with AVX encodings (VEX, no
 * transition penalties next to the 256-bit kernels). */
PL_AVX2 static inline void pl_micro1_avx2(const char *s, int64_t ssa, char *d, int64_t dsb)
{
    pl_micro1_sse2(s, ssa, d, dsb);
}
PL_AVX2 static inline void pl_micro2_avx2(const char *s, int64_t ssa, char *d, int64_t dsb)
{
    pl_micro2_sse2(s, ssa, d, dsb);
}
PL_AVX2 static inline void pl_micro16_avx2(const char *s, int64_t ssa, char *d, int64_t dsb)
{
    pl_micro16_sse2(s, ssa, d, dsb);
}

PL_DEFINE_TILE(pl_tile1_avx2, PL_AVX2, 1, 16, pl_micro1_avx2, _pl_move2d_1)
PL_DEFINE_TILE(pl_tile2_avx2, PL_AVX2, 2, 8, pl_micro2_avx2, _pl_move2d_2)
PL_DEFINE_TILE(pl_tile4_avx2, PL_AVX2, 4, 8, pl_micro4_avx2, _pl_move2d_4)
PL_DEFINE_TILE(pl_tile8_avx2, PL_AVX2, 8, 4, pl_micro8_avx2, _pl_move2d_8)
PL_DEFINE_TILE(pl_tile16_avx2, PL_AVX2, 16, 1, pl_micro16_avx2, _pl_move2d_16)

const _pylayout_copy_kernels _pylayout_copy_kernels_avx2 = {
    "avx2",
    {pl_tile1_avx2, pl_tile2_avx2, pl_tile4_avx2, pl_tile8_avx2, pl_tile16_avx2},
};

#else

/* ISO C forbids an empty translation unit. */
typedef int pylayout_copy_x86_unused;

#endif
