#!/usr/bin/env bash
# Installs feedline's build and test dependencies from Debian 12 packages.
# Idempotent and fast when everything is present: it asks dpkg first and only
# calls apt-get (update + install, non-interactive) for what is missing.
set -euo pipefail

PACKAGES=(
  build-essential   # g++ 12, make
  cmake             # build system (3.25 on Debian 12)
  pkg-config
  libgtest-dev      # unit tests
  libgmock-dev
  libbenchmark-dev  # bench/micro
  clang             # TSan/-Wthread-safety build and libFuzzer harnesses
  libclang-rt-14-dev
  clang-tidy        # make lint-cc (14, as clang): .clang-tidy over src/
  clang-format      # make lint-cc and make format: .clang-format
  libjpeg62-turbo-dev  # JPEG decode (crop + DCT scaling) and encode (dataset generator)
  libspng-dev          # PNG decode/encode with size and chunk limits
  libdeflate-dev       # the PNG fast path: whole-buffer inflate, 2-3x zlib's speed
  libwebp-dev          # WebP decode (still images)
  libtiff-dev          # TIFF decode from memory
  libgif-dev           # GIF decode (first frame)
  libhwy-dev           # Highway: the resampler's SIMD kernels, dispatched at run time (AVX2, AVX-512, NEON)
  nlohmann-json3-dev   # dataset manifests and JSON Lines pack inputs (header-only)
  libcurl4-openssl-dev # HTTP(S) range reads of remote datasets and S3 requests
  libssl-dev           # S3: SHA-256 and HMAC for SigV4 signing (OpenSSL, which libcurl uses too)
  libexpat1-dev        # S3: the XML of listings, errors and multipart answers
  ccache               # CI compiles six configurations of one tree: unchanged files come from the cache
  nginx                # the real HTTP server the remote-read tests start on 127.0.0.1
  # Python side: the reference (PIL/torchvision) tests and the peer benchmark.
  python3-dev          # the pybind11 extension
  pybind11-dev
  python3-numpy
  python3-pil
  python3-pytest
  python3-torch
  python3-torchvision
  libtorch-dev         # the libtorch C++ training example
  chromium             # headless render of the doctor's HTML report (tests/python/test_doctor_reports.py)
  libavdevice59        # `make bench-peers`: SPDL loads FFmpeg 5 (libavcodec59 ... libavdevice59) from Debian
  libavfilter8
)

missing=()
for pkg in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$pkg")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else
    echo "install-deps: need root (or sudo) to install: ${missing[*]}" >&2; exit 1
  fi
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
