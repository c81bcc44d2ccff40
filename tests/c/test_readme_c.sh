#!/usr/bin/env bash
# test_readme_c.sh BUILD_DIR README [B_SANITIZE]
#
# The README's C quickstart, exactly as written: extracts its ```c block,
# then compiles and runs it against the installed library through
# test_c_example.sh (temporary DESTDIR, flags from pylayout.pc only).  The
# block ends with a comment `prints "..."`: the program's output must
# contain that text.
set -euo pipefail

build=${1:?usage: test_readme_c.sh BUILD_DIR README [B_SANITIZE]}
readme=${2:?usage: test_readme_c.sh BUILD_DIR README [B_SANITIZE]}
here=$(cd "$(dirname "$0")" && pwd)

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
awk '/^```c$/ {inside = 1; n++; next} /^```/ {inside = 0} inside && n == 1' "$readme" >"$tmp/readme_quickstart.c"
[ -s "$tmp/readme_quickstart.c" ] || { echo "FAIL: no \`\`\`c block in $readme"; exit 1; }
want=$(sed -n 's/.*prints "\([^"]*\)".*/\1/p' "$tmp/readme_quickstart.c" | head -n 1)
[ -n "$want" ] || { echo "FAIL: the README's C block has no 'prints \"...\"' comment to check"; exit 1; }
echo "== README C block ($(wc -l <"$tmp/readme_quickstart.c") lines), expected output: $want"

bash "$here/test_c_example.sh" "$build" "$tmp/readme_quickstart.c" "${3:-}" | tee "$tmp/out.log"
grep -qF -- "$want" "$tmp/out.log" || { echo "FAIL: the program did not print \"$want\""; exit 1; }
echo "PASS: the README's C quickstart compiles against the installed library and prints what it says"
