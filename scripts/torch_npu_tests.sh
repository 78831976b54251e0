#!/usr/bin/env bash
# Runs the torch_npu suite (tests/torch_npu): the unmodified torch_npu 2.14 wheel on
# braid-acl-sim, with no NPU.
#
# 1. prepares (once; cached) the Python environment: scripts/torch_npu_env.sh;
# 2. builds braid (release) and lays braid-acl-sim out as CANN's libraries with
#    `braid acl-sim install` in $BRAID_TORCH_NPU_CANN_DIR (default: <target dir>/torch-npu-cann);
# 3. runs pytest with the environment the install prints. Arguments go to pytest. When the
#    run fails, the last calls braid-acl-sim refused are printed (also when the process died).
set -euo pipefail
cd "$(dirname "$0")/.."

venv=$(scripts/torch_npu_env.sh)
cargo build --release -p braid-cli
target=${CARGO_TARGET_DIR:-target}
dir=${BRAID_TORCH_NPU_CANN_DIR:-$target/torch-npu-cann}
eval "$("$target/release/braid" acl-sim install --dir "$dir")"
# Every call braid-acl-sim refuses is logged here; should the run fail (or the process die,
# taking pytest's per-test report with it), the last of them are shown.
log_dir=$(mktemp -d)
export BRAID_ACL_SIM_ERROR_LOG="$log_dir/acl-sim-errors.log"
# No pytest cache in the repository.
status=0
"$venv/bin/python" -m pytest tests/torch_npu -p no:cacheprovider "$@" || status=$?
if [ "$status" -ne 0 ] && [ -s "$BRAID_ACL_SIM_ERROR_LOG" ]; then
    echo "== the last calls braid-acl-sim refused during the run ($BRAID_ACL_SIM_ERROR_LOG):" >&2
    tail -n 40 "$BRAID_ACL_SIM_ERROR_LOG" >&2
fi
rm -rf "$log_dir"
exit "$status"
