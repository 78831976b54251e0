#!/usr/bin/env bash
# Prepares the Python environment the torch_npu suite (tests/torch_npu) runs in, once, and
# prints its directory on stdout. Reused between runs: a stamp file records what was installed,
# and an environment with the right stamp is used as it is.
#
#   BRAID_TORCH_NPU_VENV   where the environment lives
#                          (default: ${XDG_CACHE_HOME:-$HOME/.cache}/braid/torch-npu-venv;
#                          never inside the repository: it is about 3 GB)
#   BRAID_PYTHON           the interpreter to build it from (default: python3.11; the
#                          torch_npu 2.14.0 wheel is cp311)
#
# What is installed and why:
# - torch==2.14.0 and torch-npu==2.14.0 from the package registry, unmodified. torch_npu 2.14.0
#   requires torch 2.14.0, and the registry's torch 2.14.0 for x86_64 is the CUDA build: it does
#   not import without its nvidia-* dependencies (libcudart, cuBLAS...), so they are installed
#   too, although no GPU is used.
# - pytest and numpy for the suite.
# The allocator-key clash between torch's CUDA library and torch_npu (both register
# 'pinned_reserve_segment_size_mb' and friends in c10's one key set, and torch_npu aborts on the
# duplicate) is not patched here: the suite resolves it in its own processes only
# (tests/torch_npu/keyset_shim.cpp, loaded before torch), as a CPU-only torch build (not on
# the registry) would not have it.
set -euo pipefail

torch_version=2.14.0
torch_npu_version=2.14.0
stamp_text="torch==${torch_version} torch-npu==${torch_npu_version} pytest numpy"

venv=${BRAID_TORCH_NPU_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/braid/torch-npu-venv}
python=${BRAID_PYTHON:-python3.11}
stamp="$venv/.braid-stamp"

if [[ -f "$stamp" && "$(cat "$stamp")" == "$stamp_text" ]]; then
    echo "$venv"
    exit 0
fi

if ! command -v "$python" >/dev/null; then
    echo "torch_npu_env: $python not found (torch_npu $torch_npu_version ships a cp311 wheel; set BRAID_PYTHON)" >&2
    exit 1
fi

echo "torch_npu_env: preparing $venv (a few minutes, about 3 GB)" >&2
rm -rf "$venv"
mkdir -p "$(dirname "$venv")"
"$python" -m venv "$venv"
# No download cache: the machine's disk is the environment's, once.
"$venv/bin/python" -m pip install --quiet --no-cache-dir --upgrade pip >&2
"$venv/bin/python" -m pip install --quiet --no-cache-dir \
    "torch==${torch_version}" "torch-npu==${torch_npu_version}" pytest numpy >&2
# torch imports torch_npu on its own (a device-backend entry point), which needs CANN: off
# for this check.
TORCH_DEVICE_BACKEND_AUTOLOAD=0 "$venv/bin/python" -c \
    "import torch; assert torch.__version__.startswith('${torch_version}'), torch.__version__" >&2
echo "$stamp_text" >"$stamp"
echo "$venv"
