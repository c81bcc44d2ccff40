/*
 * cache_size.c - how much L3 this CPU shares (_pylayout_l3_bytes, declared
 * in cpu_features.h), read from Linux's sysfs once.  plan.c sizes its
 * streaming threshold for wide-element transposes by it.
 */
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "cpu_features.h"

/* One number from a sysfs file (a size such as "32768K" when `size`), or
 * -1 where it cannot be read. */
static int64_t pl_read_sys_number(const char *path, bool size)
{
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return -1;
    char buf[32] = {0};
    const bool ok = fgets(buf, sizeof buf, f) != NULL;
    fclose(f);
    if (!ok)
        return -1;
    char *end = NULL;
    const long long v = strtoll(buf, &end, 10);
    if (end == buf || v < 0)
        return -1;
    const long long unit = size && *end == 'K' ? 1024 : size && *end == 'M' ? 1024 * 1024 : 1;
    if (v > INT64_MAX / unit)
        return -1;
    return (int64_t)(v * unit);
}

/* The size of the level-3 cache among the index<i> folders under `root`
 * (each with files `level` and `size`, as in Linux's
 * /sys/devices/system/cpu/cpu0/cache), or 0.  Not
 * sysconf(_SC_LEVEL3_CACHE_SIZE): on the AMD EPYC dev VM glibc reports 384
 * MiB there (the whole socket's L3), sysfs the 32 MiB a core shares. */
static int64_t pl_l3_detect(const char *root)
{
    char path[256];
    for (int i = 0; i < 16; i++) {
        snprintf(path, sizeof path, "%s/index%d/level", root, i);
        const int64_t level = pl_read_sys_number(path, false);
        if (level < 0)
            return 0;
        if (level == 3) {
            snprintf(path, sizeof path, "%s/index%d/size", root, i);
            const int64_t size = pl_read_sys_number(path, true);
            return size > 0 ? size : 0;
        }
    }
    return 0;
}

static _Atomic int64_t pl_l3_known = -1;

int64_t _pylayout_l3_bytes(void)
{
    int64_t v = atomic_load_explicit(&pl_l3_known, memory_order_relaxed);
    if (v < 0) { /* racing first calls all read the same files */
        v = pl_l3_detect("/sys/devices/system/cpu/cpu0/cache");
        atomic_store_explicit(&pl_l3_known, v, memory_order_relaxed);
    }
    return v;
}
