/*
 * kernels.h - the kernel tables behind pylayout_copy and complex packing,
 * one per SIMD path: kernels_portable.c (scalar), copy_x86.c and
 * complex_x86.c (SSE2, AVX2 and AVX-512, compiled with per-function target
 * attributes).  cpu_features.c picks one table at run time; plan.c and
 * complex.c only ever call through it.  Not installed.
 *
 * Adding a SIMD path: write its kernels in a <what>_<arch>.c file, fill a
 * table with designated initialisers (a missing entry is NULL and the
 * callers fall back to the portable loop), and list it in cpu_features.c
 * with the CPU features it needs.
 */
#ifndef PYLAYOUT_KERNELS_H
#define PYLAYOUT_KERNELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* The one guard for x86 kernels: GCC or clang (target attributes and
 * __builtin_cpu_supports) on x86-64 (SSE2 always present). */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define PYLAYOUT_HAVE_X86_KERNELS 1
#endif

/* Outputs at least this large are written with streaming (non-temporal)
 * stores where a kernel has them: whole 64-byte lines, no read-for-
 * ownership.  Measured with float32 n x n transposes, 1 thread, on the
 * 2-core dev VM: n=512 (1 MiB) 11.7 GB/s streaming vs 13.9 cached; n=1024
 * (4 MiB) 11.1 vs 7.4; n=2048 9.8 vs 3.0; n=8192 9.4 vs 2.4.  Below ~L2
 * size cached stores win, and leave the result in cache for whoever reads
 * it next.  Complex packing uses the same threshold. */
#define PL_STREAM_MIN_BYTES ((int64_t)4 * 1024 * 1024)

/* Per-size kernel arrays are indexed by log2(element size). */
enum { PL_SIZE1, PL_SIZE2, PL_SIZE4, PL_SIZE8, PL_SIZE16, PL_NSIZES };

/* A tile transpose kernel for one element size.  For i < na, j < nb:
 *     dst[j * dsb + i * itemsize] = src[i * ssa + j * itemsize]
 * (strides in bytes): src is unit-stride along j, dst unit-stride along i.
 * The tile is small enough to stay in L1/L2; kernels need no alignment. */
typedef void (*_pylayout_tile_fn)(const char *src, int64_t ssa, char *dst, int64_t dsb, int64_t na,
                                  int64_t nb);

/* A tile transpose staged through a buffer the caller lends: as
 * _pylayout_tile_fn, with buf (any alignment) PL_STAGED_BUFFER_BYTES long,
 * scratch for this call only.  For 1-byte transposes beyond the caches,
 * whose two blocks of PL_STAGED_SIDE x PL_STAGED_SIDE bytes (one
 * transposed, the next read meanwhile) and a band of 32 dst rows, 170
 * KiB, are too large for a thread's stack (copy_x86.c,
 * pl_stile1_staged_avx2). */
typedef void (*_pylayout_tile_staged_fn)(const char *src, int64_t ssa, char *dst, int64_t dsb, int64_t na,
                                         int64_t nb, char *buf);
#define PL_STAGED_SIDE 256
#define PL_STAGED_BUFFER_BYTES ((int64_t)(2 * PL_STAGED_SIDE + 32) * (PL_STAGED_SIDE + 64) + 64)

/* A tile transpose into planes: for i < na, c < nc,
 *     dst[(c / P) * dsb + (c % P) * dsq + i * itemsize] = src[i * ssa + c * itemsize]
 * (strides in bytes).  Src rows are rows of groups of P elements packed,
 * dst holds each group's elements in P planes dsq bytes apart: NumPy's a.T
 * of an (H,W,C) image, (H,W,C) by (2,1,0), seen as one transpose of an
 * H x (W * C) matrix whose dst rows come P to a group, one in each plane. */
typedef void (*_pylayout_tile_split_fn)(const char *src, int64_t ssa, char *dst, int64_t dsb, int64_t dsq, int P,
                                        int64_t na, int64_t nc);

/* Its inverse, a tile transpose out of planes: for c < nc, j < nb,
 *     dst[j * dsb + c * itemsize] = src[(c / P) * ssa + (c % P) * ssq + j * itemsize]
 * (strides in bytes).  Src holds each group's elements in P planes ssq
 * bytes apart, dst rows are rows of groups of P elements packed: NumPy's
 * a.T of a (C,H,W) array, (C,H,W) by (2,1,0), seen as one transpose into
 * dst rows of H * C elements whose src rows come P to a group, one in each
 * plane. */
typedef void (*_pylayout_tile_zip_fn)(const char *src, int64_t ssa, int64_t ssq, int P, char *dst, int64_t dsb,
                                      int64_t nc, int64_t nb);

/* The streaming transposes into and out of planes (tile_split_stream,
 * tile_zip_stream) read this many src rows at once: the split kernels a
 * unit of them (plan.c gives them units of this many rows), the zip
 * kernels a pass of this many src rows down all dst rows.  Fewer write
 * each dst row a line at a time; more are more streams than the hardware
 * prefetchers follow (figures: plan.c, pl_choose_planes). */
#define PL_STREAM_SRC_ROWS 32

/* A strided-row kernel: dst[i * itemsize] = src[i * 2 * itemsize] for
 * i < n (a unit-stride dst filled from every other element of src, as in
 * x[..., ::2]).  Reads exactly the elements it copies: never past the last. */
typedef void (*_pylayout_gather2_fn)(const char *src, char *dst, int64_t n);

/* A strided-row kernel for larger steps, over rows: for r < rows, i < n,
 *     dst[r * dsb + i * itemsize] = src[r * ssb + i * k * itemsize]
 * (strides in bytes), 3 <= k <= 8 (x[..., ::k]: one channel of an
 * interleaved image, one coordinate of (N, 3) points).  Reads only bytes
 * inside each row's span from its first element copied to its last. */
typedef void (*_pylayout_gatherk_fn)(const char *src, int64_t ssb, char *dst, int64_t dsb, int64_t n, int64_t rows,
                                     int k);

/* Dense dst from groups of g bytes `step` bytes apart in src, g < step
 * (an RGBA image without its alpha, img[..., :3]; the xyz of (N, 4)
 * points): for j < n * g,
 *     dst[j] = src[(j / g) * step + j % g]
 * A copy prepares one (the SIMD path's group_gather fills it: the shuffle
 * controls of each vector of a period), then calls run on each unit of n
 * groups.  Reads only bytes from src to its last group's last byte.
 * group_scatter prepares the inverse, dense src into groups of dst (RGB
 * into an RGBA buffer's first three channels, a plane into one channel):
 *     dst[(j / g) * step + j % g] = src[j]
 * writing no byte between dst's groups (masked stores: `keep`), and
 * group_move groups at the same step in both (one RGBA image's RGB into
 * another's):
 *     dst[(j / g) * step + j % g] = src[(j / g) * step + j % g]
 * with the same masked stores.  group_flip prepares the gather at step
 * -g: packed groups in the opposite order, each kept whole (the pixels of
 * a flipped HWC image, img[:, ::-1]), src the first group, the others
 * below it. */
#define PL_GG_MAX_VEC 8      /* vectors in a period: g / gcd(g, vector bytes) */
#define PL_GG_MAX_GROUP 32   /* bytes in a group; longer ones copy as rows */
#define PL_GG_MAX_STEP 256   /* bytes from a group to the next */
typedef struct _pylayout_group_gather _pylayout_group_gather;
struct _pylayout_group_gather {
    void (*run)(const char *src, char *dst, int64_t n, const _pylayout_group_gather *t);
    int64_t g, step;                     /* group bytes, src bytes from a group to the next */
    int nvec, loads;                     /* vectors a period; loads a vector's window */
    int64_t src_period;                  /* src bytes a period */
    int64_t base[PL_GG_MAX_VEC];         /* vector v's window: src + base[v], from its period's start */
    uint64_t hi[PL_GG_MAX_VEC];          /* AVX-512 gathers: the lanes from the third and fourth loads */
    uint8_t ctl[PL_GG_MAX_VEC][64];      /* shuffle controls (AVX2: 16 a load) or indices (AVX-512) */
    uint64_t keep[PL_GG_MAX_VEC];        /* scatters, moves: the bytes of dst vector v that groups hold */
};
/* Fills t for groups of g bytes step bytes apart; false where this path
 * has no kernel for them (the copy then keeps its rows). */
typedef bool (*_pylayout_group_gather_fn)(_pylayout_group_gather *t, int64_t g, int64_t step);

/* Blocks of S bytes packed in both tensors, each block's elements of e
 * bytes permuted the same way (a batch of small matrices transposed,
 * (N,3,3) by (0,2,1)): for j < n * S / e,
 *     dst[j] = src[(j / m) * m + eperm[j % m]]     (elements, m = S / e)
 * A copy prepares one from eperm (the SIMD path's block_perm fills it:
 * the shuffle controls of a superblock, k whole blocks in T = k * S
 * bytes, or the element moves of one block), then calls run on each unit
 * of n blocks.  Loads and stores stay inside the n blocks. */
#define PL_BP_MAX_BYTES 1024 /* bytes in a block */
#define PL_BP_MAX_ELEMS 256  /* elements in a block */
typedef struct _pylayout_block_perm _pylayout_block_perm;
struct _pylayout_block_perm {
    void (*run)(const char *src, char *dst, int64_t n, const _pylayout_block_perm *t);
    int64_t S, T;                  /* block bytes; superblock bytes, a multiple of S */
    int nvec;                      /* vectors a superblock (AVX2: 16-byte chunks; AVX-512: 64 bytes) */
    uint16_t from[8];              /* AVX2: the src chunks dst chunk c draws bytes from, bit by chunk */
    uint8_t ctl[8 * 8 * 16];       /* AVX2: a shuffle control per dst chunk and src chunk; AVX-512:
                                      indices; moves: eperm */
};
/* Fills t for blocks of S bytes whose m = S / e elements of e bytes are
 * permuted by eperm (eperm[j]: the src element of dst element j, both
 * counted from the block's first, m <= PL_BP_MAX_ELEMS); false where this
 * path has no kernel for them. */
typedef bool (*_pylayout_block_perm_fn)(_pylayout_block_perm *t, int64_t S, int64_t e, const uint8_t *eperm);

/* kernels_portable.c: blocks of fewer than 64 elements of 1, 2, 4, 8 or
 * 16 bytes, one element move at a time: the portable and SSE2 paths'
 * block_perm, and the others' for blocks of 8- and 16-byte elements their
 * shuffles do not take. */
bool _pylayout_block_perm_moves(_pylayout_block_perm *t, int64_t S, int64_t e, const uint8_t *eperm);

/* Rows of n bytes: for r < rows, the n bytes at src + r * ssb go to
 * dst + r * dsb (strides in bytes, src and dst apart).  The units of a copy
 * whose innermost dim is unit-stride in both (plan.c's PL_ROWS). */
typedef void (*_pylayout_rows_fn)(const char *src, int64_t ssb, char *dst, int64_t dsb, int64_t n, int64_t rows);

/* Copies n bytes from an L1-resident buffer to dst, whole 64-byte lines of
 * dst with streaming stores (the edges with ordinary ones). */
typedef void (*_pylayout_stream_copy_fn)(char *dst, const char *src, int64_t n);

/* A transpose of g-byte groups with streaming stores: for i < na, j < nb,
 * the g bytes at src + i * ssa + j * g go to dst + j * dsb + i * g (a
 * group is a short row that both tensors hold contiguous: the last dim of
 * (1024,1024,16) float32 permuted by (1,0,2)).  Reads src row by row, in
 * order; dst row j's na groups are written back to back, 16 bytes or more
 * per streaming store, so a unit whose rows' groups cover whole lines
 * writes those lines whole.  Needs g, dst and dsb to be multiples of 16. */
typedef void (*_pylayout_group_stream_fn)(const char *src, int64_t ssa, char *dst, int64_t dsb, int64_t na,
                                          int64_t nb, int64_t g);

/* Complex (un)interleaving over complex elements [k0, k1) of dense arrays:
 * pack writes z[2k] = re[k], z[2k+1] = im[k]; unpack the reverse.  Element
 * moves go through memcpy or unaligned vector loads and stores: NumPy hands
 * over arrays at any byte address. */
typedef void (*_pylayout_interleave_fn)(char *z, char *re, char *im, int64_t k0, int64_t k1);

/* A row copied backwards: dst[i] = src[-i] for i < n elements of the
 * table's size, src pointing at the row's first element visited (its
 * highest address).  A flipped innermost dim, NumPy's a[:, ::-1]. */
typedef void (*_pylayout_reverse_fn)(const char *src, char *dst, int64_t n);

/* Rows filled from one element (a source broadcast along the row,
 * x[..., :1].expand(...)): for r < rows, i < n,
 *     dst[r * dsb + i * size] = src[r * ssb]    (the element's size bytes)
 * strides in bytes, any byte address; only the n elements of each dst row
 * are written, only src's one element of each row read. */
typedef void (*_pylayout_fill_fn)(const char *src, int64_t ssb, char *dst, int64_t dsb, int64_t n, int64_t rows);

/* Groups of g / size elements each copied reversed, dst[j][e] = src[j][P-1-e],
 * ngroups of them packed in both (g <= 16 bytes), src the first group's
 * lowest byte: BGR pixels as RGB, NumPy's img[..., ::-1]. */
typedef void (*_pylayout_reverse_groups_fn)(const char *src, char *dst, int64_t ngroups, int64_t g, int64_t size);

/* Thin transposes: P = 2 to PL_THIN_MAX_P planes of n elements each, plane p at
 * planes + p * plane_stride (bytes, any sign), and one dense array of n
 * groups of P elements.  zip interleaves:
 *     packed[(k * P + p) * itemsize] = planes[p * plane_stride + k * itemsize]
 * unzip is the inverse (planes written, packed read).  NCHW -> NHWC with 3
 * channels is a batch of 3-plane zips, NHWC -> NCHW of 3-plane unzips, and
 * view_as_complex of a transposed (n, 2) a 2-plane zip.  Any byte address,
 * any n >= 0; planes and packed never overlap. */
typedef void (*_pylayout_zip_fn)(const char *planes, int64_t plane_stride, char *packed, int64_t n);
typedef void (*_pylayout_unzip_fn)(const char *packed, char *planes, int64_t plane_stride, int64_t n);

/* The most planes a thin transpose has: 8 channels of uint8 or float16
 * are 8- or 16-byte groups, under one SIMD block of the tile kernels. */
#define PL_THIN_MAX_P 8

/* The thin-transpose kernels of one SIMD path, [P - 2][log2(itemsize)];
 * NULL entries run the portable loops (_pylayout_thin_portable). */
typedef struct _pylayout_thin_kernels {
    _pylayout_zip_fn zip[PL_THIN_MAX_P - 1][PL_NSIZES];
    _pylayout_unzip_fn unzip[PL_THIN_MAX_P - 1][PL_NSIZES];
} _pylayout_thin_kernels;

/* kernels_portable.c: plain C for every P and element size; the scalar
 * path's table, and the fallback for NULL entries of the others. */
extern const _pylayout_thin_kernels _pylayout_thin_portable;

/* One SIMD path: its name, then its kernels.  NULL entries mean "none on
 * this path": callers then use a cached-store variant or the portable loop. */
typedef struct _pylayout_kernels {
    /* What PYLAYOUT_SIMD and pylayout_build_info call this path. */
    const char *name;
    /* Tile transposes per element size. */
    _pylayout_tile_fn tile[PL_NSIZES];
    /* Variants with streaming stores for copies much larger than the
     * caches.  They want tiles 256 bytes wide along i (64 for the
     * SSE2 and AVX2 ones, which walk such tiles a line at a time) and fall
     * back to cached stores when dst or dsb is not 64-byte aligned. */
    _pylayout_tile_fn tile_stream[PL_NSIZES];
    /* Streaming tiles for such copies that still fit in L3 (plan.c,
     * pl_stream_runs_max_bytes): each dst row takes 256 bytes of back-to-
     * back streaming stores per visit instead of one line, from src staged
     * through an L1 buffer.  Same tiles and fallbacks as tile_stream; NULL:
     * tile_stream at every size. */
    _pylayout_tile_fn tile_stream_runs[PL_NSIZES];
    /* Streaming tiles for copies beyond the caches that stage blocks of
     * PL_STAGED_SIDE x PL_STAGED_SIDE bytes through a lent buffer (see
     * _pylayout_tile_staged_fn).  They want tiles of whole blocks along
     * a, and fall back to tile_stream's for what is left and where dst or
     * dsb is not 64-byte aligned; NULL: tile_stream. */
    _pylayout_tile_staged_fn tile_stream_staged[PL_NSIZES];
    /* Tiles 256 bytes wide along i, for copies beyond the caches whose
     * dst rows are not a whole number of lines apart, so that a run
     * starts anywhere in a line: each run built in L1, then its whole
     * lines streamed and its partial first and last lines stored (the 4-
     * and 8-byte ones; the caller fences), or all of it stored (1-byte);
     * NULL: the cached tiles above. */
    _pylayout_tile_fn tile_runs[PL_NSIZES];
    /* Cached-store tiles for dense dst rows.  Where the rows are a whole
     * number of lines long and all start the same whole number of
     * elements before a line (NumPy's buffers) or on one, every dst line
     * is written once, aligned; rows of any other length are written in
     * the same order, each line in two stores.  They want tiles spanning
     * all of a (ta == na) and fall back to the tiles above for any other
     * dst. */
    _pylayout_tile_fn tile_wrap[PL_NSIZES];
    /* The same tiles storing their blocks in the opposite order, last
     * first, for a copy that repeats the one before it (plan.c,
     * pl_repeats); set where tile_wrap is. */
    _pylayout_tile_fn tile_wrap_back[PL_NSIZES];
    /* tile_wrap and tile_wrap_back for a copy that runs on one thread,
     * where they differ: AVX2's blocks of 32 bytes a row, grouped so that
     * each block group reads whole src lines (copy_x86.c,
     * PL_DEFINE_WRAP_TILE_ONE); NULL elsewhere. */
    _pylayout_tile_fn tile_wrap_one[PL_NSIZES];
    _pylayout_tile_fn tile_wrap_one_back[PL_NSIZES];
    /* Whether tile_wrap also beats tile for such dst rows that start on a
     * line (torch's buffers) where no rows are crowded, and for dst rows
     * off their lines past 1 MiB where src rows are crowded (plan.c,
     * PL_WRAP_MAX_ROW_BYTES); where false, only crowded ones take it, and
     * rows off their lines up to 1 MiB only. */
    bool tile_wrap_on_lines[PL_NSIZES];
    /* Transposes of 3-element groups packed in both tensors (an RGB
     * image's pixels, (H,W,3) by (1,0,2)), per size of one element: a tile
     * of na x nb groups of 3 * size bytes, as the tiles above; NULL: the
     * copy goes through planes (plan.c's pl_run_planes). */
    _pylayout_tile_fn tile3[PL_NSIZES];
    /* Transposes into planes (see _pylayout_tile_split_fn), per element
     * size; NULL: such copies go through planes in L1 buffers (plan.c's
     * pl_run_planes). */
    _pylayout_tile_split_fn tile_split[PL_NSIZES];
    /* Transposes out of planes (see _pylayout_tile_zip_fn), per element
     * size; NULL: such copies go through planes in L1 buffers. */
    _pylayout_tile_zip_fn tile_zip[PL_NSIZES];
    /* The same past the streaming threshold: blocks of whole dst lines down
     * all of a unit's dst rows, streamed where they start on lines (the
     * caller fences); NULL: tile_zip there too. */
    _pylayout_tile_zip_fn tile_zip_stream[PL_NSIZES];
    /* Transposes into planes past the streaming threshold: blocks of whole
     * dst lines along all of a unit's src columns, streamed where they
     * start on lines (the caller fences); NULL: tile_split there too. */
    _pylayout_tile_split_fn tile_split_stream[PL_NSIZES];
    /* Step-2 gathers per element size. */
    _pylayout_gather2_fn gather2[PL_NSIZES];
    /* Step-k gathers, 3 <= k <= 8, per element size. */
    _pylayout_gatherk_fn gatherk[PL_NSIZES];
    /* Gathers of groups of bytes, their inverse, and moves between
     * groups at the same step (see _pylayout_group_gather). */
    _pylayout_group_gather_fn group_gather;
    _pylayout_group_gather_fn group_scatter;
    _pylayout_group_gather_fn group_move;
    _pylayout_group_gather_fn group_flip;
    /* Bytes permuted inside small blocks packed in both tensors (see
     * _pylayout_block_perm). */
    _pylayout_block_perm_fn block_perm;
    /* Rows copied backwards per element size. */
    _pylayout_reverse_fn reverse[PL_NSIZES];
    /* Rows filled from one element per element size; NULL: plan.c's
     * pl_fill_row, 16 bytes a store. */
    _pylayout_fill_fn fill[PL_NSIZES];
    /* Packed groups of 16 bytes or less, each reversed. */
    _pylayout_reverse_groups_fn reverse_groups;
    /* The same with streaming stores, for copies beyond the caches. */
    _pylayout_gather2_fn gather2_stream[PL_NSIZES];
    /* Rows copied with cached stores; NULL: inline moves or memcpy. */
    _pylayout_rows_fn rows;
    /* Buffer-to-memory streaming copy. */
    _pylayout_stream_copy_fn stream_copy;
    /* Transposes of groups of 32 bytes or more, streaming. */
    _pylayout_group_stream_fn group_stream;
    /* Complex packing per size of one real part (2, 4 or 8 bytes). */
    _pylayout_interleave_fn pack[PL_NSIZES];
    /* pack with streaming stores to z; z + 2 * size * k0 must be 32-byte
     * aligned. */
    _pylayout_interleave_fn pack_stream[PL_NSIZES];
    _pylayout_interleave_fn unpack[PL_NSIZES];
    /* Orders every streaming store made so far before any later store
     * (sfence); NULL where nothing streams.  No streaming kernel fences
     * itself: a caller runs this once, after its last streaming call and
     * before it reports the work done.  Fencing inside each call instead
     * stalls on every small unit's write-back: the 3 KiB units of
     * (27,28,28,28,28).permute(2,3,1,4,0) ran at 5.5 GB/s fenced each, 9.5
     * fenced once per thread (float32, 1 thread). */
    void (*fence)(void);
    /* Thin transposes (2-, 3- and 4-plane interleaves and their inverses);
     * NULL: the portable ones. */
    const _pylayout_thin_kernels *thin;
} _pylayout_kernels;

/* log2 of a kernel element size (1, 2, 4, 8, 16), or -1 for any other. */
static inline int _pl_size_index(size_t itemsize)
{
    switch (itemsize) {
    case 1: return PL_SIZE1;
    case 2: return PL_SIZE2;
    case 4: return PL_SIZE4;
    case 8: return PL_SIZE8;
    case 16: return PL_SIZE16;
    default: return -1;
    }
}

/* kernels_portable.c: C only, for any CPU. */
extern const _pylayout_kernels _pylayout_kernels_scalar;

#if defined(PYLAYOUT_HAVE_X86_KERNELS)
/* copy_x86.c: the SSE2 (baseline x86-64), AVX2 and AVX-512 (F + BW) tables. */
extern const _pylayout_kernels _pylayout_kernels_sse2;
extern const _pylayout_kernels _pylayout_kernels_avx2;
extern const _pylayout_kernels _pylayout_kernels_avx512;

/* complex_x86.c: AVX2 complex interleaving for 4- and 8-byte parts. */
void _pylayout_pack4_avx2(char *z, char *re, char *im, int64_t k0, int64_t k1);
void _pylayout_pack4_avx2_stream(char *z, char *re, char *im, int64_t k0, int64_t k1);
void _pylayout_unpack4_avx2(char *z, char *re, char *im, int64_t k0, int64_t k1);
void _pylayout_pack8_avx2(char *z, char *re, char *im, int64_t k0, int64_t k1);
void _pylayout_unpack8_avx2(char *z, char *re, char *im, int64_t k0, int64_t k1);

/* gather_x86.c: step-k gathers, 3 <= k <= 8, with AVX2 and AVX-512. */
void _pylayout_gatherk1_avx2(const char *src, int64_t ssb, char *dst, int64_t dsb, int64_t n, int64_t rows, int k);
void _pylayout_gatherk2_avx2(const char *src, int64_t ssb, char *dst, int64_t dsb, int64_t n, int64_t rows, int k);
void _pylayout_gatherk4_avx2(const char *src, int64_t ssb, char *dst, int64_t dsb, int64_t n, int64_t rows, int k);
void _pylayout_gatherk8_avx2(const char *src, int64_t ssb, char *dst, int64_t dsb, int64_t n, int64_t rows, int k);
void _pylayout_gatherk1_avx512(const char *src, int64_t ssb, char *dst, int64_t dsb, int64_t n, int64_t rows, int k);
void _pylayout_gatherk2_avx512(const char *src, int64_t ssb, char *dst, int64_t dsb, int64_t n, int64_t rows, int k);
void _pylayout_gatherk4_avx512(const char *src, int64_t ssb, char *dst, int64_t dsb, int64_t n, int64_t rows, int k);
void _pylayout_gatherk8_avx512(const char *src, int64_t ssb, char *dst, int64_t dsb, int64_t n, int64_t rows, int k);

/* group_gather_x86.c: gathers of groups of bytes, AVX2 and AVX-512 VBMI;
 * scatters, AVX-512 VBMI. */
bool _pylayout_group_gather_avx2(_pylayout_group_gather *t, int64_t g, int64_t step);
bool _pylayout_group_gather_avx512(_pylayout_group_gather *t, int64_t g, int64_t step);
bool _pylayout_group_scatter_avx512(_pylayout_group_gather *t, int64_t g, int64_t step);
bool _pylayout_group_move_avx512(_pylayout_group_gather *t, int64_t g, int64_t step);
bool _pylayout_group_flip_avx2(_pylayout_group_gather *t, int64_t g, int64_t step);
bool _pylayout_group_flip_avx512(_pylayout_group_gather *t, int64_t g, int64_t step);

/* block_perm_x86.c: bytes permuted inside blocks, AVX2 and AVX-512 VBMI. */
bool _pylayout_block_perm_avx2(_pylayout_block_perm *t, int64_t S, int64_t e, const uint8_t *eperm);
bool _pylayout_block_perm_avx512(_pylayout_block_perm *t, int64_t S, int64_t e, const uint8_t *eperm);

/* reverse_x86.c: AVX2 rows copied backwards. */
void _pylayout_reverse1_avx2(const char *src, char *dst, int64_t n);
void _pylayout_reverse2_avx2(const char *src, char *dst, int64_t n);
void _pylayout_reverse4_avx2(const char *src, char *dst, int64_t n);
void _pylayout_reverse8_avx2(const char *src, char *dst, int64_t n);
void _pylayout_reverse16_avx2(const char *src, char *dst, int64_t n);
/* Groups of g / size elements, each reversed, packed in src and dst (g <= 16):
 * BGR pixels to RGB.  src is the first group's lowest byte. */
void _pylayout_reverse_groups_avx2(const char *src, char *dst, int64_t ngroups, int64_t g, int64_t size);

/* rows_x86.c: rows copied in 32- and 64-byte moves. */
void _pylayout_rows_avx2(const char *src, int64_t ssb, char *dst, int64_t dsb, int64_t n, int64_t rows);
void _pylayout_rows_avx512(const char *src, int64_t ssb, char *dst, int64_t dsb, int64_t n, int64_t rows);

/* rows_x86.c: rows filled from one element, per element size. */
void _pylayout_fill1_avx2(const char *src, int64_t ssb, char *dst, int64_t dsb, int64_t n, int64_t rows);
void _pylayout_fill2_avx2(const char *src, int64_t ssb, char *dst, int64_t dsb, int64_t n, int64_t rows);
void _pylayout_fill4_avx2(const char *src, int64_t ssb, char *dst, int64_t dsb, int64_t n, int64_t rows);
void _pylayout_fill8_avx2(const char *src, int64_t ssb, char *dst, int64_t dsb, int64_t n, int64_t rows);
void _pylayout_fill16_avx2(const char *src, int64_t ssb, char *dst, int64_t dsb, int64_t n, int64_t rows);
void _pylayout_fill1_avx512(const char *src, int64_t ssb, char *dst, int64_t dsb, int64_t n, int64_t rows);
void _pylayout_fill2_avx512(const char *src, int64_t ssb, char *dst, int64_t dsb, int64_t n, int64_t rows);
void _pylayout_fill4_avx512(const char *src, int64_t ssb, char *dst, int64_t dsb, int64_t n, int64_t rows);
void _pylayout_fill8_avx512(const char *src, int64_t ssb, char *dst, int64_t dsb, int64_t n, int64_t rows);
void _pylayout_fill16_avx512(const char *src, int64_t ssb, char *dst, int64_t dsb, int64_t n, int64_t rows);

/* interleave_x86.c: thin transposes with SSE2 (2 and 4 planes) and AVX2
 * (byte shuffles, every P). */
extern const _pylayout_thin_kernels _pylayout_thin_sse2;
extern const _pylayout_thin_kernels _pylayout_thin_avx2;
#endif

/* Portable strided 2-D move of fixed-size elements, used for tile edges and
 * for layouts no SIMD kernel fits.  For j < nb, i < na:
 *     dst[j * dsb + i * dsa] = src[j * ssb + i * ssa]
 * The fixed-size memcpy compiles to one load and one store.  The longer
 * extent goes innermost: thin tiles (NCHW -> NHWC with 3 channels gives
 * na = 3) would otherwise pay loop overhead per element.  UNROLL, empty or
 * a _Pragma, goes before the longer extent's loop (plan.c's element loop
 * for copies no kernel takes unrolls it: see pl_move_elements_1). */
#define PL_DEFINE_MOVE2D(NAME, SIZE) PL_DEFINE_MOVE2D_UNROLLED(NAME, SIZE, )
#define PL_DEFINE_MOVE2D_UNROLLED(NAME, SIZE, UNROLL)                                                    \
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
            UNROLL for (int64_t i = 0; i < na; i++)                                                      \
                memcpy(d + i * dsa, s + i * ssa, SIZE);                                                  \
        }                                                                                                \
    }

PL_DEFINE_MOVE2D(_pl_move2d_1, 1)
PL_DEFINE_MOVE2D(_pl_move2d_2, 2)
PL_DEFINE_MOVE2D(_pl_move2d_4, 4)
PL_DEFINE_MOVE2D(_pl_move2d_8, 8)
PL_DEFINE_MOVE2D(_pl_move2d_16, 16)

/* off[k] = the byte offset of dst row c0 + k of a split tile (see
 * _pylayout_tile_split_fn), or of src row c0 + k of a zip tile (dsb, dsq:
 * its ssa, ssq), for k < n. */
static inline void _pl_split_rows(int64_t c0, int P, int64_t dsb, int64_t dsq, int n, int64_t *off)
{
    int64_t g = c0 / P, q = c0 % P;
    for (int k = 0; k < n; k++) {
        off[k] = g * dsb + q * dsq;
        if (++q == P)
            q = 0, g++;
    }
}

/* A zip tile element by element, for tiles thinner than a block. */
static inline void _pl_zip_move(const char *src, int64_t ssa, int64_t ssq, int P, char *dst, int64_t dsb,
                                int64_t nc, int64_t nb, size_t e)
{
    for (int64_t c = 0; c < nc; c++) {
        int64_t sc;
        _pl_split_rows(c, P, ssa, ssq, 1, &sc);
        for (int64_t j = 0; j < nb; j++)
            memcpy(dst + j * dsb + c * (int64_t)e, src + sc + j * (int64_t)e, e);
    }
}

/* A split tile element by element, for tiles thinner than a block. */
static inline void _pl_split_move(const char *src, int64_t ssa, char *dst, int64_t dsb, int64_t dsq, int P,
                                  int64_t na, int64_t nc, size_t e)
{
    for (int64_t c = 0; c < nc; c++) {
        int64_t dc;
        _pl_split_rows(c, P, dsb, dsq, 1, &dc);
        for (int64_t i = 0; i < na; i++)
            memcpy(dst + dc + i * (int64_t)e, src + i * ssa + c * (int64_t)e, e);
    }
}

/* Builds a tile kernel from a VxV micro-kernel MICRO(src, ssa, dst, dsb).
 * Full blocks are visited in 2Vx2V groups, the two blocks that share dst
 * rows back to back, groups along j (src rows) first.  Edges use blocks
 * shifted back to overlap the ones before them (a copy may write an element
 * twice: src and dst never overlap); only tiles thinner than V go through
 * MOVE2D.
 *
 * The groups finish a line only when it is aligned: a dst row off its
 * lines gets a partial line from one group and the rest from the group
 * 2V along i, after the whole row of groups -- every dst row of the tile
 * -- has been written.  When dst rows are a multiple of 1 KiB apart they
 * all fall in 4 or fewer of L1's 64 sets and those lines do not survive
 * that long: 64 rows of a 64 x 64 float tile thrashed (512 x 512 float32,
 * 135 us against 22 for 508 x 508).  PL_DEFINE_TILE_STRIPS bounds the rows
 * in between. */
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

/* A tile kernel NAME for SIZE-byte elements that runs the tile kernel TILE
 * on strips of a few dst rows (j) at a time, each across the whole tile
 * along i, when dsb % ALIGN == 0 (1 for always): the dst lines a group
 * leaves partial are finished a strip later instead of a tile later.  The
 * strips hold 32 rows, fewer where the rows share fewer L1 sets (64 sets
 * of 64-byte lines repeat every 4 KiB): 16 where rows are a multiple of
 * 2 KiB apart, 8 where of 4 KiB, about 8 lines per set either way.  A last
 * strip shorter than that joins the one before, so no strip is thinner
 * than the strip height (TILE's blocks must fit it).
 *
 * Measured on the 2-core EPYC (Zen 5) dev VM, 1 thread, float32, 64 x 64
 * tiles, src and dst 16 bytes off their lines, best of 9, us (whole tile
 * / strips of 32 / 16 / 8 rows):
 *   AVX2 8x8    n x n: n=128 1.37 / 1.50, n=724 45 / 51 (so ALIGN 1024),
 *               n=256 8.6 / 6.4 / 7.8, n=512 136 / 62 / 44;
 *               1024 x 128 (dst rows 4 KiB apart) 128 (32) / 39 / 21;
 *   AVX-512 16x16  n x n: n=128 1.22 / 0.97, n=362 9.3 / 8.6, n=724 39.5 /
 *               39.7 (so always), n=256 5.9 / 4.1 / 6.5, n=512 74 / 42 / 37.
 * The 1-, 2- and 8-byte tiles take strips too (ALIGN 1024), where whole
 * tiles had dst rows a power of two apart run 5-16x below their
 * neighbours: torch tensors (R, C) read transposed into dst rows of R
 * elements, pl.copy_into GB/s, whole tiles / strips: uint8 R=1024 10.4 /
 * 18.3, R=2048 4.3 / 23.6, R=4096 2.8 / 7.2 (a 16-row strip, the least
 * its 16x16 blocks take); float16 R=1024 (C=1000) 4.6 / 26.6, R=2048 2.9 /
 * 26.5; float64 R=256 27.6 / 53.5, R=512 9.4 / 47.7; rows not a multiple of
 * 1 KiB apart (R=1000) 21-53, unchanged.
 */
/* The strip height above for dst rows dsb bytes apart, at least 16 bytes'
 * worth of elements: the 1-byte tiles' 16x16 blocks need 16 rows (a
 * thinner strip would go element by element). */
static inline int64_t pl_strip_rows(int64_t dsb, int64_t size)
{
    const int64_t rows = dsb % 4096 == 0 ? 8 : dsb % 2048 == 0 ? 16 : 32;
    return rows * size < 16 ? 16 / size : rows;
}

#define PL_DEFINE_TILE_STRIPS(NAME, ATTR, SIZE, ALIGN, TILE)                                             \
    ATTR static void NAME(const char *src, int64_t ssa, char *dst, int64_t dsb, int64_t na, int64_t nb) \
    {                                                                                                    \
        const int64_t sb = pl_strip_rows(dsb, SIZE);                                                     \
        if (dsb % (ALIGN) != 0 || nb < 2 * sb) {                                                         \
            TILE(src, ssa, dst, dsb, na, nb);                                                            \
            return;                                                                                      \
        }                                                                                                \
        for (int64_t j = 0; j < nb;) {                                                                   \
            const int64_t w = nb - j < 2 * sb ? nb - j : sb;                                             \
            TILE(src + j * (SIZE), ssa, dst + j * dsb, dsb, na, w);                                      \
            j += w;                                                                                      \
        }                                                                                                \
    }

/* Portable complex interleaving (see _pylayout_interleave_fn) for parts of
 * SIZE bytes: _pl_pack_SIZE and _pl_unpack_SIZE.  Every table's fallback,
 * and the tails of the SIMD ones. */
#define PL_DEFINE_INTERLEAVE(SIZE)                                                                       \
    static inline void _pl_pack_##SIZE(char *z, char *re, char *im, int64_t k0, int64_t k1)            \
    {                                                                                                    \
        for (int64_t k = k0; k < k1; k++) {                                                              \
            memcpy(z + (2 * k) * (SIZE), re + k * (SIZE), SIZE);                                         \
            memcpy(z + (2 * k + 1) * (SIZE), im + k * (SIZE), SIZE);                                     \
        }                                                                                                \
    }                                                                                                    \
    static inline void _pl_unpack_##SIZE(char *z, char *re, char *im, int64_t k0, int64_t k1)          \
    {                                                                                                    \
        for (int64_t k = k0; k < k1; k++) {                                                              \
            memcpy(re + k * (SIZE), z + (2 * k) * (SIZE), SIZE);                                         \
            memcpy(im + k * (SIZE), z + (2 * k + 1) * (SIZE), SIZE);                                     \
        }                                                                                                \
    }
PL_DEFINE_INTERLEAVE(2)
PL_DEFINE_INTERLEAVE(4)
PL_DEFINE_INTERLEAVE(8)

#endif /* PYLAYOUT_KERNELS_H */
