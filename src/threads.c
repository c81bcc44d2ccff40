/*
 * threads.c - how many threads a copy may use, one-time warnings, and
 * build info.
 *
 * The thread count in force, highest precedence first:
 *   1. pylayout_set_num_threads(n) (in a forked child: 1 until it is called
 *      there, see pl_after_fork_in_child);
 *   2. PYLAYOUT_NUM_THREADS, read once, on first use;
 *   3. the OpenMP setting in force in the calling thread: omp_get_max_threads(),
 *      which OMP_NUM_THREADS sets at start-up and torch.set_num_threads (a
 *      DataLoader worker calls it with 1) sets later -- and 1 inside an
 *      OpenMP region that may not nest;
 *   4. the number of cores (what omp_get_max_threads() starts from).
 * A copy then uses at most what this process can run at once: the CPUs in
 * the calling thread's affinity mask (which excludes offline ones) and
 * OMP_THREAD_LIMIT.  A larger request is clamped and warned about once.
 * Without OpenMP everything is 1.
 */
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "copy_kernels.h"
#include "internal.h"

/* More threads than this is a typo. */
#define PL_MAX_THREADS 4096

/* ------------------------------------------------------------ warnings */

static atomic_bool pl_warned[PL_WARN_KINDS];

bool _pylayout_warning_claim(pl_warning kind)
{
    return !atomic_exchange(&pl_warned[kind], true);
}

bool _pylayout_warn_once(pl_warning kind, const char *fmt, ...)
{
    if (!_pylayout_warning_claim(kind))
        return false;
    char text[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    fprintf(stderr, "pylayout: warning: %s\n", text);
    fflush(stderr);
    return true;
}

/* ------------------------------------------------------- thread counts */

static atomic_int pl_explicit; /* pylayout_set_num_threads; 0 until called */
static int pl_env_threads;     /* PYLAYOUT_NUM_THREADS; 0 when unset or malformed */
static pthread_once_t pl_env_once = PTHREAD_ONCE_INIT;
/* The largest team this thread has opened an OpenMP region of, or checked
 * that it could (pl_affordable); 0 for none. */
static _Thread_local int pl_team_checked;
/* The threads the calling thread's last pylayout_copy was allowed to use. */
static _Thread_local int pl_last_copy_threads;

int _pylayout_machine_threads(void)
{
    int n = 0;
#if defined(__linux__) && defined(CPU_COUNT)
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0)
        n = CPU_COUNT(&set); /* the kernel leaves offline CPUs out */
#endif
    if (n < 1) {
        long online = sysconf(_SC_NPROCESSORS_ONLN);
        n = online < 1 ? 1 : online > PL_MAX_THREADS ? PL_MAX_THREADS : (int)online;
    }
#ifdef _OPENMP
    int limit = omp_get_thread_limit();
    if (limit >= 1 && limit < n)
        n = limit;
#endif
    return n;
}

#ifdef _OPENMP
/* The leading positive integer of `text` ("4", or "4,2" as OMP_NUM_THREADS
 * allows), capped at PL_MAX_THREADS, or 0 if there is none. */
static int pl_parse_threads(const char *text)
{
    char *end = NULL;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (end == text || v < 1)
        return 0;
    if (*end != '\0' && *end != ',' && *end != ' ')
        return 0;
    return errno == ERANGE || v > PL_MAX_THREADS ? PL_MAX_THREADS : (int)v;
}

static void pl_note_request(int n, const char *what)
{
    int machine = _pylayout_machine_threads();
    if (n > machine)
        _pylayout_warn_once(PL_WARN_THREADS_CLAMPED,
                            "%s asks for %d threads, more than this process can run at once here (%d: the CPUs "
                            "in its affinity mask, at most OMP_THREAD_LIMIT); copies use %d",
                            what, n, machine, machine);
}

static void pl_read_env(void)
{
    const char *text = getenv("PYLAYOUT_NUM_THREADS");
    if (text == NULL || *text == '\0')
        return;
    pl_env_threads = pl_parse_threads(text);
    if (pl_env_threads == 0)
        _pylayout_warn_once(PL_WARN_THREADS_ENV,
                            "PYLAYOUT_NUM_THREADS='%.40s' is not a thread count: use a whole number >= 1 "
                            "(e.g. PYLAYOUT_NUM_THREADS=4); ignoring it",
                            text);
    else
        pl_note_request(pl_env_threads, "PYLAYOUT_NUM_THREADS");
}

/* libgomp is not fork-safe: a child forked after the parent's worker threads
 * exist hangs in its first parallel region.  So a forked child runs copies on
 * one thread (it may raise the count again at its own risk). */
static void pl_after_fork_in_child(void)
{
    atomic_store(&pl_explicit, 1);
    pl_team_checked = 0; /* the forking thread's OpenMP workers are not in the child */
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
 * thread.  The pthread_once in _pylayout_threads_setting stays for
 * compilers without constructors. */
__attribute__((constructor)) static void pl_threads_at_load(void)
{
    pthread_once(&pl_fork_handler_once, pl_register_fork_handler);
}
#endif

/* ------------------------------------------ threads that can be created */

/* The stack size libgomp gives its threads: OMP_STACKSIZE, else
 * GOMP_STACKSIZE ("<number>[B|K|M|G]", kilobytes by default), else 0 for
 * the pthread default, as libgomp does. */
static size_t pl_omp_stacksize(void)
{
    const char *names[] = {"OMP_STACKSIZE", "GOMP_STACKSIZE"};
    for (int k = 0; k < 2; k++) {
        const char *text = getenv(names[k]);
        if (text == NULL)
            continue;
        char *end = NULL;
        errno = 0;
        unsigned long long v = strtoull(text, &end, 10);
        if (end == text || errno != 0)
            continue;
        while (*end == ' ' || *end == '\t')
            end++;
        unsigned long long unit = 1024;
        switch (*end) {
        case 'b': case 'B': unit = 1; break;
        case 'k': case 'K': case '\0': unit = 1024; break;
        case 'm': case 'M': unit = 1024ull << 10; break;
        case 'g': case 'G': unit = 1024ull << 20; break;
        default: continue;
        }
        return (size_t)(v * unit);
    }
    return 0;
}

typedef struct {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    bool release;
} pl_probe_gate;

static void *pl_probe_thread(void *arg)
{
    pl_probe_gate *g = arg;
    pthread_mutex_lock(&g->lock);
    while (!g->release)
        pthread_cond_wait(&g->cond, &g->lock);
    pthread_mutex_unlock(&g->lock);
    return NULL;
}

/* How many of `want` more threads, with the stack libgomp would give them,
 * this process can have alive at once right now: it creates them, keeps
 * them all alive until the last is made, then joins them.  libgomp calls
 * exit() when it cannot create a thread ("Thread creation failed"), under
 * RLIMIT_AS, RLIMIT_NPROC or a container's pids limit alike; asking first
 * turns that into a smaller team.  glibc keeps the joined threads' stacks
 * for reuse, so libgomp's threads then find theirs already mapped. */
int _pylayout_threads_creatable(int want)
{
    if (want <= 0)
        return 0;
    pthread_t *t = malloc((size_t)want * sizeof *t);
    if (t == NULL)
        return 0;
    pl_probe_gate g = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false};
    pthread_attr_t attr;
    bool attr_ok = pthread_attr_init(&attr) == 0;
    size_t stack = pl_omp_stacksize();
    if (attr_ok && stack > 0)
        (void)pthread_attr_setstacksize(&attr, stack);
    int made = 0;
    while (made < want && pthread_create(&t[made], attr_ok ? &attr : NULL, pl_probe_thread, &g) == 0)
        made++;
    pthread_mutex_lock(&g.lock);
    g.release = true;
    pthread_cond_broadcast(&g.cond);
    pthread_mutex_unlock(&g.lock);
    for (int k = 0; k < made; k++)
        pthread_join(t[k], NULL);
    if (attr_ok)
        pthread_attr_destroy(&attr);
    free(t);
    return made;
}

/* The largest team up to n that an OpenMP region opened by the calling
 * thread can have without libgomp failing to create a thread.  libgomp
 * keeps one pool of workers per thread that opens regions, and reuses
 * them, so each thread asks once per larger team. */
static int pl_affordable(int n)
{
    if (n <= 1 || n <= pl_team_checked)
        return n;
    int have = pl_team_checked > 1 ? pl_team_checked : 1;
    int team = have + _pylayout_threads_creatable(n - have);
    pl_team_checked = team;
    return team;
}
#endif /* _OPENMP */

int _pylayout_threads_setting(void)
{
#ifdef _OPENMP
    pthread_once(&pl_fork_handler_once, pl_register_fork_handler); /* normally done at load */
    int n = atomic_load_explicit(&pl_explicit, memory_order_relaxed);
    if (n > 0)
        return n;
    pthread_once(&pl_env_once, pl_read_env);
    if (pl_env_threads > 0)
        return pl_env_threads;
    if (omp_get_active_level() >= omp_get_max_active_levels())
        return 1; /* inside an OpenMP region that may not nest */
    n = omp_get_max_threads();
    return n < 1 ? 1 : n;
#else
    return 1;
#endif
}

int _pylayout_threads_wanted(void)
{
    int n = _pylayout_threads_setting();
    if (n > 1) {
        int machine = _pylayout_machine_threads();
        if (n > machine)
            n = machine;
    }
    return n;
}

int _pylayout_copy_threads(void)
{
#ifdef _OPENMP
    return pl_affordable(_pylayout_threads_wanted());
#else
    return 1;
#endif
}

void _pylayout_note_copy_threads(int n) { pl_last_copy_threads = n; }

int _pylayout_last_copy_threads(void) { return pl_last_copy_threads; }

pylayout_status _pylayout_set_num_threads_quietly(int n, bool *clamped_first_ret, int *machine_ret)
{
    if (clamped_first_ret != NULL)
        *clamped_first_ret = false;
    if (machine_ret != NULL)
        *machine_ret = 1;
    if (n < 1)
        return _pylayout_fail(PYLAYOUT_ERR_INVALID_ARGUMENT,
                              "pylayout_set_num_threads: n is %d; pass 1 or more threads", n);
    if (n > PL_MAX_THREADS)
        n = PL_MAX_THREADS;
#ifdef _OPENMP
    pthread_once(&pl_fork_handler_once, pl_register_fork_handler);
    int machine = _pylayout_machine_threads();
    if (machine_ret != NULL)
        *machine_ret = machine;
    if (n > machine && clamped_first_ret != NULL)
        *clamped_first_ret = _pylayout_warning_claim(PL_WARN_THREADS_CLAMPED);
#endif
    atomic_store(&pl_explicit, n);
    _pylayout_clear_error();
    return PYLAYOUT_OK;
}

pylayout_status pylayout_set_num_threads(int n)
{
    bool first = false;
    int machine = 1;
    pylayout_status st = _pylayout_set_num_threads_quietly(n, &first, &machine);
    if (first)
        fprintf(stderr,
                "pylayout: warning: pylayout_set_num_threads(%d) asks for more threads than this process can run "
                "at once here (%d: the CPUs in its affinity mask, at most OMP_THREAD_LIMIT); copies use %d\n",
                n, machine, machine);
    return st;
}

pylayout_status pylayout_get_num_threads(int *n_ret)
{
    if (n_ret == NULL)
        return _pylayout_fail(PYLAYOUT_ERR_INVALID_ARGUMENT, "pylayout_get_num_threads: n_ret is NULL");
    *n_ret = _pylayout_threads_setting();
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
