/*
 * warnings.c - warnings pylayout gives at most once per process (malformed
 * PYLAYOUT_* variables, a clamped thread count).  Its own file because both
 * threads.c and alloc.c raise them: neither has to call the other for it.
 */
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>

#include "internal.h"

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
