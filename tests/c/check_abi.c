/*
 * check_abi.c - pylayout's DLPack declarations (include/pylayout/dlpack.h)
 * against the official DLPack 1.x header, field by field.
 *
 * abi_table.c, compiled once per header (as abi_ours and abi_official),
 * evaluates the same list (abi_fields.h) against each; this file compares the two tables: struct sizes and
 * alignments, field offsets, sizes and types, function pointer types, enum
 * values and flag bits.  abi_mixed.c includes the official header and then
 * <pylayout.h> (warnings as errors) and runs a round trip with its types.
 *
 * The official header is not in this repository: meson finds it in the
 * apache-tvm-ffi wheel.  When it is missing this program is built with
 * PYLAYOUT_ABI_SKIP_REASON and exits 77, which meson reports as SKIP.
 */
#include <stdio.h>
#include <stdlib.h>

#ifdef PYLAYOUT_ABI_SKIP_REASON

int main(void)
{
    printf("SKIP: %s\n", PYLAYOUT_ABI_SKIP_REASON);
    return 77;
}

#else

#include <check.h>
#include <string.h>

#include <pylayout.h>

#include "check_util.h"

#include "abi_fields.h"

/* The entry called `name`, failing the test (naming the fact and the table)
 * where it is missing. */
static const abi_entry *find_or_fail(const abi_entry *table, size_t len, const char *name)
{
    for (size_t i = 0; i < len; i++)
        if (strcmp(table[i].name, name) == 0)
            return &table[i];
    ck_abort_msg("%s missing from the %s table", name, table == abi_ours ? "pylayout" : "official");
    return NULL; /* not reached */
}

START_TEST(test_tables_identical)
{
    ck_assert_uint_eq(abi_ours_len, abi_official_len);
    ck_assert_uint_gt(abi_ours_len, 100);
    int mismatches = 0;
    for (size_t i = 0; i < abi_ours_len; i++) {
        const abi_entry *a = &abi_ours[i], *b = &abi_official[i];
        ck_assert_str_eq(a->name, b->name);
        if (a->value != b->value || strcmp(a->type, b->type) != 0) {
            fprintf(stderr, "ABI mismatch: %s: pylayout %llu (%s), official %llu (%s)\n", a->name, a->value,
                    a->type, b->value, b->type);
            mismatches++;
        }
    }
    ck_assert_msg(mismatches == 0, "%d ABI facts differ from the official header (listed on stderr)",
                  mismatches);
}
END_TEST

/* Every function pointer and nested type is exactly what the spec spells,
 * in both declarations (1 = _Generic matched). */
START_TEST(test_exact_types)
{
    int checked = 0;
    for (size_t i = 0; i < abi_ours_len; i++) {
        if (strncmp(abi_ours[i].name, "type of ", 8) != 0)
            continue;
        ck_assert_msg(abi_ours[i].value == 1, "pylayout: %s differs from the specification", abi_ours[i].name);
        ck_assert_msg(abi_official[i].value == 1, "official: %s differs from the specification",
                      abi_official[i].name);
        checked++;
    }
    ck_assert_int_ge(checked, 20);
}
END_TEST

/* Spot values from the specification, so that identical-but-wrong tables
 * (say, a broken build picking the same header twice) still fail. */
START_TEST(test_known_values)
{
    static const struct {
        const char *name;
        unsigned long long value;
    } known[] = {
        {"DLTensor sizeof", 48},
        {"DLTensor.byte_offset offsetof", 40},
        {"DLTensor.dtype offsetof", 20},
        {"DLManagedTensor sizeof", 64},
        {"DLManagedTensorVersioned sizeof", 80},
        {"DLManagedTensorVersioned.flags offsetof", 24},
        {"DLManagedTensorVersioned.dl_tensor offsetof", 32},
        {"DLPackExchangeAPI sizeof", 56},
        {"kDLCPU", 1},
        {"kDLTrn", 18},
        {"kDLBool", 6},
        {"kDLFloat4_e2m1fn", 17},
        {"DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED", 4},
    };
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
        const abi_entry *a = find_or_fail(abi_ours, abi_ours_len, known[i].name);
        const abi_entry *b = find_or_fail(abi_official, abi_official_len, known[i].name);
        ck_assert_msg(a->value == known[i].value && b->value == known[i].value, "%s: pylayout %llu, official %llu, "
                      "spec %llu", known[i].name, a->value, b->value, known[i].value);
    }
    ck_assert_str_eq(find_or_fail(abi_official, abi_official_len, "DLTensor.ndim offsetof")->type, "int32");
    ck_assert_str_eq(find_or_fail(abi_official, abi_official_len, "DLTensor.byte_offset offsetof")->type, "uint64");
}
END_TEST

START_TEST(test_versions_and_flags)
{
    ck_assert_uint_eq(abi_ours_version[0], 1);
    ck_assert_uint_eq(abi_official_version[0], abi_ours_version[0]);
    /* pylayout may lag behind the official header, never run ahead of it. */
    ck_assert_msg(abi_ours_version[1] <= abi_official_version[1], "pylayout declares DLPack 1.%u, official is 1.%u",
                  abi_ours_version[1], abi_official_version[1]);
    ck_assert_uint_eq(PYLAYOUT_FLAG_READ_ONLY,
                      find_or_fail(abi_official, abi_official_len, "DLPACK_FLAG_BITMASK_READ_ONLY")->value);
    ck_assert_uint_eq(PYLAYOUT_FLAG_IS_COPIED,
                      find_or_fail(abi_official, abi_official_len, "DLPACK_FLAG_BITMASK_IS_COPIED")->value);
}
END_TEST

START_TEST(test_official_header_first)
{
    char why[256] = "";
    ck_assert_msg(abi_mixed_roundtrip(why, sizeof why) == 0, "official header + pylayout.h: %s", why);
}
END_TEST

static Suite *abi_suite(void)
{
    const tcase_spec cases[] = {
        TCASE("dlpack_header", TEST(test_tables_identical), TEST(test_exact_types), TEST(test_known_values),
              TEST(test_versions_and_flags), TEST(test_official_header_first)),
    };
    return SUITE_OF("abi", cases, 0);
}

int main(void) { return run_suite(abi_suite()); }

#endif /* PYLAYOUT_ABI_SKIP_REASON */
