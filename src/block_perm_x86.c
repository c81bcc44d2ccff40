/*
 * block_perm_x86.c - kernels for copies that permute the bytes inside
 * small blocks packed in both tensors (see _pylayout_block_perm in
 * kernels.h): a batch of small matrices transposed, (N,3,3) rotation
 * matrices by (0,2,1), (N,4,4) or (N,8,4); 7 x 7 feature maps transposed,
 * (16,512,7,7) by (0,1,3,2).  Each block's dst bytes are its src bytes in
 * a fixed order, so a vector of dst is a shuffle of the vectors of src
 * that hold the same blocks: no stride, no tile, no edge.
 *
 * The kernels walk superblocks, the T = k * S bytes of k whole blocks of S
 * bytes, k chosen by the prepare functions:
 *  - AVX2: superblocks of at most 64 bytes (or one block of up to 128),
 *    in 16-byte chunks; each dst chunk is the OR of byte shuffles of the
 *    src chunks it draws from, each control zeroing the bytes another
 *    chunk holds;
 *  - AVX-512 VBMI: superblocks of at most 256 bytes, in 64-byte vectors;
 *    each dst vector is one vpermb (one vector of src), one vpermt2b (two)
 *    or two vpermt2b and a blend on bit 7 of the index (three or four).
 * Larger blocks of 4-, 8- and 16-byte elements go element by element
 * (kernels_portable.c's moves), and on AVX2 so do blocks of 4-byte
 * elements past 80 bytes (PL_BP_AVX2_MAX_SHUFFLED).
 * Loads and stores stay inside the n blocks a call is given (the tail
 * goes through a buffer on AVX2, masked on AVX-512), so threads copying
 * neighbouring runs never write each other's bytes.
 */
#include <stdint.h>
#include <string.h>

#include "cpu_features.h"
#include "kernels.h"

#if defined(PYLAYOUT_HAVE_X86_KERNELS)

#include <immintrin.h>

#define PL_AVX2 __attribute__((target("avx2")))
#define PL_VBMI __attribute__((target("avx512f,avx512bw,avx512vbmi")))
#define PL_INLINE static inline __attribute__((always_inline))

/* Fills from[j] for the T bytes of a superblock of blocks of S bytes,
 * elements of e: the src byte, counted from the superblock's first, that
 * its dst byte j copies (the same block's element eperm[(j % S) / e]). */
static void pl_bp_from(const uint8_t *eperm, int64_t S, int64_t e, int64_t T, uint8_t *from)
{
    for (int64_t b = 0; b < T; b += S)
        for (int64_t j = 0; j < S; j += e)
            for (int64_t c = 0; c < e; c++)
                from[b + j + c] = (uint8_t)(b + eperm[j / e] * e + c);
}

/* Blocks the shuffle kernels of this file do not take, or take slower:
 * those of 4-, 8- and 16-byte elements as element moves, which beat the
 * tiles there (float64 6 x 6 and 7 x 7; float32 7 x 7, see
 * PL_BP_AVX2_MAX_SHUFFLED); the rest keep their routes. */
static bool pl_bp_moves(_pylayout_block_perm *t, int64_t S, int64_t e, const uint8_t *eperm)
{
    return e >= 4 && _pylayout_block_perm_moves(t, S, e, eperm);
}

/* ------------------------------------------------------------------- AVX2 */

PL_AVX2 PL_INLINE void pl_bp16(const char *s, char *d, const _pylayout_block_perm *t, const int NV)
{
    __m128i in[8];
    for (int v = 0; v < NV; v++)
        in[v] = _mm_loadu_si128((const __m128i *)(const void *)(s + 16 * v));
    for (int c = 0; c < NV; c++) {
        __m128i out = _mm_setzero_si128();
        for (int v = 0; v < NV; v++)
            if (t->from[c] >> v & 1)
                out = _mm_or_si128(out, _mm_shuffle_epi8(in[v], _mm_loadu_si128((const __m128i *)(const void *)(
                                                                    t->ctl + 16 * (8 * c + v)))));
        _mm_storeu_si128((__m128i *)(void *)(d + 16 * c), out);
    }
}

/* The superblocks whose 16 * NV bytes lie inside the call's, in place;
 * the rest, fewer bytes than one superblock, through a buffer. */
PL_AVX2 PL_INLINE void pl_bp16_loop(const char *src, char *dst, int64_t n, const _pylayout_block_perm *t,
                                    const int NV)
{
    const int64_t total = n * t->S, T = t->T;
    int64_t o = 0;
    for (; o + 16 * NV <= total; o += T)
        pl_bp16(src + o, dst + o, t, NV);
    if (o < total) {
        _Alignas(16) char in[128] = {0}, out[128];
        memcpy(in, src + o, (size_t)(total - o));
        pl_bp16(in, out, t, NV);
        memcpy(dst + o, out, (size_t)(total - o));
    }
}

static PL_AVX2 void pl_bp16_run(const char *src, char *dst, int64_t n, const _pylayout_block_perm *t)
{
    switch (t->nvec) {
    case 1: pl_bp16_loop(src, dst, n, t, 1); return;
    case 2: pl_bp16_loop(src, dst, n, t, 2); return;
    case 3: pl_bp16_loop(src, dst, n, t, 3); return;
    case 4: pl_bp16_loop(src, dst, n, t, 4); return;
    case 5: pl_bp16_loop(src, dst, n, t, 5); return;
    case 6: pl_bp16_loop(src, dst, n, t, 6); return;
    case 7: pl_bp16_loop(src, dst, n, t, 7); return;
    default: pl_bp16_loop(src, dst, n, t, 8); return;
    }
}

/* The largest blocks of 4-byte elements the AVX2 shuffles take: a dst
 * chunk costs a shuffle for each src chunk it draws from, and in larger
 * blocks element moves (one load, one store each) ran faster.  7 x 7
 * feature maps transposed, (64,512,7,7) float32 by (0,1,3,2), went
 * through the tiles (more than 128 bytes) at 1.2-2.9 GB/s, half of
 * torch's speed.  Measured on a 2-core AMD EPYC (Zen 3, AVX2 only) VM,
 * (100000, r, c) float32 by (0,2,1), torch tensors, copy_into, shuffles
 * and moves alternating in one process (a throwaway switch), moves' speed
 * over the shuffles' (median of 3-5 rounds): 3 x 3 0.78, 4 x 4 0.62, 2 x
 * 6 0.63, 3 x 6 0.98, 2 x 9 0.83, 4 x 5 0.94; 3 x 7 1.33-1.39, 7 x 3 1.26,
 * 2 x 11 1.30, 4 x 6 1.15, 3 x 8 1.12, 5 x 5 1.55 (2 threads 1.47), 6 x 5
 * 1.63, (20000,4,2,4) by (0,3,2,1) 1.51; beyond the shuffles, 6 x 6 3.3,
 * (64,512,7,7) 4.1 (2 threads: 2.1-2.9 -> 9.5-13.3 GB/s, torch 4.1).  2-byte
 * elements stay with the shuffles, which ran 2-6x faster than moves. */
#define PL_BP_AVX2_MAX_SHUFFLED 80

/* Superblocks of at most 64 bytes, or one block of up to 128 (80 for
 * 4-byte elements). */
bool _pylayout_block_perm_avx2(_pylayout_block_perm *t, int64_t S, int64_t e, const uint8_t *eperm)
{
    if (S < 2 || S > 128 || (e == 4 && S > PL_BP_AVX2_MAX_SHUFFLED))
        return pl_bp_moves(t, S, e, eperm);
    t->S = S;
    t->T = S > 64 ? S : 64 / S * S;
    t->nvec = (int)((t->T + 15) / 16);
    uint8_t from[128];
    pl_bp_from(eperm, S, e, t->T, from);
    memset(t->ctl, 0x80, sizeof t->ctl);
    memset(t->from, 0, sizeof t->from);
    for (int j = 0; j < t->T; j++) {
        const int c = j / 16, f = from[j];
        t->ctl[16 * (8 * c + f / 16) + j % 16] = (uint8_t)(f % 16);
        t->from[c] |= (uint16_t)(1u << (f / 16));
    }
    t->run = pl_bp16_run;
    return true;
}

/* ---------------------------------------------------------- AVX-512 VBMI */

PL_INLINE uint64_t pl_bp_lanes(int64_t n) /* lanes [0, n), n clamped to [0, 64] */
{
    return n <= 0 ? 0 : n >= 64 ? ~(uint64_t)0 : ((uint64_t)1 << n) - 1;
}

PL_VBMI PL_INLINE __m512i pl_bp64_vector(const __m512i *x, const uint8_t *ctl, const int NV)
{
    const __m512i idx = _mm512_loadu_si512(ctl);
    if (NV == 1)
        return _mm512_permutexvar_epi8(idx, x[0]);
    const __m512i lo = _mm512_permutex2var_epi8(x[0], idx, x[1]);
    if (NV == 2)
        return lo;
    const __m512i hi = _mm512_permutex2var_epi8(x[2], idx, x[NV == 4 ? 3 : 2]);
    return _mm512_mask_blend_epi8(_mm512_movepi8_mask(idx), lo, hi); /* bit 7: from the third or fourth */
}

/* One superblock of m <= T bytes (m < T only at the end), its loads and
 * stores masked to them where `masked`. */
PL_VBMI PL_INLINE void pl_bp64(const char *s, char *d, const _pylayout_block_perm *t, const int NV, int64_t m,
                               const bool masked)
{
    __m512i x[4];
    for (int v = 0; v < NV; v++)
        x[v] = masked ? _mm512_maskz_loadu_epi8((__mmask64)pl_bp_lanes(m - 64 * v), s + 64 * v)
                      : _mm512_loadu_si512(s + 64 * v);
    for (int v = 0; v < NV; v++) {
        const __m512i out = pl_bp64_vector(x, t->ctl + 64 * v, NV);
        if (masked)
            _mm512_mask_storeu_epi8(d + 64 * v, (__mmask64)pl_bp_lanes(m - 64 * v), out);
        else
            _mm512_storeu_si512(d + 64 * v, out);
    }
}

PL_VBMI PL_INLINE void pl_bp64_loop(const char *src, char *dst, int64_t n, const _pylayout_block_perm *t,
                                    const int NV)
{
    const int64_t total = n * t->S, T = t->T;
    int64_t o = 0;
    for (; o + 64 * NV <= total; o += T)
        pl_bp64(src + o, dst + o, t, NV, T, false);
    for (; o < total; o += T) /* one superblock at most, maybe short */
        pl_bp64(src + o, dst + o, t, NV, total - o < T ? total - o : T, true);
}

static PL_VBMI void pl_bp64_run(const char *src, char *dst, int64_t n, const _pylayout_block_perm *t)
{
    switch (t->nvec) {
    case 1: pl_bp64_loop(src, dst, n, t, 1); return;
    case 2: pl_bp64_loop(src, dst, n, t, 2); return;
    case 3: pl_bp64_loop(src, dst, n, t, 3); return;
    default: pl_bp64_loop(src, dst, n, t, 4); return;
    }
}

/* Superblocks of 1 to 4 vectors: the fewest instructions a byte, counting
 * a load, a store and one shuffle a vector for one or two vectors, and two
 * shuffles and a blend for three or four. */
static int pl_bp64_vectors(int64_t S)
{
    static const int ops[5] = {0, 3, 6, 15, 20};
    int best = 0;
    for (int v = (int)((S + 63) / 64); v <= 4; v++)
        if (best == 0 || ops[v] * (64 * best / S * S) < ops[best] * (64 * v / S * S))
            best = v;
    return best;
}

/* Without VBMI, the AVX2 kernel. */
bool _pylayout_block_perm_avx512(_pylayout_block_perm *t, int64_t S, int64_t e, const uint8_t *eperm)
{
    if ((_pylayout_cpu_features() & PL_CPU_AVX512VBMI) == 0)
        return _pylayout_block_perm_avx2(t, S, e, eperm);
    if (S < 2 || S > 256)
        return pl_bp_moves(t, S, e, eperm);
    t->S = S;
    t->nvec = pl_bp64_vectors(S);
    t->T = 64 * t->nvec / S * S;
    memset(t->ctl, 0, sizeof t->ctl);
    pl_bp_from(eperm, S, e, t->T, t->ctl);
    t->run = pl_bp64_run;
    return true;
}

#else

/* ISO C forbids an empty translation unit. */
typedef int pylayout_block_perm_x86_unused;

#endif
