#!/usr/bin/env bash
# Builds the documentation into build/docs/html (open build/docs/html/index.html) and
# checks it: Sphinx with warnings as errors (broken cross-references, undocumented C
# declarations, Python objects and exported Julia names without docstrings), javadoc
# (doclint errors and public items without a comment fail it), and
# docs/tools/check_snippets.py, which runs every program the pages show at the rank
# counts it names.
#   bash packaging/docs.sh              install what is missing, build Starling, build and check the docs
#   bash packaging/docs.sh --no-build   use the existing build tree (ctest's docs test)
#   bash packaging/docs.sh --no-run     build the pages only, run no snippet
# STARLING_BUILD_DIR: the build tree (default build).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${STARLING_BUILD_DIR:-build}
build=1 run=1
for arg in "$@"; do
  case "$arg" in
    --no-build) build=0 ;;
    --no-run) run=0 ;;
    *) echo "usage: $0 [--no-build] [--no-run]" >&2; exit 2 ;;
  esac
done
if [ "$build" = 1 ]; then
  bash packaging/build.sh
fi
if ! /usr/bin/python3 -c "import sphinx, myst_parser" 2>/dev/null; then
  echo "docs: Sphinx or MyST is missing (packaging/install-deps.sh installs python3-sphinx and python3-myst-parser)" >&2
  [ "${CI:-}" = "true" ] && exit 1
  exit 77
fi
export STARLING_BUILD_DIR=$(cd "$BUILD" && pwd)
OUT=$STARLING_BUILD_DIR/docs
start=$SECONDS
rm -rf "$OUT/html"
# -E: read every source again (a cached environment would hide the warnings of docstrings
# that changed without their page changing).
/usr/bin/python3 -m sphinx -E -W --keep-going -n -q -b html -d "$OUT/doctrees" docs "$OUT/html"
echo "docs: Sphinx built $OUT/html in $((SECONDS - start)) s"

# The Java reference: javadoc of org.starling. Doclint's errors (syntax, HTML, broken
# references) fail it, and so does a public item without a comment; missing @param and
# @return tags are tolerated (the one-line comments name the arguments).
t=$SECONDS
javadoc -quiet -Xdoclint:all -Xmaxwarns 100000 -d "$OUT/html/java" -sourcepath bindings/java/src \
  -cp "$STARLING_BUILD_DIR/bindings/java/starling.jar" -exclude org.starling.internal \
  -windowtitle "Starling Java API" -subpackages org.starling > "$OUT/javadoc.log" 2>&1 \
  || { cat "$OUT/javadoc.log"; echo "docs: javadoc failed" >&2; exit 1; }
if grep -q "warning: no comment" "$OUT/javadoc.log"; then
  grep -A1 "warning: no comment" "$OUT/javadoc.log"
  echo "docs: public Java items without a comment (above)" >&2
  exit 1
fi
echo "docs: javadoc in $((SECONDS - t)) s"

t=$SECONDS
if [ "$run" = 1 ]; then
  /usr/bin/python3 docs/tools/check_snippets.py --build-dir "$STARLING_BUILD_DIR"
else
  /usr/bin/python3 docs/tools/check_snippets.py --build-dir "$STARLING_BUILD_DIR" --no-run
fi
echo "docs: snippets checked in $((SECONDS - t)) s; total $((SECONDS - start)) s"
echo "docs: open $OUT/html/index.html"
