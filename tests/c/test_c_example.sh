#!/usr/bin/env bash
# test_c_example.sh BUILD_DIR EXAMPLE_C [B_SANITIZE]
#
# Installs the build into a temporary DESTDIR, then compiles the C example
# against the *installed* header and library, with flags from the installed
# pylayout.pc only (no source-tree include paths), and runs it.  Fails if any
# step fails.  B_SANITIZE is meson's b_sanitize value ("[]", "none",
# "['address', 'undefined']", "address,undefined"): a sanitized libpylayout
# needs the example built with the same sanitizers.
set -euo pipefail

build=${1:?usage: test_c_example.sh BUILD_DIR EXAMPLE_C [B_SANITIZE]}
example=${2:?usage: test_c_example.sh BUILD_DIR EXAMPLE_C [B_SANITIZE]}
sanitize=$(printf '%s' "${3:-}" | tr -d "[]' ")
[ "$sanitize" = none ] && sanitize=

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
destdir=$tmp/destdir

echo "== meson install --destdir $destdir"
meson install -C "$build" --no-rebuild --quiet --destdir "$destdir" >"$tmp/install.log" 2>&1 ||
    { cat "$tmp/install.log"; echo "FAIL: meson install"; exit 1; }

pc=$(find "$destdir" -name pylayout.pc -path '*/pkgconfig/*' | head -n 1)
[ -n "$pc" ] || { echo "FAIL: no pylayout.pc installed"; find "$destdir"; exit 1; }
echo "== $pc"
cat "$pc"

# The .pc names the real prefix; point it into DESTDIR.
prefix=$(PKG_CONFIG_PATH= pkg-config --dont-define-prefix --variable=prefix "$pc")
pkgconf() {
    PKG_CONFIG_PATH=$(dirname "$pc") PKG_CONFIG_LIBDIR=$(dirname "$pc") \
        pkg-config --dont-define-prefix --define-variable=prefix="$destdir$prefix" "$@" pylayout
}
cflags=$(pkgconf --cflags)
libs=$(pkgconf --libs)
libdir=$(pkgconf --variable=libdir)
includedir=$(pkgconf --variable=includedir)
echo "cflags: $cflags"
echo "libs:   $libs"

[ -f "$includedir/pylayout.h" ] || { echo "FAIL: $includedir/pylayout.h not installed"; exit 1; }
[ -f "$includedir/pylayout/dlpack.h" ] || { echo "FAIL: $includedir/pylayout/dlpack.h not installed"; exit 1; }
ls "$libdir"/libpylayout.so* >/dev/null 2>&1 || { echo "FAIL: no libpylayout.so in $libdir"; exit 1; }
case " $cflags " in
*" -I$includedir "*) ;;
*) echo "FAIL: pkg-config --cflags does not name $includedir"; exit 1 ;;
esac

san_flags=()
[ -n "$sanitize" ] && san_flags=("-fsanitize=$sanitize")
cc=${CC:-cc}
echo "== $cc -std=c11 -Wall -Wextra -Werror ${san_flags[*]} $example $cflags $libs"
# shellcheck disable=SC2086  # pkg-config output is a list of words
"$cc" -std=c11 -Wall -Wextra -Werror "${san_flags[@]}" -o "$tmp/to_channels_last" "$example" $cflags $libs

echo "== run (LD_LIBRARY_PATH=$libdir)"
LD_LIBRARY_PATH=$libdir "$tmp/to_channels_last"

# The binary must have used the installed library, not the build tree's.
resolved=$(LD_LIBRARY_PATH=$libdir ldd "$tmp/to_channels_last" | awk '/libpylayout/ {print $3}')
case "$resolved" in
"$destdir"/*) echo "libpylayout resolved to $resolved" ;;
*) echo "FAIL: libpylayout resolved to '$resolved', not into $destdir"; exit 1 ;;
esac
echo "PASS"
