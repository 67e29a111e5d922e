#!/usr/bin/env bash
# The main job: set up from scratch, synthesize + validate a default set of environments, run the oracle and baselines.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/coworkenv main "$@"
