#!/usr/bin/env bash
# Build a wheelhouse for an airgapped install (run on a connected machine with the same OS and Python
# as the target):
#   bash scripts/wheelhouse.sh DIR                 # every wheel the default install needs
#   bash scripts/wheelhouse.sh DIR --extras dev    # plus extras (torch, dev, milvus, zim)
#   bash scripts/wheelhouse.sh DIR --baseline x86-64-v2   # llama.cpp for CPUs without AVX2 (slower)
# then on the airgapped machine:  bash scripts/setup.sh --offline DIR
#
# llama-cpp-python ships only as source on PyPI and pip's own build uses -march=native, so a wheel
# from pip's cache may die with "illegal instruction" on another CPU. This script compiles it
# portably (GGML_NATIVE=OFF plus an explicit instruction-set baseline, below), stamps how it was
# built into the wheel's .dist-info (`deepresearch doctor` reports it), and keeps it in
# $DEEPRESEARCH_WHEEL_CACHE (default ~/.cache/deepresearch/wheels), keyed by version, baseline,
# Python and platform: only the first build on a machine compiles (~10 min on 2 cores).
# pip's wheel cache is keyed by the sdist, not by CMAKE_ARGS, so the build runs with
# --no-cache-dir: a cached native wheel is never reused as the portable one, nor the reverse.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PY=${PYTHON:-python3}
LLAMA_VERSION=${LLAMA_CPP_PYTHON_VERSION:-0.3.36}  # the release the project is tested with
TORCH_PIN="torch==2.13.0"                             # CPU build, as in setup.sh (only if an extra pulls torch)

usage() { echo "usage: bash scripts/wheelhouse.sh DIR [--extras LIST] [--baseline x86-64-v3|x86-64-v2]" >&2; exit 1; }
[ $# -ge 1 ] || usage
DIR=$1; shift
EXTRAS=""
BASELINE=""
while [ $# -gt 0 ]; do
  case "$1" in
    --extras) EXTRAS=${2:?}; shift 2 ;;
    --baseline) BASELINE=${2:?}; shift 2 ;;
    *) usage ;;
  esac
done

# Instruction-set baselines. x86-64-v3 = AVX2+FMA+F16C+BMI2 (Intel Haswell 2013+, AMD Zen/Excavator+):
# llama.cpp's fast kernels need AVX2. x86-64-v2 = SSE4.2 only, for older or Atom-class CPUs.
case "$(uname -m)" in
  x86_64|amd64)
    BASELINE=${BASELINE:-x86-64-v3}
    case "$BASELINE" in
      x86-64-v3) ISA="-DGGML_SSE42=ON -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON" ;;
      x86-64-v2) ISA="-DGGML_SSE42=ON -DGGML_AVX=OFF -DGGML_AVX2=OFF -DGGML_FMA=OFF -DGGML_F16C=OFF -DGGML_BMI2=OFF" ;;
      *) echo "Error: unknown --baseline $BASELINE; use x86-64-v3 or x86-64-v2" >&2; exit 1 ;;
    esac
    ISA="$ISA -DGGML_AVX_VNNI=OFF -DGGML_AVX512=OFF -DGGML_AVX512_VBMI=OFF -DGGML_AVX512_VNNI=OFF -DGGML_AVX512_BF16=OFF"
    ;;
  *) BASELINE=${BASELINE:-generic}; ISA="" ;;  # e.g. arm64: the compiler's default target
esac
LLAMA_CMAKE_ARGS="-DGGML_NATIVE=OFF $ISA"

mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd)
if [ -n "$(ls -A "$DIR")" ] && [ ! -f "$DIR/MANIFEST.json" ]; then
  echo "Error: $DIR is not empty and holds no wheelhouse; pass an empty or new folder" >&2
  exit 1
fi
rm -f "$DIR"/*.whl "$DIR/MANIFEST.json" "$DIR/requirements.txt"  # rebuilding: drop the old set

TAG=$("$PY" -c 'import sys, sysconfig; print(sys.implementation.cache_tag + "-" + sysconfig.get_platform())')
CACHE=${DEEPRESEARCH_WHEEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/deepresearch/wheels}
SLOT="$CACHE/llama-cpp-python-$LLAMA_VERSION-$BASELINE-$TAG"
start=$(date +%s)

if ! ls "$SLOT"/llama_cpp_python-*.whl >/dev/null 2>&1; then
  echo "building llama-cpp-python $LLAMA_VERSION portably ($BASELINE): CMAKE_ARGS=$LLAMA_CMAKE_ARGS"
  BUILD=$(mktemp -d)
  trap 'rm -rf "$BUILD"' EXIT
  CMAKE_ARGS="$LLAMA_CMAKE_ARGS" \
  CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc 2>/dev/null || echo 2)} \
    "$PY" -m pip wheel --no-deps --no-cache-dir --no-binary llama-cpp-python \
      -w "$BUILD" "llama-cpp-python==$LLAMA_VERSION"
  WHEEL=$(ls "$BUILD"/llama_cpp_python-*.whl)
  "$PY" scripts/wheelhouse.py record "$WHEEL" --kind portable --baseline "$BASELINE" \
    --cmake-args="$LLAMA_CMAKE_ARGS" --compiler "$(cc --version 2>/dev/null | head -1)"
  mkdir -p "$SLOT"
  mv "$WHEEL" "$SLOT/"
fi
cp "$SLOT"/llama_cpp_python-*.whl "$DIR/"
LLAMA_WHEEL=$(basename "$(ls "$DIR"/llama_cpp_python-*.whl)")

# The project's wheel, built from a clean copy of its sources: an in-tree build would reuse a stale
# build/ folder (and could carry modules deleted since).
SRC=$(mktemp -d)
tar -C "$ROOT" --exclude=__pycache__ -cf - pyproject.toml README.md deepresearch | tar -C "$SRC" -xf -
"$PY" -m pip wheel -q --no-deps -w "$DIR" "$SRC"
rm -rf "$SRC"
PROJECT_WHEEL=$(ls "$DIR"/deepresearch-*.whl)

# Every dependency as a wheel. The constraints keep pip on the portable llama wheel just copied (not
# a newer sdist) and on the CPU torch if an extra pulls torch.
CONSTRAINTS=$(mktemp)
printf 'llama-cpp-python==%s\n%s\n' "$LLAMA_VERSION" "$TORCH_PIN" > "$CONSTRAINTS"
TARGET="$PROJECT_WHEEL"
[ -n "$EXTRAS" ] && TARGET="$PROJECT_WHEEL[$EXTRAS]"
"$PY" -m pip wheel -q -w "$DIR" --find-links "$DIR" -c "$CONSTRAINTS" "$TARGET"
rm -f "$CONSTRAINTS"

# pip must have kept the portable wheel, not swapped in a build of its own.
if [ "$(ls "$DIR"/llama_cpp_python-*.whl | wc -l)" != 1 ] \
   || ! cmp -s "$DIR/$LLAMA_WHEEL" "$(ls "$SLOT"/llama_cpp_python-*.whl)"; then
  echo "Error: the llama-cpp-python wheel in $DIR is not the portable build from $SLOT" >&2
  exit 1
fi
"$PY" scripts/wheelhouse.py manifest "$DIR" --extras "$EXTRAS" --llama-wheel "$LLAMA_WHEEL"
echo "built in $(( $(date +%s) - start )) s; install offline with: bash scripts/setup.sh --offline $DIR"
