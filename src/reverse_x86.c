/*
 * reverse_x86.c - AVX2 kernels that copy a row backwards (see
 * _pylayout_reverse_fn in kernels.h): a flipped innermost dim, as in
 * NumPy's a[:, ::-1] or np.fliplr.  32 bytes per step: one load, a permute
 * that reverses the elements, one store; the rest element by element.
 * Compiled with per-function target attributes; copy_x86.c puts them in
 * the AVX2 and AVX-512 tables.
 */
#include <string.h>

#include "kernels.h"

#if defined(PYLAYOUT_HAVE_X86_KERNELS)

#include <immintrin.h>

#define PL_AVX2 __attribute__((target("avx2")))

/* Reverses the SIZE-byte elements of a 32-byte vector. */
PL_AVX2 static inline __m256i pl_reverse32_1(__m256i v)
{
    const __m256i bytes = _mm256_setr_epi8(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 15, 14, 13, 12, 11,
                                           10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
    return _mm256_permute4x64_epi64(_mm256_shuffle_epi8(v, bytes), 0x4E);
}
PL_AVX2 static inline __m256i pl_reverse32_2(__m256i v)
{
    const __m256i words = _mm256_setr_epi8(14, 15, 12, 13, 10, 11, 8, 9, 6, 7, 4, 5, 2, 3, 0, 1, 14, 15, 12, 13, 10,
                                           11, 8, 9, 6, 7, 4, 5, 2, 3, 0, 1);
    return _mm256_permute4x64_epi64(_mm256_shuffle_epi8(v, words), 0x4E);
}
PL_AVX2 static inline __m256i pl_reverse32_4(__m256i v)
{
    return _mm256_permutevar8x32_epi32(v, _mm256_setr_epi32(7, 6, 5, 4, 3, 2, 1, 0));
}
PL_AVX2 static inline __m256i pl_reverse32_8(__m256i v) { return _mm256_permute4x64_epi64(v, 0x1B); }
PL_AVX2 static inline __m256i pl_reverse32_16(__m256i v) { return _mm256_permute4x64_epi64(v, 0x4E); }

/* dst[i] = src[-i] for i < n: element i of the row is SIZE * i bytes below
 * src.  The elements past the last whole step first, one by one; then the
 * steps from the row's far end back to its start, each loading the 32
 * bytes that end with element k's (so src is read in ascending order) and
 * storing them reversed at element k of dst.  Loads in descending order
 * measured slower on rows that are not the whole copy: the hardware
 * prefetcher follows each page's descending stream late (float32, rows of
 * 1 KiB, 64 MB past L3: 5.4 against 20 GB/s; rows of 8 KiB: 15 against 22;
 * one row of 16 MB: 34 either way). */
#define PL_DEFINE_REVERSE(SIZE)                                                                          \
    PL_AVX2 void _pylayout_reverse##SIZE##_avx2(const char *src, char *dst, int64_t n)                   \
    {                                                                                                    \
        const int64_t per = 32 / (SIZE), whole = n - n % per;                                            \
        for (int64_t i = whole; i < n; i++)                                                              \
            memcpy(dst + i * (SIZE), src - i * (SIZE), SIZE);                                            \
        for (int64_t k = whole - per; k >= 0; k -= per) {                                                \
            __m256i v = _mm256_loadu_si256((const __m256i *)(const void *)(src - (k + per - 1) * (SIZE))); \
            _mm256_storeu_si256((__m256i *)(void *)(dst + k * (SIZE)), pl_reverse32_##SIZE(v));         \
        }                                                                                                \
    }

/* Groups of P = g / size elements, each reversed in place, dst[j][e] =
 * src[j][P - 1 - e] for j < ngroups, both packed (g bytes a group, at most
 * 16): OpenCV's BGR pixels as RGB, img[..., ::-1].  src is the first
 * group's lowest byte.  One 16-byte shuffle per floor(16 / g) groups; each
 * store also writes the bytes past its groups, which the next step writes
 * again, so the last step that would pass the row's end is left to the
 * byte loop. */
PL_AVX2 void _pylayout_reverse_groups_avx2(const char *src, char *dst, int64_t ngroups, int64_t g, int64_t size)
{
    const int64_t k = 16 / g, step = k * g;
    _Alignas(16) char idx[16];
    for (int64_t b = 0; b < 16; b++) { /* byte b of a step: byte r of element e of group q */
        const int64_t q = b / g, e = b % g / size, r = b % size;
        idx[b] = (char)(b < step ? q * g + (g / size - 1 - e) * size + r : 0x80);
    }
    const __m128i pattern = _mm_load_si128((const __m128i *)(const void *)idx);
    const int64_t total = ngroups * g;
    int64_t o = 0;
    for (; o + 16 <= total; o += step)
        _mm_storeu_si128((__m128i *)(void *)(dst + o),
                         _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(const void *)(src + o)), pattern));
    for (; o < total; o += g) /* the groups left, one at a time */
        for (int64_t e = 0; e < g; e += size)
            memcpy(dst + o + e, src + o + g - size - e, (size_t)size);
}

PL_DEFINE_REVERSE(1)
PL_DEFINE_REVERSE(2)
PL_DEFINE_REVERSE(4)
PL_DEFINE_REVERSE(8)
PL_DEFINE_REVERSE(16)

#endif
