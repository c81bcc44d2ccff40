/*
 * tile_bytes_x86.c - the AVX-512 (F + BW) 1-byte streaming transpose: the
 * body of copy_x86.c's pl_stile1_avx512, which plan.c picks for uint8 /
 * int8 / bool transposes above PL_STREAM_MIN_BYTES whose dst rows start on
 * cache lines; and the 1-byte transpose into planes (NumPy's a.T of an
 * (H,W,C) uint8 image, at the end).  Compiled with per-function target attributes, like
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

/* The store side, once per way of storing dst (see tile_bytes_x86_bands.h). */
#define PL_BANDS_FN_(name, how) name##_##how
#define PL_BANDS_FN__(name, how) PL_BANDS_FN_(name, how)
#define PL_BANDS_FN(name) PL_BANDS_FN__(name, PL_BANDS_HOW)

/* Streaming stores: dst rows on lines. */
#define PL_BANDS_HOW stream
#define PL_BANDS_STORE _mm512_stream_si512
#define PL_BANDS_EXPORT _pylayout_stile1_bands_avx512
#include "tile_bytes_x86_bands.h"
#undef PL_BANDS_HOW
#undef PL_BANDS_STORE
#undef PL_BANDS_EXPORT

/* Cached stores: dst rows anywhere (not a whole number of lines apart),
 * whose 256-byte runs cannot stream.  pl_tile1_avx2's 16x16 blocks ran
 * such copies at a quarter of memcpy: 4000x4000 uint8, 1 thread, 6.3 ->
 * 14.5 GB/s, 8000x6000 4.5 -> 10.3 (memcpy 22-26). */
#define PL_BANDS_HOW cached
#define PL_BANDS_STORE _mm512_storeu_si512
#define PL_BANDS_EXPORT _pylayout_tile1_bands_avx512
#include "tile_bytes_x86_bands.h"
#undef PL_BANDS_HOW
#undef PL_BANDS_STORE
#undef PL_BANDS_EXPORT

/* ---- transposes into planes of bytes (see _pylayout_tile_split_fn) ----
 *
 * Blocks of 64 src rows x 64 columns, 4 KiB, whole lines on both sides:
 * 16 src rows at a time transposed within 128-bit lanes (lane L of o[m] =
 * column 16L + m of those rows) into a 4 KiB L1 buffer, line X(m, g) for
 * rows 16g..16g+15; then each dst row 16L + m is lane L of X(m, 0..3), a
 * 4 x 4 transpose of 128-bit lanes, one 64-byte store.  (16 x 64 or 64 x
 * 16 blocks in registers alone leave lines part written or part read from
 * one block to the next: uint8 (1024,1024,4) by (2,1,0) 13-14 GB/s.)
 * The last block along each side is shifted back to overlap the one
 * before; tiles thinner than a block go to NARROW. */
PL_AVX512 static void pl_split1_blocks_avx512(const char *src, int64_t ssa, char *dst, int64_t dsb, int64_t dsq,
                                              int P, int64_t na, int64_t nc)
{
    _Alignas(64) char x[16 * 4 * 64];
    for (int64_t c = 0; c < nc; c += 64) {
        const int64_t C = c + 64 > nc ? nc - 64 : c;
        int64_t doff[64];
        _pl_split_rows(C, P, dsb, dsq, 64, doff);
        for (int64_t i = 0; i < na; i += 64) {
            const int64_t I = i + 64 > na ? na - 64 : i;
            const char *s = src + I * ssa + C;
            for (int g = 0; g < 4; g++) {
                __m512i r[16], o[16];
#pragma GCC unroll 16
                for (int k = 0; k < 16; k++)
                    r[k] = _mm512_loadu_si512((const void *)(s + (16 * g + k) * ssa));
                pl_t16x16_lanes_epi8(r, o);
#pragma GCC unroll 16
                for (int m = 0; m < 16; m++)
                    _mm512_store_si512((void *)(x + (4 * m + g) * 64), o[m]);
            }
#pragma GCC unroll 4
            for (int m = 0; m < 16; m++) {
                const __m512i x0 = _mm512_load_si512((const void *)(x + (4 * m + 0) * 64));
                const __m512i x1 = _mm512_load_si512((const void *)(x + (4 * m + 1) * 64));
                const __m512i x2 = _mm512_load_si512((const void *)(x + (4 * m + 2) * 64));
                const __m512i x3 = _mm512_load_si512((const void *)(x + (4 * m + 3) * 64));
                const __m512i t0 = _mm512_shuffle_i64x2(x0, x1, 0x44), t1 = _mm512_shuffle_i64x2(x0, x1, 0xEE);
                const __m512i t2 = _mm512_shuffle_i64x2(x2, x3, 0x44), t3 = _mm512_shuffle_i64x2(x2, x3, 0xEE);
                char *d = dst + I;
                _mm512_storeu_si512((void *)(d + doff[m]), _mm512_shuffle_i64x2(t0, t2, 0x88));
                _mm512_storeu_si512((void *)(d + doff[16 + m]), _mm512_shuffle_i64x2(t0, t2, 0xDD));
                _mm512_storeu_si512((void *)(d + doff[32 + m]), _mm512_shuffle_i64x2(t1, t3, 0x88));
                _mm512_storeu_si512((void *)(d + doff[48 + m]), _mm512_shuffle_i64x2(t1, t3, 0xDD));
            }
        }
    }
}

void _pylayout_split1_avx512(const char *src, int64_t ssa, char *dst, int64_t dsb, int64_t dsq, int P, int64_t na,
                             int64_t nc, _pylayout_tile_split_fn narrow)
{
    if (na < 64 || nc < 64)
        narrow(src, ssa, dst, dsb, dsq, P, na, nc);
    else
        pl_split1_blocks_avx512(src, ssa, dst, dsb, dsq, P, na, nc);
}

#else

/* ISO C forbids an empty translation unit. */
typedef int pylayout_tile_bytes_x86_unused;

#endif
