/*
 * check_team.c - how the persistent team (src/threads.c) shares a job out,
 * seen from inside: _pylayout_parallel_ranges run directly on 2 threads,
 * every call of the range function recorded.  White-box: it links the core
 * library itself and includes src/internal.h.  The copies' results are
 * checked elsewhere (check_copy, check_incache); this checks the sharing:
 *   - every element of every job is handed out exactly once, whatever the
 *     chunk count and the span limit;
 *   - a worker never takes more than span_max chunks in one call, and
 *     exactly one at a time when span_max is 1;
 *   - a worker that comes in time takes its own chunks as one span when
 *     span_max allows (pl_claim_size): the point of spans.
 * The range function spins for a few hundred microseconds a job, long
 * enough that the caller engages the team (PL_ENGAGE_NS); each case runs
 * until a worker has taken part, or fails after TEAM_DEADLINE_NS.
 * Exits 77 (skipped, saying why) where there is no second CPU or no
 * OpenMP: no worker could ever take part.  Under valgrind, which runs one
 * thread at a time, a worker seldom gets a turn while a job is open: there
 * each case runs a few jobs and checks what was handed out, without
 * requiring a worker to take part.
 */
#define _GNU_SOURCE
#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if defined(__has_include)
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#endif
#endif

#include "check_util.h"
#include "internal.h"

#ifdef RUNNING_ON_VALGRIND
static bool under_valgrind(void) { return RUNNING_ON_VALGRIND != 0; }
#else
static bool under_valgrind(void) { return false; }
#endif

#define TEAM_DEADLINE_NS ((int64_t)10 * 1000 * 1000 * 1000)
#define JOB_NS ((int64_t)400 * 1000) /* one job's spinning, all elements */
#define MAX_CALLS 4096

typedef struct {
    int64_t lo, hi;
    bool on_caller;
} call_rec;

typedef struct {
    int64_t n;
    int chunks;
    pthread_t caller;
    int64_t ns_per_element;
    _Atomic int *hits;
    call_rec calls[MAX_CALLS];
    atomic_int ncalls;
} job_rec;

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void record(void *ctx, int64_t lo, int64_t hi)
{
    job_rec *j = ctx;
    const int k = atomic_fetch_add(&j->ncalls, 1);
    if (k < MAX_CALLS)
        j->calls[k] = (call_rec){lo, hi, pthread_equal(pthread_self(), j->caller) != 0};
    for (int64_t i = lo; i < hi; i++)
        atomic_fetch_add(&j->hits[i], 1);
    const int64_t until = now_ns() + (hi - lo) * j->ns_per_element;
    while (now_ns() < until) {
    }
}

/* Where chunk c starts, as the splitter cuts (align 1). */
static int64_t chunk_start(const job_rec *j, int c) { return c >= j->chunks ? j->n : c * j->n / j->chunks; }

/* The chunks a call [lo, hi) covers: the splitter only ever hands out
 * whole chunks, so both ends must be chunk starts. */
static int chunks_in(const job_rec *j, int64_t lo, int64_t hi)
{
    int c0 = -1, c1 = -1;
    for (int c = 0; c <= j->chunks; c++) {
        if (chunk_start(j, c) == lo && c0 < 0)
            c0 = c;
        if (chunk_start(j, c) == hi)
            c1 = c;
    }
    ck_assert_msg(c0 >= 0 && c1 > c0, "a call [%lld, %lld) of %lld elements in %d chunks is not whole chunks",
                  (long long)lo, (long long)hi, (long long)j->n, j->chunks);
    return c1 - c0;
}

/* A job of `chunks` chunks of 8 and 9 elements, JOB_NS of spinning in all,
 * run from this thread; free it with job_free. */
static job_rec *job_new(int chunks)
{
    job_rec *j = calloc(1, sizeof *j);
    ck_assert_ptr_nonnull(j);
    j->n = (int64_t)chunks * 8 + 5;
    j->chunks = chunks;
    j->caller = pthread_self();
    j->ns_per_element = JOB_NS / j->n;
    j->hits = calloc((size_t)j->n, sizeof *j->hits);
    ck_assert_ptr_nonnull(j->hits);
    return j;
}

static void job_free(job_rec *j)
{
    free(j->hits);
    free(j);
}

/* Runs job j once on 2 threads with span limit span_max (rep: its number,
 * for messages), checks that every element ran exactly once, and returns
 * how many calls it took (recorded in j->calls). */
static int job_run(job_rec *j, int span_max, int rep)
{
    atomic_store(&j->ncalls, 0);
    for (int64_t i = 0; i < j->n; i++)
        atomic_store(&j->hits[i], 0);
    const int entitled = _pylayout_parallel_ranges(j->n, j->chunks, 1, span_max, 2, record, j);
    ck_assert_int_eq(entitled, 2);
    const int ncalls = atomic_load(&j->ncalls);
    ck_assert_int_le(ncalls, MAX_CALLS);
    for (int64_t i = 0; i < j->n; i++)
        ck_assert_msg(atomic_load(&j->hits[i]) == 1, "%d chunks, span_max %d, job %d: element %lld ran %d times",
                      j->chunks, span_max, rep, (long long)i, atomic_load(&j->hits[i]));
    return ncalls;
}

/* Runs jobs of `chunks` chunks with span limit span_max until a worker has
 * taken part (and, where spans are possible, taken one), checking each. */
static void run_case(int chunks, int span_max)
{
    job_rec *j = job_new(chunks);
    /* a worker's own share: chunks / 2 of 2 participants' */
    const bool span_possible = span_max >= 2 && chunks / 2 >= 2;
    const bool require = !under_valgrind();
    bool worker_ran = false, worker_spanned = false;
    const int64_t deadline = now_ns() + TEAM_DEADLINE_NS;
    for (int rep = 0; (require && !(worker_ran && (worker_spanned || !span_possible))) || rep < 3; rep++) {
        ck_assert_msg(now_ns() < deadline,
                      "%d chunks, span_max %d: after %d jobs no worker %s", chunks, span_max, rep,
                      worker_ran ? "took its own chunks as one span" : "took part");
        const int ncalls = job_run(j, span_max, rep);
        for (int k = 0; k < ncalls; k++) {
            const call_rec *c = &j->calls[k];
            const int covered = chunks_in(j, c->lo, c->hi);
            if (c->on_caller)
                continue; /* the caller merges what it runs alone, at any length */
            worker_ran = true;
            worker_spanned |= covered >= 2;
            ck_assert_msg(covered <= span_max, "%d chunks, span_max %d: a worker took %d chunks at once", chunks,
                          span_max, covered);
        }
    }
    job_free(j);
}

START_TEST(test_shares)
{
    /* not 2: the caller runs the first chunk alone to learn the pace, and
     * the team is woken only for two or more left */
    static const int chunk_counts[] = {3, 4, 5, 7, 16, 64};
    static const int span_maxes[] = {1, 2, 3, 1000};
    const int c = _i / 4, s = _i % 4;
    run_case(chunk_counts[c], span_maxes[s]);
}
END_TEST

/* Jobs back to back are a run (threads.c, pl_in_run): once the team has
 * sped one up, the next of as many chunks engages the team at once,
 * however long it takes, instead of first running a chunk alone on the
 * caller to learn its pace (pl_run_team_chunks).  Seen from here: a job
 * whose first call is the caller's own share, [0, chunks / 2) in one span,
 * with a worker taking part.  Jobs of JOB_NS each, far past PL_ENGAGE_NS;
 * until session 62 only runs of copies shorter than that engaged at once. */
START_TEST(test_run_engages_at_once)
{
    enum { CHUNKS = 8 };
    job_rec *j = job_new(CHUNKS);
    const bool require = !under_valgrind();
    bool at_once = false;
    const int64_t deadline = now_ns() + TEAM_DEADLINE_NS;
    for (int rep = 0; (require && !at_once) || rep < 3; rep++) {
        ck_assert_msg(now_ns() < deadline, "after %d jobs back to back, none engaged the team at once", rep);
        const int ncalls = job_run(j, 1000, rep);
        const call_rec *first = NULL;
        bool worker_ran = false;
        for (int k = 0; k < ncalls; k++) {
            if (j->calls[k].on_caller && first == NULL)
                first = &j->calls[k];
            worker_ran |= !j->calls[k].on_caller;
        }
        at_once |= worker_ran && first != NULL && first->lo == 0 && first->hi == chunk_start(j, CHUNKS / 2);
    }
    job_free(j);
}
END_TEST

int main(void)
{
#ifndef _OPENMP
    printf("check_team: SKIP: built without OpenMP, so copies never run on a team\n");
    return 77;
#else
    if (_pylayout_machine_threads() < 2) {
        printf("check_team: SKIP: this process can run 1 thread at a time here, so no worker can take part\n");
        return 77;
    }
    const tcase_spec cases[] = {TCASE("shares", LOOP(test_shares, 24)), TCASE("runs", TEST(test_run_engages_at_once))};
    return run_suite(SUITE_OF("team", cases, 240));
#endif
}
