#!/usr/bin/env bash
# Runs the torch_npu suite (tests/torch_npu): the unmodified torch_npu 2.14 wheel on
# braid-acl-sim, with no NPU.
#
# 1. prepares (once; cached) the Python environment: scripts/torch_npu_env.sh;
# 2. builds braid (release) and lays braid-acl-sim out as CANN's libraries with
#    `braid acl-sim install` in $BRAID_TORCH_NPU_CANN_DIR (default: <target dir>/torch-npu-cann);
# 3. runs pytest with the environment the install prints. Arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."

venv=$(scripts/torch_npu_env.sh)
cargo build --release -p braid-cli
target=${CARGO_TARGET_DIR:-target}
dir=${BRAID_TORCH_NPU_CANN_DIR:-$target/torch-npu-cann}
eval "$("$target/release/braid" acl-sim install --dir "$dir")"
# No pytest cache in the repository.
exec "$venv/bin/python" -m pytest tests/torch_npu -p no:cacheprovider "$@"
