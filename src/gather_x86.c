/*
 * gather_x86.c - kernels for a dense row filled from every k-th element of
 * src, 3 <= k <= 8 (see _pylayout_gatherk_fn in kernels.h): one channel of
 * an interleaved image (img[..., 0] of an HWC uint8 image, k = 3 or 4), one
 * coordinate of (N, 3) points, x[:, ::4].  Step-2 gathers are copy_x86.c's.
 *
 * Each step loads the k vectors of src that hold one vector of dst and
 * picks dst's elements out of them with shuffles:
 *  - AVX2, 1- and 2-byte elements: 16 bytes of dst from k 16-byte loads,
 *    each through a byte shuffle whose control zeroes the bytes that load
 *    does not hold, OR'ed together (controls from a table built by the
 *    compiler);
 *  - AVX2, 4- and 8-byte elements: 32 bytes from k 32-byte loads, each
 *    through one cross-lane permute and blended in;
 *  - AVX-512 (F + BW), 2-, 4- and 8-byte elements: 64 bytes from k
 *    64-byte loads, each through one masked permute (vpermw / vpermd /
 *    vpermq); the last step's loads and store are masked, so no element
 *    goes one by one.  1-byte elements the same way with vpermb where the
 *    CPU has AVX-512 VBMI (asked once, at the first call: the AVX-512
 *    table does not require it), else with the AVX2 kernel.
 * Dst element j is src element j * k, and the elements of dst a vector
 * takes from load m are a contiguous range of j; the permute index of lane
 * j is (j * k) mod (lanes per vector), whatever m.
 *
 * No load reaches past the last element copied: the AVX2 steps run while
 * at least one more element follows them (the last src byte a step loads
 * is below the next step's first element), the rest go one by one.
 * Compiled with per-function target attributes; copy_x86.c puts the
 * kernels in the AVX2 and AVX-512 tables.
 */
#include <assert.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "cpu_features.h"
#include "kernels.h"

#if defined(PYLAYOUT_HAVE_X86_KERNELS)

#include <immintrin.h>

#define PL_AVX2 __attribute__((target("avx2")))
#define PL_AVX512 __attribute__((target("avx512f,avx512bw")))
#define PL_VBMI __attribute__((target("avx512f,avx512bw,avx512vbmi")))
#define PL_INLINE static inline __attribute__((always_inline))

/* --------------------------------------------- 16-byte steps, 1 and 2 bytes */

/* Byte t of a 16-byte dst step is byte PL_GK_Q of the step's src (16 * k
 * bytes), which lies in load PL_GK_Q / 16; load m's control moves it there
 * or, for a byte another load holds, zeroes it (0x80). */
#define PL_GK_Q(E, K, T) (((T) / (E)) * (K) * (E) + (T) % (E))
#define PL_GK_C(E, K, M, T) (PL_GK_Q(E, K, T) / 16 == (M) ? PL_GK_Q(E, K, T) % 16 : 0x80)
#define PL_GK_ROW(E, K, M)                                                                               \
    {PL_GK_C(E, K, M, 0),  PL_GK_C(E, K, M, 1),  PL_GK_C(E, K, M, 2),  PL_GK_C(E, K, M, 3),                \
     PL_GK_C(E, K, M, 4),  PL_GK_C(E, K, M, 5),  PL_GK_C(E, K, M, 6),  PL_GK_C(E, K, M, 7),                \
     PL_GK_C(E, K, M, 8),  PL_GK_C(E, K, M, 9),  PL_GK_C(E, K, M, 10), PL_GK_C(E, K, M, 11),               \
     PL_GK_C(E, K, M, 12), PL_GK_C(E, K, M, 13), PL_GK_C(E, K, M, 14), PL_GK_C(E, K, M, 15)}
#define PL_GK_ROWS(E, K)                                                                                 \
    {PL_GK_ROW(E, K, 0), PL_GK_ROW(E, K, 1), PL_GK_ROW(E, K, 2), PL_GK_ROW(E, K, 3),                     \
     PL_GK_ROW(E, K, 4), PL_GK_ROW(E, K, 5), PL_GK_ROW(E, K, 6), PL_GK_ROW(E, K, 7)}

/* [element size 1, 2][k - 3][load m][byte]; rows m >= k are never read. */
static _Alignas(16) const uint8_t pl_gk_ctl[2][6][8][16] = {
    {PL_GK_ROWS(1, 3), PL_GK_ROWS(1, 4), PL_GK_ROWS(1, 5), PL_GK_ROWS(1, 6), PL_GK_ROWS(1, 7), PL_GK_ROWS(1, 8)},
    {PL_GK_ROWS(2, 3), PL_GK_ROWS(2, 4), PL_GK_ROWS(2, 5), PL_GK_ROWS(2, 6), PL_GK_ROWS(2, 7), PL_GK_ROWS(2, 8)},
};

PL_INLINE __m128i pl_ld16(const char *p) { return _mm_loadu_si128((const __m128i *)(const void *)p); }

PL_AVX2 PL_INLINE void pl_gk16(const char *src, int64_t ssb, char *dst, int64_t dsb, int64_t n, int64_t rows,
                                const int K, const int E)
{
    const int64_t per = 16 / E;
    const uint8_t(*ctl)[16] = pl_gk_ctl[E == 1 ? 0 : 1][K - 3];
    __m128i c[8];
    for (int m = 0; m < K; m++)
        c[m] = _mm_load_si128((const __m128i *)(const void *)ctl[m]);
    for (int64_t r = 0; r < rows; r++, src += ssb, dst += dsb) {
        int64_t i = 0;
        for (; i + per < n; i += per) {
            const char *s = src + i * K * E;
            __m128i v = _mm_shuffle_epi8(pl_ld16(s), c[0]);
            for (int m = 1; m < K; m++)
                v = _mm_or_si128(v, _mm_shuffle_epi8(pl_ld16(s + 16 * m), c[m]));
            _mm_storeu_si128((__m128i *)(void *)(dst + i * E), v);
        }
        for (; i < n; i++)
            memcpy(dst + i * E, src + i * K * E, (size_t)E);
    }
}

/* --------------------------------------------- 32-byte steps, 4 and 8 bytes */

/* Dword t of a 32-byte dst step, with ED dwords an element (8 / ED elements
 * a vector): element PL_GK8_Q of the step's src, moved by index PL_GK8_I
 * from load PL_GK8_Q / (8 / ED); PL_GK8_S selects it from load M. */
#define PL_GK8_Q(ED, K, T) (((T) / (ED)) * (K))
#define PL_GK8_I(ED, K, T) ((PL_GK8_Q(ED, K, T) % (8 / (ED))) * (ED) + (T) % (ED))
#define PL_GK8_S(ED, K, M, T) (PL_GK8_Q(ED, K, T) / (8 / (ED)) == (M) ? -1 : 0)
#define PL_GK8_IDX(ED, K)                                                                                \
    {PL_GK8_I(ED, K, 0), PL_GK8_I(ED, K, 1), PL_GK8_I(ED, K, 2), PL_GK8_I(ED, K, 3),                     \
     PL_GK8_I(ED, K, 4), PL_GK8_I(ED, K, 5), PL_GK8_I(ED, K, 6), PL_GK8_I(ED, K, 7)}
#define PL_GK8_SEL(ED, K, M)                                                                             \
    {PL_GK8_S(ED, K, M, 0), PL_GK8_S(ED, K, M, 1), PL_GK8_S(ED, K, M, 2), PL_GK8_S(ED, K, M, 3),         \
     PL_GK8_S(ED, K, M, 4), PL_GK8_S(ED, K, M, 5), PL_GK8_S(ED, K, M, 6), PL_GK8_S(ED, K, M, 7)}
#define PL_GK8_SELS(ED, K)                                                                               \
    {PL_GK8_SEL(ED, K, 0), PL_GK8_SEL(ED, K, 1), PL_GK8_SEL(ED, K, 2), PL_GK8_SEL(ED, K, 3),             \
     PL_GK8_SEL(ED, K, 4), PL_GK8_SEL(ED, K, 5), PL_GK8_SEL(ED, K, 6), PL_GK8_SEL(ED, K, 7)}

/* [element size 4, 8][k - 3][dword] and [size][k - 3][load m][dword]. */
static _Alignas(32) const int32_t pl_gk8_idx[2][6][8] = {
    {PL_GK8_IDX(1, 3), PL_GK8_IDX(1, 4), PL_GK8_IDX(1, 5), PL_GK8_IDX(1, 6), PL_GK8_IDX(1, 7), PL_GK8_IDX(1, 8)},
    {PL_GK8_IDX(2, 3), PL_GK8_IDX(2, 4), PL_GK8_IDX(2, 5), PL_GK8_IDX(2, 6), PL_GK8_IDX(2, 7), PL_GK8_IDX(2, 8)},
};
static _Alignas(32) const int32_t pl_gk8_sel[2][6][8][8] = {
    {PL_GK8_SELS(1, 3), PL_GK8_SELS(1, 4), PL_GK8_SELS(1, 5), PL_GK8_SELS(1, 6), PL_GK8_SELS(1, 7),
     PL_GK8_SELS(1, 8)},
    {PL_GK8_SELS(2, 3), PL_GK8_SELS(2, 4), PL_GK8_SELS(2, 5), PL_GK8_SELS(2, 6), PL_GK8_SELS(2, 7),
     PL_GK8_SELS(2, 8)},
};

PL_AVX2 PL_INLINE __m256i pl_ld32(const void *p) { return _mm256_loadu_si256((const __m256i *)p); }

PL_AVX2 PL_INLINE void pl_gk32(const char *src, int64_t ssb, char *dst, int64_t dsb, int64_t n, int64_t rows,
                                const int K, const int E)
{
    const int64_t per = 32 / E;
    const int z = E == 4 ? 0 : 1;
    const __m256i idx = pl_ld32(pl_gk8_idx[z][K - 3]);
    __m256i sel[8];
    for (int m = 1; m < K; m++)
        sel[m] = pl_ld32(pl_gk8_sel[z][K - 3][m]);
    for (int64_t r = 0; r < rows; r++, src += ssb, dst += dsb) {
        int64_t i = 0;
        for (; i + per < n; i += per) {
            const char *s = src + i * K * E;
            __m256i v = _mm256_permutevar8x32_epi32(pl_ld32(s), idx);
            for (int m = 1; m < K; m++)
                v = _mm256_blendv_epi8(v, _mm256_permutevar8x32_epi32(pl_ld32(s + 32 * m), idx), sel[m]);
            _mm256_storeu_si256((__m256i *)(void *)(dst + i * E), v);
        }
        for (; i < n; i++)
            memcpy(dst + i * E, src + i * K * E, (size_t)E);
    }
}

/* ---------------------------------------------------------- AVX-512 steps */

static const int16_t pl_iota16[32] = {0,  1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11, 12, 13, 14, 15,
                                      16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31};

/* The permute index of every lane, (j * K) mod lanes, for E-byte elements. */
PL_AVX512 PL_INLINE __m512i pl_gk64_index(const int K, const int E)
{
    if (E == 2)
        return _mm512_and_si512(_mm512_mullo_epi16(_mm512_loadu_si512(pl_iota16), _mm512_set1_epi16((short)K)),
                                _mm512_set1_epi16(31));
    if (E == 4)
        return _mm512_and_si512(
            _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                               _mm512_set1_epi32(K)),
            _mm512_set1_epi32(15));
    return _mm512_and_si512(_mm512_mul_epu32(_mm512_setr_epi64(0, 1, 2, 3, 4, 5, 6, 7), _mm512_set1_epi64(K)),
                            _mm512_set1_epi64(7));
}

/* Lanes [lo, hi) of a mask, 0 <= lo <= hi <= 64. */
PL_INLINE uint64_t pl_lanes(int64_t lo, int64_t hi)
{
    const uint64_t below_hi = hi >= 64 ? ~(uint64_t)0 : ((uint64_t)1 << hi) - 1;
    return lo >= 64 ? 0 : below_hi & ~(((uint64_t)1 << lo) - 1);
}

PL_AVX512 PL_INLINE __m512i pl_gk64_load(uint64_t m, const char *p, const int E)
{
    return E == 2 ? _mm512_maskz_loadu_epi16((__mmask32)m, p)
           : E == 4 ? _mm512_maskz_loadu_epi32((__mmask16)m, p)
                    : _mm512_maskz_loadu_epi64((__mmask8)m, p);
}

PL_AVX512 PL_INLINE __m512i pl_gk64_permute(__m512i v, uint64_t m, __m512i idx, __m512i x, const int E)
{
    return E == 2 ? _mm512_mask_permutexvar_epi16(v, (__mmask32)m, idx, x)
           : E == 4 ? _mm512_mask_permutexvar_epi32(v, (__mmask16)m, idx, x)
                    : _mm512_mask_permutexvar_epi64(v, (__mmask8)m, idx, x);
}

PL_AVX512 PL_INLINE __m512i pl_gk64_permute_all(__m512i idx, __m512i x, const int E)
{
    return E == 2 ? _mm512_permutexvar_epi16(idx, x) : E == 4 ? _mm512_permutexvar_epi32(idx, x)
                                                      : _mm512_permutexvar_epi64(idx, x);
}

PL_AVX512 PL_INLINE void pl_gk64_store(char *p, uint64_t m, __m512i v, const int E)
{
    if (E == 2)
        _mm512_mask_storeu_epi16(p, (__mmask32)m, v);
    else if (E == 4)
        _mm512_mask_storeu_epi32(p, (__mmask16)m, v);
    else
        _mm512_mask_storeu_epi64(p, (__mmask8)m, v);
}

/* A step-k gather on 64-byte vectors with the helpers PFX##_index, _load,
 * _permute, _permute_all and _store (target ATTR). */
#define PL_DEFINE_GK64(NAME, ATTR, PFX)                                                                 \
ATTR PL_INLINE void NAME(const char *src, int64_t ssb, char *dst, int64_t dsb, int64_t n, int64_t rows, \
                        const int K, const int E)                                                       \
{                                                                                                       \
    const int64_t W = 64 / E; /* lanes */                                                               \
    const __m512i idx = PFX##_index(K, E);                                                              \
    uint64_t sel[8]; /* the lanes load m fills: j with m * W <= j * K < (m + 1) * W */                  \
    for (int m = 0; m < K; m++)                                                                         \
        sel[m] = pl_lanes((m * W + K - 1) / K, ((m + 1) * W + K - 1) / K);                              \
    for (int64_t r = 0; r < rows; r++, src += ssb, dst += dsb) {                                        \
        int64_t i = 0;                                                                                  \
        for (; i + W < n; i += W) {                                                                     \
            const char *s = src + i * K * E;                                                            \
            __m512i v = PFX##_permute_all(idx, _mm512_loadu_si512(s), E);                               \
            for (int m = 1; m < K; m++)                                                                 \
                v = PFX##_permute(v, sel[m], idx, _mm512_loadu_si512(s + 64 * m), E);                   \
            _mm512_storeu_si512(dst + i * E, v);                                                        \
        }                                                                                               \
        if (i < n) { /* the last 1 to W elements: masked loads of the src elements up to the last */    \
            const char *s = src + i * K * E;                                                            \
            const int64_t rem = n - i, need = (rem - 1) * K + 1;                                        \
            __m512i v = _mm512_setzero_si512();                                                         \
            for (int m = 0; m < K && need > m * W; m++) {                                               \
                const int64_t last = need - m * W < W ? need - m * W : W; /* lanes of load m */         \
                v = PFX##_permute(v, sel[m], idx, PFX##_load(pl_lanes(0, last), s + 64 * m, E), E);     \
            }                                                                                           \
            PFX##_store(dst + i * E, pl_lanes(0, rem), v, E);                                           \
        }                                                                                               \
    }                                                                                                   \
}

/* The same for bytes: vpermb is AVX-512 VBMI (Ice Lake, Zen 4 and later). */
PL_VBMI PL_INLINE __m512i pl_gk64b_index(const int K, const int E)
{
    (void)E; /* bytes 2t and 2t + 1 of each 16-bit lane t */
    const __m512i even = _mm512_mullo_epi16(_mm512_loadu_si512(pl_iota16), _mm512_set1_epi16((short)(2 * K)));
    const __m512i odd = _mm512_add_epi16(even, _mm512_set1_epi16((short)K)), m = _mm512_set1_epi16(63);
    return _mm512_or_si512(_mm512_and_si512(even, m), _mm512_slli_epi16(_mm512_and_si512(odd, m), 8));
}
PL_VBMI PL_INLINE __m512i pl_gk64b_load(uint64_t m, const char *p, const int E)
{
    (void)E;
    return _mm512_maskz_loadu_epi8((__mmask64)m, p);
}
PL_VBMI PL_INLINE __m512i pl_gk64b_permute(__m512i v, uint64_t m, __m512i idx, __m512i x, const int E)
{
    (void)E;
    return _mm512_mask_permutexvar_epi8(v, (__mmask64)m, idx, x);
}
PL_VBMI PL_INLINE __m512i pl_gk64b_permute_all(__m512i idx, __m512i x, const int E)
{
    (void)E;
    return _mm512_permutexvar_epi8(idx, x);
}
PL_VBMI PL_INLINE void pl_gk64b_store(char *p, uint64_t m, __m512i v, const int E)
{
    (void)E;
    _mm512_mask_storeu_epi8(p, (__mmask64)m, v);
}

PL_DEFINE_GK64(pl_gk64, PL_AVX512, pl_gk64)
PL_DEFINE_GK64(pl_gk64b, PL_VBMI, pl_gk64b)

/* ------------------------------------------------------------- entry points */

/* k is 3 to 8 (plan.c checks); each case a body with k a constant. */
#define PL_GK_ENTRY(NAME, ATTR, BODY, E)                                                                 \
    ATTR void NAME(const char *src, int64_t ssb, char *dst, int64_t dsb, int64_t n, int64_t rows, int k)  \
    {                                                                                                    \
        assert(k >= 3 && k <= 8);                                                                        \
        switch (k) {                                                                                     \
        case 3: BODY(src, ssb, dst, dsb, n, rows, 3, E); return;                                         \
        case 4: BODY(src, ssb, dst, dsb, n, rows, 4, E); return;                                         \
        case 5: BODY(src, ssb, dst, dsb, n, rows, 5, E); return;                                         \
        case 6: BODY(src, ssb, dst, dsb, n, rows, 6, E); return;                                         \
        case 7: BODY(src, ssb, dst, dsb, n, rows, 7, E); return;                                         \
        default: BODY(src, ssb, dst, dsb, n, rows, 8, E); return;                                        \
        }                                                                                                \
    }

PL_GK_ENTRY(_pylayout_gatherk1_avx2, PL_AVX2, pl_gk16, 1)
PL_GK_ENTRY(_pylayout_gatherk2_avx2, PL_AVX2, pl_gk16, 2)
PL_GK_ENTRY(_pylayout_gatherk4_avx2, PL_AVX2, pl_gk32, 4)
PL_GK_ENTRY(_pylayout_gatherk8_avx2, PL_AVX2, pl_gk32, 8)
PL_GK_ENTRY(pl_gatherk1_vbmi, PL_VBMI static, pl_gk64b, 1)
PL_GK_ENTRY(_pylayout_gatherk2_avx512, PL_AVX512, pl_gk64, 2)
PL_GK_ENTRY(_pylayout_gatherk4_avx512, PL_AVX512, pl_gk64, 4)
PL_GK_ENTRY(_pylayout_gatherk8_avx512, PL_AVX512, pl_gk64, 8)

/* The AVX-512 table's 1-byte kernel: vpermb where the CPU has VBMI, else
 * the AVX2 one.  (256,256,k)[..., 0] uint8, 1 thread, in L2 on the Intel
 * Xeon dev VM, GB/s of dst, AVX2 / VBMI: k = 3 15.8 / 17.8, k = 4 12.3 /
 * 16.5, k = 8 7.2 / 11.2; level from L3 and memory. */
static _Atomic int pl_has_vbmi = -1;

void _pylayout_gatherk1_avx512(const char *src, int64_t ssb, char *dst, int64_t dsb, int64_t n, int64_t rows, int k)
{
    int vbmi = atomic_load_explicit(&pl_has_vbmi, memory_order_relaxed);
    if (vbmi < 0) { /* racing first calls all read the same answer */
        vbmi = (_pylayout_cpu_features() & PL_CPU_AVX512VBMI) != 0;
        atomic_store_explicit(&pl_has_vbmi, vbmi, memory_order_relaxed);
    }
    (vbmi ? pl_gatherk1_vbmi : _pylayout_gatherk1_avx2)(src, ssb, dst, dsb, n, rows, k);
}

#else

/* ISO C forbids an empty translation unit. */
typedef int pylayout_gather_x86_unused;

#endif
