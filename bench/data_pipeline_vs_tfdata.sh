#!/usr/bin/env bash
# Tandem's input pipeline against tf.data on JPEG photographs and Fashion-MNIST. The work is done
# by data_pipeline_vs_tfdata.py (standard library only); see bench/README.md and `--help`.
set -euo pipefail
exec python3 "$(dirname "$0")/data_pipeline_vs_tfdata.py" "$@"
