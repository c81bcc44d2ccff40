/* check_util.h - helpers shared by the Check suites. */
#ifndef PYLAYOUT_CHECK_UTIL_H
#define PYLAYOUT_CHECK_UTIL_H

#include <check.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <pylayout.h>

/* Runs fn in a forked child and returns its exit status, or -signal if it
 * crashed: a crash or a sanitizer abort then fails one test instead of
 * taking the whole CK_NOFORK runner down.  fn must not use OpenMP (libgomp
 * is not fork-safe). */
static inline int run_in_child(int (*fn)(void))
{
    fflush(NULL);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0)
        _exit(fn());
    int status = 0;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
}

/* Runs every test of `s` in this process (libgomp is not fork-safe, so no
 * suite lets Check fork per test) and returns main()'s exit status. */
static inline int run_suite(Suite *s)
{
    SRunner *sr = srunner_create(s);
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

/* For a suite registered once per SIMD path (tests/c/meson.build): prints
 * the path it runs, and returns true when PYLAYOUT_SIMD asked for a path
 * this CPU lacks.  The library then runs the best path it has, which that
 * path's own registration already covers, so main() exits 77 (meson: SKIP)
 * instead of repeating it; under valgrind, which has no AVX-512, the
 * avx512 runs always skip. */
static inline bool simd_path_absent(const char *suite)
{
    const char *simd = "?", *want = getenv("PYLAYOUT_SIMD");
    bool openmp = false;
    if (pylayout_build_info(&openmp, &simd) != PYLAYOUT_OK) /* outside a test: no ck_assert */
        return false; /* run it all; check_copy tests pylayout_build_info */
    printf("%s: simd=%s openmp=%d\n", suite, simd, (int)openmp);
    if (want == NULL || *want == '\0' || strcmp(want, simd) == 0)
        return false;
    printf("%s: SKIP, this CPU has no %s path; the %s run covers the path it would run\n", suite, want, simd);
    return true;
}

/* Runs the executable `path` (searched in PATH when it has no slash, as
 * posix_spawnp does) with argv and envp in a fresh process, its file
 * descriptor `fd` (STDOUT_FILENO or STDERR_FILENO) into a pipe read to the
 * end into out[size], cut at size - 1 bytes and NUL-terminated, and waits
 * for it.  Returns its wait status, or -1 when it could not be started.
 * Not a test of its own: callers assert on what it returns. */
static inline int spawn_capture(const char *path, char *const argv[], char *const envp[], int fd, char *out,
                                size_t size)
{
    int fds[2];
    out[0] = '\0';
    if (pipe(fds) != 0)
        return -1;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fds[1], fd);
    posix_spawn_file_actions_addclose(&fa, fds[0]);
    pid_t pid = 0;
    fflush(NULL);
    const int spawned = posix_spawnp(&pid, path, &fa, NULL, argv, envp);
    posix_spawn_file_actions_destroy(&fa);
    close(fds[1]);
    size_t len = 0;
    ssize_t got;
    while (spawned == 0 && (got = read(fds[0], out + len, size - 1 - len)) > 0)
        len += (size_t)got;
    out[len] = '\0';
    close(fds[0]);
    int status = 0;
    if (spawned != 0 || waitpid(pid, &status, 0) != pid)
        return -1;
    return status;
}

/* The path `self` (this test executable, which answers --print-simd by
 * printing the path pylayout_build_info names) runs without PYLAYOUT_SIMD,
 * in a fresh process, into best[size]; false if that fails.  Under valgrind
 * the child runs natively, so its path is the CPU's own. */
static inline bool uncapped_simd_path(const char *self, char *best, size_t size)
{
    extern char **environ;
    size_t n = 0;
    while (environ[n] != NULL)
        n++;
    char **env = calloc(n + 1, sizeof *env);
    if (env == NULL)
        return false;
    for (size_t k = 0, m = 0; k < n; k++)
        if (strncmp(environ[k], "PYLAYOUT_SIMD=", 14) != 0)
            env[m++] = environ[k];
    char *argv[] = {(char *)self, "--print-simd", NULL};
    const int status = spawn_capture(self, argv, env, STDOUT_FILENO, best, size);
    free(env);
    if (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0 || best[0] == '\0')
        return false;
    best[strcspn(best, "\n")] = '\0';
    return true;
}

/* For a suite registered once without PYLAYOUT_SIMD (the CPU's best path)
 * and again under some caps: true, saying so, when this run's cap is
 * absent from the CPU (simd_path_absent) or is the CPU's best path, which
 * the uncapped run already covers; main() then exits 77 (meson: SKIP).  On
 * an AVX2 machine, copy-avx2 and interleave-avx2 skip. */
static inline bool simd_run_repeats_best(const char *suite, const char *self)
{
    const char *want = getenv("PYLAYOUT_SIMD");
    if (simd_path_absent(suite))
        return true;
    char best[32];
    if (want == NULL || *want == '\0' || !uncapped_simd_path(self, best, sizeof best) || strcmp(want, best) != 0)
        return false;
    printf("%s: SKIP, %s is this CPU's best path, which the run without PYLAYOUT_SIMD covers\n", suite, want);
    return true;
}

/* main()'s answer to --print-simd (uncapped_simd_path). */
static inline int print_simd(void)
{
    const char *simd = "?";
    bool openmp = false;
    if (pylayout_build_info(&openmp, &simd) != PYLAYOUT_OK)
        return 1;
    printf("%s\n", simd);
    return 0;
}

/* t's DLTensor, asserting that pylayout_tensor_dltensor succeeds. */
static inline const DLTensor *dl_of(const pylayout_tensor *t)
{
    const DLTensor *dl = NULL;
    ck_assert_int_eq(pylayout_tensor_dltensor(t, &dl), PYLAYOUT_OK);
    ck_assert_ptr_nonnull(dl);
    return dl;
}

/* Runs fn(threads, ctx) with the library set to 1 and then 2 threads, and
 * restores the thread count it found. */
static inline void at_1_and_2_threads(void (*fn)(int threads, void *ctx), void *ctx)
{
    int saved = 1;
    ck_assert_int_eq(pylayout_get_num_threads(&saved), PYLAYOUT_OK);
    for (int threads = 1; threads <= 2; threads++) {
        ck_assert_int_eq(pylayout_set_num_threads(threads), PYLAYOUT_OK);
        fn(threads, ctx);
    }
    ck_assert_int_eq(pylayout_set_num_threads(saved), PYLAYOUT_OK);
}

/* ------------------------------------------------------------ tensors */

/* A CPU DLTensor over caller-owned shape/stride arrays and data: the one
 * descriptor builder of the suites. */
static inline DLTensor dl_make(void *data, int32_t ndim, const int64_t *shape, const int64_t *strides,
                               DLDataType dtype, uint64_t byte_offset)
{
    DLTensor t = {.device = {kDLCPU, 0}, .ndim = ndim, .dtype = dtype, .byte_offset = byte_offset};
    t.data = data;
    t.shape = (int64_t *)shape; /* DLTensor's fields are not const; the suites never write through them */
    t.strides = (int64_t *)strides;
    return t;
}

/* The strides of a layout of `shape`, in elements: dims nested in the order
 * perm[0] (outermost) ... perm[ndim - 1] (innermost; perm NULL: row-major),
 * each padded by steps[d] >= 1, negated where flip[d], 0 where zero[d]
 * (NULL arrays: none).  *lo <= 0 and *hi >= 0 receive the lowest and the
 * highest element offset reached from element 0, so a buffer of
 * hi - lo + 1 elements with element 0 at -lo holds every element. */
static inline void layout_strides(int32_t ndim, const int64_t *shape, const int *perm, const int *steps,
                                  const int *flip, const int *zero, int64_t *strides, int64_t *lo, int64_t *hi)
{
    int64_t acc = 1;
    *lo = *hi = 0;
    for (int p = ndim - 1; p >= 0; p--) {
        int d = perm ? perm[p] : p;
        int64_t step = steps ? steps[d] : 1;
        strides[d] = zero && zero[d] ? 0 : acc * step * (flip && flip[d] ? -1 : 1);
        if (strides[d] == 0)
            continue; /* a broadcast dim takes no room */
        int64_t last = (shape[d] > 0 ? shape[d] - 1 : 0) * strides[d]; /* the offset of its last index */
        *(last < 0 ? lo : hi) += last;
        acc *= (shape[d] > 1 ? shape[d] : 1) * step;
    }
}

/* The odometer: advances idx to the next index of `shape` in row-major
 * order; false after the last one. */
static inline bool next_index(int64_t *idx, int32_t ndim, const int64_t *shape)
{
    for (int d = ndim - 1; d >= 0; d--) {
        if (++idx[d] < shape[d])
            return true;
        idx[d] = 0;
    }
    return false;
}

/* A pseudo-random number in [0, n) from the seed *s: an LCG of our own, so
 * that a seed names the same cases on every libc (and no suite needs POSIX
 * for rand_r). */
static inline unsigned test_rand(unsigned *s, unsigned n)
{
    *s = *s * 1103515245u + 12345u;
    return (*s >> 8) % n;
}

/* Fills n bytes at buf with pseudo-random bytes from the seed *s (a
 * xorshift64, 8 bytes per step) and advances *s.  Filling byte by byte
 * through an LCG or rand_r took most of the suites' time, ten times more
 * under valgrind. */
static inline void test_fill(void *buf, size_t n, unsigned *s)
{
    uint64_t x = ((uint64_t)*s * 0x9E3779B97F4A7C15u) | 1u; /* never 0 */
    unsigned char *p = buf;
    for (size_t i = 0; i < n; i += 8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        memcpy(p + i, &x, n - i < 8 ? n - i : 8);
    }
    *s = (unsigned)(x >> 32) ^ (unsigned)x;
}

/* The suites' oracle: copies every element of src to the same index of
 * dst, one element at a time in row-major order (no tiling, no SIMD, no
 * threads).  Strides in elements, NULL for row-major; both views have
 * src's shape and is-byte elements.  Offsets advance by one stride per
 * element instead of a dot product per element, so that the oracle keeps
 * up with a million-element case under valgrind. */
static inline void ref_copy_elements(const DLTensor *src, const DLTensor *dst, size_t is)
{
    const int32_t nd = src->ndim;
    int64_t ss[PYLAYOUT_MAX_NDIM], ds[PYLAYOUT_MAX_NDIM], idx[PYLAYOUT_MAX_NDIM] = {0};
    int64_t srow = 1, drow = 1;
    for (int d = nd - 1; d >= 0; d--) {
        if (src->shape[d] == 0)
            return;
        ss[d] = (src->strides ? src->strides[d] : srow) * (int64_t)is;
        ds[d] = (dst->strides ? dst->strides[d] : drow) * (int64_t)is;
        srow *= src->shape[d];
        drow *= src->shape[d];
    }
    const char *s0 = (const char *)src->data + src->byte_offset;
    char *d0 = (char *)dst->data + dst->byte_offset;
    const int64_t n = nd > 0 ? src->shape[nd - 1] : 1, sstep = nd > 0 ? ss[nd - 1] : 0,
                  dstep = nd > 0 ? ds[nd - 1] : 0;
    for (;;) {
        int64_t so = 0, dof = 0;
        for (int d = 0; d < nd - 1; d++) {
            so += idx[d] * ss[d];
            dof += idx[d] * ds[d];
        }
        const char *s = s0 + so;
        char *dp = d0 + dof;
#define PL_REF_ROW(IS)                                                                                                 \
    for (int64_t j = 0; j < n; j++)                                                                                    \
        memcpy(dp + j * dstep, s + j * sstep, IS)
        switch (is) {
        case 1: PL_REF_ROW(1); break;
        case 2: PL_REF_ROW(2); break;
        case 4: PL_REF_ROW(4); break;
        case 8: PL_REF_ROW(8); break;
        case 16: PL_REF_ROW(16); break;
        default: PL_REF_ROW(is); break;
        }
#undef PL_REF_ROW
        if (nd <= 1 || !next_index(idx, nd - 1, src->shape))
            return;
    }
}

/* A random permutation of 0 .. n-1 in p (Fisher-Yates). */
static inline void random_perm(int *p, int n, unsigned *s)
{
    for (int d = 0; d < n; d++)
        p[d] = d;
    for (int d = n - 1; d > 0; d--) {
        int j = (int)test_rand(s, (unsigned)d + 1), tmp = p[d];
        p[d] = p[j];
        p[j] = tmp;
    }
}

/* ------------------------------------------------------------ suites */

/* One test of a TCase: TEST(fn), or LOOP(fn, n) for a loop test run with
 * _i = 0 .. n-1. */
typedef struct {
    const TTest *test;
    int loops; /* 0: a plain test */
} tcase_test;
#define TEST(fn) {(fn), 0}
#define LOOP(fn, n) {(fn), (n)}
/* A row of tests: TCASE("name", TEST(a), LOOP(b, 4), ...).  Rows that need
 * a timeout or a fixture spell the fields out: {.name = ..., .tests = {...},
 * .timeout_s = 120}. */
#define TCASE(name_, ...) {.name = (name_), .tests = {__VA_ARGS__}}

/* One TCase of a suite: its name, its tests in the order they run, and
 * optionally its own timeout and a checked fixture. */
#define TCASE_MAX_TESTS 12
typedef struct {
    const char *name;
    tcase_test tests[TCASE_MAX_TESTS + 1]; /* the extra slot keeps every row terminated */
    double timeout_s;                      /* 0: the suite's default */
    SFun setup, teardown;                  /* a checked fixture, or NULL */
} tcase_spec;

/* Adds one TCase per row of specs to s.  A row without its own timeout gets
 * timeout_s (0: Check's default, which CK_DEFAULT_TIMEOUT sets).  A row that
 * fills the spare slot aborts (this runs before any test, so no ck_assert):
 * raise TCASE_MAX_TESTS instead of losing a test. */
static inline void add_tcases(Suite *s, const tcase_spec *specs, size_t n, double timeout_s)
{
    for (size_t i = 0; i < n; i++) {
        const tcase_spec *spec = &specs[i];
        if (spec->tests[TCASE_MAX_TESTS].test != NULL) {
            fprintf(stderr, "tcase %s has more than %d tests: raise TCASE_MAX_TESTS\n", spec->name,
                    TCASE_MAX_TESTS);
            abort();
        }
        TCase *tc = tcase_create(spec->name);
        double timeout = spec->timeout_s > 0 ? spec->timeout_s : timeout_s;
        if (timeout > 0)
            tcase_set_timeout(tc, timeout);
        if (spec->setup || spec->teardown)
            tcase_add_checked_fixture(tc, spec->setup, spec->teardown);
        for (const tcase_test *t = spec->tests; t->test != NULL; t++) {
            if (t->loops > 0)
                tcase_add_loop_test(tc, t->test, 0, t->loops);
            else
                tcase_add_test(tc, t->test);
        }
        suite_add_tcase(s, tc);
    }
}

/* A suite named `name` made of the rows of a tcase_spec array. */
#define SUITE_OF(name, specs, timeout_s) suite_of((name), (specs), sizeof(specs) / sizeof((specs)[0]), (timeout_s))
static inline Suite *suite_of(const char *name, const tcase_spec *specs, size_t n, double timeout_s)
{
    Suite *s = suite_create(name);
    add_tcases(s, specs, n, timeout_s);
    return s;
}

#endif /* PYLAYOUT_CHECK_UTIL_H */
