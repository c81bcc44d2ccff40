/*
 * copy_kernels.h - the kernels behind pylayout_copy, shared by copy.c
 * (driver, portable kernels, run-time dispatch), copy_x86.c (SSE2, AVX2 and
 * AVX-512 kernels), complex.c (which asks the chosen path for AVX2) and
 * threads.c (build info).  Not installed.
 */
#ifndef PYLAYOUT_COPY_KERNELS_H
#define PYLAYOUT_COPY_KERNELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* A tile transpose kernel for one element size.  For i < na, j < nb:
 *     dst[j * dsb + i * itemsize] = src[i * ssa + j * itemsize]
 * (strides in bytes): src is unit-stride along j, dst unit-stride along i.
 * The tile is small enough to stay in L1/L2; kernels need no alignment. */
typedef void (*_pylayout_tile_fn)(const char *src, int64_t ssa, char *dst, int64_t dsb, int64_t na,
                                  int64_t nb);

/* A strided-row kernel: dst[i * itemsize] = src[i * 2 * itemsize] for
 * i < n (a unit-stride dst filled from every other element of src, as in
 * x[..., ::2]).  Reads exactly the elements it copies: never past the last. */
typedef void (*_pylayout_gather2_fn)(const char *src, char *dst, int64_t n);

/* Copies n bytes from an L1-resident buffer to dst, whole 64-byte lines of
 * dst with streaming stores (the edges with ordinary ones). */
typedef void (*_pylayout_stream_copy_fn)(char *dst, const char *src, int64_t n);

/* One SIMD path: a name for pylayout_build_info, then its kernels; the
 * per-size arrays are indexed by log2(itemsize) for sizes 1, 2, 4, 8, 16. */
typedef struct _pylayout_copy_kernels {
    const char *name;
    /* The CPU has AVX2 (this path or a wider one): complex.c's interleaves use it. */
    bool avx2;
    _pylayout_tile_fn tile[5];
    /* Variants with non-temporal (streaming) stores for copies much larger
     * than the caches, NULL where none exists.  They want tiles 64 bytes
     * wide along i and fall back to cached stores when dst or dsb is not
     * 64-byte aligned.  No streaming kernel fences: see fence. */
    _pylayout_tile_fn tile_stream[5];
    /* Step-2 gathers per element size, NULL where none exists. */
    _pylayout_gather2_fn gather2[5];
    /* The same with streaming stores, for copies beyond the caches. */
    _pylayout_gather2_fn gather2_stream[5];
    /* Buffer-to-memory streaming copy, NULL where none exists. */
    _pylayout_stream_copy_fn stream_copy;
    /* Orders every streaming store made so far before any later store
     * (sfence); NULL where nothing streams.  A caller runs it once, after
     * its last streaming call and before it reports the copy done.  Fencing
     * inside each call instead stalls on every small unit's write-back:
     * the 3 KiB units of (27,28,28,28,28).permute(2,3,1,4,0) ran at 5.5
     * GB/s fenced each, 9.5 fenced once per thread (float32, 1 thread). */
    void (*fence)(void);
} _pylayout_copy_kernels;

/* The kernels chosen at run time for this CPU (first call decides; thread-safe). */
const _pylayout_copy_kernels *_pylayout_copy_kernels_get(void);

/* The threads an OpenMP region the calling thread opens now may have
 * (threads.c): the count in force, clamped to what the machine runs and to
 * what libgomp can create without exiting the process; >= 1. */
int _pylayout_copy_threads(void);

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define PYLAYOUT_HAVE_X86_KERNELS 1
/* copy_x86.c: the SSE2 (baseline x86-64), AVX2 and AVX-512 (F + BW) kernel
 * tables. */
extern const _pylayout_copy_kernels _pylayout_copy_kernels_sse2;
extern const _pylayout_copy_kernels _pylayout_copy_kernels_avx2;
extern const _pylayout_copy_kernels _pylayout_copy_kernels_avx512;
#endif

/* Portable strided 2-D move of fixed-size elements, used for tile edges and
 * for layouts no SIMD kernel fits.  For j < nb, i < na:
 *     dst[j * dsb + i * dsa] = src[j * ssb + i * ssa]
 * The fixed-size memcpy compiles to one load and one store.  The longer
 * extent goes innermost: thin tiles (NCHW -> NHWC with 3 channels gives
 * na = 3) would otherwise pay loop overhead per element. */
#define PL_DEFINE_MOVE2D(NAME, SIZE)                                                                     \
    static inline void NAME(const char *src, int64_t ssa, int64_t ssb, char *dst, int64_t dsa,          \
                            int64_t dsb, int64_t na, int64_t nb)                                        \
    {                                                                                                    \
        if (na < 8 && nb > na) {                                                                         \
            for (int64_t i = 0; i < na; i++) {                                                           \
                const char *s = src + i * ssa;                                                           \
                char *d = dst + i * dsa;                                                                 \
                for (int64_t j = 0; j < nb; j++)                                                         \
                    memcpy(d + j * dsb, s + j * ssb, SIZE);                                              \
            }                                                                                            \
            return;                                                                                      \
        }                                                                                                \
        for (int64_t j = 0; j < nb; j++) {                                                               \
            const char *s = src + j * ssb;                                                               \
            char *d = dst + j * dsb;                                                                     \
            for (int64_t i = 0; i < na; i++)                                                             \
                memcpy(d + i * dsa, s + i * ssa, SIZE);                                                  \
        }                                                                                                \
    }

PL_DEFINE_MOVE2D(_pl_move2d_1, 1)
PL_DEFINE_MOVE2D(_pl_move2d_2, 2)
PL_DEFINE_MOVE2D(_pl_move2d_4, 4)
PL_DEFINE_MOVE2D(_pl_move2d_8, 8)
PL_DEFINE_MOVE2D(_pl_move2d_16, 16)

/* Builds a tile kernel from a VxV micro-kernel MICRO(src, ssa, dst, dsb).
 * Full blocks are visited in 2Vx2V groups so that the cache lines a group
 * touches are finished before it moves on (this is what keeps power-of-two
 * leading dimensions from thrashing L1); the two blocks that share dst rows
 * run back to back.  Edges use blocks shifted back to overlap the ones
 * before them (a copy may write an element twice: src and dst never
 * overlap); only tiles thinner than V go through MOVE2D. */
#define PL_DEFINE_TILE(NAME, ATTR, SIZE, V, MICRO, MOVE2D)                                              \
    ATTR static void NAME##_blocks(const char *src, int64_t ssa, char *dst, int64_t dsb, int64_t i0,    \
                                   int64_t i1, int64_t j0, int64_t j1)                                  \
    {                                                                                                    \
        if (i1 < (V) || j1 < (V)) {                                                                      \
            MOVE2D(src + i0 * ssa + j0 * (SIZE), ssa, SIZE, dst + j0 * dsb + i0 * (SIZE), SIZE, dsb,     \
                   i1 - i0, j1 - j0);                                                                    \
            return;                                                                                      \
        }                                                                                                \
        /* The last block along each side is shifted back to end at i1 / j1 \
         * (the tile starts at 0, so it stays inside the tile): it rewrites  \
         * a few elements with the same values instead of a scalar edge.  */ \
        for (int64_t i = i0; i < i1; i += (V)) {                                                         \
            const int64_t ii = i + (V) > i1 ? i1 - (V) : i;                                              \
            for (int64_t j = j0; j < j1; j += (V)) {                                                     \
                const int64_t jj = j + (V) > j1 ? j1 - (V) : j;                                          \
                MICRO(src + ii * ssa + jj * (SIZE), ssa, dst + jj * dsb + ii * (SIZE), dsb);             \
            }                                                                                            \
        }                                                                                                \
    }                                                                                                    \
    ATTR static void NAME(const char *src, int64_t ssa, char *dst, int64_t dsb, int64_t na, int64_t nb) \
    {                                                                                                    \
        int64_t na2 = na / (2 * (V)) * (2 * (V)), nb2 = nb / (2 * (V)) * (2 * (V));                      \
        for (int64_t i = 0; i < na2; i += 2 * (V)) {                                                     \
            for (int64_t j = 0; j < nb2; j += 2 * (V)) {                                                 \
                const char *s = src + i * ssa + j * (SIZE);                                              \
                char *d = dst + j * dsb + i * (SIZE);                                                    \
                MICRO(s, ssa, d, dsb);                                                                   \
                MICRO(s + (V) * ssa, ssa, d + (V) * (SIZE), dsb);                                        \
                MICRO(s + (V) * (SIZE), ssa, d + (V) * dsb, dsb);                                        \
                MICRO(s + (V) * ssa + (V) * (SIZE), ssa, d + (V) * dsb + (V) * (SIZE), dsb);             \
            }                                                                                            \
        }                                                                                                \
        if (nb2 < nb)                                                                                    \
            NAME##_blocks(src, ssa, dst, dsb, 0, na2, nb2, nb);                                          \
        if (na2 < na)                                                                                    \
            NAME##_blocks(src, ssa, dst, dsb, na2, na, 0, nb);                                           \
    }

#endif /* PYLAYOUT_COPY_KERNELS_H */
