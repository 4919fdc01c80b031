#!/usr/bin/env bash
# `make bench`: Tandem against TensorFlow/Keras and PyTorch on the main job. The work is done by
# cnn_vs_peers.py (standard library only, so it runs even when the peers cannot be installed);
# see bench/README.md and `bench/cnn_vs_peers.sh --help`.
set -euo pipefail
exec python3 "$(dirname "$0")/cnn_vs_peers.py" "$@"
