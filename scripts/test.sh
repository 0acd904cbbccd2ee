#!/usr/bin/env bash
# The whole test suite, as CI runs it: formatting, lints, unit + integration tests (debug build), and a bounded
# property-test run over NodePool/Pod YAML into the engine. Needs cargo, and tmux for the dashboard's end-to-end
# test in a real terminal (installed here from Debian's packages when missing).
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v tmux >/dev/null 2>&1; then
    echo "== installing tmux (the dashboard end-to-end test runs the demo inside it)"
    SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    $SUDO apt-get update -qq && $SUDO apt-get install -y -qq tmux
fi

echo "== cargo fmt --check"
cargo fmt --all -- --check

echo "== cargo clippy --all-targets -- -D warnings"
cargo clippy --all-targets --locked -- -D warnings

echo "== cargo test (debug)"
# The fuzz-style property tests read this to bound their time in CI.
export PROPTEST_CASES="${PROPTEST_CASES:-256}"
# --all-targets also runs each criterion benchmark once, untimed, so they stay working.
cargo test --locked --all-targets
