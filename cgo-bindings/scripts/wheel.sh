#!/bin/sh
# wheel.sh [OUTDIR] builds the wheel of the Python package with libsimba.so
# inside it, OUTDIR/simba-VERSION-py3-none-PLATFORM.whl (default OUTDIR:
# build, next to this module's go.mod), offline: it calls setuptools' build
# backend directly, with no pip and no package index. Needs what build.sh
# needs, and a python3 with setuptools and wheel (Debian: python3-setuptools,
# python3-wheel). Idempotent.
#
#   LIBSIMBA=path/libsimba.so  put that library in the wheel instead of
#                              building one into OUTDIR with build.sh
#   PYTHON=python3.11          the interpreter that builds (default: the
#                              first of python3, /usr/bin/python3 that can)
#
# The wheel installs into any venv of the platform, with no network:
#   python3 -m venv VENV && VENV/bin/python -m pip install --no-index OUTDIR/simba-*.whl
set -eu
here=$(cd "$(dirname "$0")/.." && pwd -P)
out=${1:-$here/build}
mkdir -p "$out"
out=$(cd "$out" && pwd -P)
if [ -z "${LIBSIMBA:-}" ]; then
	sh "$here/scripts/build.sh" "$out"
	LIBSIMBA=$out/libsimba.so
fi
if [ ! -f "$LIBSIMBA" ]; then
	echo "wheel.sh: $LIBSIMBA does not exist" >&2
	exit 1
fi

# setuptools 70.1 and later has bdist_wheel itself; older ones need wheel.
can_build='
import setuptools.build_meta
try:
    import setuptools.command.bdist_wheel
except ImportError:
    import wheel.bdist_wheel
'
py=
for c in ${PYTHON:-python3 /usr/bin/python3}; do
	if command -v "$c" >/dev/null 2>&1 && "$c" -c "$can_build" 2>/dev/null; then
		py=$c
		break
	fi
done
if [ -z "$py" ]; then
	echo "wheel.sh: no ${PYTHON:-python3} with setuptools and wheel (Debian: apt-get install python3-setuptools python3-wheel)" >&2
	exit 1
fi

# The build runs on a copy of the package, so that neither the library nor
# setuptools' build files land in the source tree.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
src=$here/python
mkdir -p "$tmp/src/simba" "$tmp/dist"
cp "$src/pyproject.toml" "$src/setup.py" "$src/README.md" "$tmp/src/"
cp "$src"/simba/*.py "$src/simba/py.typed" "$tmp/src/simba/"
cp "$LIBSIMBA" "$tmp/src/simba/libsimba.so"
if ! (cd "$tmp/src" && "$py" -c 'import sys, setuptools.build_meta as b; b.build_wheel(sys.argv[1])' "$tmp/dist") >"$tmp/log" 2>&1; then
	cat "$tmp/log" >&2
	echo "wheel.sh: the build of the wheel failed (above: setuptools' output)" >&2
	exit 1
fi
set -- "$tmp"/dist/*.whl
if [ $# -ne 1 ] || [ ! -f "$1" ]; then
	echo "wheel.sh: expected one wheel in $tmp/dist, found: $*" >&2
	exit 1
fi
case ${1##*/} in
*-py3-none-any.whl)
	echo "wheel.sh: ${1##*/} is tagged pure Python, but it carries libsimba.so" >&2
	exit 1
	;;
esac
mv -f "$1" "$out/"
echo "built $out/${1##*/}"
