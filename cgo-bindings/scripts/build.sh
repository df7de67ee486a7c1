#!/bin/sh
# build.sh [OUTDIR] builds libsimba.so, installs the public header simba.h
# and writes the pkg-config file simba.pc into OUTDIR (default: build, next
# to this module's go.mod). Needs Go and a C compiler; idempotent.
#
#   cc example.c $(PKG_CONFIG_PATH=OUTDIR pkg-config --cflags --libs simba)
set -eu
here=$(cd "$(dirname "$0")/.." && pwd -P)
out=${1:-$here/build}
mkdir -p "$out"
out=$(cd "$out" && pwd -P)
cd "$here"
# Only the functions of simba.h leave the library (libsimba.map).
${GO:-go} build -buildmode=c-shared -trimpath -ldflags="-extldflags=-Wl,--version-script=$here/libsimba.map" -o "$out/libsimba.so" .
# cgo's generated header is replaced by the documented one.
rm -f "$out/libsimba.h"
cp include/simba.h "$out/simba.h"
version=$(sed -n 's/^#define SIMBA_VERSION "\(.*\)"$/\1/p' include/simba.h)
cat >"$out/simba.pc" <<PC
prefix=$out
libdir=\${prefix}
includedir=\${prefix}

Name: simba
Description: Leader election and distributed locks (Simba for Go, C API)
Version: $version
Libs: -L\${libdir} -Wl,-rpath,\${libdir} -lsimba
Libs.private: -lpthread
Cflags: -I\${includedir}
PC
echo "built $out/libsimba.so, $out/simba.h, $out/simba.pc"
