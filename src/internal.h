/*
 * internal.h - helpers shared by pylayout's C sources.  Not installed.
 * Non-static symbols carry the _pylayout_ prefix so they never collide.
 */
#ifndef PYLAYOUT_INTERNAL_H
#define PYLAYOUT_INTERNAL_H

#include "pylayout.h"

#if defined(__GNUC__)
#define PL_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define PL_PRINTF(a, b)
#endif

/* Records a detailed message for pylayout_last_error() on this thread and
 * returns `status`, so that callers can write
 *     return _pylayout_fail(PYLAYOUT_ERR_SHAPE_MISMATCH, "dim %d: ...", d);  */
pylayout_status _pylayout_fail(pylayout_status status, const char *fmt, ...) PL_PRINTF(2, 3);

/* Clears this thread's last-error message (called on entry to public functions
 * that succeed, so stale text never describes a later success). */
void _pylayout_clear_error(void);

/* Bytes per element of a supported dtype, or 0 if pylayout cannot handle it
 * (lanes != 1, sub-byte types, opaque handles, unknown codes). */
size_t _pylayout_itemsize(DLDataType dtype);

/* "float32", "bfloat16", "complex64", "bool", ... or NULL if unsupported. */
const char *_pylayout_dtype_name(DLDataType dtype);

/* "cpu", "cuda", "rocm", ... ("device type N" for unknown types, into a static buffer). */
const char *_pylayout_device_name(int32_t device_type);

/* True for devices whose memory the CPU can read and write directly
 * (CPU, CUDAHost, ROCMHost, CUDAManaged). */
bool _pylayout_device_is_host(DLDevice device);

/* Validates `t` like pylayout_validate and, on success, fills strides_out
 * (PYLAYOUT_MAX_NDIM entries) with explicit element strides (row-major when
 * t->strides is NULL).  `what` names the tensor in error messages ("src"). */
pylayout_status _pylayout_check(const DLTensor *t, const char *what, int64_t *strides_out);

/* Lowest and one-past-highest byte offsets, relative to (char *)data +
 * byte_offset, touched by a valid non-empty tensor with these strides.
 * lo <= 0 < hi.  Returns INVALID_TENSOR if they overflow int64. */
pylayout_status _pylayout_extent(int32_t ndim, const int64_t *shape, const int64_t *strides,
                                 size_t itemsize, int64_t *lo_ret, int64_t *hi_ret);

/* True if no byte of the tensor of `shape` and element strides sa whose
 * element 0 starts at byte address pa can be a byte of the one of the
 * same shape with strides sb at pb, both of `itemsize`-byte elements, non-
 * empty, with extents that fit int64 (_pylayout_extent): some stride M
 * (bytes) of either puts every byte of each in an arc of the residues mod
 * M, and the two arcs do not meet.  x[:, 0] and x[:, 1] (every byte of
 * the first 0 mod two elements, of the second 1), even rows and odd ones,
 * the real and imaginary parts of complex numbers.  Conservative: false
 * means they may share a byte. */
bool _pylayout_views_apart(int32_t ndim, const int64_t *shape, size_t itemsize, const int64_t *sa, uintptr_t pa,
                           const int64_t *sb, uintptr_t pb);

/* True if two distinct indices of a tensor with these shape and element
 * strides can reach the same element (a stride-0 dim of size > 1, or
 * strides that interleave), storing the offending dim in *dim_ret when
 * dim_ret is not NULL.  Conservative: false means certainly disjoint. */
bool _pylayout_self_overlaps(int32_t ndim, const int64_t *shape, const int64_t *strides, int *dim_ret);

/* Allocation with 64-byte alignment (size 0 gives a valid unique pointer);
 * large blocks are 2 MiB aligned and may come from the reuse cache
 * (alloc.c).  Free with the same nbytes. */
void *_pylayout_aligned_alloc(size_t nbytes);
void _pylayout_aligned_free(void *p, size_t nbytes);

/* Unmaps every block the reuse cache holds (it stays on, with its limit):
 * for an allocation that failed, here or in the caller's own code, and is
 * about to be tried again. */
void _pylayout_cache_release(void);

/* Reads a byte count as the PYLAYOUT_* variables write it: a whole number,
 * optionally followed by K, M, G or T (powers of 1024; "512M", "512MiB",
 * "1G" and "536870912" alike).  False, leaving *bytes_ret alone, for
 * anything else ("1e9", "-5", "1.5G", "", overflow). */
bool _pylayout_parse_bytes(const char *text, int64_t *bytes_ret);

/* ----------------------------------------------------------- warnings.c */

/* Warnings pylayout gives at most once per process, one flag per kind. */
typedef enum pl_warning {
    PL_WARN_THREADS_CLAMPED, /* a thread-count request above what the machine runs */
    PL_WARN_THREADS_ENV,     /* a malformed PYLAYOUT_NUM_THREADS */
    PL_WARN_CACHE_ENV,       /* a malformed PYLAYOUT_CACHE_LIMIT */
    PL_WARN_PARALLEL_ENV,    /* a malformed PYLAYOUT_PARALLEL_MIN_BYTES */
    PL_WARN_KINDS
} pl_warning;

/* Prints "pylayout: warning: <message>" to stderr the first time `kind` is
 * raised in this process and returns true; afterwards does nothing.  For
 * environment variables, which the C core reads at times no caller chose
 * (libgomp reports bad OMP_* values on stderr the same way). */
bool _pylayout_warn_once(pl_warning kind, const char *fmt, ...) PL_PRINTF(2, 3);

/* True the first time `kind` is claimed in this process, without printing:
 * for a caller that reports it its own way (the Python extension raises a
 * RuntimeWarning). */
bool _pylayout_warning_claim(pl_warning kind);

/* ------------------------------------------------------------ threads.c */

/* The threads this process can run at once, as seen from the calling
 * thread: the CPUs in its affinity mask (online ones only), at most
 * omp_get_thread_limit(); >= 1. */
int _pylayout_machine_threads(void);

/* The thread count in force for the calling thread, by the precedence in
 * threads.c (what pylayout_get_num_threads reports); >= 1. */
int _pylayout_threads_setting(void);

/* That count clamped to _pylayout_machine_threads(): the most threads a copy
 * started now may use. */
int _pylayout_threads_wanted(void);

/* The threads an OpenMP region the calling thread opens now may have: the
 * count in force, clamped to what the machine runs and to what libgomp can
 * create without exiting the process; >= 1. */
int _pylayout_copy_threads(void);

/* How many of `want` more threads (with libgomp's stack size) can be alive
 * at once right now; it creates and joins them to find out. */
int _pylayout_threads_creatable(int want);


/* The planes route's two scratch buffers, each this long, from the heap
 * once per range of units (plan.c, where their size is measured). */
#define PL_PLANES_BUFFER_BYTES 49152

/* Chunks of one _pylayout_parallel_for at most. */
#define PL_MAX_CHUNKS 4096

typedef void (*_pylayout_chunk_fn)(void *ctx, int chunk);

/* Runs fn(ctx, c) once for every chunk c in [0, nchunks), on the calling
 * thread and at most nthreads - 1 workers of pylayout's persistent OpenMP
 * team (threads.c), each chunk on whichever thread claims it first; returns
 * when all have run.  The calling thread runs every chunk nobody else has
 * claimed and waits only for chunks other threads started.  Returns the
 * threads the job was entitled to: min(nthreads, nchunks), or 1 when no
 * team thread could be started.  It may still run on its caller alone:
 * when another copy has the team, or for a while after the team made a
 * copy slower than its caller alone (threads.c).  nchunks <= PL_MAX_CHUNKS.
 * fn must make its own writes visible (e.g. fence streaming stores) before
 * it returns. */
int _pylayout_parallel_for(int nchunks, int nthreads, _pylayout_chunk_fn fn, void *ctx);

typedef void (*_pylayout_range_fn)(void *ctx, int64_t lo, int64_t hi);

/* The range splitter copies and complex packing share: cuts [0, n) into
 * `chunks` contiguous ranges of near-equal length (chunks <= PL_MAX_CHUNKS),
 * each start but the first rounded down to a multiple of `align` (1 for
 * none; a caller whose threads must not share cache lines passes enough
 * elements for a line), and runs fn(ctx, lo, hi) for each on
 * _pylayout_parallel_for with nthreads; returns what that returns.  Ranges
 * may come merged, one call for consecutive ones: those the caller runs
 * alone, and up to span_max (>= 1) of a thread's own in the team. */
int _pylayout_parallel_ranges(int64_t n, int chunks, int64_t align, int span_max, int nthreads,
                              _pylayout_range_fn fn, void *ctx);

/* Copies of fewer bytes than this run on the calling thread, not cut into
 * chunks: 1 MiB, 256 KiB for a copy in a run (_pylayout_copy_in_run), or
 * PYLAYOUT_PARALLEL_MIN_BYTES for both (for tuning, and for tests that want
 * the chunked path on small tensors), read once.  Larger copies still run
 * alone unless they take over 50 us, or 3 us in a run (threads.c,
 * PL_ENGAGE_NS and PL_ENGAGE_RUN_NS). */
int64_t _pylayout_parallel_min_bytes(bool in_run);

/* Whether a copy starting now comes in a run: the calling thread's last
 * copy that took at least PL_ENGAGE_RUN_NS ended less than the workers'
 * polling time (PL_IDLE_SPIN_NS) ago.  *now_ret gets the time it read (for
 * _pylayout_uncut_copy_done). */
bool _pylayout_copy_in_run(int64_t *now_ret);

/* Books a copy that could have been cut in a run but was not (it did not
 * come in one) and started at t0 (from _pylayout_copy_in_run): whether it
 * makes the calling thread's next copy one of a run. */
void _pylayout_uncut_copy_done(int64_t t0);

/* Test hook: the number of threads the calling thread's last pylayout_copy
 * was entitled to (1 below the parallel threshold, with a thread count of
 * 1, or when no thread could be started; 0 before any copy).  Settings and
 * limits decide it, not the moment's scheduling: see _pylayout_parallel_for. */
void _pylayout_note_copy_threads(int n);

/* --------------------------------------------------------------- plan.c */

/* Runs a canonical copy (copy.c): n dims of size > 1 with these byte
 * strides, dst strides positive and descending, src and dst at their first
 * elements (n == 0: one element), on at most nthreads threads (0: as many
 * as pylayout's thread setting allows, asked only for a copy large enough
 * to share). */
void _pylayout_copy_canonical(int n, const int64_t *shape, const int64_t *ss, const int64_t *ds, size_t itemsize,
                              const char *src, char *dst, int nthreads);

#endif /* PYLAYOUT_INTERNAL_H */
