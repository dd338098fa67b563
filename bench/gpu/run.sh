#!/usr/bin/env bash
# The GPU run (issue 8, item 3), on a machine with an NVIDIA GPU, many cores,
# a compiler, cmake, ninja, python3 with torch + torchvision, and no network or
# apt. Run from the repository root, with bench/gpu/prefix carried along
# (made here by bench/gpu/prepare.sh):
#
#   bash bench/gpu/run.sh
#
# 1. builds feedline (CLI + Python extension; no tests, benchmarks, fuzzers or
#    libtorch example) against the carried prefix and the machine's python3;
# 2. generates the ImageNet-like dataset on local disk;
# 3. runs bench/gpu/train_bench.py: ResNet-50 and ResNet-18 fed by torch's
#    DataLoader and by feedline, and the device checksum test (RELIABILITY 31).
# Results: bench/results/gpu_<date>.{json,md}, and into $OUT when it is set.
# The whole run keeps within FEEDLINE_GPU_BUDGET_S (default 450 s: the call
# must finish in under 8 minutes).
#
# Knobs (environment): PYTHON (python3), FEEDLINE_GPU_IMAGES (32768),
# FEEDLINE_GPU_DATA (bench/data/gpu-imagenet-like-N), FEEDLINE_GPU_BUILD_DIR
# (build-gpu), FEEDLINE_GPU_JOBS (nproc), FEEDLINE_GPU_PYBIND11 (auto: the
# machine's pip pybind11 if any, else the prefix's; or 'prefix'),
# FEEDLINE_GPU_BUILD_ONLY=1 (stop after the build and its load test: what
# prepare.sh --check uses), FEEDLINE_GPU_BENCH_ARGS (extra train_bench.py
# arguments, e.g. "--checksum-batches 2000").
set -euo pipefail

START=$(date +%s)
BUDGET_S=${FEEDLINE_GPU_BUDGET_S:-450}
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
cd "$ROOT"

PY="${PYTHON:-python3}"
PY="$(command -v "$PY")"
PREFIX="$HERE/prefix/usr"
ARCH_TRIPLET=x86_64-linux-gnu
LIBDIR="$PREFIX/lib/$ARCH_TRIPLET"
BUILD="${FEEDLINE_GPU_BUILD_DIR:-$ROOT/build-gpu}"
JOBS="${FEEDLINE_GPU_JOBS:-$(nproc)}"
IMAGES="${FEEDLINE_GPU_IMAGES:-32768}"
DATA="${FEEDLINE_GPU_DATA:-$ROOT/bench/data/gpu-imagenet-like-$IMAGES}"

elapsed() { echo $(($(date +%s) - START)); }
log() { echo "[run.sh +$(elapsed)s] $*"; }
die() { echo "[run.sh +$(elapsed)s] ERROR: $*" >&2; exit 1; }

# --- what this machine is --------------------------------------------------
log "machine: $(uname -srm), $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo)"
[ -r /etc/os-release ] && log "os: $(. /etc/os-release; echo "${PRETTY_NAME:-?}")"
GLIBC="$(getconf GNU_LIBC_VERSION 2>/dev/null | awk '{print $2}')"
log "glibc: ${GLIBC:-?}; python: $PY ($("$PY" -c 'import sys; print(sys.version.split()[0])'))"
# The DataLoader's workers hand batches over through /dev/shm (16 workers x 2
# batches of 154 MB in flight): a small one makes the torch runs fail.
log "/dev/shm: $(df -h /dev/shm 2>/dev/null | awk 'NR == 2 {print $2 " total, " $4 " free"}')"
command -v nvidia-smi >/dev/null && log "gpu: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -1)"
log "cmake: $(cmake --version | head -1); ninja: $(ninja --version 2>/dev/null || echo none); c++: $(c++ --version 2>/dev/null | head -1 || echo none)"

[ -d "$LIBDIR" ] || die "no $LIBDIR: run 'bash bench/gpu/prepare.sh' on a Debian 12 machine and carry bench/gpu/prefix"
if [ -n "$GLIBC" ] && [ "$(printf '%s\n2.34\n' "$GLIBC" | sort -V | head -1)" != "2.34" ]; then
  log "warning: glibc $GLIBC is older than 2.34, which the carried Debian 12 libraries need"
fi
PY_INCLUDE="$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')"
[ -f "$PY_INCLUDE/Python.h" ] || die "no Python.h in $PY_INCLUDE: the extension cannot be built with $PY"

# --- pkg-config: the machine's, else the carried pkgconf -------------------
TOOLS="$BUILD/gpu-tools"
mkdir -p "$TOOLS"
if command -v pkg-config >/dev/null; then
  PKG_CONFIG="$(command -v pkg-config)"
else
  PKG_CONFIG="$TOOLS/pkg-config"
  printf '#!/bin/sh\nLD_LIBRARY_PATH="%s${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" exec "%s" "$@"\n' \
    "$LIBDIR" "$PREFIX/bin/pkgconf" >"$PKG_CONFIG"
  chmod +x "$PKG_CONFIG"
  log "pkg-config: none on this machine, using the carried pkgconf"
fi
# Only the prefix's .pc files: what CMake finds through pkg-config is carried.
export PKG_CONFIG_LIBDIR="$LIBDIR/pkgconfig:$PREFIX/share/pkgconfig"
unset PKG_CONFIG_PATH

# --- pybind11: the machine's pip package knows its Python best --------------
PYBIND11_DIR=""
if [ "${FEEDLINE_GPU_PYBIND11:-auto}" = auto ]; then
  PYBIND11_DIR="$("$PY" -m pybind11 --cmakedir 2>/dev/null || true)"
fi
[ -n "$PYBIND11_DIR" ] || PYBIND11_DIR="$PREFIX/lib/cmake/pybind11"
log "pybind11: $PYBIND11_DIR"

# --- run-time libraries: the carried ones this machine lacks ----------------
# The binaries find libjpeg and libspng in the prefix through their build
# RUNPATH (HTTP is left out of this build: no libcurl). What those need comes
# from the system where it has the soname, else from RUNTIME_LIBS, which holds
# links to the carried copies of the missing ones only: the carried libssl,
# libz, ... never displace the system's inside the torch process.
RUNTIME_LIBS="$BUILD/gpu-runtime-libs"
rm -rf "$RUNTIME_LIBS"
mkdir -p "$RUNTIME_LIBS"
have_sonames="$(ldconfig -p 2>/dev/null | awk 'NR > 1 {print $1}' | sort -u || true)"
soname_of() {  # the SONAME (what DT_NEEDED asks for); without readelf, guessed from the name
  local name
  name="$(readelf -d "$1" 2>/dev/null | sed -n 's/.*(SONAME).*\[\(.*\)\].*/\1/p')"
  if [ -z "$name" ] && ! command -v readelf >/dev/null; then
    name="$(basename "$1" | sed -E 's/^([^.]+(-[0-9.]+)?\.so(\.[0-9]+)?).*/\1/')"
  fi
  echo "$name"
}
for lib in "$LIBDIR"/*.so*; do
  [ -f "$lib" ] && [ ! -L "$lib" ] || continue
  soname="$(soname_of "$lib")"
  [ -n "$soname" ] && [ -e "$LIBDIR/$soname" ] || continue
  if ! grep -qxF "$soname" <<<"$have_sonames"; then
    ln -sfn "$LIBDIR/$soname" "$RUNTIME_LIBS/$soname"
  fi
done
log "carried libraries this machine lacks: $(ls "$RUNTIME_LIBS" | tr '\n' ' ')"
export LD_LIBRARY_PATH="$RUNTIME_LIBS${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

# --- build --------------------------------------------------------------------
GENERATOR=()
command -v ninja >/dev/null && GENERATOR=(-G Ninja)
if [ -f "$BUILD/CMakeCache.txt" ] && ! grep -q "^CMAKE_GENERATOR:INTERNAL=${GENERATOR[1]:-Unix Makefiles}\$" "$BUILD/CMakeCache.txt"; then
  rm -f "$BUILD/CMakeCache.txt"
fi
log "configuring in $BUILD"
cmake -S "$ROOT" -B "$BUILD" "${GENERATOR[@]}" -Wno-dev \
  -DCMAKE_BUILD_TYPE=Release \
  -DFEEDLINE_BUILD_TESTS=OFF -DFEEDLINE_BUILD_BENCH=OFF -DFEEDLINE_BUILD_FUZZ=OFF \
  -DFEEDLINE_BUILD_LIBTORCH_EXAMPLE=OFF -DFEEDLINE_BUILD_PYTHON=ON \
  -DPython_EXECUTABLE="$PY" \
  -DPKG_CONFIG_EXECUTABLE="$PKG_CONFIG" \
  -DJPEG_INCLUDE_DIR="$PREFIX/include" -DJPEG_LIBRARY="$LIBDIR/libjpeg.so" \
  -DFEEDLINE_WITH_HTTP=OFF \
  -Dnlohmann_json_DIR="$PREFIX/share/cmake/nlohmann_json" \
  -Dpybind11_DIR="$PYBIND11_DIR" \
  -DCMAKE_CXX_FLAGS="-isystem $PREFIX/include/$ARCH_TRIPLET" \
  -DCMAKE_POLICY_VERSION_MINIMUM=3.5 \
  >"$BUILD/gpu-configure.log" 2>&1 || { cat "$BUILD/gpu-configure.log"; die "cmake configure failed"; }
log "building with $JOBS jobs"
cmake --build "$BUILD" -j "$JOBS" >"$BUILD/gpu-build.log" 2>&1 \
  || { tail -60 "$BUILD/gpu-build.log"; die "build failed (log: $BUILD/gpu-build.log)"; }
log "built"

FEEDLINE_BIN="$BUILD/tools/feedline"
export FEEDLINE_BIN
export PYTHONPATH="$BUILD/python${PYTHONPATH:+:$PYTHONPATH}"
load_test() {
  "$FEEDLINE_BIN" gen-dataset "$BUILD/gpu-load-test" --images 2 --classes 1 >/dev/null &&
    "$PY" -c 'import torch, feedline; print("feedline imports with torch", torch.__version__)'
}
if ! load_test; then
  # Fall back to every carried library, in case a system one is too old.
  log "load test failed with the system's libraries first; retrying with every carried library"
  export LD_LIBRARY_PATH="$LIBDIR:$LD_LIBRARY_PATH"
  load_test || { ldd "$FEEDLINE_BIN" "$BUILD"/python/feedline/_C*.so || true; die "feedline does not load"; }
fi
rm -rf "$BUILD/gpu-load-test"
log "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
if [ "${FEEDLINE_GPU_BUILD_ONLY:-0}" = 1 ]; then
  ldd "$FEEDLINE_BIN" | grep -E 'jpeg|spng' || true
  log "build only: done"
  exit 0
fi

# --- dataset ------------------------------------------------------------------
if [ -f "$DATA.complete" ] && [ "$(cat "$DATA.complete")" = "$IMAGES" ]; then
  log "dataset: reusing $DATA"
else
  rm -rf "$DATA" "$DATA.complete"
  log "dataset: generating $IMAGES images in 100 classes into $DATA"
  "$FEEDLINE_BIN" gen-dataset "$DATA" --images "$IMAGES" --classes 100
  echo "$IMAGES" >"$DATA.complete"
fi
log "dataset ready ($(du -sh "$DATA" | cut -f1))"

# --- device tests (tests/python/test_device.py: device bytes == host bytes) -----
if "$PY" -c "import pytest" 2>/dev/null; then
  log "device tests"
  FEEDLINE_BIN="$FEEDLINE_BIN" timeout 90 "$PY" -m pytest -q -p no:cacheprovider \
    "$HERE/../../tests/python/test_device.py" 2>&1 | tail -5 || log "device tests FAILED"
else
  log "device tests skipped: no pytest in this Python"
fi

# --- benchmark ------------------------------------------------------------------
LEFT=$((BUDGET_S - $(elapsed)))
[ "$LEFT" -gt 60 ] || die "only ${LEFT}s left of the ${BUDGET_S}s budget for the benchmark"
log "train_bench.py with ${LEFT}s left"
# shellcheck disable=SC2086
PYTHONUNBUFFERED=1 timeout --kill-after=10 "$LEFT" "$PY" "$HERE/train_bench.py" --data "$DATA" \
  --deadline-s $((LEFT - 5)) ${FEEDLINE_GPU_BENCH_ARGS:-}
log "done"
