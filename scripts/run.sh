#!/usr/bin/env bash
# The main job: set up from scratch, then run every example environment with the oracle and the baseline agents.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/coworkenv run "$@"
