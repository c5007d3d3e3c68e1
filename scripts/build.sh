#!/usr/bin/env bash
# Configures (once) and builds the project in ./build. Extra arguments go to
# `meson setup` on the first run.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -f build/build.ninja ]; then
  meson setup build "$@"
fi
ninja -C build
