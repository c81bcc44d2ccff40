/*
 * copy.c - pylayout_copy, pylayout_convert, pylayout_convert_order.
 *
 * A copy runs in three steps:
 *   1. validate everything (shapes, devices, overlap) before touching dst;
 *   2. canonicalise, HPTT style: drop size-1 dims, flip dims whose dst stride
 *      is negative, sort dims by dst stride (outermost first), fuse dims that
 *      are contiguous in both tensors -- so an identity permutation becomes one
 *      memcpy and NCHW -> NHWC becomes a batch of 2-D transposes;
 *   3. cut the canonical loop nest into units (a tile or a block of rows) and
 *      run them, split into contiguous ranges across OpenMP threads when the
 *      copy is large enough.
 * Units are one of three kinds:
 *   ROWS       innermost dim unit-stride in both: memcpy of rows;
 *   TRANSPOSE  dst unit-stride along dim a, src smallest-stride along another
 *              dim b: cache-blocked tiles with SIMD in-register transposes
 *              (copy_x86.c, chosen at run time by cpu_features.c; streaming stores for large
 *              copies) or a portable 2-D loop;
 *   STRIDED    anything else (broadcast sources, strided dsts): a 2-D loop,
 *              or SIMD step-2 gathers (x[..., ::2] into a unit-stride dst;
 *              streaming stores for large copies).
 */
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

/* ---------------------------------------------------------------- plan */

enum pl_kind { PL_ROWS, PL_TRANSPOSE, PL_STRIDED };

/* The canonical copy as a loop nest of units.  Loop dims (outermost first)
 * end with the tile index of dim b, then of dim a; a unit moves an na x nb
 * block: elements i < na along a, j < nb along b. */
typedef struct pl_plan {
    enum pl_kind kind;
    size_t itemsize;
    const char *src;
    char *dst;
    int nloop;
    int64_t count[PYLAYOUT_MAX_NDIM + 2]; /* iterations of each loop dim */
    int64_t sstep[PYLAYOUT_MAX_NDIM + 2]; /* byte steps per iteration */
    int64_t dstep[PYLAYOUT_MAX_NDIM + 2];
    int64_t na, nb, ta, tb;               /* extents and tile sizes of a and b */
    int64_t ssa, ssb, dsa, dsb;           /* byte strides of a and b */
    _pylayout_tile_fn tile;               /* TRANSPOSE with unit strides: SIMD kernel */
    _pylayout_stream_copy_fn stream_out;  /* TRANSPOSE, set only when each unit's dst is one block */
    _pylayout_gather2_fn gather2;         /* STRIDED, src step 2 into unit dst */
    void (*fence)(void);                  /* set when a kernel above streams */
} pl_plan;

static void pl_run_unit(const pl_plan *p, const char *s, char *d, int64_t na, int64_t nb)
{
    switch (p->kind) {
    case PL_ROWS:
        for (int64_t j = 0; j < nb; j++)
            memcpy(d + j * p->dsb, s + j * p->ssb, (size_t)na * p->itemsize);
        return;
    case PL_TRANSPOSE:
        if (p->stream_out != NULL) {
            /* one tile spans a (ta == na) and dsb == na * itemsize, so the
             * unit's dst is one block: build it in L1, then stream it */
            _Alignas(64) char buf[PL_STREAM_BUFFER_BYTES];
            p->tile(s, p->ssa, buf, p->dsb, na, nb);
            p->stream_out(d, buf, nb * p->dsb);
            return;
        }
        if (p->tile != NULL) {
            p->tile(s, p->ssa, d, p->dsb, na, nb);
            return;
        }
        break;
    case PL_STRIDED:
        if (p->gather2 != NULL) {
            for (int64_t j = 0; j < nb; j++)
                p->gather2(s + j * p->ssb, d + j * p->dsb, na);
            return;
        }
        break;
    }
    switch (p->itemsize) {
    case 1: _pl_move2d_1(s, p->ssa, p->ssb, d, p->dsa, p->dsb, na, nb); break;
    case 2: _pl_move2d_2(s, p->ssa, p->ssb, d, p->dsa, p->dsb, na, nb); break;
    case 4: _pl_move2d_4(s, p->ssa, p->ssb, d, p->dsa, p->dsb, na, nb); break;
    case 8: _pl_move2d_8(s, p->ssa, p->ssb, d, p->dsa, p->dsb, na, nb); break;
    case 16: _pl_move2d_16(s, p->ssa, p->ssb, d, p->dsa, p->dsb, na, nb); break;
    default: /* any other element size: byte by byte */
        for (int64_t j = 0; j < nb; j++)
            for (int64_t i = 0; i < na; i++)
                memmove(d + j * p->dsb + i * p->dsa, s + j * p->ssb + i * p->ssa, p->itemsize);
        break;
    }
}

/* Runs units [u0, u1) of the nest: the start is decoded once, then an
 * odometer walks the loop dims, the last (the tile index of a) fastest. */
static void pl_run_range(const pl_plan *p, int64_t u0, int64_t u1)
{
    int64_t idx[PYLAYOUT_MAX_NDIM + 2];
    int64_t soff = 0, doff = 0, rest = u0;
    const int nl = p->nloop;
    for (int k = nl - 1; k >= 0; k--) {
        idx[k] = rest % p->count[k];
        rest /= p->count[k];
        soff += idx[k] * p->sstep[k];
        doff += idx[k] * p->dstep[k];
    }
    const int64_t last_a = p->na - (p->count[nl - 1] - 1) * p->ta;
    const int64_t last_b = p->nb - (p->count[nl - 2] - 1) * p->tb;
    for (int64_t u = u0; u < u1; u++) {
        int64_t na = idx[nl - 1] == p->count[nl - 1] - 1 ? last_a : p->ta;
        int64_t nb = idx[nl - 2] == p->count[nl - 2] - 1 ? last_b : p->tb;
        pl_run_unit(p, p->src + soff, p->dst + doff, na, nb);
        for (int k = nl - 1; k >= 0; k--) {
            soff += p->sstep[k];
            doff += p->dstep[k];
            if (++idx[k] < p->count[k])
                break;
            soff -= p->count[k] * p->sstep[k];
            doff -= p->count[k] * p->dstep[k];
            idx[k] = 0;
        }
    }
    if (p->fence != NULL)
        p->fence(); /* once per range: the streaming kernels leave it to us */
}

static void pl_run_units(void *ctx, int64_t u0, int64_t u1)
{
    pl_run_range(ctx, u0, u1);
}

static int64_t pl_abs(int64_t x) { return x < 0 ? -x : x; }
static int64_t pl_min(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t pl_max(int64_t a, int64_t b) { return a > b ? a : b; }
static int64_t pl_ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* Bytes per chunk of a parallel copy of total_bytes on nt threads. */
static int64_t pl_chunk_bytes(int64_t total_bytes, int nt)
{
    return pl_min(PL_CHUNK_MAX_BYTES, pl_max(PL_CHUNK_MIN_BYTES, total_bytes / (PL_CHUNKS_PER_THREAD * nt)));
}

/* Tile edge (elements) for cached-store transposes: 64 x 64 floats, 32 x 32
 * doubles, 8-16 KiB per side.  The 2Vx2V group order inside a tile finishes
 * every cache line it touches, so power-of-two leading dimensions do not
 * thrash L1; tile sizes from 32 to 512 elements measured within noise. */
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

static int pl_log2_itemsize(size_t itemsize)
{
    switch (itemsize) {
    case 1: return 0;
    case 2: return 1;
    case 4: return 2;
    case 8: return 3;
    case 16: return 4;
    default: return -1;
    }
}

/* Runs the copy of n canonical dims (size > 1; dst strides positive and
 * descending; byte strides) from src to dst. */
static void pl_execute(int n, const int64_t *shape, const int64_t *ss, const int64_t *ds, size_t itemsize,
                       const char *src, char *dst, int nthreads)
{
    pl_plan p;
    const int64_t is = (int64_t)itemsize;
    int64_t total_bytes = is;
    for (int k = 0; k < n; k++)
        total_bytes *= shape[k];
    int nt = 1; /* threads for this copy: clamped to the machine only when it may go parallel */
    if (nthreads > 1 && total_bytes >= _pylayout_parallel_min_bytes()) /* smaller: caller alone, unchunked */
        nt = (int)pl_min(nthreads, _pylayout_machine_threads());
    const int parallel = nt > 1;

    if (n == 0) {
        _pylayout_note_copy_threads(1);
        memcpy(dst, src, itemsize);
        return;
    }

    memset(&p, 0, sizeof p);
    p.itemsize = itemsize;
    p.src = src;
    p.dst = dst;

    const int a = n - 1; /* the dst-innermost dim */
    int b = -1;
    for (int k = 0; k < a; k++)
        if (ss[k] != 0 && (b < 0 || pl_abs(ss[k]) < pl_abs(ss[b])))
            b = k;

    if (ss[a] == is && ds[a] == is) {
        p.kind = PL_ROWS;
        b = a > 0 ? a - 1 : -1;
    } else if (ss[a] != 0 && b >= 0 && pl_abs(ss[b]) < pl_abs(ss[a])) {
        p.kind = PL_TRANSPOSE;
    } else {
        p.kind = PL_STRIDED;
        b = a > 0 ? a - 1 : -1;
    }

    p.na = shape[a];
    p.ssa = ss[a];
    p.dsa = ds[a];
    p.nb = b >= 0 ? shape[b] : 1;
    p.ssb = b >= 0 ? ss[b] : 0;
    p.dsb = b >= 0 ? ds[b] : 0;

    const int lg = pl_log2_itemsize(itemsize);
    const _pylayout_kernels *k = _pylayout_kernels_get();
    if (p.kind == PL_TRANSPOSE) {
        const int64_t t = pl_transpose_tile(itemsize);
        p.ta = pl_min(p.na, t);
        p.tb = pl_min(p.nb, pl_max(t, t * t / p.ta)); /* thin a: longer b strips */
        if (lg >= 0 && p.dsa == is && p.ssb == is) {
            p.tile = k->tile[lg];
            bool lines = true; /* every dst row starts at the same offset in its line */
            for (int d = 0; d < a; d++)
                lines &= ds[d] % 64 == 0;
            const int64_t head = (int64_t)((64 - (uintptr_t)dst % 64) % 64);
            if (total_bytes >= PL_STREAM_MIN_BYTES && k->tile_stream[lg] != NULL && lines && p.na * is >= 64 &&
                head != 0 && head % is == 0) {
                /* dst is off its lines by whole elements, the same in every
                 * row (NumPy's large buffers start 16 bytes into a line):
                 * copy those first columns on their own, then stream the
                 * rest from a line-aligned dst */
                int64_t part[PYLAYOUT_MAX_NDIM];
                memcpy(part, shape, (size_t)n * sizeof *part);
                part[a] = head / is;
                pl_execute(n, part, ss, ds, itemsize, src, dst, nthreads);
                part[a] = shape[a] - head / is;
                pl_execute(n, part, ss, ds, itemsize, src + head / is * ss[a], dst + head, nthreads);
                return;
            }
            if (total_bytes >= PL_STREAM_MIN_BYTES && k->tile_stream[lg] != NULL && lines && p.na * is >= 64 &&
                head == 0) {
                /* whole dst lines per step: tiles 64 bytes along a, one
                 * page of src along b */
                p.tile = k->tile_stream[lg];
                p.fence = k->fence;
                p.ta = 64 / is;
                p.tb = pl_min(p.nb, 4096 / is);
            } else if (total_bytes >= PL_STREAM_MIN_BYTES && k->stream_copy != NULL && p.ta == p.na &&
                       p.dsb == p.na * is && p.ta * p.tb * is <= PL_STREAM_BUFFER_BYTES) {
                p.stream_out = k->stream_copy;
                p.fence = k->fence;
            }
        }
    } else {
        if (p.kind == PL_STRIDED && lg >= 0 && p.dsa == is && p.ssa == 2 * is) {
            p.gather2 = k->gather2[lg];
            /* the streaming gather aligns dst element by element first:
             * only possible when dst sits on whole elements */
            if (total_bytes >= PL_STREAM_MIN_BYTES && p.na * is >= 4096 && k->gather2_stream[lg] != NULL &&
                ((uintptr_t)dst | (uintptr_t)p.dsb) % (uintptr_t)is == 0) {
                p.gather2 = k->gather2_stream[lg];
                p.fence = k->fence;
            }
        }
        /* Serially, one unit: memcpy sees whole rows and picks its own
         * strategy (glibc streams above its non-temporal threshold, which
         * chunking would hide from it).  In parallel, units of a chunk's
         * size: memcpy of 64 MiB in 256 KiB to 64 MiB pieces measured
         * within 1% of one call on the dev VM (19-20 GB/s; 24 for 256 KiB
         * pieces). */
        int64_t unit_elems = INT64_MAX;
        if (parallel)
            unit_elems = pl_max(1, pl_chunk_bytes(total_bytes, nt) / is);
        p.ta = pl_min(p.na, unit_elems);
        p.tb = pl_min(p.nb, pl_max(1, unit_elems / p.ta));
    }

    int nl = 0;
    for (int k = 0; k < n; k++) {
        if (k == a || k == b)
            continue;
        p.count[nl] = shape[k];
        p.sstep[nl] = ss[k];
        p.dstep[nl] = ds[k];
        nl++;
    }
    /* Outer loops run in dst order, so consecutive units write adjacent
     * dst.  A small transpose unit (thin a and b, e.g. a 27 x 28 tile of
     * (27,28,28,28,28).permute(2,3,1,4,0)) then reads each src row only a
     * few dozen bytes wide, pages apart, and comes back to the rest of those
     * lines much later.  When some outer dim steps src by no more than a
     * few lines, and the innermost one jumps pages, run that dim innermost
     * instead: consecutive units continue the same src rows (the lines are
     * still in L1) and write dst in chunks of a whole unit.  Measured on the
     * permute above, float32, 1 thread: 4.4 -> 5.5 GB/s. */
    if (p.kind == PL_TRANSPOSE && nl >= 2) {
        int best = nl - 1;
        for (int k = 0; k < nl; k++)
            if (pl_abs(p.sstep[k]) < pl_abs(p.sstep[best]))
                best = k;
        if (best != nl - 1 && pl_abs(p.sstep[best]) <= 256 && pl_abs(p.sstep[nl - 1]) >= 4096) {
            int64_t c = p.count[best], st = p.sstep[best], dt = p.dstep[best];
            for (int d = best; d < nl - 1; d++) {
                p.count[d] = p.count[d + 1];
                p.sstep[d] = p.sstep[d + 1];
                p.dstep[d] = p.dstep[d + 1];
            }
            p.count[nl - 1] = c;
            p.sstep[nl - 1] = st;
            p.dstep[nl - 1] = dt;
        }
    }
    p.count[nl] = pl_ceil_div(p.nb, p.tb);
    p.sstep[nl] = p.tb * p.ssb;
    p.dstep[nl] = p.tb * p.dsb;
    nl++;
    p.count[nl] = pl_ceil_div(p.na, p.ta);
    p.sstep[nl] = p.ta * p.ssa;
    p.dstep[nl] = p.ta * p.dsa;
    nl++;
    p.nloop = nl;

    int64_t units = 1;
    for (int k = 0; k < nl; k++)
        units *= p.count[k];

    if (parallel && units > 1) {
        /* Chunks of consecutive units (whole tiles), claimed by whichever
         * thread runs next (threads.c): a thread the kernel does not run
         * holds up nothing it has not started. */
        int64_t chunks = pl_min(units, total_bytes / pl_chunk_bytes(total_bytes, nt));
        chunks = pl_max(2, pl_min(chunks, PL_MAX_CHUNKS));
        _pylayout_note_copy_threads(_pylayout_parallel_ranges(units, (int)chunks, 1, nt, pl_run_units, &p));
        return;
    }
    _pylayout_note_copy_threads(1);
    pl_run_range(&p, 0, units);
}

/* ---------------------------------------------------------- validation */

pylayout_status pylayout_copy(const DLTensor *src, DLTensor *dst)
{
    int64_t sstr[PYLAYOUT_MAX_NDIM], dstr[PYLAYOUT_MAX_NDIM];
    pylayout_status st;

    if (src == NULL || dst == NULL)
        return _pylayout_fail(PYLAYOUT_ERR_INVALID_ARGUMENT, "pylayout_copy: %s is NULL",
                              src == NULL ? "src" : "dst");
    if ((st = _pylayout_check(src, "src", sstr)) != PYLAYOUT_OK)
        return st;
    if ((st = _pylayout_check(dst, "dst", dstr)) != PYLAYOUT_OK)
        return st;
    if (!_pylayout_device_is_host(src->device))
        return _pylayout_fail(PYLAYOUT_ERR_UNSUPPORTED_DEVICE,
                              "src is on device '%s'; pylayout copies only CPU memory: copy it to the host first",
                              _pylayout_device_name((int32_t)src->device.device_type));
    if (!_pylayout_device_is_host(dst->device))
        return _pylayout_fail(PYLAYOUT_ERR_UNSUPPORTED_DEVICE,
                              "dst is on device '%s'; pylayout copies only CPU memory: allocate dst on the host",
                              _pylayout_device_name((int32_t)dst->device.device_type));
    if (src->ndim != dst->ndim)
        return _pylayout_fail(PYLAYOUT_ERR_SHAPE_MISMATCH,
                              "src has %d dims but dst has %d: both must have the same shape", (int)src->ndim,
                              (int)dst->ndim);
    for (int32_t k = 0; k < src->ndim; k++)
        if (src->shape[k] != dst->shape[k])
            return _pylayout_fail(PYLAYOUT_ERR_SHAPE_MISMATCH,
                                  "dim %d: src has size %lld but dst has %lld: both must have the same shape",
                                  (int)k, (long long)src->shape[k], (long long)dst->shape[k]);
    if (src->dtype.code != dst->dtype.code || src->dtype.bits != dst->dtype.bits ||
        src->dtype.lanes != dst->dtype.lanes)
        return _pylayout_fail(PYLAYOUT_ERR_DTYPE_MISMATCH,
                              "src is %s but dst is %s: a layout copy never reinterprets values; convert the "
                              "dtype first",
                              _pylayout_dtype_name(src->dtype), _pylayout_dtype_name(dst->dtype));
    const size_t itemsize = _pylayout_itemsize(src->dtype);

    const int32_t ndim = src->ndim;
    for (int32_t k = 0; k < ndim; k++)
        if (src->shape[k] == 0) {
            _pylayout_clear_error();
            return PYLAYOUT_OK; /* nothing to copy */
        }

    int bad = -1; /* the shared test: sorted by |stride|, each must clear the dims inside it */
    if (_pylayout_self_overlaps(ndim, dst->shape, dstr, &bad))
        return _pylayout_fail(PYLAYOUT_ERR_OVERLAP,
                              "dst overlaps itself: dim %d (size %lld, stride %lld) maps different indices to "
                              "the same memory; copy into a dense tensor instead",
                              bad, (long long)dst->shape[bad], (long long)dstr[bad]);

    int64_t slo, shi, dlo, dhi;
    if ((st = _pylayout_extent(ndim, src->shape, sstr, itemsize, &slo, &shi)) != PYLAYOUT_OK)
        return st;
    if ((st = _pylayout_extent(ndim, dst->shape, dstr, itemsize, &dlo, &dhi)) != PYLAYOUT_OK)
        return st;
    const char *sbase = (const char *)src->data + src->byte_offset;
    char *dbase = (char *)dst->data + dst->byte_offset;
    {
        uintptr_t s0 = (uintptr_t)sbase + (uintptr_t)slo, s1 = (uintptr_t)sbase + (uintptr_t)shi;
        uintptr_t d0 = (uintptr_t)dbase + (uintptr_t)dlo, d1 = (uintptr_t)dbase + (uintptr_t)dhi;
        if (s0 < d1 && d0 < s1)
            return _pylayout_fail(PYLAYOUT_ERR_OVERLAP,
                                  "dst's memory overlaps src's (bytes %p..%p vs %p..%p); copy through a "
                                  "temporary tensor",
                                  (void *)d0, (void *)d1, (const void *)s0, (const void *)s1);
    }

    /* Canonicalise: drop size-1 dims, make dst strides positive, in bytes. */
    int64_t shape[PYLAYOUT_MAX_NDIM], ss[PYLAYOUT_MAX_NDIM], ds[PYLAYOUT_MAX_NDIM];
    int n = 0;
    for (int32_t k = 0; k < ndim; k++) {
        if (src->shape[k] == 1)
            continue;
        int64_t sb = sstr[k] * (int64_t)itemsize, db = dstr[k] * (int64_t)itemsize;
        if (db < 0) { /* visit this dim backwards: same pairs of elements */
            sbase += (src->shape[k] - 1) * sb;
            dbase += (src->shape[k] - 1) * db;
            sb = -sb;
            db = -db;
        }
        /* insertion by descending dst stride (all distinct: no self-overlap) */
        int pos = n++;
        while (pos > 0 && ds[pos - 1] < db) {
            shape[pos] = shape[pos - 1];
            ss[pos] = ss[pos - 1];
            ds[pos] = ds[pos - 1];
            pos--;
        }
        shape[pos] = src->shape[k];
        ss[pos] = sb;
        ds[pos] = db;
    }
    /* Fuse an outer dim into the next inner one when contiguous in both. */
    int m = 0;
    for (int k = 0; k < n; k++) {
        if (m > 0 && ds[m - 1] == ds[k] * shape[k] && ss[m - 1] == ss[k] * shape[k]) {
            shape[m - 1] *= shape[k];
            ss[m - 1] = ss[k];
            ds[m - 1] = ds[k];
        } else {
            shape[m] = shape[k];
            ss[m] = ss[k];
            ds[m] = ds[k];
            m++;
        }
    }

    pl_execute(m, shape, ss, ds, itemsize, sbase, dbase, _pylayout_threads_setting());
    _pylayout_clear_error();
    return PYLAYOUT_OK;
}

/* ------------------------------------------------------------ convert */

/* Checks src before allocating, so bad input costs no allocation. */
static pylayout_status pl_convert_check(const DLTensor *src, const void *what, pylayout_tensor **tensor_ret,
                                        const char *fn)
{
    int64_t strides[PYLAYOUT_MAX_NDIM];
    pylayout_status st;
    if (src == NULL || tensor_ret == NULL || (what == NULL && src->ndim > 0))
        return _pylayout_fail(PYLAYOUT_ERR_INVALID_ARGUMENT, "%s: %s is NULL", fn,
                              src == NULL ? "src" : (tensor_ret == NULL ? "tensor_ret" : "order"));
    if ((st = _pylayout_check(src, "src", strides)) != PYLAYOUT_OK)
        return st;
    if (!_pylayout_device_is_host(src->device))
        return _pylayout_fail(PYLAYOUT_ERR_UNSUPPORTED_DEVICE,
                              "src is on device '%s'; pylayout copies only CPU memory: copy it to the host first",
                              _pylayout_device_name((int32_t)src->device.device_type));
    return PYLAYOUT_OK;
}

static pylayout_status pl_convert_finish(const DLTensor *src, pylayout_tensor *out, pylayout_tensor **tensor_ret)
{
    const DLTensor *dt = NULL;
    pylayout_status st = pylayout_tensor_dltensor(out, &dt);
    if (st == PYLAYOUT_OK)
        st = pylayout_copy(src, (DLTensor *)dt); /* freshly allocated: ours to write */
    if (st != PYLAYOUT_OK) {
        pylayout_tensor_release(out);
        return st;
    }
    *tensor_ret = out;
    return PYLAYOUT_OK;
}

pylayout_status pylayout_convert(const DLTensor *src, pylayout_format format, pylayout_tensor **tensor_ret)
{
    pylayout_tensor *out = NULL;
    pylayout_status st = pl_convert_check(src, "", tensor_ret, "pylayout_convert");
    if (st != PYLAYOUT_OK)
        return st;
    if ((st = pylayout_tensor_empty(src->ndim, src->shape, src->dtype, format, &out)) != PYLAYOUT_OK)
        return st;
    return pl_convert_finish(src, out, tensor_ret);
}

pylayout_status pylayout_convert_order(const DLTensor *src, const int32_t *order, pylayout_tensor **tensor_ret)
{
    pylayout_tensor *out = NULL;
    pylayout_status st = pl_convert_check(src, order, tensor_ret, "pylayout_convert_order");
    if (st != PYLAYOUT_OK)
        return st;
    if ((st = pylayout_tensor_empty_order(src->ndim, src->shape, src->dtype, order, &out)) != PYLAYOUT_OK)
        return st;
    return pl_convert_finish(src, out, tensor_ret);
}
