/*
 * copy_x86.c - x86-64 kernels for pylayout_copy: in-register transposes,
 * step-2 gathers and streaming stores, with SSE2 (baseline x86-64, always
 * available), AVX2 and AVX-512 F+BW (compiled with per-function target
 * attributes, chosen at run time by cpu_features.c; never a global -mavx2
 * or -march=native), and the x86 kernel tables (which also hold
 * complex_x86.c's interleaves).
 *
 * Every micro-kernel moves a VxV block: src rows are ssa bytes apart and
 * unit-stride along the block's columns; dst rows are dsb bytes apart.  The
 * shuffles are bit-exact (no arithmetic), so float loads are fine for any data.
 */
#include "kernels.h"
#include "tile_bytes_x86.h"

#if defined(PYLAYOUT_HAVE_X86_KERNELS)

#include <emmintrin.h>
#include <immintrin.h>

#define PL_SSE2 /* baseline */
/* prfchw: PREFETCHW, which the wrapped tiles use for their next dst lines;
 * every CPU with AVX2 runs it (Haswell, which predates its CPUID bit, as a
 * no-op, as all Intel cores before Broadwell do). */
#define PL_AVX2 __attribute__((target("avx2,prfchw")))

/* ------------------------------------------------------------------ SSE2 */

/* Each pl_tNxN_* loads a VxV block (V src rows ssa bytes apart) and leaves
 * its transpose in o[]: o[k] is column k of the block, i.e. dst row k.
 * The *_regs ones take the rows in registers instead; PL_DEFINE_LOADED
 * makes NAME, the loading one, from REGS and LOADU (one row of V). */
#define PL_DEFINE_LOADED(NAME, ATTR, V, VEC, LOADU, REGS)                                                \
    ATTR static inline void NAME(const char *s, int64_t ssa, VEC o[V])                                   \
    {                                                                                                    \
        VEC r[V];                                                                                        \
        _Pragma("GCC unroll 32") for (int k = 0; k < (V); k++)                                           \
            r[k] = LOADU(s + k * ssa);                                                                   \
        REGS(r, o);                                                                                      \
    }

static inline __m128i pl_loadu_si128c(const char *p) { return _mm_loadu_si128((const __m128i *)(const void *)p); }

/* 16x16 bytes: four rounds of interleaving (8, 16, 32, 64-bit units) of
 * the rows r[], o[k] column k. */
static inline void pl_t16x16_epi8_regs(const __m128i r[16], __m128i o[16])
{
    __m128i a[16], b[16], c[16];
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
        o[2 * q] = _mm_unpacklo_epi64(c[q], c[8 + q]);
        o[2 * q + 1] = _mm_unpackhi_epi64(c[q], c[8 + q]);
    }
}

PL_DEFINE_LOADED(pl_t16x16_epi8, PL_SSE2, 16, __m128i, pl_loadu_si128c, pl_t16x16_epi8_regs)

/* 1-byte tiles with one side of 9 to 15 elements and the other of 16 or
 * more: uint8 images of 9-15 channels between NCHW and NHWC, more planes
 * than the thin kernels take and fewer than a 16x16 block has rows.  The
 * 16x16 blocks left such tiles wholly to their scalar edges (C = 12: 2.3-
 * 2.5 GB/s on an AVX2-only Zen 3, level with torch).  Without byte masks
 * (the AVX-512 table has its own, pl_tile1_thin_side_avx512), each block
 * takes the short side as two halves of 8 that overlap: where a is short,
 * src rows 0-7 and na-8..na-1, each dst row written as its first 8 bytes
 * and its last 8; where b is short, the first 8 and the last 8 bytes of
 * each src row, dst rows 0-7 and nb-8..nb-1.  Nothing outside the tile is
 * read or written; the bytes of the overlap are written twice, with the
 * same values.  The last block along the long side is moved back to end
 * with it.  The high half goes out through _mm_storeh_pi (movhps): GCC's
 * _mm_storeh_pd is a plain double store, undefined at an odd address and
 * flagged by UBSan.  Returns false for any other tile. */
static inline __m128i pl_load_halves(const char *lo, const char *hi)
{
    const __m128d l = _mm_castsi128_pd(_mm_loadl_epi64((const __m128i *)(const void *)lo));
    return _mm_castpd_si128(_mm_loadh_pd(l, (const double *)(const void *)hi));
}
#define PL_DEFINE_TILE1_HALVES(NAME, ATTR)                                                               \
    ATTR static bool NAME(const char *src, int64_t ssa, char *dst, int64_t dsb, int64_t na, int64_t nb) \
    {                                                                                                    \
        __m128i r[16], o[16];                                                                            \
        if (nb > 8 && nb < 16 && na >= 16) {                                                             \
            for (int64_t i0 = 0; i0 < na; i0 += 16) {                                                    \
                const int64_t i = i0 + 16 > na ? na - 16 : i0;                                           \
                _Pragma("GCC unroll 16") for (int k = 0; k < 16; k++) {                                  \
                    const char *s = src + (i + k) * ssa;                                                 \
                    r[k] = pl_load_halves(s, s + nb - 8);                                                \
                }                                                                                        \
                pl_t16x16_epi8_regs(r, o);                                                               \
                _Pragma("GCC unroll 8") for (int c = 0; c < 8; c++) {                                    \
                    _mm_storeu_si128((__m128i *)(void *)(dst + c * dsb + i), o[c]);                      \
                    _mm_storeu_si128((__m128i *)(void *)(dst + (nb - 8 + c) * dsb + i), o[8 + c]);       \
                }                                                                                        \
            }                                                                                            \
            return true;                                                                                 \
        }                                                                                                \
        if (na > 8 && na < 16 && nb >= 16) {                                                             \
            for (int64_t j0 = 0; j0 < nb; j0 += 16) {                                                    \
                const int64_t j = j0 + 16 > nb ? nb - 16 : j0;                                           \
                _Pragma("GCC unroll 8") for (int k = 0; k < 8; k++) {                                    \
                    r[k] = pl_loadu_si128c(src + k * ssa + j);                                           \
                    r[8 + k] = pl_loadu_si128c(src + (na - 8 + k) * ssa + j);                            \
                }                                                                                        \
                pl_t16x16_epi8_regs(r, o);                                                               \
                _Pragma("GCC unroll 16") for (int c = 0; c < 16; c++) {                                  \
                    char *d = dst + (j + c) * dsb;                                                       \
                    _mm_storel_epi64((__m128i *)(void *)d, o[c]);                                        \
                    _mm_storeh_pi((__m64 *)(void *)(d + na - 8), _mm_castsi128_ps(o[c]));                \
                }                                                                                        \
            }                                                                                            \
            return true;                                                                                 \
        }                                                                                                \
        return false;                                                                                    \
    }
PL_DEFINE_TILE1_HALVES(pl_tile1_halves_sse2, PL_SSE2)

/* 8x8 of 16-bit elements. */
static inline void pl_t8x8_epi16_regs(const __m128i r[8], __m128i o[8])
{
    __m128i a0 = _mm_unpacklo_epi16(r[0], r[1]), a1 = _mm_unpackhi_epi16(r[0], r[1]);
    __m128i a2 = _mm_unpacklo_epi16(r[2], r[3]), a3 = _mm_unpackhi_epi16(r[2], r[3]);
    __m128i a4 = _mm_unpacklo_epi16(r[4], r[5]), a5 = _mm_unpackhi_epi16(r[4], r[5]);
    __m128i a6 = _mm_unpacklo_epi16(r[6], r[7]), a7 = _mm_unpackhi_epi16(r[6], r[7]);
    __m128i b0 = _mm_unpacklo_epi32(a0, a2), b1 = _mm_unpackhi_epi32(a0, a2);
    __m128i b2 = _mm_unpacklo_epi32(a4, a6), b3 = _mm_unpackhi_epi32(a4, a6);
    __m128i b4 = _mm_unpacklo_epi32(a1, a3), b5 = _mm_unpackhi_epi32(a1, a3);
    __m128i b6 = _mm_unpacklo_epi32(a5, a7), b7 = _mm_unpackhi_epi32(a5, a7);
    o[0] = _mm_unpacklo_epi64(b0, b2);
    o[1] = _mm_unpackhi_epi64(b0, b2);
    o[2] = _mm_unpacklo_epi64(b1, b3);
    o[3] = _mm_unpackhi_epi64(b1, b3);
    o[4] = _mm_unpacklo_epi64(b4, b6);
    o[5] = _mm_unpackhi_epi64(b4, b6);
    o[6] = _mm_unpacklo_epi64(b5, b7);
    o[7] = _mm_unpackhi_epi64(b5, b7);
}

PL_DEFINE_LOADED(pl_t8x8_epi16, PL_SSE2, 8, __m128i, pl_loadu_si128c, pl_t8x8_epi16_regs)

/* 4x4 of 32-bit elements. */
static inline void pl_t4x4_ps(const char *s, int64_t ssa, __m128 o[4])
{
    __m128 r0 = _mm_loadu_ps((const float *)(const void *)(s));
    __m128 r1 = _mm_loadu_ps((const float *)(const void *)(s + ssa));
    __m128 r2 = _mm_loadu_ps((const float *)(const void *)(s + 2 * ssa));
    __m128 r3 = _mm_loadu_ps((const float *)(const void *)(s + 3 * ssa));
    __m128 t0 = _mm_unpacklo_ps(r0, r1), t1 = _mm_unpacklo_ps(r2, r3);
    __m128 t2 = _mm_unpackhi_ps(r0, r1), t3 = _mm_unpackhi_ps(r2, r3);
    o[0] = _mm_movelh_ps(t0, t1);
    o[1] = _mm_movehl_ps(t1, t0);
    o[2] = _mm_movelh_ps(t2, t3);
    o[3] = _mm_movehl_ps(t3, t2);
}

/* 2x2 of 64-bit elements. */
static inline void pl_t2x2_pd(const char *s, int64_t ssa, __m128d o[2])
{
    __m128d r0 = _mm_loadu_pd((const double *)(const void *)(s));
    __m128d r1 = _mm_loadu_pd((const double *)(const void *)(s + ssa));
    o[0] = _mm_unpacklo_pd(r0, r1);
    o[1] = _mm_unpackhi_pd(r0, r1);
}

/* 1x1 of 128-bit elements: a transpose of whole vectors is a plain move. */
static inline void pl_t1x1_si128(const char *s, int64_t ssa, __m128i o[1])
{
    (void)ssa;
    o[0] = _mm_loadu_si128((const __m128i *)(const void *)s);
}

/* Unaligned (cached) and streaming stores of one vector, by type. */
static inline void pl_storeu_si128(char *d, __m128i v) { _mm_storeu_si128((__m128i *)(void *)d, v); }
static inline void pl_storeu_ps(char *d, __m128 v) { _mm_storeu_ps((float *)(void *)d, v); }
static inline void pl_storeu_pd(char *d, __m128d v) { _mm_storeu_pd((double *)(void *)d, v); }
static inline void pl_stream_si128(char *d, __m128i v) { _mm_stream_si128((__m128i *)(void *)d, v); }
static inline void pl_stream_ps(char *d, __m128 v) { _mm_stream_ps((float *)(void *)d, v); }
static inline void pl_stream_pd(char *d, __m128d v) { _mm_stream_pd((double *)(void *)d, v); }
static void pl_sfence(void) { _mm_sfence(); }

/* A VxV micro-kernel (see PL_DEFINE_TILE) from a transpose and a store. */
#define PL_DEFINE_MICRO(NAME, ATTR, V, VEC, TRANSPOSE, STORE)                                           \
    ATTR static inline void NAME(const char *s, int64_t ssa, char *d, int64_t dsb)                      \
    {                                                                                                    \
        VEC o[V];                                                                                        \
        TRANSPOSE(s, ssa, o);                                                                            \
        for (int k = 0; k < (V); k++)                                                                    \
            STORE(d + k * dsb, o[k]);                                                                    \
    }

/* Streaming tile kernels, for copies much larger than the caches.  Each step
 * transposes K = 64 / (V * SIZE) blocks stacked along i and writes each of
 * the V dst rows as one whole 64-byte line of back-to-back streaming stores,
 * so the line goes to memory without the read-for-ownership a cached store
 * costs.  Measured on 8192x8192 float32 (tools/bench_copy.c, 1 thread):
 * ~2.5 GB/s with cached stores, ~9 GB/s streaming whole lines, ~1 GB/s
 * streaming the same lines in halves far apart.  Needs dst and dsb 64-byte
 * aligned (else the cached-store tile runs); plan.c gives it tiles one line
 * wide along i.  The caller fences (see _pylayout_kernels.fence). */
#define PL_DEFINE_STREAM_TILE(NAME, ATTR, SIZE, V, VEC, TRANSPOSE, STREAM, CACHED_TILE, MOVE2D)         \
    ATTR static void NAME(const char *src, int64_t ssa, char *dst, int64_t dsb, int64_t na, int64_t nb) \
    {                                                                                                    \
        enum { K = 64 / ((V) * (SIZE)), LINE = 64 / (SIZE) };                                            \
        if ((((uintptr_t)dst) | (uintptr_t)dsb) & 63) {                                                  \
            CACHED_TILE(src, ssa, dst, dsb, na, nb);                                                     \
            return;                                                                                      \
        }                                                                                                \
        const int64_t nal = na / LINE * LINE, nbv = nb / (V) * (V);                                      \
        for (int64_t i = 0; i < nal; i += LINE)                                                          \
            for (int64_t j = 0; j < nbv; j += (V)) {                                                     \
                VEC o[K][V];                                                                             \
                const char *s = src + i * ssa + j * (SIZE);                                              \
                char *d = dst + j * dsb + i * (SIZE);                                                    \
                for (int q = 0; q < K; q++)                                                              \
                    TRANSPOSE(s + q * (V) * ssa, ssa, o[q]);                                             \
                for (int k = 0; k < (V); k++)                                                            \
                    for (int q = 0; q < K; q++)                                                          \
                        STREAM(d + k * dsb + q * (V) * (SIZE), o[q][k]);                                 \
            }                                                                                            \
        if (nbv < nb)                                                                                    \
            MOVE2D(src + nbv * (SIZE), ssa, SIZE, dst + nbv * dsb, SIZE, dsb, nal, nb - nbv);            \
        if (nal < na)                                                                                    \
            CACHED_TILE(src + nal * ssa, ssa, dst + nal * (SIZE), dsb, na - nal, nb);                    \
    }

/* Wrapped tiles, for a dst whose rows are dense, a whole number of lines
 * long, and start h elements before a line (0 <= h < one line): NumPy's
 * buffers start 16 bytes into one, so a contiguous NumPy output of float32
 * rows is off by 4 elements in every row.  Blocks of a row then straddle
 * lines, and an Intel core pays about two stores for each.
 *
 * Read dst from its first line on as virtual rows of na elements: virtual
 * row J is dst row J from element h on, then the first h elements of row
 * J + 1.  Its element c is src row c + h at column J while c + h < na, and
 * src row c + h - na at column J + 1 after that.  Every virtual row starts
 * on a line, so VxV blocks of them (MICRO) store whole aligned vectors and
 * write each dst line once.  The blocks whose V virtual columns reach the
 * wrap (c + V > na - h) go through NAME##_edge, which gathers their rows
 * in a buffer.  The blocks go in passes of 512 bytes of virtual row (each
 * pass every V rows of the unit in turn), so the src rows a pass reads
 * stay in L1/L2 while the next rows use their next lines.  A unit writes
 * its own rows only: row 0's first h elements on their own (MOVE2D), and
 * its last virtual row only up to the wrap.  A dst on a line (h = 0) is
 * the same passes with no wrap.  Anything else (rows not dense, fewer than
 * V rows, dst not on a whole element) goes to TILE.  Figures: plan.c,
 * PL_WRAP_MAX_ROW_BYTES.  NAME##_back stores the same blocks in the
 * opposite order, last pass, row and column first (plan.c, pl_repeats).
 *
 * Dense rows that are not a whole number of lines long (float32 rows of
 * 260 elements) start at a different place in a line each, so h aligns
 * row 0's blocks only and the others' stores straddle lines: the same
 * walk, each dst line written in two stores, one block after the other.
 * The passes and the prefetch below still make it the faster route in L2
 * (plan.c, PL_WRAP_MAX_ROW_BYTES, session 43).
 *
 * Each block first prefetches for writing (PREFETCHW) the dst lines of
 * the pass's next block in the same V rows, when that block starts a line
 * (in rows off their lines: always, the line its store starts in) and
 * lies whole before the wrap.  In L2 the blocks' stores, V rows apart,
 * otherwise each wait for their line's read for ownership, which no
 * hardware prefetcher starts for stores hopping between rows (the same
 * loads and stores with no shuffles at all took as long as the transpose).
 * Measured on the 2-core Sapphire Rapids-class Xeon dev VM (session 42),
 * us, best of 9 batches, three alternated runs, without / with (/tmp
 * harness calling pylayout_copy, src R x C read transposed, buffers on a
 * line, as torch's are, unless said):
 *   AVX-512, 1 thread: float32 512 x 512 33.8-36.5 / 31.0-31.9, 512 x 200
 *   11.8 / 9.1-9.3, 2048 x 128 47.9-49.8 / 43.9-45.4; float64 256 x 256
 *   13.5-13.7 / 12.4-12.5, 256 x 1024 126-141 / 108-114; 16 bytes into a
 *   line: float32 512 x 512 37.9-40.7 / 33.5-35.0, float64 256 x 256
 *   16.3-17.0 / 13.9-14.0, 128 x 128 3.8 / 3.4;
 *   AVX-512, 2 threads: float32 512 x 512 15.6-16.6 / 14.8-15.1, 512 x 200
 *   7.2-7.5 / 6.2-6.3; float64 256 x 256 8.2-8.3 / 7.2; 16 bytes into a
 *   line: float64 256 x 256 9.7-9.8 / 8.2-8.6, 512 x 256 22.6-24.2 /
 *   19.0-21.0;
 *   AVX2, 1 thread: float32 2048 x 128 49.6-53.0 / 40.9-42.4, 512 x 200
 *   10.2-10.3 / 8.4-8.5; float64 512 x 256 47.7-48.1 / 38.0-39.0;
 *   the rest level (float32 1024 x 128, dst rows of 4 KiB: 18.4-19.0 /
 *   18.5-18.7).
 * Prefetching each next block's src lines as well, or the dst lines two
 * blocks on, lost (throwaway harness, one thread's half of a 512 x 512
 * float32 transpose: 13.9 us as here, 15.2 with src lines, 15.5 two
 * blocks on; passes of 1 or 2 KiB 14.3-14.9, of 256 bytes 17.2-18.2).
 * Prefetching in the plain tiles' 32 x 32 groups lost too (17.2 -> 18.0:
 * see pl_tile4_avx512).
 *
 * AVX2's blocks read 32 bytes of each src row, half a line.  NAME##_one
 * (PL_DEFINE_WRAP_TILE_ONE below), which the plan takes for a copy on one
 * thread (kernels.h, tile_wrap_one), stores the same blocks in groups of
 * G x G (G = 2), down the group's rows and then across, where src rows
 * start on lines: each group reads whole src lines and writes whole dst
 * lines.  With src rows a power of two apart, every line of a column falls
 * in two of L1's 64 sets, and a half line left for the next block row was
 * gone before it came.
 * Measured on a 2-core Zen 3 (AVX2, 32 KiB L1d, 512 KiB L2) VM, src R x C
 * on lines read transposed, pylayout_copy of both builds dlopened in one
 * process pinned to a core and alternated, best of 30, four rounds, speed
 * new / old, 1 thread (session 61): float32 512 x 512 1.31-1.32 (13.1 ->
 * 17.3 GB/s), 256 x 1024 1.85-1.94, 1024 x 256 1.07-1.20, 500 x 512
 * 1.28-1.32, 2048 x 128 1.08; float64 256 x 256 1.13-1.16, 512 x 256
 * 1.10-1.17; level: float32 128 x 128, 256 x 256, 384 x 384, float64 128 x
 * 128.  Src rows off their lines lost (float32 500 x 500 0.84-0.87, 512 x
 * 520 0.71-0.80: their 16 elements span two lines anyway) and keep single
 * blocks.  At 2 threads the groups lost (512 x 512, ten fresh processes
 * alternated, median 16.5 against 18.1 GB/s, with units of 32 to 128 rows
 * alike), so the plan keeps NAME there.  These figures hold while the
 * host is quiet: in stretches where the same copies ran 20 % slower (the
 * L3 is shared with other guests), groups and single blocks came out
 * level. */
#define PL_DEFINE_WRAP_TILE(NAME, ATTR, SIZE, V, VEC, TRANSPOSE, STORE, MICRO, TILE, MOVE2D)            \
    ATTR static void NAME##_edge(const char *src, int64_t ssa, char *d, int64_t dsb, int64_t na, int64_t h,   \
                                 int64_t c, int64_t J, bool last)                                        \
    {                                                                                                    \
        enum { ROW = (V) * (SIZE) };                                                                     \
        _Alignas(64) char buf[(V) * ROW];                                                                \
        for (int k = 0; k < (V); k++) {                                                                  \
            const int64_t r = c + k + h; /* src row of virtual column c + k */                           \
            if (r < na) {                                                                                \
                memcpy(buf + k * ROW, src + r * ssa + J * (SIZE), ROW);                                  \
            } else if (!last) {                                                                          \
                memcpy(buf + k * ROW, src + (r - na) * ssa + (J + 1) * (SIZE), ROW);                     \
            } else { /* column J + V is past the unit: that element is not stored */                     \
                memcpy(buf + k * ROW, src + (r - na) * ssa + (J + 1) * (SIZE), ROW - (SIZE));            \
                memset(buf + k * ROW + ROW - (SIZE), 0, SIZE);                                           \
            }                                                                                            \
        }                                                                                                \
        VEC o[V];                                                                                        \
        TRANSPOSE(buf, ROW, o);                                                                          \
        for (int k = 0; k < (V) - (last ? 1 : 0); k++)                                                   \
            STORE(d + k * dsb + c * (SIZE), o[k]);                                                       \
        if (last && na - h > c) { /* the unit's last virtual row, up to its wrap */                     \
            _Alignas(64) char t[ROW];                                                                    \
            STORE(t, o[(V) - 1]);                                                                        \
            memcpy(d + ((V) - 1) * dsb + c * (SIZE), t, (size_t)(na - h - c) * (SIZE));                 \
        }                                                                                                \
    }                                                                                                    \
    /* The passes, the blocks of V dst rows in each and the blocks of V    \
     * virtual columns in those, first to last or (back) last to first;    \
     * G x G blocks at a time (PL_DEFINE_WRAP_TILE_ONE), or one. */        \
    ATTR static inline __attribute__((always_inline)) void NAME##_walk(const char *src, int64_t ssa, char *dst,  \
                                                                       int64_t dsb, int64_t na, int64_t nb, bool back, \
                                                                       int G) \
    {                                                                                                    \
        const int64_t h = (int64_t)((64 - (uintptr_t)dst % 64) % 64) / (SIZE);                          \
        if (nb < (V) || dsb != na * (SIZE) || (uintptr_t)dst % (SIZE) != 0) {                            \
            TILE(src, ssa, dst, dsb, na, nb);                                                            \
            return;                                                                                      \
        }                                                                                                \
        MOVE2D(src, ssa, SIZE, dst, SIZE, dsb, h, 1);                                                    \
        char *vd = dst + h * (SIZE);                                                                     \
        const int64_t cw = (na - h) / (V) * (V); /* the first block that reaches the wrap */             \
        const int64_t ct = 512 / (SIZE); /* virtual columns a pass: 512 bytes of each src row */       \
        const int64_t passes = (na + ct - 1) / ct, rows = (nb + (V) - 1) / (V);                           \
        const bool off_lines = dsb % 64 != 0; /* each row's blocks straddle lines (see above) */          \
        const int64_t jgroups = (rows + G - 1) / G;                                                      \
        for (int64_t pk = 0; pk < passes; pk++) {                                                        \
            const int64_t c0 = (back ? passes - 1 - pk : pk) * ct;                                       \
            const int64_t c1 = c0 + ct < na ? c0 + ct : na;                                              \
            const int64_t cols = (c1 - c0 + (V) - 1) / (V);                                              \
            const int64_t cgroups = (cols + G - 1) / G;                                                  \
            for (int64_t gj = 0; gj < jgroups; gj++) {                                                   \
                const int64_t jg = (back ? jgroups - 1 - gj : gj) * G;                                   \
                for (int64_t gc = 0; gc < cgroups; gc++) {                                               \
                    const int64_t cg = (back ? cgroups - 1 - gc : gc) * G;                               \
                    for (int q = 0; q < G * G; q++) { /* a group's blocks, down its rows, then across */ \
                        const int qq = back ? G * G - 1 - q : q;                                         \
                        const int64_t jb = jg + qq % G, cb = cg + qq / G;                                \
                        if (jb >= rows || cb >= cols)                                                    \
                            continue;                                                                    \
                        /* the last block shifted back */                                                \
                        const int64_t J = (jb + 1) * (V) > nb ? nb - (V) : jb * (V);                     \
                        const bool last = J + (V) == nb;                                                 \
                        const char *s = src + h * ssa + J * (SIZE);                                      \
                        char *d = vd + J * dsb;                                                          \
                        const int64_t c = c0 + cb * (V);                                                 \
                        const int64_t cn = back ? c - (V) : c + (V); /* the next block in these rows */  \
                        const bool more = back ? cb > 0 : cb + 1 < cols;                                 \
                        if (more && cn < cw && (off_lines || cn * (SIZE) % 64 == 0))                     \
                            for (int k = 0; k < (V); k++) /* its dst lines, for writing */               \
                                __builtin_prefetch(d + k * dsb + cn * (SIZE), 1, 3);                     \
                        if (c < cw)                                                                      \
                            MICRO(s + c * ssa, ssa, d + c * (SIZE), dsb);                                \
                        else if (c + h >= na && !last) /* past the wrap: src column J + 1 */             \
                            MICRO(src + (c + h - na) * ssa + (J + 1) * (SIZE), ssa, d + c * (SIZE),      \
                                  dsb);                                                                  \
                        else                                                                             \
                            NAME##_edge(src, ssa, d, dsb, na, h, c, J, last);                            \
                    }                                                                                    \
                }                                                                                        \
            }                                                                                            \
        }                                                                                                \
    }                                                                                                    \
    ATTR static void NAME(const char *src, int64_t ssa, char *dst, int64_t dsb, int64_t na, int64_t nb)  \
    {                                                                                                    \
        NAME##_walk(src, ssa, dst, dsb, na, nb, false, 1);                                               \
    }                                                                                                    \
    ATTR static void NAME##_back(const char *src, int64_t ssa, char *dst, int64_t dsb, int64_t na,       \
                                 int64_t nb)                                                             \
    {                                                                                                    \
        NAME##_walk(src, ssa, dst, dsb, na, nb, true, 1);                                                \
    }

/* The same walk for a copy on one thread (kernels.h, tile_wrap_one), in groups of
 * 64 / (V * SIZE) blocks a side where src rows start on lines (see above), for
 * blocks narrower than a line; single blocks elsewhere. */
#define PL_DEFINE_WRAP_TILE_ONE(NAME, ATTR, SIZE, V)                                                     \
    _Static_assert((V) * (SIZE) < 64 && 64 % ((V) * (SIZE)) == 0, "blocks narrower than a line");        \
    ATTR static inline __attribute__((always_inline)) void NAME##_one_walk(const char *src, int64_t ssa,  \
                                                                           char *dst, int64_t dsb,       \
                                                                           int64_t na, int64_t nb, bool back) \
    {                                                                                                    \
        if (ssa % 64 == 0 && (uintptr_t)src % 64 == 0)                                                   \
            NAME##_walk(src, ssa, dst, dsb, na, nb, back, 64 / ((V) * (SIZE)));                          \
        else                                                                                             \
            NAME##_walk(src, ssa, dst, dsb, na, nb, back, 1);                                            \
    }                                                                                                    \
    ATTR static void NAME##_one(const char *src, int64_t ssa, char *dst, int64_t dsb, int64_t na,        \
                                int64_t nb)                                                              \
    {                                                                                                    \
        NAME##_one_walk(src, ssa, dst, dsb, na, nb, false);                                              \
    }                                                                                                    \
    ATTR static void NAME##_one_back(const char *src, int64_t ssa, char *dst, int64_t dsb, int64_t na,   \
                                     int64_t nb)                                                         \
    {                                                                                                    \
        NAME##_one_walk(src, ssa, dst, dsb, na, nb, true);                                               \
    }

/* ---- Transposes into planes (_pylayout_tile_split_fn) ----
 *
 * NumPy's a.T of an (H,W,C) image, (H,W,C) by (2,1,0): src rows of W
 * pixels of C elements, dst C planes of W rows.  As one transpose of an
 * H x (W * C) matrix whose dst rows come C to a pixel, one in each plane,
 * it runs in V x V register blocks like any tile; only each block's dst
 * row addresses differ (_pl_split_rows).  (The planes route, plan.c's
 * pl_run_planes, unzips every src row into L1 buffers and makes a tile
 * call per plane.)
 *
 * NAME: blocks of V rows x H * V columns, H V x V transposes side by side
 * (LOAD one src row of V elements, TRANSPOSE V rows in registers, STORE
 * one dst row), so that each block reads whole 64-byte lines of its src
 * rows: a line left half read waits a whole sweep down the rows for its
 * other half, and rows a power of two apart evict it first (AVX2 8 x 8
 * float blocks: float32 (512,512,4) 41 GB/s read + written against 67 for
 * 8 x 16).  Blocks of dst rows in the outer loop, as tile3's; the last
 * block along each side shifted back to overlap the one before (elements
 * written twice, the same value: src and dst never overlap). */
#define PL_DEFINE_SPLIT_TILE(NAME, ATTR, SIZE, V, H, VEC, LOAD, TRANSPOSE, STORE)                        \
    ATTR static void NAME(const char *src, int64_t ssa, char *dst, int64_t dsb, int64_t dsq, int P,      \
                          int64_t na, int64_t nc)                                                        \
    {                                                                                                    \
        enum { VC = (H) * (V) };                                                                         \
        if (na < (V) || nc < VC) {                                                                       \
            _pl_split_move(src, ssa, dst, dsb, dsq, P, na, nc, SIZE);                                    \
            return;                                                                                      \
        }                                                                                                \
        for (int64_t c = 0; c < nc; c += VC) {                                                           \
            const int64_t C = c + VC > nc ? nc - VC : c;                                                 \
            int64_t doff[VC];                                                                            \
            _pl_split_rows(C, P, dsb, dsq, VC, doff);                                                    \
            for (int64_t i = 0; i < na; i += (V)) {                                                      \
                const int64_t I = i + (V) > na ? na - (V) : i;                                           \
                _Pragma("GCC unroll 2") for (int h = 0; h < (H); h++) {                                  \
                    const char *s = src + I * ssa + (C + h * (V)) * (SIZE);                              \
                    VEC x[V], o[V];                                                                      \
                    _Pragma("GCC unroll 32") for (int k = 0; k < (V); k++)                               \
                        x[k] = LOAD(s + k * ssa);                                                        \
                    TRANSPOSE(x, o);                                                                     \
                    _Pragma("GCC unroll 32") for (int k = 0; k < (V); k++)                               \
                        STORE(dst + doff[h * (V) + k] + I * (SIZE), o[k]);                               \
                }                                                                                        \
            }                                                                                            \
        }                                                                                                \
    }

/* ---- Transposes out of planes (_pylayout_tile_zip_fn) ----
 *
 * NumPy's a.T of a (C,H,W) array, (C,H,W) by (2,1,0): src C planes of H
 * rows of W elements, dst W rows of H pixels of C elements.  The inverse
 * of the split tile: one transpose into dst rows of H * C elements whose
 * V src rows a block come from the planes in turn, C to a pixel
 * (_pl_split_rows gives their offsets).
 *
 * NAME: blocks of V src rows x H * V columns (H V x V transposes side by
 * side along the src rows, LOAD one src row of V elements, TRANSPOSE,
 * STORE one dst row of V elements), so that a block reads whole 64-byte
 * lines of its src rows.  Blocks of H * V dst rows in the outer loop, each
 * filled along the unit's src rows in turn, so its dst rows are written
 * front to back; each block prefetches into L2 the lines its src rows hold
 * for the next block of dst rows (a unit reads P * na src rows at once,
 * more streams than the hardware prefetchers follow).  The last block
 * along each side shifted back to overlap the one before (elements written
 * twice, the same value: src and dst never overlap).  Figures: plan.c,
 * pl_choose_planes. */
#define PL_DEFINE_ZIP_TILE(NAME, ATTR, SIZE, V, H, VEC, LOAD, TRANSPOSE, STORE)                          \
    ATTR static void NAME(const char *src, int64_t ssa, int64_t ssq, int P, char *dst, int64_t dsb,      \
                          int64_t nc, int64_t nb)                                                        \
    {                                                                                                    \
        enum { VJ = (H) * (V) };                                                                         \
        if (nc < (V) || nb < VJ) {                                                                       \
            _pl_zip_move(src, ssa, ssq, P, dst, dsb, nc, nb, SIZE);                                      \
            return;                                                                                      \
        }                                                                                                \
        for (int64_t j = 0; j < nb; j += VJ) {                                                           \
            const int64_t J = j + VJ > nb ? nb - VJ : j;                                                 \
            for (int64_t c = 0; c < nc; c += (V)) {                                                      \
                const int64_t C = c + (V) > nc ? nc - (V) : c;                                           \
                int64_t soff[V];                                                                         \
                _pl_split_rows(C, P, ssa, ssq, V, soff);                                                 \
                const uintptr_t next = (uintptr_t)src + (uintptr_t)((J + VJ) * (SIZE)); /* no object there */ \
                _Pragma("GCC unroll 32") for (int k = 0; k < (V); k++) /* the next block's lines, into L2 */ \
                    __builtin_prefetch((const void *)(next + (uintptr_t)soff[k]), 0, 2);                   \
                _Pragma("GCC unroll 2") for (int h = 0; h < (H); h++) {                                  \
                    const int64_t jh = (J + h * (V)) * (SIZE);                                           \
                    VEC x[V], o[V];                                                                      \
                    _Pragma("GCC unroll 32") for (int k = 0; k < (V); k++)                               \
                        x[k] = LOAD(src + soff[k] + jh);                                                 \
                    TRANSPOSE(x, o);                                                                     \
                    char *d = dst + (J + h * (V)) * dsb + C * (SIZE);                                    \
                    _Pragma("GCC unroll 32") for (int k = 0; k < (V); k++)                               \
                        STORE(d + k * dsb, o[k]);                                                        \
                }                                                                                        \
            }                                                                                            \
        }                                                                                                \
    }

/* The same transposes past the streaming threshold (_pylayout_kernels'
 * tile_zip_stream; plan.c, pl_choose_planes): passes of PL_STREAM_SRC_ROWS
 * src rows (blocks of W * V columns, whole 64-byte lines of the unit's dst
 * rows, side by side) in the outer loop, and down all of the unit's dst
 * rows in the inner one.  So each src row is read front to back, a page
 * after another, and each dst row takes the pass's lines back to back,
 * written whole with streaming stores (STREAM) where dst rows are a
 * multiple of 64 bytes apart and the block's lines start on lines (else
 * cached, STORE: the unit's ragged last block).  The cached kernel's
 * order, dst rows outermost, reads each block's V src rows a page apart
 * and leaves every dst line to a read for ownership.  The last block along
 * each side shifted back, as there.  The caller fences.  Figures: plan.c,
 * pl_choose_planes. */
#define PL_DEFINE_ZIP_STREAM_TILE(NAME, ATTR, SIZE, V, W, VEC, LOAD, TRANSPOSE, STORE, STREAM)               \
    ATTR static void NAME(const char *src, int64_t ssa, int64_t ssq, int P, char *dst, int64_t dsb,      \
                          int64_t nc, int64_t nb)                                                        \
    {                                                                                                    \
        enum { VC = (W) * (V), NP = PL_STREAM_SRC_ROWS / VC };                                           \
        if (nc < VC || nb < (V)) {                                                                       \
            _pl_zip_move(src, ssa, ssq, P, dst, dsb, nc, nb, SIZE);                                      \
            return;                                                                                      \
        }                                                                                                \
        for (int64_t c0 = 0; c0 < nc; c0 += NP * VC) {                                                   \
            int64_t soff[NP][VC], cols[NP];                                                              \
            bool lines[NP];                                                                              \
            int np = 0;                                                                                  \
            for (int64_t c = c0; np < NP && c < nc; c += VC, np++) {                                     \
                cols[np] = c + VC > nc ? nc - VC : c;                                                    \
                _pl_split_rows(cols[np], P, ssa, ssq, VC, soff[np]);                                     \
                lines[np] = dsb % 64 == 0 && (uintptr_t)(dst + cols[np] * (SIZE)) % 64 == 0;             \
            }                                                                                            \
            for (int64_t j = 0; j < nb; j += (V)) {                                                      \
                const int64_t J = j + (V) > nb ? nb - (V) : j;                                           \
                for (int z = 0; z < np; z++) {                                                           \
                    VEC o[W][V];                                                                         \
                    _Pragma("GCC unroll 2") for (int w = 0; w < (W); w++) {                              \
                        VEC x[V];                                                                        \
                        _Pragma("GCC unroll 32") for (int k = 0; k < (V); k++)                           \
                            x[k] = LOAD(src + soff[z][w * (V) + k] + J * (SIZE));                        \
                        TRANSPOSE(x, o[w]);                                                              \
                    }                                                                                    \
                    char *d = dst + J * dsb + cols[z] * (SIZE);                                          \
                    if (lines[z]) {                                                                      \
                        _Pragma("GCC unroll 32") for (int k = 0; k < (V); k++)                           \
                            _Pragma("GCC unroll 2") for (int w = 0; w < (W); w++)                        \
                                STREAM(d + k * dsb + w * (V) * (SIZE), o[w][k]);                         \
                    } else {                                                                             \
                        _Pragma("GCC unroll 32") for (int k = 0; k < (V); k++)                           \
                            _Pragma("GCC unroll 2") for (int w = 0; w < (W); w++)                        \
                                STORE(d + k * dsb + w * (V) * (SIZE), o[w][k]);                          \
                    }                                                                                    \
                }                                                                                        \
            }                                                                                            \
        }                                                                                                \
    }

/* Transposes into planes past the streaming threshold (_pylayout_kernels'
 * tile_split_stream; plan.c, pl_choose_planes), the mirror of the zip
 * stream tile: blocks of V src columns in the outer loop, and down all of
 * the unit's src rows, W * V at a time (whole 64-byte lines of V dst
 * rows), in the inner one.  So the unit's src rows are read front to back
 * together, and each dst row takes the unit's lines back to back, with
 * streaming stores (STREAM) where dst rows and planes are a multiple of
 * 64 bytes apart and the block's lines start on lines (else cached,
 * STORE: the unit's ragged last block).  The cached kernel's order, dst
 * rows outermost, leaves every dst line to a read for ownership.  The
 * last block along each side shifted back, as there.  The caller fences.
 * Figures: plan.c, pl_choose_planes. */
#define PL_DEFINE_SPLIT_STREAM_TILE(NAME, ATTR, SIZE, V, W, VEC, LOAD, TRANSPOSE, STORE, STREAM)             \
    ATTR static void NAME(const char *src, int64_t ssa, char *dst, int64_t dsb, int64_t dsq, int P,      \
                          int64_t na, int64_t nc)                                                        \
    {                                                                                                    \
        enum { VI = (W) * (V) };                                                                         \
        if (na < VI || nc < (V)) {                                                                       \
            _pl_split_move(src, ssa, dst, dsb, dsq, P, na, nc, SIZE);                                    \
            return;                                                                                      \
        }                                                                                                \
        const bool apart = dsb % 64 == 0 && dsq % 64 == 0;                                               \
        for (int64_t c = 0; c < nc; c += (V)) {                                                          \
            const int64_t C = c + (V) > nc ? nc - (V) : c;                                               \
            int64_t doff[V];                                                                             \
            _pl_split_rows(C, P, dsb, dsq, V, doff);                                                     \
            for (int64_t i = 0; i < na; i += VI) {                                                       \
                const int64_t I = i + VI > na ? na - VI : i;                                             \
                VEC o[W][V];                                                                             \
                _Pragma("GCC unroll 2") for (int w = 0; w < (W); w++) {                                  \
                    const char *s = src + (I + w * (V)) * ssa + C * (SIZE);                              \
                    VEC x[V];                                                                            \
                    _Pragma("GCC unroll 32") for (int k = 0; k < (V); k++)                               \
                        x[k] = LOAD(s + k * ssa);                                                        \
                    TRANSPOSE(x, o[w]);                                                                  \
                }                                                                                        \
                char *d = dst + I * (SIZE);                                                              \
                if (apart && (uintptr_t)d % 64 == 0) {                                                   \
                    _Pragma("GCC unroll 32") for (int k = 0; k < (V); k++)                               \
                        _Pragma("GCC unroll 2") for (int w = 0; w < (W); w++)                            \
                            STREAM(d + doff[k] + w * (V) * (SIZE), o[w][k]);                             \
                } else {                                                                                 \
                    _Pragma("GCC unroll 32") for (int k = 0; k < (V); k++)                               \
                        _Pragma("GCC unroll 2") for (int w = 0; w < (W); w++)                            \
                            STORE(d + doff[k] + w * (V) * (SIZE), o[w][k]);                              \
                }                                                                                        \
            }                                                                                            \
        }                                                                                                \
    }

PL_DEFINE_MICRO(pl_micro1_sse2, PL_SSE2, 16, __m128i, pl_t16x16_epi8, pl_storeu_si128)
PL_DEFINE_MICRO(pl_micro2_sse2, PL_SSE2, 8, __m128i, pl_t8x8_epi16, pl_storeu_si128)
PL_DEFINE_MICRO(pl_micro4_sse2, PL_SSE2, 4, __m128, pl_t4x4_ps, pl_storeu_ps)
PL_DEFINE_MICRO(pl_micro8_sse2, PL_SSE2, 2, __m128d, pl_t2x2_pd, pl_storeu_pd)
PL_DEFINE_MICRO(pl_micro16_sse2, PL_SSE2, 1, __m128i, pl_t1x1_si128, pl_storeu_si128)

PL_DEFINE_TILE(pl_tile1_sse2_whole, PL_SSE2, 1, 16, pl_micro1_sse2, _pl_move2d_1)
PL_DEFINE_TILE_STRIPS(pl_tile1_sse2_strips, PL_SSE2, 1, 1024, pl_tile1_sse2_whole)
static void pl_tile1_sse2(const char *src, int64_t ssa, char *dst, int64_t dsb, int64_t na, int64_t nb)
{
    if (!pl_tile1_halves_sse2(src, ssa, dst, dsb, na, nb))
        pl_tile1_sse2_strips(src, ssa, dst, dsb, na, nb);
}
PL_DEFINE_TILE(pl_tile2_sse2_whole, PL_SSE2, 2, 8, pl_micro2_sse2, _pl_move2d_2)
PL_DEFINE_TILE_STRIPS(pl_tile2_sse2, PL_SSE2, 2, 1024, pl_tile2_sse2_whole)
PL_DEFINE_TILE(pl_tile4_sse2_whole, PL_SSE2, 4, 4, pl_micro4_sse2, _pl_move2d_4)
PL_DEFINE_TILE_STRIPS(pl_tile4_sse2, PL_SSE2, 4, 1024, pl_tile4_sse2_whole)
PL_DEFINE_TILE(pl_tile8_sse2_whole, PL_SSE2, 8, 2, pl_micro8_sse2, _pl_move2d_8)
PL_DEFINE_TILE_STRIPS(pl_tile8_sse2, PL_SSE2, 8, 1024, pl_tile8_sse2_whole)
PL_DEFINE_TILE(pl_tile16_sse2, PL_SSE2, 16, 1, pl_micro16_sse2, _pl_move2d_16)

PL_DEFINE_STREAM_TILE(pl_stile1_sse2_lines, PL_SSE2, 1, 16, __m128i, pl_t16x16_epi8, pl_stream_si128, pl_tile1_sse2,
                      _pl_move2d_1)
static void pl_stile1_sse2(const char *src, int64_t ssa, char *dst, int64_t dsb, int64_t na, int64_t nb)
{
    if (!pl_tile1_halves_sse2(src, ssa, dst, dsb, na, nb)) /* a short side: no whole lines to stream */
        pl_stile1_sse2_lines(src, ssa, dst, dsb, na, nb);
}
PL_DEFINE_STREAM_TILE(pl_stile2_sse2, PL_SSE2, 2, 8, __m128i, pl_t8x8_epi16, pl_stream_si128, pl_tile2_sse2,
                      _pl_move2d_2)
PL_DEFINE_STREAM_TILE(pl_stile4_sse2, PL_SSE2, 4, 4, __m128, pl_t4x4_ps, pl_stream_ps, pl_tile4_sse2, _pl_move2d_4)
PL_DEFINE_STREAM_TILE(pl_stile8_sse2, PL_SSE2, 8, 2, __m128d, pl_t2x2_pd, pl_stream_pd, pl_tile8_sse2, _pl_move2d_8)
PL_DEFINE_STREAM_TILE(pl_stile16_sse2, PL_SSE2, 16, 1, __m128i, pl_t1x1_si128, pl_stream_si128, pl_tile16_sse2,
                      _pl_move2d_16)

/* Streaming copy out of a buffer (see _pylayout_stream_copy_fn): bytes up
 * to dst's first 64-byte boundary and after its last one go through memcpy,
 * every line in between is written whole with streaming stores. */
#define PL_DEFINE_STREAM_COPY(NAME, ATTR, VEC, LOADU, STREAM)                                           \
    ATTR static void NAME(char *dst, const char *src, int64_t n)                                        \
    {                                                                                                    \
        enum { W = (int)sizeof(VEC) };                                                                   \
        int64_t head = (int64_t)((64 - ((uintptr_t)dst & 63)) & 63);                                   \
        if (head > n)                                                                                    \
            head = n;                                                                                    \
        memcpy(dst, src, (size_t)head);                                                                  \
        int64_t i = head;                                                                                \
        for (; i + 64 <= n; i += 64)                                                                     \
            for (int k = 0; k < 64; k += W)                                                              \
                STREAM((void *)(dst + i + k), LOADU((const void *)(src + i + k)));                       \
        memcpy(dst + i, src + i, (size_t)(n - i));                                                       \
    }

static inline __m128i pl_loadu_si128(const void *p) { return _mm_loadu_si128((const __m128i *)p); }
static inline void pl_stream_si128v(void *p, __m128i v) { _mm_stream_si128((__m128i *)p, v); }
PL_DEFINE_STREAM_COPY(pl_stream_copy_sse2, PL_SSE2, __m128i, pl_loadu_si128, pl_stream_si128v)

/* Group transposes with streaming stores (see _pylayout_group_stream_fn):
 * each group in vectors of W bytes where g, dst and dsb allow, else through
 * NARROW: narrower vectors, and in the end cached copies (pl_group_copy). */
#define PL_DEFINE_GROUP_STREAM(NAME, ATTR, VEC, LOADU, STREAM, NARROW)                                  \
    ATTR static void NAME(const char *src, int64_t ssa, char *dst, int64_t dsb, int64_t na, int64_t nb,  \
                          int64_t g)                                                                     \
    {                                                                                                    \
        enum { W = (int)sizeof(VEC) };                                                                   \
        if ((g | dsb | (int64_t)(uintptr_t)dst) % W != 0) {                                             \
            NARROW(src, ssa, dst, dsb, na, nb, g);                                                       \
            return;                                                                                      \
        }                                                                                                \
        for (int64_t j = 0; j < nb; j++) {                                                               \
            char *d = dst + j * dsb;                                                                     \
            const char *s = src + j * g;                                                                 \
            for (int64_t i = 0; i < na; i++, d += g)                                                     \
                for (int64_t o = 0; o < g; o += W)                                                       \
                    STREAM((void *)(d + o), LOADU((const void *)(s + i * ssa + o)));                     \
        }                                                                                                \
    }

static void pl_group_copy(const char *src, int64_t ssa, char *dst, int64_t dsb, int64_t na, int64_t nb, int64_t g)
{
    for (int64_t j = 0; j < nb; j++)
        for (int64_t i = 0; i < na; i++)
            memcpy(dst + j * dsb + i * g, src + i * ssa + j * g, (size_t)g);
}
PL_DEFINE_GROUP_STREAM(pl_group_stream_sse2, PL_SSE2, __m128i, pl_loadu_si128, pl_stream_si128v, pl_group_copy)

/* Complex packing has no SSE2 kernels: the portable loops. */
const _pylayout_kernels _pylayout_kernels_sse2 = {
    .name = "sse2",
    .tile = {
        [PL_SIZE1] = pl_tile1_sse2,
        [PL_SIZE2] = pl_tile2_sse2,
        [PL_SIZE4] = pl_tile4_sse2,
        [PL_SIZE8] = pl_tile8_sse2,
        [PL_SIZE16] = pl_tile16_sse2,
    },
    .tile_stream = {
        [PL_SIZE1] = pl_stile1_sse2,
        [PL_SIZE2] = pl_stile2_sse2,
        [PL_SIZE4] = pl_stile4_sse2,
        [PL_SIZE8] = pl_stile8_sse2,
        [PL_SIZE16] = pl_stile16_sse2,
    },
    .stream_copy = pl_stream_copy_sse2,
    .group_stream = pl_group_stream_sse2,
    .block_perm = _pylayout_block_perm_moves,
    .pack = {[PL_SIZE2] = _pl_pack_2, [PL_SIZE4] = _pl_pack_4, [PL_SIZE8] = _pl_pack_8},
    .unpack = {[PL_SIZE2] = _pl_unpack_2, [PL_SIZE4] = _pl_unpack_4, [PL_SIZE8] = _pl_unpack_8},
    .fence = pl_sfence,
    .thin = &_pylayout_thin_sse2,
};

/* ------------------------------------------------------------------ AVX2 */

/* 8x8 of 32-bit elements in registers: interleave pairs, then quads, then
 * swap 128-bit halves. */
PL_AVX2 static inline void pl_t8x8_ps_regs(const __m256 r[8], __m256 o[8])
{
    const __m256 r0 = r[0], r1 = r[1], r2 = r[2], r3 = r[3], r4 = r[4], r5 = r[5], r6 = r[6], r7 = r[7];
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
    o[0] = _mm256_permute2f128_ps(u0, u4, 0x20);
    o[1] = _mm256_permute2f128_ps(u1, u5, 0x20);
    o[2] = _mm256_permute2f128_ps(u2, u6, 0x20);
    o[3] = _mm256_permute2f128_ps(u3, u7, 0x20);
    o[4] = _mm256_permute2f128_ps(u0, u4, 0x31);
    o[5] = _mm256_permute2f128_ps(u1, u5, 0x31);
    o[6] = _mm256_permute2f128_ps(u2, u6, 0x31);
    o[7] = _mm256_permute2f128_ps(u3, u7, 0x31);
}

PL_AVX2 static inline __m256 pl_loadu_ps256(const char *p) { return _mm256_loadu_ps((const float *)(const void *)p); }
PL_DEFINE_LOADED(pl_t8x8_ps, PL_AVX2, 8, __m256, pl_loadu_ps256, pl_t8x8_ps_regs)

/* 4x4 of 64-bit elements. */
PL_AVX2 static inline void pl_t4x4_pd_regs(const __m256d r[4], __m256d o[4])
{
    const __m256d r0 = r[0], r1 = r[1], r2 = r[2], r3 = r[3];
    __m256d t0 = _mm256_unpacklo_pd(r0, r1), t1 = _mm256_unpackhi_pd(r0, r1);
    __m256d t2 = _mm256_unpacklo_pd(r2, r3), t3 = _mm256_unpackhi_pd(r2, r3);
    o[0] = _mm256_permute2f128_pd(t0, t2, 0x20);
    o[1] = _mm256_permute2f128_pd(t1, t3, 0x20);
    o[2] = _mm256_permute2f128_pd(t0, t2, 0x31);
    o[3] = _mm256_permute2f128_pd(t1, t3, 0x31);
}

PL_AVX2 static inline __m256d pl_loadu_pd256(const char *p) { return _mm256_loadu_pd((const double *)(const void *)p); }
PL_DEFINE_LOADED(pl_t4x4_pd, PL_AVX2, 4, __m256d, pl_loadu_pd256, pl_t4x4_pd_regs)

PL_AVX2 static inline void pl_storeu_ps256(char *d, __m256 v) { _mm256_storeu_ps((float *)(void *)d, v); }
PL_AVX2 static inline void pl_storeu_pd256(char *d, __m256d v) { _mm256_storeu_pd((double *)(void *)d, v); }
PL_AVX2 static inline void pl_stream_ps256(char *d, __m256 v) { _mm256_stream_ps((float *)(void *)d, v); }
PL_AVX2 static inline void pl_stream_pd256(char *d, __m256d v) { _mm256_stream_pd((double *)(void *)d, v); }

/* The 1-, 2- and 16-byte kernels are the SSE2 ones, recompiled here with
 * VEX encodings (no SSE/AVX transition penalties next to 256-bit code). */
PL_DEFINE_MICRO(pl_micro1_avx2, PL_AVX2, 16, __m128i, pl_t16x16_epi8, pl_storeu_si128)
PL_DEFINE_MICRO(pl_micro2_avx2, PL_AVX2, 8, __m128i, pl_t8x8_epi16, pl_storeu_si128)
PL_DEFINE_MICRO(pl_micro4_avx2, PL_AVX2, 8, __m256, pl_t8x8_ps, pl_storeu_ps256)
PL_DEFINE_MICRO(pl_micro8_avx2, PL_AVX2, 4, __m256d, pl_t4x4_pd, pl_storeu_pd256)
PL_DEFINE_MICRO(pl_micro16_avx2, PL_AVX2, 1, __m128i, pl_t1x1_si128, pl_storeu_si128)

PL_DEFINE_TILE(pl_tile1_avx2_whole, PL_AVX2, 1, 16, pl_micro1_avx2, _pl_move2d_1)
PL_DEFINE_TILE_STRIPS(pl_tile1_avx2_strips, PL_AVX2, 1, 1024, pl_tile1_avx2_whole)
PL_DEFINE_TILE1_HALVES(pl_tile1_halves_avx2, PL_AVX2)
PL_AVX2 static void pl_tile1_avx2(const char *src, int64_t ssa, char *dst, int64_t dsb, int64_t na, int64_t nb)
{
    if (!pl_tile1_halves_avx2(src, ssa, dst, dsb, na, nb))
        pl_tile1_avx2_strips(src, ssa, dst, dsb, na, nb);
}
PL_DEFINE_TILE(pl_tile2_avx2_whole, PL_AVX2, 2, 8, pl_micro2_avx2, _pl_move2d_2)
PL_DEFINE_TILE_STRIPS(pl_tile2_avx2, PL_AVX2, 2, 1024, pl_tile2_avx2_whole)
PL_DEFINE_TILE(pl_tile4_avx2_whole, PL_AVX2, 4, 8, pl_micro4_avx2, _pl_move2d_4)
PL_DEFINE_TILE_STRIPS(pl_tile4_avx2_strips, PL_AVX2, 4, 1024, pl_tile4_avx2_whole)

/* Src or dst rows a multiple of 4 KiB apart share one L1 set (12 ways) per
 * line column: the 8 rows of an 8x8 block and the lines they leave partial
 * crowd it, so such tiles take 4x4 blocks (the SSE2 ones, VEX-encoded
 * here), in strips of 8 dst rows where dst is the side.  Measured on the
 * 2-core Zen 5 dev VM, float32, 1 thread, us, 8x8 / 4x4: 1024 x 128 src
 * (dst rows 4 KiB apart) 22 / 15.5; 100 x 1024 src 12.2 / 8.8. */
PL_DEFINE_MICRO(pl_micro4x4_avx2, PL_AVX2, 4, __m128, pl_t4x4_ps, pl_storeu_ps)
PL_DEFINE_TILE(pl_tile4x4_avx2_whole, PL_AVX2, 4, 4, pl_micro4x4_avx2, _pl_move2d_4)
PL_DEFINE_TILE_STRIPS(pl_tile4x4_avx2, PL_AVX2, 4, 1024, pl_tile4x4_avx2_whole)
PL_AVX2 static void pl_tile4_avx2(const char *src, int64_t ssa, char *dst, int64_t dsb, int64_t na, int64_t nb)
{
    if (ssa % 4096 == 0 || dsb % 4096 == 0)
        pl_tile4x4_avx2(src, ssa, dst, dsb, na, nb);
    else
        pl_tile4_avx2_strips(src, ssa, dst, dsb, na, nb);
}
PL_DEFINE_TILE(pl_tile8_avx2_whole, PL_AVX2, 8, 4, pl_micro8_avx2, _pl_move2d_8)
PL_DEFINE_TILE_STRIPS(pl_tile8_avx2, PL_AVX2, 8, 1024, pl_tile8_avx2_whole)
PL_DEFINE_WRAP_TILE(pl_wtile4_avx2, PL_AVX2, 4, 8, __m256, pl_t8x8_ps, pl_storeu_ps256, pl_micro4_avx2, pl_tile4_avx2,
                    _pl_move2d_4)
PL_DEFINE_WRAP_TILE(pl_wtile8_avx2, PL_AVX2, 8, 4, __m256d, pl_t4x4_pd, pl_storeu_pd256, pl_micro8_avx2, pl_tile8_avx2,
                    _pl_move2d_8)
PL_DEFINE_WRAP_TILE_ONE(pl_wtile4_avx2, PL_AVX2, 4, 8)
PL_DEFINE_WRAP_TILE_ONE(pl_wtile8_avx2, PL_AVX2, 8, 4)
PL_DEFINE_TILE(pl_tile16_avx2, PL_AVX2, 16, 1, pl_micro16_avx2, _pl_move2d_16)

/* Two 16x16 byte blocks stacked along i (rows s and s + 16 * ssa) at once,
 * one per 128-bit lane: the in-lane unpacks of pl_t16x16_epi8 then leave
 * o[k] = column k of both, i.e. 32 consecutive bytes of dst row k, with
 * half the shuffles per byte of two SSE2 transposes. */
PL_AVX2 static inline void pl_t16x16x2_epi8(const char *s, int64_t ssa, __m256i o[16])
{
    __m256i r[16], a[16], b[16], c[16];
#pragma GCC unroll 16
    for (int k = 0; k < 16; k++)
        r[k] = _mm256_inserti128_si256(
            _mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)(s + k * ssa))),
            _mm_loadu_si128((const __m128i *)(const void *)(s + (16 + k) * ssa)), 1);
#pragma GCC unroll 8
    for (int k = 0; k < 8; k++) {
        a[2 * k] = _mm256_unpacklo_epi8(r[2 * k], r[2 * k + 1]);
        a[2 * k + 1] = _mm256_unpackhi_epi8(r[2 * k], r[2 * k + 1]);
    }
#pragma GCC unroll 4
    for (int k = 0; k < 4; k++) {
        b[4 * k + 0] = _mm256_unpacklo_epi16(a[4 * k], a[4 * k + 2]);
        b[4 * k + 1] = _mm256_unpackhi_epi16(a[4 * k], a[4 * k + 2]);
        b[4 * k + 2] = _mm256_unpacklo_epi16(a[4 * k + 1], a[4 * k + 3]);
        b[4 * k + 3] = _mm256_unpackhi_epi16(a[4 * k + 1], a[4 * k + 3]);
    }
#pragma GCC unroll 2
    for (int h = 0; h < 2; h++) {
#pragma GCC unroll 4
        for (int m = 0; m < 4; m++) {
            c[8 * h + 2 * m] = _mm256_unpacklo_epi32(b[8 * h + m], b[8 * h + 4 + m]);
            c[8 * h + 2 * m + 1] = _mm256_unpackhi_epi32(b[8 * h + m], b[8 * h + 4 + m]);
        }
    }
#pragma GCC unroll 8
    for (int q = 0; q < 8; q++) {
        o[2 * q] = _mm256_unpacklo_epi64(c[q], c[8 + q]);
        o[2 * q + 1] = _mm256_unpackhi_epi64(c[q], c[8 + q]);
    }
}

/* The 1-byte streaming tile (see PL_DEFINE_STREAM_TILE) on pairs of 16x16
 * blocks: each dst line is two 32-byte streaming stores.  Measured on
 * 8192x8192 uint8, 1 thread: 6.0 GB/s with the SSE2-shaped kernel, 7.3
 * with this one. */
PL_AVX2 static void pl_stile1_avx2(const char *src, int64_t ssa, char *dst, int64_t dsb, int64_t na, int64_t nb)
{
    if (pl_tile1_halves_avx2(src, ssa, dst, dsb, na, nb)) /* a short side: no whole lines to stream */
        return;
    if ((((uintptr_t)dst) | (uintptr_t)dsb) & 63) {
        pl_tile1_avx2(src, ssa, dst, dsb, na, nb);
        return;
    }
    const int64_t nal = na / 64 * 64, nbv = nb / 16 * 16;
    for (int64_t i = 0; i < nal; i += 64)
        for (int64_t j = 0; j < nbv; j += 16) {
            __m256i o0[16], o1[16];
            const char *s = src + i * ssa + j;
            char *d = dst + j * dsb + i;
            pl_t16x16x2_epi8(s, ssa, o0);
            pl_t16x16x2_epi8(s + 32 * ssa, ssa, o1);
            for (int k = 0; k < 16; k++) {
                _mm256_stream_si256((__m256i *)(void *)(d + k * dsb), o0[k]);
                _mm256_stream_si256((__m256i *)(void *)(d + k * dsb + 32), o1[k]);
            }
        }
    if (nbv < nb)
        _pl_move2d_1(src + nbv, ssa, 1, dst + nbv * dsb, 1, dsb, nal, nb - nbv);
    if (nal < na)
        pl_tile1_avx2(src + nal * ssa, ssa, dst + nal, dsb, na - nal, nb);
}
/* The 1-byte streaming transpose in staged blocks of 256 x 256 bytes
 * (PL_STAGED_SIDE), for copies beyond the caches: each block's 256 src
 * rows sit in one half of the lent buffer (256-byte runs read once each);
 * it is transposed from there 32 dst rows at a time into a band of the
 * buffer, and each band's dst rows streamed out 256 bytes at a time, while
 * the next block's src rows are copied into the other half, one per dst
 * row streamed, each prefetched 8 rows before: memory reads and writes
 * overlap.  Blocks go down a (the next one is the 256 src rows below),
 * then across.
 *
 * pl_stile1_avx2 reads each src line in four visits, a quarter at a time
 * from 64 rows; with rows a multiple of 4 KiB apart those lines share one
 * L1 set and come back from L2 or beyond each time.  Measured on the
 * 2-core Zen 3 (AVX2 only), uint8 8192 x 8192, 1 thread, GB/s, a /tmp C
 * driver against glibc's memcpy (7-9) in the same process:
 * pl_stile1_avx2 3.3; blocks staged and streamed without the overlap 4.5
 * (no prefetch 3.1); with the next block prefetched during the stores
 * 5.0-5.4, and with these AVX2 transposes (not SSE2) 5.5-5.7; with the
 * next block copied into a second buffer during the stores 5.5-6.5.  In
 * the library, that copy prefetching 8 rows ahead against 16 and 32:
 * 7.0 / 6.6 / 6.4 (past L3 alike; 2 KiB-apart rows in L3 at 2 threads
 * 0.9 / 1.0 / 1.0 of that).  Transposing straight from the src lines
 * instead of a staged copy 3.9; streaming each 64-row block's dst lines
 * straight from registers instead of a band 3.0; blocks 256 x 128 or 128 x
 * 256 4.4 and 3.8; prefetching into L2 (T1) instead of L1 4.1-4.8; bands
 * of 16, 32, 64 or 256 dst rows alike. */
enum { PL_ST1 = PL_STAGED_SIDE, PL_ST1_ROW = PL_STAGED_SIDE + 64, PL_ST1_BAND = 32, PL_ST1_AHEAD = 8 };

/* Src rows [r0, r1) of a block into the buffer b. */
PL_AVX2 static inline void pl_stage1_rows_avx2(const char *s, int64_t ssa, char *b, int r0, int r1)
{
    for (int r = r0; r < r1; r++)
        for (int k = 0; k < PL_ST1; k += 32)
            _mm256_store_si256((__m256i *)(void *)(b + r * PL_ST1_ROW + k),
                               _mm256_loadu_si256((const __m256i *)(const void *)(s + r * ssa + k)));
}

/* One block, staged in b, into d; the next block's src rows (next, or
 * none) staged into nb meanwhile, one per dst row streamed out, each
 * prefetched PL_ST1_AHEAD rows before. */
PL_AVX2 static void pl_stage1_block_avx2(const char *b, char *d, int64_t dsb, const char *next, int64_t ssa, char *nb,
                                         char *x)
{
    if (next != NULL) /* a prefetch never faults */
        for (int r = 0; r < PL_ST1_AHEAD; r++)
            for (int k = 0; k < PL_ST1; k += 64)
                _mm_prefetch(next + r * ssa + k, _MM_HINT_T0);
    for (int jb = 0; jb < PL_ST1; jb += PL_ST1_BAND) {
        for (int i = 0; i < PL_ST1; i += 32)
            for (int j = 0; j < PL_ST1_BAND; j += 16) {
                __m256i o[16];
                pl_t16x16x2_epi8(b + i * PL_ST1_ROW + jb + j, PL_ST1_ROW, o);
                for (int k = 0; k < 16; k++)
                    _mm256_store_si256((__m256i *)(void *)(x + (j + k) * PL_ST1_ROW + i), o[k]);
            }
        for (int j = 0; j < PL_ST1_BAND; j++) {
            const int r = jb + j;
            if (next != NULL) {
                if (r + PL_ST1_AHEAD < PL_ST1)
                    for (int k = 0; k < PL_ST1; k += 64)
                        _mm_prefetch(next + (r + PL_ST1_AHEAD) * ssa + k, _MM_HINT_T0);
                pl_stage1_rows_avx2(next, ssa, nb, r, r + 1);
            }
            for (int k = 0; k < PL_ST1; k += 32)
                _mm256_stream_si256((__m256i *)(void *)(d + r * dsb + k),
                                    _mm256_load_si256((const __m256i *)(const void *)(x + j * PL_ST1_ROW + k)));
        }
    }
}

PL_AVX2 static void pl_stile1_staged_avx2(const char *src, int64_t ssa, char *dst, int64_t dsb, int64_t na,
                                          int64_t nb, char *buf)
{
    const int64_t nal = na / PL_ST1 * PL_ST1, nbl = nb / PL_ST1 * PL_ST1;
    if (((((uintptr_t)dst) | (uintptr_t)dsb) & 63) || nal == 0 || nbl == 0) {
        pl_stile1_avx2(src, ssa, dst, dsb, na, nb);
        return;
    }
    char *b = (char *)(((uintptr_t)buf + 63) & ~(uintptr_t)63), *nbuf = b + PL_ST1 * PL_ST1_ROW;
    char *x = nbuf + PL_ST1 * PL_ST1_ROW;
    bool staged = false; /* the block at (i, j) is in b: the one before staged it */
    for (int64_t j = 0; j < nbl; j += PL_ST1)
        for (int64_t i = 0; i < nal; i += PL_ST1) {
            const char *next = i + PL_ST1 < nal   ? src + (i + PL_ST1) * ssa + j
                               : j + PL_ST1 < nbl ? src + j + PL_ST1
                                                  : NULL;
            if (!staged)
                pl_stage1_rows_avx2(src + i * ssa + j, ssa, b, 0, PL_ST1);
            pl_stage1_block_avx2(b, dst + j * dsb + i, dsb, next, ssa, nbuf, x);
            char *t = b;
            b = nbuf;
            nbuf = t;
            staged = next != NULL;
        }
    if (nbl < nb)
        pl_stile1_avx2(src + nbl, ssa, dst + nbl * dsb, dsb, nal, nb - nbl);
    if (nal < na)
        pl_stile1_avx2(src + nal * ssa, ssa, dst + nal, dsb, na - nal, nb);
}
_Static_assert((2 * PL_ST1 + PL_ST1_BAND) * PL_ST1_ROW + 64 <= PL_STAGED_BUFFER_BYTES, "the staged blocks' buffers");

/* The AVX2 streaming tiles write each dst row a line per visit.  The
 * AVX-512 kernels' 256-byte runs from src staged in L1
 * (PL_DEFINE_STREAM_RUNS_512) were tried on 32-byte vectors on an AVX2-only
 * Zen 3 (session 57) and lost: 8192 x 8192 float32 at 0.75-0.94 of these
 * tiles' speed with 8 to 64 KiB of staging, float64 0.89-1.00, float16
 * 2048 x 2048 0.75-0.82.  There the runs' reads, 64 src rows a page apart
 * four lines at a time, cost more than the longer write runs saved
 * (docs/benchmarks.md, session 57). */
PL_DEFINE_STREAM_TILE(pl_stile2_avx2, PL_AVX2, 2, 8, __m128i, pl_t8x8_epi16, pl_stream_si128, pl_tile2_avx2,
                      _pl_move2d_2)
PL_DEFINE_STREAM_TILE(pl_stile4_avx2, PL_AVX2, 4, 8, __m256, pl_t8x8_ps, pl_stream_ps256, pl_tile4_avx2,
                      _pl_move2d_4)
PL_DEFINE_STREAM_TILE(pl_stile8_avx2, PL_AVX2, 8, 4, __m256d, pl_t4x4_pd, pl_stream_pd256, pl_tile8_avx2,
                      _pl_move2d_8)
PL_DEFINE_STREAM_TILE(pl_stile16_avx2, PL_AVX2, 16, 1, __m128i, pl_t1x1_si128, pl_stream_si128, pl_tile16_avx2,
                      _pl_move2d_16)

/* Step-2 gathers (x[..., ::2] into a dense row): each step loads two
 * vectors of src (2 * PER elements, PER = vector bytes / SIZE), keeps the
 * even elements and stores PER of them, after going element by element up
 * to a HEAD_ALIGN-aligned dst (1: no head).  A step runs only while at
 * least one more element follows it, so the last src element loaded (index 2 * PER - 1 of the step) is never past
 * the last element copied (src index 2 * PER of the step); the rest goes
 * element by element.  Measured on (32,64,112,224)[..., ::2] float32, 1
 * thread: 3.5 GB/s with the scalar strided loop, 4.8 with these cached,
 * 6.6 streaming (plan.c picks streaming for large copies). */
#define PL_DEFINE_GATHER2_KERNEL(NAME, ATTR, SIZE, VEC, LOADU, STORE, EVENS, HEAD_ALIGN)                   \
    ATTR static void NAME(const char *src, char *dst, int64_t n)                                        \
    {                                                                                                    \
        enum { W = (int)sizeof(VEC), PER = W / (SIZE) };                                                 \
        int64_t i = 0;                                                                                   \
        for (; i < n && ((uintptr_t)(dst + i * (SIZE))) % (HEAD_ALIGN) != 0; i++)                        \
            memcpy(dst + i * (SIZE), src + 2 * i * (SIZE), SIZE);                                        \
        for (; i + PER < n; i += PER) {                                                                  \
            const char *s = src + 2 * i * (SIZE);                                                        \
            STORE((void *)(dst + i * (SIZE)), EVENS(LOADU((const void *)s), LOADU((const void *)(s + W)))); \
        }                                                                                                \
        for (; i < n; i++)                                                                               \
            memcpy(dst + i * (SIZE), src + 2 * i * (SIZE), SIZE);                                        \
    }

PL_AVX2 static inline __m256i pl_loadu_si256(const void *p) { return _mm256_loadu_si256((const __m256i *)p); }
PL_AVX2 static inline void pl_storeu_si256v(void *p, __m256i v) { _mm256_storeu_si256((__m256i *)p, v); }
PL_AVX2 static inline void pl_stream_si256v(void *p, __m256i v) { _mm256_stream_si256((__m256i *)p, v); }

/* The cached AVX2 gather NAME, and NAME_stream with streaming stores (element
 * by element up to a 32-byte aligned dst). */
#define PL_DEFINE_GATHER2(NAME, SIZE, EVENS)                                                             \
    PL_DEFINE_GATHER2_KERNEL(NAME, PL_AVX2, SIZE, __m256i, pl_loadu_si256, pl_storeu_si256v, EVENS, 1)      \
    PL_DEFINE_GATHER2_KERNEL(NAME##_stream, PL_AVX2, SIZE, __m256i, pl_loadu_si256, pl_stream_si256v, EVENS, \
                             32)

/* Evens of a then evens of b, for 1-, 2-, 4- and 8-byte elements: gather
 * each 128-bit lane's evens into its low 64 bits (or pairs of lanes'
 * evens), then put the four 64-bit pieces in order with one cross-lane
 * permute. */
PL_AVX2 static inline __m256i pl_evens_epi8(__m256i a, __m256i b)
{
    const __m256i m = _mm256_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, -1, -1, -1, -1, -1, -1, -1, -1, 0, 2, 4, 6, 8, 10,
                                       12, 14, -1, -1, -1, -1, -1, -1, -1, -1);
    __m256i x = _mm256_unpacklo_epi64(_mm256_shuffle_epi8(a, m), _mm256_shuffle_epi8(b, m));
    return _mm256_permute4x64_epi64(x, 0xD8);
}
PL_AVX2 static inline __m256i pl_evens_epi16(__m256i a, __m256i b)
{
    const __m256i m = _mm256_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, -1, -1, -1, -1, -1, -1, -1, -1, 0, 1, 4, 5, 8, 9, 12,
                                       13, -1, -1, -1, -1, -1, -1, -1, -1);
    __m256i x = _mm256_unpacklo_epi64(_mm256_shuffle_epi8(a, m), _mm256_shuffle_epi8(b, m));
    return _mm256_permute4x64_epi64(x, 0xD8);
}
PL_AVX2 static inline __m256i pl_evens_epi32(__m256i a, __m256i b)
{
    __m256 x = _mm256_shuffle_ps(_mm256_castsi256_ps(a), _mm256_castsi256_ps(b), _MM_SHUFFLE(2, 0, 2, 0));
    return _mm256_permute4x64_epi64(_mm256_castps_si256(x), 0xD8);
}
PL_AVX2 static inline __m256i pl_evens_epi64(__m256i a, __m256i b)
{
    return _mm256_permute4x64_epi64(_mm256_unpacklo_epi64(a, b), 0xD8);
}

PL_DEFINE_GATHER2(pl_gather2_1_avx2, 1, pl_evens_epi8)
PL_DEFINE_GATHER2(pl_gather2_2_avx2, 2, pl_evens_epi16)
PL_DEFINE_GATHER2(pl_gather2_4_avx2, 4, pl_evens_epi32)
PL_DEFINE_GATHER2(pl_gather2_8_avx2, 8, pl_evens_epi64)

PL_DEFINE_STREAM_COPY(pl_stream_copy_avx2, PL_AVX2, __m256i, pl_loadu_si256, pl_stream_si256v)
PL_DEFINE_GROUP_STREAM(pl_group_stream_avx2, PL_AVX2, __m256i, pl_loadu_si256, pl_stream_si256v,
                       pl_group_stream_sse2)

/* The AVX2 cached tiles, gathers and complex interleaves; shared with the
 * AVX-512 table, which has its own streaming kernels and 4-byte tile. */
#define PL_AVX2_TILES(TILE1, TILE2, TILE4)                                                               \
    .tile = {                                                                                            \
        [PL_SIZE1] = TILE1,                                                                              \
        [PL_SIZE2] = TILE2,                                                                              \
        [PL_SIZE4] = TILE4,                                                                              \
        [PL_SIZE8] = pl_tile8_avx2,                                                                      \
        [PL_SIZE16] = pl_tile16_avx2,                                                                    \
    },                                                                                                   \
    .gather2 = {                                                                                         \
        [PL_SIZE1] = pl_gather2_1_avx2,                                                                  \
        [PL_SIZE2] = pl_gather2_2_avx2,                                                                  \
        [PL_SIZE4] = pl_gather2_4_avx2,                                                                  \
        [PL_SIZE8] = pl_gather2_8_avx2,                                                                  \
    }
#define PL_AVX2_REVERSE                                                                                  \
    .reverse = {[PL_SIZE1] = _pylayout_reverse1_avx2, [PL_SIZE2] = _pylayout_reverse2_avx2,                  \
                [PL_SIZE4] = _pylayout_reverse4_avx2, [PL_SIZE8] = _pylayout_reverse8_avx2,                  \
                [PL_SIZE16] = _pylayout_reverse16_avx2},                                                     \
    .reverse_groups = _pylayout_reverse_groups_avx2

/* Groups of 3 elements packed in both (RGB pixels transposed) on AVX2:
 * the AVX-512 tile3 kernels' scheme (see there) on 32-byte vectors, blocks
 * of 8 / 4 / 2 pixels whose rows are 24 bytes, loaded and stored as 16 + 8
 * bytes (AMD cores before Zen 4 microcode vpmaskmovd stores). */
PL_AVX2 static inline __m256i pl_g3_spread256(const char *p, int e)
{
    const __m256i r = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)p)),
                                              _mm_loadl_epi64((const __m128i *)(const void *)(p + 16)), 1);
    const __m256i x = _mm256_permutevar8x32_epi32(r, _mm256_setr_epi32(0, 1, 2, 2, 3, 4, 5, 5));
    if (e == 4)
        return x;
    const __m256i bytes = e == 1 ? _mm256_setr_epi8(0, 1, 2, -1, 3, 4, 5, -1, 6, 7, 8, -1, 9, 10, 11, -1, 0, 1, 2, -1,
                                                    3, 4, 5, -1, 6, 7, 8, -1, 9, 10, 11, -1)
                                 : _mm256_setr_epi8(0, 1, 2, 3, 4, 5, -1, -1, 6, 7, 8, 9, 10, 11, -1, -1, 0, 1, 2, 3,
                                                    4, 5, -1, -1, 6, 7, 8, 9, 10, 11, -1, -1);
    return _mm256_shuffle_epi8(x, bytes);
}

PL_AVX2 static inline void pl_g3_pack256(char *p, __m256i x, int e)
{
    if (e != 4) {
        const __m256i bytes = e == 1 ? _mm256_setr_epi8(0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, -1, -1, -1, -1, 0, 1,
                                                        2, 4, 5, 6, 8, 9, 10, 12, 13, 14, -1, -1, -1, -1)
                                     : _mm256_setr_epi8(0, 1, 2, 3, 4, 5, 8, 9, 10, 11, 12, 13, -1, -1, -1, -1, 0, 1,
                                                        2, 3, 4, 5, 8, 9, 10, 11, 12, 13, -1, -1, -1, -1);
        x = _mm256_shuffle_epi8(x, bytes);
    }
    x = _mm256_permutevar8x32_epi32(x, _mm256_setr_epi32(0, 1, 2, 4, 5, 6, 0, 0));
    _mm_storeu_si128((__m128i *)(void *)p, _mm256_castsi256_si128(x));
    _mm_storel_epi64((__m128i *)(void *)(p + 16), _mm256_extracti128_si256(x, 1));
}

/* o[k] = slot k of each of r[0..V-1], V = 8 dwords, 4 qwords or 2 lanes. */
PL_AVX2 static inline void pl_g3_transpose256(const __m256i r[8], __m256i o[8], int e)
{
    if (e == 1) {
        __m256 t[8], u[8];
        for (int k = 0; k < 4; k++) {
            t[2 * k] = _mm256_unpacklo_ps(_mm256_castsi256_ps(r[2 * k]), _mm256_castsi256_ps(r[2 * k + 1]));
            t[2 * k + 1] = _mm256_unpackhi_ps(_mm256_castsi256_ps(r[2 * k]), _mm256_castsi256_ps(r[2 * k + 1]));
        }
        for (int g = 0; g < 2; g++) { /* u[4g + c], lane L: column 4L + c of rows 4g..4g+3 */
            u[4 * g + 0] = _mm256_shuffle_ps(t[4 * g], t[4 * g + 2], 0x44);
            u[4 * g + 1] = _mm256_shuffle_ps(t[4 * g], t[4 * g + 2], 0xEE);
            u[4 * g + 2] = _mm256_shuffle_ps(t[4 * g + 1], t[4 * g + 3], 0x44);
            u[4 * g + 3] = _mm256_shuffle_ps(t[4 * g + 1], t[4 * g + 3], 0xEE);
        }
        for (int c = 0; c < 4; c++) {
            o[c] = _mm256_castps_si256(_mm256_permute2f128_ps(u[c], u[4 + c], 0x20));
            o[4 + c] = _mm256_castps_si256(_mm256_permute2f128_ps(u[c], u[4 + c], 0x31));
        }
    } else if (e == 2) {
        const __m256i t0 = _mm256_unpacklo_epi64(r[0], r[1]), t1 = _mm256_unpackhi_epi64(r[0], r[1]);
        const __m256i t2 = _mm256_unpacklo_epi64(r[2], r[3]), t3 = _mm256_unpackhi_epi64(r[2], r[3]);
        o[0] = _mm256_permute2x128_si256(t0, t2, 0x20);
        o[1] = _mm256_permute2x128_si256(t1, t3, 0x20);
        o[2] = _mm256_permute2x128_si256(t0, t2, 0x31);
        o[3] = _mm256_permute2x128_si256(t1, t3, 0x31);
    } else {
        o[0] = _mm256_permute2x128_si256(r[0], r[1], 0x20);
        o[1] = _mm256_permute2x128_si256(r[0], r[1], 0x31);
    }
}

PL_AVX2 static inline __attribute__((always_inline)) void pl_g3_block256(const char *s, int64_t ssa, char *d,
                                                                         int64_t dsb, int e)
{
    const int V = 8 / e;
    __m256i r[8], o[8];
    for (int k = 0; k < V; k++)
        r[k] = pl_g3_spread256(s + k * ssa, e);
    pl_g3_transpose256(r, o, e);
    for (int k = 0; k < V; k++)
        pl_g3_pack256(d + k * dsb, o[k], e);
}

/* A tile of pixels of 3 elements of E bytes in V x V blocks (BLOCK), the
 * last along each side shifted back to overlap the one before (elements
 * written twice, the same value: src and dst never overlap); a side
 * shorter than V moves pixel by pixel. */
#define PL_DEFINE_G3_TILE(NAME, ATTR, E, V, BLOCK)                                                        \
    ATTR static void NAME(const char *src, int64_t ssa, char *dst, int64_t dsb, int64_t na, int64_t nb) \
    {                                                                                                    \
        enum { G = 3 * (E) };                                                                            \
        if (na < (V) || nb < (V)) {                                                                      \
            for (int64_t j = 0; j < nb; j++)                                                             \
                for (int64_t i = 0; i < na; i++)                                                         \
                    memcpy(dst + j * dsb + i * G, src + i * ssa + j * G, G);                             \
            return;                                                                                      \
        }                                                                                                \
        for (int64_t j = 0; j < nb; j += (V)) {                                                          \
            const int64_t J = j + (V) > nb ? nb - (V) : j;                                               \
            for (int64_t i = 0; i < na; i += (V)) {                                                      \
                const int64_t I = i + (V) > na ? na - (V) : i;                                           \
                BLOCK(src + I * ssa + J * G, ssa, dst + J * dsb + I * G, dsb, (E));                      \
            }                                                                                            \
        }                                                                                                \
    }
PL_DEFINE_G3_TILE(pl_g3tile1_avx2, PL_AVX2, 1, 8, pl_g3_block256)
PL_DEFINE_G3_TILE(pl_g3tile2_avx2, PL_AVX2, 2, 4, pl_g3_block256)
PL_DEFINE_G3_TILE(pl_g3tile4_avx2, PL_AVX2, 4, 2, pl_g3_block256)

/* Transposes into planes on AVX2 (see PL_DEFINE_SPLIT_TILE): 8 x 16
 * floats and 4 x 8 doubles.  Not 1- and 2-byte elements: 16 x 64 byte
 * blocks store 16 bytes of each dst row a block, and rows a power of two
 * apart evict the rest of the line before the next block comes (uint8
 * (1024,1024,4) by (2,1,0) 16.6 GB/s against 36 through planes).  The
 * 16 x 16 byte blocks are AVX-512's for tiles thinner than its own. */
PL_DEFINE_SPLIT_TILE(pl_split1_narrow, PL_AVX2, 1, 16, 1, __m128i, pl_loadu_si128c, pl_t16x16_epi8_regs, pl_storeu_si128)
PL_DEFINE_SPLIT_TILE(pl_split4_avx2, PL_AVX2, 4, 8, 2, __m256, pl_loadu_ps256, pl_t8x8_ps_regs, pl_storeu_ps256)
PL_DEFINE_SPLIT_TILE(pl_split8_avx2, PL_AVX2, 8, 4, 2, __m256d, pl_loadu_pd256, pl_t4x4_pd_regs, pl_storeu_pd256)
PL_DEFINE_ZIP_TILE(pl_zip4_avx2, PL_AVX2, 4, 8, 2, __m256, pl_loadu_ps256, pl_t8x8_ps_regs, pl_storeu_ps256)
PL_DEFINE_ZIP_TILE(pl_zip8_avx2, PL_AVX2, 8, 4, 2, __m256d, pl_loadu_pd256, pl_t4x4_pd_regs, pl_storeu_pd256)
PL_DEFINE_ZIP_STREAM_TILE(pl_szip4_avx2, PL_AVX2, 4, 8, 2, __m256, pl_loadu_ps256, pl_t8x8_ps_regs, pl_storeu_ps256,
                          pl_stream_ps256)
PL_DEFINE_ZIP_STREAM_TILE(pl_szip8_avx2, PL_AVX2, 8, 4, 2, __m256d, pl_loadu_pd256, pl_t4x4_pd_regs, pl_storeu_pd256,
                          pl_stream_pd256)
PL_DEFINE_SPLIT_STREAM_TILE(pl_ssplit4_avx2, PL_AVX2, 4, 8, 2, __m256, pl_loadu_ps256, pl_t8x8_ps_regs,
                            pl_storeu_ps256, pl_stream_ps256)
PL_DEFINE_SPLIT_STREAM_TILE(pl_ssplit8_avx2, PL_AVX2, 8, 4, 2, __m256d, pl_loadu_pd256, pl_t4x4_pd_regs,
                            pl_storeu_pd256, pl_stream_pd256)

#define PL_AVX2_COMPLEX                                                                                  \
    .pack = {[PL_SIZE2] = _pl_pack_2, [PL_SIZE4] = _pylayout_pack4_avx2, [PL_SIZE8] = _pylayout_pack8_avx2},   \
    .pack_stream = {[PL_SIZE4] = _pylayout_pack4_avx2_stream},                                           \
    .unpack = {[PL_SIZE2] = _pl_unpack_2, [PL_SIZE4] = _pylayout_unpack4_avx2, [PL_SIZE8] = _pylayout_unpack8_avx2}

const _pylayout_kernels _pylayout_kernels_avx2 = {
    .name = "avx2",
    PL_AVX2_TILES(pl_tile1_avx2, pl_tile2_avx2, pl_tile4_avx2),
    .tile3 = {[PL_SIZE1] = pl_g3tile1_avx2, [PL_SIZE2] = pl_g3tile2_avx2, [PL_SIZE4] = pl_g3tile4_avx2},
    .tile_split = {[PL_SIZE4] = pl_split4_avx2, [PL_SIZE8] = pl_split8_avx2},
    .tile_zip = {[PL_SIZE4] = pl_zip4_avx2, [PL_SIZE8] = pl_zip8_avx2},
    .tile_zip_stream = {[PL_SIZE4] = pl_szip4_avx2, [PL_SIZE8] = pl_szip8_avx2},
    .tile_split_stream = {[PL_SIZE4] = pl_ssplit4_avx2, [PL_SIZE8] = pl_ssplit8_avx2},
    .tile_wrap = {[PL_SIZE4] = pl_wtile4_avx2, [PL_SIZE8] = pl_wtile8_avx2},
    .tile_wrap_back = {[PL_SIZE4] = pl_wtile4_avx2_back, [PL_SIZE8] = pl_wtile8_avx2_back},
    .tile_wrap_one = {[PL_SIZE4] = pl_wtile4_avx2_one, [PL_SIZE8] = pl_wtile8_avx2_one},
    .tile_wrap_one_back = {[PL_SIZE4] = pl_wtile4_avx2_one_back, [PL_SIZE8] = pl_wtile8_avx2_one_back},
    .tile_stream = {
        [PL_SIZE1] = pl_stile1_avx2,
        [PL_SIZE2] = pl_stile2_avx2,
        [PL_SIZE4] = pl_stile4_avx2,
        [PL_SIZE8] = pl_stile8_avx2,
        [PL_SIZE16] = pl_stile16_avx2,
    },
    .tile_stream_staged = {[PL_SIZE1] = pl_stile1_staged_avx2},
    .gather2_stream = {
        [PL_SIZE1] = pl_gather2_1_avx2_stream,
        [PL_SIZE2] = pl_gather2_2_avx2_stream,
        [PL_SIZE4] = pl_gather2_4_avx2_stream,
        [PL_SIZE8] = pl_gather2_8_avx2_stream,
    },
    .gatherk = {[PL_SIZE1] = _pylayout_gatherk1_avx2, [PL_SIZE2] = _pylayout_gatherk2_avx2,
                [PL_SIZE4] = _pylayout_gatherk4_avx2, [PL_SIZE8] = _pylayout_gatherk8_avx2},
    .group_gather = _pylayout_group_gather_avx2,
    .rows = _pylayout_rows_avx2,
    .fill = {[PL_SIZE1] = _pylayout_fill1_avx2, [PL_SIZE2] = _pylayout_fill2_avx2, [PL_SIZE4] = _pylayout_fill4_avx2,
             [PL_SIZE8] = _pylayout_fill8_avx2, [PL_SIZE16] = _pylayout_fill16_avx2},
    .stream_copy = pl_stream_copy_avx2,
    .group_stream = pl_group_stream_avx2,
    PL_AVX2_COMPLEX,
    PL_AVX2_REVERSE,
    .group_flip = _pylayout_group_flip_avx2,
    .block_perm = _pylayout_block_perm_avx2,
    .fence = pl_sfence,
    .thin = &_pylayout_thin_avx2,
};

/* --------------------------------------------------------------- AVX-512 */

/* AVX-512F + BW, chosen over AVX2 when the CPU has both.  Only the kernels
 * where 64-byte vectors measured faster are new: each streaming store then
 * writes one whole line.  Measured on (32,64,112,224)[..., ::2] float32
 * (tools-style loop over 98 MiB): 5.5 -> 6.3 GB/s on 1 thread, 12.0 -> 13.4
 * on 2.  The cached 4-byte tile is pl_tile4_avx512 (16x16 blocks); the
 * other cached tiles stay AVX2. */
#define PL_AVX512 __attribute__((target("avx512f,avx512bw,prfchw")))

/* Step-2 streaming gathers with 64-byte vectors: two loads, one two-source
 * permute picking the even elements, one streaming store per dst line. */
PL_AVX512 static inline __m512i pl_loadu_si512(const void *p) { return _mm512_loadu_si512(p); }
PL_AVX512 static inline void pl_stream_si512v(void *p, __m512i v) { _mm512_stream_si512(p, v); }

PL_AVX512 static inline __m512i pl_evens512_epi16(__m512i a, __m512i b)
{
    const __m512i idx = _mm512_setr_epi32(0x00020000, 0x00060004, 0x000A0008, 0x000E000C, 0x00120010, 0x00160014,
                                          0x001A0018, 0x001E001C, 0x00220020, 0x00260024, 0x002A0028, 0x002E002C,
                                          0x00320030, 0x00360034, 0x003A0038, 0x003E003C);
    return _mm512_permutex2var_epi16(a, idx, b);
}
PL_AVX512 static inline __m512i pl_evens512_epi32(__m512i a, __m512i b)
{
    const __m512i idx = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    return _mm512_permutex2var_epi32(a, idx, b);
}
PL_AVX512 static inline __m512i pl_evens512_epi64(__m512i a, __m512i b)
{
    const __m512i idx = _mm512_setr_epi64(0, 2, 4, 6, 8, 10, 12, 14);
    return _mm512_permutex2var_epi64(a, idx, b);
}

#define PL_DEFINE_GATHER2_512(NAME, SIZE, EVENS)                                                         \
    PL_DEFINE_GATHER2_KERNEL(NAME, PL_AVX512, SIZE, __m512i, pl_loadu_si512, pl_stream_si512v, EVENS, 64)
PL_DEFINE_GATHER2_512(pl_gather2_2_avx512_stream, 2, pl_evens512_epi16)
PL_DEFINE_GATHER2_512(pl_gather2_4_avx512_stream, 4, pl_evens512_epi32)
PL_DEFINE_GATHER2_512(pl_gather2_8_avx512_stream, 8, pl_evens512_epi64)
PL_DEFINE_STREAM_COPY(pl_stream_copy_avx512, PL_AVX512, __m512i, pl_loadu_si512, pl_stream_si512v)
PL_DEFINE_GROUP_STREAM(pl_group_stream_avx512, PL_AVX512, __m512i, pl_loadu_si512, pl_stream_si512v,
                       pl_group_stream_avx2)

/* 1-byte tiles with one side of 9 to 15 elements and the other of 16 or
 * more: uint8 images of 9-15 channels between NCHW and NHWC, more planes
 * than the thin kernels take and fewer than a 16x16 block has rows, which
 * the other tiles ran wholly on their scalar edges (2.7-3.1 GB/s, level
 * with torch).  Each 16x16 block reads its short side's bytes with a
 * masked load (nothing past them is touched: masked-off bytes never
 * fault) and writes them with 16-byte stores, or reads whole rows and
 * writes masked ones; the last block along the long side is moved back to
 * end with it.  Returns false for any other tile. */
PL_AVX512 static bool pl_tile1_thin_side_avx512(const char *src, int64_t ssa, char *dst, int64_t dsb, int64_t na,
                                                int64_t nb)
{
    __m128i r[16], o[16];
    if (nb > 8 && nb < 16 && na >= 16) { /* short b: masked loads of nb bytes, nb dst rows */
        const __mmask64 m = ((__mmask64)1 << nb) - 1;
        /* 16 bytes from a row that is not the tile's last stay inside the
         * tensor: they end before the next row starts, or inside it */
        const bool whole = ssa >= 16 || (ssa > 0 && ssa + nb >= 16);
        for (int64_t i0 = 0; i0 < na; i0 += 16) {
            const int64_t i = i0 + 16 > na ? na - 16 : i0;
            const int plain = !whole ? 0 : i + 16 < na ? 16 : 15; /* rows read whole */
            for (int k = 0; k < plain; k++)
                r[k] = _mm_loadu_si128((const __m128i *)(const void *)(src + (i + k) * ssa));
            for (int k = plain; k < 16; k++)
                r[k] = _mm512_castsi512_si128(_mm512_maskz_loadu_epi8(m, src + (i + k) * ssa));
            pl_t16x16_epi8_regs(r, o);
            for (int64_t c = 0; c < nb; c++)
                _mm_storeu_si128((__m128i *)(void *)(dst + c * dsb + i), o[c]);
        }
        return true;
    }
    if (na > 8 && na < 16 && nb >= 16) { /* short a: na src rows, masked stores of na bytes */
        const __mmask64 m = ((__mmask64)1 << na) - 1;
        for (int k = (int)na; k < 16; k++)
            r[k] = _mm_setzero_si128();
        for (int64_t j0 = 0; j0 < nb; j0 += 16) {
            const int64_t j = j0 + 16 > nb ? nb - 16 : j0;
            for (int64_t k = 0; k < na; k++)
                r[k] = _mm_loadu_si128((const __m128i *)(const void *)(src + k * ssa + j));
            pl_t16x16_epi8_regs(r, o);
#pragma GCC unroll 16
            for (int c = 0; c < 16; c++)
                _mm512_mask_storeu_epi8(dst + (j + c) * dsb, m, _mm512_castsi128_si512(o[c]));
        }
        return true;
    }
    return false;
}

/* The cached 1-byte tile: pl_tile1_avx2's 16x16 blocks, and the thin-side
 * blocks above (128-bit blocks, masked through 512-bit loads and stores:
 * AVX-512 BW without VL). */
PL_AVX512 static void pl_tile1_avx512(const char *src, int64_t ssa, char *dst, int64_t dsb, int64_t na, int64_t nb)
{
    if (!pl_tile1_thin_side_avx512(src, ssa, dst, dsb, na, nb))
        pl_tile1_avx2(src, ssa, dst, dsb, na, nb);
}

/* ---- 1-byte transposes on 64-byte vectors ----
 *
 * The 1-byte streaming tile (see PL_DEFINE_STREAM_TILE): whole 256-row
 * bands (plan.c gives it tiles 256 bytes along i) go to
 * _pylayout_stile1_bands_avx512 (tile_bytes_x86.c: each src line read once
 * with a 64-byte load, 256-byte dst runs; 8192x8192 uint8 in
 * tools/bench_copy: 19.9-20.9 GB/s at 1 thread, 0.81-0.85 of memcpy,
 * against 9.4-11 before), the last na % 256 rows to the line-at-a-time
 * AVX2 kernel. */
PL_AVX512 static void pl_stile1_avx512(const char *src, int64_t ssa, char *dst, int64_t dsb, int64_t na,
                                       int64_t nb)
{
    if ((((uintptr_t)dst) | (uintptr_t)dsb) & 63) {
        pl_tile1_avx512(src, ssa, dst, dsb, na, nb);
        return;
    }
    if (pl_tile1_thin_side_avx512(src, ssa, dst, dsb, na, nb))
        return;
    const int64_t nbands = na / PL_BYTE_BAND, nar = nbands * PL_BYTE_BAND;
    if (nbands > 0)
        _pylayout_stile1_bands_avx512(src, ssa, dst, dsb, nbands, nb);
    if (nar < na)
        pl_stile1_avx2(src + nar * ssa, ssa, dst + nar, dsb, na - nar, nb);
}

/* The same bands with cached stores, for dst rows off their lines, whose
 * 256-byte runs cannot stream (pl_tile1_avx2's 16x16 blocks ran such
 * copies at a quarter of memcpy).  The last na % 256 rows as the cached
 * tile does them. */
PL_AVX512 static void pl_rtile1_avx512(const char *src, int64_t ssa, char *dst, int64_t dsb, int64_t na, int64_t nb)
{
    const int64_t nbands = na / PL_BYTE_BAND, nar = nbands * PL_BYTE_BAND;
    if (nbands > 0)
        _pylayout_tile1_bands_avx512(src, ssa, dst, dsb, nbands, nb);
    if (nar < na)
        pl_tile1_avx2(src + nar * ssa, ssa, dst + nar, dsb, na - nar, nb);
}

/* ---- 4- and 8-byte transposes on 64-byte vectors ----
 *
 * pl_t16x16_ps512 and pl_t8x8_pd512 leave o[k] = column k of a VxV block
 * (V = 16 floats or 8 doubles): one whole 64-byte line of dst row k.
 * Unpacks give each 128-bit lane one column of a few rows; two rounds of
 * 128-bit lane shuffles then gather a column's lanes: 64 shuffles per
 * 1 KiB of floats, 24 per 512 bytes of doubles. */

/* Lane L of the result is lane L of lanes (x0, x1, x2, x3) in that order,
 * for o[0], o[1], o[2], o[3] = lanes 0, 1, 2, 3: a 4x4 transpose of 128-bit
 * lanes. */
#define PL_LANES4x4(SHUF, x0, x1, x2, x3, o0, o1, o2, o3)                                                \
    do {                                                                                                 \
        const __typeof__(x0) v0_ = SHUF(x0, x1, 0x88), v1_ = SHUF(x0, x1, 0xDD);                         \
        const __typeof__(x0) v2_ = SHUF(x2, x3, 0x88), v3_ = SHUF(x2, x3, 0xDD);                         \
        o0 = SHUF(v0_, v2_, 0x88);                                                                       \
        o2 = SHUF(v0_, v2_, 0xDD);                                                                       \
        o1 = SHUF(v1_, v3_, 0x88);                                                                       \
        o3 = SHUF(v1_, v3_, 0xDD);                                                                       \
    } while (0)

/* o[k] = dword k of each of r[0..15]: a 16x16 transpose of dwords. */
PL_AVX512 static inline void pl_t16x16_regs512(const __m512 r[16], __m512 o[16])
{
    __m512 t[16], u[16];
#pragma GCC unroll 8
    for (int k = 0; k < 8; k++) {
        t[2 * k] = _mm512_unpacklo_ps(r[2 * k], r[2 * k + 1]);
        t[2 * k + 1] = _mm512_unpackhi_ps(r[2 * k], r[2 * k + 1]);
    }
    /* u[4g + c], lane L: column 4L + c of rows 4g..4g+3 */
#pragma GCC unroll 4
    for (int g = 0; g < 4; g++) {
        u[4 * g + 0] = _mm512_shuffle_ps(t[4 * g], t[4 * g + 2], 0x44);
        u[4 * g + 1] = _mm512_shuffle_ps(t[4 * g], t[4 * g + 2], 0xEE);
        u[4 * g + 2] = _mm512_shuffle_ps(t[4 * g + 1], t[4 * g + 3], 0x44);
        u[4 * g + 3] = _mm512_shuffle_ps(t[4 * g + 1], t[4 * g + 3], 0xEE);
    }
#pragma GCC unroll 4
    for (int c = 0; c < 4; c++)
        PL_LANES4x4(_mm512_shuffle_f32x4, u[c], u[4 + c], u[8 + c], u[12 + c], o[c], o[4 + c], o[8 + c],
                    o[12 + c]);
}

PL_AVX512 static inline __m512 pl_loadu_ps512(const char *p) { return _mm512_loadu_ps((const float *)(const void *)p); }
PL_DEFINE_LOADED(pl_t16x16_ps512, PL_AVX512, 16, __m512, pl_loadu_ps512, pl_t16x16_regs512)

/* o[c] = column c of a 32x32 block of 2-byte elements, 64 bytes of dst row
 * c.  16-bit unpacks of rows 2k and 2k+1 make dword pairs (row 2k's element
 * c, row 2k+1's), lane L of the low unpack holding columns 8L..8L+3, of the
 * high one 8L+4..8L+7; a 16x16 dword transpose of each set then lines up a
 * column's 16 pairs in row order.  80 shuffles per KiB (floats: 64). */
PL_AVX512 static inline void pl_t32x32_epi16_regs(const __m512i r[32], __m512i o[32])
{
    __m512 lo[16], hi[16], tl[16], th[16];
#pragma GCC unroll 16
    for (int k = 0; k < 16; k++) {
        lo[k] = _mm512_castsi512_ps(_mm512_unpacklo_epi16(r[2 * k], r[2 * k + 1]));
        hi[k] = _mm512_castsi512_ps(_mm512_unpackhi_epi16(r[2 * k], r[2 * k + 1]));
    }
    pl_t16x16_regs512(lo, tl);
    pl_t16x16_regs512(hi, th);
#pragma GCC unroll 16
    for (int t = 0; t < 16; t++) {
        o[8 * (t >> 2) + (t & 3)] = _mm512_castps_si512(tl[t]);
        o[8 * (t >> 2) + 4 + (t & 3)] = _mm512_castps_si512(th[t]);
    }
}

PL_AVX512 static inline __m512i pl_loadu_si512c(const char *p) { return _mm512_loadu_si512((const void *)p); }
PL_DEFINE_LOADED(pl_t32x32_epi16, PL_AVX512, 32, __m512i, pl_loadu_si512c, pl_t32x32_epi16_regs)

PL_AVX512 static inline void pl_t8x8_regs512(const __m512d r[8], __m512d o[8])
{
    __m512d t[8];
    /* t[2g + c], lane L: column 2L + c of rows 2g, 2g+1 */
#pragma GCC unroll 4
    for (int g = 0; g < 4; g++) {
        t[2 * g] = _mm512_unpacklo_pd(r[2 * g], r[2 * g + 1]);
        t[2 * g + 1] = _mm512_unpackhi_pd(r[2 * g], r[2 * g + 1]);
    }
#pragma GCC unroll 2
    for (int c = 0; c < 2; c++)
        PL_LANES4x4(_mm512_shuffle_f64x2, t[c], t[2 + c], t[4 + c], t[6 + c], o[c], o[2 + c], o[4 + c], o[6 + c]);
}

PL_AVX512 static inline __m512d pl_loadu_pd512(const char *p) { return _mm512_loadu_pd((const double *)(const void *)p); }
PL_DEFINE_LOADED(pl_t8x8_pd512, PL_AVX512, 8, __m512d, pl_loadu_pd512, pl_t8x8_regs512)

/* ---- Transposes of 3-element groups packed in both tensors ----
 *
 * An RGB image transposed, (H,W,3) by (1,0,2), moves pixels of G = 3e
 * bytes (e = 1, 2 or 4) that no SIMD element holds.  Blocks of V x V
 * pixels, V = 16 / 8 / 4, whose src rows are 48 bytes each: every row is
 * loaded (12 dwords, masked), its pixels spread to slots of W = 4e bytes
 * (lane L takes dwords 3L..3L+2 by vpermd, then an in-lane byte shuffle
 * puts each pixel at the bottom of its slot), the block transposed as V x V
 * slots (dwords, qwords or 128-bit lanes), each dst row packed back the
 * inverse way and stored, 48 bytes, masked.  All in registers: the planes
 * route (plan.c's pl_run_planes) unzips every row into L1 buffers, makes a
 * tile call per plane and zips every dst row, 227 kernel calls a 112 x 112
 * unit of uint8 pixels. */
PL_AVX512 static inline __m512i pl_g3_spread(__m512i r, int e)
{
    const __m512i lanes = _mm512_setr_epi32(0, 1, 2, 2, 3, 4, 5, 5, 6, 7, 8, 8, 9, 10, 11, 11);
    const __m512i x = _mm512_permutexvar_epi32(lanes, r);
    if (e == 4)
        return x;
    const __m512i bytes = e == 1 ? _mm512_broadcast_i32x4(_mm_setr_epi8(0, 1, 2, -1, 3, 4, 5, -1, 6, 7, 8, -1, 9, 10,
                                                                        11, -1))
                                 : _mm512_broadcast_i32x4(_mm_setr_epi8(0, 1, 2, 3, 4, 5, -1, -1, 6, 7, 8, 9, 10, 11,
                                                                        -1, -1));
    return _mm512_shuffle_epi8(x, bytes);
}

/* The inverse of pl_g3_spread: the V pixels of a row packed into its 48
 * low bytes. */
PL_AVX512 static inline __m512i pl_g3_pack(__m512i x, int e)
{
    if (e != 4) {
        const __m512i bytes = e == 1 ? _mm512_broadcast_i32x4(_mm_setr_epi8(0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, -1,
                                                                            -1, -1, -1))
                                     : _mm512_broadcast_i32x4(_mm_setr_epi8(0, 1, 2, 3, 4, 5, 8, 9, 10, 11, 12, 13, -1,
                                                                            -1, -1, -1));
        x = _mm512_shuffle_epi8(x, bytes);
    }
    const __m512i lanes = _mm512_setr_epi32(0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, 0, 0, 0, 0);
    return _mm512_permutexvar_epi32(lanes, x);
}

/* o[k] = slot k of each of r[0..V-1], V = 16 dwords, 8 qwords or 4 lanes. */
PL_AVX512 static inline void pl_g3_transpose(const __m512i r[16], __m512i o[16], int e)
{
    if (e == 1) {
        __m512 a[16], b[16];
        for (int k = 0; k < 16; k++)
            a[k] = _mm512_castsi512_ps(r[k]);
        pl_t16x16_regs512(a, b);
        for (int k = 0; k < 16; k++)
            o[k] = _mm512_castps_si512(b[k]);
    } else if (e == 2) {
        __m512i t[8];
        for (int g = 0; g < 4; g++) {
            t[2 * g] = _mm512_unpacklo_epi64(r[2 * g], r[2 * g + 1]);
            t[2 * g + 1] = _mm512_unpackhi_epi64(r[2 * g], r[2 * g + 1]);
        }
        for (int c = 0; c < 2; c++)
            PL_LANES4x4(_mm512_shuffle_i64x2, t[c], t[2 + c], t[4 + c], t[6 + c], o[c], o[2 + c], o[4 + c], o[6 + c]);
    } else {
        PL_LANES4x4(_mm512_shuffle_i32x4, r[0], r[1], r[2], r[3], o[0], o[1], o[2], o[3]);
    }
}

/* One V x V block: src rows i0.., pixels j0..; dst rows j0.., pixels i0.. */
PL_AVX512 static inline __attribute__((always_inline)) void pl_g3_block(const char *s, int64_t ssa, char *d,
                                                                         int64_t dsb, int e)
{
    const int V = 16 / e;
    __m512i r[16], o[16];
    for (int k = 0; k < V; k++)
        r[k] = pl_g3_spread(_mm512_maskz_loadu_epi32(0x0FFF, s + k * ssa), e);
    pl_g3_transpose(r, o, e);
    for (int k = 0; k < V; k++)
        _mm512_mask_storeu_epi32(d + k * dsb, 0x0FFF, pl_g3_pack(o[k], e));
}

PL_DEFINE_G3_TILE(pl_g3tile1_avx512, PL_AVX512, 1, 16, pl_g3_block)
PL_DEFINE_G3_TILE(pl_g3tile2_avx512, PL_AVX512, 2, 8, pl_g3_block)
PL_DEFINE_G3_TILE(pl_g3tile4_avx512, PL_AVX512, 4, 4, pl_g3_block)

/* Transposes into planes on AVX-512 (see PL_DEFINE_SPLIT_TILE): 16 x 16
 * floats, 8 x 8 doubles and 32 x 32 2-byte elements, whole lines on both
 * sides; bytes in 64 x 64 blocks through an L1 buffer (tile_bytes_x86.c),
 * tiles thinner than those in 16 x 16 ones. */
PL_AVX512 static inline void pl_storeu_ps512(char *d, __m512 v) { _mm512_storeu_ps((float *)(void *)d, v); }
PL_AVX512 static void pl_split1_avx512(const char *src, int64_t ssa, char *dst, int64_t dsb, int64_t dsq, int P,
                                       int64_t na, int64_t nc)
{
    _pylayout_split1_avx512(src, ssa, dst, dsb, dsq, P, na, nc, pl_split1_narrow);
}
PL_DEFINE_SPLIT_TILE(pl_split4_avx512, PL_AVX512, 4, 16, 1, __m512, pl_loadu_ps512, pl_t16x16_regs512, pl_storeu_ps512)
PL_AVX512 static inline void pl_storeu_pd512(char *d, __m512d v) { _mm512_storeu_pd((double *)(void *)d, v); }
PL_DEFINE_SPLIT_TILE(pl_split8_avx512, PL_AVX512, 8, 8, 1, __m512d, pl_loadu_pd512, pl_t8x8_regs512, pl_storeu_pd512)
PL_DEFINE_ZIP_TILE(pl_zip4_avx512, PL_AVX512, 4, 16, 1, __m512, pl_loadu_ps512, pl_t16x16_regs512, pl_storeu_ps512)
PL_DEFINE_ZIP_TILE(pl_zip8_avx512, PL_AVX512, 8, 8, 1, __m512d, pl_loadu_pd512, pl_t8x8_regs512, pl_storeu_pd512)

/* The cached 4-byte tile: 16x16 blocks, one 64-byte store per dst row, in
 * strips of 16 or 32 dst rows (PL_DEFINE_TILE_STRIPS).  Measured on the
 * 2-core EPYC (Zen 5, 512-bit datapaths) dev VM, n x n float32, 1 thread,
 * src and dst 16 bytes off their lines, best of 9, us (AVX2 8x8 whole
 * tiles / these): n=128 1.37 / 0.97, n=256 8.6 / 4.1, n=362 11.2 / 8.6,
 * n=512 136 / 42, n=724 45 / 40.  (An earlier measurement found 16x16 no
 * faster than 8x8: that was on whole tiles.)  Loading the rows' 128-bit
 * quarters with masked broadcasts, to save a round of lane shuffles,
 * measured the same: these tiles wait on memory.  Tiles thinner than 16
 * go to pl_tile4_avx2 rather than MOVE2D, and so do src or dst rows a
 * multiple of 4 KiB apart, whose 16 rows would share one L1 set (12 ways):
 * 100 x 1024 src 13.7 us with 16x16 blocks, 12.4 with 8x8, 9.6 with that
 * tile's 4x4.
 *
 * What bounds these tiles at 64 KiB - 1 MiB (src and dst in L2) is the
 * traffic, not the 64 shuffles per KiB.  tools/bench_incache 7 1,
 * 3 alternated runs, us at BENCH_OFFSET=0 (torch's buffers) / 16 (NumPy's),
 * these 16x16 blocks against three that trade shuffles for loads:
 *   n=128: 0.85-0.88 / 1.00; n=256: 3.13-3.42 / 3.91-3.94 (these);
 *   the rows' 128-bit quarters by vinsertf32x4 from memory (48 inserts,
 *   32 in-lane shuffles): 0.96-0.97 / 1.05-1.07; 3.44-3.51 / 4.02-4.10;
 *   the same by masked vbroadcastf32x4: 0.88 / 1.02-1.09; 3.26-3.30 /
 *   4.03-4.19; 256-bit halves by vinsertf64x4 (16 inserts, 48 shuffles):
 *   0.87-0.88 / 1.03-1.11; 3.03-3.06 / 4.05-4.21.
 * Inserts from memory cost Zen 5 a shuffle each: in L1 (n=64) where the
 * shuffles do bound, 0.16 us for these, 0.24 for 48 inserts + 32.  In L2 a
 * 16x16 block copy with the same addresses and no shuffles at all took as
 * long as the transpose (128 x 128: 0.95 us, throwaway harness), a
 * sequential 64-byte-vector copy of the same bytes 0.65, memcpy 0.47 (rep
 * movsb writes dst lines without reading them first).  Also lost:
 * prefetching the next 32x32 group's dst lines (prefetchw: n=128 1.10-1.12
 * against 0.87-0.89, n=256 4.2-4.9 against 3.1-3.3) or src lines (0.97-1.07,
 * 3.8-3.9); transposing each strip into an L1 buffer and copying it out
 * with rep movsb (no read-for-ownership of dst): 1.06-1.15 against
 * 0.99-1.02 in the same harness at n=128, 4.7-5.3 against 4.1 at n=256.
 * Two 16x16 blocks stacked along i with their stores interleaved (128
 * bytes of each dst row at a time): 0.97 against 0.82 at n=128.
 *
 * The same holds on the 2-core Sapphire Rapids-class Xeon (session 20),
 * whose 512-bit shuffles all go to one port: the half of a 512 x 512
 * float32 transpose that one thread of two copies (512 src rows of 256
 * floats, 2 KiB apart, into 256 dst rows of 512) in the wrapped tiles'
 * order, /tmp harness, best of 15-21 alternated runs, against these blocks
 * in the same run (13.4-15.9 us): quarters by masked broadcasts 5-6%
 * slower, by inserts 6-9%; loads and stores alone, no shuffles, level;
 * prefetching each block's next src lines 16-19% slower, the next dst
 * lines (prefetchw) 9-11%; blocks in pairs along j 13-15%, along i level;
 * 16-row strips through an L1 buffer copied out by rep movsb 22-42%.  A
 * sequential copy of the same 512 KiB with 64-byte stores took 10.7 us,
 * memcpy 9.5-10.0, and the same stores hopping between rows 2 KiB apart
 * 20.0-20.5: the pattern sets the pace, not the shuffles nor the dst
 * lines' read-for-ownership.  Session 42 found otherwise for the wrapped
 * tiles' walk, which now prefetches for writing the dst lines of the next
 * block along its rows, 7-20% faster (PL_DEFINE_WRAP_TILE); in these
 * tiles' 32 x 32 groups the same prefetch still lost. */
/* A tile kernel NAME over VxV AVX-512 blocks (WIDE, in strips) that hands
 * tiles thinner than a block, and src or dst rows a multiple of CROWD bytes
 * apart (V rows of one block would crowd an L1 set's 12 ways), to the
 * narrower AVX2 tile NARROW. */
#define PL_DEFINE_WIDE_TILE(NAME, V, CROWD, WIDE, NARROW)                                               \
    PL_AVX512 static void NAME(const char *src, int64_t ssa, char *dst, int64_t dsb, int64_t na, int64_t nb) \
    {                                                                                                    \
        if (na < (V) || nb < (V) || ssa % (CROWD) == 0 || dsb % (CROWD) == 0)                            \
            NARROW(src, ssa, dst, dsb, na, nb);                                                          \
        else                                                                                             \
            WIDE(src, ssa, dst, dsb, na, nb);                                                            \
    }

PL_DEFINE_MICRO(pl_micro4_avx512, PL_AVX512, 16, __m512, pl_t16x16_ps512, pl_storeu_ps512)
PL_DEFINE_TILE(pl_tile4_avx512_whole, PL_AVX512, 4, 16, pl_micro4_avx512, _pl_move2d_4)
PL_DEFINE_TILE_STRIPS(pl_tile4_avx512_strips, PL_AVX512, 4, 1, pl_tile4_avx512_whole)
PL_DEFINE_WIDE_TILE(pl_tile4_avx512, 16, 4096, pl_tile4_avx512_strips, pl_tile4_avx2)
PL_DEFINE_WRAP_TILE(pl_wtile4_avx512, PL_AVX512, 4, 16, __m512, pl_t16x16_ps512, pl_storeu_ps512, pl_micro4_avx512,
                    pl_tile4_avx512, _pl_move2d_4)
PL_DEFINE_MICRO(pl_micro8_avx512, PL_AVX512, 8, __m512d, pl_t8x8_pd512, pl_storeu_pd512)
PL_DEFINE_WRAP_TILE(pl_wtile8_avx512, PL_AVX512, 8, 8, __m512d, pl_t8x8_pd512, pl_storeu_pd512, pl_micro8_avx512,
                    pl_tile8_avx2, _pl_move2d_8)

/* The cached 2-byte tile: 32x32 blocks (pl_t32x32_epi16), one 64-byte
 * store per dst row, in strips; thinner tiles, and rows a multiple of 2 KiB
 * apart (32 rows would share two L1 sets), take the AVX2 8x8 ones.  n x n
 * float16, 1 thread, GB/s, AVX2 / these: n=128 18.5-19.0 / 20.8-21.6,
 * n=256 31.6 / 36.5, n=300 29.1 / 32.5, n=500 30.5-32 / 33.4-34.9. */
PL_AVX512 static inline void pl_storeu_si512(char *d, __m512i v) { _mm512_storeu_si512((void *)d, v); }
PL_DEFINE_SPLIT_TILE(pl_split2_avx512, PL_AVX512, 2, 32, 1, __m512i, pl_loadu_si512c, pl_t32x32_epi16_regs,
                     pl_storeu_si512)
/* Flattened: its two 16x16 dword transposes inlined whatever else in this
 * file calls them.  GCC had inlined one and called the other, and a second
 * call site of the 32x32 block (the streamed runs below) made it call both,
 * 5-12% slower.  Flattened, float16 n x n, 1 thread, pylayout_copy, best of
 * three processes of 15 copies, us, before / after: n=256 3.3 / 2.8,
 * n=512 16.4 / 14.4, 1000 91.1 / 73.7, 480 x 640 19.1 / 17.7, 1200 x 1600
 * 152.6 / 135.5. */
PL_DEFINE_MICRO(pl_micro2_avx512, PL_AVX512 __attribute__((flatten)), 32, __m512i, pl_t32x32_epi16, pl_storeu_si512)
PL_DEFINE_TILE(pl_tile2_avx512_whole, PL_AVX512, 2, 32, pl_micro2_avx512, _pl_move2d_2)
PL_DEFINE_TILE_STRIPS(pl_tile2_avx512_strips, PL_AVX512, 2, 1, pl_tile2_avx512_whole)
PL_DEFINE_WIDE_TILE(pl_tile2_avx512, 32, 2048, pl_tile2_avx512_strips, pl_tile2_avx2)

/* The streaming 2-byte tile: each 32x32 block's 32 dst rows are one line
 * each, streamed.  Float16 (R, C) read transposed, 1 thread, GB/s, AVX2 8x8
 * tiles / these / 128-row runs staged through a 32 KiB buffer as the
 * 4- and 8-byte kernels do: 3000x4000 23.9 / 27.3 / 16.9, 2500x3008 29.3 /
 * 35.4 / 24.3, 2048x6016 12.9 / 22.4 / 18.9, 4096x4096 10.3 / 12.5 / 12.8,
 * 8192x8192 8.9 / 10.1 / 9.8, 1536x1536 13.0 / 13.2 / 30.8, 6000x2048 12.7
 * / 12.7 / 17.5.  These are never behind AVX2; the runs are, twice.
 * Session 56 measured the runs (pl_rstile2_avx512 below) 1.4-2.2x ahead
 * of these where the copy fits in half of L3, on the Zen 5 dev VM: plan.c
 * takes them there (pl_stream_runs_max_bytes). */
PL_AVX512 static inline void pl_stream_si512(char *d, __m512i v) { _mm512_stream_si512((void *)d, v); }
PL_DEFINE_STREAM_TILE(pl_stile2_avx512_wide, PL_AVX512, 2, 32, __m512i, pl_t32x32_epi16, pl_stream_si512,
                      pl_tile2_avx512, _pl_move2d_2)

/* Tiles thinner than a block along b (NHWC -> NCHW with 9-31 float16
 * channels) would go wholly to the wide kernel's scalar edge: the AVX2
 * streaming tile's 8x8 blocks take them.  (8,224,224,C) by (0,3,1,2), 1
 * thread, GB/s, before / after: C=9 5.0 / 15.9, C=16 4.8 / 14.9, C=24 4.7
 * / 14.2; 2 threads 9.2-9.7 / 19.5-29.0. */
PL_AVX512 static void pl_stile2_avx512(const char *src, int64_t ssa, char *dst, int64_t dsb, int64_t na, int64_t nb)
{
    if (nb < 32)
        pl_stile2_avx2(src, ssa, dst, dsb, na, nb);
    else
        pl_stile2_avx512_wide(src, ssa, dst, dsb, na, nb);
}

PL_AVX512 static inline void pl_stream_ps512(char *d, __m512 v) { _mm512_stream_ps((float *)(void *)d, v); }
PL_AVX512 static inline void pl_stream_pd512(char *d, __m512d v) { _mm512_stream_pd((double *)(void *)d, v); }
PL_DEFINE_ZIP_STREAM_TILE(pl_szip4_avx512, PL_AVX512, 4, 16, 1, __m512, pl_loadu_ps512, pl_t16x16_regs512,
                          pl_storeu_ps512, pl_stream_ps512)
PL_DEFINE_ZIP_STREAM_TILE(pl_szip8_avx512, PL_AVX512, 8, 8, 1, __m512d, pl_loadu_pd512, pl_t8x8_regs512,
                          pl_storeu_pd512, pl_stream_pd512)
PL_DEFINE_SPLIT_STREAM_TILE(pl_ssplit4_avx512, PL_AVX512, 4, 16, 1, __m512, pl_loadu_ps512, pl_t16x16_regs512,
                            pl_storeu_ps512, pl_stream_ps512)
PL_DEFINE_SPLIT_STREAM_TILE(pl_ssplit8_avx512, PL_AVX512, 8, 8, 1, __m512d, pl_loadu_pd512, pl_t8x8_regs512,
                            pl_storeu_pd512, pl_stream_pd512)
PL_DEFINE_SPLIT_STREAM_TILE(pl_ssplit2_avx512, PL_AVX512, 2, 32, 1, __m512i, pl_loadu_si512c, pl_t32x32_epi16_regs,
                            pl_storeu_si512, pl_stream_si512)

/* Streaming tiles with 256-byte dst runs, like pl_stile1_avx512, for
 * elements of SIZE = 4 or 8 bytes and VxV register transposes (one dst
 * line per output vector).  plan.c gives them tiles RUN = 256 / SIZE
 * elements along i; each step transposes the RUN / V blocks stacked along
 * i and streams the four lines of each of the V dst rows back to back.
 * Src is read through a 32 KiB buffer: RUN rows of WB bytes (whole lines
 * of each row) copied row by row, then transposed from there, while the
 * runs kernel prefetches the next block's rows, a few per step, so that
 * reads overlap the streaming stores.  The columns past the last whole WB
 * go straight from src, the last nb % V by MOVE2D.  Rows past the last
 * whole run that fill two or more blocks of whole dst lines (a tile's
 * last, as the 1012 of 1024 rows left when plan.c first splits off the
 * columns before dst's line) run as one shorter run; the rest, by the
 * line-at-a-time kernel LINE_TILE.  Needs dst and dsb 64-byte aligned
 * (else the cached CACHED_TILE).  The caller fences.
 *
 * The shorter run, against all of those rows by LINE_TILE (float32 n x n
 * transposed into a NumPy-style dst 16 bytes into a line, src too,
 * copy_into best of 7, us, builds alternated in fresh processes, two
 * rounds, on the 2-core Zen 5 dev VM): n=1024 179-190 -> 167-173 at 1
 * thread, 161-165 -> 141-144 at 2; 1024 x 2048 at 2 threads 308-320 ->
 * 263-280; float64 1024 x 1024 306-317 -> 301-305 and 259-284 -> 243-256;
 * level on lines and past L3 (float32 2080 x 2080 and 3000 x 3000,
 * float64 2000 x 2000, within their noise of +-20 %).  A shorter run of
 * one block lost to LINE_TILE: units of dst rows of 256 bytes or less are
 * one block each, and float32 dst rows of 32 / 48 / 64 elements (6-8 MiB,
 * src rows 128-256 KiB apart) took 190 / 142 / 320 us -> 238 / 168 / 352
 * through it.
 *
 * Measured on 8192x8192, 1 thread, the 2-core dev VM (best of 5, two
 * runs): staging alone (no stores) ran at 20-22 GB/s, the runs alone from
 * the buffer at 27-30, together 12.4 (float32) / 13.4 (float64) with
 * plain row-ahead prefetches; WB = 256 / 512 / 1024 gave 11.0 / 12.4 / 12.5
 * for float32 and 13.8 / 13.4 / 15.0 for float64 (next-block prefetch);
 * the line-per-row AVX2 kernel ran at 9.0 / 9.4. */
#define PL_DEFINE_STREAM_RUNS_512(NAME, SIZE, V, WB, VEC, TRANSPOSE, STREAM, LINE_TILE, CACHED_TILE, MOVE2D)   \
    PL_AVX512 static inline __attribute__((always_inline)) void NAME##_runs(                             \
        const char *s, int64_t ssa, char *d, int64_t dsb, int64_t n, int nq, const char *pf, int64_t pfs, \
        int pf_rows, char *ob)                                                                          \
    {                                                                                                    \
        for (int64_t j = 0; j < n; j += (V)) {                                                           \
            if (pf != NULL)                                                                              \
                for (int k = 0; k < pf_rows; k++, pf += pfs)                                             \
                    _Pragma("GCC unroll 16") for (int l = 0; l < WB; l += 64)                            \
                        _mm_prefetch(pf + l, _MM_HINT_T0);                                                  \
            for (int q = 0; q < nq; q++) {                                                               \
                VEC o[V];                                                                                \
                TRANSPOSE(s + q * (V) * ssa + j * (SIZE), ssa, o);                                       \
                _Pragma("GCC unroll 16") for (int k = 0; k < (V); k++) {                                 \
                    if (ob != NULL)                                                                      \
                        memcpy(ob + k * 256 + q * 64, &o[k], 64);                                        \
                    else                                                                                 \
                        STREAM(d + (j + k) * dsb + q * 64, o[k]);                                        \
                }                                                                                        \
            }                                                                                            \
            if (ob != NULL)                                                                              \
                for (int k = 0; k < (V); k++)                                                            \
                    pl_stream_copy_avx512(d + (j + k) * dsb, ob + k * 256, nq * 64);                     \
        }                                                                                                \
    }                                                                                                    \
    PL_AVX512 static inline __attribute__((always_inline)) void NAME##_body(                             \
        const char *src, int64_t ssa, char *dst, int64_t dsb, int64_t na, int64_t nb, char *ob)         \
    {                                                                                                    \
        enum { RUN = 256 / (SIZE), W = (WB) / (SIZE), PF_ROWS = RUN / (W / (V)) };             \
        /* whole runs, then one shorter run of the whole lines left, then the rest */                \
        const int64_t nar = na / RUN * RUN, nbv = nb / (V) * (V);                                        \
        const int64_t nal = na - nar >= 2 * (V) ? na / (V) * (V) : nar;                                  \
        _Alignas(64) char buf[RUN * WB];                                                                 \
        for (int64_t i = 0; i < nal; i += RUN) {                                                         \
            const int64_t rows = i < nar ? RUN : nal - nar;                                              \
            const char *s = src + i * ssa;                                                               \
            char *d = dst + i * (SIZE);                                                                  \
            int64_t j0 = 0;                                                                              \
            for (; j0 + W <= nb; j0 += W) {                                                              \
                for (int k = 0; k < rows; k++) {                                                         \
                    const char *r = s + k * ssa + j0 * (SIZE);                                           \
                    _Pragma("GCC unroll 16") for (int l = 0; l < WB; l += 64)                            \
                        _mm512_store_si512((void *)(buf + k * WB + l), _mm512_loadu_si512(r + l));       \
                }                                                                                        \
                /* the next block's rows, prefetched while this one is written (a whole run's) */       \
                const char *next = rows < RUN             ? NULL                                         \
                                   : j0 + 2 * W <= nb     ? s + (j0 + W) * (SIZE)                        \
                                   : i + 2 * RUN <= nar ? s + RUN * ssa : NULL;                          \
                NAME##_runs(buf, WB, d + j0 * dsb, dsb, W, (int)(rows / (V)), next, ssa, PF_ROWS, ob);   \
            }                                                                                            \
            NAME##_runs(s + j0 * (SIZE), ssa, d + j0 * dsb, dsb, nbv - j0, (int)(rows / (V)), NULL, 0, 0, ob); \
            if (nbv < nb && rows == RUN)                                                                 \
                MOVE2D(s + nbv * (SIZE), ssa, SIZE, d + nbv * dsb, SIZE, dsb, RUN, nb - nbv);            \
            else if (nbv < nb)                                                                           \
                CACHED_TILE(s + nbv * (SIZE), ssa, d + nbv * dsb, dsb, rows, nb - nbv);                  \
        }                                                                                                \
        if (nal < na)                                                                                    \
            (ob != NULL ? CACHED_TILE : LINE_TILE)(src + nal * ssa, ssa, dst + nal * (SIZE), dsb, na - nal, nb); \
    }                                                                                                    \
    PL_AVX512 static void NAME(const char *src, int64_t ssa, char *dst, int64_t dsb, int64_t na, int64_t nb) \
    {                                                                                                    \
        if ((((uintptr_t)dst) | (uintptr_t)dsb) & 63) {                                                  \
            CACHED_TILE(src, ssa, dst, dsb, na, nb);                                                     \
            return;                                                                                      \
        }                                                                                                \
        if (nb < (V)) { /* thinner than a block: else all by MOVE2D (1.2-2x slower, C=5-12) */         \
            LINE_TILE(src, ssa, dst, dsb, na, nb);                                                       \
            return;                                                                                      \
        }                                                                                                \
        NAME##_body(src, ssa, dst, dsb, na, nb, NULL);                                                   \
    }                                                                                                    \
    PL_AVX512 __attribute__((unused)) static void NAME##_off(const char *src, int64_t ssa, char *dst,    \
                                                             int64_t dsb, int64_t na, int64_t nb)        \
    {                                                                                                    \
        if (nb < (V)) {                                                                                  \
            CACHED_TILE(src, ssa, dst, dsb, na, nb);                                                     \
            return;                                                                                      \
        }                                                                                                \
        _Alignas(64) char ob[(V) * 256];                                                                 \
        NAME##_body(src, ssa, dst, dsb, na, nb, ob);                                                     \
    }

PL_DEFINE_STREAM_RUNS_512(pl_stile4_avx512, 4, 16, 512, __m512, pl_t16x16_ps512, pl_stream_ps512, pl_stile4_avx2,
                          pl_tile4_avx2, _pl_move2d_4)
PL_DEFINE_STREAM_RUNS_512(pl_stile8_avx512, 8, 8, 1024, __m512d, pl_t8x8_pd512, pl_stream_pd512, pl_stile8_avx2,
                          pl_tile8_avx2, _pl_move2d_8)

/* The same runs for 2-byte elements (32x32 blocks, four stacked along i
 * per run, src staged 256 bytes of 128 rows at a time), for copies that
 * fit in half of L3 (plan.c, pl_stream_runs_max_bytes: 1.4-2.2x the
 * line-at-a-time pl_stile2_avx512 there on the Zen 5 dev VM); past it
 * that one came out level or ahead, and stays. */
/* The runs take their 32x32 blocks through one call: inlined four times
 * there, the blocks tipped GCC's inlining elsewhere in this file (the
 * float32 and SSE2 tiles), which a kernel added should not do. */
PL_AVX512 __attribute__((noinline)) static void pl_t32x32_epi16_apart(const char *s, int64_t ssa, __m512i o[32])
{
    pl_t32x32_epi16(s, ssa, o);
}
PL_DEFINE_STREAM_RUNS_512(pl_rstile2_avx512, 2, 32, 256, __m512i, pl_t32x32_epi16_apart, pl_stream_si512,
                          pl_stile2_avx512, pl_tile2_avx512, _pl_move2d_2)

const _pylayout_kernels _pylayout_kernels_avx512 = {
    .name = "avx512",
    PL_AVX2_TILES(pl_tile1_avx512, pl_tile2_avx512, pl_tile4_avx512),
    .tile_wrap = {[PL_SIZE4] = pl_wtile4_avx512, [PL_SIZE8] = pl_wtile8_avx512},
    .tile_wrap_back = {[PL_SIZE4] = pl_wtile4_avx512_back, [PL_SIZE8] = pl_wtile8_avx512_back},
    .tile_wrap_on_lines = {[PL_SIZE4] = true, [PL_SIZE8] = true},
    .tile_runs = {[PL_SIZE1] = pl_rtile1_avx512, [PL_SIZE4] = pl_stile4_avx512_off, [PL_SIZE8] = pl_stile8_avx512_off},
    .tile3 = {[PL_SIZE1] = pl_g3tile1_avx512, [PL_SIZE2] = pl_g3tile2_avx512, [PL_SIZE4] = pl_g3tile4_avx512},
    .tile_split = {[PL_SIZE1] = pl_split1_avx512, [PL_SIZE2] = pl_split2_avx512, [PL_SIZE4] = pl_split4_avx512,
                   [PL_SIZE8] = pl_split8_avx512},
    .tile_zip = {[PL_SIZE4] = pl_zip4_avx512, [PL_SIZE8] = pl_zip8_avx512},
    .tile_zip_stream = {[PL_SIZE4] = pl_szip4_avx512, [PL_SIZE8] = pl_szip8_avx512},
    .tile_split_stream = {[PL_SIZE2] = pl_ssplit2_avx512, [PL_SIZE4] = pl_ssplit4_avx512,
                          [PL_SIZE8] = pl_ssplit8_avx512},
    .tile_stream = {
        [PL_SIZE1] = pl_stile1_avx512,
        [PL_SIZE2] = pl_stile2_avx512,
        [PL_SIZE4] = pl_stile4_avx512,
        [PL_SIZE8] = pl_stile8_avx512,
        [PL_SIZE16] = pl_stile16_avx2,
    },
    .tile_stream_runs = {[PL_SIZE2] = pl_rstile2_avx512},
    .gather2_stream = {
        [PL_SIZE1] = pl_gather2_1_avx2_stream,
        [PL_SIZE2] = pl_gather2_2_avx512_stream,
        [PL_SIZE4] = pl_gather2_4_avx512_stream,
        [PL_SIZE8] = pl_gather2_8_avx512_stream,
    },
    .gatherk = {[PL_SIZE1] = _pylayout_gatherk1_avx512, [PL_SIZE2] = _pylayout_gatherk2_avx512,
                [PL_SIZE4] = _pylayout_gatherk4_avx512, [PL_SIZE8] = _pylayout_gatherk8_avx512},
    .group_gather = _pylayout_group_gather_avx512,
    .group_scatter = _pylayout_group_scatter_avx512,
    .group_move = _pylayout_group_move_avx512,
    .group_flip = _pylayout_group_flip_avx512,
    .block_perm = _pylayout_block_perm_avx512,
    .rows = _pylayout_rows_avx512,
    .fill = {[PL_SIZE1] = _pylayout_fill1_avx512, [PL_SIZE2] = _pylayout_fill2_avx512,
             [PL_SIZE4] = _pylayout_fill4_avx512, [PL_SIZE8] = _pylayout_fill8_avx512,
             [PL_SIZE16] = _pylayout_fill16_avx512},
    .stream_copy = pl_stream_copy_avx512,
    .group_stream = pl_group_stream_avx512,
    PL_AVX2_COMPLEX,
    PL_AVX2_REVERSE,
    .fence = pl_sfence,
    .thin = &_pylayout_thin_avx2,
};

#else

/* ISO C forbids an empty translation unit. */
typedef int pylayout_copy_x86_unused;

#endif
