/*
 * fuzz_copy.c - libFuzzer harness for pylayout's C core.
 *
 * Every input is decoded (bytes -> a little program) into one operation on
 * random DLTensors: shapes up to 8-D, any strides (0, negative, huge,
 * INT64_MIN), byte offsets, element sizes 1/2/4/8/16, odd data alignments,
 * unsupported dtypes and devices, NULL data, and ndim outside 0..64 for the
 * metadata queries.  What it checks:
 *
 *   memory ops (pylayout_copy, pack_complex, unpack_complex, convert,
 *   convert_order, tensor views; a copy that succeeds runs again from the
 *   same bytes, since a repeated copy may walk its blocks the other way):
 *   every backing buffer is allocated exactly as large as the tensor's
 *   extent, so ASan flags any read or write outside it.  When a call returns OK, every buffer must equal a naive odometer
 *   reference (bytes no element covers included: no stray writes), and the
 *   written tensor must not overlap itself or its inputs.  When it fails,
 *   every buffer must be byte-identical to before (no partial writes).  A
 *   call whose inputs are invalid by the documented rules (pylayout.h) must
 *   fail; one that mixes shapes or element sizes must fail.
 *
 *   queries (validate, numel, is_contiguous, suggest_format, is_dense,
 *   canonical_strides, format_strides, order_strides) run on arbitrary
 *   metadata whose data pointer is never dereferenced; shape/stride arrays
 *   are allocated with exactly ndim entries.  Results are cross-checked
 *   (contiguous => dense; format_strides output is contiguous in its format;
 *   canonical_strides keeps every stride of a dim of size != 1).
 *
 *   lifetime: tensor_from_versioned / from_legacy with fuzzed versions and
 *   counting deleters (exactly once on success, never on failure), exports
 *   to versioned / legacy capsules, retain / release.
 *
 * Build and run: tests/fuzz/run.sh [seconds]   (see its header)
 * Without libFuzzer, compile with -DPL_FUZZ_STANDALONE for a driver that
 * replays files / directories and then runs random inputs:
 *     fuzz_copy [-t SECONDS] [-s SEED] [FILE|DIR ...]
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime in the standalone driver */
#include <inttypes.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pylayout.h"

/* ------------------------------------------------------------ utilities */

#define FAIL(...)                                                                                        \
    do {                                                                                                 \
        fprintf(stderr, "fuzz_copy: %s:%d: ", __FILE__, __LINE__);                                       \
        fprintf(stderr, __VA_ARGS__);                                                                    \
        fprintf(stderr, " (last_error: %s)\n", pylayout_last_error());                                  \
        abort();                                                                                         \
    } while (0)
#define CHECK(cond, ...)                                                                                 \
    do {                                                                                                 \
        if (!(cond)) {                                                                                   \
            fprintf(stderr, "fuzz_copy: %s:%d: check failed: %s: ", __FILE__, __LINE__, #cond);          \
            fprintf(stderr, __VA_ARGS__);                                                                \
            fprintf(stderr, " (last_error: %s)\n", pylayout_last_error());                              \
            abort();                                                                                     \
        }                                                                                                \
    } while (0)

typedef struct {
    const uint8_t *p;
    size_t n;
} reader;

static uint8_t u8(reader *r)
{
    if (r->n == 0)
        return 0;
    r->n--;
    return *r->p++;
}

static uint64_t u64(reader *r)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v |= (uint64_t)u8(r) << (8 * i);
    return v;
}

typedef __int128 i128;

/* -------------------------------------------------------------- dtypes */

typedef struct {
    DLDataType dt;
    size_t itemsize; /* 0: pylayout must refuse it */
} dtype_entry;

static const dtype_entry dtypes[] = {
    {{kDLInt, 8, 1}, 1},      {{kDLUInt, 8, 1}, 1},     {{kDLBool, 8, 1}, 1},     {{kDLInt, 16, 1}, 2},
    {{kDLFloat, 16, 1}, 2},   {{kDLBfloat, 16, 1}, 2},  {{kDLFloat, 32, 1}, 4},   {{kDLInt, 32, 1}, 4},
    {{kDLComplex, 32, 1}, 4}, {{kDLFloat, 64, 1}, 8},   {{kDLUInt, 64, 1}, 8},    {{kDLComplex, 64, 1}, 8},
    {{kDLComplex, 128, 1}, 16}, {{kDLFloat8_e4m3fn, 8, 1}, 1},
    /* refused: lanes, sub-byte, odd bits, opaque handles, unknown codes */
    {{kDLFloat, 32, 4}, 0},   {{kDLInt, 4, 1}, 0},      {{kDLFloat, 12, 1}, 0},   {{kDLOpaqueHandle, 64, 1}, 0},
    {{200, 8, 1}, 0},         {{kDLBool, 1, 1}, 0},     {{kDLComplex, 16, 1}, 0}, {{kDLFloat, 8, 1}, 0},
};
#define N_DTYPES (sizeof dtypes / sizeof dtypes[0])
#define N_GOOD_DTYPES 14

static size_t itemsize_of(DLDataType dt)
{
    for (size_t i = 0; i < N_DTYPES; i++)
        if (dtypes[i].dt.code == dt.code && dtypes[i].dt.bits == dt.bits && dtypes[i].dt.lanes == dt.lanes)
            return dtypes[i].itemsize;
    return 0;
}

static DLDataType pick_dtype(reader *r, bool mostly_good)
{
    uint8_t b = u8(r);
    if (mostly_good && b < 224)
        return dtypes[b % N_GOOD_DTYPES].dt;
    return dtypes[b % N_DTYPES].dt;
}

static bool host_device(DLDevice d)
{
    return d.device_type == kDLCPU || d.device_type == kDLCUDAHost || d.device_type == kDLROCMHost ||
           d.device_type == kDLCUDAManaged;
}

/* ------------------------------------------------------------- tensors */

#define MAX_FUZZ_NDIM 8
/* Elements a memory op may touch and bytes a backing buffer may take.  Most
 * inputs stay small (fast, and the reference checks every byte); a "large"
 * input (LLVMFuzzerTestOneInput) raises both well past the streaming-store
 * threshold (4 MiB) and the size at which copies go parallel. */
#define SMALL_NUMEL ((int64_t)1 << 15)
#define SMALL_BYTES ((int64_t)1 << 18)
#define LARGE_NUMEL ((int64_t)1 << 22)
#define LARGE_BYTES ((int64_t)1 << 25)
static int64_t MAX_NUMEL = SMALL_NUMEL, MAX_BYTES = SMALL_BYTES;
static bool LARGE; /* this input is a large one: sizes up to a few thousand per dim */

/* One allocation, exactly sized; `snap` and `expect` have the same size. */
typedef struct {
    uint8_t *base;
    size_t size;
    uint8_t *snap, *expect, *mark;
} alloc_t;

enum cls { CLS_INVALID, CLS_SAFE, CLS_UNSAFE };

typedef struct {
    DLTensor t;
    int64_t *shape, *strides;  /* heap arrays of exactly ndim entries (or NULL) */
    int64_t eff[64];           /* effective strides (row-major when strides NULL) */
    size_t itemsize;
    enum cls cls;
    int alloc;                 /* index into the allocation table, -1 if none */
    int64_t numel;
    i128 lo, hi;               /* byte extent relative to data + byte_offset */
} ftensor;

#define MAX_ALLOCS 8
typedef struct {
    alloc_t a[MAX_ALLOCS];
    int n;
} heap_t;

static int heap_add(heap_t *h, size_t size, uint8_t fill)
{
    if (h->n >= MAX_ALLOCS)
        return -1;
    alloc_t *a = &h->a[h->n];
    /* malloc(0) may return NULL; keep one byte so base is a real pointer */
    a->base = malloc(size ? size : 1);
    a->size = size;
    a->snap = malloc(size ? size : 1);
    a->expect = malloc(size ? size : 1);
    a->mark = calloc(size ? size : 1, 1);
    if (!a->base || !a->snap || !a->expect || !a->mark)
        abort();
    for (size_t i = 0; i < size; i++)
        a->base[i] = (uint8_t)(fill + 31 * i + (i >> 8));
    return h->n++;
}

static void heap_free(heap_t *h)
{
    for (int i = 0; i < h->n; i++) {
        free(h->a[i].base);
        free(h->a[i].snap);
        free(h->a[i].expect);
        free(h->a[i].mark);
    }
    h->n = 0;
}

static void heap_snapshot(heap_t *h)
{
    for (int i = 0; i < h->n; i++) {
        memcpy(h->a[i].snap, h->a[i].base, h->a[i].size);
        memcpy(h->a[i].expect, h->a[i].base, h->a[i].size);
        memset(h->a[i].mark, 0, h->a[i].size);
    }
}

static void heap_expect_unchanged(heap_t *h, const char *op, int st)
{
    for (int i = 0; i < h->n; i++)
        if (memcmp(h->a[i].base, h->a[i].snap, h->a[i].size) != 0) {
            size_t k = 0;
            while (h->a[i].base[k] == h->a[i].snap[k])
                k++;
            FAIL("%s returned %d but changed buffer %d (size %zu) at byte %zu", op, st, i, h->a[i].size, k);
        }
}

static void heap_expect_result(heap_t *h, const char *op)
{
    for (int i = 0; i < h->n; i++)
        if (memcmp(h->a[i].base, h->a[i].expect, h->a[i].size) != 0) {
            size_t k = 0;
            while (h->a[i].base[k] == h->a[i].expect[k])
                k++;
            FAIL("%s returned OK but buffer %d (size %zu) differs from the reference at byte %zu "
                 "(got 0x%02x, want 0x%02x, was 0x%02x)",
                 op, i, h->a[i].size, k, h->a[i].base[k], h->a[i].expect[k], h->a[i].snap[k]);
        }
}

static void ft_free(ftensor *f)
{
    free(f->shape);
    free(f->strides);
    f->shape = f->strides = NULL;
}

/* Classifies a tensor by the rules pylayout.h documents for
 * pylayout_validate (mirrors them independently, with 128-bit arithmetic). */
static void classify(ftensor *f)
{
    const DLTensor *t = &f->t;
    f->itemsize = itemsize_of(t->dtype);
    f->cls = CLS_INVALID;
    f->numel = 0;
    if (t->ndim < 0 || t->ndim > PYLAYOUT_MAX_NDIM || (t->ndim > 0 && !t->shape) || !f->itemsize)
        return;
    i128 numel = 1;
    for (int d = 0; d < t->ndim; d++) {
        if (t->shape[d] < 0)
            return;
        numel *= t->shape[d];
        if (numel > INT64_MAX)
            return;
    }
    f->numel = (int64_t)numel;
    int64_t step = 1;
    for (int d = t->ndim - 1; d >= 0; d--) {
        f->eff[d] = t->strides ? t->strides[d] : step;
        if (!t->strides && __builtin_mul_overflow(step, t->shape[d] > 1 ? t->shape[d] : 1, &step))
            step = INT64_MAX;
    }
    f->lo = f->hi = 0;
    if (numel == 0) {
        f->cls = CLS_UNSAFE; /* valid; SAFE is decided by the caller */
        return;
    }
    if (!t->data)
        return;
    i128 lo = 0, hi = 0;
    for (int d = 0; d < t->ndim; d++) {
        if (f->eff[d] == INT64_MIN)
            return;
        i128 reach = (i128)(t->shape[d] - 1) * (f->eff[d] < 0 ? -(i128)f->eff[d] : (i128)f->eff[d]);
        if (reach > INT64_MAX)
            return;
        if (f->eff[d] < 0)
            lo -= reach;
        else
            hi += reach;
        if (lo < INT64_MIN || hi > INT64_MAX)
            return;
    }
    lo *= (i128)f->itemsize;
    hi = (hi + 1) * (i128)f->itemsize;
    if (lo < INT64_MIN || hi > INT64_MAX)
        return;
    i128 base = (i128)(uintptr_t)t->data;
    if (t->byte_offset > (uint64_t)INT64_MAX)
        return;
    base += t->byte_offset;
    if (base > (i128)UINTPTR_MAX || base + lo < 0 || base + hi > (i128)UINTPTR_MAX)
        return;
    f->lo = lo;
    f->hi = hi;
    f->cls = CLS_UNSAFE;
}

static int64_t gen_size(reader *r)
{
    uint8_t b = u8(r);
    uint8_t sel = b % 32;
    if (sel == 0)
        return 0;
    if (sel <= 20)
        return 1 + sel % 4;
    if (sel <= 28) {
        if (!LARGE || sel < 25)
            return 5 + u8(r) % 60;
        int64_t hi = u8(r); /* large inputs: 65 .. 4160, so tensors pass the streaming threshold */
        return 65 + (hi << 8 | u8(r)) % 4096;
    }
    if (sel == 29)
        return -1 - (int64_t)u8(r);
    if (sel == 30)
        return ((int64_t)1 << (32 + u8(r) % 31)) + u8(r);
    return INT64_MAX - u8(r);
}

static int64_t gen_stride(reader *r, int64_t compact)
{
    uint8_t b = u8(r);
    switch (b % 16) {
    case 0: case 1: case 2: case 3: case 4: case 5:
        return compact;
    case 6: case 7:
        return -compact;
    case 8:
        return 0;
    case 9: case 10: case 11:
        return (int64_t)(int8_t)u8(r) % 9;
    case 12:
        return compact * (1 + u8(r) % 3);
    case 13: {
        static const int64_t huge[] = {INT64_MAX, INT64_MIN, INT64_MIN + 1, (int64_t)1 << 62, -((int64_t)1 << 62),
                                       (int64_t)1 << 40, (int64_t)1 << 31, -((int64_t)1 << 40)};
        return huge[u8(r) % 8];
    }
    case 14:
        return (int64_t)u64(r);
    default:
        return (int64_t)(int16_t)(u8(r) | (u8(r) << 8));
    }
}

/* Fills shape / strides / dtype / byte_offset of `f` (data not yet set). */
static void gen_meta(reader *r, ftensor *f, bool memory, const ftensor *like)
{
    memset(f, 0, sizeof *f);
    f->alloc = -1;
    int32_t ndim;
    uint8_t b = u8(r);
    if (like && b < 200) {
        ndim = like->t.ndim;
    } else if (memory || b < 240) {
        ndim = b % (MAX_FUZZ_NDIM + 1);
    } else {
        static const int32_t odd[] = {-1, 65, 64, INT32_MIN, INT32_MAX, 9, 33, -64};
        ndim = odd[b % 8];
    }
    f->t.ndim = ndim;
    int32_t alloc_n = ndim < 0 ? 0 : ndim > 80 ? 0 : ndim; /* absurd ndim: tiny arrays */
    if (ndim > 80)
        alloc_n = 2;
    f->shape = alloc_n ? malloc((size_t)alloc_n * sizeof(int64_t)) : NULL;
    f->strides = alloc_n ? malloc((size_t)alloc_n * sizeof(int64_t)) : NULL;
    uint8_t mode = u8(r);
    int64_t compact = 1;
    for (int d = alloc_n - 1; d >= 0; d--) {
        bool copy_shape = like && like->t.ndim == ndim && d < like->t.ndim && like->shape && (mode & 1) == 0;
        f->shape[d] = copy_shape ? like->shape[d] : gen_size(r);
        if (ndim <= MAX_FUZZ_NDIM && memory && f->shape[d] > 64 && (mode & 2) == 0 && !copy_shape && !LARGE)
            f->shape[d] = f->shape[d] % 7; /* keep most memory tensors small */
    }
    /* keep element counts bounded for memory ops (later dims shrink to 1) */
    if (memory && !(like && (mode & 1) == 0)) {
        int64_t n = 1;
        for (int d = 0; d < alloc_n; d++) {
            if (f->shape[d] > 0 && f->shape[d] <= (LARGE ? 4160 : 64)) {
                if (n * f->shape[d] > MAX_NUMEL)
                    f->shape[d] = 1;
                n *= f->shape[d];
            }
        }
        /* a large input stretches one dim so that the tensor holds 1-3 Mi
         * elements: past the streaming-store threshold and the parallel one */
        if (LARGE && alloc_n > 0 && alloc_n <= MAX_FUZZ_NDIM && n > 0 && n <= ((int64_t)1 << 20)) {
            int grow = u8(r) % alloc_n;
            if (f->shape[grow] > 0 && f->shape[grow] <= 4160) {
                int64_t rest = n / f->shape[grow], target = ((int64_t)1 << 20) + ((int64_t)u8(r) << 13);
                f->shape[grow] = target / rest + 1;
            }
        }
    }
    uint8_t perm_seed = u8(r);
    /* compact strides in a random dim order, then perturbed per dim */
    int order[128];
    for (int d = 0; d < alloc_n; d++)
        order[d] = d;
    for (int d = alloc_n - 1; d > 0; d--) {
        int j = (perm_seed * 7 + d * 13) % (d + 1);
        if (perm_seed & 1) {
            int tmp = order[d];
            order[d] = order[j];
            order[j] = tmp;
        }
    }
    for (int i = alloc_n - 1; i >= 0; i--) {
        int d = order[i];
        f->strides[d] = (mode & 4) ? compact : gen_stride(r, compact);
        int64_t s = f->shape[d] > 1 ? f->shape[d] : 1;
        if (s > 0 && compact < ((int64_t)1 << 40) / s)
            compact *= s;
    }
    f->t.shape = f->shape;
    f->t.strides = (mode & 0x18) == 0x18 ? NULL : f->strides; /* NULL strides: row-major */
    if (ndim > 0 && (mode & 0xe0) == 0xe0 && u8(r) == 0)
        f->t.shape = NULL;
    f->t.dtype = like && (mode & 0x20) == 0 ? like->t.dtype : pick_dtype(r, memory);
    uint8_t ob = u8(r);
    f->t.byte_offset = ob < 160 ? 0 : ob < 250 ? (uint64_t)(ob % 40) : ob == 250 ? (uint64_t)INT64_MAX + u8(r)
                                                                      : u64(r);
    uint8_t db = u8(r);
    f->t.device.device_type = db < 220 ? kDLCPU : db < 230 ? kDLCUDA : db < 240 ? kDLCUDAHost : (int32_t)(db - 200);
    f->t.device.device_id = 0;
}

/* Gives `f` a data pointer.  SAFE tensors get their own exactly sized
 * allocation (after `mis` bytes of misalignment, checked as sentinels) or,
 * when `alias` >= 0, a place inside that allocation if it fits. */
static void gen_data(reader *r, heap_t *h, ftensor *f, int alias)
{
    uint8_t b = u8(r);
    /* what the extent would be, computed with a provisional data pointer */
    f->t.data = (void *)(uintptr_t)0x100000;
    uint64_t boff = f->t.byte_offset;
    f->t.byte_offset = 0;
    classify(f);
    f->t.byte_offset = boff;
    i128 size = f->hi - f->lo;
    bool allocatable = f->cls != CLS_INVALID && f->numel > 0 && f->numel <= MAX_NUMEL && size <= MAX_BYTES &&
                       boff <= (uint64_t)MAX_BYTES;
    if (f->cls != CLS_INVALID && f->numel == 0) {
        /* empty: data may be anything, NULL included */
        f->t.data = b % 3 == 0 ? NULL : b % 3 == 1 ? (void *)(uintptr_t)16 : (void *)(uintptr_t)u64(r);
        classify(f);
        f->cls = f->cls == CLS_INVALID ? CLS_INVALID : CLS_SAFE;
        return;
    }
    if (b < 12 || !allocatable) {
        static const uintptr_t fake[] = {0, 1, UINTPTR_MAX - 7, UINTPTR_MAX - 4095, (uintptr_t)1 << 63, 64};
        f->t.data = (void *)fake[b % 6];
        if (b % 6 == 5)
            f->t.data = (void *)(uintptr_t)u64(r);
        classify(f);
        /* valid but unbacked tensors may not be handed to memory ops */
        return;
    }
    unsigned mis = (b >> 4) % 8; /* 0: exact both ends; else odd start with a sentinel prefix */
    if (alias >= 0 && h->a[alias].size >= (size_t)size + mis && (b & 8)) {
        size_t room = h->a[alias].size - (size_t)size;
        size_t at = (size_t)(u8(r) | (u8(r) << 8)) % (room + 1);
        uint8_t *start = h->a[alias].base + at;
        f->t.data = (void *)((uintptr_t)start - (uintptr_t)(int64_t)f->lo - (uintptr_t)boff);
        f->alloc = alias;
    } else {
        int ai = heap_add(h, (size_t)size + mis, b);
        if (ai < 0) {
            f->t.data = (void *)(uintptr_t)64;
            classify(f);
            return;
        }
        uint8_t *start = h->a[ai].base + mis;
        f->t.data = (void *)((uintptr_t)start - (uintptr_t)(int64_t)f->lo - (uintptr_t)boff);
        f->alloc = ai;
    }
    classify(f);
    if (f->cls == CLS_UNSAFE)
        f->cls = CLS_SAFE;
    else
        f->alloc = -1; /* the pointer arithmetic wrapped: pylayout must refuse it */
}

/* --------------------------------------------------- odometer reference */

/* Byte address of element `idx` (row-major index vector). */
static uint8_t *addr_of(const ftensor *f, const int64_t *idx)
{
    i128 off = (i128)f->t.byte_offset;
    for (int d = 0; d < f->t.ndim; d++)
        off += (i128)idx[d] * f->eff[d] * (i128)f->itemsize;
    return (uint8_t *)((uintptr_t)f->t.data + (uintptr_t)(int64_t)off);
}

static bool next_index(int32_t ndim, const int64_t *shape, int64_t *idx)
{
    for (int d = ndim - 1; d >= 0; d--) {
        if (++idx[d] < shape[d])
            return true;
        idx[d] = 0;
    }
    return false;
}

/* Offset of address p inside allocation a, checking it lies inside. */
static size_t off_in(const alloc_t *a, const uint8_t *p, size_t n)
{
    CHECK(p >= a->base && p + n <= a->base + a->size, "element at %p+%zu outside its buffer [%p, +%zu)", (void *)p,
          n, (void *)a->base, a->size);
    return (size_t)(p - a->base);
}

/* A memory op: `nw` written tensors, `nr` read ones, all of one shape.
 * move(k-th written, element bytes) is described by `parts`: written tensor
 * w, byte range [wo, wo+len) of its element, gets read tensor rd's bytes
 * [ro, ro+len). */
typedef struct {
    int w, rd;
    size_t wo, ro, len;
} part_t;

/* Builds the expected buffers; returns false if the written elements overlap
 * each other or any read element (then no result is well defined). */
static bool reference(heap_t *h, ftensor **ws, int nw, ftensor **rs, int nr, const part_t *parts, int nparts)
{
    const ftensor *s = ws[0];
    int64_t idx[64] = {0};
    if (s->numel == 0)
        return true;
    bool disjoint = true;
    /* pass 1: mark written bytes; any byte written twice is self-overlap */
    do {
        for (int w = 0; w < nw; w++) {
            alloc_t *a = &h->a[ws[w]->alloc];
            size_t o = off_in(a, addr_of(ws[w], idx), ws[w]->itemsize);
            for (size_t k = 0; k < ws[w]->itemsize; k++) {
                if (a->mark[o + k])
                    disjoint = false;
                a->mark[o + k] = 1;
            }
        }
    } while (next_index(s->t.ndim, s->t.shape, idx));
    /* pass 2: reads must not touch written bytes; fill expect */
    memset(idx, 0, sizeof idx);
    do {
        for (int i = 0; i < nr; i++) {
            alloc_t *a = &h->a[rs[i]->alloc];
            size_t o = off_in(a, addr_of(rs[i], idx), rs[i]->itemsize);
            for (size_t k = 0; k < rs[i]->itemsize; k++)
                if (a->mark[o + k])
                    disjoint = false;
        }
        for (int p = 0; p < nparts; p++) {
            const ftensor *wt = ws[parts[p].w], *rt = rs[parts[p].rd];
            alloc_t *wa = &h->a[wt->alloc], *ra = &h->a[rt->alloc];
            size_t wo = off_in(wa, addr_of(wt, idx), wt->itemsize) + parts[p].wo;
            size_t ro = off_in(ra, addr_of(rt, idx), rt->itemsize) + parts[p].ro;
            memcpy(wa->expect + wo, ra->snap + ro, parts[p].len);
        }
    } while (next_index(s->t.ndim, s->t.shape, idx));
    return disjoint;
}

static bool same_shape(const ftensor *a, const ftensor *b)
{
    if (a->t.ndim != b->t.ndim)
        return false;
    for (int d = 0; d < a->t.ndim; d++)
        if (a->t.shape[d] != b->t.shape[d])
            return false;
    return true;
}

/* ------------------------------------------------------------ ops */

static void op_copy(reader *r)
{
    heap_t h = {0};
    ftensor src, dst;
    gen_meta(r, &src, true, NULL);
    gen_data(r, &h, &src, -1);
    gen_meta(r, &dst, true, &src);
    uint8_t alias = u8(r);
    gen_data(r, &h, &dst, (alias < 64 && src.alloc >= 0) ? src.alloc : -1);
    /* The byte after dst's: with bit 0 set, src moves to the start of an
     * allocation 4 elements longer than its extent and dst becomes its
     * twin there, the same shape, strides and dtype 1 to 4 elements' bytes
     * on: views of one buffer whose elements interleave (x[:, 1] from
     * x[:, 0]) or share bytes, which the reference tells apart byte by
     * byte.  None: src and dst as generated. */
    const uint8_t twin = u8(r);
    if ((twin & 1) && src.cls == CLS_SAFE && src.alloc >= 0 && src.numel > 0 && src.t.shape != NULL) {
        const size_t is = src.itemsize, delta = (size_t)(twin >> 1) % (4 * is) + 1;
        const int ai = heap_add(&h, (size_t)(src.hi - src.lo) + 4 * is, twin);
        if (ai >= 0) {
            src.t.data = (void *)((uintptr_t)h.a[ai].base - (uintptr_t)(int64_t)src.lo - (uintptr_t)src.t.byte_offset);
            src.alloc = ai;
            ft_free(&dst);
            dst = src;
            const size_t n = (size_t)src.t.ndim * sizeof(int64_t);
            dst.shape = malloc(n ? n : 1);
            dst.strides = malloc(n ? n : 1);
            CHECK(dst.shape && dst.strides, "out of memory");
            memcpy(dst.shape, src.t.shape, n);
            if (src.t.strides != NULL)
                memcpy(dst.strides, src.t.strides, n);
            dst.t.shape = dst.shape;
            dst.t.strides = src.t.strides != NULL ? dst.strides : NULL;
            dst.t.byte_offset = src.t.byte_offset + delta;
            classify(&src);
            classify(&dst);
            CHECK(src.cls == CLS_UNSAFE && dst.cls == CLS_UNSAFE, "src or its twin is not a valid tensor");
            src.cls = dst.cls = CLS_SAFE; /* backed: the allocation holds both */
        }
    }
    if (src.cls == CLS_UNSAFE || dst.cls == CLS_UNSAFE)
        goto out; /* valid but unbacked: cannot run safely */
    heap_snapshot(&h);
    int st = pylayout_copy(&src.t, &dst.t);
    if (st != PYLAYOUT_OK) {
        CHECK(*pylayout_last_error() != '\0', "copy failed with status %d but left no message", st);
        heap_expect_unchanged(&h, "pylayout_copy", st);
        goto out;
    }
    CHECK(src.cls == CLS_SAFE && dst.cls == CLS_SAFE, "copy accepted an invalid tensor (src %d, dst %d)", src.cls,
          dst.cls);
    CHECK(host_device(src.t.device) && host_device(dst.t.device), "copy accepted a non-host device");
    CHECK(same_shape(&src, &dst), "copy accepted different shapes");
    CHECK(src.t.dtype.code == dst.t.dtype.code && src.t.dtype.bits == dst.t.dtype.bits &&
              src.t.dtype.lanes == dst.t.dtype.lanes,
          "copy accepted dtypes (%u,%u) and (%u,%u)", (unsigned)src.t.dtype.code, (unsigned)src.t.dtype.bits,
          (unsigned)dst.t.dtype.code, (unsigned)dst.t.dtype.bits);
    if (dst.numel > 0) {
        ftensor *ws[1] = {&dst}, *rs[1] = {&src};
        part_t part = {0, 0, 0, 0, dst.itemsize};
        CHECK(reference(&h, ws, 1, rs, 1, &part, 1), "copy returned OK for overlapping dst/src");
        heap_expect_result(&h, "pylayout_copy");
        /* The same copy again from the same starting bytes: a copy that
         * repeats the one before it may walk its blocks the other way
         * (plan.c, pl_repeats), and must give the same bytes. */
        for (int i = 0; i < h.n; i++)
            memcpy(h.a[i].base, h.a[i].snap, h.a[i].size);
        CHECK(pylayout_copy(&src.t, &dst.t) == PYLAYOUT_OK, "the same copy failed the second time");
        heap_expect_result(&h, "pylayout_copy (repeated)");
    } else {
        heap_expect_unchanged(&h, "pylayout_copy (empty)", st);
    }
out:
    ft_free(&src);
    ft_free(&dst);
    heap_free(&h);
}

static DLDataType real_dtype_of(DLDataType c)
{
    DLDataType rt = {kDLFloat, (uint8_t)(c.bits / 2), 1};
    return rt;
}

/* pack (out <- re, im) or unpack (re, im <- z). */
static void op_complex(reader *r, bool pack)
{
    heap_t h = {0};
    ftensor z, re, im;
    static const DLDataType ctypes_[] = {{kDLComplex, 32, 1}, {kDLComplex, 64, 1}, {kDLComplex, 128, 1}};
    gen_meta(r, &z, true, NULL);
    uint8_t b = u8(r);
    if (b < 220)
        z.t.dtype = ctypes_[b % 3];
    gen_data(r, &h, &z, -1);
    gen_meta(r, &re, true, &z);
    gen_meta(r, &im, true, &z);
    b = u8(r);
    if (b < 230) {
        re.t.dtype = real_dtype_of(z.t.dtype);
        im.t.dtype = real_dtype_of(z.t.dtype);
    }
    uint8_t alias = u8(r);
    gen_data(r, &h, &re, (alias & 3) == 0 && z.alloc >= 0 ? z.alloc : -1);
    gen_data(r, &h, &im, (alias & 12) == 0 && re.alloc >= 0 ? re.alloc : -1);
    if (z.cls == CLS_UNSAFE || re.cls == CLS_UNSAFE || im.cls == CLS_UNSAFE)
        goto out;
    heap_snapshot(&h);
    int st = pack ? pylayout_pack_complex(&re.t, &im.t, &z.t) : pylayout_unpack_complex(&z.t, &re.t, &im.t);
    const char *name = pack ? "pylayout_pack_complex" : "pylayout_unpack_complex";
    if (st != PYLAYOUT_OK) {
        heap_expect_unchanged(&h, name, st);
        goto out;
    }
    CHECK(z.cls == CLS_SAFE && re.cls == CLS_SAFE && im.cls == CLS_SAFE, "%s accepted an invalid tensor", name);
    CHECK(host_device(z.t.device) && host_device(re.t.device) && host_device(im.t.device),
          "%s accepted a non-host device", name);
    CHECK(same_shape(&z, &re) && same_shape(&z, &im), "%s accepted different shapes", name);
    CHECK(z.t.dtype.code == kDLComplex && re.t.dtype.code == kDLFloat && im.t.dtype.code == kDLFloat &&
              re.itemsize * 2 == z.itemsize && im.itemsize * 2 == z.itemsize,
          "%s accepted dtypes (%d,%d) (%d,%d) (%d,%d)", name, z.t.dtype.code, z.t.dtype.bits, re.t.dtype.code,
          re.t.dtype.bits, im.t.dtype.code, im.t.dtype.bits);
    if (z.numel > 0) {
        size_t half = re.itemsize;
        if (pack) {
            ftensor *ws[1] = {&z}, *rs[2] = {&re, &im};
            part_t parts[2] = {{0, 0, 0, 0, half}, {0, 1, half, 0, half}};
            CHECK(reference(&h, ws, 1, rs, 2, parts, 2), "pack returned OK for overlapping tensors");
        } else {
            ftensor *ws[2] = {&re, &im}, *rs[1] = {&z};
            part_t parts[2] = {{0, 0, 0, 0, half}, {1, 0, 0, half, half}};
            CHECK(reference(&h, ws, 2, rs, 1, parts, 2), "unpack returned OK for overlapping tensors");
        }
        heap_expect_result(&h, name);
    } else {
        heap_expect_unchanged(&h, name, st);
    }
out:
    ft_free(&z);
    ft_free(&re);
    ft_free(&im);
    heap_free(&h);
}

/* Element addresses of `v` (a pylayout tensor) compared with a function of the base's. */
static uint8_t *addr_dl(const DLTensor *t, const int64_t *idx)
{
    i128 off = (i128)t->byte_offset;
    size_t is = itemsize_of(t->dtype);
    for (int d = 0; d < t->ndim; d++)
        off += (i128)idx[d] * t->strides[d] * (i128)is;
    return (uint8_t *)((uintptr_t)t->data + (uintptr_t)(int64_t)off);
}

static int64_t numel_dl(const DLTensor *t)
{
    int64_t n = 1;
    for (int d = 0; d < t->ndim; d++)
        n *= t->shape[d];
    return n;
}

static volatile uint8_t sink;

/* Elements touch_all reads one by one.  A view with arbitrary metadata may have
 * zero strides and so 2^60 elements inside a small base: those are bounded by
 * their extreme elements, which are computed and read directly. */
#define TOUCH_BUDGET 65536

/* Reads `v`'s first and last element in address order and up to TOUCH_BUDGET
 * elements in index order, every byte of each (ASan checks the bounds), and
 * checks each lies in [lo, hi). */
static void touch_all(const DLTensor *v, const uint8_t *lo, const uint8_t *hi, const char *what)
{
    if (numel_dl(v) == 0)
        return;
    int64_t idx[64] = {0}, low[64], high[64];
    size_t is = itemsize_of(v->dtype);
    for (int d = 0; d < v->ndim; d++) { /* the extreme elements: each index at the end its stride favours */
        low[d] = v->strides[d] < 0 ? v->shape[d] - 1 : 0;
        high[d] = v->strides[d] < 0 ? 0 : v->shape[d] - 1;
    }
    const uint8_t *ends[2] = {addr_dl(v, low), addr_dl(v, high)};
    for (int e = 0; e < 2; e++) {
        CHECK(ends[e] >= lo && ends[e] + is <= hi, "%s: extreme element at %p outside [%p, %p)", what,
              (const void *)ends[e], (const void *)lo, (const void *)hi);
        for (size_t k = 0; k < is; k++)
            sink ^= ends[e][k];
    }
    int64_t budget = TOUCH_BUDGET;
    do {
        const uint8_t *p = addr_dl(v, idx);
        CHECK(p >= lo && p + is <= hi, "%s: element at %p outside [%p, %p)", what, (const void *)p,
              (const void *)lo, (const void *)hi);
        for (size_t k = 0; k < is; k++)
            sink ^= p[k];
    } while (--budget > 0 && next_index(v->ndim, v->shape, idx));
}

static void check_same_dl_meta(const DLTensor *a, const DLTensor *b, const char *what)
{
    CHECK(a->ndim == b->ndim, "%s: ndim %d vs %d", what, a->ndim, b->ndim);
    for (int d = 0; d < a->ndim; d++)
        CHECK(a->shape[d] == b->shape[d], "%s: dim %d size differs", what, d);
}

static void op_tensor(reader *r)
{
    heap_t h = {0};
    ftensor x, desc;
    gen_meta(r, &x, true, NULL);
    uint8_t b = u8(r);
    if (b < 100 && x.t.ndim > 0 && x.shape) { /* often a (..., 2) real tensor for view_as_complex */
        x.shape[x.t.ndim - 1] = 2;
        static const DLDataType reals[] = {{kDLFloat, 16, 1}, {kDLFloat, 32, 1}, {kDLFloat, 64, 1}};
        x.t.dtype = reals[b % 3];
        if (x.t.strides && (b & 0x40) == 0)
            x.strides[x.t.ndim - 1] = 1;
    }
    gen_data(r, &h, &x, -1);
    uint64_t flags = u8(r) & 3;
    pylayout_tensor *t = NULL;
    int st = pylayout_tensor_borrow(&x.t, flags, &t);
    if (x.cls == CLS_INVALID) {
        CHECK(st != PYLAYOUT_OK, "tensor_borrow accepted an invalid tensor");
        goto out;
    }
    if (st != PYLAYOUT_OK) {
        CHECK(st == PYLAYOUT_ERR_NO_MEMORY, "tensor_borrow refused a valid tensor: %d", st);
        goto out;
    }
    const DLTensor *dl;
    CHECK(pylayout_tensor_dltensor(t, &dl) == PYLAYOUT_OK && dl->strides, "dltensor");
    check_same_dl_meta(dl, &x.t, "borrow");
    if (x.cls != CLS_SAFE)
        goto release; /* metadata-only ops below still need backing memory to read */
    const uint8_t *blo = x.numel ? (const uint8_t *)x.t.data + x.t.byte_offset + (int64_t)x.lo : NULL;
    const uint8_t *bhi = x.numel ? (const uint8_t *)x.t.data + x.t.byte_offset + (int64_t)x.hi : NULL;
    size_t isz = x.itemsize;
    uint8_t which = u8(r) % 8;
    pylayout_tensor *v = NULL;
    int64_t idx[65] = {0};
    switch (which) {
    case 0: { /* view_as_complex */
        st = pylayout_view_as_complex(t, &v);
        if (st != PYLAYOUT_OK)
            break;
        const DLTensor *vd;
        pylayout_tensor_dltensor(v, &vd);
        CHECK(vd->ndim == dl->ndim - 1 && itemsize_of(vd->dtype) == 2 * isz, "view_as_complex meta");
        touch_all(vd, blo, bhi, "view_as_complex");
        if (numel_dl(vd) > 0) /* idx[dl->ndim - 1] (the real part) stays 0: next_index walks vd's dims */
            do {
                CHECK(addr_dl(vd, idx) == addr_of(&x, idx), "view_as_complex: element moved");
            } while (next_index(vd->ndim, vd->shape, idx));
        break;
    }
    case 1: { /* view_as_real and complex_parts */
        st = pylayout_view_as_real(t, &v);
        pylayout_tensor *pre = NULL, *pim = NULL;
        int st2 = pylayout_complex_parts(t, &pre, &pim);
        CHECK((st2 == PYLAYOUT_OK) == (st == PYLAYOUT_OK), "view_as_real %d but complex_parts %d", st, st2);
        if (st2 == PYLAYOUT_OK) {
            const DLTensor *dre, *dim;
            pylayout_tensor_dltensor(pre, &dre);
            pylayout_tensor_dltensor(pim, &dim);
            check_same_dl_meta(dre, dl, "complex_parts re");
            check_same_dl_meta(dim, dl, "complex_parts im");
            touch_all(dre, blo, bhi, "complex_parts re");
            touch_all(dim, blo, bhi, "complex_parts im");
            if (numel_dl(dl) > 0)
                do {
                    CHECK(addr_dl(dre, idx) == addr_of(&x, idx) &&
                              addr_dl(dim, idx) == addr_of(&x, idx) + (int64_t)(isz / 2),
                          "complex_parts: element moved");
                } while (next_index(dl->ndim, dl->shape, idx));
            pylayout_tensor_release(pre);
            pylayout_tensor_release(pim);
        }
        if (st != PYLAYOUT_OK) {
            CHECK(x.t.dtype.code != kDLComplex || x.t.ndim == 64 || x.itemsize == 0 || st == PYLAYOUT_ERR_INVALID_TENSOR,
                  "view_as_real refused a complex tensor: %d", st);
            break;
        }
        const DLTensor *vd;
        pylayout_tensor_dltensor(v, &vd);
        CHECK(vd->ndim == dl->ndim + 1 && vd->shape[vd->ndim - 1] == 2 && 2 * itemsize_of(vd->dtype) == isz,
              "view_as_real meta");
        touch_all(vd, blo, bhi, "view_as_real");
        if (numel_dl(vd) > 0)
            do {
                CHECK(addr_dl(vd, idx) == addr_of(&x, idx) + idx[dl->ndim] * (int64_t)(isz / 2),
                      "view_as_real: element moved");
            } while (next_index(vd->ndim, vd->shape, idx));
        break;
    }
    case 2: { /* canonicalize */
        st = pylayout_tensor_canonicalize(t, &v);
        if (st != PYLAYOUT_OK)
            break;
        const DLTensor *vd;
        pylayout_tensor_dltensor(v, &vd);
        check_same_dl_meta(vd, dl, "canonicalize");
        touch_all(vd, blo, bhi, "canonicalize");
        if (numel_dl(vd) > 0)
            do {
                CHECK(addr_dl(vd, idx) == addr_of(&x, idx), "canonicalize: element moved");
            } while (next_index(vd->ndim, vd->shape, idx));
        break;
    }
    case 3: case 4: { /* tensor_view with arbitrary metadata: must stay inside the base */
        gen_meta(r, &desc, true, u8(r) < 128 ? &x : NULL);
        desc.t.data = NULL;
        st = pylayout_tensor_view(t, &desc.t, &v);
        if (st == PYLAYOUT_OK) {
            const DLTensor *vd;
            pylayout_tensor_dltensor(v, &vd);
            CHECK(vd->data == dl->data, "view data pointer changed");
            touch_all(vd, blo, bhi, "tensor_view");
        }
        ft_free(&desc);
        break;
    }
    case 5: case 6: { /* convert / convert_order: element-wise equal, dense */
        int32_t order[64];
        pylayout_format fmt = (pylayout_format)(u8(r) % 5);
        if (which == 5) {
            st = pylayout_convert(dl, fmt, &v);
        } else {
            for (int d = 0; d < dl->ndim; d++)
                order[d] = d;
            uint8_t s = u8(r);
            for (int d = dl->ndim - 1; d > 0; d--) {
                int j = (s + 5 * d) % (d + 1), tmp = order[d];
                order[d] = order[j];
                order[j] = tmp;
            }
            if (s == 255 && dl->ndim > 1)
                order[0] = order[1]; /* not a permutation */
            st = pylayout_convert_order(dl, order, &v);
            CHECK(!(s == 255 && dl->ndim > 1) || st != PYLAYOUT_OK, "convert_order accepted a non-permutation");
        }
        if (st != PYLAYOUT_OK) {
            CHECK(st == PYLAYOUT_ERR_FORMAT_RANK || st == PYLAYOUT_ERR_INVALID_ARGUMENT ||
                      st == PYLAYOUT_ERR_UNSUPPORTED_DEVICE || st == PYLAYOUT_ERR_NO_MEMORY,
                  "convert failed on a valid input: %d", st);
            CHECK(st != PYLAYOUT_ERR_UNSUPPORTED_DEVICE || !host_device(x.t.device), "convert: device");
            break;
        }
        const DLTensor *vd;
        pylayout_tensor_dltensor(v, &vd);
        check_same_dl_meta(vd, dl, "convert");
        bool dense = false, cont = false;
        CHECK(pylayout_is_dense(vd, &dense) == PYLAYOUT_OK && dense, "convert result not dense");
        if (which == 5) {
            CHECK(pylayout_is_contiguous(vd, fmt, &cont) == PYLAYOUT_OK && cont, "convert result not in format %d",
                  fmt);
        }
        if (numel_dl(vd) > 0)
            do {
                CHECK(memcmp(addr_dl(vd, idx), addr_of(&x, idx), isz) == 0, "convert: element differs");
            } while (next_index(vd->ndim, vd->shape, idx));
        break;
    }
    default: { /* exports, retain / release */
        DLManagedTensorVersioned *mv = NULL;
        DLManagedTensor *ml = NULL;
        CHECK(pylayout_tensor_to_versioned(t, &mv) == PYLAYOUT_OK, "to_versioned");
        CHECK(mv->version.major == 1 && (mv->flags & PYLAYOUT_FLAG_READ_ONLY) == (flags & PYLAYOUT_FLAG_READ_ONLY),
              "to_versioned flags");
        st = pylayout_tensor_to_legacy(t, &ml);
        CHECK((st == PYLAYOUT_ERR_READ_ONLY) == ((flags & PYLAYOUT_FLAG_READ_ONLY) != 0), "to_legacy: %d", st);
        pylayout_tensor_retain(t);
        pylayout_tensor *back = NULL;
        if (pylayout_tensor_from_versioned(mv, &back) == PYLAYOUT_OK)
            pylayout_tensor_release(back);
        else
            mv->deleter(mv);
        if (ml)
            ml->deleter(ml);
        pylayout_tensor_release(t);
        st = PYLAYOUT_OK;
        break;
    }
    }
    pylayout_tensor_release(v);
release:
    pylayout_tensor_release(t);
out:
    ft_free(&x);
    heap_free(&h);
}

/* Counting deleters for the import paths. */
static int deleted_versioned, deleted_legacy;
static void del_versioned(DLManagedTensorVersioned *m) { deleted_versioned++, (void)m; }
static void del_legacy(DLManagedTensor *m) { deleted_legacy++, (void)m; }

static void op_import(reader *r)
{
    ftensor x;
    heap_t h = {0};
    gen_meta(r, &x, u8(r) < 200, NULL);
    gen_data(r, &h, &x, -1);
    bool versioned = u8(r) & 1;
    uint8_t vb = u8(r);
    uint32_t major = vb < 200 ? 1 : vb < 220 ? 0 : vb < 240 ? 2 : (uint32_t)u64(r);
    deleted_versioned = deleted_legacy = 0;
    pylayout_tensor *t = NULL;
    int st;
    if (versioned) {
        DLManagedTensorVersioned *m = calloc(1, sizeof *m);
        m->version.major = major;
        m->version.minor = u8(r);
        m->deleter = del_versioned;
        m->flags = u64(r);
        m->dl_tensor = x.t;
        st = pylayout_tensor_from_versioned(m, &t);
        CHECK(st != PYLAYOUT_OK || (major == 1 && x.cls != CLS_INVALID), "from_versioned accepted major %u / cls %d",
              major, x.cls);
        CHECK(deleted_versioned == 0, "deleter ran during import");
        if (st == PYLAYOUT_OK) {
            uint64_t fl = 0;
            pylayout_tensor_flags(t, &fl);
            CHECK((fl & PYLAYOUT_FLAG_READ_ONLY) == (m->flags & PYLAYOUT_FLAG_READ_ONLY), "read-only flag lost");
            pylayout_tensor_retain(t);
            pylayout_tensor_release(t);
            CHECK(deleted_versioned == 0, "deleter ran early");
            pylayout_tensor_release(t);
            CHECK(deleted_versioned == 1, "versioned deleter ran %d times", deleted_versioned);
        } else {
            CHECK(deleted_versioned == 0, "deleter ran on a failed import");
        }
        free(m);
    } else {
        DLManagedTensor *m = calloc(1, sizeof *m);
        m->deleter = del_legacy;
        m->dl_tensor = x.t;
        st = pylayout_tensor_from_legacy(m, u8(r) & 3, &t);
        CHECK(st != PYLAYOUT_OK || x.cls != CLS_INVALID, "from_legacy accepted an invalid tensor");
        if (st == PYLAYOUT_OK)
            pylayout_tensor_release(t);
        CHECK(deleted_legacy == (st == PYLAYOUT_OK), "legacy deleter ran %d times (status %d)", deleted_legacy, st);
        free(m);
    }
    ft_free(&x);
    heap_free(&h);
}

static void op_queries(reader *r)
{
    ftensor x;
    gen_meta(r, &x, false, NULL);
    x.t.data = u8(r) < 40 ? NULL : (void *)(uintptr_t)u64(r); /* never dereferenced */
    classify(&x);
    bool meta_ok = x.t.ndim >= 0 && x.t.ndim <= 64 && (x.t.ndim == 0 || x.t.shape);
    if (meta_ok)
        for (int d = 0; d < x.t.ndim; d++)
            meta_ok &= x.t.shape[d] >= 0;
    if (meta_ok) {
        i128 n = 1;
        for (int d = 0; d < x.t.ndim && meta_ok; d++) {
            n *= x.t.shape[d];
            meta_ok = n <= INT64_MAX;
        }
    }
    int st = pylayout_validate(&x.t);
    CHECK((st == PYLAYOUT_OK) == (x.cls != CLS_INVALID), "validate returned %d for class %d", st, x.cls);
    int64_t n = -1;
    st = pylayout_numel(&x.t, &n);
    CHECK((st == PYLAYOUT_OK) == meta_ok, "numel returned %d (meta_ok %d)", st, meta_ok);
    bool c[5] = {0}, dense = false;
    for (int f = 0; f < 5; f++) {
        st = pylayout_is_contiguous(&x.t, (pylayout_format)f, &c[f]);
        CHECK(f == 4 ? st != PYLAYOUT_OK : (st == PYLAYOUT_OK) == meta_ok, "is_contiguous(%d) returned %d", f, st);
    }
    pylayout_format sf;
    st = pylayout_suggest_format(&x.t, &sf);
    CHECK((st == PYLAYOUT_OK) == meta_ok, "suggest_format returned %d", st);
    st = pylayout_is_dense(&x.t, &dense);
    CHECK((st == PYLAYOUT_OK) == meta_ok, "is_dense returned %d", st);
    if (meta_ok) {
        for (int f = 0; f < 4; f++)
            CHECK(!c[f] || dense || n == 0, "contiguous in format %d but not dense", f);
        CHECK(sf >= 0 && sf <= 2, "suggest_format gave %d", sf);
        CHECK(!c[1] || x.t.ndim == 4, "channels_last on %d dims", x.t.ndim);
        CHECK(!c[2] || x.t.ndim == 5, "channels_last_3d on %d dims", x.t.ndim);
    }
    int32_t an = x.t.ndim >= 0 && x.t.ndim <= 64 ? x.t.ndim : 0;
    int64_t *cs = malloc((size_t)(an ? an : 1) * sizeof(int64_t));
    st = pylayout_canonical_strides(&x.t, cs);
    CHECK((st == PYLAYOUT_OK) == (x.cls != CLS_INVALID), "canonical_strides returned %d for class %d", st, x.cls);
    if (st == PYLAYOUT_OK)
        for (int d = 0; d < x.t.ndim; d++)
            CHECK(x.t.shape[d] == 1 || cs[d] == x.eff[d], "canonical_strides changed dim %d of size %" PRId64, d,
                  x.t.shape[d]);
    if (st == PYLAYOUT_OK && x.numel > 0 && x.cls != CLS_INVALID) {
        /* the relabelled tensor covers the same memory: still valid */
        DLTensor y = x.t;
        y.strides = cs;
        CHECK(pylayout_validate(&y) == PYLAYOUT_OK, "canonical strides made the tensor invalid");
    }
    /* format_strides / order_strides on this shape */
    if (x.t.ndim >= 0 && x.t.ndim <= 64 && (x.t.ndim == 0 || x.t.shape)) {
        pylayout_format f = (pylayout_format)(u8(r) % 5);
        st = pylayout_format_strides(x.t.ndim, x.t.shape, f, cs);
        if (st == PYLAYOUT_OK && meta_ok && x.numel > 0) {
            DLTensor y = x.t;
            y.strides = cs;
            bool ok = false, d2 = false;
            CHECK(pylayout_is_contiguous(&y, f, &ok) == PYLAYOUT_OK && ok, "format_strides(%d) not contiguous", f);
            CHECK(pylayout_is_dense(&y, &d2) == PYLAYOUT_OK && d2, "format_strides(%d) not dense", f);
        }
        CHECK(f != 4 || st != PYLAYOUT_OK, "format_strides accepted format 4");
        CHECK(!(st == PYLAYOUT_OK && f == 1) || x.t.ndim == 4, "channels_last strides for %d dims", x.t.ndim);
        int32_t *order = malloc((size_t)(an ? an : 1) * sizeof(int32_t));
        uint8_t s = u8(r);
        for (int d = 0; d < an; d++)
            order[d] = d;
        for (int d = an - 1; d > 0; d--) {
            int j = (s + 3 * d) % (d + 1), tmp = order[d];
            order[d] = order[j];
            order[j] = tmp;
        }
        bool perm = true;
        if (s >= 250 && an > 0) {
            order[0] = s == 250 ? -1 : s == 251 ? an : order[an - 1];
            perm = an == 1 && s > 251;
        }
        st = pylayout_order_strides(x.t.ndim, x.t.shape, order, cs);
        CHECK(perm || st != PYLAYOUT_OK, "order_strides accepted a non-permutation");
        if (st == PYLAYOUT_OK && meta_ok && x.numel > 0) {
            DLTensor y = x.t;
            y.strides = cs;
            bool d2 = false;
            CHECK(pylayout_is_dense(&y, &d2) == PYLAYOUT_OK && d2, "order_strides not dense");
        }
        free(order);
    }
    free(cs);
    CHECK(pylayout_strerror((pylayout_status)(int)u8(r)) != NULL, "strerror NULL");
    CHECK(pylayout_last_error() != NULL, "last_error NULL");
    ft_free(&x);
}

/* A large operation's buffer of n bytes: on a 64-byte line if on_lines,
 * else wherever malloc puts it (free() releases either). */
static uint8_t *big_alloc(size_t n, bool on_lines)
{
    void *p = NULL;
    if (!on_lines)
        return malloc(n);
    return posix_memalign(&p, 64, n) == 0 ? p : NULL;
}

/* The large operations' source bytes: a pattern, written a word at a time
 * (ASan checks each access). */
static void big_fill(uint8_t *buf, size_t n)
{
    for (size_t i = 0; i + 8 <= n; i += 8) {
        uint64_t w = (uint64_t)i * UINT64_C(0x9E3779B97F4A7C15);
        memcpy(buf + i, &w, 8);
    }
    for (size_t i = n / 8 * 8; i < n; i++)
        buf[i] = (uint8_t)i;
}

/* The large operations' element type of `is` bytes. */
static DLDataType big_dtype(size_t is)
{
    static const DLDataType dts[] = {
        {kDLUInt, 8, 1}, {kDLFloat, 16, 1}, {kDLFloat, 32, 1}, {kDLFloat, 64, 1}, {kDLComplex, 128, 1},
    };
    return dts[is == 1 ? 0 : is == 2 ? 1 : is == 4 ? 2 : is == 8 ? 3 : 4];
}

/* The sentinel 0xA5 still in the doff bytes before a large operation's dst
 * and the 64 after its `bytes`. */
static void big_check_slack(const uint8_t *dbuf, size_t doff, size_t bytes, const char *what)
{
    for (size_t i = 0; i < doff; i++)
        CHECK(dbuf[i] == 0xA5, "%s wrote before dst", what);
    for (size_t i = doff + bytes; i < doff + bytes + 64; i++)
        CHECK(dbuf[i] == 0xA5, "%s wrote past dst", what);
}

/* Large inputs only: a dense permute of a big tensor (4-18 MiB, or 256 KiB-2 MiB), so that
 * every kernel family runs at the sizes where it streams and goes parallel
 * tile transposes, thin (2-8 element) interleaves, row copies, transposes of
 * groups.  src is dense
 * in a fuzzed dim order, dst row-major; both start at fuzzed byte offsets
 * inside exactly sized buffers (malloc's, or both on a cache line, as a
 * byte says), dst's slack filled with
 * a sentinel; src's dims flipped as a byte after the offsets says.  Every
 * element and every slack byte is checked. */
static void op_big_permute(reader *r)
{
    static const int64_t sizes[] = {2, 3, 4, 5, 8, 17, 27, 28, 64, 255, 1000, 4099};
    /* bit 7 of the first byte: a permute of 256 KiB - 2 MiB, below the
     * streaming threshold, for the cached tiles (their strips when dst rows
     * lie a multiple of 1 KiB apart); else 4 - 18 MiB, past it (and past
     * 8 MiB, where 4- and 8-byte transposes with dst rows on lines stream,
     * and 8 MiB a thread, where transposes of groups do) */
    const uint8_t first = u8(r);
    const bool cached = first & 0x80;
    /* bit 5: planned as for Intel cores, else as for AMD's (PYLAYOUT_CORES,
     * src/cpu_features.h): some routes are taken on one vendor's only */
    setenv("PYLAYOUT_CORES", (first & 0x20) ? "intel" : "amd", 1);
    const int64_t lo_bytes = cached ? (int64_t)256 << 10 : (int64_t)4 << 20;
    const int64_t hi_bytes = cached ? (int64_t)2 << 20 : (int64_t)18 << 20;
    int ndim = 2 + first % 4;
    size_t is = (size_t)1 << (u8(r) % 4);
    int64_t shape[5], sstr[5], dstr[5];
    int perm[5];
    for (int d = 0; d < ndim; d++) {
        uint8_t b = u8(r);
        shape[d] = b < 160 ? sizes[b % (sizeof sizes / sizeof sizes[0])] : 1 + b % 97;
        perm[d] = d;
    }
    /* bit 6: the last dim stays last, contiguous in both (a row of every
     * copy; 32 bytes or more, a multiple of 16, with dst 16-byte aligned:
     * the streamed transposes of groups) */
    const int last = (first & 0x40) ? ndim - 2 : ndim - 1;
    for (int d = last; d > 0; d--) { /* Fisher-Yates from the input */
        int j = u8(r) % (d + 1), t = perm[d];
        perm[d] = perm[j];
        perm[j] = t;
    }
    int64_t numel = 1;
    for (int d = 0; d < ndim; d++)
        numel *= shape[d];
    /* numel (at most 4099^5) fits, numel * is may not: compare in elements */
    while (numel > hi_bytes / (int64_t)is) { /* shrink the largest dim to fit */
        int big = 0;
        for (int d = 1; d < ndim; d++)
            big = shape[d] > shape[big] ? d : big;
        numel /= shape[big];
        shape[big] = (shape[big] + 1) / 2;
        numel *= shape[big];
    }
    /* bit 4: grow the smallest dim past the thresholds, else the largest:
     * (64, 64) becomes (2048, 2048) instead of (65536, 64), so that both
     * sides of a transpose are long (the staged 256 x 256 blocks of
     * copy_x86.c's pl_stile1_staged_avx2) */
    const bool grow_small = first & 0x10;
    while (numel < lo_bytes / (int64_t)is) {
        int pick = 0;
        for (int d = 1; d < ndim; d++)
            pick = (grow_small ? shape[d] < shape[pick] : shape[d] > shape[pick]) ? d : pick;
        numel /= shape[pick];
        shape[pick] *= 2;
        numel *= shape[pick];
    }
    int64_t acc = 1;
    for (int p = ndim - 1; p >= 0; p--) {
        sstr[perm[p]] = acc;
        acc *= shape[perm[p]];
    }
    acc = 1;
    for (int d = ndim - 1; d >= 0; d--) {
        dstr[d] = acc;
        acc *= shape[d];
    }
    size_t soff = (u8(r) % 64) / is * is, doff = (u8(r) % 64) / is * is, bytes = (size_t)numel * is;
    /* the byte after the offsets: bit d flips src's dim d (a negative
     * stride, as NumPy's a[:, ::-1] and np.rot90 make); none: no flips */
    const uint8_t flips = u8(r);
    int64_t first_el = 0; /* src's element [0, ...], from its buffer's first */
    for (int d = 0; d < ndim; d++)
        if (flips >> d & 1) {
            first_el += (shape[d] - 1) * sstr[d];
            sstr[d] = -sstr[d];
        }
    /* the byte after that: bit 0 puts both buffers on a cache line, so
     * that the offsets above say where each tensor starts against its
     * lines (dst on a line at offset 0: the streaming transposes of planes,
     * whose dst lines must start on lines); else malloc's placement */
    const bool on_lines = u8(r) & 1;
    uint8_t *sbuf = big_alloc(soff + bytes, on_lines), *dbuf = big_alloc(doff + bytes + 64, on_lines);
    CHECK(sbuf && dbuf, "out of memory");
    big_fill(sbuf, soff + bytes);
    const DLDataType dt = big_dtype(is);
    DLTensor src = {.data = sbuf, .device = {kDLCPU, 0}, .ndim = ndim, .dtype = dt, .shape = shape,
                    .strides = sstr, .byte_offset = soff + (size_t)first_el * is};
    DLTensor dst = {.data = dbuf, .device = {kDLCPU, 0}, .ndim = ndim, .dtype = dt, .shape = shape,
                    .strides = dstr, .byte_offset = doff};
    /* A cached permute twice into the same dst, reset in between: the
     * second repeats the first, and the wrapped tiles then walk their
     * blocks backwards (plan.c, pl_repeats). */
    for (int k = 0; k < (cached ? 2 : 1); k++) {
        memset(dbuf, 0xA5, doff + bytes + 64);
        pylayout_status st = pylayout_copy(&src, &dst);
        CHECK(st == PYLAYOUT_OK, "big permute failed: %d", (int)st);
        int64_t idx[5] = {0};
        do {
            int64_t so = 0, dof = 0;
            for (int d = 0; d < ndim; d++) {
                so += idx[d] * sstr[d];
                dof += idx[d] * dstr[d];
            }
            CHECK(memcmp(dbuf + doff + (size_t)dof * is, sbuf + soff + (size_t)(first_el + so) * is, is) == 0,
                  "big permute (copy %d): element %lld differs", k, (long long)dof);
        } while (next_index(ndim, shape, idx));
        big_check_slack(dbuf, doff, bytes, "big permute");
    }
    free(sbuf);
    free(dbuf);
    unsetenv("PYLAYOUT_CORES");
}

/* The large copies whose src is dense in its own order (src strides sstr,
 * in elements, ending at its last element) into a row-major dst: both at
 * byte offsets read from r, dst's slack a sentinel; every element and every
 * slack byte checked.  `what` names the operation in a finding. */
static void big_dense_copy(reader *r, size_t is, int ndim, const int64_t *shape, const int64_t *sstr,
                           const char *what)
{
    int64_t dstr[4], acc = 1;
    for (int d = ndim - 1; d >= 0; d--) {
        dstr[d] = acc;
        acc *= shape[d];
    }
    const size_t soff = (u8(r) % 64) / is * is, doff = (u8(r) % 64) / is * is, bytes = (size_t)acc * is;
    uint8_t *sbuf = malloc(soff + bytes), *dbuf = malloc(doff + bytes + 64);
    CHECK(sbuf && dbuf, "out of memory");
    big_fill(sbuf, soff + bytes);
    memset(dbuf, 0xA5, doff + bytes + 64);
    const DLDataType dt = big_dtype(is);
    DLTensor src = {.data = sbuf, .device = {kDLCPU, 0}, .ndim = ndim, .dtype = dt, .shape = (int64_t *)shape,
                    .strides = (int64_t *)sstr, .byte_offset = soff};
    DLTensor dst = {.data = dbuf, .device = {kDLCPU, 0}, .ndim = ndim, .dtype = dt, .shape = (int64_t *)shape,
                    .strides = dstr, .byte_offset = doff};
    pylayout_status st = pylayout_copy(&src, &dst);
    CHECK(st == PYLAYOUT_OK, "%s failed: %d", what, (int)st);
    int64_t idx[4] = {0};
    do {
        int64_t so = 0, dof = 0;
        for (int d = 0; d < ndim; d++) {
            so += idx[d] * sstr[d];
            dof += idx[d] * dstr[d];
        }
        CHECK(memcmp(dbuf + doff + (size_t)dof * is, sbuf + soff + (size_t)so * is, is) == 0,
              "%s (dst %lld x %lld x %lld x %lld of %zu bytes): element %lld differs", what, (long long)shape[0],
              (long long)shape[1], (long long)shape[2], (long long)(ndim == 4 ? shape[3] : 1), is, (long long)dof);
    } while (next_index(ndim, shape, idx));
    big_check_slack(dbuf, doff, bytes, what);
    free(sbuf);
    free(dbuf);
}

/* Large inputs only: a permute that keeps the last dim, (A, N, n) by
 * (1, 0, 2) or the attention permute (B, A, N, n) by (0, 2, 1, 3), of
 * 256 KiB - 14 MiB, so that the row copies (plan.c's PL_ROWS) run in every
 * form: units of A rows (1 to 16, of 1 to 256 elements), along src's dense
 * dim where they are short (pl_row_block_dim), several a unit
 * (pl_fold_rows), prefetched past 11 MiB, split by the threads.  src is
 * dense in its own order and ends at its last element, dst row-major, both
 * at fuzzed byte offsets; dst's slack holds a sentinel.  Every element and
 * every slack byte is checked. */
static void op_big_rows(reader *r)
{
    const size_t is = (size_t)1 << (u8(r) % 4);
    const uint8_t form = u8(r);
    const int ndim = (form & 1) ? 4 : 3;
    const int64_t A = 1 + u8(r) % 16, n = 1 + u8(r) % 256, B = ndim == 4 ? 1 + u8(r) % 4 : 1;
    const int64_t bytes_target = ((int64_t)256 << 10) + (int64_t)u8(r) * (56 << 10); /* 256 KiB - 14.2 MiB */
    const int64_t N = 1 + bytes_target / (int64_t)is / (A * n * B);
    /* src (B, A, N, n) dense; dst (B, N, A, n) row-major */
    int64_t shape[4] = {B, N, A, n}, sstr[4] = {A * N * n, n, N * n, 1};
    if (ndim == 3) /* drop B (1) */
        for (int d = 0; d < 3; d++) {
            shape[d] = shape[d + 1];
            sstr[d] = sstr[d + 1];
        }
    big_dense_copy(r, is, ndim, shape, sstr, "big rows");
}

/* Large inputs only: a regrouped copy, (O, A, N, B) by (0, 3, 2, 1) or (A,
 * N, B) by (2, 1, 0), of 256 KiB - 14 MiB: src groups of B elements packed
 * along N become dst groups of A (plan.c's pl_regroup: the thin kernels'
 * unzips into an L1 buffer, then zips), A and B of 2 to 9 (9: the tiles),
 * elements of 1 to 16 bytes, units that prefetch the next past 8 MiB, split
 * by the threads; past 8 MiB some 16-byte groups go to the streamed tiles.
 * src is dense in its own order and ends at its last element, dst row-major,
 * both at fuzzed byte offsets; dst's slack holds a sentinel.  Every element
 * and every slack byte is checked. */
static void op_big_regroup(reader *r)
{
    const size_t is = (size_t)1 << (u8(r) % 5);
    const uint8_t form = u8(r);
    const int ndim = (form & 1) ? 4 : 3;
    const int64_t A = 2 + u8(r) % 8, B = 2 + u8(r) % 8, O = ndim == 4 ? 1 + u8(r) % 3 : 1;
    const int64_t bytes_target = ((int64_t)256 << 10) + (int64_t)u8(r) * (56 << 10); /* 256 KiB - 14.2 MiB */
    const int64_t N = 1 + bytes_target / (int64_t)is / (A * B * O);
    /* src (O, A, N, B) dense; dst (O, B, N, A) row-major */
    int64_t shape[4] = {O, B, N, A}, sstr[4] = {A * N * B, 1, B, N * B};
    if (ndim == 3) /* drop O (1) */
        for (int d = 0; d < 3; d++) {
            shape[d] = shape[d + 1];
            sstr[d] = sstr[d + 1];
        }
    big_dense_copy(r, is, ndim, shape, sstr, "big regroup");
}

/* Large inputs only: x[..., ::k] (k = 2 to 9) of rows into a dense dst of
 * 256 KiB - 8 MiB, so that the step-2 and step-k gathers (copy_x86.c,
 * gather_x86.c) run where they stream and go parallel; or k = 0, a source
 * broadcast along the rows (the fill kernels, rows_x86.c).  src ends exactly
 * at its last element (a kernel that loads past it is caught by ASan) and
 * starts at a fuzzed byte offset; its rows lie 0 to 2 elements apart past
 * a row's last step, or exactly one step (rows that fuse into one).  dst's
 * slack holds a sentinel.  Every element and every slack byte is checked. */
static void op_big_gather(reader *r)
{
    const size_t is = (size_t)1 << (u8(r) % 4);
    const int64_t kk = u8(r) % 9, k = kk == 0 ? 0 : kk + 1, rows = 1 + u8(r) % 64, gap = u8(r) % 4, pad = gap == 3 ? k - 1 : gap;
    const int64_t bytes_target = ((int64_t)256 << 10) + ((int64_t)u8(r) << 15); /* 256 KiB - 8.2 MiB */
    const int64_t n = bytes_target / (int64_t)is / rows; /* 512 or more */
    int64_t shape[2] = {rows, n}, sstr[2] = {(n - 1) * k + 1 + pad, k}, dstr[2] = {n, 1};
    const size_t soff = (u8(r) % 64) / is * is, doff = (u8(r) % 64) / is * is;
    const size_t sbytes = (size_t)((rows - 1) * sstr[0] + (n - 1) * k + 1) * is, dbytes = (size_t)(rows * n) * is;
    uint8_t *sbuf = malloc(soff + sbytes), *dbuf = malloc(doff + dbytes + 64);
    CHECK(sbuf && dbuf, "out of memory");
    big_fill(sbuf, soff + sbytes);
    memset(dbuf, 0xA5, doff + dbytes + 64);
    const DLDataType dt = big_dtype(is);
    DLTensor src = {.data = sbuf, .device = {kDLCPU, 0}, .ndim = 2, .dtype = dt, .shape = shape,
                    .strides = sstr, .byte_offset = soff};
    DLTensor dst = {.data = dbuf, .device = {kDLCPU, 0}, .ndim = 2, .dtype = dt, .shape = shape,
                    .strides = dstr, .byte_offset = doff};
    pylayout_status st = pylayout_copy(&src, &dst);
    CHECK(st == PYLAYOUT_OK, "big gather failed: %d", (int)st);
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < n; j++)
            CHECK(memcmp(dbuf + doff + (size_t)(i * n + j) * is, sbuf + soff + (size_t)(i * sstr[0] + j * k) * is,
                         is) == 0,
                  "big gather (step %lld): element %lld, %lld differs", (long long)k, (long long)i, (long long)j);
    big_check_slack(dbuf, doff, dbytes, "big gather");
    free(sbuf);
    free(dbuf);
}

/* Large inputs only: x[..., :c] of groups of C > c elements (c = 1 to 8,
 * C up to c + 12) into a dense dst of 256 KiB - 8 MiB, so that the group
 * gathers (group_gather_x86.c) run on every window size and go parallel:
 * RGBA to RGB, the xyz of (N, 4) points; with bit 7 of the gap byte, the
 * other way, a dense src into the groups of a dst (the scatters: RGB into
 * an RGBA buffer, a plane into one channel); with bit 6 (not 7), into
 * planes, the dense dst in (c, rows, n) order (RGBA's RGB to CHW: the
 * groups gathered, then unzipped); with bits 7 and 6, into the same
 * groups of a second strided buffer (one RGBA image's RGB into another's:
 * the masked moves), at its own offset, or into groups 1-3 elements
 * further apart (an RGB image's channel into an RGBA one's: the staged
 * copies) with the byte after the offsets.  A gather whose byte after
 * the offsets has bit 0 set reads its groups packed instead, in the
 * opposite order along n (an HWC image's pixels flipped: group_flip), and
 * with bit 1 its rows flipped too (rotated by 180 degrees).  The strided
 * side ends
 * exactly at its last group (ASan catches a load past it) and starts at a
 * fuzzed byte offset; its rows lie 0 to 2 elements apart past a row's last
 * group, or exactly one group's step (rows that fuse).  Every element is
 * checked, and every byte around the dense dst, or between the strided
 * dst's groups, must still hold what it held. */
static void op_big_groups(reader *r)
{
    const size_t is = (size_t)1 << (u8(r) % 4);
    const int64_t c = 1 + u8(r) % 8, C = c + 1 + u8(r) % 12, rows = 1 + u8(r) % 64;
    const uint8_t gap_byte = u8(r);
    const bool move = (gap_byte & 0xC0) == 0xC0, scatter = !move && (gap_byte & 0x80),
               planes = !(gap_byte & 0x80) && (gap_byte & 0x40);
    const int64_t gap = gap_byte % 4, pad = gap == 3 ? C - c : gap;
    const int64_t bytes_target = ((int64_t)256 << 10) + ((int64_t)u8(r) << 15); /* 256 KiB - 8.2 MiB */
    const int64_t n = bytes_target / (int64_t)is / c / rows; /* 64 or more */
    int64_t shape[3] = {rows, n, c}, gstr[3] = {(n - 1) * C + c + pad, C, 1}, dense[3] = {n * c, c, 1};
    if (planes)
        dense[0] = n, dense[1] = 1, dense[2] = rows * n;
    const size_t goff = (u8(r) % 64) / is * is, doff = (u8(r) % 64) / is * is;
    const size_t gbytes = (size_t)((rows - 1) * gstr[0] + (n - 1) * C + c) * is;
    size_t dbytes = (size_t)(rows * n * c) * is;
    /* moves: dst groups Cd elements apart, 0-3 more than src's (a byte
     * after the offsets; none: the same step) */
    const int64_t Cd = move ? C + u8(r) % 4 : C;
    int64_t mstr[3] = {(n - 1) * Cd + c + pad, Cd, 1};
    if (move)
        dbytes = (size_t)((rows - 1) * mstr[0] + (n - 1) * Cd + c) * is;
    uint8_t *gbuf = malloc(goff + gbytes), *dbuf = malloc(doff + dbytes + 64);
    CHECK(gbuf && dbuf, "out of memory");
    const DLDataType dt = big_dtype(is);
    if (move) {
        DLTensor src = {.data = gbuf, .device = {kDLCPU, 0}, .ndim = 3, .dtype = dt, .shape = shape,
                        .strides = gstr, .byte_offset = goff};
        DLTensor dst = {.data = dbuf, .device = {kDLCPU, 0}, .ndim = 3, .dtype = dt, .shape = shape,
                        .strides = mstr, .byte_offset = doff};
        big_fill(gbuf, goff + gbytes);
        memset(dbuf, 0xA5, doff + dbytes + 64);
        CHECK(pylayout_copy(&src, &dst) == PYLAYOUT_OK, "big group move failed");
        for (int64_t i = 0; i < rows; i++)
            for (int64_t j = 0; j < n; j++) {
                const size_t so = (size_t)(i * gstr[0] + j * C) * is, o = (size_t)(i * mstr[0] + j * Cd) * is;
                CHECK(memcmp(dbuf + doff + o, gbuf + goff + so, (size_t)c * is) == 0,
                      "big group move (%lld of %lld into %lld): group %lld, %lld differs", (long long)c,
                      (long long)C, (long long)Cd, (long long)i, (long long)j);
                memset(dbuf + doff + o, 0xA5, (size_t)c * is); /* checked: only bytes between groups are left */
            }
        for (size_t i = 0; i < doff + dbytes + 64; i++)
            CHECK(dbuf[i] == 0xA5, "big group move wrote between groups (byte %zu)", i);
        free(gbuf);
        free(dbuf);
        return;
    }
    /* flipped: the groups packed instead, in the opposite order along n
     * (an HWC image's pixels flipped: group_flip), and with bit 1 the rows
     * too (rotated by 180 degrees); a byte after the offsets of a gather,
     * none: not flipped */
    const uint8_t flip_byte = !scatter && !planes ? u8(r) : 0;
    if (flip_byte & 1) {
        const bool rot = flip_byte & 2;
        const int64_t rs = n * c + pad;
        int64_t fstr[3] = {rot ? -rs : rs, -c, 1};
        const size_t fbytes = (size_t)((rows - 1) * rs + n * c) * is;
        /* element [0][0][0]: the first row's last group (rot: the last row's) */
        const size_t first = goff + (size_t)((rot ? (rows - 1) * rs : 0) + (n - 1) * c) * is;
        uint8_t *fbuf = malloc(goff + fbytes);
        CHECK(fbuf, "out of memory");
        DLTensor src = {.data = fbuf, .device = {kDLCPU, 0}, .ndim = 3, .dtype = dt, .shape = shape,
                        .strides = fstr, .byte_offset = first};
        DLTensor dst = {.data = dbuf, .device = {kDLCPU, 0}, .ndim = 3, .dtype = dt, .shape = shape,
                        .strides = dense, .byte_offset = doff};
        big_fill(fbuf, goff + fbytes);
        memset(dbuf, 0xA5, doff + dbytes + 64);
        CHECK(pylayout_copy(&src, &dst) == PYLAYOUT_OK, "big group flip failed");
        for (int64_t i = 0; i < rows; i++)
            for (int64_t j = 0; j < n; j++)
                CHECK(memcmp(dbuf + doff + (size_t)((i * n + j) * c) * is,
                             fbuf + (size_t)((int64_t)first + (i * fstr[0] - j * c) * (int64_t)is),
                             (size_t)c * is) == 0,
                      "big group flip (%lld a group%s): group %lld, %lld differs", (long long)c, rot ? ", rows too" : "",
                      (long long)i, (long long)j);
        big_check_slack(dbuf, doff, dbytes, "big group flip");
        free(fbuf);
        free(gbuf);
        free(dbuf);
        return;
    }
    DLTensor grouped = {.data = gbuf, .device = {kDLCPU, 0}, .ndim = 3, .dtype = dt, .shape = shape,
                        .strides = gstr, .byte_offset = goff};
    DLTensor packed = {.data = dbuf, .device = {kDLCPU, 0}, .ndim = 3, .dtype = dt, .shape = shape,
                       .strides = dense, .byte_offset = doff};
    if (scatter) {
        big_fill(dbuf, doff + dbytes + 64);
        memset(gbuf, 0xA5, goff + gbytes);
    } else {
        big_fill(gbuf, goff + gbytes);
        memset(dbuf, 0xA5, doff + dbytes + 64);
    }
    pylayout_status st = scatter ? pylayout_copy(&packed, &grouped) : pylayout_copy(&grouped, &packed);
    CHECK(st == PYLAYOUT_OK, "big groups failed: %d", (int)st);
    const char *what = scatter ? "big group scatter" : "big group gather";
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < n; j++) {
            const size_t po = doff + (size_t)((i * n + j) * c) * is, go = goff + (size_t)(i * gstr[0] + j * C) * is;
            if (planes) {
                for (int64_t q = 0; q < c; q++)
                    CHECK(memcmp(dbuf + doff + (size_t)(i * n + j + q * rows * n) * is, gbuf + go + (size_t)q * is,
                                 is) == 0,
                          "big groups into planes (%lld of %lld): element %lld, %lld, %lld differs", (long long)c,
                          (long long)C, (long long)i, (long long)j, (long long)q);
                continue;
            }
            CHECK(memcmp(dbuf + po, gbuf + go, (size_t)c * is) == 0, "%s (%lld of %lld): group %lld, %lld differs",
                  what, (long long)c, (long long)C, (long long)i, (long long)j);
            if (scatter) /* the group checked: mark it, so that only bytes between groups are left to check */
                memset(gbuf + go, 0xA5, (size_t)c * is);
        }
    if (scatter) {
        for (size_t i = 0; i < goff + gbytes; i++)
            CHECK(gbuf[i] == 0xA5, "%s wrote between groups (byte %zu)", what, i);
    } else {
        big_check_slack(dbuf, doff, dbytes, what);
    }
    free(gbuf);
    free(dbuf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    reader r = {data, size};
    uint8_t op = u8(&r);
    /* One input in sixteen runs large, on 1 or 2 threads (the OpenMP team
     * when the harness is built with OpenMP); the rest small, on one thread. */
    LARGE = (op & 0xf0) == 0xf0;
    MAX_NUMEL = LARGE ? LARGE_NUMEL : SMALL_NUMEL;
    MAX_BYTES = LARGE ? LARGE_BYTES : SMALL_BYTES;
    pylayout_set_num_threads(LARGE ? 1 + (u8(&r) & 1) : 1);
    switch (op % 8) {
    case 0:
        if (LARGE) {
            op_big_permute(&r);
            break;
        }
        op_copy(&r);
        break;
    case 1:
        if (LARGE && (op & 0x08)) { /* 0xf9 */
            op_big_gather(&r);
            break;
        }
        op_copy(&r);
        break;
    case 2:
        if (LARGE && (op & 0x08)) { /* 0xfa */
            op_big_groups(&r);
            break;
        }
        op_copy(&r);
        break;
    case 3:
        op_complex(&r, true);
        break;
    case 4:
        op_complex(&r, false);
        break;
    case 5:
        if (LARGE && (op & 0x08)) { /* 0xfd */
            op_big_rows(&r);
            break;
        }
        op_tensor(&r);
        break;
    case 6:
        if (LARGE && (op & 0x08)) { /* 0xfe */
            op_big_regroup(&r);
            break;
        }
        op_import(&r);
        break;
    default:
        op_queries(&r);
        break;
    }
    return 0;
}

#ifdef PL_FUZZ_STANDALONE
/* ------------------------------------------------- standalone driver */
#include <dirent.h>
#include <sys/stat.h>
#include <time.h>

static long replayed;

static void run_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        exit(2);
    }
    static uint8_t buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    uint8_t *copy = malloc(n ? n : 1); /* exactly sized, as libFuzzer does */
    memcpy(copy, buf, n);
    LLVMFuzzerTestOneInput(copy, n);
    free(copy);
    replayed++;
}

static void run_path(const char *path)
{
    struct stat sb;
    if (stat(path, &sb) != 0) {
        perror(path);
        exit(2);
    }
    if (!S_ISDIR(sb.st_mode)) {
        run_file(path);
        return;
    }
    DIR *d = opendir(path);
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char full[4096];
        snprintf(full, sizeof full, "%s/%s", path, e->d_name);
        run_path(full);
    }
    if (d)
        closedir(d);
}

static uint64_t rng_state;
static uint64_t rng(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

int main(int argc, char **argv)
{
    double seconds = 0;
    rng_state = (uint64_t)time(NULL) | 1;
    int i = 1;
    for (; i < argc && argv[i][0] == '-'; i++) {
        if (!strcmp(argv[i], "-t") && i + 1 < argc)
            seconds = atof(argv[++i]);
        else if (!strcmp(argv[i], "-s") && i + 1 < argc)
            rng_state = strtoull(argv[++i], NULL, 0) | 1;
        else {
            fprintf(stderr, "usage: %s [-t SECONDS] [-s SEED] [FILE|DIR ...]\n", argv[0]);
            return 2;
        }
    }
    uint64_t seed = rng_state;
    for (; i < argc; i++)
        run_path(argv[i]);
    long random_runs = 0;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    uint8_t buf[512];
    while (seconds > 0) {
        size_t n = 1 + rng() % sizeof buf;
        for (size_t k = 0; k < n; k++)
            buf[k] = (uint8_t)rng();
        uint8_t *copy = malloc(n);
        memcpy(copy, buf, n);
        LLVMFuzzerTestOneInput(copy, n);
        free(copy);
        random_runs++;
        if ((random_runs & 255) == 0) {
            clock_gettime(CLOCK_MONOTONIC, &t1);
            if ((double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec) >= seconds)
                break;
        }
    }
    printf("fuzz_copy standalone: %ld corpus inputs, %ld random inputs (seed 0x%" PRIx64 "), no findings\n",
           replayed, random_runs, seed);
    return 0;
}
#endif
