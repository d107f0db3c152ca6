#!/usr/bin/env bash
# Installs the build tree into a temporary prefix and checks what a user gets: the
# header, libstarling.so.0 exporting only starling_* symbols, the CMake package, the
# pkg-config file and starlingrun.  Usage: run_install_test.sh <build dir> <source dir>
set -euo pipefail
build=$1
src=$2
prefix=$(mktemp -d)
work=$(mktemp -d)
trap 'rm -rf "$prefix" "$work"' EXIT

cmake --install "$build" --prefix "$prefix" > /dev/null
libdir=$(dirname "$(find "$prefix" -name 'libstarling.so.0' -print -quit)")
test -f "$prefix/include/starling/starling.h"
test -x "$prefix/bin/starlingrun"

soname=$(objdump -p "$libdir/libstarling.so.0" | awk '/SONAME/ {print $2}')
[ "$soname" = "libstarling.so.0" ] || { echo "SONAME is '$soname'"; exit 1; }
leaked=$(nm -D --defined-only "$libdir/libstarling.so.0" | awk '{print $3}' | grep -v '^starling_' | grep -v '^STARLING_' || true)
[ -z "$leaked" ] || { echo "exported non-starling symbols:"; echo "$leaked" | head; exit 1; }

# CMake package.
cmake -S "$src/tests/install/consumer" -B "$work/cmake" -DCMAKE_PREFIX_PATH="$prefix" > /dev/null
cmake --build "$work/cmake" > /dev/null
LD_LIBRARY_PATH="$libdir" "$work/cmake/consumer"

# pkg-config.
PKG_CONFIG_PATH="$libdir/pkgconfig" cc -std=c99 "$src/tests/install/consumer/main.c" -o "$work/pc_consumer" \
  $(PKG_CONFIG_PATH="$libdir/pkgconfig" pkg-config --cflags --libs starling)
LD_LIBRARY_PATH="$libdir" "$work/pc_consumer"

# The installed launcher finds the installed library (RUNPATH) and runs.
"$prefix/bin/starlingrun" --version
echo "install test passed"
