/*
 * group_gather_x86.c - kernels for a dense dst filled from groups of g
 * bytes that lie `step` bytes apart in src, g < step (see
 * _pylayout_group_gather in kernels.h): an RGBA image without its alpha
 * (img[..., :3] of uint8, groups of 3 bytes at a step of 4), the xyz of
 * (N, 4) float32 points (12 bytes at 16), x[:, :6] of (N, 8).
 *
 * Dst byte j is src byte off(j) = (j / g) * step + j % g.  On vectors of
 * W bytes the pattern repeats every lcm(g, W) bytes of dst: a period of
 * nvec = g / gcd(g, W) vectors, over which src advances step * lcm / g
 * bytes.  The prepare functions build, once per copy, each vector's
 * window in src (its first byte, off(W * v), and a few loads from there)
 * and the shuffle controls from the window to the vector:
 *  - AVX2: 16-byte vectors from windows of 1 to 4 16-byte loads, each
 *    through a byte shuffle whose control zeroes the bytes another load
 *    holds, OR'ed together;
 *  - AVX-512 VBMI: 64-byte vectors from windows of 2 to 4 64-byte loads,
 *    vpermt2b over the first two and over the rest, bit 7 of the index
 *    picking which.
 * Where no window of that size holds a vector's src bytes (step much
 * larger than g) or the period is longer than PL_GG_MAX_VEC vectors,
 * prepare declines and the copy keeps its rows.
 *
 * No load reaches past the group's last byte (src + (n - 1) * step + g):
 * the AVX2 kernel goes byte by byte once a window would, the AVX-512 one
 * masks its loads there.  Bytes between groups are read, never written
 * (their values are discarded: another thread writing them meanwhile, an
 * alpha channel, is a race in C's memory model that ThreadSanitizer would
 * report, and harmless on x86; the step-k gathers read the same way).
 *
 * The inverse, a dense src into groups of dst (RGB into an RGBA buffer,
 * copy_into(rgba[..., :3], rgb); a plane into one channel), runs on
 * AVX-512 VBMI only: one load, vpermb and a store masked to the groups'
 * bytes a vector, so no byte between groups is written.  Groups at the
 * same step on both sides (one RGBA image's RGB into another's) need no
 * shuffle: a load and the same masked store a vector (AVX-512BW).
 *
 * At step -g the groups are packed, in the opposite order (group_flip):
 * each vector is one load, the bytes that end with its first group's
 * last byte, and one shuffle.
 */
#include <stdint.h>
#include <string.h>

#include "cpu_features.h"
#include "kernels.h"

#if defined(PYLAYOUT_HAVE_X86_KERNELS)

#include <immintrin.h>

#define PL_AVX2 __attribute__((target("avx2")))
#define PL_VBMI __attribute__((target("avx512f,avx512bw,avx512vbmi")))
#define PL_AVX512BW __attribute__((target("avx512f,avx512bw")))
#define PL_INLINE static inline __attribute__((always_inline))

static int64_t pl_gg_off(int64_t j, int64_t g, int64_t step) { return (j / g) * step + j % g; }

/* Vectors of W bytes until a pattern of `bytes` repeats: lcm(bytes, W) / W,
 * that is bytes / gcd(bytes, W). */
static int64_t pl_gg_period(int64_t bytes, int64_t W)
{
    int64_t a = bytes, b = W;
    while (b != 0) {
        const int64_t r = a % b;
        a = b;
        b = r;
    }
    return bytes / a;
}

/* The period and windows for vectors of W bytes and windows of at most
 * max_loads loads of L bytes; false where they do not fit. */
static bool pl_gg_shape(_pylayout_group_gather *t, int64_t g, int64_t step, int W, int L, int max_loads)
{
    if (g < 2 || g > PL_GG_MAX_GROUP || step <= g || step > PL_GG_MAX_STEP)
        return false;
    const int64_t nvec = pl_gg_period(g, W);
    if (nvec > PL_GG_MAX_VEC)
        return false;
    int loads = 1;
    for (int64_t v = 0; v < nvec; v++) {
        const int64_t first = pl_gg_off(W * v, g, step), last = pl_gg_off(W * v + W - 1, g, step);
        const int64_t need = (last - first + L) / L;
        if (need > max_loads)
            return false;
        if (need > loads)
            loads = (int)need;
        t->base[v] = first;
    }
    t->g = g;
    t->step = step;
    t->nvec = (int)nvec;
    t->loads = loads;
    t->src_period = nvec * W / g * step;
    return true;
}

/* ------------------------------------------------------------------- AVX2 */

PL_INLINE __m128i pl_ld16(const char *p) { return _mm_loadu_si128((const __m128i *)(const void *)p); }

/* The bytes [o, total) of dst one by one. */
static void pl_gg_bytes(const char *src, char *dst, int64_t o, int64_t total, int64_t g, int64_t step)
{
    int64_t q = o / g, r = o % g;
    for (int64_t j = o; j < total; j++) {
        dst[j] = src[q * step + r];
        if (++r == g)
            r = 0, q++;
    }
}

PL_AVX2 PL_INLINE void pl_gg16(const char *src, char *dst, int64_t n, const _pylayout_group_gather *t, const int NL)
{
    const int64_t total = n * t->g, span = (n - 1) * t->step + t->g;
    int64_t o = 0, so = 0; /* dst bytes done; src offset of the period */
    for (;;) {
        for (int v = 0; v < t->nvec; v++, o += 16) {
            const int64_t w = so + t->base[v];
            if (o + 16 > total || w + 16 * NL > span) {
                pl_gg_bytes(src, dst, o, total, t->g, t->step);
                return;
            }
            const char *s = src + w;
            const uint8_t *c = t->ctl[v];
            __m128i x = _mm_shuffle_epi8(pl_ld16(s), pl_ld16((const char *)c));
            for (int m = 1; m < NL; m++)
                x = _mm_or_si128(x, _mm_shuffle_epi8(pl_ld16(s + 16 * m), pl_ld16((const char *)c + 16 * m)));
            _mm_storeu_si128((__m128i *)(void *)(dst + o), x);
        }
        so += t->src_period;
    }
}

static PL_AVX2 void pl_gg16_run(const char *src, char *dst, int64_t n, const _pylayout_group_gather *t)
{
    switch (t->loads) { /* at least 2: 16 bytes of groups under 16 hold a gap */
    case 2: pl_gg16(src, dst, n, t, 2); return;
    case 3: pl_gg16(src, dst, n, t, 3); return;
    default: pl_gg16(src, dst, n, t, 4); return;
    }
}

/* Not for groups of 8 bytes or 16 and more: one or two 8-byte moves a
 * group were faster ((N,3)[:, :2] float32, 16384 rows in L1, 1 thread:
 * 23 GB/s moves, 17 shuffles; (N,4)[:, :3] float64 27 and 19). */
bool _pylayout_group_gather_avx2(_pylayout_group_gather *t, int64_t g, int64_t step)
{
    if (g == 8 || g >= 16 || !pl_gg_shape(t, g, step, 16, 16, 4))
        return false;
    for (int v = 0; v < t->nvec; v++)
        for (int i = 0; i < 16; i++) {
            const int64_t o = pl_gg_off(16 * v + i, g, step) - t->base[v];
            for (int m = 0; m < 4; m++)
                t->ctl[v][16 * m + i] = o / 16 == m ? (uint8_t)(o % 16) : 0x80;
        }
    t->run = pl_gg16_run;
    return true;
}

/* ---------------------------------------------------------- AVX-512 VBMI */

PL_INLINE uint64_t pl_gg_lanes(int64_t n) /* lanes [0, n), n clamped to [0, 64] */
{
    return n <= 0 ? 0 : n >= 64 ? ~(uint64_t)0 : ((uint64_t)1 << n) - 1;
}

PL_VBMI PL_INLINE __m512i pl_gg64_vector(const __m512i *x, __m512i idx, uint64_t hi, const int NL)
{
    __m512i r = _mm512_permutex2var_epi8(x[0], idx, x[1]);
    if (NL >= 3) /* with 3 loads no index reaches a fourth */
        r = _mm512_mask_blend_epi8((__mmask64)hi, r, _mm512_permutex2var_epi8(x[2], idx, x[NL == 4 ? 3 : 2]));
    return r;
}

PL_VBMI PL_INLINE void pl_gg64(const char *src, char *dst, int64_t n, const _pylayout_group_gather *t, const int NL)
{
    const int64_t total = n * t->g, span = (n - 1) * t->step + t->g;
    int64_t o = 0, so = 0; /* dst bytes done; src offset of the period */
    int v = 0;
    for (;;) {
        for (v = 0; v < t->nvec; v++, o += 64) {
            const int64_t w = so + t->base[v];
            if (o + 64 > total || w + 64 * NL > span)
                goto tail;
            __m512i x[4];
            for (int q = 0; q < NL; q++)
                x[q] = _mm512_loadu_si512(src + w + 64 * q);
            _mm512_storeu_si512(dst + o, pl_gg64_vector(x, _mm512_loadu_si512(t->ctl[v]), t->hi[v], NL));
        }
        so += t->src_period;
    }
tail: /* the windows that reach past the last group: loads masked there */
    while (o < total) {
        const int64_t w = so + t->base[v];
        __m512i x[4];
        for (int q = 0; q < NL; q++) {
            const int64_t lanes = span - (w + 64 * q);
            x[q] = lanes > 0 ? _mm512_maskz_loadu_epi8((__mmask64)pl_gg_lanes(lanes), src + w + 64 * q)
                             : _mm512_setzero_si512();
        }
        _mm512_mask_storeu_epi8(dst + o, (__mmask64)pl_gg_lanes(total - o),
                                pl_gg64_vector(x, _mm512_loadu_si512(t->ctl[v]), t->hi[v], NL));
        o += 64;
        if (++v == t->nvec) {
            v = 0;
            so += t->src_period;
        }
    }
}

static PL_VBMI void pl_gg64_run(const char *src, char *dst, int64_t n, const _pylayout_group_gather *t)
{
    switch (t->loads) {
    case 2: pl_gg64(src, dst, n, t, 2); return;
    case 3: pl_gg64(src, dst, n, t, 3); return;
    default: pl_gg64(src, dst, n, t, 4); return;
    }
}

/* vpermt2b is AVX-512 VBMI (Ice Lake, Zen 4 and later), which the AVX-512
 * table does not require: without it, the AVX2 kernel. */
bool _pylayout_group_gather_avx512(_pylayout_group_gather *t, int64_t g, int64_t step)
{
    if ((_pylayout_cpu_features() & PL_CPU_AVX512VBMI) == 0)
        return _pylayout_group_gather_avx2(t, g, step);
    if (!pl_gg_shape(t, g, step, 64, 64, 4))
        return false;
    if (t->loads < 2) /* one vpermt2b takes two */
        t->loads = 2;
    for (int v = 0; v < t->nvec; v++) {
        t->hi[v] = 0;
        for (int i = 0; i < 64; i++) {
            const int64_t o = pl_gg_off(64 * v + i, g, step) - t->base[v];
            t->ctl[v][i] = (uint8_t)(o & 127);
            t->hi[v] |= (uint64_t)(o >= 128) << i;
        }
    }
    t->run = pl_gg64_run;
    return true;
}

/* --------------------------------------------------- AVX-512 VBMI scatters */
/* (AVX2 has no byte-masked store that keeps the bytes between groups
 * unwritten, except the non-temporal maskmovdqu.) */

/* The inverse: dst byte x, where x % step < g, is src byte
 * (x / step) * g + x % step.  A 64-byte vector of dst holds at most 64
 * bytes of groups, consecutive in src: one load from the first of them
 * (base), vpermb, and a store masked to the groups' bytes.  The period is
 * step / gcd(step, 64) vectors. */
static int64_t pl_gs_src(int64_t x, int64_t g, int64_t step) /* the src byte of dst byte x, or of the next group */
{
    const int64_t r = x % step;
    return (x / step) * g + (r < g ? r : g);
}

/* The scatters' and moves' shape: groups step bytes apart in dst, whose
 * pattern on 64-byte vectors repeats every step / gcd(step, 64) vectors,
 * one load a vector; false where that period is over PL_GG_MAX_VEC. */
static bool pl_gs_shape(_pylayout_group_gather *t, int64_t g, int64_t step)
{
    const int64_t nvec = pl_gg_period(step, 64);
    if (nvec > PL_GG_MAX_VEC)
        return false;
    t->g = g;
    t->step = step;
    t->nvec = (int)nvec;
    t->loads = 1;
    return true;
}

PL_VBMI PL_INLINE void pl_gs64_vector(const char *src, char *dst, int64_t w, int64_t o, int64_t src_bytes,
                                      int64_t dst_bytes, __m512i idx, uint64_t keep)
{
    const __m512i x = _mm512_maskz_loadu_epi8((__mmask64)pl_gg_lanes(src_bytes - w), src + w);
    _mm512_mask_storeu_epi8(dst + o, (__mmask64)(keep & pl_gg_lanes(dst_bytes - o)), _mm512_permutexvar_epi8(idx, x));
}

static PL_VBMI void pl_gs64_run(const char *src, char *dst, int64_t n, const _pylayout_group_gather *t)
{
    const int64_t src_bytes = n * t->g, dst_bytes = (n - 1) * t->step + t->g;
    int64_t o = 0, so = 0; /* dst bytes done; src offset of the period */
    for (;;) {
        for (int v = 0; v < t->nvec; v++, o += 64) {
            const int64_t w = so + t->base[v];
            if (o + 64 > dst_bytes || w + 64 > src_bytes) { /* the rest masked at both ends */
                for (; o < dst_bytes; o += 64) {
                    pl_gs64_vector(src, dst, so + t->base[v], o, src_bytes, dst_bytes,
                                   _mm512_loadu_si512(t->ctl[v]), t->keep[v]);
                    if (++v == t->nvec) {
                        v = 0;
                        so += t->src_period;
                    }
                }
                return;
            }
            _mm512_mask_storeu_epi8(dst + o, (__mmask64)t->keep[v],
                                    _mm512_permutexvar_epi8(_mm512_loadu_si512(t->ctl[v]),
                                                            _mm512_loadu_si512(src + w)));
        }
        so += t->src_period;
    }
}

/* Only for groups under 16 bytes at steps up to 16 (not 16 for groups of
 * a power of two bytes): each vector costs the same however few of its
 * bytes it writes, and the rows' own moves, one to three a group, won
 * where groups are long or sparse.  1 thread, 1M groups (dst past L2),
 * GB/s of src, the rows' moves / this kernel:
 *   wins: uint8 (N,4)[:, :3] 2.5 / 33, (N,3)[:, 0] 3.9 / 17, (N,8)[:, 0]
 *   3.8 / 5.5, (N,16)[:, :3] 2.5 / 7.6; float16 (N,8)[:, :3] 6.1 / 13.6;
 *   float32 (N,4)[:, :3] 16.3 / 19.9, (N,3)[:, 0] 14.4 / 16.4;
 *   losses: float16 (N,8)[:, 0] 6.8 / 5.3; float32 (N,4)[:, 0] 13.3 / 10.1,
 *   (N,6)[:, :3] 14.2 / 11.2, (N,8)[:, :6] 21.4 / 14.9; float64
 *   (N,4)[:, :3] 21.5 / 14.1, (N,3)[:, 0] 14.0 / 7.2. */
bool _pylayout_group_scatter_avx512(_pylayout_group_gather *t, int64_t g, int64_t step)
{
    if ((_pylayout_cpu_features() & PL_CPU_AVX512VBMI) == 0 || g < 1 || g >= 16 || step <= g || step > 16 ||
        (step == 16 && (g & (g - 1)) == 0) || !pl_gs_shape(t, g, step))
        return false;
    t->src_period = t->nvec * 64 / step * g;
    for (int v = 0; v < t->nvec; v++) {
        t->base[v] = pl_gs_src(64 * v, g, step);
        t->keep[v] = 0;
        for (int i = 0; i < 64; i++) {
            const int64_t x = 64 * v + i, in = x % step < g;
            t->ctl[v][i] = in ? (uint8_t)(pl_gs_src(x, g, step) - t->base[v]) : 0;
            t->keep[v] |= (uint64_t)in << i;
        }
    }
    t->run = pl_gs64_run;
    return true;
}

/* ------------------------------------------ AVX-512 moves between groups */

/* Groups at the same step in src and dst (one RGBA image's RGB into
 * another's, rgba2[..., :3] = rgba[..., :3]; x[:, ::2] into y[:, ::2]):
 * dst byte x, where x % step < g, is src byte x.  Each 64-byte vector is a
 * load and a store masked to the groups' bytes (`keep`, AVX-512BW; no
 * shuffle).  The period is step / gcd(step, 64) vectors.  Loads stop at
 * the last group's last byte, masked there, as the gathers' do.
 *
 * Each vector prefetches the dst line PL_GM_AHEAD bytes on for writing:
 * past L3 the masked stores without it ran at 0.8-0.9x the rows' own
 * moves, with it at 1.0-1.2x; in cache it costs nothing measurable.  On
 * the 2-core Zen 5 dev VM, 1 thread, GB/s of groups, rows / this without /
 * with, N = 4M groups (16-64 MB a buffer): uint8 (N,4)[:, :3] 3.1 / 19.2 /
 * 26.2, float16 (N,8)[:, :3] 7.3 / 7.0 / 8.5, float32 (N,4)[:, :3] 14.5 /
 * 13.3 / 16.1, (N,4)[:, 0] 5.4 / 4.5 / 5.7, (N,8)[:, ::2] 10.2 / 8.8 /
 * 10.6, float64 (N,4)[:, :3] 15.1 / 13.2 / 15.5; N = 256K (in L2-L3):
 * uint8 3.2 / 41 / 40, float32 (N,4)[:, :3] 16.7 / 44 / 45, (N,4)[:, 0]
 * 12.4-14.3 / 13.9 / 14.9, float64 (N,4)[:, :3] 28.3 / 36.6 / 43.1.
 * Prefetching src as well lost a little (float64 15.8 -> 14.7). */
#define PL_GM_AHEAD 2048
static PL_AVX512BW void pl_gm64_run(const char *src, char *dst, int64_t n, const _pylayout_group_gather *t)
{
    const int64_t span = (n - 1) * t->step + t->g;
    int64_t o = 0;
    for (;;) {
        for (int v = 0; v < t->nvec; v++, o += 64) {
            const uint64_t keep = t->keep[v];
            if (o + 64 > span) {
                if (o < span) {
                    const __mmask64 m = (__mmask64)(keep & pl_gg_lanes(span - o));
                    _mm512_mask_storeu_epi8(dst + o, m, _mm512_maskz_loadu_epi8(m, src + o));
                }
                return;
            }
            __builtin_prefetch(dst + o + PL_GM_AHEAD, 1); /* never faults: past dst it is only wasted */
            _mm512_mask_storeu_epi8(dst + o, (__mmask64)keep, _mm512_loadu_si512(src + o));
        }
    }
}

/* Steps up to a vector, so that every vector holds some group's bytes:
 * sparser groups ran at half the rows' own moves (float32 (N,64)[:, 0],
 * step 256: 0.37 against 0.82 GB/s), and at a step of 64 the two came out
 * level. */
bool _pylayout_group_move_avx512(_pylayout_group_gather *t, int64_t g, int64_t step)
{
    if (g < 1 || step <= g || step > 64 || !pl_gs_shape(t, g, step))
        return false;
    t->src_period = t->nvec * 64;
    for (int v = 0; v < t->nvec; v++) {
        t->base[v] = 64 * v;
        t->keep[v] = 0;
        for (int i = 0; i < 64; i++)
            t->keep[v] |= (uint64_t)((64 * v + i) % step < g) << i;
    }
    t->run = pl_gm64_run;
    return true;
}

/* ------------------------------------------------ groups in reverse order */

/* Packed groups in the opposite order, dst[j] = src[-(j / g) * g + j % g]
 * (the gather at step -g): the pixels of an HWC image flipped, img[:, ::-1]
 * of NumPy, np.fliplr.  Each vector of W bytes holds k = W / g groups,
 * from the W bytes of src that end with the first one's last byte, put in
 * order by one shuffle (the same for every vector: ctl[0]).  Its bytes
 * past the k groups are the next vector's to write; the vectors stop while
 * W bytes of groups are left, so no load or store leaves the row, and the
 * last groups go one at a time (AVX2) or masked (AVX-512).  Ascending or
 * descending through dst measured the same. */
static void pl_gf_ctl(_pylayout_group_gather *t, int64_t g, int W)
{
    const int64_t k = W / g;
    memset(t->ctl[0], 0x80, sizeof t->ctl[0]);
    for (int64_t p = 0, b = 0; p < k; p++) /* byte r of group p: src lies W - (p + 1) * g + r into the load */
        for (int64_t r = 0; r < g; r++, b++)
            t->ctl[0][b] = (uint8_t)(W - (p + 1) * g + r);
    t->g = g;
    t->step = -g;
    t->nvec = 1;
    t->loads = 1;
}

static PL_AVX2 void pl_gf16_run(const char *src, char *dst, int64_t n, const _pylayout_group_gather *t)
{
    const int64_t g = t->g, k = 16 / g;
    const __m128i ctl = pl_ld16((const char *)t->ctl[0]);
    int64_t q = 0;
    for (; (n - q) * g >= 16; q += k)
        _mm_storeu_si128((__m128i *)(void *)(dst + q * g), _mm_shuffle_epi8(pl_ld16(src - q * g + g - 16), ctl));
    for (; q < n; q++)
        memcpy(dst + q * g, src - q * g, (size_t)g);
}

/* Groups of 3 to 15 bytes: one vector holds at least one.  2-, 4-, 8- and
 * 16-byte groups are one element of the copy already (plan.c), which the
 * reverse kernels flip. */
bool _pylayout_group_flip_avx2(_pylayout_group_gather *t, int64_t g, int64_t step)
{
    if (g < 2 || g >= 16 || step != -g)
        return false;
    pl_gf_ctl(t, g, 16);
    t->run = pl_gf16_run;
    return true;
}

static PL_VBMI void pl_gf64_run(const char *src, char *dst, int64_t n, const _pylayout_group_gather *t)
{
    const int64_t g = t->g, k = 64 / g;
    const __m512i ctl = _mm512_loadu_si512(t->ctl[0]);
    int64_t q = 0;
    for (; (n - q) * g >= 64; q += k)
        _mm512_storeu_si512(dst + q * g, _mm512_permutexvar_epi8(ctl, _mm512_loadu_si512(src - q * g + g - 64)));
    const int64_t left = (n - q) * g; /* under 64 bytes: fewer than k groups */
    if (left > 0) {
        const __m512i x = _mm512_maskz_loadu_epi8((__mmask64)~pl_gg_lanes(64 - left), src - q * g + g - 64);
        _mm512_mask_storeu_epi8(dst + q * g, (__mmask64)pl_gg_lanes(left), _mm512_permutexvar_epi8(ctl, x));
    }
}

/* Groups up to PL_GG_MAX_GROUP bytes (two a vector); without VBMI, the
 * AVX2 kernel. */
bool _pylayout_group_flip_avx512(_pylayout_group_gather *t, int64_t g, int64_t step)
{
    if ((_pylayout_cpu_features() & PL_CPU_AVX512VBMI) == 0)
        return _pylayout_group_flip_avx2(t, g, step);
    if (g < 2 || g > PL_GG_MAX_GROUP || step != -g)
        return false;
    pl_gf_ctl(t, g, 64);
    t->run = pl_gf64_run;
    return true;
}

#else

/* ISO C forbids an empty translation unit. */
typedef int pylayout_group_gather_x86_unused;

#endif
