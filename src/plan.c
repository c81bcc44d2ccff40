/*
 * plan.c - the copy engine: turns a canonical copy (copy.c) into a loop nest
 * of units and runs it.  Four steps, one function each:
 *   1. choose the kind of unit (pl_choose_kind):
 *        ROWS       innermost dim unit-stride in both: memcpy of rows,
 *                   units along b = a - 1 or along src's dense dim
 *                   (pl_row_block_dim);
 *        TRANSPOSE  dst unit-stride along dim a, src smallest-stride along
 *                   another dim b: cache-blocked tiles;
 *        THIN       a TRANSPOSE with a side of 2 to 8 elements (3-channel
 *                   images, complex pairs): P-plane interleaves or their
 *                   inverse (pl_choose_thin, pl_thin_wins);
 *        STRIDED    anything else (broadcast sources, flipped rows, strided
 *                   dsts);
 *   2. choose the kernels and unit sizes (pl_choose_transpose,
 *      pl_choose_rows): SIMD tile transposes or step-2 to step-8 gathers
 *      from the table cpu_features.c picked, streaming variants for large copies
 *      (among them transposes of groups, short rows as elements:
 *      pl_group_streams), or the portable 2-D loop;
 *   3. build the loops (pl_build_loops): the dims left over, outermost
 *      first, then the tile indices of b and a (short row units take
 *      several iterations of the loop outside them: pl_fold_rows);
 *   4. run them (pl_run): serially, or cut into contiguous ranges of units
 *      across the persistent team (threads.c) when the copy is large enough.
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_features.h"
#include "internal.h"

/* A copy that may run in parallel is cut into chunks of PL_CHUNK_MIN_BYTES
 * to PL_CHUNK_MAX_BYTES, at least PL_CHUNKS_PER_THREAD per thread.  The
 * caller runs them alone until it can tell the copy will take long enough
 * to be worth the team (threads.c); then each thread takes its own
 * contiguous run of the rest and, when done, the others' unclaimed chunks
 * from the far end: a thread running at half speed (its core shared with
 * another process) or not at all costs the copy at most a chunk at the end. */
#define PL_CHUNKS_PER_THREAD 16
#define PL_CHUNK_MIN_BYTES ((int64_t)64 * 1024)
#define PL_CHUNK_MAX_BYTES ((int64_t)1024 * 1024)

/* Transposes whose tiles write one contiguous block of dst each (the whole
 * dst-innermost dim fits in a tile, e.g. the 27 x 28 tiles of
 * (27,28,28,28,28).permute(2,3,1,4,0)) but whose dst rows are not 64-byte
 * aligned build each tile in a stack buffer of at most this size and stream
 * it out: no read-for-ownership of dst.  Measured on that permute, float32,
 * 1 thread: 5.0-5.4 -> 5.9-6.0 GB/s (cddbf7f; before the fence change). */
#define PL_STREAM_BUFFER_BYTES 16384

/* Transposes of groups of 3 to 8 elements (pl_plane_dims) stage each
 * unit's planes in two buffers of PL_PLANES_BUFFER_BYTES (internal.h, so
 * that tests/c/check_nomem.c can refuse them), taken from the heap once per
 * range of units in copies of PL_PLANES_HEAP_MIN_BYTES or more; smaller
 * copies, and any where malloc fails, use two of PL_PLANES_STACK_BYTES on
 * the stack and cut the units into sub-blocks that fit them.
 * uint8 RGB, 1 thread, GB/s, buffers of 8 / 16 / 48 KiB: 2048 x 2048
 * 3.0 / 5.9 / 6.8, 1080 x 1920 3.2 / 5.6 / 11.4; float32 1024 x 1024
 * 8.2 / 6.6 / 7.8. */
#define PL_PLANES_STACK_BYTES 4096
#define PL_PLANES_HEAP_MIN_BYTES ((int64_t)64 * 1024)

/* Staged tiles (tile_stream_staged) take a heap buffer of their own size
 * (PL_STAGED_BUFFER_BYTES) the same way, once per range of units, and
 * fall back to the tile_stream kernel where malloc fails.  Units of this
 * many blocks at most (1 MiB of 1-byte elements): the first block of a
 * unit reads its src without the overlap with the block before (8192 x
 * 8192 uint8 in a /tmp driver, 1 thread, units of 1024 / 2048 / 4096 /
 * 8192 rows: 4.5-5.0, 5.4-5.6, 5.5-5.7, 5.5-5.7 GB/s), and at least 4
 * units a thread: at 2 threads, uint8 (4096, 400) and (4096, 512) read
 * transposed ran at 5.3 and 6.8 GB/s in units of 16 blocks (one a
 * thread), 9.4 and 12.0 in units of 2 and 4 (the tile before: 6.3-6.9,
 * 7.4-8.3); level at 1 thread. */
#define PL_STAGED_UNIT_BLOCKS 16
_Static_assert(PL_STAGED_BUFFER_BYTES % 2 == 0, "a staged tile's buffer, as two halves");

/* Regrouped copies (pl_regroup) stage each unit's A x B planes in an L1
 * buffer: of PL_REGROUP_BUFFER_BYTES where the copy stays in cache, of
 * PL_REGROUP_AHEAD_BYTES past pl_stream_min_wide_bytes, where each unit
 * also prefetches the next one's src rows and dst rows.  On the 2-core
 * Zen 5 dev VM, (A, J, B) by (2, 1, 0), A in {2, 8}, B = 4, elements of
 * 1 to 16 bytes, 1 thread, GB/s: 64 MB with 4 / 16 KiB buffers, without
 * prefetching 5.6-17.5 / 5.9-8.0, prefetching 11.6-19.5 / 10.9-14.8; 1 MB
 * (A in {2, 3, 8}, B in {4, 7}), 16 KiB without prefetching 11.7-36.3, 4
 * KiB prefetching 8.8-30.9. */
#define PL_REGROUP_BUFFER_BYTES 16384
#define PL_REGROUP_AHEAD_BYTES 4096
/* Fewer groups along j than this stay tiles: each unit would be a few. */
#define PL_REGROUP_MIN_GROUPS 8

/* Transposes into planes in registers (tile_split, see pl_choose_planes)
 * take units of this many groups a side.  float32 (H,W,C) by (2,1,0), 1
 * thread, GB/s read + written, units of 32 / 48-64 (the planes' units) /
 * 128 / 256 / 512: (1024,1024,4) 19-20 / 24-25 / 26-28 / 26-28 / 32;
 * (512,512,4) 50 / 61-62 / 63-64 / 65-68 / 69-72; (2048,2048,3) 18-19 at
 * 64-256, 8.7 at 512. */
#define PL_SPLIT_UNIT 128
/* Units of transposes out of planes that stream (tile_zip_stream): this
 * many groups along dst's rows, all of them down (see pl_choose_planes). */
#define PL_ZIP_STREAM_GROUPS 16

/* Buffered (stream_out) units whose src rows continue into the next units
 * (pl_keep_src_lines_hot) prefetch the lines of their rows this many units
 * ahead: the 27 rows a 27 x 28 tile reads, each 112 bytes, are more
 * streams than the hardware prefetchers follow.  Measured on
 * (27,28,28,28,28).permute(2,3,1,4,0), float32, best of 7, same runs:
 * 1 thread 14.5-15.0 -> 22.5-22.9 GB/s, 2 threads 17.6-19.7 -> 30.3-32.7.
 * Ahead by 1 / 2 / 3 / 4 / 6 units, 1 thread, two rounds: 18.4-19.5 /
 * 21.4-22.2 / 22.6-22.8 / 21.1-21.2 / 20.9-21.5; T0, T1 and NTA hints the
 * same.  What then remains is mostly the tile kernel (about 80 ns a tile
 * from L1, 60% of the time on 1 thread).  Not kept, all slower or the
 * same on that permute: units of four tiles along the next dst dim, so
 * that a line-aligned dst is streamed in whole lines (12096 bytes: 15 vs
 * 22.5 GB/s, the 108 src rows a unit reads are too many); masked AVX-512
 * 16x16 tiles (4 blocks a tile instead of 16 overlapping 8x8 ones: 90 vs
 * 80 ns a tile); streaming the previous unit in slices between the strips
 * of the next; and leaving out the partial first and last lines of each
 * block altogether (the cost of their reads for ownership is noise). */
#define PL_PREFETCH_UNITS 2
/* Not on Intel cores (_pylayout_intel_cores): on the 2-core Sapphire
 * Rapids class dev VM the same prefetches cost time, the L2 streamer
 * following the rows alone.  Float32, GB/s, median of 9-15 runs, the two
 * ways interleaved in one process, with / without:
 *   (27,28,28,28,28) by (2,3,1,4,0)  1 thread 9.9-10.1 / 10.2-10.6,
 *                                    2 threads 19.3-19.9 / 20.1-21.3;
 *   (20,24,32,32,24) by (2,3,1,4,0)  8.7 / 9.8, 16.7 / 18.9.
 * Farther (3-6 units) or L2-only (T1) prefetches were no better than 2
 * units there.  The row units' prefetch (PL_AHEAD_ROW_BYTES) was level or
 * slightly ahead on that VM, and stays on everywhere. */

/* Buffered (stream_out) transposes prefetch the last line of the dst block
 * this many units ahead, one line a unit.  The line itself is written with
 * streaming stores soon after; the prefetch is for its page: with 4 KiB
 * pages (torch's and NumPy's memory, whose allocators ask for no huge
 * pages) a unit's block runs into a page no earlier unit touched, and the
 * stores waited for its page-table walk.  pylayout's own results are in
 * huge pages (alloc.c), where this costs a line a unit and changes nothing.
 * Measured with `python -m pylayout bench --runs 3 --only "permute 5-D"`,
 * (27,28,28,28,28) by (2,3,1,4,0) into a torch tensor, 2 threads, three
 * alternated rounds, GB/s: none 17.7 / 18.5 / 18.6; the last line 1 unit
 * ahead 20.1 / 21.6 / 20.8, 2 units 21.0 / 21.5 / 20.3; the first and last
 * lines 2 units ahead 19.9 / 21.4 / 21.1 (and in other rounds 20.4 / 20.8 /
 * 19.1 against none's 17.3 / 17.7 / 18.7; 4 units 20.2 / 20.7 / 20.0).
 * The same copy into pylayout's own result: 19.2-21.2 every way. */
#define PL_DST_AHEAD_UNITS 2

/* Rows (PL_ROWS units) up to a cache line long are copied with fixed-size
 * moves the compiler inlines: a memcpy call per row was most of a short
 * row's time ((1000,1000,3) float32 by (1,0,2), 12-byte rows: 4.4 -> 10.6
 * GB/s at 1 thread).  Longer rows go through memcpy, whose wide moves were
 * faster from 128 bytes on (rows of 400 and 512 bytes: 0.63-0.74x inline). */
#define PL_SMALL_ROW_BYTES 64

/* Rows (PL_ROWS units) up to this long go through the SIMD path's row
 * kernel (rows_x86.c: 64-byte moves on AVX-512, 32 on AVX2, the last
 * ending at the row's end), one call a unit; longer ones through memcpy,
 * whose unrolled loops were faster from 16 KiB (2 MiB of rows of 16 KiB
 * and more, 1 thread: 48-54 GB/s against memcpy's 57-59).  Each row went
 * through the inline moves above or a memcpy call, behind torch's copy in
 * cache.  On the 2-core Zen 5 dev VM, copy_into of torch tensors, best of
 * 7, 1 thread, two rounds of fresh processes alternating (a throwaway
 * switch), GB/s before / after (torch): uint8 (32,128,12,64) by (0,2,1,3)
 * (3 MB, 64-byte rows) 34.6-36.7 / 49.1-52.7 (43-50); float16
 * (4096,8,8,4) by (1,0,2,3) 35.2-37.6 / 46.5-49.1 (47-53); float64
 * (16,512,7,7) by (1,0,2,3) (392-byte rows) 37.9-43.5 / 49.4-50.0 (42-49);
 * uint8 (128,32,32,3) by (1,0,2,3) 35.9-37.7 / 47.5-49.9 (44-49); uint8
 * (64,64,64,64) by (0,2,1,3) (16 MB, rows prefetched) 35.6-36.2 /
 * 45.9-47.9 (13-14).  (A, B, n) by (1,0,2), 256 KiB: n = 512 52-60 /
 * 57-67, 1024 50-53 / 61-71, 4096 63-69 / 67-80; 2 MiB level or better
 * (47-54 / 48-55).  AVX2 (PYLAYOUT_SIMD=avx2): the four above 35-41 /
 * 43-50, 256 KiB rows of 512-1024 bytes 49-54 / 57-69, of 4-8 KiB
 * 58-68 / 62-70 and at 2 MiB 51-56 / 50-52. */
#define PL_ROWS_KERNEL_MAX_BYTES 4096

/* Units of rows a line to PL_AHEAD_ROW_BYTES long, at most
 * PL_ROWS_AHEAD_BYTES in all, prefetch the src rows of the unit about that
 * many bytes ahead in the innermost loop that runs more than once: such a
 * unit reads from as many src streams as it has rows (the heads of an
 * attention permute, (B,H,S,D) -> (B,S,H,D)), more than the hardware
 * prefetcher follows.  8, 16 and 32 KiB ahead were within noise of each
 * other at 1 thread; 16 was best or level at 2.  Measured on the 2-core
 * dev VM (tools' pylayout_copy, the two ways interleaved in one process,
 * GB/s, median of 21), before (memcpy per row, no prefetch) / after, 1 and
 * 2 threads: (64,64,64,64) uint8 by (0,2,1,3) 10.4 / 23.3, 44.7 / 62.3;
 * float32 (4,12,2048,64) 16.3 / 19.9, 40.5 / 48.5; float16 (8,32,512,128)
 * 16.5 / 19.3, 37.6 / 42.5; float32 (8,16,1024,64) 15.7 / 17.4, 35.1 / 40.3.
 * Only copies past pl_rows_cached_max_bytes, whose rows come from memory,
 * prefetch: from the caches the prefetches cost more than they saved.  Zen 5 dev VM, torch tensors, copy_into, best of
 * 7, GB/s, three rounds of fresh processes alternating (a throwaway
 * switch), prefetched / not: uint8 (128,32,32,3) by (1,0,2,3) (393 KB,
 * rows of 96 bytes) 30.7-33.2 / 40.5-41.9 at 1 thread, 48.1-49.4 /
 * 58.3-60.2 at 2 (torch 44-48); uint8 (32,128,12,64) by (0,2,1,3) (3 MB)
 * 33.5-35.4 / 33.6-38.1 and 52.4-53.6 / 54.3-58.3. */
#define PL_AHEAD_ROW_BYTES 512
#define PL_ROWS_AHEAD_BYTES ((int64_t)16 * 1024)

/* A cache line: the unit of streaming stores, and of false sharing. */
#define PL_LINE_BYTES 64

/* Streaming transposes take tiles this wide along a: four lines of each
 * dst row written back to back (see pl_stile1_avx512 and
 * PL_DEFINE_STREAM_RUNS_512 in copy_x86.c: write-only streaming stores on
 * the 2-core dev VM ran at 4-10 GB/s with 64 bytes per dst row, 10-26 with
 * 128, 43-44 with 256 or more).  The SSE2 and AVX2 kernels walk the same
 * tile a line at a time. */
#define PL_STREAM_RUN_BYTES 256

/* Cached-store run tiles (dst rows off their lines) take this many dst
 * rows per tile: the next band's runs continue those rows, and the lines
 * two runs share are still in L2 (256 KiB of runs).  uint8 n x m, 1 thread,
 * GB/s, best of 5, tiles of 4096 / 2048 / 1024 / 512 / 256 rows (one
 * process, all five on the same buffers): 4000x4000 11.0 / 12.3 / 13.1 /
 * 12.9 / 11.8, 5000x3000 10.6 / 12.2 / 12.7 / 13.2 / 11.9, 8000x6000 9.3 /
 * 9.7 / 9.9 / 9.4 / 8.7, 8000x8001 9.0 / 9.3 / 9.4 / 8.9 / 8.1 (memcpy
 * 22-28). */
#define PL_RUNS_DST_ROWS 1024

/* Buffered run transposes (stream_runs) of dst rows shorter than
 * PL_STREAM_RUN_BYTES take a whole row per run where src has at least
 * this many rows; with fewer the cached tiles won or came out level.
 * Dense rows are streamed out a batch at a time, as one block; rows apart
 * one by one.
 * Their buffers hold a multiple of PL_RUNS_BATCH_ROWS runs (the widest
 * block of the tile kernels, 32 x 32 2-byte elements), so that no block is
 * shifted back over its neighbour along b, and a batch of runs from this
 * many src rows or more prefetches the next batch's src lines: it reads a
 * few lines of each row, too many streams for the hardware prefetchers.
 * Measured on the 2-core Zen 5 dev VM, torch tensors, copy_into, best of 7
 * batches, GB/s, before / after, three rounds of fresh processes
 * alternating (/tmp script, a throwaway switch): 1 thread, float16
 * (100, 60000).T 7.3-8.4 / 22.0-22.2, (100, 200, 300).permute(1, 2, 0)
 * 7.1-8.9 / 22.0-22.2, (50, 100000).T 19.0-19.1 / 21.7-22.0; float32
 * (50, 100000).T 11.3-12.6 / 21.4-24.2; runs of 256 bytes, prefetched:
 * float16 (300, 20000).T 9.0-9.4 / 12.8-13.3, bfloat16 3000 x 3000 7.2-7.9
 * / 11.5-13.0; 2 threads, float16 (100, 60000).T 13.7-18.4 / 38.0-38.9,
 * float32 (50, 100000).T 21.4-24.1 / 39.5-42.6, bfloat16 3000 x 3000
 * 14.6-17.1 / 22.1-24.8; PYLAYOUT_SIMD=avx2, float32 3000 x 3000 7.4-7.7 /
 * 9.5-11.7, float16 (100, 60000).T 7.1-7.8 / 21.5-22.5; sse2 the same
 * 6.7-7.2 / 21.0-21.1.  Rows apart, float16 (100, 200, 300).permute(2,
 * 1, 0) (dst rows 40 KB apart), 1 thread 5.0-5.5 / 9.0-13.4, 2 threads
 * 7.3-11.5 / 22.8-26.0; float32 (50, 200, 300) the same 8.6-10.6 /
 * 15.3-17.4 and 9.4-22.4 / 31.8-35.2.  Not kept: buffered rows from
 * fewer src rows (float64 (25, 100000).T 28.1 cached / 20.2, float32
 * (40, 150000).T 15.6 / 15.2); the prefetch for float64's runs of 32 src
 * rows (AVX2 2500 x 2500 13.4-13.6 / 12.7-12.9); runs split evenly
 * instead of 256 bytes and the rest (float16 (130, 60000).T 7.3 /
 * 9.2-10.9). */
#define PL_RUNS_MIN_SRC_ROWS 48
#define PL_RUNS_BATCH_ROWS 32

/* A page, the smallest on x86-64 and arm64 Linux: src rows that start a
 * page or more apart each cost their own TLB entry and hardware-prefetch
 * stream.  Streaming transposes read one page of src per tile column;
 * streaming step-2 gathers want rows at least this long, so that the
 * element-by-element head that aligns dst stays a small part of each. */
#define PL_PAGE_BYTES 4096

/* An outer dim that steps src by at most this (four cache lines) continues
 * rows whose lines the previous unit just brought into L1: see
 * pl_keep_src_lines_hot.  Measured on (27,28,28,28,28).permute(2,3,1,4,0),
 * float32, 1 thread: 4.4 -> 5.5 GB/s. */
#define PL_NEAR_SRC_STEP_BYTES 256

/* Thin transposes (PL_THIN) cut their long dim into units of about this
 * many bytes of the packed (P-element group) side, a whole number of
 * 64-group steps, so units of a line-aligned row start on cache lines. */
#define PL_THIN_UNIT_BYTES ((int64_t)32 * 1024)

/* A transpose whose thin side has 2 to 8 elements is a PL_THIN copy only
 * when its long side has at least this many: shorter ones are a few
 * element moves each, and the tile loop does them as well. */
#define PL_THIN_MIN_LONG 16

enum pl_kind { PL_ROWS, PL_TRANSPOSE, PL_STRIDED, PL_THIN, PL_FUSED, PL_REGROUP };

/* Levels of a fused transpose's side: the dims below its tiled one. */
#define PL_FUSE_LEVELS 3

/* The canonical copy as a loop nest of units.  Loop dims (outermost first)
 * end with the tile index of dim b (row_blocks: in b's place), then of dim
 * a; a unit moves an na x nb block: elements i < na along a, j < nb along
 * b (fold > 1: one such block for each of fold iterations of loop
 * fold_loop). */
typedef struct pl_plan {
    enum pl_kind kind;
    size_t itemsize;
    const char *src;
    char *dst;
    int nloop;
    int bloop;                            /* the loop of b's tile index: nloop - 2, or b's place (row_blocks) */
    int64_t na, nb, ta, tb;               /* extents and tile sizes of a and b */
    int64_t ssa, ssb, dsa, dsb;           /* byte strides of a and b */
    _pylayout_tile_fn tile;               /* TRANSPOSE with unit strides: SIMD kernel */
    _pylayout_tile_fn tile_back;          /* the same blocks last first (wrapped tiles), or NULL */
    _pylayout_tile_staged_fn tile_staged; /* TRANSPOSE: tile through the heap buffer, else tile; or NULL */
    bool backward;                        /* units last first, with tile_back: see pl_repeats */
    _pylayout_stream_copy_fn stream_out;  /* TRANSPOSE when each unit's dst is one block; ROWS: pl_rows_stream */
    int64_t pf_dist;                      /* stream_out, ROWS: src bytes ahead to prefetch each row, or 0 */
    int64_t pf_dst;                       /* stream_out transposes: dst bytes ahead of the next block, or 0 */
    bool stream_runs;                     /* stream_out transposes: each dst row's run streamed on its own */
    bool small_rows;                      /* ROWS of at most PL_SMALL_ROW_BYTES bytes: copied inline */
    bool row_blocks;                      /* ROWS units along src's dense dim: see PL_ROW_BLOCK_MAX_UNIT_BYTES */
    int fold_loop;                        /* ROWS: fold iterations of this loop a unit, when fold > 1 */
    int64_t fold, fold_count, fold_ss, fold_ds; /* that loop's own count and steps (see PL_ROWS_FOLD_BYTES) */
    _pylayout_rows_fn rows;               /* ROWS up to PL_ROWS_KERNEL_MAX_BYTES: the path's row kernel, or NULL */
    _pylayout_group_stream_fn group_stream; /* TRANSPOSE of groups (itemsize > 16) */
    int64_t planes;                       /* TRANSPOSE of groups of this many elements: pl_run_planes */
    int64_t ssq, dsq;                     /* planes: the group's element step in src / dst, when not itemsize/planes */
    bool planes_heap;                     /* planes: buffers from malloc (else the stack's, in sub-blocks) */
    bool planes_ahead;                    /* planes, REGROUP: prefetch dst and the next unit's src */
    _pylayout_tile_fn tile3;              /* planes: 3-element groups packed in both, in registers; or NULL */
    _pylayout_tile_split_fn tile_split;   /* planes: groups packed in src into dst's planes, in registers; or NULL */
    _pylayout_tile_zip_fn tile_zip;       /* planes: src's planes into groups packed in dst, in registers; or NULL */
    _pylayout_gather2_fn gather2;         /* STRIDED, src step 2 into unit dst */
    _pylayout_gatherk_fn gatherk;         /* STRIDED, src step gk (3-8) into unit dst */
    int gk;
    bool grouped;                         /* gg.run copies each unit: groups of bytes gathered or scattered */
    bool blocks;                          /* ROWS of blocks (itemsize bytes each) permuted inside: bp.run */
    int64_t blocks_per;                   /* blocks with stream_out: blocks a piece (pl_blocks_streamed) */
    bool staged;                          /* groups gathered into an L1 buffer, then scattered: pl_run_staged */
    _pylayout_reverse_fn reverse;         /* STRIDED, src step -1 element: rows backwards */
    _pylayout_fill_fn fill;               /* STRIDED, src step 0 (a broadcast): rows filled, or NULL */
    _pylayout_reverse_groups_fn reverse_groups; /* the same, rows short and packed along b: groups reversed */
    void (*fence)(void);                  /* set when a kernel above streams */
    _pylayout_zip_fn zip;                 /* THIN, na = P groups in dst: interleave planes along a */
    _pylayout_unzip_fn unzip;             /* THIN, nb = P groups in src: planes along b of dst; REGROUP too */
    int64_t regroup_a, regroup_b;         /* REGROUP: the elements of a dst group (A) and of a src group (B) */
    /* Last, and not zero-filled: clearing these 1.6 KB (rep stos) was half
     * of this driver's own time in a 1 KB copy (perf annotate).
     * pl_build_loops sets the first nloop entries, the only ones read. */
    int64_t count[PYLAYOUT_MAX_NDIM + 2]; /* iterations of each loop dim */
    int64_t sstep[PYLAYOUT_MAX_NDIM + 2]; /* byte steps per iteration */
    int64_t dstep[PYLAYOUT_MAX_NDIM + 2];
    _pylayout_group_gather gg;            /* set and read only where grouped, or staged (the gather) */
    _pylayout_group_gather gs;            /* set and read only where staged (the scatter) */
    _pylayout_block_perm bp;              /* set and read only where blocks */
    /* PL_FUSED (pl_fused): the dims fused below a and below b, innermost
     * first, with their counts and src (a's side) or dst (b's side) byte
     * steps; set and read only there */
    int nfa, nfb;
    bool fa_gather; /* src rows gathered into a buffer first: a has levels, or its rows are crowded */
    bool fb_direct; /* b has no levels and dst's rows are not crowded: transposed straight into dst */
    int64_t fa_count[PL_FUSE_LEVELS], fa_step[PL_FUSE_LEVELS];
    int64_t fb_count[PL_FUSE_LEVELS], fb_step[PL_FUSE_LEVELS];
    int64_t fa_in, fb_in; /* elements one step of a and of b covers: the product of its levels' counts */
} pl_plan;

static int64_t pl_abs(int64_t x) { return x < 0 ? -x : x; }
static int64_t pl_min(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t pl_max(int64_t a, int64_t b) { return a > b ? a : b; }
static int64_t pl_ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* A plan of `kind` for elements of `itemsize` bytes from src to dst, its
 * other scalars zero (the loop arrays after them are left as they are:
 * pl_build_loops sets what is read).  The scalars are zeroed by a copy of
 * a zero plan: a memset of their 152 bytes compiles to rep stos (GCC 12,
 * -O2), whose start-up was a tenth of a 1 KB copy (perf annotate); a copy
 * compiles to vector moves. */
static inline void pl_plan_start(pl_plan *p, enum pl_kind kind, size_t itemsize, const char *src, char *dst)
{
    static const pl_plan zero_plan;
    memcpy(p, &zero_plan, offsetof(pl_plan, count));
    p->kind = kind;
    p->itemsize = itemsize;
    p->src = src;
    p->dst = dst;
}

/* Bytes per chunk of a parallel copy of total_bytes on nt threads. */
static int64_t pl_chunk_bytes(int64_t total_bytes, int nt)
{
    return pl_min(PL_CHUNK_MAX_BYTES, pl_max(PL_CHUNK_MIN_BYTES, total_bytes / (PL_CHUNKS_PER_THREAD * nt)));
}

/* ------------------------------------------------------------------ run */

/* A row of n <= PL_SMALL_ROW_BYTES bytes in moves of fixed size, which the
 * compiler inlines, the last of them overlapping the one before (src and
 * dst never overlap: pl_check_overlap). */
static inline void pl_copy_small_row(char *d, const char *s, int64_t n)
{
    if (n >= 16) {
        for (int64_t o = 0; o + 16 < n; o += 16)
            memcpy(d + o, s + o, 16);
        memcpy(d + n - 16, s + n - 16, 16);
    } else if (n >= 8) {
        memcpy(d, s, 8);
        memcpy(d + n - 8, s + n - 8, 8);
    } else if (n >= 4) {
        memcpy(d, s, 4);
        memcpy(d + n - 4, s + n - 4, 4);
    } else {
        for (int64_t o = 0; o < n; o++)
            d[o] = s[o];
    }
}

/* A dst row of n elements of `is` bytes, each the one at s (a source
 * broadcast along the row: x[:, None].expand(m, n), an image's first
 * channel expanded): stores of a 64-byte pattern of the element, the last
 * overlapping the one before, or memset.  The 2-D loop, element by
 * element, ran at 4 (uint8) to 13 (float32) GB/s, against torch's 40-100
 * in cache; now (16,3,224,224) float32, rows of 224: 13 -> 70 GB/s (torch
 * 97-101), (4096,4096) float16: 8 -> 41-44 (torch 50-54), (16,3,512,512)
 * uint8: 4 -> 38-70 (torch 39-75), 1 thread. */
static void pl_fill_row(char *d, const char *s, int64_t n, size_t is)
{
    const int64_t total = n * (int64_t)is, step = (int64_t)is;
    if (is == 1 && n >= 16) {
        memset(d, (unsigned char)*s, (size_t)n);
        return;
    }
    if (total < 16 || 16 % is != 0 || is == 1) { /* short rows: fixed-size moves where the size allows */
        switch (is) {
        case 1: for (int64_t o = 0; o < total; o++) d[o] = *s; break;
        case 2: for (int64_t o = 0; o < total; o += 2) memcpy(d + o, s, 2); break;
        case 4: for (int64_t o = 0; o < total; o += 4) memcpy(d + o, s, 4); break;
        case 8: for (int64_t o = 0; o < total; o += 8) memcpy(d + o, s, 8); break;
        default: for (int64_t o = 0; o < total; o += step) memcpy(d + o, s, is); break;
        }
        return;
    }
    char pattern[64]; /* fixed-size moves: a memcpy call per element was most of a short row's time */
    if (is == 16) {
        for (int o = 0; o < 64; o += 16)
            memcpy(pattern + o, s, 16);
    } else {
        uint64_t v = 0, x = 0;
        if (is == 8) {
            memcpy(&v, s, 8);
        } else if (is == 4) {
            memcpy(&x, s, 4);
            v = x * UINT64_C(0x0000000100000001);
        } else {
            memcpy(&x, s, 2);
            v = x * UINT64_C(0x0001000100010001);
        }
        for (int o = 0; o < 64; o += 8)
            memcpy(pattern + o, &v, 8);
    }
    int64_t o = 0;
    for (; o + 64 <= total; o += 64)
        memcpy(d + o, pattern, 64);
    for (; o + 16 < total; o += 16)
        memcpy(d + o, pattern, 16);
    memcpy(d + total - 16, pattern, 16); /* the pattern repeats every is bytes, which divide 16 */
}

/* Prefetches the lines of rows [r0, r1) of rows `bytes` long at `base`,
 * the rows `step` bytes apart, and every `per` of them `pstep` bytes on
 * from the last `per` (the P planes of a unit's rows, each plane `per`
 * rows); for writing where `write`.  Addresses are computed as integers:
 * a unit's next unit may lie past the tensor, where a prefetch is only
 * wasted (it never faults). */
static inline void pl_prefetch_rows(uintptr_t base, int64_t step, int64_t per, int64_t pstep, int64_t r0,
                                    int64_t r1, int64_t bytes, bool write)
{
    for (int64_t r = r0; r < r1; r++) {
        const uintptr_t row = base + (uintptr_t)((r / per) * pstep + (r % per) * step);
        for (int64_t o = 0; o < bytes; o += PL_LINE_BYTES) {
            if (write)
                __builtin_prefetch((const void *)(row + (uintptr_t)o), 1, 3);
            else
                __builtin_prefetch((const void *)(row + (uintptr_t)o), 0, 3);
        }
    }
}

/* A unit of a transpose of groups of P = p->planes elements of e bytes
 * through L1 buffers: na x nb groups, src rows along a, dst rows along b.
 * Where a side holds the groups packed (ssq or dsq 0: the group's elements
 * are adjacent there), its rows are unzipped into P planes of na x nb
 * elements in one buffer (src), or zipped from the other (dst); where it
 * holds them as P planes ssq or dsq bytes apart, the tile kernel reads or
 * writes those planes in place.  Between the two, the tile kernel
 * transposes each plane.
 *
 * In copies past half of L3 (planes_ahead, the judgement that lets
 * transposes stream: pl_stream_min_wide_bytes) each phase waits on
 * memory: the unzip on src rows a few lines long and 10-50 KiB apart,
 * which the hardware prefetchers do not see coming, the zip on the
 * read-for-ownership of its dst lines.  So the unzip also prefetches, for
 * writing, the lines the zip is about to write, and the last phase (the
 * zip, or the tile calls where dst holds planes) prefetches the next
 * unit's src rows (the next unit along a: the same columns, the next na
 * rows), each spread over that phase's calls.  Groups of 3 packed in both
 * skip all of it where the kernels have tile3, groups packed in src into
 * dst's planes where they have tile_split (see pl_choose_planes).
 * Measured on the 2-core Zen 5 dev VM, torch tensors, copy_into, best of
 * 15, GB/s, 1 thread / 2 threads, without prefetches / next src rows only
 * / both:
 *   float32 (2048,2048,3) by (1,0,2): 6.7 / 10.5 / 11.8 and 12.4 / 16.1 / 24.3;
 *   uint8 (4096,4096,3) by (1,0,2): 5.5 / 8.5 / 8.9 and 10.2 / 13.7 / 18.5;
 *   float32 (2048,2048,5) by (1,0,2): 7.3 / 10.3 / 12.0 and 13.5 / 19.5 / 21.1;
 *   float32 (16,3,512,512) by (0,3,2,1): 6.9 / 9.6 / 10.0 and 12.2 / 21.8 / 21.2;
 *   float32 (4,2048,2048) by (2,1,0): 6.8 / 8.6 / 8.7 and 11.7 / 16.9 / 16.9;
 *   uint8 (4096,4096,3) by (2,1,0) (dst planes): 3.6 / 3.9 / 3.6 and 6.5 / 6.9 / 7.0;
 *   uint8 (1080,1920,3) by (1,0,2), 6 MB, in L3, 2 threads: 24.6-24.9 without
 *   prefetches, 21.6-21.8 with both: in cache they cost, hence the size limit.
 * Prefetching into L2 only (prefetcht1) instead measured the same. */
static void pl_run_planes(const pl_plan *p, const char *s, char *d, int64_t na, int64_t nb, char *buf,
                          int64_t half)
{
    if (p->tile3 != NULL) { /* 3-element groups packed in both: the unit in registers */
        p->tile3(s, p->ssa, d, p->dsb, na, nb);
        return;
    }
    if (p->tile_split != NULL) { /* dst in planes: the unit's src rows of nb * P elements, in registers */
        p->tile_split(s, p->ssa, d, p->dsb, p->dsq, (int)p->planes, na, nb * p->planes);
        return;
    }
    if (p->tile_zip != NULL) { /* src in planes: the unit's dst rows of na * P elements, in registers */
        p->tile_zip(s, p->ssa, p->ssq, (int)p->planes, d, p->dsb, na * p->planes, nb);
        return;
    }
    const int64_t e = (int64_t)p->itemsize / p->planes, g = (int64_t)p->itemsize;
    int64_t ti = na, tj = nb; /* sub-blocks of ti x tj groups when the buffers are short */
    while (ti * tj * g > half) {
        if (ti >= tj)
            ti = (ti + 1) / 2;
        else
            tj = (tj + 1) / 2;
    }
    for (int64_t i0 = 0; i0 < na; i0 += ti)
        for (int64_t j0 = 0; j0 < nb; j0 += tj) {
            const int64_t ni = pl_min(ti, na - i0), nj = pl_min(tj, nb - j0), plane = ni * nj * e;
            const char *sb = s + i0 * p->ssa + j0 * p->ssb;
            char *db = d + j0 * p->dsb + i0 * p->dsa;
            const char *in = sb; /* plane q at in + q * in_plane, rows along a in_row apart */
            int64_t in_row = p->ssa, in_plane = p->ssq;
            const bool ahead = p->planes_ahead;
            if (p->ssq == 0) {
                for (int64_t i = 0; i < ni; i++) {
                    if (ahead && p->dsq == 0) /* the zip's dst rows, nj of them over these ni calls */
                        pl_prefetch_rows((uintptr_t)db, p->dsb, nj, 0, i * nj / ni, (i + 1) * nj / ni, ni * g, true);
                    p->unzip(sb + i * p->ssa, buf + i * nj * e, plane, nj);
                }
                in = buf, in_row = nj * e, in_plane = plane;
            }
            char *out = db; /* likewise, rows along b */
            int64_t out_row = p->dsb, out_plane = p->dsq;
            if (p->dsq == 0)
                out = buf + half, out_row = ni * e, out_plane = plane;
            /* the next unit's src rows: ni of packed groups, or ni of each of P planes */
            const uintptr_t next = (uintptr_t)sb + (uintptr_t)(na * p->ssa);
            const int64_t nrows = p->ssq == 0 ? ni : p->planes * ni, row_bytes = p->ssq == 0 ? nj * g : nj * e;
            const int64_t calls = p->dsq == 0 ? nj : p->planes; /* the last phase's */
            for (int64_t q = 0; q < p->planes; q++) {
                if (ahead && p->dsq != 0)
                    pl_prefetch_rows(next, p->ssa, ni, p->ssq, q * nrows / calls, (q + 1) * nrows / calls, row_bytes,
                                     false);
                p->tile(in + q * in_plane, in_row, out + q * out_plane, out_row, ni, nj);
            }
            if (p->dsq == 0)
                for (int64_t j = 0; j < nj; j++) {
                    if (ahead)
                        pl_prefetch_rows(next, p->ssa, ni, p->ssq, j * nrows / calls, (j + 1) * nrows / calls,
                                         row_bytes, false);
                    p->zip(out + j * ni * e, plane, db + j * p->dsb, ni);
                }
        }
}

/* A THIN unzip whose src groups have gaps between them, as an RGBA
 * image's RGB into planes (rgba[..., :3].permute(2, 0, 1), the DataLoader
 * direction for PNGs with alpha): the groups gathered packed into an L1
 * buffer (group_gather), PL_UNZIP_GAPS_BYTES at a time, then unzipped from
 * there.  The tiles it took before, three elements wide, ran below torch:
 * uint8 (1080,1920,4), 1 thread, 1946 us (torch 1646).  Also for groups
 * packed in the opposite order (an HWC image flipped into planes,
 * img[:, ::-1].transpose(2, 0, 1), torchvision's ToTensor of a flipped
 * image), put in order by group_flip: uint8 (1080,1920,3), 1 thread, 2.8
 * -> 28 GB/s (NumPy 4.0). */
#define PL_UNZIP_GAPS_BYTES 4096

__attribute__((noinline)) /* its 4 KiB buffer in its own frame, not in every copy's */
static void pl_unzip_gaps(const pl_plan *p, const char *s, char *d, int64_t na)
{
    _Alignas(PL_LINE_BYTES) char buf[PL_UNZIP_GAPS_BYTES];
    const int64_t per = PL_UNZIP_GAPS_BYTES / p->gg.g, is = (int64_t)p->itemsize;
    for (int64_t i = 0; i < na; i += per) {
        const int64_t m = pl_min(per, na - i);
        p->gg.run(s + i * p->ssa, buf, m, &p->gg);
        p->unzip(buf, d + i * is, p->dsb, m);
    }
}

/* n groups of gs.g bytes, ss bytes apart from s, into groups ds bytes
 * apart from d, both with gaps (pl_choose_rows' staged copies): gathered
 * packed into an L1 buffer, PL_STAGE_BYTES at a time, by the plan's gather
 * (gather2, gatherk or gg), then scattered from there (gs). */
#define PL_STAGE_BYTES 4096

__attribute__((noinline)) /* its 4 KiB buffer in its own frame, not in every copy's */
static void pl_run_staged(const pl_plan *p, const char *s, char *d, int64_t n, int64_t ss, int64_t ds)
{
    _Alignas(PL_LINE_BYTES) char buf[PL_STAGE_BYTES];
    const int64_t per = PL_STAGE_BYTES / p->gs.g;
    for (int64_t i = 0; i < n; i += per) {
        const int64_t m = pl_min(per, n - i);
        const char *si = s + i * ss;
        if (p->gather2 != NULL)
            p->gather2(si, buf, m);
        else if (p->gatherk != NULL)
            p->gatherk(si, 0, buf, 0, m, 1, p->gk);
        else
            p->gg.run(si, buf, m, &p->gg);
        p->gs.run(buf, d + i * ds, m, &p->gs);
    }
}

/* n blocks of a copy past a third of the L3 (pl_copy_blocks): permuted
 * into an L1 buffer, PL_BLOCKS_BUFFER_BYTES at most at a time, at dst's
 * offset in a line, then streamed to dst; each piece a whole number of
 * lines where its blocks allow. */
#define PL_BLOCKS_BUFFER_BYTES 4096

__attribute__((noinline)) /* its 4 KiB buffer in its own frame, not in every copy's */
static void pl_blocks_streamed(const pl_plan *p, const char *s, char *d, int64_t n)
{
    _Alignas(PL_LINE_BYTES) char space[PL_BLOCKS_BUFFER_BYTES + PL_LINE_BYTES];
    const int64_t S = (int64_t)p->itemsize, per = p->blocks_per;
    for (int64_t i = 0; i < n; i += per) {
        const int64_t m = pl_min(per, n - i);
        char *buf = space + (uintptr_t)(d + i * S) % PL_LINE_BYTES;
        p->bp.run(s + i * S, buf, m, &p->bp);
        p->stream_out(d + i * S, buf, m * S);
    }
}

/* A fused transpose's two L1 buffers (pl_run_fused), each of this many
 * bytes at most: one unit's rows as read from src, then as written to dst. */
#define PL_FUSE_BUFFER_BYTES 16384

/* A row of n bytes in moves of 16 (the last overlapping the one before),
 * for the fused transposes' rows of 16 bytes to a few hundred.  The empty
 * asm keeps the compiler from turning the loop back into a memmove call,
 * which cost a call per row of 64 bytes: a quarter of the time of a
 * (8,16,1024,8) uint8 reversal (perf).  Wider moves, AVX2 and AVX-512
 * kernels of the table, were slower or level in the same copies: uint8
 * (4096,8,8,4) by (3,2,1,0), 1 thread, 15.7-16.2 GB/s this way, 10.2-10.8
 * with 32- or 64-byte moves (in one process, alternating). */
static inline void pl_copy_run(char *d, const char *s, int64_t n)
{
    if (n < 16) {
        pl_copy_small_row(d, s, n);
        return;
    }
    int64_t o = 0;
    for (; o + 16 < n; o += 16) {
        memcpy(d + o, s + o, 16);
        __asm__("" : "+r"(o));
    }
    memcpy(d + n - 16, s + n - 16, 16);
}

static void pl_move_rows(char *dst, int64_t dstep, const char *src, int64_t sstep, int64_t rows, int64_t n)
{
    for (int64_t r = 0; r < rows; r++)
        pl_copy_run(dst + r * dstep, src + r * sstep, n);
}

/* A fused transpose's unit (see pl_fused): R = na x fa_in rows, each a run
 * of C = nb x fb_in elements in src, into C runs of R elements in dst.
 * The rows are gathered into an L1 buffer where a has levels below it or
 * its rows are crowded (else the tile reads them from src at step ssa),
 * transposed into the second buffer, and each of its rows copied, or
 * streamed, to its place in dst.  Levels are walked as odometers, the
 * innermost as runs of rows a fixed step apart. */
/* A side's odometer: the offset of its next run of rows, from `off`, the
 * run before it at indices idx.  Levels 1 .. n - 1 (count, step) above
 * the innermost (level 0, the run), then the tiled dim (`tiled`). */
static inline int64_t pl_fused_next(int64_t off, int64_t *idx, int n, const int64_t *count, const int64_t *step,
                                    int64_t tiled)
{
    for (int l = 1; l < n; l++) {
        off += step[l];
        if (++idx[l] < count[l])
            return off;
        off -= count[l] * step[l];
        idx[l] = 0;
    }
    return off + tiled;
}

static void pl_run_fused(const pl_plan *p, const char *s, char *d, int64_t na, int64_t nb)
{
    const int64_t is = (int64_t)p->itemsize;
    const int64_t R = na * p->fa_in, C = nb * p->fb_in, rb = R * is, cb = C * is;
    _Alignas(PL_LINE_BYTES) char bufa[PL_FUSE_BUFFER_BYTES], bufb[PL_FUSE_BUFFER_BYTES];
    const char *rows = s;
    int64_t step = p->ssa;
    if (p->fa_gather) { /* runs of a's innermost level, or all R rows */
        const int64_t run = p->nfa > 0 ? p->fa_count[0] : R, rstep = p->nfa > 0 ? p->fa_step[0] : p->ssa;
        int64_t idx[PL_FUSE_LEVELS] = {0}, off = 0;
        for (int64_t r = 0; r < R; r += run) {
            pl_move_rows(bufa + r * cb, cb, s + off, rstep, run, cb);
            off = pl_fused_next(off, idx, p->nfa, p->fa_count, p->fa_step, p->ssa);
        }
        rows = bufa;
        step = cb;
    }
    if (p->fb_direct) {
        p->tile(rows, step, d, p->dsb, R, C);
        return;
    }
    p->tile(rows, step, bufb, rb, R, C);
    const int64_t run = p->nfb > 0 ? p->fb_count[0] : C, cstep = p->nfb > 0 ? p->fb_step[0] : p->dsb;
    int64_t idx[PL_FUSE_LEVELS] = {0}, off = 0;
    for (int64_t c = 0; c < C; c += run) {
        if (p->stream_out != NULL)
            for (int64_t k = 0; k < run; k++)
                p->stream_out(d + off + k * cstep, bufb + (c + k) * rb, rb);
        else if (p->rows != NULL) /* see PL_FUSE_CROWDED_DST_RUN_BYTES */
            p->rows(bufb + c * rb, rb, d + off, cstep, rb, run);
        else
            pl_move_rows(d + off, cstep, bufb + c * rb, rb, run, rb);
        off = pl_fused_next(off, idx, p->nfb, p->fb_count, p->fb_step, p->dsb);
    }
}

/* One unit of a PL_REGROUP copy (pl_regroup): m groups along j, each B
 * elements packed in src and A packed in dst.  Each of the A src rows is
 * split into B planes of an L1 buffer, then each of the B dst rows
 * interleaved from A of them: plane (a, b) of the buffer holds element b
 * of every group of src row a, i.e. element a of every group of dst row b. */
static void pl_run_regroup(const pl_plan *p, const char *s, char *d, int64_t m)
{
    _Alignas(PL_LINE_BYTES) char buf[PL_REGROUP_BUFFER_BYTES];
    const int64_t is = (int64_t)p->itemsize, A = p->regroup_a, B = p->regroup_b, plane = m * is;
    for (int64_t a = 0; a < A; a++) {
        const char *row = s + a * p->ssa;
        if (p->planes_ahead) /* the next unit's run of this row: a prefetch never faults */
            for (int64_t o = 0; o < B * plane; o += PL_LINE_BYTES)
                __builtin_prefetch(row + B * plane + o);
        p->unzip(row, buf + a * B * plane, plane, m);
    }
    for (int64_t b = 0; b < B; b++) {
        char *row = d + b * p->dsb;
        if (p->planes_ahead)
            for (int64_t o = 0; o < A * plane; o += PL_LINE_BYTES)
                __builtin_prefetch(row + A * plane + o, 1);
        p->zip(buf + b * plane, B * plane, row, m);
    }
}

/* The element loop of the copies no kernel takes: strided on both sides
 * where the CPU has no masked byte stores (AVX2 and under: one channel of
 * an HWC image into another's, b[..., 0] = a[..., 0]; an RGB image's
 * channel into an RGBA one's; y[:, ::2] = x[:, ::3]), and transposes with
 * no tile kernel.  kernels.h's element moves, their inner loop unrolled 8
 * times: one load and one store an element either way, but the loop's
 * own count and branch no longer sit between them.  On the 2-core Zen 3
 * (AVX2 only), pylayout_copy, best of 10, five rounds with the two builds
 * alternating in one process (dlopen), us, before -> after, 1 thread / 2
 * threads: uint8 (1080, 1920, 3)[..., 0] into the same view of another
 * image 1476-3350 -> 911-1371 / 1536-1718 -> 522-618; into
 * (1080, 1920, 4)[..., 0] 2475-3246 -> 1133-1571 / 1480-1663 -> 518-686;
 * (2048, 3072)[:, ::3] into (2048, 2048)[:, ::2], float16 1991-2415 ->
 * 1743-2287 / 857-1598 -> 781-1231, float32 3164-5486 -> 2773-4669 /
 * 2260-2584 -> 2232-3077, float64 7920-9636 -> 7013-8232 / 4242-4741 ->
 * 3824-4425.  The tiles' edges keep kernels.h's plain loops. */
PL_DEFINE_MOVE2D_UNROLLED(pl_move_elements_1, 1, _Pragma("GCC unroll 8"))
PL_DEFINE_MOVE2D_UNROLLED(pl_move_elements_2, 2, _Pragma("GCC unroll 8"))
PL_DEFINE_MOVE2D_UNROLLED(pl_move_elements_4, 4, _Pragma("GCC unroll 8"))
PL_DEFINE_MOVE2D_UNROLLED(pl_move_elements_8, 8, _Pragma("GCC unroll 8"))
PL_DEFINE_MOVE2D_UNROLLED(pl_move_elements_16, 16, _Pragma("GCC unroll 8"))

static void pl_run_unit(const pl_plan *p, const char *s, char *d, int64_t na, int64_t nb, char *buf, int64_t half)
{
    switch (p->kind) {
    case PL_ROWS:
        if (p->blocks) {
            for (int64_t j = 0; j < nb; j++)
                if (p->stream_out != NULL)
                    pl_blocks_streamed(p, s + j * p->ssb, d + j * p->dsb, na);
                else
                    p->bp.run(s + j * p->ssb, d + j * p->dsb, na, &p->bp);
            return;
        }
        if (p->staged) { /* na is the whole group, as below */
            pl_run_staged(p, s, d, nb, p->ssb, p->dsb);
            return;
        }
        if (p->grouped) { /* na is the whole group (pl_choose_rows) */
            p->gg.run(s, d, nb, &p->gg);
            return;
        }
        const int64_t n = na * (int64_t)p->itemsize;
        if (p->pf_dist != 0) {
            for (int64_t j = 0; j < nb; j++) {
                const char *row = s + j * p->ssb;
                /* a prefetch never faults: past the tensor it is only wasted */
                for (int64_t o = 0; o < n; o += PL_LINE_BYTES)
                    __builtin_prefetch(row + p->pf_dist + o);
                if (p->rows != NULL)
                    p->rows(row, 0, d + j * p->dsb, 0, n, 1);
                else if (p->small_rows)
                    pl_copy_small_row(d + j * p->dsb, row, n);
                else
                    memcpy(d + j * p->dsb, row, (size_t)n);
            }
        } else if (p->rows != NULL) {
            p->rows(s, p->ssb, d, p->dsb, n, nb);
        } else if (p->small_rows) {
            for (int64_t j = 0; j < nb; j++)
                pl_copy_small_row(d + j * p->dsb, s + j * p->ssb, n);
        } else if (p->stream_out != NULL) {
            for (int64_t j = 0; j < nb; j++)
                p->stream_out(d + j * p->dsb, s + j * p->ssb, n);
        } else {
            for (int64_t j = 0; j < nb; j++)
                memcpy(d + j * p->dsb, s + j * p->ssb, (size_t)n);
        }
        return;
    case PL_TRANSPOSE:
        if (p->planes != 0) {
            pl_run_planes(p, s, d, na, nb, buf, half);
            return;
        }
        if (p->group_stream != NULL) {
            p->group_stream(s, p->ssa, d, p->dsb, na, nb, (int64_t)p->itemsize);
            return;
        }
        if (p->stream_runs) {
            /* runs of dst rows off their lines (pl_choose_transpose): as
             * many as fill the buffer built in L1 by the cached tile, then
             * streamed row by row, or as one block where the runs are
             * whole dense rows; the next batch's src lines are prefetched
             * meanwhile (see PL_RUNS_MIN_SRC_ROWS) */
            _Alignas(PL_LINE_BYTES) char buf[PL_STREAM_BUFFER_BYTES];
            const int64_t run = na * (int64_t)p->itemsize, fit = PL_STREAM_BUFFER_BYTES / run;
            const int64_t rows = fit >= 2 * PL_RUNS_BATCH_ROWS ? fit / PL_RUNS_BATCH_ROWS * PL_RUNS_BATCH_ROWS : fit;
            for (int64_t j0 = 0; j0 < nb; j0 += rows) {
                const int64_t m = pl_min(rows, nb - j0), next = pl_min(rows, nb - j0 - m);
                for (int64_t i = 0; na >= PL_RUNS_MIN_SRC_ROWS && i < na; i++)
                    for (int64_t o = 0; o < next * p->ssb; o += PL_LINE_BYTES) /* the next batch's src */
                        __builtin_prefetch(s + i * p->ssa + (j0 + m) * p->ssb + o);
                p->tile(s + j0 * p->ssb, p->ssa, buf, run, na, m);
                if (p->dsb == run) {
                    p->stream_out(d + j0 * p->dsb, buf, m * run);
                    continue;
                }
                for (int64_t j = 0; j < m; j++)
                    p->stream_out(d + (j0 + j) * p->dsb, buf + j * run, run);
            }
            return;
        }
        if (p->stream_out != NULL) {
            /* one tile spans a (ta == na) and dsb == na * itemsize, so the
             * unit's dst is one block: build it in L1, then stream it */
            _Alignas(PL_LINE_BYTES) char buf[PL_STREAM_BUFFER_BYTES];
            if (p->pf_dist != 0) /* a prefetch never faults: past the tensor it is only wasted */
                for (int64_t i = 0; i < na; i++)
                    for (int64_t o = 0; o < nb * p->ssb + PL_LINE_BYTES - 1; o += PL_LINE_BYTES)
                        __builtin_prefetch(s + i * p->ssa + p->pf_dist + o);
            if (p->pf_dst != 0) /* its page, PL_DST_AHEAD_UNITS */
                __builtin_prefetch(d + p->pf_dst + nb * p->dsb - 1, 1, 0);
            p->tile(s, p->ssa, buf, p->dsb, na, nb);
            p->stream_out(d, buf, nb * p->dsb);
            return;
        }
        if (p->tile_staged != NULL && 2 * half >= PL_STAGED_BUFFER_BYTES) { /* else malloc failed: tile */
            p->tile_staged(s, p->ssa, d, p->dsb, na, nb, buf);
            return;
        }
        if (p->tile != NULL) {
            (p->backward ? p->tile_back : p->tile)(s, p->ssa, d, p->dsb, na, nb);
            return;
        }
        break;
    case PL_FUSED:
        pl_run_fused(p, s, d, na, nb);
        return;
    case PL_REGROUP:
        pl_run_regroup(p, s, d, na);
        return;
    case PL_THIN:
        if (p->zip != NULL)
            p->zip(s, p->ssa, d, nb);
        else if (p->grouped)
            pl_unzip_gaps(p, s, d, na);
        else
            p->unzip(s, d, p->dsb, na);
        return;
    case PL_STRIDED:
        if (p->staged) {
            for (int64_t j = 0; j < nb; j++)
                pl_run_staged(p, s + j * p->ssb, d + j * p->dsb, na, p->ssa, p->dsa);
            return;
        }
        if (p->grouped) {
            for (int64_t j = 0; j < nb; j++)
                p->gg.run(s + j * p->ssb, d + j * p->dsb, na, &p->gg);
            return;
        }
        if (p->gather2 != NULL) {
            for (int64_t j = 0; j < nb; j++)
                p->gather2(s + j * p->ssb, d + j * p->dsb, na);
            return;
        }
        if (p->gatherk != NULL) {
            p->gatherk(s, p->ssb, d, p->dsb, na, nb, p->gk);
            return;
        }
        if (p->reverse_groups != NULL) {
            const int64_t is = (int64_t)p->itemsize;
            p->reverse_groups(s - (na - 1) * is, d, nb, na * is, is);
            return;
        }
        if (p->reverse != NULL) {
            for (int64_t j = 0; j < nb; j++)
                p->reverse(s + j * p->ssb, d + j * p->dsb, na);
            return;
        }
        if (p->fill != NULL) {
            p->fill(s, p->ssb, d, p->dsb, na, nb);
            return;
        }
        if (p->ssa == 0 && p->dsa == (int64_t)p->itemsize) {
            for (int64_t j = 0; j < nb; j++)
                pl_fill_row(d + j * p->dsb, s + j * p->ssb, na, p->itemsize);
            return;
        }
        break;
    }
    switch (p->itemsize) {
    case 1: pl_move_elements_1(s, p->ssa, p->ssb, d, p->dsa, p->dsb, na, nb); break;
    case 2: pl_move_elements_2(s, p->ssa, p->ssb, d, p->dsa, p->dsb, na, nb); break;
    case 4: pl_move_elements_4(s, p->ssa, p->ssb, d, p->dsa, p->dsb, na, nb); break;
    case 8: pl_move_elements_8(s, p->ssa, p->ssb, d, p->dsa, p->dsb, na, nb); break;
    case 16: pl_move_elements_16(s, p->ssa, p->ssb, d, p->dsa, p->dsb, na, nb); break;
    default: /* any other element size: byte by byte */
        for (int64_t j = 0; j < nb; j++)
            for (int64_t i = 0; i < na; i++)
                memmove(d + j * p->dsb + i * p->dsa, s + j * p->ssb + i * p->ssa, p->itemsize);
        break;
    }
}

/* Unit u of the nest: its loop indices (idx) and its src and dst byte
 * offsets. */
static void pl_decode_unit(const pl_plan *p, int64_t u, int64_t *idx, int64_t *soff, int64_t *doff)
{
    *soff = *doff = 0;
    for (int k = p->nloop - 1; k >= 0; k--) {
        idx[k] = u % p->count[k];
        u /= p->count[k];
        *soff += idx[k] * p->sstep[k];
        *doff += idx[k] * p->dstep[k];
    }
}

/* Runs the unit at loop indices idx: a full tile, or the short last one
 * along a or b. */
static inline void pl_run_at(const pl_plan *p, const int64_t *idx, int64_t soff, int64_t doff, char *buf,
                             int64_t half)
{
    const int nl = p->nloop, bl = p->bloop;
    const int64_t na = idx[nl - 1] == p->count[nl - 1] - 1 ? p->na - (p->count[nl - 1] - 1) * p->ta : p->ta;
    const int64_t nb = idx[bl] == p->count[bl] - 1 ? p->nb - (p->count[bl] - 1) * p->tb : p->tb;
    if (p->fold > 1) { /* several iterations of loop fold_loop: the last may have fewer */
        const int f = p->fold_loop;
        const int64_t m = idx[f] == p->count[f] - 1 ? p->fold_count - (p->count[f] - 1) * p->fold : p->fold;
        for (int64_t q = 0; q < m; q++)
            pl_run_unit(p, p->src + soff + q * p->fold_ss, p->dst + doff + q * p->fold_ds, na, nb, buf, half);
        return;
    }
    pl_run_unit(p, p->src + soff, p->dst + doff, na, nb, buf, half);
}

/* Runs units [u0, u1) of the nest: the start is decoded once, then an
 * odometer walks the loop dims, the last (the tile index of a) fastest.
 * Backwards (pl_repeats), last unit first, each decoded on its own: such
 * copies have few, large units. */
static void pl_run_range(const pl_plan *p, int64_t u0, int64_t u1)
{
    _Alignas(PL_LINE_BYTES) char stack_buf[2 * PL_PLANES_STACK_BYTES];
    const int64_t heap_bytes = p->tile_staged != NULL ? PL_STAGED_BUFFER_BYTES
                               : p->planes_heap       ? 2 * PL_PLANES_BUFFER_BYTES
                                                      : 0;
    char *heap = heap_bytes != 0 ? malloc((size_t)heap_bytes) : NULL;
    char *buf = heap != NULL ? heap : stack_buf;
    const int64_t half = heap != NULL ? heap_bytes / 2 : PL_PLANES_STACK_BYTES;
    int64_t idx[PYLAYOUT_MAX_NDIM + 2];
    int64_t soff, doff;
    if (p->backward) {
        for (int64_t u = u1 - 1; u >= u0; u--) {
            pl_decode_unit(p, u, idx, &soff, &doff);
            pl_run_at(p, idx, soff, doff, buf, half);
        }
    } else {
        pl_decode_unit(p, u0, idx, &soff, &doff);
        for (int64_t u = u0; u < u1; u++) {
            pl_run_at(p, idx, soff, doff, buf, half);
            for (int k = p->nloop - 1; k >= 0; k--) {
                soff += p->sstep[k];
                doff += p->dstep[k];
                if (++idx[k] < p->count[k])
                    break;
                soff -= p->count[k] * p->sstep[k];
                doff -= p->count[k] * p->dstep[k];
                idx[k] = 0;
            }
        }
    }
    free(heap);
    if (p->fence != NULL)
        p->fence(); /* once per range: the streaming kernels leave it to us */
}

static void pl_run_units(void *plan, int64_t u0, int64_t u1)
{
    pl_run_range(plan, u0, u1);
}

/* Whether this copy runs backwards: its units last first, and in each its
 * blocks last first (tile_back).  A copy that repeats the previous one of
 * its thread that could run either way (same src, dst and bytes; a copy
 * into a preallocated output in a loop, or an output malloc hands back at
 * the same address) runs the other way from that one: it starts on the
 * lines the last copy touched last, which are still in cache, instead of
 * the ones it touched first, which the rest of that copy and anything the
 * caller ran since have most likely evicted.  Any other copy runs forwards.
 * Only the wrapped tiles' copies (dst rows of 512 B - 4 KiB, in cache)
 * have tile_back.  Measured on the 2-core Granite Rapids-class dev VM
 * (python -m pylayout bench --runs 3 --only in-cache, builds without and
 * with this alternating, twice each), 512 x 512 float32 into a
 * preallocated dst in a loop, 1 thread: 12.3 and 13.3 GB/s -> 18.1 and
 * 21.0 on torch tensors, 0.68-0.74 -> 0.99-1.00 of the in-cache memcpy as
 * NumPy operands, 0.61-0.66 -> 0.87-0.91 with NumPy's buffers 16 bytes
 * into a line (the 2 MB of src and dst just overflow the L2, where a
 * walk in the same order each time finds least of it).  2 threads level
 * (45-50 GB/s both: each core's 1 MB fits its L2); 64 and 256 KB level.
 * The threads still claim their chunks first to last: reversing that order
 * too lost at 2 threads (a throwaway switch, torch operands 21.4-22.4 ->
 * 23.1-24.1 us a copy).  The result does not depend on the order: src and
 * dst never overlap. */
static bool pl_repeats(const pl_plan *p, int64_t total_bytes)
{
    static _Thread_local struct {
        const char *src;
        char *dst;
        int64_t bytes;
        bool backward;
    } last;
    const bool backward = last.src == p->src && last.dst == p->dst && last.bytes == total_bytes && !last.backward;
    last.src = p->src;
    last.dst = p->dst;
    last.bytes = total_bytes;
    last.backward = backward;
    return backward;
}

/* Runs every unit of the plan, on nt threads when nt > 1. */
static void pl_run(const pl_plan *p, int64_t total_bytes, int nt)
{
    int64_t units = 1;
    for (int k = 0; k < p->nloop; k++)
        units *= p->count[k];

    if (nt > 1 && units > 1) {
        /* Chunks of consecutive units (whole tiles), claimed by whichever
         * thread runs next (threads.c): a thread the kernel does not run
         * holds up nothing it has not started. */
        int64_t chunks = pl_min(units, total_bytes / pl_chunk_bytes(total_bytes, nt));
        chunks = pl_max(2, pl_min(chunks, PL_MAX_CHUNKS));
        /* a thread's own chunks in claims of PL_CHUNK_MAX_BYTES at most
         * (threads.c, pl_claim_size) */
        const int64_t span_max = pl_max(1, PL_CHUNK_MAX_BYTES * chunks / pl_max(1, total_bytes));
        _pylayout_note_copy_threads(
            _pylayout_parallel_ranges(units, (int)chunks, 1, (int)span_max, nt, pl_run_units, (void *)p));
        return;
    }
    _pylayout_note_copy_threads(1);
    pl_run_range(p, 0, units);
}

/* -------------------------------------------------------- choose the kind */

/* The kind of unit for n >= 1 canonical dims, whose dst-innermost dim is
 * a = n - 1; *b_ret gets the unit's second dim (-1 for none). */
static enum pl_kind pl_choose_kind(int n, const int64_t *ss, const int64_t *ds, int64_t is, int *b_ret)
{
    const int a = n - 1;
    int b = -1; /* src's smallest nonzero stride outside a */
    for (int k = 0; k < a; k++)
        if (ss[k] != 0 && (b < 0 || pl_abs(ss[k]) < pl_abs(ss[b])))
            b = k;
    const bool rows = ss[a] == is && ds[a] == is;
    if (!rows && ss[a] != 0 && b >= 0 && pl_abs(ss[b]) < pl_abs(ss[a])) {
        *b_ret = b;
        return PL_TRANSPOSE;
    }
    *b_ret = a > 0 ? a - 1 : -1; /* whole rows of a, in units of the next dim out */
    return rows ? PL_ROWS : PL_STRIDED;
}

/* ------------------------------------------------------ choose the kernel */

/* How many consecutive groups of g bytes end on a line boundary when the
 * first starts on one: 64 / gcd(g, 64), for g a multiple of 16. */
static int64_t pl_group_rows(int64_t g)
{
    int64_t r = 1;
    while ((g * r) % PL_LINE_BYTES != 0)
        r *= 2;
    return r;
}

/* Transposes of 4- and 8-byte elements whose dst rows start on lines keep
 * cached stores past PL_STREAM_MIN_BYTES, up to a quarter of L3 and at most
 * this many bytes (pl_stream_min_wide_bytes; with L3 unknown, or 16 MiB or
 * less, they stream from PL_STREAM_MIN_BYTES as before): the float tiles
 * write dst from L2 and L3 faster than the streaming ones write it to
 * memory, until source and output outgrow about half of L3.  Not where
 * src or dst rows are a multiple of 2 KiB apart (PL_CROWDED_ROW_BYTES):
 * their rows crowd a few L1 sets, and streaming stores, which bypass L1,
 * win from 4 MiB.  Measured on the 2-core Zen 5 dev VM (32 MiB L3), n x n
 * transposes, both buffers 16 bytes into a line, GB/s streamed / cached,
 * median of 15 interleaved rounds, 1 thread and 2: float32 n=1040 (4.2
 * MiB) 30.8 / 47.6 and 35.0 / 83.4; n=1200 30.2 / 40.5 and 36.1 / 80.2;
 * n=1440 (7.9 MiB) 29.4 / 29.4 and 35.6 / 65.9; float64 n=800 30.9 /
 * 39.0 and 36.5 / 75.7, n=1000 29.9 / 24.5 and 37.0 / 74.6; but float32
 * n=1024 23.6 / 13.1 and 27.3 / 23.9 (rows 4 KiB apart).  Above it
 * streaming wins: float32 n=1600 (9.8 MiB) 356 us streamed against 553
 * cached, n=2000 700 against 1400.  1- and 2-byte elements stream from 4
 * MiB: uint8 n=2400 cached 0.88x / 0.92x, float16 n=1600 0.80x at 1 thread;
 * so do 16-byte ones: complex128 n=600-700 cached 0.88-1.14x at 1 thread,
 * 0.72-0.88x at 2.  Crowded rows of 1 to 8 bytes stream from less: see
 * PL_STREAM_MIN_CROWDED_NARROW_BYTES and PL_STREAM_MAX_CROWDED_CACHED_BYTES. */
#define PL_STREAM_MIN_WIDE_BYTES ((int64_t)8 * 1024 * 1024)
#define PL_CROWDED_ROW_BYTES 2048

static int64_t pl_stream_min_wide_bytes(void)
{
    const int64_t quarter_l3 = _pylayout_l3_bytes() / 4; /* 0 where unknown: stream from PL_STREAM_MIN_BYTES */
    return quarter_l3 < PL_STREAM_MIN_BYTES ? PL_STREAM_MIN_BYTES
           : quarter_l3 > PL_STREAM_MIN_WIDE_BYTES ? PL_STREAM_MIN_WIDE_BYTES
                                                   : quarter_l3;
}

/* Streaming transposes of whole dst lines up to this many bytes take the
 * kernels' tile_stream_runs (2-byte elements on AVX-512) in place of
 * tile_stream: half of L3, so that source and output both fit there, and
 * at most PL_STREAM_RUNS_MAX_BYTES (0 where L3 is unknown: never).  Each
 * dst row then gets 256 bytes of back-to-back streaming stores per visit
 * instead of one line, from src staged through an L1 buffer.  Measured on
 * the 2-core Zen 5 dev VM (32 MiB L3), float16 src (R, C) read transposed
 * into a dense dst on a line, pylayout_copy, best of three processes of 7
 * copies each, alternated, us, line tile / runs, 1 thread and 2 (session
 * 56): 1536 x 1536 (4.5 MiB) 354 / 170 and 363 / 181; 1024 x 2560 382 /
 * 175 and 387 / 162; 2048 x 2048 636 / 337 and 418 / 204; 1024 x 4096
 * 628 / 351 and 405 / 345; 2304 x 2304 797 / 465 and 453 / 398; 2816 x
 * 2816 1229 / 657 and 857 / 672; 4096 x 2048 (16 MiB) 1278-1321 / 902-948
 * and 781-991 / 550-589; dst rows pages apart, against the previous
 * commit's build, best of three processes of 15 copies: 4096 x 1024 625 /
 * 335 and 624 / 302, 8192 x 512 606 / 393 and 341 / 249; crowded copies
 * from 1.5 MiB (PL_STREAM_MIN_CROWDED_NARROW_BYTES), 1 thread, torch
 * tensors through pl.copy_into, best of 15, three rounds: 1024 x 1024
 * 155-160 / 74-77, 512 x 2048 158-160 / 80-84.  Past half of L3 it came
 * out mixed: 3584 x 3584 (24.5 MiB) 1959 / 1594 and 1214 / 944, but 6016 x 2048
 * 1128-1172 / 1607-2046 and 892-918 / 1063-1070; 4096 x 4096 level;
 * 8192 x 8192 (128 MiB) 11533 / 12897 and 7239 / 7475. */
#define PL_STREAM_RUNS_MAX_BYTES ((int64_t)16 * 1024 * 1024)

static int64_t pl_stream_runs_max_bytes(void)
{
    const int64_t half_l3 = _pylayout_l3_bytes() / 2;
    return half_l3 < PL_STREAM_RUNS_MAX_BYTES ? half_l3 : PL_STREAM_RUNS_MAX_BYTES;
}

/* Row copies up to this many bytes find their src rows in the caches:
 * 11/8 of pl_stream_min_wide_bytes (11 MiB with 32 MiB of L3, src and dst
 * 70 % of it).  Past it their units prefetch src rows (PL_ROWS_AHEAD_BYTES);
 * they did past pl_stream_min_wide_bytes, which lost where src and dst
 * still fit.  On the 2-core Zen 5 dev VM, torch tensors, copy_into, GB/s,
 * best of 7 batches, the two ways alternating in one process (a throwaway
 * switch), by (0,2,1,3), 2 threads, prefetched / not: (4,16,1024,64)
 * float16 (8 MiB) 68.6-69.7 / 80.5-87.0 (torch 89), (6,12,512,64) float32
 * (9 MiB) 78-81 / 82-87 (torch 91-94), with units of several rows
 * (pl_fold_rows) (5,16,1024,64) float16 (10 MiB) 63 / 82, (7,12,512,64)
 * float32 (10.5 MiB) 67 / 74; past it the prefetches won: (16,12,512,64)
 * float16 (12 MiB) 64 / 55, (6,16,1024,64) 56 / 53, (8,16,1024,64) (16
 * MiB) 51 / 37-42. */
static int64_t pl_rows_cached_max_bytes(void)
{
    return pl_stream_min_wide_bytes() / 8 * 11;
}

/* Transposes of groups.  A dst-innermost dim contiguous in both tensors
 * whose g bytes are more than one SIMD element (g > 16) is a row of every
 * copy that keeps the last dim last: (1024,1024,16) float32 by (1,0,2),
 * the attention permute (B,H,S,D) -> (B,S,H,D), an NHWC image with H and W
 * swapped.  When such rows lie far apart in src along dst's next dim,
 * ROWS units (dst order) read each row from a different src page, and the
 * cached stores read every dst line before writing it.  Past a quarter of
 * L3 a thread (pl_stream_min_wide_bytes times the threads: 8 MiB a thread
 * at most) the copy is instead a transpose of g-byte elements:
 * the group_stream kernel reads a few src rows in order and writes each
 * group with streaming stores, units of pl_group_rows(g) src rows or more,
 * at least PL_STREAM_RUN_BYTES of each dst row (runs of 64 bytes per dst
 * row stream at a third of the speed, as in the tiles).  Needs g, dst and
 * dst's row step multiples of 16 (the smallest streaming store).
 * Measured on the 2-core dev VM, float32, torch tensors (dst on a line),
 * GB/s, ROWS / groups, median of 5 interleaved rounds, 1 thread and 2 (memcpy
 * of the same bytes: 18-21 and 21-41; glibc's memcpy does not stream here,
 * as it sizes its threshold from sysconf's L3, 384 MiB on this VM):
 *   (1024,1024,16) by (1,0,2), g = 64: 5.8 / 17.1 and 11.8 / 23.1;
 *   (2048,2048,8), g = 32: 4.0 / 16.3 and 7.8 / 27.4;
 *   (2048,1024,12), g = 48: 4.9 / 14.6 and 9.6 / 28.4;
 *   (256,256,256), g = 1 KiB: 13.3 / 25.7 and 21.6 / 30.5;
 *   (4,12,2048,64) by (0,2,1,3): 18.9 / 39.5 and 20.1 / 40.1;
 *   (64,224,224,16) by (0,2,1,3) (rows 14 KiB apart, which ROWS units
 *   prefetch): 14.8 / 14.3 and 29.4 / 28.0;
 *   dst 16 bytes into a line (NumPy's large buffers): (1024,1024,16) 6.0 /
 *   23.1 and 11.3 / 23.1; (64,224,224,16) 14.7 / 17.3 and 17.1 / 23.2.
 * Units of 64-byte runs per dst row: (1024,1024,16) 11.4 against 17.1.
 * Those copies were 16 MiB or more.  From 4 MiB, where this began, the
 * streaming stores write to memory what cached ones leave in L3, which
 * holds such a copy's src and dst until they outgrow about half of it, and
 * from L3 two threads copy twice as fast as one: streamed, 2 threads ran no
 * faster than 1.  On the 2-core Zen 5 dev VM (32 MiB L3), torch tensors,
 * copy_into, best of 7 batches, GB/s, two rounds of fresh processes
 * alternating the builds, 1 thread and 2, streamed from 4 MiB / from 8 MiB
 * a thread (torch): (8,12,197,64) float32 by (0,2,1,3) (ViT-B, 4.6 MiB)
 * 39-44 / 55-58 (52-55) and 41-43 / 91-99 (89-98); (4,12,512,64) 40-45 /
 * 53-57 and 37-43 / 97-106 (94-103), dst 16 bytes into a line 31-34 /
 * 56-57 and 32-34 / 101; (8,12,512,64) (12 MiB) 44 / 40-44 (28-36) and
 * 43 / 57-67 (62-75); (4,16,1024,64) float16 (8 MiB) 43 / 41-44 and 41-42
 * / 67-69 (83-93); (16,4096,16) float32 by (1,0,2) (4 MiB) 37-38 / 40 and
 * 38-39 / 65-70 (48-62).  Lost: (2,8,4096,32) float16 (4 MiB, rows of 64
 * bytes) 40-42 / 30-38 (22-26) at 1 thread, 40 / 55-67 at 2.  16 MiB and
 * more level, as they stream at either threshold: (16,12,512,64) float32,
 * (8,16,1024,64) float16, (512,1024,32) uint8, (1024,1024,16) float32. */
static bool pl_group_streams(const _pylayout_kernels *k, int n, const int64_t *ss, const int64_t *ds, int64_t e,
                             int64_t g, const char *dst, int64_t bytes, int nt)
{
    if (n < 3 || ss[n - 1] != e || ds[n - 1] != e || g <= 16 || g % 16 != 0 || k->group_stream == NULL ||
        bytes < pl_max(1, nt) * pl_stream_min_wide_bytes() || (uintptr_t)dst % 16 != 0 || ds[n - 2] != g)
        return false;
    int b; /* the folded copy's: a transpose whose groups are contiguous along b in src */
    return pl_choose_kind(n - 1, ss, ds, g, &b) == PL_TRANSPOSE && ss[b] == g && ds[b] % 16 == 0;
}

/* 1- and 2-byte transposes whose src or dst rows are a multiple of
 * PL_CROWDED_ROW_BYTES apart stream from this many bytes a thread, up to
 * PL_STREAM_MIN_BYTES: from 1.5 MiB at 1 thread and 3 MiB at 2, and where
 * dst rows are a page apart from 1.5 MiB at any thread count.  Their
 * cached tiles' rows crowd a few L1 sets, and from L3 they ran at a
 * quarter to a half of memcpy.  Measured on the 2-core Intel Xeon (AVX-512,
 * AMX; 2 MiB L2) dev VM, src (R, C) read transposed, copy_into in a loop,
 * best of 7 batches, us, cached / streamed (/tmp scripts, a throwaway
 * switch), torch tensors and NumPy arrays 16 bytes into a line:
 *   1 thread, uint8 4096 x 384 (1.5 MiB) 444 / 111, 2048 x 768 251 / 104
 *   and 307 / 127, 768 x 2048 275 / 91 and 281 / 144; float16 1024 x 768
 *   246 / 148 and 271 / 166; uint8 2048 x 1024 (2 MiB) 431 / 149-170 and
 *   424 / 182, 4096 x 512 612 / 170-186 and 587 / 198, 512 x 4096 356 /
 *   164-185 and 360 / 254; float16 1024 x 1024 382 / 219-227 and 374 /
 *   219, 512 x 2048 340 / 238-242 and 343 / 250;
 *   2 threads, uint8 2048 x 1536 (3 MiB) 300 / 137 and 328 / 183; float16
 *   2048 x 768 320 / 172 and 369 / 187.
 * Below 3 MiB on 2 threads they came out mixed (NumPy's uint8 512 x 4096
 * 166 / 267, float16 1024 x 1024 126-151 / 163-167, 1024 x 768 86 / 135;
 * torch's uint8 2048 x 1024 164 / 77), except where dst rows are a
 * multiple of a page apart, which stream from 1.5 MiB at any thread count:
 * 2 threads, uint8 4096 x 384 209 / 62 and 219 / 86, 4096 x 512 314 / 73
 * and 302 / 104; float16 2048 x 512 180 / 108 and 187 / 114.  At 1 MiB on
 * 1 thread they came out mixed too (uint8 1024 x 1024 103 / 112, 2048 x
 * 512 120 / 65). */
#define PL_STREAM_MIN_CROWDED_NARROW_BYTES ((int64_t)1536 * 1024)

/* 4- and 8-byte transposes of crowded rows (not `wide`: see
 * PL_STREAM_MIN_WIDE_BYTES) stream past this many bytes a thread, up to
 * PL_STREAM_MIN_BYTES: so at 1 thread past 2 MiB, where the wrapped tiles
 * stop (PL_WRAP_MAX_CROWDED_BYTES) and the split's 4 x 4 blocks read and
 * write a few bytes of a line at a time from L3.  Same VM and scripts as
 * above, 1 thread, us, cached / streamed, torch tensors: float32 1536 x 512
 * (3 MiB) 457 / 363, 512 x 1536 440 / 365, 2048 x 384 555 / 375, 384 x
 * 2048 415 / 364, 4096 x 160 386 / 288; float64 1024 x 384 500 / 324, 384 x
 * 1024 450 / 341, 768 x 512 510 / 322; NumPy arrays 16 bytes into a line,
 * float32 1536 x 512 409 / 358, 512 x 1536 386 / 376, 2048 x 384 358 / 364,
 * float64 1024 x 384 400 / 306.  At 2 threads (4 MiB, as before) 2.5 MiB
 * copies came out mixed (pylayout_copy, float32 2560 x 256 105-110 /
 * 127-129, 1024 x 768 218-240 / 161). */
#define PL_STREAM_MAX_CROWDED_CACHED_BYTES ((int64_t)2 * 1024 * 1024)

/* The size from which a transpose of `is`-byte elements whose dst rows are
 * dsb bytes apart streams, on nt threads. */
static int64_t pl_stream_min_bytes(int64_t is, int64_t dsb, bool wide, bool crowded, int nt)
{
    if (wide)
        return pl_stream_min_wide_bytes();
    if ((is == 4 || is == 8) && crowded)
        return pl_min(PL_STREAM_MIN_BYTES, pl_max(1, nt) * PL_STREAM_MAX_CROWDED_CACHED_BYTES + 1);
    if (is <= 2 && crowded) {
        const int64_t per = dsb % PL_PAGE_BYTES == 0 ? 1 : pl_max(1, nt);
        return pl_min(PL_STREAM_MIN_BYTES, per * PL_STREAM_MIN_CROWDED_NARROW_BYTES);
    }
    return PL_STREAM_MIN_BYTES;
}

/* Tile edge (elements) for cached-store transposes: 64 x 64 floats, 32 x 32
 * doubles, 8-16 KiB per side.  Power-of-two leading dimensions are the
 * float tile kernels' business (PL_DEFINE_TILE_STRIPS in kernels.h: strips
 * of 8-32 dst rows inside the tile).  Float32 n x n on the 2-core Zen 5 dev
 * VM, 1 thread, AVX-512 16x16 blocks, us, 32-tiles / 64-tiles in 32-row
 * strips: n=128 1.0 / 1.0, n=256 4.0 / 4.1, n=362 10.2-10.7 / 8.3-8.8,
 * n=512 43-45 / 42, n=724 41-44 / 40; AVX2 8x8 blocks, 32 / 64 whole:
 * n=128 1.55 / 1.36, n=362 13.1-13.5 / 11.2, n=724 54-55 / 45-47. */
static int64_t pl_transpose_tile(size_t itemsize)
{
    switch (itemsize) {
    case 1: return 128;
    case 2: return 64;
    case 4: return 64;
    case 8: return 32;
    default: return 16;
    }
}

/* Cached-store transposes of 4-byte elements or wider whose dst rows are
 * at least this long and all start the same whole number of elements into
 * a line (NumPy's buffers: 16 or 32 bytes in) copy those first columns on
 * their own, then the rest with every tile store on a line: a 64-byte store
 * that straddles two lines costs Intel cores about twice an aligned one.
 * Measured on the 2-core Xeon (Sapphire Rapids class, AVX-512) dev VM,
 * n x n transposed into dst, src and dst 16 bytes into a line, 1 thread,
 * best of 7, us, whole / split (/tmp harness, copy_into in a loop):
 * float32 n=128 3.0 / 2.8, 256 13.1 / 9.3, 384 25.0 / 18.4, 512 94 / 73;
 * float64 n=96 3.6 / 3.0, 256 27.1 / 21.4, 512 422 / 343; the AVX2 path
 * float32 n=384 36.8 / 21.1.  Shorter rows lost (float32 n=64 0.60 / 0.80:
 * the head is a quarter of the row), and so did 1- and 2-byte elements at
 * 2 threads (uint8 1024 x 1024 49 / 58 us: their head, up to 63 columns,
 * runs on one thread before the rest). */
#define PL_ALIGN_SPLIT_ROW_BYTES 512

/* Cached-store transposes into dense dst rows of 512 B - 4 KiB that all
 * start the same whole number of elements before a line (NumPy's buffers:
 * 16 bytes into one) take the tables' wrapped tiles (tile_wrap in
 * kernels.h) instead of the split above: each dst line written once, whole
 * and aligned, and no column copy of its own.  Up to PL_WRAP_MAX_BYTES, or
 * beyond where src or dst rows are a multiple of 2 KiB apart (the tiles'
 * strips, PL_CROWDED_ROW_BYTES).  Units are whole dst rows, at most
 * PL_WRAP_ROWS of them, and at least 4 units a thread when the copy may
 * go parallel.  Session 18 took 16 a thread, when a copy of a run still
 * ran its first chunk alone before the team came in (a quarter of the copy
 * with 4 a thread: 512 x 512 float32 took 22 or 42 us from run to run).
 * Since a run's copies hand the team the whole copy at once (threads.c,
 * pl_run_team_chunks), fewer, longer units win: 2 threads, float32, units
 * of 16 / 32 / 64 / 128 rows alternating batch by batch in one process
 * (/tmp harness, a throwaway switch), median of 30 batches of 40, us a
 * call: 512 x 512 on lines 18.7 / 18.0 / 17.4 / 17.7 and 19.6 / 18.8 /
 * 17.7 / 16.7, 16 bytes into a line 20.3 / 20.0 / 19.5 / 19.3; dst of
 * 1024 rows of 256 elements 17.0 / 17.1 / 16.8 / 17.1, of 256 rows of
 * 1024 23.0 / 22.8 / 23.2 / 52.8 (one unit a thread: the team could not
 * share it).
 * With one busy process, where such copies mostly run on their caller
 * alone, 512 x 512: 72.5 / 65.4 / 66.0 / 66.6 and 53.8 / 50.9 / 50.2 /
 * 49.3 (at 1 thread 51.6-52.1).
 * Measured on the 2-core Xeon (Sapphire Rapids class) dev VM, src (R, C)
 * read transposed into dst rows of R elements, src and dst 16 bytes into a
 * line, best of 7, us, wrapped / split, in one process alternating (/tmp
 * harness calling pylayout_copy, a throwaway switch between the two):
 *   1 thread, float32: R x C = 128 x 128 2.10 / 2.49-2.54, 144 x 144 2.18 /
 *   2.43, 256 x 256 8.0 / 9.1, 512 x 512 48.5-49.0 / 54.1-55.9, 1024 x 256
 *   56.5-58.6 / 75-76, 160 x 2048 87-89 / 115-118; float64: 128 x 128 4.1 /
 *   5.1, 256 x 256 16.8-16.9 / 21.1-21.2, 512 x 512 180-183 / 304-312,
 *   512 x 1000 474-485 / 644-646;
 *   2 threads, float32: 512 x 512 22-25 / 34-37, 1024 x 256 28 / 46-49,
 *   512 x 1024 87-94 / 121-127; float64 512 x 512 91-94 / 115-117;
 *   AVX2, 1 thread: float32 512 x 512 54.6 / 66.4, float64 128 x 128 5.1 /
 *   5.1.
 * Past 1 MiB with rows not crowded, the wrapped tiles lost at 2 threads
 * (float32 768 x 768 112-126 / 91-99, 896 x 896 195-208 / 155-170, 640 x
 * 640 44-47 / 41-43): their units of 16 rows read a line of every src row
 * in turn, where the split's 64 x 64 tiles read four lines each of 64 rows.
 * Rows longer than 4 KiB lost at 2 threads too (float32 8192 x 64, rows of
 * 32 KiB: 148-191 / 82-91); rows of 4 KiB came out level (1024 x 1000:
 * 0.96x at 1 thread, 1.04-1.09x at 2).
 *
 * Dense rows that start on a line (torch's buffers) take the same tiles,
 * with no wrap, where src or dst rows are crowded, up to
 * PL_WRAP_MAX_CROWDED_BYTES (PL_WRAP_MAX_BYTES at first, see below): their
 * passes of 512 bytes of 128 rows beat the 64 x 64 tiles' strips
 * there.  Same harness, src and dst on lines, us, wrapped / tiles: 1
 * thread, float32 512 x 512 39-45 / 44-50, 1024 x 256 49-52 / 69-71, 1024
 * x 128 18.2-18.6 / 25.7-25.9; float64 256 x 256 13.9-14.0 / 18.2-18.3;
 * 2 threads, float32 1024 x 256 26-27 / 39-40, float64 256 x 512 18.9-19.6
 * / 24.2-24.6.  Rows not crowded, and copies past 1 MiB, gained nothing
 * or lost (1024 x 1000 float32, 4 MiB: 0.93x).
 *
 * Since the wrapped tiles prefetch their next dst lines (session 42,
 * copy_x86.c), the AVX-512 ones (tile_wrap_on_lines) also take rows on a
 * line that are not crowded, up to PL_WRAP_MAX_BYTES.  Same dev VM, /tmp
 * harness calling pylayout_copy, best of 9 batches, three alternated
 * runs, us, tiles / wrapped, 1 thread: float32 128 x 128 1.79-1.91 /
 * 1.47-1.50, 256 x 256 7.4-7.8 / 6.6-7.0, 320 x 320 10.2-10.5 / 9.6-9.8;
 * float64 64 x 64 1.01-1.12 / 0.61-0.64, 128 x 128 4.2-4.4 / 2.8-3.0, 192 x
 * 192 8.8-9.2 / 6.0-6.3, 384 x 128 12.8-12.9 / 8.8-9.3; 2 threads: float32
 * 128 x 128 1.8-1.9 / 1.5-1.6, 384 x 384 9.8-10.0 / 9.1-9.4, 768 x 256
 * 12.8-14.1 / 11.5-12.5; float64 128 x 128 4.3-4.6 / 2.8-3.0, 384 x 128
 * 7.9-8.2 / 5.7-5.9; the rest level (float32 128 x 512, 256 x 512, float64
 * 128 x 256).  In the same bench (python -m pylayout bench --only in-cache,
 * torch operands, 2 threads, / memcpy at 2 threads) 256 x 256 float32 went
 * from 0.65-0.69 to 0.69-0.72.  AVX2's 8 x 8 blocks lost there (float32
 * 128 x 128 1.84-1.90 / 2.04-2.08, 256 x 256 7.4-7.5 / 8.9, 384 x 384
 * 16.3-17.5 / 20.1-20.7) and keep the tiles.
 *
 * Crowded rows on lines keep the wrapped tiles up to
 * PL_WRAP_MAX_CROWDED_BYTES: past 1 MiB the split's tiles of such rows go
 * to 4 x 4 blocks (copy_x86.c, pl_tile4_avx2), which at 1-2 MiB read src
 * and dst from L3 a few bytes of a line at a time.  Measured on the 2-core
 * Intel Xeon (AVX-512, AMX; 2 MiB L2) dev VM, torch tensors, copy_into,
 * best of 7 batches, two fresh processes per build alternated (/tmp
 * script), us, tiles / wrapped: 1 thread, float32 1024 x 512 314-347 /
 * 192-199, 512 x 1024 235-260 / 166-169, 256 x 2048 240-243 / 140-141;
 * float64 512 x 512 273-297 / 156-164, 256 x 1024 204-205 / 137-149, 384 x
 * 512 158-161 / 90-94; 2 threads, float32 1024 x 512 125-136 / 85-87,
 * float64 512 x 512 118-121 / 87-89; AVX2 (PYLAYOUT_SIMD=avx2), 1 thread,
 * float32 1024 x 512 341-356 / 193-205, float64 512 x 512 289-314 /
 * 200-206.  At 3 MiB they came out mixed (float32 1536 x 512 level, 512 x
 * 1536 ahead at 1 thread and 8% behind at 2; pylayout_copy, /tmp
 * harness), and from 4 MiB such copies stream.  Crowded dst rows of up to
 * PL_WRAP_MAX_CROWDED_ROW_BYTES take them too, on a line or not: same
 * script, float32 with dst rows of 2048 elements (8 KiB), 1 thread, src
 * rows of 256 330-339 / 221-246, of 128 82-93 / 68-73, of 64 32 / 23-24,
 * of 200 219-225 / 130-155; 2 threads, 256 132-148 / 111-114, 128 43-47 /
 * 28-31; float64 rows of 1024, 1 thread, 256 291-311 / 182-196, 128 73-75
 * / 54-62; 2 threads, 256 121-122 / 94-95, 128 32-33 / 28-30.  Dst rows of
 * 16 KiB gained at 1 thread and came out level at 2 (float32 4096 x 128 at
 * 2 threads 116-126 / 123-126), dst rows of 4-8 KiB not crowded mixed
 * (float32 rows of 1520 elements 16 bytes into a line, src rows of 512: 1
 * thread 376-404 / 279-296, 2 threads 182-185 / 207-229).
 *
 * Dense dst rows that are not a whole number of lines long (float32 rows
 * of 260 elements: each row starts at its own place in a line) take them
 * too, up to PL_WRAP_MAX_BYTES, and with src rows a multiple of 2 KiB
 * apart up to PL_WRAP_MAX_CROWDED_BYTES where the table's wrapped tiles
 * also take rows on a line (AVX-512): their stores straddle lines, but the
 * passes and the prefetch of the next block's dst lines still beat the
 * plain tiles' 32 x 32 groups, which took them until session 43.  2-core
 * Xeon dev VM, tools/bench_incache 9 (float32, src R x C read transposed
 * into dst rows of R elements), three alternated runs of the build before
 * and this one, us, before / after:
 *   AVX-512, 1 thread, on a line: 130 x 130 2.59-2.67 / 2.09-2.16, 129 x
 *   300 5.92-6.07 / 4.73-4.87, 260 x 496 17.6-18.2 / 13.5-14.1, 200 x 1000
 *   27.9-29.9 / 23.1-23.7, 1000 x 200 26.5-27.5 / 19.8-20.5, 500 x 500
 *   42.0-45.2 / 29.6-32.9, src rows of 512: 260 x 512 19.6-20.4 /
 *   16.0-17.6, 1000 x 512 263-268 / 132-151; 16 bytes into a line: 260 x
 *   496 18.2-18.8 / 16.0-16.2, 1000 x 200 30.3-38.2 / 23.2-23.9;
 *   AVX-512, 2 threads: 500 x 500 27.2-27.7 / 18.8-19.6, 1000 x 200
 *   20.4-21.8 / 14.0-14.3, 200 x 1000 17.1-19.9 / 15.7-16.9, 1000 x 512
 *   103-106 / 84-91;
 *   AVX2 (PYLAYOUT_SIMD=avx2), 1 thread: 130 x 130 3.33-3.47 / 2.20-2.37,
 *   500 x 500 40.9-42.8 / 30.0-32.3; 2 threads, 16 bytes into a line:
 *   500 x 500 26.4-27.6 / 18.8-20.2, 1000 x 200 25.7-26.6 / 15.5-15.8;
 *   float64 (NumPy operands on a line, python, best of 9 batches), 1
 *   thread: 130 x 300 12.1-12.3 / 8.8-9.4, 300 x 130 11.7-12.3 / 7.4-7.8,
 *   500 x 200 31-38 / 21-23.
 * AVX2 lost at 2 threads past 1 MiB (src rows of 512, 1000 x 512: 89-99 /
 * 106-120), hence its 1 MiB. */
#define PL_WRAP_MAX_ROW_BYTES 4096
#define PL_WRAP_ROWS 128
#define PL_WRAP_MAX_BYTES ((int64_t)1024 * 1024)
#define PL_WRAP_MAX_CROWDED_BYTES ((int64_t)2 * 1024 * 1024)
#define PL_WRAP_MAX_CROWDED_ROW_BYTES 8192

/* Except where src rows are a multiple of a page apart and start off
 * their lines (NumPy's buffers): each of a wrapped pass's 64-byte loads
 * then spans two lines, and all of a column's lines, 128 rows of them,
 * fall in the same two L1 sets; the split's tiles (64 rows) win.  With src
 * on its lines (torch's buffers) the two come out level or the wrapped
 * tiles ahead.  Measured on the 2-core Zen 5 dev VM, src rows R x C
 * transposed into dense dst rows, src / dst offsets into a line in bytes,
 * best of 7 batches of copy_into, wrapped / split, us, builds alternated
 * in fresh processes (/tmp script):
 *   AVX-512, 1 thread: float32 128 x 1024 (16 / 16) 28 / 16, 256 x 1024
 *   (16 / 16) 57-58 / 35-46, (16 / 0) 58 / 35-44, 512 x 1024 (16 / 16)
 *   120 / 90, 128 x 2048 (16 / 16) 59-60 / 34; float64 256 x 512 (16 /
 *   16) 58-60 / 36-37, 128 x 1024 58 / 31, 64 x 512 12.3-12.5 / 7.0;
 *   but with src on a line, float32 256 x 1024 (0 / 16) 32-33 / 33-42,
 *   (0 / 0) 31-32 / 33-35, float64 256 x 512 (0 / 16) 29-30 / 29-34;
 *   AVX-512, 2 threads: float32 128 x 1024 (16 / 16) 15 / 12, 256 x 1024
 *   38-40 / 23, 512 x 1024 75-76 / 54-56, 128 x 2048 31-35 / 22; float64
 *   256 x 512 31 / 22.5, 128 x 1024 33-38 / 20;
 *   AVX2 (PYLAYOUT_SIMD=avx2), 1 / 2 threads, (16 / 16): float32 128 x
 *   1024 49 / 16 and 24 / 12, 256 x 1024 102 / 43 and 64-67 / 23; float64
 *   256 x 512 99-101 / 37 and 63-66 / 23-24.
 * Dst rows a page apart (4 KiB, the longest the wrapped tiles take) came
 * out mixed, so they keep the wrapped tiles: float32 1024 x 128 25 / 17 at
 * 1 thread but level at 2, float64 512 x 64 5.4 / 6.5 and 4.1 / 6.9. */
static bool pl_src_lines_crowded(const pl_plan *p)
{
    return p->ssa % PL_PAGE_BYTES == 0 && (uintptr_t)p->src % PL_LINE_BYTES != 0;
}

/* TRANSPOSE units: tile sizes, the table's tile kernel when both unit
 * strides are one element, and a streaming variant for large copies.
 * Returns the bytes from dst to its next line when the copy should first
 * be split there, to stream the rest or to store it on whole lines (see
 * PL_ALIGN_SPLIT_ROW_BYTES and pl_copy_canonical), else 0. */
static int64_t pl_choose_transpose(pl_plan *p, const _pylayout_kernels *k, int a, const int64_t *ds,
                                   int64_t stream_bytes, int nt)
{
    const int64_t is = (int64_t)p->itemsize;
    const int64_t t = pl_transpose_tile(p->itemsize);
    p->ta = pl_min(p->na, t);
    p->tb = pl_min(p->nb, pl_max(t, t * t / p->ta)); /* thin a: longer b strips */
    const int lg = _pl_size_index(p->itemsize);
    if (is > 16) { /* groups, which pl_group_streams sent here */
        if (k->group_stream == NULL || p->dsa != is || p->ssb != is)
            return 0; /* the portable 2-D loop */
        p->group_stream = k->group_stream;
        p->fence = k->fence;
        const int64_t r = pl_group_rows(is);
        p->ta = pl_min(p->na, pl_max(r, pl_ceil_div(PL_STREAM_RUN_BYTES, is * r) * r));
        p->tb = pl_min(p->nb, pl_max(1, PL_CHUNK_MAX_BYTES / (p->ta * is))); /* units of a chunk at most */
        return 0;
    }
    if (lg < 0 || p->dsa != is || p->ssb != is)
        return 0; /* the portable 2-D loop */
    p->tile = k->tile[lg];

    bool lines = true; /* every dst row starts at the same offset in its line */
    for (int d = 0; d < a; d++)
        lines &= ds[d] % PL_LINE_BYTES == 0;
    const int64_t head = (int64_t)((PL_LINE_BYTES - (uintptr_t)p->dst % PL_LINE_BYTES) % PL_LINE_BYTES);
    const bool crowded = p->ssa % PL_CROWDED_ROW_BYTES == 0 || p->dsb % PL_CROWDED_ROW_BYTES == 0;
    const bool wide = lines && (is == 4 || is == 8) && !crowded; /* see PL_STREAM_MIN_WIDE_BYTES */
    const bool large = stream_bytes >= pl_stream_min_bytes(is, p->dsb, wide, crowded, nt); /* whole copy */
    const bool line_rows = large && k->tile_stream[lg] != NULL && lines && p->na * is >= PL_LINE_BYTES;
    /* the wrapped tiles: see PL_WRAP_MAX_ROW_BYTES */
    const bool dense_rows = p->dsb == p->na * is && p->dsb >= PL_ALIGN_SPLIT_ROW_BYTES &&
                            p->dsb <= (crowded ? PL_WRAP_MAX_CROWDED_ROW_BYTES : PL_WRAP_MAX_ROW_BYTES);
    const bool small = stream_bytes <= (crowded ? PL_WRAP_MAX_CROWDED_BYTES : PL_WRAP_MAX_BYTES);
    const bool on_lines = p->dsb % PL_LINE_BYTES == 0; /* off them: every row at its own place in a line */
    if (!large && dense_rows && head % is == 0 && k->tile_wrap[lg] != NULL && !pl_src_lines_crowded(p) &&
        (!on_lines  ? stream_bytes <= PL_WRAP_MAX_BYTES || (small && k->tile_wrap_on_lines[lg])
         : head != 0 ? small || crowded
                     : small && (crowded || k->tile_wrap_on_lines[lg]))) {
        /* units of whole rows, at least 4 a thread when the copy may go
         * parallel */
        const bool one = nt == 1 && k->tile_wrap_one[lg] != NULL; /* copy_x86.c, PL_DEFINE_WRAP_TILE_ONE */
        p->tile = one ? k->tile_wrap_one[lg] : k->tile_wrap[lg];
        p->tile_back = one ? k->tile_wrap_one_back[lg] : k->tile_wrap_back[lg];
        p->ta = p->na;
        const int64_t rows = nt > 1 ? p->nb / (4 * nt) : PL_WRAP_ROWS;
        p->tb = pl_min(p->nb, pl_max(16, pl_min(PL_WRAP_ROWS, rows) / 16 * 16));
        return 0;
    }
    /* Past the streaming threshold only where the rest of every row keeps
     * a stream run: rows of a line or so 16 bytes into one (np.asfortranarray
     * of (16,64,56,56), (32,32,32,32) or (64,256,14,14) float32: dst rows of
     * 64 bytes) left a head of 12 elements and a rest of 4 for the tiles,
     * and ran at half the speed of whole rows' cached tiles.  Dev VM (Zen
     * 5), 1 thread / 2, GB/s, NumPy operands, in one process alternating,
     * split / not: those three 1.6-2.5 / 4.0-4.2, 5.9-6.9 / 9.9-12.2,
     * 3.3-3.7 / 4.8-5.8, and 5.7-6.0 / 6.9-10.2, 6.7-9.2 / 14.7-23.6,
     * 6.9-7.1 / 13.9-14.9; float64 (16, 100000).T 13-14 / 26-32; rows of
     * 128-320 bytes level or better, longer ones unchanged. */
    const bool split = (line_rows && p->na * is - head >= PL_STREAM_RUN_BYTES) ||
                       (lines && is >= 4 && p->na * is >= PL_ALIGN_SPLIT_ROW_BYTES);
    if (split && head != 0 && head % is == 0)
        return head;
    if (line_rows && head == 0) {
        /* whole dst lines per step: tiles four lines along a, one page
         * of src along b */
        const bool runs = k->tile_stream_runs[lg] != NULL && pl_abs(p->dsb) > PL_STREAM_RUN_BYTES &&
                          stream_bytes <= pl_stream_runs_max_bytes();
        p->tile = runs ? k->tile_stream_runs[lg] : k->tile_stream[lg];
        p->fence = k->fence;
        const int64_t side = PL_STAGED_SIDE / is;
        if (k->tile_stream_staged[lg] != NULL && p->na >= side && p->nb >= side &&
            (crowded || stream_bytes >= _pylayout_l3_bytes())) {
            /* blocks staged through a heap buffer, walked down a, then
             * across (copy_x86.c, pl_stile1_staged_avx2): units of up to
             * PL_STAGED_UNIT_BLOCKS whole blocks, at least 4 a thread, as
             * many along a as there are.  Only where rows are crowded (the
             * tiles' src lines then share an L1 set) or the copy is past
             * L3: uint8 read transposed from (320, 20000) and (20032, 320),
             * 6.4 MB, ran at 8-10 GB/s staged against 11.6-13.6 (1 thread)
             * and 13.3 against 20 (2 threads); past L3 and crowded ones
             * 1.3-2.7x faster (docs/benchmarks.md, session 63). */
            p->tile_staged = k->tile_stream_staged[lg];
            const int64_t blocks = (p->na / side) * (p->nb / side);
            const int64_t per = pl_max(1, pl_min(PL_STAGED_UNIT_BLOCKS, blocks / (4 * nt)));
            p->ta = pl_min(p->na, per * side);
            p->tb = pl_min(p->nb, pl_max(1, per / (p->ta / side)) * side);
            return 0;
        }
        /* runs only where dst rows lie apart: rows that are one run long
         * and adjacent (channels_last_3d with C = 64 floats) are already
         * written sequentially line by line, and measured slower as runs
         * (NCDHW (1,64,32,56,56) float32, 1 thread: 21 -> 17 GB/s) */
        p->ta = pl_max(1, (pl_abs(p->dsb) > PL_STREAM_RUN_BYTES ? PL_STREAM_RUN_BYTES : PL_LINE_BYTES) / is);
        p->tb = pl_min(p->nb, PL_PAGE_BYTES / is);
    } else if (large && !lines && k->tile_runs[lg] != NULL && p->na * is >= PL_STREAM_RUN_BYTES) {
        /* dst rows off their lines: 256-byte runs of each row, built in
         * L1 with their whole lines streamed (4 and 8 bytes on AVX-512:
         * see pl_stile4_avx512_off) or cached (1 byte) */
        p->tile = k->tile_runs[lg];
        p->fence = k->fence;
        p->ta = PL_STREAM_RUN_BYTES / is;
        p->tb = pl_min(p->nb, PL_RUNS_DST_ROWS);
    } else if (large && !lines && is >= 2 && is <= 8 && p->tile != NULL && k->stream_copy != NULL &&
               (p->na * is >= PL_STREAM_RUN_BYTES || p->na >= PL_RUNS_MIN_SRC_ROWS)) {
        /* Transposes past the streaming threshold whose dst rows are off
         * their lines (not a whole number of lines apart), with no tile_runs
         * kernel for their element size (2 bytes; 4 and 8 below AVX-512),
         * take units of 256-byte dst runs by a page of src: each unit's runs
         * are built in an L1 buffer by the cached tile, 64 at a time, then
         * streamed row by row (stream_copy: whole lines streamed, the
         * partial first and last stored).  Torch tensors (n, n) read
         * transposed, pl.copy_into, best of 5, us, the cached 64 x 64 tiles
         * / these, two rounds, on the 2-core Intel Xeon dev VM:
         * PYLAYOUT_SIMD=avx2 float32 n=3000 11733-11952 / 8007-8691, 2
         * threads 3073-4111 / 2365-2405, n=2500 3670-7094 / 3001-3231;
         * float64 n=2500 19947-20191 / 11911-12267; bfloat16 n=3000
         * 3718-3888 / 2251-2354; sse2 float32 n=3000 14230 / 8830; avx512
         * bfloat16 n=3000 3634-3710 / 2857-3203, float16 1500 x 3000
         * 1697-1738 / 1491-1508.  Runs of 512 bytes were level.  Not for
         * 1- or 16-byte elements, which it made slower (uint8 3001 x 3000
         * on AVX2 1223 / 1419; complex128 n=1501 7693-8511 / 9729-10070);
         * not in place of the AVX-512 float kernels (float32 n=3000: 9-10
         * ms this way, 6.4 there).  Dst rows shorter than a run take
         * them too, a whole row per run, where src has at least
         * PL_RUNS_MIN_SRC_ROWS rows (see there). */
        p->stream_out = k->stream_copy;
        p->stream_runs = true;
        p->fence = k->fence;
        p->ta = pl_min(p->na, PL_STREAM_RUN_BYTES / is);
        p->tb = pl_min(p->nb, PL_PAGE_BYTES / is);
    } else if (large && k->stream_copy != NULL && p->ta == p->na && p->dsb == p->na * is &&
               p->ta * p->tb * is <= PL_STREAM_BUFFER_BYTES) {
        p->stream_out = k->stream_copy;
        p->fence = k->fence;
    }
    return 0;
}

/* A copy through pl_run_planes: groups of P elements, and where a side
 * holds a group's elements apart, their step there (0: packed). */
typedef struct pl_groups {
    int P;
    int64_t ssq, dsq;
} pl_groups;

/* The copy of g-byte groups left when dim q is taken out of the n
 * canonical dims into the groups: rshape, rss and rds get its n - 1 dims,
 * *b the dim its tiles take along src.  Returns whether it is a transpose
 * whose dim b steps src by sb bytes, or back by a whole group (sb = g: the
 * tiles then run with b backwards in both, see pl_copy_canonical). */
static bool pl_group_copy(int n, const int64_t *shape, const int64_t *ss, const int64_t *ds, int q, int64_t sb,
                          int64_t g, int64_t *rshape, int64_t *rss, int64_t *rds, int *b)
{
    int m = 0;
    for (int k = 0; k < n; k++)
        if (k != q) {
            rshape[m] = shape[k];
            rss[m] = ss[k];
            rds[m] = ds[k];
            m++;
        }
    return pl_choose_kind(n - 1, rss, rds, g, b) == PL_TRANSPOSE && (rss[*b] == sb || (sb == g && rss[*b] == -g));
}

/* Whether a copy of groups of P elements of e bytes, packed in one tensor
 * only, goes through planes, its tiles na x nb groups.  Through the L1
 * buffers, not where the TRANSPOSE copy's tiles, which take the short dim
 * against the other tensor's contiguous one, already read or write whole
 * SIMD blocks of it: 8 elements of 2 bytes or more (float16 (64,64,64,8)
 * by (0,3,2,1): 20 GB/s against 13 through planes), or groups of half a
 * line or more (float32 (64,64,64,8) by (2,0,3,1), float64 (8,1024,1024)
 * by (2,1,0): 20 and 10 against 6-9 and 5-8).  Nor where the tiles would
 * have a short side (fewer than PL_THIN_MIN_LONG groups): each plane would
 * be a thin tile (float16 (8,3,512,512) by (2,3,1,0): 21 GB/s against 3).
 *
 * Where the kernels transpose the groups in registers instead
 * (in_registers: tile_split or tile_zip for e-byte elements), groups of 4-
 * and 8-byte elements under a line go through planes too: those tiles
 * read and write whole lines of every row, where the TRANSPOSE copy's took
 * a few bytes of each short src or dst row a unit.  Measured on the 2-core
 * Zen 5 dev VM, torch tensors, copy_into in a loop, best of 7, GB/s, 1
 * thread, two rounds, TRANSPOSE -> in registers, by (2,1,0):
 *   float32 (7,1024,1024) 2.5-2.6 -> 10.0-10.5, (1024,1024,7) 2.0 ->
 *   9.3-9.5, (8,1024,1024) 3.7-3.9 -> 11.3-11.9, (1024,1024,8) 5.7-5.9 ->
 *   9.6-9.9, (7,512,512) 3.9 -> 16.5-26.3, (80,96,7) 9.2-10.7 ->
 *   46.5-48.7; float64 (4,1024,1024) 5.3-5.4 -> 14.6-15.0,
 *   (1024,1024,4) 6.3-6.6 -> 11.5-11.7, (6,512,512) 4.3-4.4 -> 10.8-18.0,
 *   (80,96,6) 31 -> 49-54;
 * and 2 threads, float32 (7,1024,1024) 4.9 -> 15.9-18.7, float64
 * (4,1024,1024) 8.5-10.0 -> 21.6.  Not groups of 8 float64 (a whole line,
 * which the TRANSPOSE copy's tiles move as one element): 10 GB/s either
 * way at (8,1024,1024), and slower in registers on AVX2 ((8,512,512) 14
 * against 10) and at 2 threads. */
#define PL_APART_MAX_GROUP_BYTES 24

/* Whether groups of P elements of e bytes go through planes in registers
 * (in_registers: the table has the tile for e bytes): 4- and 8-byte
 * elements, groups under a line.  The one statement of that limit, for
 * pl_apart_wins and pl_planes_max_p. */
static bool pl_in_registers(int64_t P, int64_t e, bool in_registers)
{
    return in_registers && e >= 4 && P * e < PL_LINE_BYTES;
}

static bool pl_apart_wins(int64_t P, int64_t e, int64_t na, int64_t nb, bool in_registers)
{
    if (na < PL_THIN_MIN_LONG || nb < PL_THIN_MIN_LONG)
        return false;
    if (pl_in_registers(P, e, in_registers))
        return true;
    return P * e <= PL_APART_MAX_GROUP_BYTES && (P < 8 || e == 1);
}

/* The most elements of e bytes a group through planes holds: the thin
 * kernels' PL_THIN_MAX_P, or in registers (in_registers, as in
 * pl_apart_wins) up to a line less one element: 9 to 15 float32, whose
 * copies were tile transposes.  Measured as at pl_apart_wins, by (2,1,0),
 * GB/s, 1 thread, two rounds, then 2 threads, TRANSPOSE -> in registers:
 *   float32 (9,1024,1024) 3.4-3.7 -> 9.0-9.2 and 6.7 -> 11.6,
 *   (1024,1024,9) 6.0-6.3 -> 9.1-9.4 and 12.5 -> 15.4, (12,512,512)
 *   5.6-5.8 -> 12.1-18.7 and 11.2 -> 31.3, (512,512,12) 5.3-5.7 ->
 *   13.9-14.8 and 10.6 -> 28.4, (15,1024,1024) 3.5-3.6 -> 8.8-9.0 and 6.8
 *   -> 12.9, (80,96,15) 33-35 -> 50 and 50.5 -> 52.1;
 * but (15,96,80), a 460 KB copy in cache, 41-42 -> 40-42 and 62 -> 43
 * (AVX2 45 -> 35).  Groups of 16 (a whole line) stay tile transposes. */
static int64_t pl_planes_max_p(int64_t e, bool in_registers)
{
    int64_t P = PL_THIN_MAX_P;
    while (pl_in_registers(P + 1, e, in_registers))
        P++;
    return P;
}

/* Group gathers (pl_choose_rows) for rows that fill at least this many
 * bytes of dst: building the kernel's controls costs about as much as
 * copying that many bytes a row at a time. */
#define PL_GG_MIN_BYTES 256

/* Whether groups of g bytes packed in both tensors, transposed between
 * na groups along dst's rows and nb along which src holds them together,
 * copy faster as rows of groups than through planes: where nb is short
 * and na is not (the planes' tiles would be nb groups wide), and each
 * group is one move of 4 bytes or more (pl_copy_small_row) or the rows
 * take a group gather (step: src bytes from one group of a dst row to the
 * next).  7 x 7 feature maps to (N, H, C, W), (16,512,7,7) by (0,2,1,3),
 * went through planes at 0.4-0.6x torch.  On the 2-core Zen 5 dev VM, 1
 * thread, copy_into of torch tensors, GB/s, planes / rows (torch):
 * (16,512,7,7) by (0,2,1,3) uint8 2.1 / 7.4 (3.3), float16 3.1 / 15.8
 * (6.6), float32 5.9 / 23.3 (15.5), float64 17.1 / 33.2 (28.6); float32
 * (4096,64,3,3) by (0,2,1,3) 4.1 / 25.6 (8.3); (2,1000,15,6) by (0,2,1,3)
 * float32 14.2 / 22.4; uint8 (30000,2,3) by (1,0,2) 5.9 / 33.3 (a group
 * gather).  Not 3-byte groups moved one by one ((4096,64,3,3) uint8 6.3 /
 * 2.2), nor a short na ((4096,3,64,3) float16 11.5 / 2.1). */
static bool pl_short_side_rows(const _pylayout_kernels *k, int64_t g, int64_t na, int64_t nb, int64_t step)
{
    if (nb >= PL_THIN_MIN_LONG || na < PL_THIN_MIN_LONG)
        return false;
    if (g >= 4)
        return true;
    _pylayout_group_gather t;
    return k->group_gather != NULL && na * g >= PL_GG_MIN_BYTES && k->group_gather(&t, g, step);
}

/* Transposes of short dims (2 to PL_THIN_MAX_P elements) that run through
 * planes (pl_run_planes); fills *pg and the copy of groups left (n - 1
 * dims) and returns whether.  Three cases:
 *   - the last dim, of 3 to 8 elements, contiguous in both tensors, and no
 *     wider element holds it: an RGB image's pixels, (H,W,3) by (1,0,2) (a
 *     rotation or a transpose of an HWC image), in any dtype; complex
 *     numbers of 3-plane data.  The ROWS copy moved one group at a time
 *     from src rows far apart (uint8 RGB 2048 x 2048: 1.4 GB/s);
 *   - src's contiguous dim short and dst's another (ssq 0, dsq its dst
 *     step): NumPy's a.T of an (H,W,C) image, (1024,1024,4) float32 by
 *     (2,1,0);
 *   - dst's contiguous dim short and src's another (dsq 0): its inverse,
 *     a CHW image into WHC.
 * The TRANSPOSE copy tiled the short dim against dst's, a few bytes of
 * each src row a unit, and came back to the rest of those lines after
 * the whole tile row (float32 (1024,1024,4) by (2,1,0): 2.0 GB/s, uint8
 * (4,1024,1024) by (2,1,0): 0.2).  Each unit instead goes through L1
 * buffers: src rows split into planes (or src's planes read in place),
 * each plane transposed by the tile kernel, the planes interleaved into dst
 * rows (or written to dst's planes in place).  Units of T x T groups, T
 * the largest multiple of 16 whose planes fit PL_PLANES_BUFFER_BYTES
 * (squarer or narrower units, and prefetching the next unit's rows, were
 * level within noise).  Measured on the 2-core dev VM, torch tensors, GB/s,
 * median of 7 interleaved rounds, 1 thread and 2, TRANSPOSE / planes:
 *   float32 (1024,1024,4) by (2,1,0): 1.9 / 6.7 and 3.7 / 12.0 (torch 1.3, 3.0);
 *   float32 (4,1024,1024) by (2,1,0): 3.0 / 9.3 and 5.3 / 12.3;
 *   uint8 (2048,2048,3) by (2,1,0): 0.7 / 6.5 and 1.3 / 8.9 (torch 0.4, 0.9);
 *   uint8 (3,2048,2048) by (2,1,0): 0.4 / 6.4 and 0.8 / 9.7;
 *   float32 (8,3,512,512) by (0,3,2,1): 1.6 / 8.1 and 3.0 / 16.9;
 *   float64 (1024,1024,2) by (2,1,0): 4.4 / 7.7 and 7.8 / 15.6;
 *   float16 (2,16,1024,64) by (3,1,2,0): 0.6 / 26.7 and 1.1 / 16.1;
 *   uint8 (64,64,64,8) by (0,3,2,1): 3.7 / 15.2 and 5.1 / 14.3.
 * RGB images, ROWS / planes:
 *   uint8 RGB 2048 x 2048: 1.4 / 5.7-5.9 and 1.9 / 9.6-9.7 (torch 1.2, 2.4);
 *   float16 RGB 2048 x 2048: 1.1 / 5.2-5.6 and 1.9 / 9.2-9.3;
 *   float32 RGB 1024 x 1024: 4.4 / 6.6-7.7 and 6.1 / 9.4-18 (torch 4.4);
 *   float64 RGB 1024 x 1024: 6.2 / 6.1-6.9 and 10.4 / 10.5-10.9;
 *   float32 groups of 5 and 6: 5.6-6.3 / 7.2-7.7.
 * Most of what is left is the calls: a unit of 112 x 112 uint8 pixels
 * makes 227 kernel calls on rows of 112 groups. */
static bool pl_plane_dims(const _pylayout_kernels *k, int n, const int64_t *shape, const int64_t *ss,
                          const int64_t *ds, int64_t e, pl_groups *pg, int64_t *rshape, int64_t *rss, int64_t *rds)
{
    const int lg = _pl_size_index((size_t)e);
    if (n < 3 || lg < 0 || e > 8 || k->tile[lg] == NULL)
        return false;
    const int last = n - 1;
    const int64_t P = shape[last], g = P * e;
    int b;
    if (ss[last] == e && ds[last] == e) { /* packed in both */
        *pg = (pl_groups){(int)P, 0, 0};
        return P >= 3 && P <= PL_THIN_MAX_P && _pl_size_index((size_t)g) < 0 && ds[n - 2] == g &&
               pl_group_copy(n, shape, ss, ds, last, g, g, rshape, rss, rds, &b) &&
               !pl_short_side_rows(k, g, rshape[n - 2], rshape[b], rss[n - 2]);
    }
    if (ds[last] == e && ss[last] != 0 && P >= 2 && P <= pl_planes_max_p(e, k->tile_zip[lg] != NULL) &&
        ds[n - 2] == g) { /* packed in dst */
        *pg = (pl_groups){(int)P, ss[last], 0};
        if (pl_group_copy(n, shape, ss, ds, last, e, g, rshape, rss, rds, &b) &&
            pl_apart_wins(P, e, rshape[n - 2], rshape[b], k->tile_zip[lg] != NULL))
            return true;
    }
    for (int q = 0; q < last && ds[last] == e; q++) /* packed in src */
        if (ss[q] == e && shape[q] >= 2 && shape[q] <= pl_planes_max_p(e, k->tile_split[lg] != NULL)) {
            const int64_t gq = shape[q] * e;
            *pg = (pl_groups){(int)shape[q], 0, ds[q]};
            return pl_group_copy(n, shape, ss, ds, q, gq, gq, rshape, rss, rds, &b) &&
                   pl_apart_wins(shape[q], e, rshape[n - 2], rshape[b], k->tile_split[lg] != NULL);
        }
    return false;
}

static void pl_choose_planes(pl_plan *p, const _pylayout_kernels *k, const pl_groups *pg, int64_t total_bytes,
                             int64_t stream_bytes, int64_t outer, int nt)
{
    const int P = pg->P;
    p->planes_heap = total_bytes >= PL_PLANES_HEAP_MIN_BYTES;
    p->planes_ahead = p->planes_heap && stream_bytes >= pl_stream_min_wide_bytes(); /* src and dst past half of L3 */
    const int64_t e = (int64_t)p->itemsize / P;
    const int lg = _pl_size_index((size_t)e);
    const _pylayout_thin_kernels *t = k->thin != NULL ? k->thin : &_pylayout_thin_portable;
    p->planes = P;
    /* Groups of 3 packed in both go through registers (tile3: AVX-512 and
     * AVX2) in copies that stay in cache.  Measured on the 2-core Zen 5 dev VM,
     * torch tensors, (H,W,3) by (1,0,2), copy_into in a loop, best of 7
     * batches, GB/s, 1 thread / 2 threads, through planes -> tile3:
     *   uint8 1080 x 1920 13.9 -> 35.6, 26.3 -> 59.9; 1024 x 1024 15.2 ->
     *   32.3, 27.3 -> 52.5; 224 x 224 14.6 -> 38.9, 14.6 -> 38.9;
     *   float16 1001 x 999 13.0 -> 33.8, 23.7 -> 61.9; 1024 x 1024 14.6 ->
     *   28.0, 27.6 -> 50.0; float32 512 x 512 20.2 -> 29.6, 34.8 -> 46.9;
     *   300 x 301 18.3 -> 39.9, 32.8 -> 57.9.
     * The AVX2 kernels on the same CPU (PYLAYOUT_SIMD=avx2), planes -> tile3:
     *   uint8 1080 x 1920 13.5 -> 20.8, 26.7 -> 39.4; 224 x 224 14.0 -> 20.8,
     *   14.6 -> 20.8; float16 1001 x 999 12.6 -> 21.9, 23.9 -> 42.3; float32
     *   300 x 301 16.5 -> 25.0, 31.1 -> 48.7; 512 x 512 17.4 -> 18.7, 32.9
     *   -> 33.2.
     * Past half of L3 the planes with their prefetches win (planes_ahead;
     * tile3 with the same prefetches, a strip of 16 dst rows at a time):
     * uint8 4096 x 4096 7.8 against 6.8, 16.6 against 12.6; float32 2048 x
     * 2048 11.3 against 8.6, 22.6 against 15.1.  The tile3 blocks walk dst
     * rows in the outer loop: src rows outer lost 2-3x where rows lie a
     * multiple of 2 KiB apart (float32 1024 x 1024: 5.6 against 14.8). */
    p->tile3 = !p->planes_ahead && P == 3 && pg->ssq == 0 && pg->dsq == 0 && lg <= PL_SIZE4 ? k->tile3[lg] : NULL;
    /* Groups packed in src into planes in dst go through registers
     * (tile_split), at every size.  Measured on the 2-core Zen 5 dev VM,
     * torch tensors, (H,W,C) by (2,1,0), copy_into in a loop, best of 7
     * batches, GB/s of bytes read + written, 1 thread, through planes ->
     * tile_split (throwaway script and environment switch, two rounds):
     *   float32 (1024,1024,4) 15-17 -> 30-31, (512,512,4) 47-50 -> 62-72,
     *   (1024,1024,3) 17-19 -> 30-32, (2048,2048,3) 12 -> 21, (300,301,2)
     *   56 -> 72-76; float64 (1024,1024,2) 18-22 -> 31-33, (512,512,2) 52
     *   -> 67-73, (300,300,3) 57-60 -> 83-85; float16 (1000,1000,4) 31-32
     *   -> 73-79, (512,512,3) 35-36 -> 66-68, (2000,2000,3) 10-12 -> 17-18,
     *   (4096,2048,2) 9.5 -> 16-18; uint8 (AVX-512 only) (1080,1920,3)
     *   37-39 -> 57-61, (256,256,3) 40 -> 70-74, (300,301,5) 27 -> 51,
     *   (128,1000,8) 27 -> 62-66, (3000,3000,3) 10-11 -> 14, (5000,5000,3)
     *   7-9 -> 9.5-12.
     * The AVX2 kernels (PYLAYOUT_SIMD=avx2): float32 (1024,1024,4) 12.6-14
     * -> 19-20, (512,512,4) 48-49 -> 66-69, (2048,2048,2) 12.2-12.6 ->
     * 18.6, (300,301,3) 47 -> 72; float64 (512,512,2) 57-59 -> 63-65.
     * Bytes whose dst rows lie a multiple of 1 KiB apart stay on planes: a
     * block's 64 dst lines then share 4 of L1's 64 sets or fewer
     * ((1024,1024,4) 37 -> 27-34, (2048,2048,2) 27-28 -> 22-23).
     * Their inverse, src in planes into groups packed in dst, goes through
     * registers as well (tile_zip: 4- and 8-byte elements), its blocks of
     * dst rows outermost.  Measured as above, (C,H,W) by (2,1,0), GB/s,
     * 1 thread / 2 threads, through planes -> tile_zip:
     *   float32 (4,1024,1024) 12.6-12.7 -> 13.7-15.8 and 24.2-24.8 ->
     *   28.7-29.8; (4,500,700) 24.4-25.5 -> 33.7-36.1 and 44-45 -> 63-64;
     *   (4,96,80) 23.7-24.4 -> 35.6-36.5 and 23.7 -> 35.8;
     *   float64 (2,96,80) 25.5 -> 37.5 (AVX2 25.7 -> 34.7).
     * Src rows outermost instead (each block's dst rows down the unit,
     * every store a new line) ran at half that: float32 (2,512,512) 9.7-10
     * against 23-24, (4,1024,1024) 8.7-9.2 against 16-17.  The blocks read
     * the lines of the next block of dst rows ahead (into L2: into L1 they
     * crowd out the lines in use, float64 (4,1024,1024) 9.9 against 14.4).
     * Groups of 2 or 3 (and, in copies that stay in cache, of 4-6) whose
     * dst rows lie a multiple of 4 KiB apart stay on planes: a block's 16
     * dst rows then share one L1 set (through planes -> tile_zip, three
     * rounds: float32 (2,512,512) 29.2-30.9 -> 23.7-23.8, float64
     * (3,1024,1024) 12.2-12.8 -> 9.1-9.9, float32 (3,2048,2048) 9.4-9.7 ->
     * 8.3-9.1). */
    const bool crowded = lg == PL_SIZE1 && p->dsb % 1024 == 0;
    p->tile_split = pg->ssq == 0 && pg->dsq != 0 && !crowded ? k->tile_split[lg] : NULL;
    const bool zip_crowded = p->dsb % 4096 == 0 && P * e <= PL_APART_MAX_GROUP_BYTES && (P <= 3 || !p->planes_ahead);
    p->tile_zip = pg->ssq != 0 && pg->dsq == 0 && !zip_crowded ? k->tile_zip[lg] : NULL;
    p->ssq = pg->ssq;
    p->dsq = pg->dsq;
    p->tile = k->tile[lg];
    if (P <= PL_THIN_MAX_P) { /* more only in registers (pl_planes_max_p) */
        p->zip = t->zip[P - 2][lg] != NULL ? t->zip[P - 2][lg] : _pylayout_thin_portable.zip[P - 2][lg];
        p->unzip = t->unzip[P - 2][lg] != NULL ? t->unzip[P - 2][lg] : _pylayout_thin_portable.unzip[P - 2][lg];
    }
    int64_t T = 16;
    while ((T + 16) * (T + 16) * P * e <= PL_PLANES_BUFFER_BYTES)
        T += 16;
    if (p->tile3 != NULL || p->tile_split != NULL || p->tile_zip != NULL) /* no buffers */
        p->planes_heap = false;
    if (p->tile_split != NULL || p->tile_zip != NULL)
        T = PL_SPLIT_UNIT;
    p->ta = pl_min(p->na, T);
    p->tb = pl_min(p->nb, T);
    /* Past the streaming threshold, transposes out of planes into dst rows
     * a whole number of lines apart stream (tile_zip_stream): units of
     * PL_ZIP_STREAM_GROUPS groups (a multiple of 16, so that each unit's
     * blocks start on lines where dst does) down all dst rows, each src row
     * read front to back.  Measured on a 2-core Intel Xeon (AVX-512, 2 MiB
     * L2 a core), torch tensors, copy_into in a loop, best of 15, GB/s, 1
     * thread / 2 threads, tile_zip -> tile_zip_stream, by (2,1,0), three
     * alternated rounds (its memcpy: 15 and 29):
     *   float32 (8,1024,1024) 3.3-4.1 -> 10.3-10.5 and 9.8-11.0 -> 19.7;
     *   (4,2048,2048) 1.4-1.5 -> 9.6-9.7 and 6.6-7.1 -> 19.7-19.8;
     *   (15,1024,1024) 2.6-2.7 -> 10.4 and 5.4-5.6 -> 19.6-19.8;
     *   (8,512,512), 8 MiB, 7.0 -> 10.8 and 10.7-11.3 -> 18.2-18.4;
     *   float64 (4,1024,1024) 2.6-4.8 -> 10.5-10.6 and 12.8-13.3 -> 19.6-19.8;
     *   AVX2 float32 (8,1024,1024) 4.1-4.6 -> 10.6.
     * Shapes whose rows are not a power of two apart were fast already and
     * run level or a little ahead: (5,704,610) 10.1-10.2 -> 10.5 and
     * 17.6 -> 17.8-18.1, (8,1000,1000) 10.1-10.2 -> 10.8 and 19.3-20.4 ->
     * 21.0.  Dst rows not a whole number of lines apart cannot stream
     * whole lines and stay with tile_zip.  The kernels then took one block
     * of columns (16 src rows of float32, 8 of float64) down all dst rows
     * at a time; passes of PL_STREAM_SRC_ROWS src rows, each dst row
     * taking 2 (float32) or 4 (float64) lines back to back, measured as
     * above, one block -> one pass, three alternated rounds:
     *   float32 (8,1024,1024) 9.8-10.3 -> 11.8-12.1 and 18.6-19.4 ->
     *   22.4-22.5; (4,2048,2048) 9.8 -> 11.4-11.5 and 18.7-19.3 ->
     *   22.0-23.0; (15,1024,1024) 10.1 -> 11.7-12.0 and 19.6-19.8 ->
     *   23.1-23.4; (8,1000,1000) 10.7-10.8 -> 12.3-12.6 and 20.7-20.8 ->
     *   24.1-24.3; float64 (4,1024,1024) 10.2-10.5 -> 13.5-13.6 and
     *   19.2-19.9 -> 25.1-26.2; AVX2 float32 (8,1000,1000) 11.1-11.3 ->
     *   13.7-13.9 and 21.1-21.7 -> 25.4-26.6, float64 (4,1024,1024)
     *   10.5-10.6 -> 13.2-13.3 and 19.2-19.7 -> 24.1-25.2.
     * Two blocks of float64 (16 rows) instead of four: 13.3-13.5 and
     * 24.8-25.1; four of float32 (64 rows): 10.9-12.0 and 20.7-21.1. */
    if (p->tile_zip != NULL && p->planes_ahead && k->tile_zip_stream[lg] != NULL &&
        p->dsb % PL_LINE_BYTES == 0) {
        p->tile_zip = k->tile_zip_stream[lg];
        p->fence = k->fence;
        p->ta = pl_min(p->na, PL_ZIP_STREAM_GROUPS);
        p->tb = p->nb;
    }
    /* Transposes into planes, past the streaming threshold, whose dst rows
     * and planes lie a whole number of lines apart stream the same way
     * (tile_split_stream): units of PL_STREAM_SRC_ROWS src rows (a
     * multiple of 16, so that each unit's blocks start on lines where dst
     * does), all of their columns, each dst row taking the unit's lines
     * back to back.  Measured on a 2-core Intel Xeon (AVX-512, 2 MiB L2 a
     * core; its memcpy: 15 and 29), torch tensors, (H,W,C) by (2,1,0),
     * copy_into in a loop, best of 9, GB/s, 1 thread / 2 threads,
     * tile_split -> tile_split_stream, three alternated rounds:
     *   float32 (1024,1024,8) 8.0-8.5 -> 11.5-12.4 and 14.9-15.2 ->
     *   22.8-25.0; (2048,2048,4) 7.5-7.7 -> 11.2-11.6 and 13.7-14.6 ->
     *   22.5-25.9; (1024,1024,15) 7.2-7.3 -> 8.4-9.0 and 13.8-14.2 ->
     *   16.6-17.9; (512,512,8), 8 MiB, 8.5-9.0 -> 12.1-12.4 and 14.6-16.7
     *   -> 18.0-20.9; (704,610,5) 9.6-9.8 -> 12.5-12.6 and 16.2-17.3 ->
     *   19.6-22.5; float64 (1024,1024,4) 9.1-9.5 -> 17.2-17.4 and
     *   17.9-20.0 -> 29.7-32.2; (2048,2048,2) 8.4-8.8 -> 14.2-16.1 and
     *   16.1-17.2 -> 32.5-34.0; float16 (2048,2048,4) 7.4-7.6 -> 9.2 and
     *   14.1-15.0 -> 17.1-17.4; AVX2 float32 (2048,2048,4) 2.5-3.8 ->
     *   11.5-11.9 and 6.9-8.8 -> 22.6-23.3.
     * Units of 16 / 48 / 64 rows instead of 32, 1 thread, two to four
     * rounds: float32 (1024,1024,4) 10.3-10.8 / 11.6-13.2 / 11.8-12.0
     * against 14.0-14.2, float64 15.6-16.0 / 15.0-15.8 / 13.3-13.5 against
     * 16.5-17.7 (and float64 one 8-row block at a time across all
     * columns, the zip stream tile's order, 10.3-10.8): fewer
     * rows write each dst row a line at a time, more read more src rows
     * at once than the prefetchers follow.  Dst rows off the lines, in
     * this order with cached stores, ran level or behind ((999,1001,4) at
     * 2 threads 18.4-18.6 against 14.8-14.9) and stay with tile_split. */
    if (p->tile_split != NULL && p->planes_ahead && k->tile_split_stream[lg] != NULL &&
        p->dsb % PL_LINE_BYTES == 0 && p->dsq % PL_LINE_BYTES == 0) {
        p->tile_split = k->tile_split_stream[lg];
        p->fence = k->fence;
        p->ta = pl_min(p->na, PL_STREAM_SRC_ROWS);
        p->tb = p->nb;
    }
    /* Units in registers are large: a parallel copy of fewer than 4 units
     * a thread (outer: their count over the other dims) gets smaller ones,
     * so that the team's threads each find some to claim (threads.c: the
     * first thread to run takes the next chunk; with 2 chunks a copy of 10
     * us ran both on the caller before the other woke).  float64 (7,96,80)
     * by (2,1,0), 2 threads, us: 1 unit 10.7, 2 units 10.8, 4 units 7.0
     * (1 thread 10.0); (7,384,320) 9 units: 103 (1 thread 160). */
    if (nt > 1 && (p->tile_split != NULL || p->tile_zip != NULL))
        while (outer * pl_ceil_div(p->na, p->ta) * pl_ceil_div(p->nb, p->tb) < 4 * nt && pl_max(p->ta, p->tb) > 32) {
            if (p->ta >= p->tb)
                p->ta = pl_ceil_div(p->ta, 2);
            else
                p->tb = pl_ceil_div(p->tb, 2);
        }
}

/* A TRANSPOSE one of whose sides is 2 to 8 elements (pl_thin_wins) and the
 * other long becomes a THIN copy: P-plane interleaves (zip: dst groups of P = na
 * elements, dense, from P src planes ssa apart) or their inverse (unzip:
 * src groups of P = nb elements, dense, into P dst planes dsb apart), both
 * unit-stride along the long side.  Units are stretches of the long side.
 * Returns whether it did.
 *
 * Always cached stores: streaming the packed side through an L1 buffer
 * (stream_copy, as TRANSPOSE units do) measured slower at every size tried
 * on the dev VM, 1 thread, GB/s cached vs streamed: (64,3,224,224) float32
 * NCHW -> NHWC 19.7 vs 6.1; the same in uint8 36.7 vs 21.2; NHWC -> NCHW
 * uint8 50.6 vs 29.5; view_as_complex of a transposed (2^24, 2) float32
 * (128 MB) 9.1 vs 6.1. */
/* Whether P planes of `is`-byte elements go to the thin kernels (zip, or
 * unzip) rather than the tile ones.  Up to 4 planes always; 5 to 8 where
 * the tiles' smallest SIMD block does not fit or the thin kernels measured
 * faster: NCHW <-> NHWC (8,C,224,224), 1 thread, the two interleaved in
 * one process, GB/s thin / tiles, zip and unzip:
 *   uint8    C=5 40 / 4.1, 39 / 2.7; C=8 24 / 4.0, 24 / 2.8
 *   float16  C=5 41 / 7.9, 39 / 6.6; C=7 20 / 6.7, 27 / 7.9; C=8 19 / 32, 23 / 7.9
 *   float32  C=5 28 / 21, 40 / 14;   C=7 26 / 23, 21 / 13;   C=8 23 / 25, 16 / 12
 *   float64  C=5 25 / 28, 21 / 19;   C=7 22 / 23, 16 / 16;   C=8 21 / 32, 18 / 28
 * (an 8-element zip of 2- to 8-byte elements is one whole 8 x 8 block of
 * the tiles). */
static bool pl_thin_wins(int64_t P, int64_t is, bool zip)
{
    if (P <= 4)
        return true;
    if (P > PL_THIN_MAX_P || is > 4)
        return false;
    return P < 8 || is == 1 || !zip;
}

static bool pl_choose_thin(pl_plan *p, const _pylayout_kernels *k)
{
    const int64_t is = (int64_t)p->itemsize;
    const int lg = _pl_size_index(p->itemsize);
    if (lg < 0 || p->dsa != is || p->ssb != is)
        return false;
    const _pylayout_thin_kernels *t = k->thin != NULL ? k->thin : &_pylayout_thin_portable;
    int64_t P;
    if (p->na >= 2 && pl_thin_wins(p->na, is, true) && p->dsb == p->na * is && p->nb >= PL_THIN_MIN_LONG) {
        P = p->na;
        p->zip = t->zip[P - 2][lg] != NULL ? t->zip[P - 2][lg] : _pylayout_thin_portable.zip[P - 2][lg];
    } else if (p->nb >= 2 && pl_thin_wins(p->nb, is, false) && p->ssa == p->nb * is && p->na >= PL_THIN_MIN_LONG) {
        P = p->nb;
        p->unzip = t->unzip[P - 2][lg] != NULL ? t->unzip[P - 2][lg] : _pylayout_thin_portable.unzip[P - 2][lg];
    } else if (p->nb >= 2 && pl_thin_wins(p->nb, is, false) && p->ssa > p->nb * is && p->na >= PL_THIN_MIN_LONG &&
               p->nb * is <= PL_GG_MAX_GROUP && k->group_gather != NULL &&
               k->group_gather(&p->gg, p->nb * is, p->ssa)) {
        /* src groups with gaps between them (pl_unzip_gaps) */
        P = p->nb;
        p->unzip = t->unzip[P - 2][lg] != NULL ? t->unzip[P - 2][lg] : _pylayout_thin_portable.unzip[P - 2][lg];
        p->grouped = true;
    } else if (p->nb >= 2 && pl_thin_wins(p->nb, is, false) && p->ssa == -p->nb * is && p->na >= PL_THIN_MIN_LONG &&
               k->group_flip != NULL && k->group_flip(&p->gg, p->nb * is, p->ssa)) {
        /* src groups packed in the opposite order (an HWC image flipped
         * into planes, img[:, ::-1].transpose(2, 0, 1)): put in order by
         * group_flip, then unzipped (pl_unzip_gaps) */
        P = p->nb;
        p->unzip = t->unzip[P - 2][lg] != NULL ? t->unzip[P - 2][lg] : _pylayout_thin_portable.unzip[P - 2][lg];
        p->grouped = true;
    } else {
        return false;
    }
    p->kind = PL_THIN;
    const int64_t unit = PL_LINE_BYTES * pl_max(1, PL_THIN_UNIT_BYTES / (PL_LINE_BYTES * P * is));
    if (p->zip != NULL) {
        p->ta = p->na;
        p->tb = pl_min(p->nb, unit);
    } else {
        p->ta = pl_min(p->na, unit);
        p->tb = p->nb;
    }
    return true;
}

/* Row copies of at least the L3 size write their rows with streaming
 * stores (stream_copy) where the rows are whole lines that start on lines,
 * or long (PL_STREAM_ROW_BYTES: a single row, as in an identity copy, or
 * rows whose two partial lines are a small part).  memcpy would decide this
 * itself, but glibc sizes its threshold by sysconf's L3, which some VMs
 * report for the whole socket (384 MiB on the dev VM, whose cores share 32
 * MiB), and there it never streams.  Smaller copies keep cached stores:
 * source and result stay in L3 for the next reader.  Measured on the
 * 2-core dev VM, float32, GB/s, memcpy / streaming, median of 5-7
 * interleaved rounds, 1 thread and 2:
 *   identity 16 MB: 20.9 / 28.0 and 38.9 / 31.9;
 *   identity 32 MB: 19.5 / 25.1 and 30.8 / 28.5;
 *   identity 64 MB: 15.1 / 19.8 and 26.7 / 34.9;
 *   identity 256 MB: 15.8 / 23.0 and 27.1 / 42.0;
 *   x[:, 2:-2] of 64 MB, rows of 256 bytes: 12.0 / 18.6 and 23.0 / 30.2,
 *   of 4 KiB: 16.8 / 24.1 and 31.4 / 44.2;
 *   x[:, 1:-1] of 64 MB, rows of 1000 bytes (dst rows off lines, their
 *   ends cached): 18.8 / 19.1 and 35.9 / 37.0; of 2000 bytes 20.0 / 20.8
 *   and 37.8 / 38.5;
 *   x[:, :50] of 64 MB, rows of 200 bytes: 13.0 / 10.4 and 21.1 / 17.7
 *   (not streamed);
 *   identity 8 MB (in L3): 52.4 / 34.1 and 55.7 / 31.5 (not streamed). */
#define PL_STREAM_ROW_BYTES 1024

static bool pl_rows_stream(const pl_plan *p, const _pylayout_kernels *k, int64_t total_bytes)
{
    const int64_t l3 = _pylayout_l3_bytes(), row = p->na * (int64_t)p->itemsize;
    if (k->stream_copy == NULL || l3 <= 0 || total_bytes < l3 || p->small_rows)
        return false;
    const bool lines = row % PL_LINE_BYTES == 0 && ((uintptr_t)p->dst | (uintptr_t)p->dsb) % PL_LINE_BYTES == 0;
    return row >= PL_STREAM_ROW_BYTES || lines;
}

/* Rows of 1-byte elements shorter than this gather one element at a
 * time: the step-k kernels' masked last step costs more than the 2-D
 * loop there.  (65536, C)[:, ::3] uint8, 1 thread, µs, 2-D loop / kernel
 * (rows of n elements): n = 3 72-74 / 140-143, n = 5 122-133 / 145-154,
 * n = 9 279-282 / 184-196, n = 17 520-563 / 242-262.  Wider elements
 * take the kernels at any length: float32 n = 3 276-281 / 214-220, n = 5
 * 939-959 / 252-270, n = 9 424-447 / 453-499 and n = 17 770-844 /
 * 850-932 (level to 10 % slower, src from L3), n = 33 1572-1884 /
 * 1572-1667. */
#define PL_GATHERK_MIN_BYTE_ROW 8

/* Row copies whose units (whole rows of a along b = a - 1, dst's next dim
 * out) are short, their rows far apart in src (the attention permute of
 * float16, (4,12,512,64) by (0,2,1,3): 12 rows of 128 bytes, 64 KiB apart;
 * (3,N,32) uint8 by (1,0,2): 3 rows of 32 bytes), take their units along
 * src's dense dim instead, where one outside b has rows packed in src:
 * PL_ROW_BLOCK_SRC_BYTES of src a unit, into rows of dst that far apart;
 * the units go in dst order, b's tile index in b's place, so the dst a
 * block of them writes is whole before the next: each reads 2 KiB of src in
 * order, where a unit along b read a few rows from as many pages.  On the
 * 2-core Zen 5 dev VM, torch tensors, copy_into, GB/s, 1 thread (best of 7
 * batches) / 2 threads (the tenth percentile of single copies), fresh
 * processes alternating builds, before / after (with pl_fold_rows; torch):
 * float16 (4,12,512,64) by (0,2,1,3) 43.4-43.6 / 47.8-48.9 and 77-78 / 94
 * (42-43 and 74-77), (8,12,512,64) 41-42 / 48-49 and 79-81 / 97 (42, 82-84);
 * float32 (8,4096,16) by (1,0,2) 28-35 / 47-50 and 39-53 / 87-89 (26-28,
 * 28-47), (16,4096,16) 38 / 48 and 69 / 87-88 (25-33, 48-60); uint8
 * (3,20000,32) by (1,0,2) 11.7-12.0 / 47-49 and 21-22 / 88 (7.6-8.0, 15-16),
 * (3,60000,32) 11.0-11.3 / 49-50 and 22 / 90, (64,3,64,64) by (0,2,1,3)
 * 22-23 / 52-54 and 42-43 / 97-101 (15-16, 29); float16 (2,8,4096,32) 32-36
 * / 46-50 and 34-61 / 86-90.  Not for units of PL_ROW_BLOCK_MAX_UNIT_BYTES
 * or more, whose rows the hardware follows (1 thread, a throwaway switch:
 * float32 (1,12,512,64), 3 KiB units, 55 -> 50; uint8 (32,128,12,64), 8 KiB,
 * 58 -> 42; float16 (4096,8,8,4), 256 KiB, 50 -> 41), nor past
 * pl_stream_min_wide_bytes, where dst's scattered rows went to memory before
 * they were whole (float16 (16,12,512,64), 12 MiB, 2 threads: 63-65 -> 48-50;
 * torch 56-66), unless a unit has PL_ROW_BLOCK_FEW_ROWS rows or fewer: its
 * block of dst is 8 KiB or less, (3,130000,32) uint8 (12 MiB) 8-10 -> 70-72
 * at 2 threads. */
#define PL_ROW_BLOCK_MAX_UNIT_BYTES 2048
#define PL_ROW_BLOCK_SRC_BYTES 2048
#define PL_ROW_BLOCK_FEW_ROWS 4

/* b, or the dim the row copy's units take instead (setting *blocks). */
static int pl_row_block_dim(int n, const int64_t *shape, const int64_t *ss, int b, int64_t is, int64_t total_bytes,
                            bool *blocks)
{
    const int64_t row = shape[n - 1] * is;
    if (n < 3 || b < 0 || ss[b] == row || shape[b] * row >= PL_ROW_BLOCK_MAX_UNIT_BYTES ||
        (total_bytes > pl_stream_min_wide_bytes() && shape[b] > PL_ROW_BLOCK_FEW_ROWS))
        return b;
    for (int c = 0; c < b; c++)
        if (ss[c] == row && shape[c] > 1) {
            *blocks = true;
            return c;
        }
    return b;
}

/* ROWS and STRIDED units: step-2 to step-8 gathers where the table has
 * them, and how many rows one unit takes. */
static void pl_choose_rows(pl_plan *p, const _pylayout_kernels *k, int64_t total_bytes, int nt)
{
    const int64_t is = (int64_t)p->itemsize;
    const int lg = _pl_size_index(p->itemsize);
    if (p->kind == PL_STRIDED && lg >= 0 && p->dsa == is && p->ssa == 2 * is) {
        p->gather2 = k->gather2[lg];
        /* the streaming gather aligns dst element by element first:
         * only possible when dst sits on whole elements */
        if (total_bytes >= PL_STREAM_MIN_BYTES && p->na * is >= PL_PAGE_BYTES && k->gather2_stream[lg] != NULL &&
            ((uintptr_t)p->dst | (uintptr_t)p->dsb) % (uintptr_t)is == 0) {
            p->gather2 = k->gather2_stream[lg];
            p->fence = k->fence;
        }
    }
    /* Steps of 3 to 8 elements (one channel of an HWC image, img[..., 0];
     * one coordinate of (N, 3) points): shuffles of k loads make a vector
     * of dst (gather_x86.c).  The 2-D loop, one element at a time, ran
     * level with torch: on the Intel Xeon dev VM, 1 thread, GB/s of dst,
     * uint8 (1080,1920,3)[..., 0] 2.4-2.5 -> 6.5-8.0, (1080,1920,4)[..., 0]
     * 2.6-2.7 -> 5.1-5.4, float32 (4194304,3)[:, 0] 2.5 -> 6.4.  Not for
     * rows of fewer than PL_GATHERK_MIN_BYTE_ROW bytes. */
    if (p->kind == PL_STRIDED && lg >= 0 && p->dsa == is && p->ssa % is == 0 && p->ssa >= 3 * is &&
        p->ssa <= 8 * is && k->gatherk[lg] != NULL && (is > 1 || p->na >= PL_GATHERK_MIN_BYTE_ROW)) {
        p->gatherk = k->gatherk[lg];
        p->gk = (int)(p->ssa / is);
    }
    /* A flipped innermost dim (NumPy's a[:, ::-1]): rows copied backwards,
     * 32 bytes a step.  The 2-D loop, one element at a time, ran at 2.4
     * (uint8) to 9 (float64) GB/s, below NumPy's own copy in half the cases;
     * now 19-68, 0.65-1.0x memcpy; NCHW (16,3,256,256) flipped horizontally:
     * uint8 3.6 -> 59, float32 2.5 -> 24 (NumPy 4.7, 9.3; 1 thread). */
    if (p->kind == PL_STRIDED && lg >= 0 && p->dsa == is && p->ssa == -is)
        p->reverse = k->reverse[lg]; /* NULL: the portable 2-D loop */
    /* A source broadcast along the row: the element in a vector, stored
     * along the row (pl_fill_row's 16-byte stores where the path has none). */
    if (p->kind == PL_STRIDED && lg >= 0 && p->dsa == is && p->ssa == 0)
        p->fill = k->fill[lg];
    /* Rows of 2 to 16 bytes, packed along b in both: each a group reversed
     * (OpenCV's BGR pixels as RGB, img[..., ::-1]), several per 16-byte
     * shuffle.  One 3-byte row at a time ran at 4 GB/s (NumPy 1.3). */
    if (p->reverse != NULL && k->reverse_groups != NULL && p->na >= 2 &&
        p->na * is <= 16 && p->ssb == p->na * is && p->dsb == p->na * is) {
        p->reverse = NULL;
        p->reverse_groups = k->reverse_groups;
        p->ta = p->na; /* whole groups */
    }
    /* Rows of a few bytes, packed in dst, gaps between them in src (an
     * RGBA image without its alpha, img[..., :3]; the xyz of (N, 4)
     * points): shuffles of a few loads make each vector of dst
     * (group_gather_x86.c).  Each row took its own moves, 3 bytes of
     * uint8 RGB one at a time: (1080,1920,4)[..., :3] uint8, 1 thread,
     * 2.4 -> 39 GB/s (in L3; torch 2.1); float32 (1M,4)[:, :3] 821 ->
     * 601 us, float32 (64K,4)[:, :3] 50 -> 22 us. */
    const int64_t row = p->na * is;
    if (p->kind == PL_ROWS && k->group_gather != NULL && p->dsb == row && p->ssb > row && row <= PL_GG_MAX_GROUP &&
        p->nb * row >= PL_GG_MIN_BYTES && k->group_gather(&p->gg, row, p->ssb))
        p->grouped = true;
    /* Rows of a few bytes packed in both, src's backwards: the pixels of
     * an HWC image flipped, NumPy's img[:, ::-1] (np.fliplr), its rotation
     * by 180 degrees (img[::-1, ::-1]).  Rows of 2, 4, 8 or 16 bytes are
     * one element already (pl_copy_canonical), which reverse flips;
     * these are the others, uint8 RGB above all (group_flip: one shuffle
     * a vector).  Each row went on its own, a 3-byte one a byte at a time.
     * On the 2-core Zen 5 dev VM, 1 thread, GB/s (python -m pylayout bench
     * --only "np.fliplr" --only "180 degrees"), before / after: uint8
     * (1080,1920,3) flipped 2.2 / 49 (AVX2: 27), rotated 2.3 / 51, (224,
     * 224,3) flipped 2.2 / 35; float32 (540,960,3) flipped 15 / 53 (NumPy:
     * 0.9-1.0 uint8, 4.0 float32). */
    if (p->kind == PL_ROWS && k->group_flip != NULL && p->ssb == -row && p->dsb == row &&
        p->nb * row >= PL_GG_MIN_BYTES && k->group_flip(&p->gg, row, p->ssb))
        p->grouped = true;
    /* The same for elements of 2 bytes or more whose step is no multiple
     * of their size: the (H,W,3)[..., :2] of uint8, seen as 2-byte
     * elements 3 bytes apart; (N,5)[:, :4], 4-byte elements 5 apart;
     * (N,3)[:, :2] of float32, 8-byte elements 12 apart.  Not 16-byte
     * elements, whose single moves were faster (float64 (16384,3)[:, :2],
     * in L1: 50 GB/s moves, 34 shuffles). */
    if (p->kind == PL_STRIDED && k->group_gather != NULL && p->gather2 == NULL && p->gatherk == NULL &&
        p->dsa == is && p->ssa > is && is >= 2 && is <= 8 && p->na * is >= PL_GG_MIN_BYTES &&
        k->group_gather(&p->gg, is, p->ssa))
        p->grouped = true;
    /* The inverse, where the CPU has masked byte stores: dense src into
     * groups of dst with gaps between them, which no store touches (RGB
     * into an RGBA buffer, copy_into(rgba[..., :3], rgb); a plane into one
     * channel, copy_into(img[..., 0], plane)).  Each row went on its own,
     * a byte at a time for uint8, or the 2-D loop an element at a time:
     * 1 thread, RGB (1080,1920,3) into an RGBA frame 2527 -> 183 us, a
     * uint8 plane into img[..., 0] of (1080,1920,3) 549 -> 118 us. */
    if (p->kind == PL_ROWS && k->group_scatter != NULL && p->ssb == row && p->dsb > row && row <= PL_GG_MAX_GROUP &&
        p->nb * row >= PL_GG_MIN_BYTES && k->group_scatter(&p->gg, row, p->dsb))
        p->grouped = true;
    if (p->kind == PL_STRIDED && k->group_scatter != NULL && p->ssa == is && p->dsa > is && is <= 8 &&
        p->na * is >= PL_GG_MIN_BYTES && k->group_scatter(&p->gg, is, p->dsa))
        p->grouped = true;
    /* Groups with gaps on both sides, at the same step (one RGBA image's
     * RGB into another's, rgba2[..., :3] = rgba[..., :3]; the xyz between
     * point clouds; x[:, ::2] into y[:, ::2]), where the CPU has masked
     * byte stores: a load and a store masked to the groups a vector
     * (group_gather_x86.c, group_move).  Each row, or element, went on its
     * own: uint8 pixels a byte at a time, level with torch.  On the 2-core
     * Zen 5 dev VM, 1 thread, copy_into of torch tensors, GB/s of groups,
     * before / after (torch): uint8 (1080,1920,4)[..., :3] 2.2 / 47 (2.2),
     * (1080,1920,3)[..., 0] 3.7 / 21 (3.8); float16 (1M,8)[:, :3] 7.0 / 12.9
     * (5.2); float32 (1M,4)[:, :3] 15.1 / 25.1 (11.2), (64K,4)[:, :3] 14.7 /
     * 39.5 (10.6), (2048,2048)[:, ::2] 12.3 / 18.5 (13.9); float64
     * (1M,4)[:, :3] 17.8 / 20.1 (17.0). */
    if (p->kind == PL_ROWS && k->group_move != NULL && p->ssb == p->dsb && p->dsb > row && row <= PL_GG_MAX_GROUP &&
        p->nb * row >= PL_GG_MIN_BYTES && k->group_move(&p->gg, row, p->dsb))
        p->grouped = true;
    if (p->kind == PL_STRIDED && k->group_move != NULL && p->ssa == p->dsa && p->dsa > is && is <= 8 &&
        p->na * is >= PL_GG_MIN_BYTES && k->group_move(&p->gg, is, p->dsa))
        p->grouped = true;
    /* Groups with gaps on both sides at different steps (one channel of an
     * RGB image into an RGBA one's, rgba[..., 0] = rgb[..., 0]; RGB into a
     * 6-channel buffer; x[:, ::3] into y[:, ::2]), of 1- and 2-byte
     * elements, where the CPU has scatters (AVX-512 VBMI): gathered packed
     * into an L1 buffer, then scattered from there (pl_run_staged).  Each
     * row, or element, went on its own, level with torch.  On the 2-core
     * Zen 5 dev VM, 1 thread, copy_into of torch tensors, GB/s, before /
     * after (torch): uint8 (1080,1920,4)[..., 0] from (1080,1920,3)[..., 0]
     * 3.7 / 9.9 (3.7), (1080,1920,4)[..., :3] from (1080,1920,6)[..., :3]
     * 2.5 / 12.5 (2.2), its inverse 2.5 / 14.0; float16 (N,8)[:, :3] from
     * (N,4)[:, :3], N = 1M, 6.1 / 8.4 (5.0), (2048,2048)[:, ::2] from
     * (2048,3072)[:, ::3] 7.3 / 11.8 (7.4).  Not 4- or 8-byte elements,
     * whose own moves won: float32 (1M,4)[:, :3] from (1M,6)[:, :3] 12.4 /
     * 6.9, (2048,2048)[:, ::2] from (2048,3072)[:, ::3] 9.1 / 5.8 (torch
     * 10.0 and 9.2; the scatters' own losses, group_gather_x86.c). */
    if (p->kind == PL_ROWS && !p->grouped && k->group_scatter != NULL && is <= 2 && p->ssb > row && p->dsb > row &&
        p->ssb != p->dsb && row <= PL_GG_MAX_GROUP && p->nb * row >= PL_GG_MIN_BYTES)
        p->staged = k->group_scatter(&p->gs, row, p->dsb) && k->group_gather(&p->gg, row, p->ssb);
    if (p->kind == PL_STRIDED && !p->grouped && k->group_scatter != NULL && lg >= 0 && is <= 2 && p->ssa > is &&
        p->dsa > is && p->ssa != p->dsa && p->na * is >= PL_GG_MIN_BYTES &&
        k->group_scatter(&p->gs, is, p->dsa)) {
        if (p->ssa == 2 * is && k->gather2[lg] != NULL) {
            p->gather2 = k->gather2[lg];
        } else if (p->ssa % is == 0 && p->ssa <= 8 * is && k->gatherk[lg] != NULL) {
            p->gatherk = k->gatherk[lg];
            p->gk = (int)(p->ssa / is);
        }
        p->staged = p->gather2 != NULL || p->gatherk != NULL || k->group_gather(&p->gg, is, p->ssa);
    }
    /* Serially, one unit: memcpy sees whole rows and picks its own
     * strategy (glibc streams above its non-temporal threshold, which
     * chunking would hide from it).  In parallel, units of a chunk's
     * size: memcpy of 64 MiB in 256 KiB to 64 MiB pieces measured
     * within 1% of one call on the dev VM (19-20 GB/s; 24 for 256 KiB
     * pieces). */
    int64_t unit_elems = INT64_MAX;
    if (nt > 1)
        unit_elems = pl_max(1, pl_chunk_bytes(total_bytes, nt) / is);
    p->ta = pl_min(p->na, unit_elems);
    p->tb = pl_min(p->nb, pl_max(1, unit_elems / p->ta));
    if (p->row_blocks)
        p->tb = pl_min(p->tb, pl_max(1, PL_ROW_BLOCK_SRC_BYTES / row));
    p->small_rows = p->kind == PL_ROWS && p->na * is <= PL_SMALL_ROW_BYTES && !p->grouped && !p->staged;
    if (p->kind == PL_ROWS && pl_rows_stream(p, k, total_bytes)) {
        p->stream_out = k->stream_copy;
        p->fence = k->fence;
    }
    if (p->kind == PL_ROWS && !p->grouped && !p->staged && p->stream_out == NULL &&
        p->ta * is <= PL_ROWS_KERNEL_MAX_BYTES)
        p->rows = k->rows;
}

/* ------------------------------------------------------- build the loops */

/* Outer loops run in dst order, so consecutive units write adjacent dst.
 * A small transpose unit (thin a and b, e.g. a 27 x 28 tile of
 * (27,28,28,28,28).permute(2,3,1,4,0)) then reads each src row only a few
 * dozen bytes wide, pages apart, and comes back to the rest of those lines
 * much later.  When some outer dim steps src by no more than a few lines,
 * and the innermost one jumps pages, run that dim innermost instead:
 * consecutive units continue the same src rows (the lines are still in L1)
 * and write dst in chunks of a whole unit. */
static void pl_keep_src_lines_hot(pl_plan *p, int nl)
{
    if (nl < 2)
        return;
    int best = nl - 1;
    for (int k = 0; k < nl; k++)
        if (pl_abs(p->sstep[k]) < pl_abs(p->sstep[best]))
            best = k;
    if (best == nl - 1 || pl_abs(p->sstep[best]) > PL_NEAR_SRC_STEP_BYTES ||
        pl_abs(p->sstep[nl - 1]) < PL_PAGE_BYTES)
        return;
    int64_t c = p->count[best], st = p->sstep[best], dt = p->dstep[best];
    for (int d = best; d < nl - 1; d++) {
        p->count[d] = p->count[d + 1];
        p->sstep[d] = p->sstep[d + 1];
        p->dstep[d] = p->dstep[d + 1];
    }
    p->count[nl - 1] = c;
    p->sstep[nl - 1] = st;
    p->dstep[nl - 1] = dt;
}

/* Buffered (stream_out) units: when the innermost loop that runs more than
 * once steps src by a few lines at most (pl_keep_src_lines_hot put it
 * there), the next units read on along the same rows; each unit then
 * prefetches its rows PL_PREFETCH_UNITS units ahead, on CPUs whose
 * hardware does not (not Intel's: _pylayout_intel_cores).  Buffered transposes also
 * prefetch the end of a dst block PL_DST_AHEAD_UNITS units ahead, on
 * every CPU.  Row units read ahead as PL_ROWS_AHEAD_BYTES says. */
static void pl_choose_prefetch(pl_plan *p, int nl, int64_t total_bytes)
{
    if (p->kind == PL_ROWS && p->stream_out != NULL)
        return; /* streamed rows (pl_rows_stream) */
    const int64_t row_bytes = p->na * (int64_t)p->itemsize, unit_bytes = p->ta * p->tb * (int64_t)p->itemsize;
    const bool rows = p->kind == PL_ROWS && row_bytes >= PL_LINE_BYTES && row_bytes <= PL_AHEAD_ROW_BYTES &&
                      unit_bytes <= PL_ROWS_AHEAD_BYTES && total_bytes > pl_rows_cached_max_bytes();
    if (p->stream_out == NULL && !rows)
        return;
    for (int c = nl - 1; c >= 0; c--) {
        if (p->count[c] == 1)
            continue;
        if (p->kind == PL_TRANSPOSE && p->stream_out != NULL)
            p->pf_dst = PL_DST_AHEAD_UNITS * p->dstep[c];
        if (rows)
            p->pf_dist = PL_ROWS_AHEAD_BYTES / unit_bytes * p->sstep[c];
        else if (pl_abs(p->sstep[c]) <= PL_NEAR_SRC_STEP_BYTES && !_pylayout_intel_cores())
            p->pf_dist = PL_PREFETCH_UNITS * p->sstep[c];
        return;
    }
}

/* Row units (PL_ROWS, plain row copies) of at most half this many bytes
 * that span all of a and b take several iterations of the loop just outside
 * them, up to this many bytes a unit: the walk from unit to unit (the
 * odometer, the unit's tile edges) cost as much as copying a unit of a few
 * hundred bytes.  Not where rows prefetch (pf_dist).  On the 2-core Zen 5
 * dev VM, 1 thread, torch tensors, copy_into, GB/s, best of 7 batches, a
 * unit a fold's iteration / 16 KiB units (a throwaway switch, alternating
 * in one process, units along b = a - 1): (3,20000,32) uint8 by (1,0,2) 12.5
 * / 34, (64,3,64,64) uint8 by (0,2,1,3) 22.9 / 43.9, (8,4096,16) float32
 * by (1,0,2) 37 / 42.5, (16,1024,64) float16 51.4 / 54.1, (4,12,512,64)
 * float16 by (0,2,1,3) 44.6 / 47.4. */
#define PL_ROWS_FOLD_BYTES ((int64_t)16 * 1024)

static void pl_fold_rows(pl_plan *p)
{
    const int nl = p->nloop, f = p->bloop == nl - 2 ? nl - 3 : nl - 2;
    const int64_t unit = p->ta * p->tb * (int64_t)p->itemsize;
    if (p->kind != PL_ROWS || p->grouped || p->staged || p->blocks || p->stream_out != NULL || p->pf_dist != 0 ||
        f < 0 || p->count[nl - 1] != 1 || (p->count[p->bloop] != 1 && p->bloop > f) || p->count[f] < 2 ||
        2 * unit > PL_ROWS_FOLD_BYTES)
        return;
    p->fold_loop = f;
    p->fold = pl_min(p->count[f], PL_ROWS_FOLD_BYTES / unit);
    p->fold_count = p->count[f];
    p->fold_ss = p->sstep[f];
    p->fold_ds = p->dstep[f];
    p->count[f] = pl_ceil_div(p->fold_count, p->fold);
    p->sstep[f] *= p->fold;
    p->dstep[f] *= p->fold;
}

/* The loop nest: every canonical dim but a and b in dst order, then the
 * tile indices of b and a; with row_blocks, b's tile index in b's place. */
static void pl_build_loops(pl_plan *p, int n, const int64_t *shape, const int64_t *ss, const int64_t *ds, int a,
                           int b, int64_t total_bytes)
{
    int nl = 0;
    for (int k = 0; k < n; k++) {
        if (k == a || (k == b && !p->row_blocks))
            continue;
        if (k == b) {
            p->bloop = nl;
            p->count[nl] = pl_ceil_div(p->nb, p->tb);
            p->sstep[nl] = p->tb * p->ssb;
            p->dstep[nl] = p->tb * p->dsb;
        } else {
            p->count[nl] = shape[k];
            p->sstep[nl] = ss[k];
            p->dstep[nl] = ds[k];
        }
        nl++;
    }
    if (p->kind == PL_TRANSPOSE)
        pl_keep_src_lines_hot(p, nl);
    if (!p->row_blocks) {
        p->bloop = nl;
        p->count[nl] = pl_ceil_div(p->nb, p->tb);
        p->sstep[nl] = p->tb * p->ssb;
        p->dstep[nl] = p->tb * p->dsb;
        nl++;
    }
    p->count[nl] = pl_ceil_div(p->na, p->ta);
    p->sstep[nl] = p->ta * p->ssa;
    p->dstep[nl] = p->ta * p->dsa;
    nl++;
    p->nloop = nl;
    pl_choose_prefetch(p, nl, total_bytes);
    pl_fold_rows(p);
}

/* ----------------------------------------------------------------- blocks */

/* Batches of small blocks, each permuted the same way: a batch of small
 * matrices transposed ((N,3,3) rotation matrices by (0,2,1), (N,4,4)),
 * 7 x 7 feature maps transposed ((16,512,7,7) by (0,1,3,2)), short rows
 * reversed (BGR pixels as RGB, (N,8)[:, ::-1]).  Each block is one run of
 * S bytes in both tensors, so one shuffle makes each vector of dst from
 * the vectors of src that hold the same blocks (block_perm_x86.c).  The
 * tiles and planes these went through are a few elements wide and moved
 * each element on its own, below torch and NumPy.  On the 2-core Zen 5
 * dev VM, 1 thread, pylayout_copy of (N,m,n) from (N,n,m) (a C driver,
 * best of 5), GB/s before / after, 256 KiB (in L2; memcpy 134-141):
 * uint8 3 x 3 0.6 / 76, 4 x 4 0.9 / 108; float32 3 x 3 2.3 / 68, 4 x 4
 * 3.7 / 97, 7 x 7 7.9 / 48, 8 x 8 15 / 63; float64 4 x 4 7.6 / 103; and
 * 64 MiB (memcpy 22-24): uint8 3 x 3 0.4 / 24, float32 3 x 3 1.7 / 22,
 * 7 x 7 5.4 / 17, float64 4 x 4 5.8 / 25.  AVX2 (blocks up to 128 bytes),
 * in L2 and at 64 MiB: float32 3 x 3 2.3 / 24 and 1.7 / 20, float64 3 x 3
 * 4.2 / 22 and 3.4 / 17, 4 x 4 7.8 / 13 and 5.8 / 12.  Rows reversed,
 * uint8 (N,3)[:, ::-1], 1 MiB 42 / 55, 12 MiB 34 / 33 (the AVX2 group
 * reversal it replaces was level out of cache: 27 / 27 at 24 MiB). */

/* Whether dims q.. of the canonical copy, q >= 1 (its innermost), are one
 * block: S <= PL_BP_MAX_BYTES bytes (PL_BP_MAX_ELEMS elements) dense in
 * both tensors in another order, the blocks packed along dim q - 1 in
 * both.  The smallest such q.  Fills eperm (the src element of each dst
 * element of a block, counted from the block's lowest in src) and *lo
 * (the bytes from that element to the block's first element visited,
 * <= 0 where src steps back inside the block). */
static bool pl_block_dims(int n, const int64_t *shape, const int64_t *ss, const int64_t *ds, int64_t is, int *q_ret,
                          int64_t *S_ret, int64_t *lo_ret, uint8_t *eperm)
{
    int64_t S = is;
    for (int q = n - 1; q >= 1; q--) {
        if (ds[q] != S) /* dst dense from q on: so is every q below */
            return false;
        S *= shape[q];
        if (S > PL_BP_MAX_BYTES || S / is > PL_BP_MAX_ELEMS)
            return false;
        if (ds[q - 1] != S || ss[q - 1] != S)
            continue;
        /* src dense over the same dims: their steps, smallest first, each
         * the bytes of those below it */
        bool used[PYLAYOUT_MAX_NDIM] = {false};
        int64_t run = is, lo = 0;
        for (int c = q; c < n; c++) {
            int m = -1;
            for (int k = q; k < n; k++)
                if (!used[k] && (m < 0 || pl_abs(ss[k]) < pl_abs(ss[m])))
                    m = k;
            if (pl_abs(ss[m]) != run)
                break;
            used[m] = true;
            run *= shape[m];
            lo += ss[m] < 0 ? (shape[m] - 1) * ss[m] : 0;
        }
        if (run != S)
            continue;
        /* dst's elements in order, an odometer over dims q.. giving each
         * one's src offset */
        bool moved = false;
        int64_t idx[PYLAYOUT_MAX_NDIM] = {0}, off = -lo;
        for (int64_t j = 0; j < S; j += is) {
            eperm[j / is] = (uint8_t)(off / is);
            moved |= off != j;
            for (int k = n - 1; k >= q; k--) {
                off += ss[k];
                if (++idx[k] < shape[k])
                    break;
                off -= shape[k] * ss[k];
                idx[k] = 0;
            }
        }
        if (!moved) /* the same order in both: canonical dims would have fused */
            continue;
        *q_ret = q;
        *S_ret = S;
        *lo_ret = lo;
        return true;
    }
    return false;
}

/* Runs the copy as rows of blocks (pl_block_dims: dims q.. the blocks,
 * dim q - 1 their rows), units as pl_choose_rows cuts rows; false where
 * the kernels have nothing for blocks of S bytes. */
static bool pl_copy_blocks(const _pylayout_kernels *k, int q, const int64_t *shape, const int64_t *ss,
                           const int64_t *ds, int64_t is, int64_t S, const uint8_t *eperm, const char *src,
                           char *dst, int64_t total_bytes, int nt)
{
    pl_plan p;
    pl_plan_start(&p, PL_ROWS, (size_t)S, src, dst);
    if (!k->block_perm(&p.bp, S, is, eperm))
        return false;
    p.blocks = true;
    const int a = q - 1, b = a - 1;
    p.na = shape[a];
    p.ssa = p.dsa = S;
    p.nb = b >= 0 ? shape[b] : 1;
    p.ssb = b >= 0 ? ss[b] : 0;
    p.dsb = b >= 0 ? ds[b] : 0;
    const int64_t unit = nt > 1 ? pl_max(1, pl_chunk_bytes(total_bytes, nt) / S) : INT64_MAX;
    p.ta = pl_min(p.na, unit);
    p.tb = pl_min(p.nb, pl_max(1, unit / p.ta));
    pl_build_loops(&p, q, shape, ss, ds, a, b, total_bytes);
    p.pf_dist = 0; /* dense rows: the hardware's prefetchers follow them */
    /* Past a third of the L3 (src and dst two thirds of it), through a
     * buffer and streamed: pieces of as many blocks as make whole lines
     * (lcm(S, 64) bytes) and fit the buffer.  Cached stores split lines
     * wherever a superblock does not end on one, and there they lost to
     * streams once the copy left the caches; in them they won.  On the
     * 2-core Zen 5 dev VM, 1 thread, uint8, dst 16 bytes into a line
     * (NumPy's buffers), GB/s, cached / streamed: 7 x 7 transposed 4 MiB
     * 53 / 42, 8 MiB 40 / 42, 12 MiB 22 / 40, 24 MiB 15 / 34; 3 x 3 12 MiB
     * 28 / 32, 24 MiB 21 / 25; BGR as RGB 4 MiB 58 / 43, 12 MiB 27 / 33. */
    const int64_t l3 = _pylayout_l3_bytes();
    if (k->stream_copy != NULL && l3 > 0 && total_bytes >= l3 / 3) {
        int64_t x = S, y = PL_LINE_BYTES;
        while (y != 0) {
            const int64_t r = x % y;
            x = y;
            y = r;
        }
        const int64_t lines = S / x * PL_LINE_BYTES; /* lcm(S, 64) */
        p.blocks_per = lines <= PL_BLOCKS_BUFFER_BYTES ? PL_BLOCKS_BUFFER_BYTES / lines * lines / S
                                                       : PL_BLOCKS_BUFFER_BYTES / S;
        p.stream_out = k->stream_copy;
        p.fence = k->fence;
    }
    pl_run(&p, total_bytes, nt);
    return true;
}

/* The copy as rows of blocks where pl_block_dims finds them and the
 * kernels take them; false (nothing copied) otherwise.  Apart from
 * pl_copy_canonical, whose other copies need none of its frame (its
 * 256-byte table there cost a 1 KB transpose 12-15 ns a call). */
__attribute__((noinline)) static bool pl_blocks(const _pylayout_kernels *k, int n, const int64_t *shape,
                                                const int64_t *ss, const int64_t *ds, int64_t is, const char *src,
                                                char *dst, int64_t total_bytes, int nt)
{
    int q;
    int64_t S, lo;
    uint8_t eperm[PL_BP_MAX_ELEMS];
    return pl_block_dims(n, shape, ss, ds, is, &q, &S, &lo, eperm) &&
           pl_copy_blocks(k, q, shape, ss, ds, is, S, eperm, src + lo, dst, total_bytes, nt);
}

/* ------------------------------------------------------ fused transposes */

/* Transposes whose tiles would read a few bytes of every line they touch:
 * every dim of a 4-D tensor reversed (np.asfortranarray's copy,
 * x.permute(3, 2, 1, 0)) when its innermost dims are short, (N, C, 7, 7)
 * feature maps to (7, 7, C, N), (B, S, H, 64) uint8 to (64, H, S, B).  A
 * plain transpose takes the dst-innermost dim a against the src-innermost
 * b; where b is a few elements long its tiles read a few bytes of each src
 * row, and where a is short they write a few bytes of each dst row, rows a
 * page or more apart, each line read or written in pieces, evicted in
 * between (rows a page apart share their L1 sets).  Here each short side is
 * taken together with the dims that continue it in its own tensor: b with
 * the dims dense after it in src, a with those dense after it in dst.  A
 * unit is then R x C elements whose src rows are runs of C elements and
 * whose dst rows are runs of R, at offsets the levels give
 * (pl_run_fused), through two L1 buffers.
 *
 * A side is short when its run is under a line (under half a line for 8-
 * and 16-byte elements: wider tiles move whole elements in registers and
 * lost here, float64 (16,512,7,7) by (1,3,2,0) 17.8 -> 11.5 GB/s) and its
 * rows are a page or more apart, or, on src's side, its run is 16 bytes or
 * less (more only where dst's side is short too or its rows a line or
 * longer: below).  Each short side must find a dim to continue it, and both runs
 * must then reach PL_FUSE_MIN_BYTES.  Where the rows are close the tiles'
 * lines stay in L1 and they keep them: (8,64,56,56) uint8 by (1,3,0,2),
 * dst rows of 56 bytes 448 apart, 20.8 -> 12.8 GB/s fused.  Groups of 2-8
 * elements through planes (pl_plane_dims) keep their route, taken first:
 * (128,32,32,3) float16 by (0,3,2,1) 31 -> 14 GB/s fused.  A short side
 * that found no dim to continue it ((256,16,1024,8) float16 by (0,3,2,1):
 * dst rows of 32 bytes; its dim continues src's side) lost too, 9.3 ->
 * 4.7 GB/s.  Nor a src run of 17 bytes or more whose dst rows are under
 * a line and close together (a not short): 5-D permutes by (2,3,1,4,0),
 * the goal row's in float16, lost 2-2.5x on the 2-core Intel Xeon dev VM
 * (tiles / fused, 1 thread, GB/s: float16 (27,28,28,28,28) 9.1-9.7 /
 * 3.2-4.5, 2 threads 17.0-18.7 / 6.8-7.1; (20,24,32,32,24) 7.5-8.1 /
 * 2.7-3.9; (20,24,32,32,12) 6.4-6.5 / 4.7-4.9; (16,8,64,64,20) 6.1-6.8 /
 * 2.4-3.1; uint8 (20,24,32,32,16-56) level), where runs of 16 bytes won
 * ((20,24,32,32,8) 4.5-4.6 / 6.7-6.8) and so did dst rows of a line or more
 * ((64,512,12,12) by (3,2,1,0) 2.4-2.5 / 8.8-9.1, (32,256,16,16) 2.8-2.9 /
 * 5.5-5.6).
 *
 * Units of PL_FUSE_DST_RUN_BYTES along dst's rows and PL_FUSE_SRC_RUN_BYTES
 * along src's, within the buffers (uint8 (4096,8,8,4) by (3,2,1,0), 1
 * thread, GB/s, dst x src bytes: 64 x 64 13.2, 128 x 64 17.4, 256 x 128
 * 17.1-17.4, 256 x 256 11.7-17.4, 512 x 64 19-20.6; float32 15.2 / 23.4 /
 * 29-31.5 / 31.7 / 28.2-29.8; (8,16,1024,8) uint8 9.9 / 12.7 / 14.1-14.3 /
 * 14.5 / 9.7-11.1).  Past a quarter of the L3 dst's rows stream.
 *
 * Measured on the 2-core Zen 5 dev VM, torch tensors, copy_into, best of
 * 5, the two routes alternating in one process (a throwaway switch), GB/s
 * before / after at 1 thread, then 2, by (3,2,1,0):
 *   uint8 (4096,8,8,4) 2.7 / 16.0, 4.8 / 26.2; (8,16,1024,8) 2.0 / 15.5,
 *   3.2 / 26.4; (16,512,7,7) 2.8 / 13.6; (32,128,12,64) 3.4 / 13.7, 6.4 /
 *   26.7; (65536,8,8,4) (16 MiB, streamed) 1.4 / 12.6, 2.6 / 21.6;
 *   float16 (4096,8,8,4) 3.3 / 21.3, 6.6 / 38.8; (8,64,56,56) 3.8 / 17.7,
 *   7.0 / 31.2; (16,512,7,7) 4.7 / 15.2, 8.0 / 28.6;
 *   float32 (4096,8,8,4) 6.5 / 31.7, 11.5 / 51.8; (65536,8,8,4) 2.2 / 8.6,
 *   4.1 / 16.2; (16,512,7,7) 10.9 / 12.7, 18.2 / 24.5;
 * and uint8 (512,512,16) by (2,1,0), src rows 8 KiB apart, gathered: 6.7 /
 * 16.2, 12.8 / 28.8 (torch: 0.5-3.9 GB/s in all of these).  A sweep of
 * every order of 4-D shapes with dims of 2-64 and 3-D ones, uint8 to
 * float64, found the rest within the noise. */
#define PL_FUSE_RUN_BYTES 64
#define PL_FUSE_MIN_BYTES 32
#define PL_FUSE_DST_RUN_BYTES 256
#define PL_FUSE_SRC_RUN_BYTES 128

/* Plain transposes whose dst rows are a multiple of a page apart, from the
 * caches: the widths of ML matrices, a (1024, 128) float32 transposed into
 * rows of 1024 floats, a (2048, 256) float16 into rows of 2048, a (4096,
 * 128) uint8 into rows of 4096 bytes.  Every dst row then starts in the
 * same L1 set, and a tile's block stores into 8 to 16 of those rows at a
 * time: more lines of one set than its 12 ways hold while their stores
 * wait, so they are evicted and read again.  A store test (/tmp harness,
 * 64-byte stores into 128 rows 4 KiB apart, in L2) ran 9.5 GB/s one line
 * per row in turn, 30-37 four lines a row or 16 rows a set, 115-135 eight
 * lines of 8 rows (rows 4160 bytes apart: 130 every way); the tiles with
 * the same rows 64 bytes further apart ran 2-4x faster.  Such a copy goes
 * through the fused route's buffers instead: each unit transposed into an
 * L1 buffer whose rows are dense, then copied out a dst run at a time
 * (512 bytes a run, halved until the unit fits the buffers: 256 for 1- and
 * 2-byte elements), units of 128 bytes of each src row (64 for bytes).
 * Where the plain transpose keeps cached tiles (pl_stream_min_bytes); for
 * 2-byte elements, whose crowded streamed tiles were as slow, up to a
 * quarter of the L3 (on Intel cores less: PL_FUSE_CROWDED_DST_INTEL_BYTES).
 * Not where src rows are a page apart too (their
 * gather crowds the same way), nor for 4-byte elements on SSE2 (its 4 x 4
 * tiles were level or 10% ahead), nor 8-byte ones (8 x 8 blocks: level).
 * Measured on the 2-core Zen 5 dev VM, src (R, C) read transposed into dst
 * rows of R elements, pylayout_copy in a loop (/tmp C harness, a throwaway
 * switch), best of a 0.3 s run, GB/s, tiles / fused, 1 thread:
 *   AVX-512: float32 1024 x 128 24.1 / 38.8, 2048 x 128 23.4 / 34.9, 2048
 *   x 256 (2 MiB) 21.9 / 33.9; float16 2048 x 128 24.0 / 30.3, 2048 x 512
 *   (2 MiB, streamed) 13.7 / 20.0-21.5, 2048 x 1024 13.3 / 17.5, 4096 x
 *   1024 13.4 / 16.4, but 8192 x 1024 (16 MiB) 12.8 / 11.5; uint8 4096 x
 *   128 7.4 / 25.9, 4096 x 256 7.3 / 22.8;
 *   2 threads: float32 1024 x 128 50.0 / 69.7, 2048 x 256 37.8 / 59.2;
 *   float16 2048 x 128 32.2 / 55.2; uint8 4096 x 128 11.7 / 40.2, 4096 x
 *   256 12.8 / 43.5;
 *   src and dst 16 bytes into a line (NumPy's buffers): float32 1024 x 128
 *   21.4 / 37.2, 2048 x 256 20.0 / 29.6; float16 2048 x 128 20.5 / 26.0;
 *   uint8 4096 x 128 7.3 / 26.2;
 *   AVX2: float32 1024 x 128 35.1 / 38.3, 2048 x 256 29.2 / 34.5; float16
 *   level; uint8 7.4 / 26.3, 7.2 / 22.5; SSE2: float32 34.2 / 31.5, 28.4 /
 *   25.3; float16 22.8 / 26.8; uint8 7.5 / 24.1, 7.4 / 20.8.
 * Past the thresholds the streamed tiles win: uint8 4096 x 512 (2 MiB)
 * 33.1 / 20.6, float32 2048 x 512 (4 MiB) 32.3 / 21.4.  A kernel storing
 * 8 dst rows a block, whole lines, in passes of 8 lines (AVX-512 float32)
 * ran as fast as the buffers: 38.3 at 1024 x 128, 29.7 at 2048 x 256.
 *
 * The runs are copied out by the SIMD path's row kernel (rows_x86.c:
 * 64-byte moves on AVX-512) where it has one, else 16 bytes a move inline
 * (pl_copy_run).  That inline loop, one load and one store an iteration,
 * ran at the speed of its placement in the library's code: on the Intel
 * Xeon dev VM float32 1024 x 128 (tools/bench_incache, 1 thread, dst on a
 * line) copied at 26 GB/s in a build whose loop sat within one 64-byte
 * line of code and 17-18 in builds where it straddled two, with plan.c
 * unchanged (commit 5cba080, which changed only copy_x86.c, moved it
 * there).  The row kernel lives in its own function: 24.2-26.3 GB/s in
 * both builds measured (session 47). */
#define PL_FUSE_CROWDED_DST_RUN_BYTES 512
#define PL_FUSE_CROWDED_SRC_RUN_BYTES 128
#define PL_FUSE_CROWDED_BYTE_SRC_RUN_BYTES 64

/* On Intel cores (_pylayout_intel_cores) the buffers lost to the tiles
 * from L3 and at the top of L2, where on Zen 5 they won: float32 takes
 * them below this many bytes, float16 where its tiles are cached (as
 * bytes do), not up to a quarter of the L3.  Measured on the 2-core Intel
 * Xeon dev VM (AVX-512, AMX; 48 KiB L1d, 2 MiB L2 a core), the same
 * harness, both ways in one build (a throwaway switch), three rounds,
 * GB/s, tiles / fused, 1 thread: float32 1024 x 128 28.2-28.5 / 26.5-29.2,
 * 1024 x 192 24.7-25.8 / 25.3-26.1, 1024 x 224 23.9-24.1 / 24.0-24.3,
 * 1024 x 256 (1 MiB) 20.6-22.9 / 18.7-19.8; float16 2048 x 128 12.6-13.3 /
 * 18.7-19.4, 2048 x 256 11.0-12.1 / 12.3-13.7, 2048 x 320 9.3-10.5 /
 * 7.6-10.0, 2048 x 384 (1.5 MiB, streamed tiles) 12.0-12.4 / 6.6-8.0;
 * 2 threads: float32 1024 x 128 47.4-48.5 / 49.0-50.0, 1024 x 256
 * 47.3-49.1 / 43.5-45.7; float16 2048 x 256 22.1-23.2 / 25.6-29.1, 2048
 * x 384 20.3-21.9 / 25.0-27.3.  Against a build of 21b66bc (before the
 * buffers), two rounds: float16 2048 x 512 11.6-11.8 / 6.5-6.6 (2 threads
 * 20.9-21.7 / 16.6-16.7), 2048 x 1024 10.3-10.4 / 6.8-7.0 (19.4-20.8 /
 * 14.1-15.0); uint8 gained there as on Zen 5: 4096 x 128 5.5 / 17.1-17.9,
 * 4096 x 256 5.2 / 11.9-12.0 (2 threads 9.2-9.5 / 23.7-24.0). */
#define PL_FUSE_CROWDED_DST_INTEL_BYTES ((int64_t)1024 * 1024)

/* The mirror case, uint8 src rows a multiple of a page apart (a (128,
 * 4096) uint8 read transposed) and dst rows not, from the caches: the tile
 * reads 16 rows of one L1 set a block.  Each unit's src rows are gathered
 * into an L1 buffer, runs of 256 bytes of 64 rows (each row's lines in
 * turn), and transposed from there straight into dst.  Same harness, GB/s,
 * tiles / gathered, AVX-512, 1 thread: 128 x 4096 14.0 / 25.7, 256 x 4096
 * 14.8 / 22.8, 352 x 4096 (1.4 MiB) 15.3 / 24.7; 2 threads 27.9 / 47.6,
 * 25.4 / 42.9, 27.1 / 40.3; AVX2 14.0 / 27.2, 14.9 / 23.8; SSE2 12.9 /
 * 22.9, 13.4 / 21.8.  Not for wider elements: float16 level on AVX2 and
 * SSE2 (AVX-512 23.2 / 29.1 at 128 x 2048), float32 on AVX-512 30% ahead
 * at 0.5 MiB, level at 1 MiB and 7-20% behind at 2 MiB (448 x 1024: 38.0
 * / 35.1, 2 threads 69.0 / 55.8), and behind on SSE2 (40.6 / 29.3);
 * float64 level.  (On AVX2 float32 gained 2x: 17.5 / 38.0, 17.9 / 31.7.)
 * Not on Intel cores (_pylayout_intel_cores): on the 2-core Intel Xeon dev
 * VM, against a build of 21b66bc (before this route), three rounds, 1 / 2
 * threads: 128 x 4096 18.6-19.0 / 18.6-19.0 and 34.0-34.6 / 33.3-33.8, 64
 * x 8192 19.6 / 19.6-20.0, 256 x 4096 13.5-13.8 / 10.2-11.1 and 27.5-28.7
 * / 22.2-23.9, 352 x 4096 9.7-10.3 / 10.7-10.9 and 26.5-27.9 / 22.5-25.2. */
#define PL_FUSE_CROWDED_SRC_GATHER_BYTES 256
#define PL_FUSE_CROWDED_SRC_ROWS 64

/* Whether the plain transpose of uint8 dims b (src-innermost) and a
 * (dst-innermost) is one whose src rows crowd an L1 set and its dst rows
 * do not (see PL_FUSE_CROWDED_SRC_GATHER_BYTES). */
static bool pl_fuse_crowded_src(const int64_t *shape, const int64_t *ss, const int64_t *ds, int a, int b,
                                int64_t is, int64_t stream_bytes, int nt)
{
    return is == 1 && pl_abs(ss[a]) % PL_PAGE_BYTES == 0 && pl_abs(ds[b]) % PL_PAGE_BYTES != 0 &&
           shape[a] >= PL_LINE_BYTES && shape[b] >= PL_FUSE_CROWDED_SRC_GATHER_BYTES &&
           stream_bytes < pl_stream_min_bytes(is, pl_abs(ds[b]), false, true, nt) &&
           !_pylayout_intel_cores(); /* last: it reads the environment */
}

/* Whether the plain transpose of dims b (src-innermost) and a (dst-
 * innermost) is one whose dst rows crowd an L1 set (see
 * PL_FUSE_CROWDED_DST_RUN_BYTES). */
static bool pl_fuse_crowded_dst(const _pylayout_kernels *k, const int64_t *shape, const int64_t *ss,
                                const int64_t *ds, int a, int b, int64_t is, int64_t stream_bytes, int nt)
{
    if (pl_abs(ds[b]) % PL_PAGE_BYTES != 0 || pl_abs(ss[a]) % PL_PAGE_BYTES == 0 ||
        shape[a] * is < PL_FUSE_CROWDED_DST_RUN_BYTES || shape[b] * is < PL_LINE_BYTES)
        return false;
    /* _pylayout_intel_cores reads the environment: asked only of such copies */
    const bool cached = stream_bytes < pl_stream_min_bytes(is, pl_abs(ds[b]), false, true, nt);
    switch (is) {
    case 1: return cached;
    case 2: return _pylayout_intel_cores() ? cached : stream_bytes < pl_stream_min_wide_bytes();
    case 4:
        return k->tile_wrap[PL_SIZE4] != NULL && cached &&
               (!_pylayout_intel_cores() || stream_bytes < PL_FUSE_CROWDED_DST_INTEL_BYTES);
    default: return false;
    }
}

/* The copy as a fused transpose where the rule above takes it; false
 * (nothing copied) otherwise.  Apart from pl_copy_canonical, as pl_blocks. */

__attribute__((noinline)) static bool pl_fused(const _pylayout_kernels *k, int n, const int64_t *shape,
                                               const int64_t *ss, const int64_t *ds, int64_t is, const char *src,
                                               char *dst, int64_t total_bytes, int64_t stream_bytes, int nt)
{
    const int lg = _pl_size_index((size_t)is);
    int b;
    /* a 2-D copy takes this route only for rows a page apart (a small
     * transpose's call skips pl_choose_kind here) */
    if (n == 2 && pl_abs(ss[1]) % PL_PAGE_BYTES != 0 && pl_abs(ds[0]) % PL_PAGE_BYTES != 0)
        return false;
    if (n < 2 || lg < 0 || k->tile[lg] == NULL || pl_choose_kind(n, ss, ds, is, &b) != PL_TRANSPOSE)
        return false;
    const int a = n - 1;
    if (ds[a] != is || ss[b] != is)
        return false;
    int la[PL_FUSE_LEVELS + 1] = {a}, lb[PL_FUSE_LEVELS + 1] = {b}, nla = 1, nlb = 1;
    int64_t runa = shape[a] * is, runb = shape[b] * is;
    const int64_t lim = is >= 8 ? PL_LINE_BYTES / 2 : PL_LINE_BYTES - 1;
    const bool short_a = n >= 3 && runa <= lim && pl_abs(ds[b]) >= PL_PAGE_BYTES;
    const bool short_b = n >= 3 && runb <= lim &&
                         (runb <= 16 || (pl_abs(ss[a]) >= PL_PAGE_BYTES && (short_a || runa >= PL_LINE_BYTES)));
    /* runs of a line or more: nothing is fused below a or b */
    const bool crowded = pl_fuse_crowded_dst(k, shape, ss, ds, a, b, is, stream_bytes, nt);
    const bool crowded_src = pl_fuse_crowded_src(shape, ss, ds, a, b, is, stream_bytes, nt);
    if (!short_a && !short_b && !crowded && !crowded_src)
        return false;
    bool used[PYLAYOUT_MAX_NDIM] = {false};
    used[a] = used[b] = true;
    for (;;) {
        const bool wa = runa < PL_FUSE_RUN_BYTES && nla <= PL_FUSE_LEVELS;
        const bool wb = runb < PL_FUSE_RUN_BYTES && nlb <= PL_FUSE_LEVELS;
        int ca = -1, cb = -1;
        for (int q = 0; q < n; q++)
            if (!used[q]) {
                if (wa && ds[q] == runa)
                    ca = q;
                if (wb && ss[q] == runb)
                    cb = q;
            }
        if (ca >= 0 && (cb < 0 || runa <= runb)) {
            la[nla++] = ca;
            used[ca] = true;
            runa *= shape[ca];
        } else if (cb >= 0) {
            lb[nlb++] = cb;
            used[cb] = true;
            runb *= shape[cb];
        } else {
            break;
        }
    }
    if ((short_a && nla == 1) || (short_b && nlb == 1) || pl_min(runa, runb) < PL_FUSE_MIN_BYTES)
        return false;

    pl_plan p;
    pl_plan_start(&p, PL_FUSED, (size_t)is, src, dst);
    p.tile = k->tile[lg];
    const int pa = la[nla - 1], pb = lb[nlb - 1];
    p.nfa = nla - 1;
    p.nfb = nlb - 1;
    p.fa_gather = p.nfa > 0 || pl_abs(ss[la[nla - 1]]) % PL_CROWDED_ROW_BYTES == 0;
    p.fa_in = p.fb_in = 1;
    for (int l = 0; l < p.nfa; l++) {
        p.fa_count[l] = shape[la[l]];
        p.fa_step[l] = ss[la[l]];
        p.fa_in *= shape[la[l]];
    }
    for (int l = 0; l < p.nfb; l++) {
        p.fb_count[l] = shape[lb[l]];
        p.fb_step[l] = ds[lb[l]];
        p.fb_in *= shape[lb[l]];
    }
    p.na = shape[pa];
    p.ssa = ss[pa];
    p.dsa = ds[pa];
    p.nb = shape[pb];
    p.ssb = ss[pb];
    p.dsb = ds[pb];
    const int64_t dst_run = crowded_src ? PL_FUSE_CROWDED_SRC_ROWS * is
                            : crowded   ? PL_FUSE_CROWDED_DST_RUN_BYTES
                                        : PL_FUSE_DST_RUN_BYTES;
    const int64_t src_run = crowded_src ? PL_FUSE_CROWDED_SRC_GATHER_BYTES
                            : !crowded  ? PL_FUSE_SRC_RUN_BYTES
                            : is == 1   ? PL_FUSE_CROWDED_BYTE_SRC_RUN_BYTES
                                        : PL_FUSE_CROWDED_SRC_RUN_BYTES;
    p.fb_direct = crowded_src; /* gathered (fa_gather: its rows are crowded), then into dst */
    p.rows = crowded && !crowded_src ? k->rows : NULL; /* the copy-out: see PL_FUSE_CROWDED_DST_RUN_BYTES */
    p.ta = pl_min(p.na, pl_max(1, dst_run / (p.fa_in * is)));
    p.tb = pl_min(p.nb, pl_max(1, src_run / (p.fb_in * is)));
    while (p.ta * p.fa_in * p.tb * p.fb_in * is > PL_FUSE_BUFFER_BYTES) {
        if (p.ta > 1)
            p.ta = (p.ta + 1) / 2;
        else if (p.tb > 1)
            p.tb = (p.tb + 1) / 2;
        else
            return false;
    }
    int64_t cs[PYLAYOUT_MAX_NDIM], css[PYLAYOUT_MAX_NDIM], cds[PYLAYOUT_MAX_NDIM];
    int m = 0, a2 = -1, b2 = -1;
    for (int q = 0; q < n; q++) {
        if (used[q] && q != pa && q != pb)
            continue;
        if (q == pa)
            a2 = m;
        if (q == pb)
            b2 = m;
        cs[m] = shape[q];
        css[m] = ss[q];
        cds[m] = ds[q];
        m++;
    }
    pl_build_loops(&p, m, cs, css, cds, a2, b2, total_bytes);
    if (k->stream_copy != NULL && total_bytes >= pl_stream_min_wide_bytes()) {
        p.stream_out = k->stream_copy;
        p.fence = k->fence;
    }
    pl_run(&p, total_bytes, nt);
    return true;
}

/* Whether a regrouped copy past the cache of A x B elements of `is` bytes
 * goes to the TRANSPOSE tiles instead, which stream dst there: 16-byte
 * elements whose dst groups are half a line or whole lines, and 8 x 8
 * blocks of 8-byte elements.  On the 2-core Zen 5 dev VM, 64 MB, tiles /
 * regrouped, GB/s, 1 thread: complex128 A = 8, B = 2-8 22.2-32.5 /
 * 16.8-18.9, A = 4, B = 4-8 21.4-29.5 / 15.4-17.1, A = 2, B = 4-8
 * 19.1-21.4 / 15.5-18.8 (2 threads A = 2, B = 4 36.8 / 24.1), float64 A =
 * B = 8 26.2 / 17.9; but complex128 A = 3, 5 or 7 6.1-16.4 / 16.3-18.3,
 * float64 A = 8, B = 6 or 7 5.8-8.5 / 15.7-16.4. */
static bool pl_regroup_streams_wins(int64_t A, int64_t B, int64_t is)
{
    if (is == 16)
        return (A == 2 || A == 4 || A == 8) && A * B >= 8;
    return is == 8 && A == 8 && B == 8;
}

/* Copies whose src holds groups of B elements packed and dst groups of A
 * other elements, 2 <= A, B <= PL_THIN_MAX_P, both packed along one dim j:
 * dst[..., b, ..., j, a] = src[..., a, ..., j, b], where src steps B
 * elements along j and dst A.  Small matrices between batch layouts,
 * (A, N, B) -> (B, N, A); planar data with a short channel dim moved
 * across ((2, T, 4) by (2, 1, 0)).  Per j it is an A x B transpose: the
 * tiles took one such tile a unit, a few bytes from rows far apart, and
 * the fused route finds no dim to lengthen both runs with (j lengthens
 * both).  Each unit is instead Jt groups along j: the A src rows (Jt * B
 * elements each, dense) split into planes (unzip), the planes interleaved
 * into the B dst rows (zip, Jt * A elements each, dense), all through an
 * L1 buffer: every read and write is a dense run.  False (nothing copied)
 * where the copy is not one, or is one that the tiles stream
 * (pl_regroup_streams_wins).
 *
 * On the 2-core Zen 5 dev VM, (A, J, B) by (2, 1, 0), J sized to the
 * bytes, A in {2, 3, 4, 5, 7, 8}, B in {2, 3, 4, 7, 8}, torch tensors,
 * copy_into, both routes in one process (a throwaway switch), GB/s, tiles
 * -> regrouped (torch), 1 thread:
 *   1 MB: uint8 0.3-2.1 -> 11.7-39.1 (2.1-3.6), float16 0.5-8.0 ->
 *   12.5-38.9 (4.1-7.0), float32 1.1-15.2 -> 20.1-39.5 (8.7-14.7), float64
 *   2.0-26.9 -> 32.2-41.3 (10.1-21.9), complex128 8.0-38.4 -> 35.2-42.2
 *   (18.7-34.7): all 150 above torch, and at least level (the least,
 *   complex128 A = B = 8: 38.4 -> 37.2);
 *   64 MB: uint8 0.3-1.8 -> 7.3-22.0 (0.7-3.5), float16 0.5-7.6 ->
 *   8.9-21.9 (1.0-6.8), float32 1.0-14.0 -> 12.7-20.3 (1.9-11.7);
 * 2 threads, A in {2, 3, 8}, B in {2, 4, 7}: 1 MB uint8 0.5-2.9 ->
 * 17.9-65.3 (4.1-6.9), float32 1.9-12.3 -> 30.5-67.9 (12.4-25.1); 64 MB
 * uint8 0.5-2.7 -> 14.8-36.9 (1.3-4.7), float32 2.0-8.1 -> 19.7-30.1
 * (4.0-21.2); and the permutes (4,184632,7) float16 by (2,1,0) 2.5 -> 14.2
 * (4.8), 2 threads 4.8 -> 28.4 (9.8); (100,8,24,7) float32 by (3,0,2,1)
 * 7.7 -> 21.2 (10.5); (7,197,32,8) float32 by (3,1,2,0) 8.3 -> 20.3 (9.5). */
static bool pl_regroup(const _pylayout_kernels *k, int n, const int64_t *shape, const int64_t *ss, const int64_t *ds,
                       int64_t is, const char *src, char *dst, int64_t total_bytes, int nt)
{
    const int lg = _pl_size_index((size_t)is), a = n - 1;
    if (n < 3 || lg < 0 || ds[a] != is || ss[a] == is || shape[a] < 2 || shape[a] > PL_THIN_MAX_P)
        return false;
    int b = -1, j = -1;
    for (int q = 0; q < a; q++)
        if (ss[q] == is)
            b = q;
    if (b < 0 || shape[b] < 2 || shape[b] > PL_THIN_MAX_P)
        return false;
    const int64_t A = shape[a], B = shape[b];
    for (int q = 0; q < a; q++)
        if (q != b && ss[q] == B * is && ds[q] == A * is && shape[q] >= PL_REGROUP_MIN_GROUPS)
            j = q;
    const bool big = total_bytes > pl_stream_min_wide_bytes();
    if (j < 0 || (big && pl_regroup_streams_wins(A, B, is)))
        return false;
    const _pylayout_thin_kernels *t = k->thin != NULL ? k->thin : &_pylayout_thin_portable;
    pl_plan p;
    pl_plan_start(&p, PL_REGROUP, (size_t)is, src, dst);
    p.regroup_a = A;
    p.regroup_b = B;
    p.zip = t->zip[A - 2][lg] != NULL ? t->zip[A - 2][lg] : _pylayout_thin_portable.zip[A - 2][lg];
    p.unzip = t->unzip[B - 2][lg] != NULL ? t->unzip[B - 2][lg] : _pylayout_thin_portable.unzip[B - 2][lg];
    p.ssa = ss[a];
    p.dsb = ds[b];
    /* units: the other dims in dst order, then j in tiles of Jt groups
     * (pl_run_at reads a unit's groups from the last loop, as a and b) */
    int nl = 0;
    for (int q = 0; q < n; q++)
        if (q != a && q != b && q != j) {
            p.count[nl] = shape[q];
            p.sstep[nl] = ss[q];
            p.dstep[nl] = ds[q];
            nl++;
        }
    p.na = p.nb = shape[j];
    p.planes_ahead = big;
    p.ta = p.tb = pl_min(shape[j], pl_max(1, (big ? PL_REGROUP_AHEAD_BYTES : PL_REGROUP_BUFFER_BYTES) / (A * B * is)));
    p.count[nl] = pl_ceil_div(p.na, p.ta);
    p.sstep[nl] = p.ta * ss[j];
    p.dstep[nl] = p.ta * ds[j];
    p.bloop = nl;
    p.nloop = nl + 1;
    pl_run(&p, total_bytes, nt);
    return true;
}

/* Whether the canonical copy's innermost dim, contiguous in both tensors,
 * is g = 6 or 12 bytes of elements narrower than g / 3, and the copy a
 * transpose of such groups whose 3-element groups of g / 3 bytes this path
 * transposes in registers (the tile3 kernels).  Those take the copy as 3
 * elements of g / 3 bytes: groups of 6 uint8 as 3 of 2 bytes, 12 uint8 or
 * 6 float16 as 3 of 4.  As narrow elements they went through planes of 6
 * or 12 (PL_THIN_MAX_P and under) or tiles of 12-byte rows.  On the 2-core
 * Zen 5 dev VM, (a, a, g) uint8 by (1, 0, 2), copy_into of torch tensors,
 * 1 thread, GB/s, as g uint8 / as 3 wider elements: 2 MB g = 6 6.1 / 39.5,
 * g = 12 14.5 / 49.4; 24 MB g = 6 5.5 / 9.5, g = 12 5.6 / 11.1 (AVX2: 6.0
 * / 22.4, 15.2 / 26.8, 5.1 / 8.1, 4.2 / 9.0).  Not where the path has no
 * tile3 (SSE2 and portable: g = 12 in cache 12.1-12.4 / 5.1-8.1), nor for
 * g = 24 as 3 of 8 bytes (no tile3 for them: 28.7 / 18.0 in cache). */
static bool pl_three_wider(const _pylayout_kernels *k, int n, const int64_t *ss, const int64_t *ds, int64_t is,
                           int64_t g)
{
    if (n < 2 || (g != 6 && g != 12) || is >= g / 3 || ss[n - 1] != is || ds[n - 1] != is ||
        k->tile3[_pl_size_index((size_t)(g / 3))] == NULL)
        return false;
    int b;
    return pl_choose_kind(n - 1, ss, ds, g, &b) == PL_TRANSPOSE;
}

/* ----------------------------------------------------------------- driver */

/* _pylayout_copy_canonical, with the size that decides whether a transpose
 * streams (stream_bytes; 0: this copy's own).  The columns split off a
 * large copy below stream or not as the whole copy would: 1024 x 1024
 * float32 transposed into a NumPy array's buffer (16 bytes into a line)
 * left a rest of 4 MiB less 48 bytes a row, under PL_STREAM_MIN_BYTES, which
 * then ran as cached tiles at 242 us against 124 us streamed.  It decides
 * whether the copy may go parallel too: the rest of a 1 MiB float32
 * transpose split at dst's line (PL_ALIGN_SPLIT_ROW_BYTES) fell under the
 * 1 MiB parallel threshold and ran on one thread.  par_min: that threshold,
 * which _pylayout_copy_canonical lowers for a copy in a run. */
static void pl_copy_canonical(int n, const int64_t *shape, const int64_t *ss, const int64_t *ds, size_t itemsize,
                              const char *src, char *dst, int nthreads, int64_t par_min, int64_t stream_bytes,
                              const pl_groups *pg)
{
    const int64_t is = (int64_t)itemsize;
    int64_t total_bytes = is;
    for (int k = 0; k < n; k++)
        total_bytes *= shape[k];
    if (stream_bytes == 0)
        stream_bytes = total_bytes;
    int nt = 1; /* threads for this copy: asked for, and clamped to the machine, only when it may go parallel */
    if (nthreads != 1 && stream_bytes >= par_min) { /* smaller: caller alone, unchunked */
        if (nthreads < 1)
            nthreads = _pylayout_threads_setting();
        nt = (int)pl_min(nthreads, _pylayout_machine_threads());
    }

    if (n == 0) {
        _pylayout_note_copy_threads(1);
        memcpy(dst, src, itemsize);
        return;
    }
    /* A dst-innermost dim contiguous in both of 2, 4, 8 or 16 bytes is one
     * element of that size: (2048,2048,2) float32 by (1,0,2), complex pairs
     * transposed, is then a 2-D transpose of 8-byte elements (the tile
     * kernels) instead of 4M rows of 8 bytes.  Moves copy bytes, and every
     * kernel reads and writes at any byte address (unaligned loads, streams
     * only to whole lines), so the wider element needs no alignment. */
    const int64_t group = shape[n - 1] * (int64_t)itemsize;
    if (pg == NULL && n >= 2 && ss[n - 1] == (int64_t)itemsize && ds[n - 1] == (int64_t)itemsize && group <= 16 &&
        _pl_size_index((size_t)group) >= 0) {
        pl_copy_canonical(n - 1, shape, ss, ds, (size_t)group, src, dst, nthreads, par_min, stream_bytes, NULL);
        return;
    }
    const _pylayout_kernels *k = _pylayout_kernels_get();
    /* One of 6 or 12 bytes transposed as a group is three elements of 2 or
     * 4 bytes, where the path transposes 3-element groups in registers
     * (tile3): 6-channel uint8 pixels, 12-channel uint8 or 6-channel
     * float16 ones, (N, M, 6) by (1, 0, 2).  As 6 or 12 narrow elements
     * they went through planes or tiles of a few bytes: see
     * pl_three_wider. */
    if (pg == NULL && pl_three_wider(k, n, ss, ds, is, group)) {
        int64_t ss3[PYLAYOUT_MAX_NDIM], ds3[PYLAYOUT_MAX_NDIM], shape3[PYLAYOUT_MAX_NDIM];
        memcpy(shape3, shape, (size_t)n * sizeof *shape3);
        memcpy(ss3, ss, (size_t)n * sizeof *ss3);
        memcpy(ds3, ds, (size_t)n * sizeof *ds3);
        shape3[n - 1] = 3;
        ss3[n - 1] = ds3[n - 1] = group / 3;
        pl_copy_canonical(n, shape3, ss3, ds3, (size_t)(group / 3), src, dst, nthreads, par_min, stream_bytes, NULL);
        return;
    }
    if (pg == NULL && k->block_perm != NULL && pl_blocks(k, n, shape, ss, ds, is, src, dst, total_bytes, nt))
        return;
    /* Longer ones are one element where that makes the copy a streamed
     * transpose of groups (pl_group_streams). */
    if (pg == NULL && pl_group_streams(k, n, ss, ds, is, group, dst, stream_bytes, nt)) {
        pl_copy_canonical(n - 1, shape, ss, ds, (size_t)group, src, dst, nthreads, par_min, stream_bytes, NULL);
        return;
    }
    if (pg == NULL && pl_regroup(k, n, shape, ss, ds, is, src, dst, total_bytes, nt))
        return;
    /* and short dims otherwise a transpose of planes */
    pl_groups planes;
    int64_t rshape[PYLAYOUT_MAX_NDIM], rss[PYLAYOUT_MAX_NDIM], rds[PYLAYOUT_MAX_NDIM];
    if (pg == NULL && pl_plane_dims(k, n, shape, ss, ds, is, &planes, rshape, rss, rds)) {
        pl_copy_canonical(n - 1, rshape, rss, rds, (size_t)planes.P * itemsize, src, dst, nthreads, par_min,
                          stream_bytes, &planes);
        return;
    }

    if (pg == NULL && pl_fused(k, n, shape, ss, ds, is, src, dst, total_bytes, stream_bytes, nt))
        return;
    const int a = n - 1; /* the dst-innermost dim */
    int b;
    pl_plan p;
    pl_plan_start(&p, pl_choose_kind(n, ss, ds, is, &b), itemsize, src, dst);
    if (pg == NULL && p.kind == PL_ROWS)
        b = pl_row_block_dim(n, shape, ss, b, is, total_bytes, &p.row_blocks);
    p.na = shape[a];
    p.ssa = ss[a];
    p.dsa = ds[a];
    p.nb = b >= 0 ? shape[b] : 1;
    p.ssb = b >= 0 ? ss[b] : 0;
    p.dsb = b >= 0 ? ds[b] : 0;
    /* A transpose whose src steps back along b, one element at a time
     * (NumPy's np.rot90(a) = a[:, ::-1].T: dst row j is src column n - 1 -
     * j) runs with b backwards in both: src forwards along b, as the tile
     * kernels read it, and dst's rows last first (dsb < 0, which every
     * transpose kernel and the thin unzips take; the wrapped tiles and the
     * thin zips, which want dense dst rows, do not run), and so does one of
     * pixels through planes
     * (np.rot90(img) of an HWC image: pl_group_copy).  Each went element
     * by element, or pixel by pixel.  On the 2-core Zen 5 dev VM, GB/s, 1
     * thread / 2 (python -m pylayout bench --only np.rot90), before /
     * after: float32 (2048, 2048) 2.1 / 25, 4.1 / 34; uint8 (1080,1920,3)
     * 2.3 / 35, 4.3 / 62 (NumPy 0.6 and 0.9). */
    if (p.kind == PL_TRANSPOSE && p.ssb == -is) {
        p.src += (p.nb - 1) * p.ssb;
        p.dst += (p.nb - 1) * p.dsb;
        p.ssb = is;
        p.dsb = -p.dsb;
    }

    if (pg != NULL) {
        int64_t outer = 1;
        for (int q = 0; q < n; q++)
            outer *= q == a || q == b ? 1 : shape[q];
        pl_choose_planes(&p, k, pg, total_bytes, stream_bytes, outer, nt);
    } else if (p.kind == PL_TRANSPOSE && pl_choose_thin(&p, k)) {
        /* a thin transpose: kernels and units chosen */
    } else if (p.kind != PL_TRANSPOSE) {
        pl_choose_rows(&p, k, total_bytes, nt);
    } else {
        const int64_t head = pl_choose_transpose(&p, k, a, ds, stream_bytes, nt);
        if (head != 0) {
            /* dst is off its lines by whole elements, the same in every
             * row (NumPy's large buffers start 16 bytes into a line):
             * copy those first columns on their own, then the rest from a
             * line-aligned dst, streamed or with every store on a line;
             * the rest may go parallel as the whole copy would */
            int64_t part[PYLAYOUT_MAX_NDIM];
            memcpy(part, shape, (size_t)n * sizeof *part);
            part[a] = head / is;
            pl_copy_canonical(n, part, ss, ds, itemsize, src, dst, nthreads, par_min, 0, NULL);
            part[a] = shape[a] - head / is;
            pl_copy_canonical(n, part, ss, ds, itemsize, src + head / is * ss[a], dst + head, nthreads, par_min,
                              stream_bytes, NULL);
            return;
        }
    }
    pl_build_loops(&p, n, shape, ss, ds, a, b, total_bytes);
    p.backward = p.tile_back != NULL && pl_repeats(&p, total_bytes);
    pl_run(&p, total_bytes, nt);
}

void _pylayout_copy_canonical(int n, const int64_t *shape, const int64_t *ss, const int64_t *ds, size_t itemsize,
                              const char *src, char *dst, int nthreads)
{
    /* Copies the size of a run's (_pylayout_parallel_min_bytes) go parallel
     * only in one; outside one they run uncut, and are timed to tell
     * whether the next copy comes in one. */
    int64_t bytes = (int64_t)itemsize;
    for (int k = 0; k < n; k++)
        bytes *= shape[k];
    int64_t par_min = _pylayout_parallel_min_bytes(false), t0 = -1;
    if (nthreads != 1 && bytes < par_min && bytes >= _pylayout_parallel_min_bytes(true) &&
        (nthreads > 1 || _pylayout_threads_setting() > 1) && _pylayout_copy_in_run(&t0)) {
        par_min = _pylayout_parallel_min_bytes(true);
        t0 = -1;
    }
    pl_copy_canonical(n, shape, ss, ds, itemsize, src, dst, nthreads, par_min, 0, NULL);
    if (t0 >= 0)
        _pylayout_uncut_copy_done(t0);
}
