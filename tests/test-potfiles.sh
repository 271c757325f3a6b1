#!/bin/sh
# Every source file that marks strings for translation must be listed in
# po/POTFILES.in, or its strings never reach mcp-pool.pot and the catalogs.
# Also fails when POTFILES.in names a file that no longer exists.
#
# Whether "LANGUAGE=de mcp-pool --help" really prints German is not checked
# here: mcp-pool looks for its catalogs under the configured localedir, so
# that check needs de.gmo installed (or LOCALEDIR pointing into the build
# tree), which "make check" does not have.  Check it by hand after
# "make install".

# G_TEST_SRCDIR is $(abs_top_srcdir)/tests (see AM_TESTS_ENVIRONMENT).
if test -n "$G_TEST_SRCDIR"; then
  top_srcdir=$G_TEST_SRCDIR/..
else
  top_srcdir=$(dirname "$0")/..
fi
cd "$top_srcdir" || exit 99

potfiles=po/POTFILES.in
if test ! -f "$potfiles"; then
  echo "$potfiles not found under $top_srcdir" >&2
  exit 99
fi
if test ! -d src; then
  echo "src/ not found under $top_srcdir" >&2
  exit 99
fi

# The listed paths, without comments and blank lines.
listed=$(sed -e 's/#.*//' -e 's/[ 	]*$//' -e '/^$/d' "$potfiles")

status=0
checked=0
for file in $(find src -name '*.c' | LC_ALL=C sort); do
  # _(" also matches N_(" and C_("; g_dngettext carries the plural strings.
  if grep -q -F -e '_("' -e 'g_dngettext (' "$file"; then
    checked=$((checked + 1))
    if ! printf '%s\n' "$listed" | grep -q -x -F -e "$file"; then
      echo "FAIL: $file has translatable strings but is missing from $potfiles" >&2
      status=1
    fi
  fi
done

for file in $listed; do
  if test ! -f "$file"; then
    echo "FAIL: $potfiles lists $file, which does not exist" >&2
    status=1
  fi
done

if test "$status" -eq 0; then
  echo "PASS: all $checked source files with translatable strings are in $potfiles"
fi
exit $status
