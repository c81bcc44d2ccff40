/*
 * threads.c - how many threads a copy may use, and the persistent team
 * that runs the parallel ones.
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
 *
 * The team (_pylayout_parallel_for).  A plain `#pragma omp parallel` ends in
 * a barrier that waits for every thread of the team to arrive, and libgomp's
 * idle workers spin for milliseconds between regions.  On a machine whose
 * other cores are busy (a DataLoader, another notebook, a CI neighbour) the
 * kernel may not run a worker for a whole time slice: the caller finished its
 * half and then waited 4-16 ms for a worker that had not started, in some
 * processes every time (a 1 MiB copy 110 x slower on 2 threads than on 1).
 * So copies run on a persistent OpenMP team instead, which a service thread
 * opens once and whose threads never leave the region:
 *   - the work is cut into chunks; each participant, the caller included,
 *     claims its own contiguous run of them from the front and then the
 *     others' from the back, one compare-and-swap per claim, so a worker the
 *     kernel has not run yet simply finds nothing left; a participant that
 *     comes in time claims its own in spans of several chunks, run as one
 *     call (pl_claim_size), the others' one at a time;
 *   - the caller waits only for chunks another thread has actually claimed;
 *   - idle workers poll briefly, yielding the core to anyone who wants it,
 *     then sleep on a condition variable instead of burning a core their
 *     neighbours need;
 *   - a worker preempted while it holds a chunk still holds up its caller,
 *     so after a copy the team made slower than its caller alone, copies run
 *     on their callers alone for a while (PL_ALONE_MIN_NS).
 * One copy at a time has the team; a copy that finds it busy (another thread
 * is copying) runs on its caller alone.  The team is sized on first use and
 * grown when a larger team is asked for; the threads it asks libgomp for are
 * created and joined once first (_pylayout_threads_creatable), since libgomp
 * exits the process when it cannot create one.  In a forked child the team
 * does not exist (its threads were not copied); a child that raises its
 * thread count gets a new one, opened by a new service thread whose libgomp
 * pool is its own.
 */
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "internal.h"

/* More threads than this is a typo. */
#define PL_MAX_THREADS 4096

/* ------------------------------------------------------- thread counts */

static atomic_int pl_explicit; /* pylayout_set_num_threads; 0 until called */
/* The threads the calling thread's last pylayout_copy was entitled to. */
static _Thread_local int pl_last_copy_threads;
#ifdef _OPENMP
static int pl_env_threads; /* PYLAYOUT_NUM_THREADS; 0 when unset or malformed */
static pthread_once_t pl_env_once = PTHREAD_ONCE_INIT;
/* The largest team this thread has opened an OpenMP region of, or checked
 * that it could (pl_affordable); 0 for none. */
static _Thread_local int pl_team_checked;
#endif

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
static void pl_team_after_fork(void);

static void pl_after_fork_in_child(void)
{
    atomic_store(&pl_explicit, 1);
    pl_team_checked = 0; /* the forking thread's OpenMP workers are not in the child */
    pl_team_after_fork();
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
 * them, so each thread asks once per larger team (and again on every
 * region while it cannot have the team it wants). */
static int pl_affordable(int n)
{
    if (n <= 1 || n <= pl_team_checked)
        return n;
    int have = pl_team_checked > 1 ? pl_team_checked : 1;
    int team = have + _pylayout_threads_creatable(n - have);
    pl_team_checked = team;
    return team;
}

/* ------------------------------------------------------------- the team */

/* Spin budgets: an idle worker polls for the next job this long before it
 * sleeps (back-to-back copies from a Python loop come 5-30 us apart; a
 * sleeping worker takes 10-60 us to wake on the dev VM), and a caller whose
 * chunks are all claimed polls this long for the others' before it sleeps
 * and frees its core for them. */
#define PL_IDLE_SPIN_NS 200000
#define PL_WAIT_SPIN_NS 20000

/* A copy starts on its caller alone and calls the team only once its pace
 * says it would take longer than this on one thread: the rule that
 * copies under about 50 us run on the caller alone, measured rather than
 * guessed from their size (a 512 x 512 float32 transpose takes 94 us here,
 * a 724 x 724 one 46 us: power-of-two strides).  A second thread could save
 * at most half of it on a quiet machine, and on a busy one it may not get a
 * core in time at all. */
#define PL_ENGAGE_NS ((int64_t)50000)

/* A copy that takes more than PL_ENGAGE_RUN_NS alone but less than
 * PL_ENGAGE_NS engages the team only as one of a run: when the same
 * thread's previous copy of at least that length ended less than
 * PL_IDLE_SPIN_NS before this one started (copies from 256 KiB are cut
 * into chunks only in a run: see PL_PARALLEL_RUN_MIN_BYTES_DEFAULT).  A
 * lone short copy still never wakes anyone; a loop of them (the same 1 MiB
 * transpose again and again) wakes the team once, on its second copy, and
 * then finds it polling.  Two threads pay from a few us: a 512 x 512
 * float32 transpose is 2 MiB of src and dst, as much as one core's L2 or
 * more, half of it on each core fits -- and stays there from call to call,
 * since the team's split of a copy is the same every time (see
 * pl_parallel); a 256 x 256 one (7 us alone, 4.2-4.6 by the team) and a
 * 256 KiB contiguous copy (4.5-5 us alone, 3.3 by the team) pay too.  Until
 * session 20 this was 10 us, which the 256 x 256 transpose reached only
 * when the machine was slow. */
#define PL_ENGAGE_RUN_NS ((int64_t)3000)

/* A worker the kernel stops while it holds a chunk (its time slice ended,
 * its core is shared with other processes) holds up its caller until it
 * runs again: 4-12 ms here, far more than a chunk.  So the team keeps an
 * account of the time it saved its callers (each copy's time alone, from
 * its caller's pace, less what it took) and what it cost them, capped at
 * PL_CREDIT_MAX_NS.  When a copy leaves the account below zero, copies run
 * on their callers alone for a while, from PL_ALONE_MIN_NS doubling on
 * every such copy up to PL_ALONE_MAX_NS, and back to the team after a copy
 * it sped up (see pl_team_judge). */
#define PL_ALONE_MIN_NS ((int64_t)2000000)
#define PL_ALONE_MAX_NS ((int64_t)1000000000)
#define PL_CREDIT_MAX_NS ((int64_t)1000000)

/* Words tagged with the job's generation, so that a thread still holding
 * an old job's word fails every compare-and-swap on the new one:
 *   job:      gen (32) | participants (16) | chunks the team runs (16)
 *   range[i]: gen (32) | first unclaimed chunk (16) | one past the last (16) */
#define PL_WORD(gen, a, b) (((uint64_t)(gen) << 32) | ((uint64_t)(a) << 16) | (uint64_t)(b))
#define PL_GEN(w) ((uint32_t)((w) >> 32))
#define PL_HI16(w) ((int)(((w) >> 16) & 0xffff))
#define PL_LO16(w) ((int)((w)&0xffff))

/* Runs chunks [c0, c1) of a job as one call. */
typedef void (*pl_span_fn)(void *ctx, int c0, int c1);

static struct {
    pthread_mutex_t lock;    /* sleeping and waking; creating and stopping */
    pthread_cond_t work;     /* idle workers sleep here */
    pthread_cond_t finished; /* a caller waiting for claimed chunks sleeps here */
    atomic_bool busy;        /* held by the copy whose job the team runs */
    _Atomic uint64_t job;    /* PL_WORD(gen, participants, chunks) of the current job */
    atomic_int done;         /* chunks of the current job finished */
    atomic_int sleepers;     /* workers asleep on `work` */
    atomic_int arrived;      /* workers that have reached their loop since the team started */
    atomic_bool waiting;     /* the caller sleeps on `finished` */
    atomic_bool stop;        /* the team is to end its region */
    int size;                /* workers (0: no team); guarded by `busy` */
    bool started;            /* `service` runs; guarded by `busy` */
    int64_t alone_until;     /* copies run on their caller alone until then (ns); guarded by `busy` */
    int64_t penalty;         /* the last such period (ns), 0 after a copy the team sped up */
    int64_t credit;          /* time saved less time lost (ns), see pl_team_judge; guarded by `busy` */
    bool moved;              /* the team ran a copy since its last period alone; guarded by `busy` */
    int idle_copies;         /* copies in a row that the awake workers ran none of; guarded by `busy` */
    pthread_t service;
    /* the current job, written before its job word is published */
    _pylayout_chunk_fn fn;
    pl_span_fn span; /* consecutive chunks as one call; NULL: none */
    int span_max;    /* chunks one claim of a participant's own may take */
    void *ctx;
    /* Participant p (the caller is 0, worker w is w + 1) starts on chunks
     * [p * chunks / n, (p + 1) * chunks / n) and claims them from the front;
     * once its own are gone it takes others' from their back.  Each thread
     * thus writes one contiguous run of the output, as a static split would
     * (adjacent chunks share cache lines of dst where its rows are not
     * line-aligned: interleaving threads chunk by chunk made 2-thread 2 MiB
     * transposes slower than 1 thread), and the threads meet once per run.
     * A participant none of whose own chunks were taken yet (it came in
     * time) claims up to span_max of them at once, as one span: see
     * pl_claim_size. */
    _Atomic uint64_t range[PL_MAX_THREADS];
    int end[PL_MAX_THREADS]; /* one past participant p's own chunks */
} pl_team = {.lock = PTHREAD_MUTEX_INITIALIZER, .work = PTHREAD_COND_INITIALIZER, .finished = PTHREAD_COND_INITIALIZER};

static void pl_team_after_fork(void)
{
    /* None of the team's threads is in the child, and one of them may have
     * held the lock when the parent forked. */
    pthread_mutex_init(&pl_team.lock, NULL);
    pthread_cond_init(&pl_team.work, NULL);
    pthread_cond_init(&pl_team.finished, NULL);
    atomic_store(&pl_team.busy, false);
    atomic_store(&pl_team.sleepers, 0);
    atomic_store(&pl_team.arrived, 0);
    atomic_store(&pl_team.waiting, false);
    atomic_store(&pl_team.stop, false);
    pl_team.size = 0;
    pl_team.started = false;
    pl_team.credit = 0;
    pl_team.moved = false;
    pl_team.idle_copies = 0;
}

static int64_t pl_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static inline void pl_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* Runs chunks [c0, c1) of the current job and counts them done; the last
 * one wakes a caller asleep on it. */
static void pl_run_chunks(int c0, int c1, int chunks)
{
    /* Until they are counted done, the job and its fn/ctx stay in place:
     * its caller waits for them. */
    if (c1 - c0 > 1)
        pl_team.span(pl_team.ctx, c0, c1);
    else
        pl_team.fn(pl_team.ctx, c0);
    if (atomic_fetch_add(&pl_team.done, c1 - c0) + (c1 - c0) == chunks && atomic_load(&pl_team.waiting)) {
        pthread_mutex_lock(&pl_team.lock);
        pthread_cond_signal(&pl_team.finished);
        pthread_mutex_unlock(&pl_team.lock);
    }
}

/* How many of its own chunks, range word w, participant `me` claims at
 * once: up to span_max while no other thread has taken any from their back
 * (it came in time, and nobody is idle waiting for it), else one, so that
 * a thread that finished its own can take the rest.  A span is one call
 * over one contiguous run of units: a copy that repeats the one before it
 * (plan.c, pl_repeats) walks the whole run backwards, starting on the lines
 * the last one left in L1, and the run's set-up is paid once.  Measured on
 * the 2-core dev VM, float32 transposes into a preallocated dst in a loop,
 * 2 threads, chunks of 64 KiB: BENCH_OFFSET=0 build/tools/bench_incache 60
 * 2 256 256 512 512, the builds without and with spans alternating three
 * times, us a copy: 256 x 256 5.32-5.42 -> 4.72-5.22, 512 x 512 19.6-19.8
 * -> 18.6-19.1; pylayout.copy_into on torch tensors, five processes each:
 * 6.8-7.4 -> 6.4-6.6 and 22.6-25.3 -> 21.2-24.7.  Chunk by chunk, each
 * 64 KiB chunk took 1.9-2.0 us there, against 1.6 us a 64 KiB share of a
 * 128 KiB copy by one thread.  The cost: a worker preempted inside a span
 * holds its caller up for the span, not a chunk, so plan.c keeps a span to
 * PL_CHUNK_MAX_BYTES, the longest chunk. */
static int pl_claim_size(uint64_t w, int me)
{
    const int left = PL_LO16(w) - PL_HI16(w);
    if (pl_team.span == NULL || PL_LO16(w) != pl_team.end[me])
        return 1;
    return left < pl_team.span_max ? left : pl_team.span_max;
}

/* Participant `me` of job `gen` (n participants, `chunks` chunks): its own
 * range from the front, then the others' from their back, until no chunk
 * of the job is left unclaimed.  Returns how many chunks it ran. */
static int pl_participate(uint32_t gen, int me, int n, int chunks)
{
    int ran = 0;
    _Atomic uint64_t *own = &pl_team.range[me];
    uint64_t w = atomic_load_explicit(own, memory_order_acquire);
    while (PL_GEN(w) == gen && PL_HI16(w) < PL_LO16(w)) {
        const int k = pl_claim_size(w, me);
        if (atomic_compare_exchange_weak_explicit(own, &w, PL_WORD(gen, PL_HI16(w) + k, PL_LO16(w)),
                                                  memory_order_acq_rel, memory_order_acquire)) {
            pl_run_chunks(PL_HI16(w), PL_HI16(w) + k, chunks);
            ran += k;
            w = atomic_load_explicit(own, memory_order_acquire);
        }
    }
    for (int k = 1; k < n; k++) {
        _Atomic uint64_t *other = &pl_team.range[(me + k) % n];
        w = atomic_load_explicit(other, memory_order_acquire);
        while (PL_GEN(w) == gen && PL_HI16(w) < PL_LO16(w)) {
            if (atomic_compare_exchange_weak_explicit(other, &w, PL_WORD(gen, PL_HI16(w), PL_LO16(w) - 1),
                                                      memory_order_acq_rel, memory_order_acquire)) {
                pl_run_chunks(PL_LO16(w) - 1, PL_LO16(w), chunks);
                ran++;
                w = atomic_load_explicit(other, memory_order_acquire);
            }
        }
    }
    return ran;
}

/* Worker `index` of the team (participant index + 1 of every job that has
 * that many participants). */
static void pl_worker(int index)
{
    uint32_t seen = PL_GEN(atomic_load(&pl_team.job));
    atomic_fetch_add(&pl_team.arrived, 1);
    for (;;) {
        uint64_t w = atomic_load_explicit(&pl_team.job, memory_order_acquire);
        if (PL_GEN(w) == seen) {
            /* idle: poll for a while, then sleep */
            int64_t until = pl_now_ns() + PL_IDLE_SPIN_NS;
            for (int k = 1; PL_GEN(w) == seen && !atomic_load_explicit(&pl_team.stop, memory_order_relaxed);
                 k++, w = atomic_load_explicit(&pl_team.job, memory_order_acquire)) {
                pl_cpu_relax();
                if (k % 64 != 0)
                    continue;
                sched_yield(); /* spin only while nothing else wants this core */
                if (pl_now_ns() > until) {
                    pthread_mutex_lock(&pl_team.lock);
                    atomic_fetch_add(&pl_team.sleepers, 1);
                    while (PL_GEN(atomic_load(&pl_team.job)) == seen && !atomic_load(&pl_team.stop))
                        pthread_cond_wait(&pl_team.work, &pl_team.lock);
                    atomic_fetch_sub(&pl_team.sleepers, 1);
                    pthread_mutex_unlock(&pl_team.lock);
                    until = pl_now_ns() + PL_IDLE_SPIN_NS;
                }
            }
            if (atomic_load(&pl_team.stop))
                return;
        }
        seen = PL_GEN(w);
        if (index + 1 < PL_HI16(w))
            pl_participate(seen, index + 1, PL_HI16(w), PL_LO16(w));
    }
}

static void *pl_team_main(void *arg)
{
    int size = (int)(intptr_t)arg;
    /* libgomp exits the process when it cannot create a thread */
    size = 1 + _pylayout_threads_creatable(size - 1);
#pragma omp parallel num_threads(size)
    pl_worker(omp_get_thread_num());
    return NULL;
}

/* Stops the team and joins its service thread.  Holds `busy`. */
static void pl_team_stop(void)
{
    if (!pl_team.started)
        return;
    pthread_mutex_lock(&pl_team.lock);
    atomic_store(&pl_team.stop, true);
    pthread_cond_broadcast(&pl_team.work);
    pthread_mutex_unlock(&pl_team.lock);
    pthread_join(pl_team.service, NULL);
    atomic_store(&pl_team.stop, false);
    pl_team.started = false;
    pl_team.size = 0;
}

/* A team of at least `workers` threads, started now if need be; false if
 * no thread can be started.  Holds `busy`. */
static bool pl_team_ready(int workers)
{
    if (pl_team.started && pl_team.size >= workers)
        return true;
    pl_team_stop();
    atomic_store(&pl_team.arrived, 0);
    pl_team.moved = false; /* its workers' L2s hold nothing of the next copy */
    if (pthread_create(&pl_team.service, NULL, pl_team_main, (void *)(intptr_t)workers) != 0)
        return false;
    pl_team.started = true;
    pl_team.size = workers;
    return true;
}
#endif /* _OPENMP */

/* Runs chunks [c0, c1) of a job on the calling thread, as one call where
 * the job can merge consecutive chunks (span), else chunk by chunk. */
static void pl_run_alone(_pylayout_chunk_fn fn, pl_span_fn span, void *ctx, int c0, int c1)
{
    if (span != NULL && c1 > c0) {
        span(ctx, c0, c1);
        return;
    }
    for (int c = c0; c < c1; c++)
        fn(ctx, c);
}

#ifdef _OPENMP
/* Books a copy the team ran, which took `took` ns where its caller alone
 * would have taken `alone` (its pace on its own chunks times the copy's
 * chunks), and returns whether the team hurt it.  Holds `busy`.
 *
 * It hurt when it left the account (pl_team.credit) below zero: the time
 * the team has saved its callers, capped at PL_CREDIT_MAX_NS, no longer
 * covers what it cost.  The first copy after a period alone may take up to
 * twice its time alone first: it moves the workers' parts of src and dst
 * from the caller's L2 to theirs.  It also hurt when the workers, awake,
 * ran none of it (`idle`) and none of the copy before either: they are not
 * getting a core (a worker just woken may well arrive after the copy, and
 * polls for the next one).  A single such copy costs nothing, and on a quiet
 * machine one in a few thousand is (a worker held up for a moment).
 *
 * Until session 20 a copy hurt when it took 9/8 of its time alone (and,
 * not in a run, also waited more than PL_WAIT_SPIN_NS for the others).  On
 * a quiet machine that fired on one copy in a few hundred: a worker held
 * up 5-100 us once (the VM's own noise), and the 2 ms alone that followed,
 * then copies slowed by moving the halves back between the L2s, sent most
 * copies to the caller.  A debug count in /tmp, float32 256 x 256
 * transposes at 2 threads in the benchmark's batches (pl.copy_into, 4096
 * a batch, best of 7), the team engaging from 256 KiB and 3 us: 13-17
 * copies a batch judged hurt, so the team ran only 94-138 of them, and a
 * call took 8.1-8.4 us; with the account none was judged hurt, the team
 * ran 3838-4096 of each batch (4.2-4.6 us a copy), a call took 5.3-5.6 us.
 * The account absorbs such a stall within a few copies; a stall of a time
 * slice (milliseconds) still empties it at once.  With one busy process
 * (the oversubscribed benchmark's 256 KiB, 1 MiB and 4 MiB copies, 20
 * processes a rule, alternating) the 2-thread / 1-thread ratio per process
 * was the same: at 1 MiB median 1.02 both, above 1.25 in 2 (9/8 rule) and
 * 3 (account) of 20; 0.98-0.99 at the other sizes. */
static bool pl_team_judge(int64_t now, int64_t took, int64_t alone, bool idle)
{
    int64_t credit = pl_team.moved ? pl_team.credit : pl_team.credit + alone;
    pl_team.moved = true;
    credit += alone - took;
    pl_team.credit = credit > PL_CREDIT_MAX_NS ? PL_CREDIT_MAX_NS : credit;
    pl_team.idle_copies = idle ? pl_team.idle_copies + 1 : 0;
    if (pl_team.idle_copies >= 2 || credit < 0) {
        const int64_t pen = pl_team.penalty * 2;
        pl_team.penalty = pen < PL_ALONE_MIN_NS ? PL_ALONE_MIN_NS : pen > PL_ALONE_MAX_NS ? PL_ALONE_MAX_NS : pen;
        pl_team.alone_until = now + pl_team.penalty;
        pl_team.credit = 0;
        pl_team.moved = false;
        pl_team.idle_copies = 0;
        return true;
    }
    if (took < alone)
        pl_team.penalty = 0;
    return false;
}

/* When this thread's last copy that took at least PL_ENGAGE_RUN_NS ended
 * (see PL_ENGAGE_RUN_NS); 0 for none. */
static _Thread_local int64_t pl_run_copy_end;
/* The chunks of this thread's last copy if it came in a run and engaged
 * the team, and the team did not hurt it, else 0.  The next copy of the
 * run with as many chunks engages the team at once, instead of first
 * running a chunk alone to learn its pace: that chunk is an eighth or a
 * sixteenth of the copy, during which the worker waits.  Measured on the
 * 2-core dev VM, batches of 40 float32 512 x 512 transposes (1 MiB, on
 * lines) at 2 threads, the two ways alternating batch by batch in one
 * process (a throwaway switch), median of 40 batches, us a call: 17.0
 * against 22.4-22.8, and 18.2-18.3 against 20.2-20.5 in a second process.
 * Until session 62 only copies short enough to engage by run (under
 * PL_ENGAGE_NS alone) did this; on a 2-core Zen 3 VM (AVX2, 512 KiB of L2
 * a core) the same 1 MiB transpose takes 50-55 us alone, so every copy of
 * such a loop ran its first chunk alone.  There, at 2 threads, torch
 * tensors, python -m pylayout bench --only "in-cache 2-D transpose 1 MB",
 * six fresh processes each way alternated (a throwaway switch), median
 * GB/s: 16.4 -> 23.2 (0.34 -> 0.50 of the 2-thread memcpy), NumPy
 * operands 19.2 -> 24.5, 16 bytes off a line 17.0 -> 21.3; from C
 * (pylayout_copy, eight or six alternated processes, median new / old):
 * float32 512 x 512 1.21, 1024 x 1024 1.12, float64 512 x 512 1.38,
 * 2048 x 2048 1.03, uint8 1024 x 1024 1.03, contiguous 4 MiB 1.16;
 * 724 x 724 and 256 x 256 float32 level. */
static _Thread_local int pl_run_team_chunks;

/* Whether a copy starting at `now` comes in a run: this thread's last copy
 * that took PL_ENGAGE_RUN_NS or more ended less than PL_IDLE_SPIN_NS ago. */
static bool pl_in_run(int64_t now) { return pl_run_copy_end > 0 && now - pl_run_copy_end < PL_IDLE_SPIN_NS; }
#endif /* _OPENMP */

/* _pylayout_parallel_for, where span (NULL: none) runs consecutive chunks
 * as one call, up to span_max of them in the team (pl_claim_size).  The
 * caller's first chunks, run alone while it times them, are then merged
 * into spans that double in length (1, 2, 4, ... chunks between looks at
 * the clock): each chunk costs a call, a clock read and its range's
 * set-up, and a copy that stays under PL_ENGAGE_NS on its own runs mostly
 * as one span.  Measured on the 2-core dev VM, float32 n x n
 * transposes, chunks of 64 KiB, best of 7 batches, 1 thread / 2 threads
 * chunk by chunk: n=512 42.0-43.8 / 43.3-46.0 us, n=724 38.0-40.1 /
 * 39.9-43.5 us (2 MiB, 32 chunks: never the team, all chunk overhead).
 * A copy whose pace only later shows it long engages the team at most one
 * span later than chunk by chunk, i.e. after at most twice the time. */
static int pl_parallel(int nchunks, int nthreads, _pylayout_chunk_fn fn, pl_span_fn span, int span_max, void *ctx)
{
    int c = 0, entitled = 1;
#ifdef _OPENMP
    if (nchunks > PL_MAX_CHUNKS)
        nchunks = PL_MAX_CHUNKS; /* callers size chunks below this; never claim past it */
    if (nthreads > 1 && nchunks > 1)
        entitled = nthreads < nchunks ? nthreads : nchunks;
    /* Alone first, until the pace so far says the whole copy takes more than
     * PL_ENGAGE_NS, or PL_ENGAGE_RUN_NS in a run of such copies: a short
     * copy never wakes anyone.  Two chunks stay for the team until the end,
     * as chunk by chunk.  Except in a run whose previous copy, of as many
     * chunks, the team sped up: that one's pace is this one's, and the
     * team takes the whole copy at once (see pl_run_team_chunks). */
    const int64_t t0 = pl_now_ns();
    int64_t t = t0;
    const bool in_run = pl_in_run(t0);
    const int64_t engage_ns = in_run ? PL_ENGAGE_RUN_NS : PL_ENGAGE_NS;
    const bool known = in_run && pl_run_team_chunks == nchunks;
    bool run_length = known; /* the pace says PL_ENGAGE_RUN_NS or more */
    for (int step = 1; !known && entitled > 1 && nchunks - c >= 2; step *= 2) {
        const int k = span == NULL ? 1 : step < nchunks - c - 1 ? step : nchunks - c - 1;
        pl_run_alone(fn, span, ctx, c, c + k);
        c += k;
        t = pl_now_ns();
        run_length |= (t - t0) * nchunks > PL_ENGAGE_RUN_NS * c;
        if ((t - t0) * nchunks > engage_ns * c)
            break;
    }
    pl_run_team_chunks = 0;
    if (entitled > 1)
        pl_run_copy_end = run_length ? -1 : 0; /* -1: set to the end time below */
    bool expected = false;
    if (entitled > 1 && nchunks - c >= 2 &&
        atomic_compare_exchange_strong_explicit(&pl_team.busy, &expected, true, memory_order_acquire,
                                                memory_order_relaxed)) {
        const int left = nchunks - c;
        const int n = nthreads < left ? nthreads : left; /* participants, the caller included */
        if (!pl_team_ready(n - 1))
            entitled = 1;
        else if (t >= pl_team.alone_until) {
            const uint32_t gen = PL_GEN(atomic_load(&pl_team.job)) + 1;
            pl_team.fn = fn;
            pl_team.span = span;
            pl_team.span_max = span != NULL && span_max > 1 ? span_max : 1;
            pl_team.ctx = ctx;
            atomic_store_explicit(&pl_team.done, 0, memory_order_relaxed);
            /* Participant p's own chunks are the p-th n-th of the whole copy,
             * less those its caller ran alone, whenever the caller is still
             * in its own share: the same split every time the same copy
             * comes back, so each core finds its part of src and dst in its
             * own L2.  Else the chunks left are split evenly.  Measured
             * on the 2-core dev VM, 512 x 512 float32 into a preallocated
             * dst in a loop, 2 threads (python -m pylayout bench --only
             * in-cache): 29-34 GB/s before (the team never engaged: 25-35
             * us alone, under PL_ENGAGE_NS), 59-65 GB/s with runs and this
             * split; tools/bench_incache 7 2 512 512: 35-45 us -> 24-25. */
            const bool fixed = (int64_t)c <= (int64_t)nchunks / n;
            for (int p = 0; p < n; p++) {
                const int64_t lo = fixed ? (p == 0 ? c : (int64_t)p * nchunks / n) : c + (int64_t)p * left / n;
                const int64_t hi = fixed ? (int64_t)(p + 1) * nchunks / n : c + (int64_t)(p + 1) * left / n;
                atomic_store_explicit(&pl_team.range[p], PL_WORD(gen, lo, hi), memory_order_relaxed);
                pl_team.end[p] = (int)hi;
            }
            atomic_store(&pl_team.job, PL_WORD(gen, n, left)); /* publishes the job */
            /* workers that may arrive late: asleep, or not yet polling (a
             * new team's threads take a few hundred us to start) */
            const bool woke = atomic_load(&pl_team.sleepers) > 0 || atomic_load(&pl_team.arrived) < n - 1;
            if (woke) {
                pthread_mutex_lock(&pl_team.lock);
                pthread_cond_broadcast(&pl_team.work);
                pthread_mutex_unlock(&pl_team.lock);
            }
            const int mine = c + pl_participate(gen, 0, n, left);
            /* Every chunk is claimed; wait for those others run. */
            const int64_t t1 = pl_now_ns();
            int64_t until = t1 + PL_WAIT_SPIN_NS;
            for (int k = 1; atomic_load_explicit(&pl_team.done, memory_order_acquire) < left; k++) {
                pl_cpu_relax();
                if (k % 64 != 0)
                    continue;
                sched_yield(); /* a worker on this core holding a chunk runs */
                if (pl_now_ns() > until) {
                    pthread_mutex_lock(&pl_team.lock);
                    atomic_store(&pl_team.waiting, true);
                    while (atomic_load(&pl_team.done) < left)
                        pthread_cond_wait(&pl_team.finished, &pl_team.lock);
                    atomic_store(&pl_team.waiting, false);
                    pthread_mutex_unlock(&pl_team.lock);
                }
            }
            const int64_t t2 = pl_now_ns();
            const int64_t alone = (t1 - t0) * nchunks / (mine > 0 ? mine : 1);
            if (!pl_team_judge(t2, t2 - t0, alone, mine == nchunks && !woke) && in_run)
                pl_run_team_chunks = nchunks;
            atomic_store_explicit(&pl_team.busy, false, memory_order_release);
            if (pl_run_copy_end < 0)
                pl_run_copy_end = t2;
            return entitled;
        }
        atomic_store_explicit(&pl_team.busy, false, memory_order_release);
    }
#else
    (void)nthreads;
#endif
    pl_run_alone(fn, span, ctx, c, nchunks);
#ifdef _OPENMP
    if (pl_run_copy_end < 0)
        pl_run_copy_end = pl_now_ns();
#endif
    return entitled;
}

int _pylayout_parallel_for(int nchunks, int nthreads, _pylayout_chunk_fn fn, void *ctx)
{
    return pl_parallel(nchunks, nthreads, fn, NULL, 1, ctx);
}

/* One job of _pylayout_parallel_ranges. */
typedef struct {
    _pylayout_range_fn fn;
    void *ctx;
    int64_t n, align;
    int chunks;
} pl_ranges_job;

/* Where range c of the job starts: c / chunks of the way, rounded down to
 * a multiple of align; range `chunks` starts at n. */
static int64_t pl_range_start(const pl_ranges_job *job, int c)
{
    if (c >= job->chunks)
        return job->n;
    return c * job->n / job->chunks / job->align * job->align;
}

static void pl_ranges_chunk(void *ctx, int c)
{
    const pl_ranges_job *job = ctx;
    job->fn(job->ctx, pl_range_start(job, c), pl_range_start(job, c + 1));
}

/* Consecutive ranges are one range. */
static void pl_ranges_span(void *ctx, int c0, int c1)
{
    const pl_ranges_job *job = ctx;
    job->fn(job->ctx, pl_range_start(job, c0), pl_range_start(job, c1));
}

int _pylayout_parallel_ranges(int64_t n, int chunks, int64_t align, int span_max, int nthreads, _pylayout_range_fn fn,
                              void *ctx)
{
    pl_ranges_job job = {fn, ctx, n, align, chunks};
    return pl_parallel(chunks, nthreads, pl_ranges_chunk, pl_ranges_span, span_max, &job);
}

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

/* Copies smaller than this are not even cut into chunks (and timed, see
 * PL_ENGAGE_NS): on the 2-core dev VM one thread copies 1 MiB in 13-27 us
 * (memcpy, step-2 gathers, transposes; 24-36 us for the 512 x 512 float32
 * transpose, which is 1 MiB), and cutting a copy into chunks costs 0.3-0.8 us
 * whether or not the team then helps. */
#define PL_PARALLEL_MIN_BYTES_DEFAULT ((int64_t)1 << 20)

/* Except in a run (see PL_ENGAGE_RUN_NS), where copies from this size on
 * are cut: a loop of them wakes the team once and finds it polling, and the
 * team's split keeps each core's part of src and dst in its own L2.  Float32
 * 256 x 256 transposes (256 KiB) into a preallocated output, 2 threads,
 * pl.copy_into in the benchmark's batches: 4.2-4.6 us a copy by the team
 * against 7 alone; a 256 KiB contiguous copy 3.3 against 4.5-5 (/tmp debug
 * build, session 20).  Cut alone, outside a run, a 256 KiB transpose took
 * 7.6-7.7 us against 7.3-7.5 uncut: so only in a run. */
#define PL_PARALLEL_RUN_MIN_BYTES_DEFAULT ((int64_t)256 << 10)

static int64_t pl_parallel_min = -1;
static bool pl_parallel_min_set; /* by PYLAYOUT_PARALLEL_MIN_BYTES: for runs too */
static pthread_once_t pl_parallel_min_once = PTHREAD_ONCE_INIT;

static void pl_read_parallel_min(void)
{
    pl_parallel_min = PL_PARALLEL_MIN_BYTES_DEFAULT;
    const char *text = getenv("PYLAYOUT_PARALLEL_MIN_BYTES");
    if (text == NULL || *text == '\0')
        return;
    if (!_pylayout_parse_bytes(text, &pl_parallel_min)) {
        pl_parallel_min = PL_PARALLEL_MIN_BYTES_DEFAULT;
        _pylayout_warn_once(PL_WARN_PARALLEL_ENV,
                            "PYLAYOUT_PARALLEL_MIN_BYTES='%.40s' is not a byte count: use a whole number of bytes, "
                            "optionally with K, M or G (powers of 1024), e.g. 1M; using the default (1M)",
                            text);
        return;
    }
    pl_parallel_min_set = true;
}

int64_t _pylayout_parallel_min_bytes(bool in_run)
{
    pthread_once(&pl_parallel_min_once, pl_read_parallel_min);
    return in_run && !pl_parallel_min_set ? PL_PARALLEL_RUN_MIN_BYTES_DEFAULT : pl_parallel_min;
}

bool _pylayout_copy_in_run(int64_t *now_ret)
{
#ifdef _OPENMP
    const int64_t now = pl_now_ns();
    *now_ret = now;
    return pl_in_run(now);
#else
    *now_ret = 0;
    return false;
#endif
}

void _pylayout_uncut_copy_done(int64_t t0)
{
#ifdef _OPENMP
    const int64_t now = pl_now_ns();
    pl_run_copy_end = now - t0 >= PL_ENGAGE_RUN_NS ? now : 0;
#else
    (void)t0;
#endif
}

void _pylayout_note_copy_threads(int n) { pl_last_copy_threads = n; }

pylayout_status pylayout_last_copy_threads(int *n_ret)
{
    if (n_ret == NULL)
        return _pylayout_fail(PYLAYOUT_ERR_INVALID_ARGUMENT, "pylayout_last_copy_threads: n_ret is NULL");
    *n_ret = pl_last_copy_threads;
    return PYLAYOUT_OK;
}

pylayout_status pylayout_set_num_threads_quiet(int n, bool *clamped_first_ret, int *machine_ret)
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
    pylayout_status st = pylayout_set_num_threads_quiet(n, &first, &machine);
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
