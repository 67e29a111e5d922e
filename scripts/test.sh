#!/usr/bin/env bash
# The test command: install, check notebooks and library are in sync, run pytest (incl. every notebook).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1 RAY_USAGE_STATS_ENABLED=0 TOKENIZERS_PARALLELISM=false
if git rev-parse --git-dir >/dev/null 2>&1; then
  .venv/bin/nbdev-export
  .venv/bin/nbdev-clean
  if [ -n "$(git status --porcelain -- nbs coworkenv)" ]; then
    echo "nbdev-export / nbdev-clean changed files: notebooks and coworkenv/ are out of sync:" >&2
    git status --porcelain -- nbs coworkenv >&2
    git --no-pager diff --stat -- nbs coworkenv >&2
    exit 1
  fi
  echo "nbdev sync: ok"
fi
exec .venv/bin/python -m pytest tests "$@"
