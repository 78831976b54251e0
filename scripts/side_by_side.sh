#!/usr/bin/env bash
# The side-by-side benchmark (scripts/side_by_side.py): the same operators on torch on the
# CPU, on torch_npu over braid-acl-sim, and on braid's simulator directly, in one run, with
# each ratio printed. Prepares what the torch_npu suite uses (scripts/torch_npu_env.sh's shared
# Python environment, braid-acl-sim's wheel in this checkout's layer of it, as
# scripts/torch_npu_tests.sh does), builds the timing binary in release, and runs the script
# under `braid-acl-sim run`. Arguments go to the script (--threads N, --repeat N, --only CASE,
# --no-npu).
#
# torch_npu runs with its task queue off (TASK_QUEUE_ENABLE=0) unless the variable is set: with
# the queue on, torch_npu's release thread polls its queue with a 1 µs select() for as long as
# the process lives, which on a machine of few cores takes a share of a core from every column
# measured in the process, CPU torch's included.
set -euo pipefail
export TASK_QUEUE_ENABLE="${TASK_QUEUE_ENABLE-0}"
cd "$(dirname "$0")/.."

venv=$(scripts/torch_npu_env.sh)
exec {lock}>>"$venv.lock"
flock -s "$lock"

target=${CARGO_TARGET_DIR:-target}
layer="$target/torch-npu-venv"
shared_site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')
link_line="import site; site.addsitedir('$shared_site')"
if [ ! -x "$layer/bin/python" ] \
    || [ "$(cat "$layer/braid-shared-site" 2>/dev/null)" != "$link_line" ]; then
    rm -rf "$layer"
    "$venv/bin/python" -m venv --without-pip "$layer"
    layer_site=$("$layer/bin/python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')
    echo "$link_line" >"$layer_site/braid-shared-env.pth"
    echo "$link_line" >"$layer/braid-shared-site"
fi
wheels="$target/wheels"
rm -f "$wheels"/braid_acl_sim-*.whl
"$layer/bin/python" -m pip wheel --quiet --no-build-isolation --no-deps \
    --wheel-dir "$wheels" python/braid-acl-sim
"$layer/bin/python" -m pip install --quiet --no-deps --force-reinstall "$wheels"/braid_acl_sim-*.whl

cargo build --quiet --release -p braid-benches --bin sim_kernel_times
exec "$layer/bin/braid-acl-sim" run "$layer/bin/python" scripts/side_by_side.py \
    --sim-bin "$target/release/sim_kernel_times" "$@"
