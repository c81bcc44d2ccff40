/*
 * alloc.c - memory for tensors pylayout allocates.
 *
 * A fresh output is written exactly once, so for large tensors the cost of
 * faulting its pages in can exceed the copy itself: on the 2-core VMs this was
 * measured on, first touch of 4 KiB pages ran at ~1.7 GB/s against ~10 GB/s
 * for memcpy into memory already mapped.  Large allocations are therefore
 * aligned to 2 MiB and offered to transparent huge pages (MADV_HUGEPAGE, for
 * systems whose THP mode is "madvise"), which halved that cost there.  See
 * HUGE_MIN_BYTES for why smaller allocations are left to malloc.
 */
#define _DEFAULT_SOURCE /* posix_memalign, madvise */
#include <stdlib.h>

#if defined(__linux__)
#include <sys/mman.h>
#endif

#include "internal.h"

#define HUGE_PAGE ((size_t)2 << 20)
/* glibc serves blocks below its dynamic mmap ceiling (32 MiB on 64-bit) from
 * the heap once a block of that size has been freed, so repeated conversions
 * reuse pages already faulted in; aligning those to 2 MiB would defeat that
 * (measured: a 26 MB channels_last conversion took 16.7 ms instead of 4).
 * Larger blocks are always fresh mmaps, and there huge pages halve the cost
 * of first touch. */
#define HUGE_MIN_BYTES ((size_t)32 << 20)

void *_pylayout_aligned_alloc(size_t nbytes)
{
    void *p = NULL;
    if (nbytes >= HUGE_MIN_BYTES) {
        if (posix_memalign(&p, HUGE_PAGE, nbytes) != 0)
            return NULL;
#if defined(__linux__) && defined(MADV_HUGEPAGE)
        (void)madvise(p, nbytes, MADV_HUGEPAGE); /* advice only: failure changes nothing */
#endif
        return p;
    }
    /* 64-byte alignment: a cache line, and every SIMD width in use. */
    if (posix_memalign(&p, 64, nbytes ? nbytes : 64) != 0)
        return NULL;
    return p;
}

void _pylayout_aligned_free(void *p)
{
    free(p);
}
