/*
 * tile_bytes_x86_bands.h - the store-side half of tile_bytes_x86.c's
 * 1-byte band transpose, included there once per way of storing dst: with
 * PL_BANDS_STORE a streaming store (dst rows on lines) or a cached one
 * (dst rows anywhere), PL_BANDS_FN(name) naming this copy's functions, and
 * PL_BANDS_EXPORT its entry point.  A template rather than a flag: the
 * streaming kernel's code, register allocation and speed stay exactly as
 * they were (a `stream` argument, inlined, cost it 15-20% at 8192x8192).
 * Not a header: no include guard, and nothing else includes it.
 */

/* Columns [0, n) (n a multiple of 16) of PL_BYTE_BAND src rows to dst:
 * every dst row gets 256 contiguous bytes, four lines' worth, stored back
 * to back across 16 rows.  Only for the few columns blocks leave (under 64
 * before the first line and after the last): 16 bytes per src row per
 * step is no way to read memory. */
PL_AVX512 static void PL_BANDS_FN(pl_runs1)(const char *s, int64_t ssa, char *d, int64_t dsb, int64_t n)
{
    for (int64_t j = 0; j < n; j += 16)
        for (int q = 0; q < PL_BYTE_BAND / 64; q++) {
            __m512i o[16];
            pl_t16x16x4_epi8(s + 64 * q * ssa + j, ssa, o);
#pragma GCC unroll 16
            for (int k = 0; k < 16; k++)
                PL_BANDS_STORE((void *)(d + (j + k) * dsb + 64 * q), o[k]);
        }
}

/* Run unit: the 16 lines X(m, g) of one column m (g = 0..15, at x + g *
 * stride) to dst rows 16L + m (L < 4; d is row m, rows dsb apart), 256
 * bytes each.  Dst line G of column 16L + m is lane L of X(m, 4G..4G+3): a
 * 4 x 4 transpose of 128-bit lanes.  A row's four lines are stored back
 * to back. */
PL_AVX512 static PL_INLINE void PL_BANDS_FN(pl_run4)(const char *x, int64_t stride, char *d, int64_t dsb)
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
            PL_BANDS_STORE((void *)(d + L * 16 * dsb + 64 * G), y[G][L]);
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
PL_AVX512 static PL_INLINE void PL_BANDS_FN(pl_blocks)(const char *src, int64_t ssa, char *dst, int64_t dsb,
                                                        int64_t nbands, int64_t nblk, const int lines,
                                                        const int pf_lines, const char *next)
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
                    PL_BANDS_FN(pl_run4)(buf[c] + x, stride, dt + (64 * c + j) * dsb, dsb);
                if (sn != NULL)
                    pl_stage16_avx512(sn + 16 * j * ssa + 64 * c, ssa, buf[c] + x, stride);
            }
        }
    }
#undef PL_BLOCK_SRC
}

/* Columns [0, n) of each band, 16 at a time straight from src, the last
 * n % 16 element by element: the few columns blocks do not cover. */
PL_AVX512 static void PL_BANDS_FN(pl_edge_columns)(const char *src, int64_t ssa, char *dst, int64_t dsb,
                                                    int64_t nbands, int64_t n)
{
    const int64_t n16 = n / 16 * 16;
    for (int64_t i = 0; i < nbands; i++) {
        const char *s = src + i * PL_BYTE_BAND * ssa;
        char *d = dst + i * PL_BYTE_BAND;
        PL_BANDS_FN(pl_runs1)(s, ssa, d, dsb, n16);
        if (n16 < n)
            _pl_move2d_1(s + n16, ssa, 1, d + n16 * dsb, 1, dsb, PL_BYTE_BAND, n - n16);
    }
}

PL_AVX512 void PL_BANDS_EXPORT(const char *src, int64_t ssa, char *dst, int64_t dsb, int64_t nbands, int64_t nb)
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
        PL_BANDS_FN(pl_edge_columns)(src, ssa, dst, dsb, nbands, head);
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
        PL_BANDS_FN(pl_blocks)(src, ssa, dst, dsb, nbands, nblk, PL_BLOCK_LINES, PL_BLOCK_LINES + 1, after);
    else
        PL_BANDS_FN(pl_blocks)(src, ssa, dst, dsb, nbands, nblk, PL_BLOCK_LINES, PL_BLOCK_LINES, after);
    /* a last 64 columns: blocks of one line, one per band */
    if (nblk * w < nb64) {
        if (off_lines)
            PL_BANDS_FN(pl_blocks)(src + nblk * w, ssa, dst + nblk * w * dsb, dsb, nbands, 1, 1, 2, next_tile);
        else
            PL_BANDS_FN(pl_blocks)(src + nblk * w, ssa, dst + nblk * w * dsb, dsb, nbands, 1, 1, 1, next_tile);
    }
    /* the last nb % 64 columns */
    PL_BANDS_FN(pl_edge_columns)(src + nb64, ssa, dst + nb64 * dsb, dsb, nbands, nb - nb64);
}
