#!/usr/bin/env bash
# The qkgrad demo: installs what is missing (Debian 12), builds, and runs the main example.
# For now that is examples/mlp (an MLP learning three interleaved spirals); the translation
# demo replaces it once the translation program lands. Extra arguments go to qkgrad-mlp.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/common.sh

ensure_packages
echo "== building (build/)"
configure_and_build build >/dev/null
echo "== running: build/examples/qkgrad-mlp $*"
build/examples/qkgrad-mlp "$@"
