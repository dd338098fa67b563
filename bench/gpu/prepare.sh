#!/usr/bin/env bash
# Prepares what bench/gpu/run.sh needs to build feedline on a machine that has
# a compiler, cmake, ninja, Python and torch but no network and no apt (the
# GPU machine). Runs HERE, on Debian 12 with apt:
#
#   bash bench/gpu/prepare.sh            # downloads into bench/gpu/debs, unpacks into bench/gpu/prefix
#   bash bench/gpu/prepare.sh --check    # also configures + builds feedline against the prefix only (-j1, in /tmp)
#
# The -dev packages of feedline's libraries (CMakeLists.txt: JPEG, spng via
# pkg-config, nlohmann_json, pybind11) and the shared libraries they
# need at run time, except glibc and libgcc, are fetched with
# `apt-get download` and unpacked with `dpkg-deb -x`: nothing is installed
# here. pkgconf comes too, for a machine without pkg-config. The .pc files
# are made relocatable (${pcfiledir}), docs and man pages are dropped, and
# prefix/MANIFEST.txt lists the packages and versions. Only bench/gpu/prefix
# travels (both folders are in .gitignore).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
DEBS="$HERE/debs"
PREFIX="$HERE/prefix"
MAX_PREFIX_MIB=40

# What the build reads: headers, link-time .so symlinks, .pc and CMake config files.
DEV_PACKAGES=(
  libjpeg62-turbo-dev   # find_package(JPEG)
  libspng-dev           # pkg_check_modules(spng)
  zlib1g-dev            # spng.pc: Requires.private: zlib
  libdeflate-dev        # pkg_check_modules(libdeflate): the PNG fast path
  nlohmann-json3-dev    # find_package(nlohmann_json 3) (header-only)
  pybind11-dev          # find_package(pybind11 CONFIG): fallback when the machine's pip pybind11 is absent
  pkgconf-bin           # pkg-config, for a machine without one
)
# Roots of the run-time closure (Depends and Pre-Depends, recursively).
# The GPU run builds with FEEDLINE_WITH_HTTP=OFF (it reads local disk), so
# libcurl and its TLS/LDAP/... chain (about 30 packages) stay behind.
RUNTIME_ROOTS=(libjpeg62-turbo libspng0 libdeflate0 libpkgconf3 zlib1g)
# Provided by every glibc system (and too tied to it to carry).
EXCLUDE='^(libc6|libgcc-s1|gcc-12-base|libstdc\+\+6|libcrypt1|debconf|dpkg|perl-base|libc-dev|libc6-dev)$'

CHECK=0
[ "${1:-}" = "--check" ] && CHECK=1

closure() {
  apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts --no-breaks \
    --no-replaces --no-enhances "$@" 2>/dev/null |
    grep -v '^ ' | grep -v '^<' | sort -u | grep -Ev "$EXCLUDE" || true
}

if ! command -v apt-get >/dev/null || ! command -v dpkg-deb >/dev/null; then
  echo "prepare.sh: needs apt-get and dpkg-deb (Debian 12)" >&2
  exit 1
fi
if ! apt-cache policy libspng0 2>/dev/null | grep Candidate | grep -qv none; then
  apt-get update -qq
fi

mapfile -t PACKAGES < <( { printf '%s\n' "${DEV_PACKAGES[@]}"; closure "${RUNTIME_ROOTS[@]}"; } | sort -u)
mkdir -p "$DEBS"
# Candidate versions, in one apt-cache call.
declare -A VERSION
while read -r pkg version; do VERSION[$pkg]="$version"; done < <(
  apt-cache policy "${PACKAGES[@]}" | awk '/^[^ ].*:$/ {p=substr($1, 1, length($1)-1)} /Candidate:/ {print p, $2}')
deb_of() {  # apt-get download names files NAME_VERSION_ARCH.deb, ':' written %3a
  ls "$DEBS/${1}_${VERSION[$1]//:/%3a}_"*.deb 2>/dev/null | head -1
}
missing=()
for pkg in "${PACKAGES[@]}"; do
  if [ -z "${VERSION[$pkg]:-}" ] || [ "${VERSION[$pkg]}" = "(none)" ]; then
    echo "prepare.sh: no candidate version for $pkg" >&2
    exit 1
  fi
  [ -n "$(deb_of "$pkg")" ] || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "prepare.sh: downloading ${#missing[@]} packages: ${missing[*]}"
  (cd "$DEBS" && apt-get download -qq -o APT::Sandbox::User=root "${missing[@]}")
fi

# Unpack afresh, so that the prefix holds exactly these packages.
rm -rf "$PREFIX"
mkdir -p "$PREFIX"
: >"$PREFIX/MANIFEST.txt"
for pkg in "${PACKAGES[@]}"; do
  deb="$(deb_of "$pkg")"
  dpkg-deb -x "$deb" "$PREFIX"
  echo "$pkg ${VERSION[$pkg]} $(basename "$deb")" >>"$PREFIX/MANIFEST.txt"
done
# Static archives: the build links the shared libraries.
find "$PREFIX" -name '*.a' -delete
rm -rf "${PREFIX:?}/usr/share/doc" "${PREFIX:?}/usr/share/man" "${PREFIX:?}/usr/share/info" \
       "${PREFIX:?}/usr/share/lintian" "${PREFIX:?}/usr/share/locale" "${PREFIX:?}/usr/share/bug" \
       "${PREFIX:?}/usr/share/doc-base" "${PREFIX:?}/etc"

# Relocatable .pc files: every absolute /usr becomes ${pcfiledir}/<relative>.
find "$PREFIX" -name '*.pc' -print0 | while IFS= read -r -d '' pc; do
  rel="$(realpath --relative-to="$(dirname "$pc")" "$PREFIX/usr")"
  sed -i -E "s#^prefix=/usr\$#prefix=\${pcfiledir}/$rel#; s#=/usr/#=\${prefix}/#" "$pc"
done

# Dangling absolute symlinks (e.g. into /usr/lib) would point at the host's files.
find "$PREFIX" -type l -lname '/*' -print0 | while IFS= read -r -d '' link; do
  target="$(readlink "$link")"
  if [ -e "$PREFIX$target" ]; then
    ln -sfn "$(realpath --relative-to="$(dirname "$link")" "$PREFIX$target")" "$link"
  else
    rm -f "$link"
  fi
done

# The tree's commit, for the report (the copy that travels has no .git).
( cd "$ROOT" && commit="$(git rev-parse --short HEAD 2>/dev/null || echo unknown)" &&
  if [ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]; then commit="$commit+changes"; fi &&
  echo "$commit" >"$PREFIX/COMMIT" )

size_kib="$(du -sk "$PREFIX" | cut -f1)"
echo "prepare.sh: ${#PACKAGES[@]} packages unpacked into ${PREFIX#"$ROOT"/} ($((size_kib / 1024)) MiB)"
if [ "$size_kib" -gt $((MAX_PREFIX_MIB * 1024)) ]; then
  echo "prepare.sh: the prefix is over ${MAX_PREFIX_MIB} MiB; it must travel within the 64 MiB limit" >&2
  exit 1
fi

if [ "$CHECK" = 1 ]; then
  # Builds what would travel (tracked and untracked-not-ignored files, plus the
  # prefix) in a copy under /tmp, as run.sh does there but with one job and
  # build-only; then shows which paths CMake picked for each dependency.
  CHECK_DIR="$(mktemp -d /tmp/feedline-gpu-check.XXXXXX)"
  echo "prepare.sh: --check: copying the tree to $CHECK_DIR/src and building there (-j1)"
  mkdir -p "$CHECK_DIR/src"
  (cd "$ROOT" && git ls-files -co --exclude-standard -z |
     while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done |
     xargs -0 cp --parents -t "$CHECK_DIR/src")
  cp -a "$PREFIX" "$CHECK_DIR/src/bench/gpu/prefix"
  FEEDLINE_GPU_BUILD_DIR="$CHECK_DIR/build" FEEDLINE_GPU_JOBS=1 FEEDLINE_GPU_BUILD_ONLY=1 \
    FEEDLINE_GPU_PYBIND11=prefix PYTHON="${PYTHON:-/usr/bin/python3}" bash "$CHECK_DIR/src/bench/gpu/run.sh"
  echo "prepare.sh: what CMake picked:"
  grep -E '^(JPEG_INCLUDE_DIR|JPEG_LIBRARY|nlohmann_json_DIR|pybind11_DIR|pybind11_INCLUDE_DIR|PKG_CONFIG_EXECUTABLE|SPNG_INCLUDE_DIRS|SPNG_LIBRARY_DIRS|SPNG_LINK_LIBRARIES|pkgcfg_lib_SPNG_spng|CMAKE_CXX_FLAGS|Python_EXECUTABLE)[:=]' \
    "$CHECK_DIR/build/CMakeCache.txt"
  if grep -E '^(JPEG_INCLUDE_DIR|JPEG_LIBRARY|nlohmann_json_DIR|pybind11_DIR|SPNG_LINK_LIBRARIES|pkgcfg_lib_SPNG_spng)[:A-Z]*=' \
       "$CHECK_DIR/build/CMakeCache.txt" | grep -v "=$CHECK_DIR/src/bench/gpu/prefix/"; then
    echo "prepare.sh: --check FAILED: the entries above do not point into the prefix" >&2
    exit 1
  fi
  echo "prepare.sh: --check passed (every dependency from the prefix); rm -rf $CHECK_DIR when done"
fi
