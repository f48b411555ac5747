"""`extraction-eval datasets ...` goes to LangFuse when its keys are set (real SDK, fake server)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from extraction_eval.cli import app
from tests.support.langfuse_server import FakeLangfuse, running_fake_langfuse

runner = CliRunner()


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeLangfuse]:
    with running_fake_langfuse() as fake:
        public, secret = fake.new_keys("datasets-cli")
        monkeypatch.setenv("LANGFUSE_PUBLIC_KEY", public)
        monkeypatch.setenv("LANGFUSE_SECRET_KEY", secret)
        monkeypatch.setenv("LANGFUSE_BASE_URL", fake.base_url)
        yield fake


def _write(path: Path, n: int) -> Path:
    lines = []
    for i in range(n):
        text = f"Person{i} Quill works for Acme Ledger."
        lines.append(
            json.dumps(
                {
                    "id": f"doc-{i}",
                    "text": text,
                    "entities": [{"name": f"Person{i} Quill", "type": "person"}],
                    "relationships": [],
                }
            )
        )
    lines.append("{broken")
    path.write_text("\n".join(lines) + "\n")
    return path


def test_upload_twice_list_show_export_against_langfuse(
    server: FakeLangfuse, tmp_path: Path
) -> None:
    data = _write(tmp_path / "d.jsonl", 3)
    first = runner.invoke(app, ["datasets", "upload", "cli-set", str(data)])
    assert first.exit_code == 0, first.output
    assert "d.jsonl:4" in first.stderr  # the broken line is named, the rest uploaded
    again = runner.invoke(app, ["datasets", "upload", "cli-set", str(data)])
    assert again.exit_code == 0, again.output
    items = server.dataset_items("cli-set")
    assert len(items) == 3  # idempotent ids: no duplicates on the server
    assert {i["input"]["text"] for i in items} == {
        f"Person{i} Quill works for Acme Ledger." for i in range(3)
    }
    assert all(i["expectedOutput"]["entities"][0]["type"] == "person" for i in items)

    listed = runner.invoke(app, ["datasets", "list"])
    assert listed.exit_code == 0 and "cli-set" in listed.stdout
    exported = runner.invoke(app, ["datasets", "export", "cli-set"])
    assert exported.exit_code == 0, exported.output
    rows = [json.loads(line) for line in exported.stdout.splitlines()]
    assert [r["id"] for r in rows] == ["doc-0", "doc-1", "doc-2"]  # our ids survive the round trip
    missing = runner.invoke(app, ["datasets", "show", "nope"])
    assert missing.exit_code == 2 and len(missing.stderr.strip().splitlines()) == 1


def test_upload_without_a_file_sends_the_bundled_sample(server: FakeLangfuse) -> None:
    from extraction_eval.datasets.bundled import sample_items

    result = runner.invoke(app, ["datasets", "upload", "extraction-eval"])
    assert result.exit_code == 0, result.output
    items = server.dataset_items("extraction-eval")
    assert len(items) == len(sample_items()) > 30


def test_versions_in_langfuse_mode_says_what_langfuse_offers(
    server: FakeLangfuse, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """LangFuse keeps no list of versions: the uploads as its items' stamps tell, each row's
    version the timestamp that reads the items after it, and a line saying so."""
    import time

    from extraction_eval.backends.langfuse import datasets as lf_datasets

    monkeypatch.setattr(lf_datasets, "UPLOAD_GAP_S", 0.5)
    data = _write(tmp_path / "d.jsonl", 2)
    assert runner.invoke(app, ["datasets", "upload", "lf-set", str(data)]).exit_code == 0
    time.sleep(0.7)
    more = _write(tmp_path / "e.jsonl", 3)  # doc-2 is new
    assert runner.invoke(app, ["datasets", "upload", "lf-set", str(more)]).exit_code == 0
    result = runner.invoke(app, ["datasets", "versions", "lf-set", "--format", "json"])
    assert result.exit_code == 0, result.output
    got = json.loads(result.stdout)
    assert [(v["items"], v["note"]) for v in got["versions"]] == [(2, "2 new"), (3, "1 new")]
    assert "LangFuse keeps no list of dataset versions" in got["about"]
    first = got["versions"][0]["version"]
    shown = runner.invoke(app, ["datasets", "show", "lf-set", "--version", first])
    assert shown.exit_code == 0, shown.output
    assert "doc-1" in shown.stdout and "doc-2" not in shown.stdout  # the version reads the past
    table = runner.invoke(app, ["datasets", "versions", "lf-set"])
    assert table.exit_code == 0 and "keeps no list" in " ".join(table.stdout.split())
