#!/usr/bin/env bash
# The whole test suite, as CI runs it: formatting, lints, unit + integration tests (debug build), and a bounded
# property-test run over NodePool/Pod YAML into the engine. Needs cargo and python3; installs what else the tests
# need when missing: tmux (Debian's package) for the dashboard's end-to-end test in a real terminal, and moto
# (PyPI `moto[server]`, into .venv/) for the AWS tests, which start and stop their own moto server.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v tmux >/dev/null 2>&1; then
    echo "== installing tmux (the dashboard end-to-end test runs the demo inside it)"
    SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    $SUDO apt-get update -qq && $SUDO apt-get install -y -qq tmux
fi

# One moto release: the AWS tests compare its instance-type data with the embedded catalog's, and each release
# refreshes that data (5.2.6 changed some types' zones and network bandwidth).
MOTO_VERSION=5.2.5
if ! .venv/bin/python -c "import importlib.metadata as m, sys; sys.exit(m.version('moto') != '$MOTO_VERSION')" \
    2>/dev/null || [ ! -x .venv/bin/moto_server ]; then
    echo "== installing moto[server] $MOTO_VERSION into .venv (the AWS tests run the SDK against it)"
    python3 -m venv .venv
    .venv/bin/pip install --quiet --disable-pip-version-check "moto[server]==$MOTO_VERSION"
fi
export MOTO_SERVER="$PWD/.venv/bin/moto_server"

# A one-shot build gains nothing from incremental caches: without them, and with the integration tests linked into
# one binary, a fresh clone's target directory is 4.4 GB after this script (docs/testing.md). CI's disk is shared and
# once filled mid-build. CARGO_INCREMENTAL=1 keeps the caches.
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"
echo "== disk free where the build goes: $(df -h --output=avail . | tail -1 | tr -d ' ')"

echo "== cargo fmt --check"
cargo fmt --all -- --check

echo "== cargo clippy --all-targets -- -D warnings"
cargo clippy --all-targets --locked -- -D warnings

echo "== cargo test (debug)"
# The fuzz-style property tests read this to bound their time in CI.
export PROPTEST_CASES="${PROPTEST_CASES:-256}"
# --all-targets also runs each criterion benchmark once, untimed, so they stay working.
cargo test --locked --all-targets
