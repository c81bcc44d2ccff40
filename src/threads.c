/*
 * threads.c - the process-wide thread count of copies, and build info.
 *
 * The count starts at 0 ("not chosen yet") and is filled in lazily from the
 * environment on first use.  A compare-and-swap publishes the default, so a
 * pylayout_set_num_threads() that races the first use always wins.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "copy_kernels.h"
#include "internal.h"

/* More threads than this is a typo in an environment variable. */
#define PL_MAX_THREADS 4096

static atomic_int pl_num_threads; /* 0 until chosen */

#ifdef _OPENMP
/* The leading positive integer of `text` ("4" or "4,2" as OMP_NUM_THREADS
 * allows), or 0 if there is none. */
static int pl_parse_threads(const char *text)
{
    if (text == NULL)
        return 0;
    char *end = NULL;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (errno != 0 || end == text || v < 1)
        return 0;
    if (*end != '\0' && *end != ',' && *end != ' ')
        return 0;
    return v > PL_MAX_THREADS ? PL_MAX_THREADS : (int)v;
}

static int pl_default_threads(void)
{
    int n = pl_parse_threads(getenv("PYLAYOUT_NUM_THREADS"));
    if (n == 0)
        n = pl_parse_threads(getenv("OMP_NUM_THREADS"));
    if (n == 0)
        n = omp_get_num_procs();
    return n < 1 ? 1 : n;
}
#endif /* _OPENMP */

#ifdef _OPENMP
/* libgomp is not fork-safe: a child forked after the parent's worker threads
 * exist hangs in its first parallel region.  So a forked child runs copies on
 * one thread (it may raise the count again at its own risk). */
static void pl_after_fork_in_child(void)
{
    atomic_store(&pl_num_threads, 1);
}

static void pl_register_fork_handler(void)
{
    (void)pthread_atfork(NULL, NULL, pl_after_fork_in_child);
}

static pthread_once_t pl_fork_handler_once = PTHREAD_ONCE_INIT;

#if defined(__GNUC__)
/* Registered when the library loads, not on pylayout's first copy: in a
 * torch process pylayout shares torch's libgomp.so.1 (one copy per SONAME),
 * and torch may have started its OpenMP workers long before pylayout copies
 * anything -- a DataLoader worker forked then must still copy on one
 * thread.  The pthread_once in _pylayout_copy_threads stays for compilers
 * without constructors. */
__attribute__((constructor)) static void pl_threads_at_load(void)
{
    pthread_once(&pl_fork_handler_once, pl_register_fork_handler);
}
#endif
#endif

int _pylayout_copy_threads(void)
{
#ifdef _OPENMP
    /* Normally done at load already (see pl_threads_at_load). */
    pthread_once(&pl_fork_handler_once, pl_register_fork_handler);
    int n = atomic_load_explicit(&pl_num_threads, memory_order_relaxed);
    if (n == 0) {
        int expected = 0;
        int chosen = pl_default_threads();
        if (atomic_compare_exchange_strong(&pl_num_threads, &expected, chosen))
            n = chosen;
        else
            n = expected; /* someone else set it first */
    }
    return n;
#else
    return 1;
#endif
}

pylayout_status pylayout_set_num_threads(int n)
{
    if (n < 1)
        return _pylayout_fail(PYLAYOUT_ERR_INVALID_ARGUMENT,
                              "pylayout_set_num_threads: n is %d; pass 1 or more threads", n);
    if (n > PL_MAX_THREADS)
        n = PL_MAX_THREADS;
    atomic_store(&pl_num_threads, n);
    _pylayout_clear_error();
    return PYLAYOUT_OK;
}

pylayout_status pylayout_get_num_threads(int *n_ret)
{
    if (n_ret == NULL)
        return _pylayout_fail(PYLAYOUT_ERR_INVALID_ARGUMENT, "pylayout_get_num_threads: n_ret is NULL");
    *n_ret = _pylayout_copy_threads();
    _pylayout_clear_error();
    return PYLAYOUT_OK;
}

pylayout_status pylayout_build_info(bool *openmp_ret, const char **simd_ret)
{
    if (openmp_ret == NULL || simd_ret == NULL)
        return _pylayout_fail(PYLAYOUT_ERR_INVALID_ARGUMENT, "pylayout_build_info: %s is NULL",
                              openmp_ret == NULL ? "openmp_ret" : "simd_ret");
#ifdef _OPENMP
    *openmp_ret = true;
#else
    *openmp_ret = false;
#endif
    *simd_ret = _pylayout_copy_kernels_get()->name;
    _pylayout_clear_error();
    return PYLAYOUT_OK;
}
