#!/usr/bin/env bash
# The one-command start: build the workspace in release mode, then run
# `world-core up` from the repository root (state in ./.world/).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --workspace --bins
exec target/release/world-core up "$@"
