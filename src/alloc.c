/*
 * alloc.c - memory for tensors pylayout allocates, and the reuse cache.
 *
 * A fresh output is written exactly once, so for large tensors the cost of
 * faulting its pages in can exceed the copy itself.  Measured on the 2-core
 * VMs this was built on, for a 98 MiB output written with streaming stores:
 * 54 ms with 4 KiB pages, 24 ms with transparent huge pages (the kernel
 * zeroes each 2 MiB page at ~4 GB/s), 4 ms into pages already mapped.  So:
 *
 *   - Blocks below HUGE_MIN_BYTES come from malloc: glibc serves them from
 *     its heap, recycling freed blocks with their pages already mapped.
 *   - Larger blocks are pylayout's own mmaps, 2 MiB aligned and offered to
 *     transparent huge pages (MADV_HUGEPAGE, for systems in "madvise" mode).
 *     When freed, up to the cache limit they are kept, lazily freed
 *     (MADV_FREE): the kernel may take their pages back at any moment it
 *     needs memory, and until it does, the next allocation of the same size
 *     reuses them without a fault.  A loop converting one batch shape at a
 *     time then pays for its output pages once, not every iteration -- the
 *     reason allocating conversions run near copy speed.  This is what
 *     jemalloc does with its dirty pages and what torch's CUDA allocator does
 *     with whole blocks; pylayout_set_cache_limit(0) turns it off.
 *
 * Lazily freed pages still count in RSS until the kernel reclaims them.
 * Builds with AddressSanitizer start with the cache off, so a use after free
 * of an output stays visible to it.
 */
#define _DEFAULT_SOURCE /* posix_memalign, madvise, MAP_ANONYMOUS */
#include <errno.h>
#include <stdatomic.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#if defined(__linux__)
#include <sys/mman.h>
#define PL_HAVE_MMAP 1 /* mmap, MADV_HUGEPAGE, MADV_FREE */
#endif

#include "internal.h"

#define HUGE_PAGE ((size_t)2 << 20)
/* glibc's dynamic mmap ceiling on 64-bit: below it freed blocks stay in the
 * heap and come back mapped (measured: aligning a 26 MB channels_last output
 * to 2 MiB instead took it from 4 ms to 16.7). */
#define HUGE_MIN_BYTES ((size_t)32 << 20)
/* Freed blocks kept at most; the oldest goes first. */
#define PL_CACHE_SLOTS 8

#if defined(__SANITIZE_ADDRESS__)
#define PL_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define PL_ASAN 1
#endif
#endif

/* ------------------------------------------------- large blocks, by OS */

#if defined(PL_HAVE_MMAP)
/* A fresh 2 MiB-aligned mapping of len bytes offered to huge pages, or NULL. */
static void *pl_map(size_t len)
{
    size_t over = len + HUGE_PAGE;
    char *raw = mmap(NULL, over, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED)
        return NULL;
    char *p = (char *)(((uintptr_t)raw + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1));
    if (p > raw)
        munmap(raw, (size_t)(p - raw));
    if (raw + over > p + len)
        munmap(p + len, (size_t)(raw + over - (p + len)));
#if defined(MADV_HUGEPAGE)
    (void)madvise(p, len, MADV_HUGEPAGE); /* advice only: failure changes nothing */
#endif
    return p;
}
static void pl_unmap(void *p, size_t len) { munmap(p, len); }
/* The kernel may reclaim the pages from now on; a later write keeps them.
 * False where it cannot (no MADV_FREE, or a kernel before 4.5): the block
 * would stay resident, so it is not kept. */
static bool pl_lazy_free(void *p, size_t len)
{
#if defined(MADV_FREE)
    return madvise(p, len, MADV_FREE) == 0;
#else
    (void)p;
    (void)len;
    return false;
#endif
}
#else  /* elsewhere: malloc, and no cache by default (nothing lazily freed) */
static void *pl_map(size_t len)
{
    void *p = NULL;
    return posix_memalign(&p, HUGE_PAGE, len) == 0 ? p : NULL;
}
static void pl_unmap(void *p, size_t len)
{
    (void)len;
    free(p);
}
static bool pl_lazy_free(void *p, size_t len) /* kept as is: only an explicit limit caches here */
{
    (void)p;
    (void)len;
    return true;
}
#endif

/* ------------------------------------------------------- byte counts */

bool _pylayout_parse_bytes(const char *text, int64_t *bytes_ret)
{
    if (text == NULL)
        return false;
    while (*text == ' ' || *text == '\t')
        text++;
    if (*text < '0' || *text > '9') /* no sign, no empty value */
        return false;
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(text, &end, 10);
    if (errno != 0)
        return false;
    int shift = 0;
    switch (*end) {
    case 'k': case 'K': shift = 10; end++; break;
    case 'm': case 'M': shift = 20; end++; break;
    case 'g': case 'G': shift = 30; end++; break;
    case 't': case 'T': shift = 40; end++; break;
    default: break;
    }
    if (shift > 0 && *end == 'i')
        end++;
    if (*end == 'b' || *end == 'B')
        end++;
    while (*end == ' ' || *end == '\t')
        end++;
    if (*end != '\0' || v > (unsigned long long)(INT64_MAX >> shift))
        return false;
    *bytes_ret = (int64_t)(v << shift);
    return true;
}

/* ------------------------------------------------------------ the cache */

typedef struct {
    void *p;
    size_t len;
} pl_block;

static pthread_mutex_t pl_cache_lock = PTHREAD_MUTEX_INITIALIZER;
static pl_block pl_cache[PL_CACHE_SLOTS]; /* oldest first */
static int pl_cache_count;
static size_t pl_cache_held;
/* -2: PYLAYOUT_CACHE_LIMIT not read yet; -1: none set, derive the default
 * whenever it is needed; >= 0: set by pylayout_set_cache_limit or the
 * environment. */
static int64_t pl_cache_limit = -2;

/* A child made by fork() may inherit the lock held by another thread of the
 * parent; the cached blocks themselves are copied with the address space. */
static void pl_cache_after_fork(void) { pthread_mutex_init(&pl_cache_lock, NULL); }
static pthread_once_t pl_cache_once = PTHREAD_ONCE_INIT;
static void pl_cache_init(void) { (void)pthread_atfork(NULL, NULL, pl_cache_after_fork); }

static void pl_cache_lock_acquire(void)
{
    pthread_once(&pl_cache_once, pl_cache_init);
    pthread_mutex_lock(&pl_cache_lock);
}

#if !defined(PL_ASAN) && defined(PL_HAVE_MMAP) && defined(MADV_FREE)
#define PL_CACHE_BY_DEFAULT 1

/* The first number in a small file, or -1 ("max", absent, unreadable). */
static int64_t pl_read_number(const char *path)
{
    char text[64];
    FILE *f = fopen(path, "re");
    if (f == NULL)
        return -1;
    size_t got = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[got] = '\0';
    int64_t v = 0;
    text[strcspn(text, " \n")] = '\0';
    return text[0] >= '0' && text[0] <= '9' && _pylayout_parse_bytes(text, &v) ? v : -1;
}

/* The smallest memory limit of the cgroups this process is in, from its
 * own cgroup up to the root of the hierarchy (cgroup v2 memory.max, v1
 * memory.limit_in_bytes), or -1 for none.  Where the path /proc/self/cgroup
 * names is not visible (a container's own cgroup mounted as the root), its
 * ancestors and the mount's root are. */
static int64_t pl_cgroup_memory_limit(void)
{
    FILE *f = fopen("/proc/self/cgroup", "re");
    if (f == NULL)
        return -1;
    int64_t best = -1;
    char line[1024];
    while (fgets(line, sizeof line, f) != NULL) {
        /* "0::/path" (v2) or "4:memory:/path" (v1, "memory" among the controllers) */
        char *first = strchr(line, ':'), *second = first ? strchr(first + 1, ':') : NULL;
        if (second == NULL)
            continue;
        *second = '\0';
        char *path = second + 1;
        path[strcspn(path, "\n")] = '\0';
        const char *controllers = first + 1;
        const bool v2 = controllers[0] == '\0';
        bool memory = false;
        for (const char *c = controllers; !v2 && c != NULL; c = strchr(c, ',') ? strchr(c, ',') + 1 : NULL)
            memory |= strncmp(c, "memory", 6) == 0 && (c[6] == ',' || c[6] == '\0');
        if (!v2 && !memory)
            continue;
        static const char *const v2_roots[] = {"/sys/fs/cgroup", "/sys/fs/cgroup/unified"};
        static const char *const v1_roots[] = {"/sys/fs/cgroup/memory"};
        const char *const *roots = v2 ? v2_roots : v1_roots;
        const int nroots = v2 ? 2 : 1;
        const char *file = v2 ? "memory.max" : "memory.limit_in_bytes";
        for (int r = 0; r < nroots; r++) {
            char dir[1024];
            snprintf(dir, sizeof dir, "%s", path);
            for (;;) { /* this cgroup, then each ancestor */
                char full[1200];
                snprintf(full, sizeof full, "%s%s/%s", roots[r], strcmp(dir, "/") == 0 ? "" : dir, file);
                int64_t v = pl_read_number(full);
                if (v > 0 && v < ((int64_t)1 << 60) && (best < 0 || v < best)) /* v1 writes "no limit" as ~2^63 */
                    best = v;
                char *slash = strrchr(dir, '/');
                if (slash == NULL || strcmp(dir, "/") == 0)
                    break;
                if (slash == dir)
                    strcpy(dir, "/");
                else
                    *slash = '\0';
            }
        }
    }
    fclose(f);
    return best;
}

/* Bytes of address space this process may still map under RLIMIT_AS,
 * counting the blocks the cache holds and `freeing` bytes about to be
 * freed as free (the cache gives its blocks back on demand), or -1 for no
 * limit. */
static int64_t pl_address_space_left(size_t freeing)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_AS, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
        return -1;
    long long pages = 0;
    FILE *f = fopen("/proc/self/statm", "re");
    if (f == NULL)
        return -1;
    int got = fscanf(f, "%lld", &pages); /* the first field: VmSize in pages */
    fclose(f);
    long page = sysconf(_SC_PAGESIZE);
    if (got != 1 || page <= 0)
        return -1;
    int64_t used = (int64_t)pages * page - (int64_t)pl_cache_held - (int64_t)freeing;
    return (int64_t)rl.rlim_cur > used ? (int64_t)rl.rlim_cur - used : 0;
}
#endif

/* The default limit, derived afresh: an eighth of the smallest of physical
 * memory (at least 1 GiB then: lazily freed pages cost nothing the kernel
 * cannot take back, and a cache smaller than one output of a large
 * conversion never hits), the cgroup's memory limit (containers) and the
 * address space RLIMIT_AS leaves: cached blocks keep their address space
 * mapped, which other allocators in the process may need.  0 under ASan,
 * and where blocks cannot be lazily freed.  `freeing`: bytes being freed
 * that still count as mapped.  Called with the lock held. */
static int64_t pl_cache_default_locked(size_t freeing)
{
#if defined(PL_CACHE_BY_DEFAULT)
    int64_t limit = (int64_t)1 << 30;
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages > 0 && page > 0 && (int64_t)pages / 8 > limit / page)
        limit = (int64_t)pages / 8 * page;
    int64_t cgroup = pl_cgroup_memory_limit();
    if (cgroup >= 0 && cgroup / 8 < limit)
        limit = cgroup / 8;
    int64_t space = pl_address_space_left(freeing);
    if (space >= 0 && space / 8 < limit)
        limit = space / 8;
    return limit;
#else
    (void)freeing;
    return 0;
#endif
}

/* The limit in bytes now: PYLAYOUT_CACHE_LIMIT or pylayout_set_cache_limit,
 * else the default (re-derived on every call: limits change).  Lock held. */
static size_t pl_cache_limit_locked(size_t freeing)
{
    if (pl_cache_limit == -2) {
        pl_cache_limit = -1;
        const char *env = getenv("PYLAYOUT_CACHE_LIMIT");
        if (env != NULL && *env != '\0' && !_pylayout_parse_bytes(env, &pl_cache_limit))
            _pylayout_warn_once(PL_WARN_CACHE_ENV,
                                "PYLAYOUT_CACHE_LIMIT='%.40s' is not a byte count: use a whole number of bytes, "
                                "optionally with K, M or G (powers of 1024), e.g. 536870912 or 512M (0 turns the "
                                "cache off); using the default",
                                env);
    }
    return (size_t)(pl_cache_limit >= 0 ? pl_cache_limit : pl_cache_default_locked(freeing));
}

/* Removes slot k from the cache and returns its block.  Lock held. */
static pl_block pl_cache_take_locked(int k)
{
    pl_block b = pl_cache[k];
    for (int m = k + 1; m < pl_cache_count; m++)
        pl_cache[m - 1] = pl_cache[m];
    pl_cache_count--;
    pl_cache_held -= b.len;
    return b;
}

/* Unmaps the oldest cached blocks until at most `keep` bytes are held.
 * Lock held. */
static void pl_cache_trim_locked(size_t keep)
{
    while (pl_cache_count > 0 && pl_cache_held > keep) {
        pl_block b = pl_cache_take_locked(0);
        pl_unmap(b.p, b.len);
    }
}

static size_t pl_map_len(size_t nbytes) { return (nbytes + HUGE_PAGE - 1) / HUGE_PAGE * HUGE_PAGE; }

/* ------------------------------------------------------- small blocks */

/* One freed block per power-of-two size from 64 bytes to 4 KiB is kept for
 * the next allocation of that size: a 1 KB conversion otherwise pays for
 * posix_memalign, which in a Python process (whose small frees fill glibc's
 * fast bins) first consolidates the heap on every request of 1 KB or more.
 * A slot is one atomic pointer (exchange to take, compare-exchange to give
 * back), so threads and fork need no lock.  At most 8 KiB is held.  Off
 * under AddressSanitizer, like the large-block cache. */
#define PL_SMALL_MIN_LG 6  /* 64 bytes */
#define PL_SMALL_MAX_LG 12 /* 4 KiB */

static _Atomic(void *) pl_small[PL_SMALL_MAX_LG - PL_SMALL_MIN_LG + 1];

/* The slot for a block of nbytes, or -1 when none is kept for that size. */
static int pl_small_slot(size_t nbytes)
{
#if defined(PL_ASAN)
    (void)nbytes;
    return -1;
#else
    if (nbytes > ((size_t)1 << PL_SMALL_MAX_LG))
        return -1;
    int lg = PL_SMALL_MIN_LG;
    while (((size_t)1 << lg) < nbytes)
        lg++;
    return lg - PL_SMALL_MIN_LG;
#endif
}

static void pl_small_release(void)
{
    for (size_t k = 0; k < sizeof pl_small / sizeof pl_small[0]; k++)
        free(atomic_exchange(&pl_small[k], NULL));
}

void *_pylayout_aligned_alloc(size_t nbytes)
{
    const int slot = pl_small_slot(nbytes);
    if (slot >= 0) {
        void *p = atomic_exchange(&pl_small[slot], NULL);
        if (p != NULL)
            return p;
        nbytes = (size_t)1 << (slot + PL_SMALL_MIN_LG); /* the slot's size, so it can be kept when freed */
    }
    if (nbytes < HUGE_MIN_BYTES) {
        void *p = NULL;
        /* 64-byte alignment: a cache line, and every SIMD width in use. */
        if (posix_memalign(&p, 64, nbytes ? nbytes : 64) == 0)
            return p;
        _pylayout_cache_release(); /* what is missing may be the address space it holds */
        return posix_memalign(&p, 64, nbytes ? nbytes : 64) == 0 ? p : NULL;
    }
    const size_t len = pl_map_len(nbytes);
    pl_cache_lock_acquire();
    for (int k = pl_cache_count - 1; k >= 0; k--) /* newest first: its pages are likeliest kept */
        if (pl_cache[k].len == len) {
            void *p = pl_cache_take_locked(k).p;
            pthread_mutex_unlock(&pl_cache_lock);
            return p;
        }
    pthread_mutex_unlock(&pl_cache_lock);
    void *p = pl_map(len);
    if (p == NULL) { /* cached blocks of other sizes may be what is missing */
        _pylayout_cache_release();
        p = pl_map(len);
    }
    return p;
}

void _pylayout_cache_release(void)
{
    pl_small_release();
    pl_cache_lock_acquire();
    pl_cache_trim_locked(0);
    pthread_mutex_unlock(&pl_cache_lock);
}

void _pylayout_aligned_free(void *p, size_t nbytes)
{
    if (p == NULL)
        return;
    const int slot = pl_small_slot(nbytes);
    void *empty = NULL;
    if (slot >= 0 && atomic_compare_exchange_strong(&pl_small[slot], &empty, p))
        return;
    if (nbytes < HUGE_MIN_BYTES) {
        free(p);
        return;
    }
    const size_t len = pl_map_len(nbytes);
    pl_cache_lock_acquire();
    const size_t limit = pl_cache_limit_locked(len);
    if (len > limit || !pl_lazy_free(p, len)) {
        pthread_mutex_unlock(&pl_cache_lock);
        pl_unmap(p, len);
        return;
    }
    if (pl_cache_count == PL_CACHE_SLOTS) {
        pl_block oldest = pl_cache_take_locked(0);
        pl_unmap(oldest.p, oldest.len);
    }
    pl_cache[pl_cache_count++] = (pl_block){p, len};
    pl_cache_held += len;
    pl_cache_trim_locked(limit);
    pthread_mutex_unlock(&pl_cache_lock);
}

pylayout_status pylayout_set_cache_limit(int64_t nbytes)
{
    if (nbytes < 0)
        return _pylayout_fail(PYLAYOUT_ERR_INVALID_ARGUMENT, "cache limit must be >= 0 bytes, not %lld",
                              (long long)nbytes);
    pl_cache_lock_acquire();
    pl_cache_limit = nbytes;
    pl_cache_trim_locked((size_t)nbytes);
    pthread_mutex_unlock(&pl_cache_lock);
    _pylayout_clear_error();
    return PYLAYOUT_OK;
}

pylayout_status pylayout_cache_info(int64_t *limit_ret, int64_t *held_ret)
{
    if (limit_ret == NULL && held_ret == NULL)
        return _pylayout_fail(PYLAYOUT_ERR_INVALID_ARGUMENT, "pylayout_cache_info: both outputs are NULL");
    pl_cache_lock_acquire();
    if (limit_ret != NULL)
        *limit_ret = (int64_t)pl_cache_limit_locked(0);
    if (held_ret != NULL)
        *held_ret = (int64_t)pl_cache_held;
    pthread_mutex_unlock(&pl_cache_lock);
    _pylayout_clear_error();
    return PYLAYOUT_OK;
}
