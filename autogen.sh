#!/bin/sh
# Regenerates the build system; runs configure unless NOCONFIGURE is set.
set -e
srcdir=$(dirname "$0")
test -n "$srcdir" || srcdir=.
cd "$srcdir"
mkdir -p m4 build-aux
autoreconf --force --install --verbose
cd - >/dev/null
if [ -z "$NOCONFIGURE" ]; then
  exec "$srcdir/configure" "$@"
fi
