#!/usr/bin/env bash
# Runs the torch_npu suite (tests/torch_npu): the unmodified torch_npu 2.14 wheel on
# braid-acl-sim, with no NPU, through braid-acl-sim's Python package, the route a user takes
# (docs/guide/07-torch-npu.md).
#
# 1. prepares (once; cached, shared by the machine's checkouts) the Python environment:
#    scripts/torch_npu_env.sh;
# 2. builds braid-acl-sim's wheel (python/braid-acl-sim; cargo builds the library in release)
#    into <target dir>/wheels;
# 3. installs it into this checkout's layer of the environment, <target dir>/torch-npu-venv:
#    a virtual environment that sees the shared one's packages and holds the wheel, so that
#    checkouts never change the shared environment under each other's runs;
# 4. runs pytest with `braid-acl-sim run`, holding the shared environment's lock (shared) so
#    that no other run changes it meanwhile. Arguments go to pytest. When the run fails, the
#    last calls braid-acl-sim refused are printed (also when the process died).
set -euo pipefail
cd "$(dirname "$0")/.."

for attempt in 1 2 3; do
    venv=$(scripts/torch_npu_env.sh)
    exec {lock}>>"$venv.lock"
    flock -s "$lock"
    # Another run may have changed it between its preparation and this lock.
    if scripts/torch_npu_env.sh --check >/dev/null 2>&1; then
        break
    fi
    flock -u "$lock"
    if [ "$attempt" -eq 3 ]; then
        echo "torch_npu_tests: other runs keep changing $venv; run again" >&2
        exit 1
    fi
done

# The suite's test of scripts/torch_npu_env.sh reads which environment it runs in.
export BRAID_TORCH_NPU_VENV="$venv"

target=${CARGO_TARGET_DIR:-target}
layer="$target/torch-npu-venv"
shared_site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')
link_line="import site; site.addsitedir('$shared_site')"
if [ ! -x "$layer/bin/python" ] \
    || [ "$(cat "$layer/braid-shared-site" 2>/dev/null)" != "$link_line" ]; then
    rm -rf "$layer"
    "$venv/bin/python" -m venv --without-pip "$layer"
    layer_site=$("$layer/bin/python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')
    # addsitedir (not a plain path line): the shared environment's own .pth files count too.
    echo "$link_line" >"$layer_site/braid-shared-env.pth"
    echo "$link_line" >"$layer/braid-shared-site"
fi

wheels="$target/wheels"
rm -f "$wheels"/braid_acl_sim-*.whl
"$layer/bin/python" -m pip wheel --quiet --no-build-isolation --no-deps \
    --wheel-dir "$wheels" python/braid-acl-sim
"$layer/bin/python" -m pip install --quiet --no-deps --force-reinstall "$wheels"/braid_acl_sim-*.whl

# Every call braid-acl-sim refuses is logged here; should the run fail (or the process die,
# taking pytest's per-test report with it), the last of them are shown.
log_dir=$(mktemp -d)
error_log="$log_dir/acl-sim-errors.log"
# No pytest cache in the repository.
status=0
"$layer/bin/braid-acl-sim" run --error-log "$error_log" \
    "$layer/bin/python" -m pytest tests/torch_npu -p no:cacheprovider "$@" || status=$?
if [ "$status" -ne 0 ] && [ -s "$error_log" ]; then
    echo "== the last calls braid-acl-sim refused during the run ($error_log):" >&2
    tail -n 40 "$error_log" >&2
fi
rm -rf "$log_dir"
exit "$status"
