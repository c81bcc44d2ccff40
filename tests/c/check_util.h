/* check_util.h - helpers shared by the Check suites. */
#ifndef PYLAYOUT_CHECK_UTIL_H
#define PYLAYOUT_CHECK_UTIL_H

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

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

#endif /* PYLAYOUT_CHECK_UTIL_H */
