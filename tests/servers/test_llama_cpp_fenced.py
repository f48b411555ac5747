"""Replies as real models write them, from llama.cpp's real server: a prompt asking for a
```` ```json ```` fence (a small change to the bundled prompt, pushed as a label), the response
format left free (``text``: a grammar would forbid the fence), and the run reads each fenced
reply, records the repair on the item and counts it in the summary (``answers repaired: fence
N``), as it prints it. Run with scripts/test-servers.sh.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from extraction_eval.backends.local import LocalStore
from extraction_eval.cli import _run_app, app
from extraction_eval.prompts.template import local_messages

pytestmark = pytest.mark.timeout(1800)  # a 135M model on 2 shared cores: 10-40 s a call
ITEMS = 2
runner = CliRunner()

BARE = "Answer with one JSON object and nothing else, in exactly this shape:\n"
FENCED = (
    "Answer in a Markdown code block: a line ```json, then one JSON object in exactly this"
    " shape, then a line ```. For example:\n```json\n"
)


def _fenced_prompt(tmp_path: Path) -> tuple[Path, Path]:
    """The bundled system and user messages, the system's last instruction asking for a fence."""
    system, user = (m["content"] for m in local_messages())
    assert BARE in system  # the bundled wording this test changes
    head, _, shape = system.partition(BARE)
    system = head + FENCED + shape.strip() + "\n```"
    paths = tmp_path / "system.txt", tmp_path / "user.txt"
    for path, text in zip(paths, (system, user), strict=True):
        path.write_text(text, encoding="utf-8")
    return paths


def test_fenced_replies_are_repaired_and_counted(llama_server: str, tmp_path: Path) -> None:
    system, user = _fenced_prompt(tmp_path)
    pushed = runner.invoke(
        app,
        ["prompts", "push", "--label", "fenced", "--system", str(system), "--user", str(user),
         "-m", "ask for a json fence"],
    )  # fmt: skip
    assert pushed.exit_code == 0, pushed.output
    result = runner.invoke(
        _run_app,
        ["--model", "openai:smollm2", "--base-url", llama_server, "--response-format", "text",
         "--prompt-label", "fenced", "--limit", str(ITEMS), "--concurrency", "1",
         "--timeout", "300", "--name", "fenced"],
    )  # fmt: skip
    printed = " ".join(result.stdout.split())
    print(result.stdout)  # what the run printed (shown with -rA)
    store = LocalStore()
    run = store.get_run("fenced")
    assert run is not None, result.output
    rows = store.results(run.id)
    for r in rows:  # each item's repairs or error (shown with -rA)
        print(r.item_id, r.repairs, (r.error or "")[:200], repr((r.raw_output or "")[:120]))
    assert len(rows) == ITEMS  # every item a row, whatever the model made of it
    fenced = [r for r in rows if "fence" in (r.repairs or [])]
    for r in fenced:  # the raw reply kept as the model wrote it: a fence around the object
        assert r.raw_output is not None and "```" in r.raw_output
    assert fenced, [(r.item_id, r.error, (r.raw_output or "")[:300]) for r in rows]
    summary = run.summary or {}
    assert summary.get("repairs", {}).get("fence") == len(fenced)
    counted = re.search(r"answers repaired fence (\d+)", printed)
    assert counted is not None and int(counted.group(1)) == len(fenced), printed
