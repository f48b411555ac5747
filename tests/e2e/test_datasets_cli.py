"""``datasets upload|list|show|export`` through the CLI on a temp store."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import typer
from typer.testing import CliRunner

from extraction_eval.backends.local import LocalStore
from extraction_eval.commands.datasets import datasets_app

app = typer.Typer()
app.add_typer(datasets_app, name="datasets")
runner = CliRunner()

SAMPLE = Path(str(resources.files("extraction_eval").joinpath("data", "sample_dataset.jsonl")))


def _invoke(*args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, ["datasets", *args])
    return result.exit_code, result.stdout, result.stderr


def _line(i: int, text: str = "Ann Lee works for Acme.") -> str:
    return json.dumps(
        {
            "id": f"x{i}",
            "text": text,
            "entities": [
                {"name": "Ann Lee", "type": "person", "start": 0, "end": 7},
                {"name": "Acme", "type": "organization", "start": 18, "end": 22},
            ],
            "relationships": [{"source": "Ann Lee", "type": "employed_by", "target": "Acme"}],
        }
    )


def test_list_and_show_the_bundled_sample_on_a_fresh_store() -> None:
    code, out, err = _invoke("list")
    assert code == 0, err
    assert "extraction-eval" in out
    code, out, err = _invoke("show", "extraction-eval", "--limit", "3")
    assert code == 0, err
    assert "sample-001" in out and "sample-003" in out and "sample-004" not in out
    assert "Mara Velloso works for" in out
    assert "more (--limit 0 shows all)" in out


def test_upload_reports_bad_lines_with_number_and_id_and_uploads_the_rest(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    bad_entity = json.dumps({"id": "bad1", "text": "x", "entities": [{"name": "x"}]})
    path.write_text("\n".join([_line(1), bad_entity, "{oops", _line(2)]) + "\n")
    code, out, err = _invoke("upload", "mine", str(path), "--description", "my set")
    assert code == 0, err
    warnings = err.strip().splitlines()
    assert len(warnings) == 2
    assert warnings[0].startswith("warning: d.jsonl:2 (id bad1): entities.0.type")
    assert warnings[1].startswith("warning: d.jsonl:3: invalid JSON")
    assert "2 created, 0 updated, 0 unchanged (now version 1)" in out
    store = LocalStore()
    assert [i.id for i in store.get_items("mine")] == ["x1", "x2"]
    assert store.get_dataset("mine").description == "my set"
    store.close()


def test_reupload_makes_a_new_version_and_export_reads_either(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    path.write_text(_line(1) + "\n" + _line(2) + "\n")
    assert _invoke("upload", "d", str(path))[0] == 0
    code, out, _ = _invoke("upload", "d", str(path))
    assert code == 0 and "0 created, 0 updated, 2 unchanged (unchanged)" in out
    path.write_text(_line(2, "Ann Lee works for Acme now.") + "\n")
    code, out, _ = _invoke("upload", "d", str(path))
    assert "0 created, 1 updated, 0 unchanged (now version 2)" in out

    v1 = _invoke("export", "d", "--version", "1")[1]
    v2 = _invoke("export", "d")[1]
    assert [json.loads(x)["text"] for x in v2.splitlines()] == [
        "Ann Lee works for Acme.",
        "Ann Lee works for Acme now.",
    ]
    assert v1 != v2 and json.loads(v1.splitlines()[1])["text"] == "Ann Lee works for Acme."
    code, out, _ = _invoke("show", "d", "--version", "1")
    assert code == 0 and "version 1" in out


def test_export_is_byte_stable_and_round_trips_the_sample(tmp_path: Path) -> None:
    code, first, err = _invoke("export", "extraction-eval")
    assert code == 0, err
    assert first == _invoke("export", "extraction-eval")[1]
    assert first == SAMPLE.read_text(encoding="utf-8")
    out = tmp_path / "out.jsonl"
    code, stdout, err = _invoke("export", "extraction-eval", "--out", str(out))
    assert code == 0 and stdout == "" and "wrote 48 items" in err
    assert out.read_bytes() == first.encode("utf-8")
    # re-uploading an export under a new name reproduces the dataset exactly
    assert _invoke("upload", "copy", str(out))[0] == 0
    assert _invoke("export", "copy")[1] == first


def test_errors_are_one_line_with_exit_codes(tmp_path: Path) -> None:
    code, out, err = _invoke("show", "nope")
    assert code == 2 and out == ""
    assert err.strip() == "error: dataset 'nope' not found (known: extraction-eval)"
    code, _, err = _invoke("export", "extraction-eval", "--version", "9")
    assert code == 2 and err.strip().startswith("error: dataset 'extraction-eval' has no version 9")
    code, _, err = _invoke("upload", "d", str(tmp_path / "missing.jsonl"))
    assert code == 2 and err.strip() == f"error: FILE {tmp_path / 'missing.jsonl'}: file not found"
    empty = tmp_path / "empty.jsonl"
    empty.write_text("{bad\n")
    code, _, err = _invoke("upload", "d", str(empty))
    assert code == 2 and err.strip().splitlines()[-1] == f"error: no valid items in {empty}"


def test_score_and_upload_word_the_same_bad_line_the_same_way(tmp_path: Path) -> None:
    """One reader behind both commands: each bad line gives one identical warning line."""
    from extraction_eval.cli import app as cli_app  # the real CLI: `score` and `datasets`

    good = json.loads(_line(1))
    path = tmp_path / "gold.jsonl"
    path.write_bytes(
        b"\n".join(
            [
                json.dumps(good).encode(),
                b'{"id": "b1", "text": "broken", "entities": [',  # invalid JSON, id still seen
                json.dumps({"id": "b2", "entities": []}).encode(),  # no text
                json.dumps({"id": 7, "text": "x", "entities": [{"name": "x"}]}).encode(),
                json.dumps({"id": "b4", "text": "x", "relationships": {"a": 1}}).encode(),
                b"[1, 2]",
                json.dumps({"text": "no id"}).encode(),
                json.dumps(dict(good, text="again")).encode(),  # duplicate id
                b'{"id": "\xff"}',  # not UTF-8
            ]
        )
        + b"\n"
    )
    pred = tmp_path / "pred.jsonl"
    pred.write_text(json.dumps({"id": "x1", "entities": []}) + "\n", encoding="utf-8")

    scored = runner.invoke(
        cli_app,
        ["score", "--gold", str(path), "--predictions", str(pred), "--format", "json"],
    )
    uploaded = runner.invoke(cli_app, ["datasets", "upload", "same", str(path)])
    assert scored.exit_code == 0 and uploaded.exit_code == 0, scored.stderr + uploaded.stderr

    def warning_lines(stderr: str) -> list[str]:
        return [line for line in stderr.splitlines() if line.startswith("warning: ")]

    expected = [
        "warning: gold.jsonl:2 (id b1): invalid JSON (Expecting value, column 45); skipped",
        'warning: gold.jsonl:3 (id b2): missing or non-string "text"; skipped',
        "warning: gold.jsonl:4 (id 7): entities.0.type: Field required; skipped",
        'warning: gold.jsonl:5 (id b4): "relationships" must be a list; skipped',
        "warning: gold.jsonl:6: expected a JSON object, got list; skipped",
        'warning: gold.jsonl:7: missing or invalid "id"; skipped',
        "warning: gold.jsonl:8 (id x1): duplicate id, first seen on line 1; skipped",
        "warning: gold.jsonl:9: not UTF-8 (invalid start byte at byte 8); skipped",
    ]
    small = (
        "warning: only 1 items: the bootstrap confidence intervals are approximate below 50"
        " (they tend to be too narrow)"
    )
    assert warning_lines(scored.stderr) == [*expected, small]  # `score` also says N is small
    assert warning_lines(uploaded.stderr) == expected


def test_versions_lists_each_version_with_its_items_and_what_changed(tmp_path: Path) -> None:
    first, second = tmp_path / "v1.jsonl", tmp_path / "v2.jsonl"
    first.write_text("\n".join(_line(i) for i in range(3)) + "\n")
    changed = _line(0, "Ann Lee now works for Acme.")  # x0 changed, x3 new
    second.write_text("\n".join([changed, _line(1), _line(2), _line(3)]) + "\n")
    for path in (first, second):
        code, _, err = _invoke("upload", "grown", str(path))
        assert code == 0, err
    code, out, err = _invoke("versions", "grown", "--format", "json")
    assert code == 0, err
    data = json.loads(out)
    rows = [(v["version"], v["items"], v["note"]) for v in data["versions"]]
    assert rows == [(1, 3, "3 new"), (2, 4, "1 new, 1 changed")]
    assert all(v["created_at"] for v in data["versions"]) and data["about"] is None
    code, out, err = _invoke("versions", "grown")
    assert code == 0, err
    lines = [line.split() for line in out.splitlines()]
    assert lines[1] == ["version", "created", "items", "note"]
    assert lines[2][0] == "1" and lines[2][-3:] == ["3", "3", "new"]
    assert lines[3][0] == "2" and lines[3][-5:] == ["4", "1", "new,", "1", "changed"]
    code, out, err = _invoke("versions", "nope")
    assert code == 2 and out == "" and err.startswith("error: dataset 'nope' not found")
