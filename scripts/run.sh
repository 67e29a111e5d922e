#!/usr/bin/env bash
# The main job: set up from scratch, then
#  1. environments: synthesize + validate a default set, run the oracle and baselines (seconds; runs/main/);
#  2. the PocketWorker pipeline on SmolLM2-135M: teach (oracle) -> curate -> SFT -> evaluate base vs PocketWorker on
#     held-out families (runs/pipeline/). Extra arguments go to step 2, e.g. --quick (the tiny test model, ~1 minute).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/coworkenv main
.venv/bin/coworkenv main --pipeline "$@"
