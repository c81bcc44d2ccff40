/* check_util.h - helpers shared by the Check suites. */
#ifndef PYLAYOUT_CHECK_UTIL_H
#define PYLAYOUT_CHECK_UTIL_H

#include <check.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
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

/* One TCase of a suite: its name and its tests, NULL after the last. */
#define TCASE_MAX_TESTS 8
typedef struct {
    const char *name;
    const TTest *tests[TCASE_MAX_TESTS + 1]; /* the extra slot keeps every row NULL-terminated */
} tcase_spec;

/* Adds one TCase per row of specs to s, each with the given timeout.  A row
 * that fills the spare slot aborts (runs before any test, so no ck_assert):
 * raise TCASE_MAX_TESTS instead of losing a test. */
static inline void add_tcases(Suite *s, const tcase_spec *specs, size_t n, double timeout_s)
{
    for (size_t i = 0; i < n; i++) {
        if (specs[i].tests[TCASE_MAX_TESTS] != NULL) {
            fprintf(stderr, "tcase %s has more than %d tests: raise TCASE_MAX_TESTS\n", specs[i].name,
                    TCASE_MAX_TESTS);
            abort();
        }
        TCase *tc = tcase_create(specs[i].name);
        tcase_set_timeout(tc, timeout_s);
        for (size_t k = 0; specs[i].tests[k] != NULL; k++)
            tcase_add_test(tc, specs[i].tests[k]);
        suite_add_tcase(s, tc);
    }
}

#endif /* PYLAYOUT_CHECK_UTIL_H */
