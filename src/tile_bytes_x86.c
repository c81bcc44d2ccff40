/*
 * tile_bytes_x86.c - the AVX-512 (F + BW) 1-byte streaming transpose: the
 * body of copy_x86.c's pl_stile1_avx512, which plan.c picks for uint8 /
 * int8 / bool transposes above PL_STREAM_MIN_BYTES whose dst rows start on
 * cache lines.  Compiled with per-function target attributes, like
 * copy_x86.c; cpu_features.c only ever runs it on a CPU with AVX-512 BW.
 *
 * Where the time went (8192 x 8192 uint8, 1 thread, the 2-core dev VM, a
 * Zen 5 EPYC under KVM; GB/s against memcpy in the same process, 21-24).
 * The kernel before this one ran at 10-11: it copied 256 rows x 128 bytes
 * of src into an L1 buffer (T0 prefetches 8 rows ahead), then transposed
 * that buffer to 256-byte dst runs.  Alone, its copy-in ran at 17.5 and
 * its transpose-out at 40; together 12.3, the sum of the two times.  The
 * transposes were not the problem (74 GB/s from L1 for those below); the
 * reads were: src rows 8192 bytes apart all fall in one set of the 12-way
 * L1 (lines prefetched there evict each other) and in 8 sets of the 16-way
 * L2 (at most 128 rows of one column line fit), and the hardware
 * prefetchers do not follow a walk down a column.
 *
 * This kernel:
 *   - reads each src line once, as one 64-byte load, 16 rows x 2 lines
 *     per step, the rows 112 ahead prefetched with PREFETCHT2 (into L2;
 *     T0 ran 14 GB/s, T1 as T2, NTA 15);
 *   - transposes each 16 x 64 bytes within 128-bit lanes (four rounds of
 *     unpacks) into an L1 buffer, and finishes each 64-row dst line with a
 *     4 x 4 transpose of 128-bit lanes;
 *   - interleaves the reads of one 256 x 128 block with the streaming
 *     stores of the block before it, in one 32 KiB buffer.
 * Measured (medians of 12-30 runs in each of several processes: the VM's
 * memory speed moves by 20% from one process to the next): writing dst
 * alone, 51 GB/s; reading and transposing src but writing nothing, 21.6-22
 * (blocks one line wide; the read pattern alone, 21.7; 512 bytes of each
 * row instead, 30.6: wider blocks read faster, but their buffers leave
 * L1); together 16-21 (0.72-0.94 of memcpy).  Blocks one line wide (two
 * 16 KiB buffers) ran 1-14% slower, four lines wide (64 KiB) about 20%
 * slower; prefetching 64 rows ahead up to 25% slower, 96 and 128 rows
 * within about 10% of 112 either way, depending on the run.
 *
 * Shuffles: 4 in-lane unpacks and 2 lane shuffles per 64-byte dst line,
 * the fewest 2-input stages a 64 x 64 byte transpose can have (log2 64 = 6
 * levels), with the cheapest ops for four of them.  On this CPU VPUNPCK*
 * zmm issue twice as fast as VPERMT2B / VPERMB / VSHUFI64X2 / VINSERTI32X4
 * zmm (0.145 against 0.288 TSC cycles each, 20 independent chains), so an
 * AVX-512 VBMI network (VPERMT2B at every level) would cost more, not
 * less, and the transposes are a quarter of the time memory takes anyway.
 */
#include "tile_bytes_x86.h"

#if defined(PYLAYOUT_HAVE_X86_KERNELS)

#include <immintrin.h>

#define PL_AVX512 __attribute__((target("avx512f,avx512bw")))

/* The transposes pass 16 vectors in and out by array: inlined, they stay in
 * registers; called, they go through the stack (GCC 12 -O3 once left the
 * lane transposes out of line in a stage unit). */
#define PL_INLINE __attribute__((always_inline)) inline

/* Four rounds of in-lane unpacks (8-, 16-, 32-, 64-bit units): with lane L
 * of r[k] = 16 bytes of row k, lane L of o[m] = byte m of those 16 bytes
 * of rows 0..15, i.e. a 16 x 16 transpose in each 128-bit lane. */
PL_AVX512 static PL_INLINE void pl_t16x16_lanes_epi8(const __m512i r[16], __m512i o[16])
{
    __m512i a[16], b[16], c[16];
#pragma GCC unroll 8
    for (int k = 0; k < 8; k++) {
        a[2 * k] = _mm512_unpacklo_epi8(r[2 * k], r[2 * k + 1]);
        a[2 * k + 1] = _mm512_unpackhi_epi8(r[2 * k], r[2 * k + 1]);
    }
#pragma GCC unroll 4
    for (int k = 0; k < 4; k++) {
        b[4 * k + 0] = _mm512_unpacklo_epi16(a[4 * k], a[4 * k + 2]);
        b[4 * k + 1] = _mm512_unpackhi_epi16(a[4 * k], a[4 * k + 2]);
        b[4 * k + 2] = _mm512_unpacklo_epi16(a[4 * k + 1], a[4 * k + 3]);
        b[4 * k + 3] = _mm512_unpackhi_epi16(a[4 * k + 1], a[4 * k + 3]);
    }
#pragma GCC unroll 2
    for (int h = 0; h < 2; h++) {
#pragma GCC unroll 4
        for (int m = 0; m < 4; m++) {
            c[8 * h + 2 * m] = _mm512_unpacklo_epi32(b[8 * h + m], b[8 * h + 4 + m]);
            c[8 * h + 2 * m + 1] = _mm512_unpackhi_epi32(b[8 * h + m], b[8 * h + 4 + m]);
        }
    }
#pragma GCC unroll 8
    for (int q = 0; q < 8; q++) {
        o[2 * q] = _mm512_unpacklo_epi64(c[q], c[8 + q]);
        o[2 * q + 1] = _mm512_unpackhi_epi64(c[q], c[8 + q]);
    }
}

/* ---- column edges: 16 columns at a time, straight from src ----
 *
 * Four 16x16 byte blocks stacked along i (src rows s + (16q + k) * ssa,
 * q < 4), one per 128-bit lane: the in-lane transposes then leave o[k] =
 * column k of all 64 rows, one whole 64-byte line of dst row k. */
PL_AVX512 static inline __m512i pl_rows4_epi8(const char *s, int64_t ssa)
{
    __m512i r = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)(const void *)s));
    r = _mm512_inserti32x4(r, _mm_loadu_si128((const __m128i *)(const void *)(s + 16 * ssa)), 1);
    r = _mm512_inserti32x4(r, _mm_loadu_si128((const __m128i *)(const void *)(s + 32 * ssa)), 2);
    return _mm512_inserti32x4(r, _mm_loadu_si128((const __m128i *)(const void *)(s + 48 * ssa)), 3);
}

PL_AVX512 static PL_INLINE void pl_t16x16x4_epi8(const char *s, int64_t ssa, __m512i o[16])
{
    __m512i r[16];
#pragma GCC unroll 16
    for (int k = 0; k < 16; k++)
        r[k] = pl_rows4_epi8(s + k * ssa, ssa);
    pl_t16x16_lanes_epi8(r, o);
}

/* Columns [0, n) (n a multiple of 16) of PL_BYTE_BAND src rows to dst:
 * every dst row gets 256 contiguous bytes, four whole lines, streamed back
 * to back across 16 rows.  Only for the few columns blocks leave (under 64
 * before the first line and after the last): 16 bytes per src row per
 * step is no way to read memory. */
PL_AVX512 static void pl_stream_runs1_avx512(const char *s, int64_t ssa, char *d, int64_t dsb, int64_t n)
{
    for (int64_t j = 0; j < n; j += 16)
        for (int q = 0; q < PL_BYTE_BAND / 64; q++) {
            __m512i o[16];
            pl_t16x16x4_epi8(s + 64 * q * ssa + j, ssa, o);
#pragma GCC unroll 16
            for (int k = 0; k < 16; k++)
                _mm512_stream_si512((void *)(d + (j + k) * dsb + 64 * q), o[k]);
        }
}

/* ---- whole blocks: stage units and run units ----
 *
 * A block is one band of rows x 2 (PL_BLOCK_LINES) or 1 column lines of
 * src.  The transposed bytes of each column line pass through 16 KiB of
 * the buffer as a 16 x 16 matrix of 64-byte lines X(m, g): lane L of
 * X(m, g) holds rows 16g..16g+15 of column 16L + m.  A stage unit fills
 * row g of X (16 src rows), a run unit reads column m (4 dst rows).  Blocks
 * alternate two layouts, X(m, g) at line 16m + g and at 16g + m, so that
 * at step j the stage unit for row j of the next block writes exactly the
 * 16 lines the run unit for column j of this block has just read: one
 * buffer serves both blocks. */

/* Column lines per block: 2 (128 bytes of each src row read back to back;
 * see the measurements at the top) and the prefetch distance in rows. */
enum { PL_BLOCK_LINES = 2, PL_PREFETCH_ROWS = 112 };

/* Stage unit: 16 src rows (s, s + ssa, ...) x 64 bytes, one load per line,
 * transposed in lanes; o[m] goes to x + m * stride. */
PL_AVX512 static PL_INLINE void pl_stage16_avx512(const char *s, int64_t ssa, char *x, int64_t stride)
{
    __m512i r[16], o[16];
#pragma GCC unroll 16
    for (int k = 0; k < 16; k++)
        r[k] = _mm512_loadu_si512((const void *)(s + k * ssa));
    pl_t16x16_lanes_epi8(r, o);
#pragma GCC unroll 16
    for (int m = 0; m < 16; m++)
        _mm512_store_si512((void *)(x + m * stride), o[m]);
}

/* Run unit: the 16 lines X(m, g) of one column m (g = 0..15, at x + g *
 * stride) to dst rows 16L + m (L < 4; d is row m, rows dsb apart), 256
 * bytes each.  Dst line G of column 16L + m is lane L of X(m, 4G..4G+3): a
 * 4 x 4 transpose of 128-bit lanes.  A row's four lines are streamed back
 * to back. */
PL_AVX512 static PL_INLINE void pl_run4_avx512(const char *x, int64_t stride, char *d, int64_t dsb)
{
    __m512i y[4][4]; /* [G][L] */
#pragma GCC unroll 4
    for (int G = 0; G < 4; G++) {
        const __m512i x0 = _mm512_load_si512((const void *)(x + (4 * G + 0) * stride));
        const __m512i x1 = _mm512_load_si512((const void *)(x + (4 * G + 1) * stride));
        const __m512i x2 = _mm512_load_si512((const void *)(x + (4 * G + 2) * stride));
        const __m512i x3 = _mm512_load_si512((const void *)(x + (4 * G + 3) * stride));
        const __m512i t0 = _mm512_shuffle_i64x2(x0, x1, 0x44), t1 = _mm512_shuffle_i64x2(x0, x1, 0xEE);
        const __m512i t2 = _mm512_shuffle_i64x2(x2, x3, 0x44), t3 = _mm512_shuffle_i64x2(x2, x3, 0xEE);
        y[G][0] = _mm512_shuffle_i64x2(t0, t2, 0x88);
        y[G][1] = _mm512_shuffle_i64x2(t0, t2, 0xDD);
        y[G][2] = _mm512_shuffle_i64x2(t1, t3, 0x88);
        y[G][3] = _mm512_shuffle_i64x2(t1, t3, 0xDD);
    }
#pragma GCC unroll 4
    for (int L = 0; L < 4; L++)
#pragma GCC unroll 4
        for (int G = 0; G < 4; G++)
            _mm512_stream_si512((void *)(d + L * 16 * dsb + 64 * G), y[G][L]);
}

/* Prefetches rows [0, 16) of p (ssa apart), `lines` column lines of each,
 * into L2.  Rolled loops, on purpose: the same sixteen PREFETCHT2s fully
 * unrolled (GCC -O3 and clang do that unasked) ran the kernel at 15.5
 * GB/s instead of 18.5 (8192x8192, 1 thread; also when spread among the
 * stage unit's loads or the run unit's stores). */
PL_AVX512 static PL_INLINE void pl_prefetch16(const char *p, int64_t ssa, int lines)
{
#pragma GCC unroll 1
    for (int k = 0; k < 16; k++)
#pragma GCC unroll 1
        for (int l = 0; l < lines; l++)
            _mm_prefetch(p + k * ssa + 64 * l, _MM_HINT_T2);
}

/* Blocks of `lines` column lines, t = 0 .. nbands * nblk - 1, band by
 * band: the stage units of block t + 1 go between the run units of block
 * t.  Columns [0, nblk * 64 * lines) of each band, whose rows span
 * pf_lines cache lines each (lines, or one more for rows off their
 * lines).  `next`: where the work after this starts, prefetched as if it
 * were one more block (a prefetch never faults: past the tensor it is only
 * wasted).  The caller passes lines and pf_lines as constants: with
 * pf_lines a variable, the prefetch loop alone took the kernel from 19.5
 * to 16 GB/s. */
PL_AVX512 static PL_INLINE void pl_blocks_avx512(const char *src, int64_t ssa, char *dst, int64_t dsb,
                                                 int64_t nbands, int64_t nblk, const int lines, const int pf_lines,
                                                 const char *next)
{
    const int64_t total = nbands * nblk, w = 64 * (int64_t)lines;
    _Alignas(64) char buf[PL_BLOCK_LINES][PL_BYTE_BAND * 64];
    if (total == 0)
        return;
#define PL_BLOCK_SRC(t) (src + (t) / nblk * PL_BYTE_BAND * ssa + (t) % nblk * w)
#pragma GCC unroll 1
    for (int g = 0; g < PL_PREFETCH_ROWS / 16; g++)
        pl_prefetch16(src + 16 * g * ssa, ssa, pf_lines);
    for (int64_t t = -1; t < total; t++) {
        const char *sn = t + 1 < total ? PL_BLOCK_SRC(t + 1) : NULL;
        const char *sp = t + 2 < total ? PL_BLOCK_SRC(t + 2) : t + 2 == total ? next : NULL;
        char *dt = t >= 0 ? dst + t % nblk * w * dsb + t / nblk * PL_BYTE_BAND : NULL;
        /* block t + 1 in layout 16g + m when t + 1 is odd, block t in 16m + g */
        const bool odd = ((t + 1) & 1) != 0;
        const int64_t stride = odd ? 64 : 16 * 64;
        for (int j = 0; j < 16; j++) {
            /* rows PL_PREFETCH_ROWS past this step's, in the staging order
             * (the next block's rows, then the one after) */
            const int64_t r = 16 * j + PL_PREFETCH_ROWS;
            const char *pf = sn == NULL         ? NULL
                             : r < PL_BYTE_BAND ? sn + r * ssa
                             : sp != NULL       ? sp + (r - PL_BYTE_BAND) * ssa
                                                : NULL;
            if (pf != NULL)
                pl_prefetch16(pf, ssa, pf_lines);
            const int64_t x = odd ? 16 * 64 * j : 64 * j;
            for (int c = 0; c < lines; c++) {
                if (dt != NULL)
                    pl_run4_avx512(buf[c] + x, stride, dt + (64 * c + j) * dsb, dsb);
                if (sn != NULL)
                    pl_stage16_avx512(sn + 16 * j * ssa + 64 * c, ssa, buf[c] + x, stride);
            }
        }
    }
#undef PL_BLOCK_SRC
}

/* Columns [0, n) of each band, 16 at a time straight from src, the last
 * n % 16 element by element: the few columns blocks do not cover. */
PL_AVX512 static void pl_edge_columns_avx512(const char *src, int64_t ssa, char *dst, int64_t dsb, int64_t nbands,
                                             int64_t n)
{
    const int64_t n16 = n / 16 * 16;
    for (int64_t i = 0; i < nbands; i++) {
        const char *s = src + i * PL_BYTE_BAND * ssa;
        char *d = dst + i * PL_BYTE_BAND;
        pl_stream_runs1_avx512(s, ssa, d, dsb, n16);
        if (n16 < n)
            _pl_move2d_1(s + n16, ssa, 1, d + n16 * dsb, 1, dsb, PL_BYTE_BAND, n - n16);
    }
}

PL_AVX512 void _pylayout_stile1_bands_avx512(const char *src, int64_t ssa, char *dst, int64_t dsb, int64_t nbands,
                                             int64_t nb)
{
    /* plan.c's next tile: the next band, same columns */
    const char *next_tile = src + nbands * PL_BYTE_BAND * ssa;
    /* rows that all start at the same offset past a line (a NumPy array
     * starts 16 bytes past one): the columns up to the next line first,
     * so that blocks load whole lines (8192x8192 from NumPy, 1 thread:
     * 14.3 GB/s with every 64-byte load across two lines, 17 so) */
    const int64_t off = (int64_t)((uintptr_t)src & 63);
    if (off != 0 && (ssa & 63) == 0) {
        const int64_t head = nb < 64 - off ? nb : 64 - off;
        pl_edge_columns_avx512(src, ssa, dst, dsb, nbands, head);
        src += head;
        dst += head * dsb;
        nb -= head;
    }
    const int64_t w = 64 * PL_BLOCK_LINES, nblk = nb / w, nb64 = nb / 64 * 64;
    const char *after = nblk * w < nb64 ? src + nblk * w : next_tile;
    /* rows still off their lines (not a multiple of 64 bytes apart) span
     * one line more: prefetching only `lines`, 7.6 GB/s instead of 14 */
    const bool off_lines = (((uintptr_t)src | (uintptr_t)ssa) & 63) != 0;
    if (off_lines)
        pl_blocks_avx512(src, ssa, dst, dsb, nbands, nblk, PL_BLOCK_LINES, PL_BLOCK_LINES + 1, after);
    else
        pl_blocks_avx512(src, ssa, dst, dsb, nbands, nblk, PL_BLOCK_LINES, PL_BLOCK_LINES, after);
    /* a last 64 columns: blocks of one line, one per band */
    if (nblk * w < nb64) {
        if (off_lines)
            pl_blocks_avx512(src + nblk * w, ssa, dst + nblk * w * dsb, dsb, nbands, 1, 1, 2, next_tile);
        else
            pl_blocks_avx512(src + nblk * w, ssa, dst + nblk * w * dsb, dsb, nbands, 1, 1, 1, next_tile);
    }
    /* the last nb % 64 columns */
    pl_edge_columns_avx512(src + nb64, ssa, dst + nb64 * dsb, dsb, nbands, nb - nb64);
}

#else

/* ISO C forbids an empty translation unit. */
typedef int pylayout_tile_bytes_x86_unused;

#endif
