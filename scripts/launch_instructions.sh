#!/usr/bin/env bash
# Host instructions per front-layer launch on the timing-only simulator, counted by callgrind
# (deterministic, unlike wall-clock time on a shared machine): runs
# `crates/backend-sim/examples/launch_instructions.rs` with FEW and MANY launches and prints
# (Ir(MANY) - Ir(FEW)) / (MANY - FEW), so setup and teardown cancel out. `hal` as the first
# argument counts launches through the hal alone (what the front layer adds is the
# difference). Needs valgrind.
set -euo pipefail
cd "$(dirname "$0")/.."
mode="${1:-front}"
few="${FEW:-1000}"
many="${MANY:-11000}"
cargo build --release -q -p braid-backend-sim --example launch_instructions
bin="${CARGO_TARGET_DIR:-target}/release/examples/launch_instructions"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
instructions() {
    valgrind --tool=callgrind --callgrind-out-file="$out/cg.$1" "$bin" "$1" "$mode" \
        >/dev/null 2>&1
    awk '/^(summary|totals):/ { print $2; exit }' "$out/cg.$1"
}
a="$(instructions "$few")"
b="$(instructions "$many")"
echo "$mode launch: $(( (b - a) / (many - few) )) instructions per launch ($few vs $many launches: $a, $b)"
