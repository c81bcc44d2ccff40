/*
 * interleave_x86.c - thin transposes on x86-64 (see _pylayout_zip_fn in
 * kernels.h): P = 2 to 8 planes interleaved into groups of P elements,
 * and back.  These are what NCHW <-> NHWC with 3 channels and complex pairs
 * of a transposed (n, 2) reduce to; the copy engine (plan.c, PL_THIN) calls
 * them on stretches of the long side.
 *
 * AVX2, every P and element size 1, 2, 4, 8: one byte-shuffle network.  A
 * step takes 16 bytes of each plane per 128-bit lane (two lanes: 32 bytes
 * of each plane), i.e. 16 * P bytes of packed data per lane, cut into P
 * pieces of 16 bytes.  Packed piece q gathers its bytes from every plane
 * with one vpshufb per plane (bytes from other planes masked to zero) and
 * ORs them; unzip does the same the other way round.  The masks depend
 * only on (P, size, q, p), so they are compile-time constants
 * (pl_zip_mask, pl_unzip_mask).  Measured memory-bound on the dev VM: the
 * P * P shuffles of a step cost less than its loads and stores.
 *
 * SSE2 (baseline), P = 2 and 4: unpacklo/hi interleave two planes exactly,
 * two rounds of them four; P = 3 and the de-interleaves stay portable there.
 *
 * Every kernel ends with the portable loop for the last elements (fewer
 * than one step), so any n and any byte address work; loads and stores are
 * unaligned and never touch bytes outside the elements moved.
 */
#include "kernels.h"

#if defined(PYLAYOUT_HAVE_X86_KERNELS)

#include <emmintrin.h>
#include <immintrin.h>

#define PL_AVX2 __attribute__((target("avx2")))

/* ------------------------------------------------------------------ SSE2 */

/* Two-plane zips: unpacklo/hi at the element size.  One step: 16 bytes of
 * each plane, 32 packed bytes. */
#define PL_DEFINE_ZIP2_SSE2(SIZE, LO, HI)                                                                \
    static void pl_zip2_##SIZE##_sse2(const char *planes, int64_t ps, char *packed, int64_t n)          \
    {                                                                                                    \
        enum { PER = 16 / (SIZE) };                                                                      \
        int64_t k = 0;                                                                                   \
        for (; k + PER <= n; k += PER) {                                                                 \
            __m128i a = _mm_loadu_si128((const __m128i *)(const void *)(planes + k * (SIZE)));           \
            __m128i b = _mm_loadu_si128((const __m128i *)(const void *)(planes + ps + k * (SIZE)));      \
            char *d = packed + 2 * k * (SIZE);                                                           \
            _mm_storeu_si128((__m128i *)(void *)d, LO(a, b));                                            \
            _mm_storeu_si128((__m128i *)(void *)(d + 16), HI(a, b));                                     \
        }                                                                                                \
        _pylayout_thin_portable.zip[0][_pl_size_index(SIZE)](planes + k * (SIZE), ps,                    \
                                                             packed + 2 * k * (SIZE), n - k);            \
    }
PL_DEFINE_ZIP2_SSE2(1, _mm_unpacklo_epi8, _mm_unpackhi_epi8)
PL_DEFINE_ZIP2_SSE2(2, _mm_unpacklo_epi16, _mm_unpackhi_epi16)
PL_DEFINE_ZIP2_SSE2(4, _mm_unpacklo_epi32, _mm_unpackhi_epi32)
PL_DEFINE_ZIP2_SSE2(8, _mm_unpacklo_epi64, _mm_unpackhi_epi64)

/* Four-plane zips: pairs (a, c) and (b, d) interleaved at the element
 * size, then those at twice it.  One step: 16 bytes of each plane, 64
 * packed bytes. */
#define PL_DEFINE_ZIP4_SSE2(SIZE, LO, HI, LO2, HI2)                                                      \
    static void pl_zip4_##SIZE##_sse2(const char *planes, int64_t ps, char *packed, int64_t n)          \
    {                                                                                                    \
        enum { PER = 16 / (SIZE) };                                                                      \
        int64_t k = 0;                                                                                   \
        for (; k + PER <= n; k += PER) {                                                                 \
            const char *s = planes + k * (SIZE);                                                         \
            __m128i a = _mm_loadu_si128((const __m128i *)(const void *)s);                               \
            __m128i b = _mm_loadu_si128((const __m128i *)(const void *)(s + ps));                        \
            __m128i c = _mm_loadu_si128((const __m128i *)(const void *)(s + 2 * ps));                    \
            __m128i e = _mm_loadu_si128((const __m128i *)(const void *)(s + 3 * ps));                    \
            __m128i ab0 = LO(a, b), ab1 = HI(a, b), ce0 = LO(c, e), ce1 = HI(c, e);                      \
            char *d = packed + 4 * k * (SIZE);                                                           \
            _mm_storeu_si128((__m128i *)(void *)d, LO2(ab0, ce0));                                       \
            _mm_storeu_si128((__m128i *)(void *)(d + 16), HI2(ab0, ce0));                                \
            _mm_storeu_si128((__m128i *)(void *)(d + 32), LO2(ab1, ce1));                                \
            _mm_storeu_si128((__m128i *)(void *)(d + 48), HI2(ab1, ce1));                                \
        }                                                                                                \
        _pylayout_thin_portable.zip[2][_pl_size_index(SIZE)](planes + k * (SIZE), ps,                    \
                                                             packed + 4 * k * (SIZE), n - k);            \
    }
PL_DEFINE_ZIP4_SSE2(1, _mm_unpacklo_epi8, _mm_unpackhi_epi8, _mm_unpacklo_epi16, _mm_unpackhi_epi16)
PL_DEFINE_ZIP4_SSE2(2, _mm_unpacklo_epi16, _mm_unpackhi_epi16, _mm_unpacklo_epi32, _mm_unpackhi_epi32)
PL_DEFINE_ZIP4_SSE2(4, _mm_unpacklo_epi32, _mm_unpackhi_epi32, _mm_unpacklo_epi64, _mm_unpackhi_epi64)

const _pylayout_thin_kernels _pylayout_thin_sse2 = {
    .zip = {
        [0] = {[PL_SIZE1] = pl_zip2_1_sse2, [PL_SIZE2] = pl_zip2_2_sse2, [PL_SIZE4] = pl_zip2_4_sse2,
               [PL_SIZE8] = pl_zip2_8_sse2},
        [2] = {[PL_SIZE1] = pl_zip4_1_sse2, [PL_SIZE2] = pl_zip4_2_sse2, [PL_SIZE4] = pl_zip4_4_sse2},
    },
};

/* ------------------------------------------------------------------ AVX2 */

/* The vpshufb mask that moves plane p's bytes of packed piece q into place
 * (zip), per lane: packed byte 16q + t of a lane's block is element
 * e = (16q + t) / SIZE of the block, i.e. group e / P, plane e % P, byte
 * t % SIZE of it; other planes' bytes get -128 (zero).  Both lanes alike. */
#define PL_ZM(P, SIZE, q, p, t)                                                                          \
    (char)((((16 * (q) + (t)) / (SIZE)) % (P)) == (p)                                                    \
               ? (((16 * (q) + (t)) / (SIZE)) / (P)) * (SIZE) + (t) % (SIZE)                             \
               : -128)
/* The mask that takes plane p's bytes found in packed piece q (unzip):
 * plane byte t of a lane is packed byte (t / SIZE * P + p) * SIZE + t % SIZE. */
#define PL_UB(P, SIZE, p, t) (((t) / (SIZE) * (P) + (p)) * (SIZE) + (t) % (SIZE))
#define PL_UM(P, SIZE, q, p, t) (char)(PL_UB(P, SIZE, p, t) / 16 == (q) ? PL_UB(P, SIZE, p, t) % 16 : -128)

#define PL_MASK16(M, P, SIZE, q, p)                                                                      \
    M(P, SIZE, q, p, 0), M(P, SIZE, q, p, 1), M(P, SIZE, q, p, 2), M(P, SIZE, q, p, 3), M(P, SIZE, q, p, 4), \
        M(P, SIZE, q, p, 5), M(P, SIZE, q, p, 6), M(P, SIZE, q, p, 7), M(P, SIZE, q, p, 8),              \
        M(P, SIZE, q, p, 9), M(P, SIZE, q, p, 10), M(P, SIZE, q, p, 11), M(P, SIZE, q, p, 12),           \
        M(P, SIZE, q, p, 13), M(P, SIZE, q, p, 14), M(P, SIZE, q, p, 15)
#define PL_MASK(M, P, SIZE, q, p) _mm256_setr_epi8(PL_MASK16(M, P, SIZE, q, p), PL_MASK16(M, P, SIZE, q, p))

/* Whether plane p has bytes in packed piece q at all (else its shuffle is
 * skipped): the packed bytes of piece q are elements 16q / SIZE to
 * (16q + 15) / SIZE of the lane's block. */
#define PL_TOUCHES(P, SIZE, q, p)                                                                        \
    ((((p) - (16 * (q) / (SIZE)) % (P) + (P)) % (P)) <= (16 * (q) + 15) / (SIZE) - 16 * (q) / (SIZE))

/* The (q, p) masks of a step, q and p < PL_THIN_MAX_P, as a switch on
 * constants: the callers' loops are unrolled, so each call folds to one
 * constant. */
#define PL_MASK_CASE(M, P, SIZE, q, p)                                                                   \
    case (q) * PL_THIN_MAX_P + (p):                                                                      \
        return PL_MASK(M, P, SIZE, q, p);
#define PL_MASK_CASES(M, P, SIZE, q)                                                                     \
    PL_MASK_CASE(M, P, SIZE, q, 0) PL_MASK_CASE(M, P, SIZE, q, 1) PL_MASK_CASE(M, P, SIZE, q, 2)          \
    PL_MASK_CASE(M, P, SIZE, q, 3) PL_MASK_CASE(M, P, SIZE, q, 4) PL_MASK_CASE(M, P, SIZE, q, 5)          \
    PL_MASK_CASE(M, P, SIZE, q, 6) PL_MASK_CASE(M, P, SIZE, q, 7)
#define PL_DEFINE_MASKS(NAME, M, P, SIZE)                                                                \
    PL_AVX2 __attribute__((always_inline)) static inline __m256i NAME(int q, int p)                    \
    {                                                                                                    \
        _Static_assert(PL_THIN_MAX_P == 8, "one row of cases per q < PL_THIN_MAX_P");                   \
        switch (q * PL_THIN_MAX_P + p) {                                                                 \
            PL_MASK_CASES(M, P, SIZE, 0) PL_MASK_CASES(M, P, SIZE, 1) PL_MASK_CASES(M, P, SIZE, 2)        \
            PL_MASK_CASES(M, P, SIZE, 3) PL_MASK_CASES(M, P, SIZE, 4) PL_MASK_CASES(M, P, SIZE, 5)        \
            PL_MASK_CASES(M, P, SIZE, 6) PL_MASK_CASES(M, P, SIZE, 7)                                     \
        default:                                                                                         \
            return _mm256_setzero_si256();                                                               \
        }                                                                                                \
    }

/* One (P, SIZE) pair of AVX2 kernels.  A step moves PER = 32 / SIZE
 * elements of each plane: lane 0 handles the first 16 bytes of each, lane 1
 * the next 16.  The zip's results hold packed piece q of block 0 in lane 0
 * and of block 1 in lane 1; vperm2i128 puts the 2P half-pieces back in
 * memory order.  The unzip loads piece q of both blocks into the two lanes
 * of one register, so each plane's 32 bytes come out in order. */
#define PL_DEFINE_THIN_AVX2(P, SIZE)                                                                     \
    PL_DEFINE_MASKS(pl_zmask##P##_##SIZE, PL_ZM, P, SIZE)                                                \
    PL_DEFINE_MASKS(pl_umask##P##_##SIZE, PL_UM, P, SIZE)                                                \
    PL_AVX2 static void pl_zip##P##_##SIZE##_avx2(const char *planes, int64_t ps, char *packed, int64_t n) \
    {                                                                                                    \
        enum { PER = 32 / (SIZE) };                                                                      \
        int64_t k = 0;                                                                                   \
        for (; k + PER <= n; k += PER) {                                                                 \
            __m256i y[P], r[P];                                                                          \
            _Pragma("GCC unroll 8") for (int p = 0; p < (P); p++) y[p] =                                 \
                _mm256_loadu_si256((const __m256i *)(const void *)(planes + p * ps + k * (SIZE)));       \
            _Pragma("GCC unroll 8") for (int q = 0; q < (P); q++)                                        \
            {                                                                                            \
                r[q] = _mm256_setzero_si256();                                                           \
                _Pragma("GCC unroll 8") for (int p = 0; p < (P); p++) if (PL_TOUCHES(P, SIZE, q, p))     \
                    r[q] = _mm256_or_si256(r[q], _mm256_shuffle_epi8(y[p], pl_zmask##P##_##SIZE(q, p))); \
            }                                                                                            \
            char *d = packed + (int64_t)(P) * k * (SIZE);                                                \
            _Pragma("GCC unroll 8") for (int v = 0; v < (P); v++)                                        \
            { /* half-pieces 2v and 2v + 1: h < P is r[h]'s lane 0, else r[h - P]'s lane 1 */           \
                const int h0 = 2 * v, h1 = 2 * v + 1;                                                    \
                const __m256i x0 = r[h0 < (P) ? h0 : h0 - (P)], x1 = r[h1 < (P) ? h1 : h1 - (P)];        \
                __m256i o;                                                                               \
                if (h0 < (P) && h1 < (P))                                                                \
                    o = _mm256_permute2x128_si256(x0, x1, 0x20);                                         \
                else if (h0 < (P))                                                                       \
                    o = _mm256_permute2x128_si256(x0, x1, 0x30);                                         \
                else                                                                                     \
                    o = _mm256_permute2x128_si256(x0, x1, 0x31);                                         \
                _mm256_storeu_si256((__m256i *)(void *)(d + 32 * v), o);                                 \
            }                                                                                            \
        }                                                                                                \
        _pylayout_thin_portable.zip[(P) - 2][_pl_size_index(SIZE)](planes + k * (SIZE), ps,              \
                                                                   packed + (P) * k * (SIZE), n - k);    \
    }                                                                                                    \
    PL_AVX2 static void pl_unzip##P##_##SIZE##_avx2(const char *packed, char *planes, int64_t ps, int64_t n) \
    {                                                                                                    \
        enum { PER = 32 / (SIZE) };                                                                      \
        int64_t k = 0;                                                                                   \
        for (; k + PER <= n; k += PER) {                                                                 \
            const char *s = packed + (int64_t)(P) * k * (SIZE);                                          \
            __m256i y[P];                                                                                \
            _Pragma("GCC unroll 8") for (int q = 0; q < (P); q++) y[q] = _mm256_inserti128_si256(        \
                _mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)(s + 16 * q))),    \
                _mm_loadu_si128((const __m128i *)(const void *)(s + 16 * ((P) + q))), 1);                \
            _Pragma("GCC unroll 8") for (int p = 0; p < (P); p++)                                        \
            {                                                                                            \
                __m256i o = _mm256_setzero_si256();                                                      \
                _Pragma("GCC unroll 8") for (int q = 0; q < (P); q++) if (PL_TOUCHES(P, SIZE, q, p))     \
                    o = _mm256_or_si256(o, _mm256_shuffle_epi8(y[q], pl_umask##P##_##SIZE(q, p)));       \
                _mm256_storeu_si256((__m256i *)(void *)(planes + p * ps + k * (SIZE)), o);              \
            }                                                                                            \
        }                                                                                                \
        _pylayout_thin_portable.unzip[(P) - 2][_pl_size_index(SIZE)](packed + (P) * k * (SIZE),          \
                                                                     planes + k * (SIZE), ps, n - k);    \
    }

#define PL_DEFINE_THIN_AVX2_SIZES(P)                                                                     \
    PL_DEFINE_THIN_AVX2(P, 1)                                                                            \
    PL_DEFINE_THIN_AVX2(P, 2)                                                                            \
    PL_DEFINE_THIN_AVX2(P, 4)                                                                            \
    PL_DEFINE_THIN_AVX2(P, 8)
PL_DEFINE_THIN_AVX2_SIZES(2)
PL_DEFINE_THIN_AVX2_SIZES(3)
PL_DEFINE_THIN_AVX2_SIZES(4)
PL_DEFINE_THIN_AVX2_SIZES(5)
PL_DEFINE_THIN_AVX2_SIZES(6)
PL_DEFINE_THIN_AVX2_SIZES(7)
PL_DEFINE_THIN_AVX2_SIZES(8)

#define PL_THIN_AVX2_ROW(F, P)                                                                           \
    {[PL_SIZE1] = F##P##_1_avx2, [PL_SIZE2] = F##P##_2_avx2, [PL_SIZE4] = F##P##_4_avx2,                 \
     [PL_SIZE8] = F##P##_8_avx2}
#define PL_THIN_AVX2_ROWS(F)                                                                             \
    {PL_THIN_AVX2_ROW(F, 2), PL_THIN_AVX2_ROW(F, 3), PL_THIN_AVX2_ROW(F, 4), PL_THIN_AVX2_ROW(F, 5),     \
     PL_THIN_AVX2_ROW(F, 6), PL_THIN_AVX2_ROW(F, 7), PL_THIN_AVX2_ROW(F, 8)}
const _pylayout_thin_kernels _pylayout_thin_avx2 = {.zip = PL_THIN_AVX2_ROWS(pl_zip),
                                                    .unzip = PL_THIN_AVX2_ROWS(pl_unzip)};

#else

/* ISO C forbids an empty translation unit. */
typedef int pylayout_interleave_x86_unused;

#endif
