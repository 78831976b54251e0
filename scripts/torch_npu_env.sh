#!/usr/bin/env bash
# Prepares the Python environment the torch_npu suite (tests/torch_npu) runs in, once, and
# prints its directory on stdout. Shared by every checkout of the machine and reused between
# runs: a stamp file records what was installed, and an environment with the right stamp is
# used as it is.
#
#   scripts/torch_npu_env.sh           prepare (when needed), print the directory
#   scripts/torch_npu_env.sh --check   print the directory if it is prepared, else fail
#
#   BRAID_TORCH_NPU_VENV   where the environment lives
#                          (default: ${XDG_CACHE_HOME:-$HOME/.cache}/braid/torch-npu-venv;
#                          never inside the repository: it is about 5.8 GB)
#   BRAID_PYTHON           the interpreter to build it from (default: python3.11; the
#                          torch_npu 2.14.0 wheel is cp311)
#
# Runs at once share it safely through a lock file beside it ($BRAID_TORCH_NPU_VENV.lock):
# preparing takes it exclusively, so a second run waits instead of building over the first;
# a run that uses the environment holds it shared (scripts/torch_npu_tests.sh does, for its
# whole run), so nothing is changed under a running suite. An environment whose stamp differs
# (an older requirement list) is brought up to date in place with pip; it is removed and made
# anew only when its making never finished (no stamp), and then only if it is a virtual
# environment or empty: any other directory is refused, naming it.
#
# What is installed and why:
# - torch==2.14.0 and torch-npu==2.14.0 from the package registry, unmodified. torch_npu 2.14.0
#   requires torch 2.14.0, and the registry's torch 2.14.0 for x86_64 is the CUDA build: it does
#   not import without its nvidia-* dependencies (libcudart, cuBLAS...), so they are installed
#   too, although no GPU is used. They are most of the size.
# - transformers 5.x and safetensors: real models on torch_npu, and braid's own Llama decoder
#   checked against transformers.
# - pytest and numpy for the suite; setuptools to build braid-acl-sim's wheel
#   (python/braid-acl-sim, built without build isolation so that no run downloads anything).
# The allocator-key clash between torch's CUDA library and torch_npu (both register
# 'pinned_reserve_segment_size_mb' and friends in c10's one key set, and torch_npu aborts on the
# duplicate) is not patched here: braid-acl-sim's wheel resolves it in the processes its
# command starts (`braid-acl-sim run`), as a CPU-only torch build (not on the registry) would
# not have it.
set -euo pipefail

requirements=(
    torch==2.14.0
    torch-npu==2.14.0
    "transformers>=5,<6"
    safetensors
    pytest
    numpy
    "setuptools>=77"
)
stamp_text=$(printf '%s\n' "${requirements[@]}")

venv=${BRAID_TORCH_NPU_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/braid/torch-npu-venv}
python=${BRAID_PYTHON:-python3.11}
stamp="$venv/.braid-requirements"
# What versions of this script before the lock wrote: an environment with it was finished.
old_stamp="$venv/.braid-stamp"

prepared() { [[ -f "$stamp" && "$(cat "$stamp")" == "$stamp_text" ]]; }

case "${1:-}" in
    "") ;;
    --check)
        prepared || { echo "torch_npu_env: $venv is not prepared (run scripts/torch_npu_env.sh)" >&2; exit 1; }
        echo "$venv"
        exit 0
        ;;
    *) echo "usage: scripts/torch_npu_env.sh [--check]" >&2; exit 2 ;;
esac

mkdir -p "$(dirname "$venv")"
exec {lock}>>"$venv.lock"
# Shared first: most runs only read the stamp, and may do so beside a running suite.
flock -s "$lock"
if prepared; then
    echo "$venv"
    exit 0
fi
if ! flock -x -n "$lock"; then
    echo "torch_npu_env: waiting for the other runs that use $venv to finish" >&2
    flock -x "$lock"
fi
# Another run may have prepared it while this one waited.
if prepared; then
    echo "$venv"
    exit 0
fi

if ! command -v "$python" >/dev/null; then
    echo "torch_npu_env: $python not found (torch_npu 2.14.0 ships a cp311 wheel; set BRAID_PYTHON)" >&2
    exit 1
fi

if [[ -x "$venv/bin/python" && ( -f "$stamp" || -f "$old_stamp" ) ]]; then
    echo "torch_npu_env: bringing $venv up to date" >&2
else
    if [[ -e "$venv" && ! -f "$venv/pyvenv.cfg" && -n "$(ls -A "$venv")" ]]; then
        echo "torch_npu_env: $venv exists and is not a virtual environment: it is never removed (set BRAID_TORCH_NPU_VENV to another directory)" >&2
        exit 1
    fi
    echo "torch_npu_env: preparing $venv (a few minutes, about 5.8 GB)" >&2
    rm -rf "$venv"
    "$python" -m venv "$venv"
    # No download cache: the machine's disk is the environment's, once.
    "$venv/bin/python" -m pip install --quiet --no-cache-dir --upgrade pip >&2
fi
"$venv/bin/python" -m pip install --quiet --no-cache-dir "${requirements[@]}" >&2
# torch imports torch_npu on its own (a device-backend entry point), which needs CANN: off
# for this check.
TORCH_DEVICE_BACKEND_AUTOLOAD=0 "$venv/bin/python" -c \
    "import torch; assert torch.__version__.startswith('2.14.0'), torch.__version__" >&2
echo "$stamp_text" >"$stamp"
echo "$venv"
