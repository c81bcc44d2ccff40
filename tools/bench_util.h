/*
 * bench_util.h - what the C benchmarks in tools/ share: a monotonic clock
 * and buffers that are aligned and already faulted in.  Benchmarks, not
 * tests: each tool includes this once.
 */
#ifndef PYLAYOUT_TOOLS_BENCH_UTIL_H
#define PYLAYOUT_TOOLS_BENCH_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Seconds on the monotonic clock. */
static inline double bench_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* n bytes aligned to `align`, written once so their pages are in before
 * timing; exits on failure. */
static inline void *bench_alloc(size_t n, size_t align)
{
    void *p = NULL;
    if (posix_memalign(&p, align, n) != 0) {
        fprintf(stderr, "out of memory (%zu bytes)\n", n);
        exit(1);
    }
    memset(p, 1, n);
    return p;
}

#endif
