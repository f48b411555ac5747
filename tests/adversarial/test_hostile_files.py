"""Hostile files for every reader (issue 27, "Files that abort a whole job"): ``datasets
upload``, ``score --gold`` / ``--predictions`` and each ``datasets import`` format. A bad
record is one ``FILE:N (id X): problem; skipped`` line and every good record is still read;
an importer holds a record to the JSONL reader's rules (NUL, bad bytes, depth, huge numbers,
the per-item object cap); brat reads only regular files inside the folder it is given."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import CliRunner

from extraction_eval.cli import app
from extraction_eval.limits import DEFAULT_MAX_OBJECTS
from tests.support.tally import Tally

runner = CliRunner()
TEXT = "Ada Lovelace met Charles Babbage."
HUGE_ID = "9" * 4_400  # past Python's 4,300-digit limit for int conversion
OVER_CAP = DEFAULT_MAX_OBJECTS + 1_000


def _item(i: str) -> dict[str, object]:
    return {"id": i, "text": TEXT, "entities": [{"name": "Ada Lovelace", "type": "person"}]}


def _jsonl(path: Path, lines: list[bytes]) -> Path:
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


# --- our JSONL files: a 4,400-digit id ---------------------------------------------------------


def _huge_id_file(tmp: Path) -> Path:
    good = [json.dumps(_item(f"good-{n}")).encode() for n in range(3)]
    return _jsonl(tmp / "huge.jsonl", [good[0], b'{"id": ' + HUGE_ID.encode() + b"}", *good[1:]])


def _upload(tmp: Path, path: Path) -> tuple[int, str, set[str]]:
    result = runner.invoke(app, ["datasets", "upload", "hostile", str(path)])
    export = runner.invoke(app, ["datasets", "export", "hostile"])
    ids = (
        {json.loads(x)["id"] for x in export.stdout.splitlines()}
        if export.exit_code == 0
        else set()
    )
    return result.exit_code, result.output, ids


def _score(tmp: Path, gold: Path, preds: Path) -> tuple[int, str, set[str]]:
    out = tmp / "items.jsonl"
    result = runner.invoke(app, ["score", "--gold", str(gold), "--predictions", str(preds),
                                 "--format", "json", "--per-item", str(out)])  # fmt: skip
    if result.exit_code != 0:
        return result.exit_code, result.output, set()
    report = json.loads(result.stdout)
    ids = {json.loads(x)["id"] for x in out.read_text().splitlines() if '"failed": false' in x}
    return 0, "\n".join(report["warnings"]), ids


def _other(tmp: Path) -> Path:
    return _jsonl(tmp / "other.jsonl", [json.dumps(_item(f"good-{n}")).encode() for n in range(3)])


JSONL_READERS: dict[str, Callable[[Path], tuple[int, str, set[str]]]] = {
    "datasets upload": lambda tmp: _upload(tmp, _huge_id_file(tmp)),
    "score --gold": lambda tmp: _score(tmp, _huge_id_file(tmp), _other(tmp)),
    "score --predictions": lambda tmp: _score(tmp, _other(tmp), _huge_id_file(tmp)),
}


@pytest.mark.parametrize("reader", list(JSONL_READERS))
def test_a_4400_digit_id_costs_only_its_line(reader: str, tmp_path: Path, tally: Tally) -> None:
    code, output, ids = JSONL_READERS[reader](tmp_path)
    own = [line for line in output.splitlines() if "huge.jsonl:2" in line]
    held = (
        code == 0
        and ids == {"good-0", "good-1", "good-2"}
        and len(own) == 1
        and "number too long" in own[0]
        and own[0].rstrip().endswith("; skipped")
    )
    tally.input(held=held)
    assert held, (code, output[-2000:], ids)


# --- importers ---------------------------------------------------------------------------------


def _ls_task(i: int | str, text: str = TEXT, spans: int = 1) -> dict[str, object]:
    result = [
        {"id": f"s{k}", "type": "labels", "value": {"start": 0, "end": 3, "labels": ["PER"]}}
        for k in range(spans)
    ]
    return {"id": i, "data": {"text": text}, "annotations": [{"result": result}]}


def _label_studio(tmp: Path, hostile: str) -> Path:
    """Two good tasks around the hostile one (raw JSON text, the list's second element)."""
    good = [json.dumps(_ls_task(n)) for n in (1, 3)]
    path = tmp / "ls.json"
    path.write_text(f"[{good[0]},\n{hostile},\n{good[1]}]", encoding="utf-8")
    return path


def _doccano(tmp: Path, hostile: bytes) -> Path:
    good = [json.dumps({"id": n, "text": TEXT, "label": [[0, 3, "PER"]]}).encode() for n in (1, 3)]
    return _jsonl(tmp / "dc.jsonl", [good[0], hostile, good[1]])


def _conll(tmp: Path, hostile: bytes) -> Path:
    path = tmp / "c.conll"
    path.write_bytes(b"Ada B-PER\nmet O\n\n" + hostile + b"\n\nBob B-PER\nran O\n")
    return path


def _brat(tmp: Path, hostile: Callable[[Path], None]) -> Path:
    folder = tmp / "brat"
    folder.mkdir()
    for name in ("doc1", "doc3"):
        (folder / f"{name}.txt").write_text(TEXT, encoding="utf-8")
        (folder / f"{name}.ann").write_text("T1\tPER 0 3\tAda\n", encoding="utf-8")
    hostile(folder)
    return folder


def _bad_txt(content: bytes, ann: str = "T1\tPER 0 3\tAda\n") -> Callable[[Path], None]:
    def make(folder: Path) -> None:
        (folder / "doc2.txt").write_bytes(content)
        (folder / "doc2.ann").write_text(ann, encoding="utf-8")

    return make


def _orphan_ann(folder: Path) -> None:
    (folder / "doc2.ann").write_text("T1\tPER 0 3\tAda\n", encoding="utf-8")


def _outside_link(folder: Path) -> None:
    outside = folder.parent / "secret.txt"
    outside.write_text("root:x:0:0:root:/root:/bin/bash\n", encoding="utf-8")
    (folder / "doc2.txt").symlink_to(outside)
    (folder / "doc2.ann").write_text("T1\tPER 0 4\troot\n", encoding="utf-8")


def _fifo(folder: Path) -> None:
    os.mkfifo(folder / "doc2.txt")
    (folder / "doc2.ann").write_text("T1\tPER 0 3\tAda\n", encoding="utf-8")


def _many_ann(n: int) -> str:
    return "".join(f"T{k + 1}\tPER 0 3\tAda\n" for k in range(n))


@dataclass(frozen=True)
class Case:
    fmt: str
    make: Callable[[Path], Path]
    where: str  # the bad record's FILE:N in its warning
    note: str  # in the warning
    kept: bool = False  # repaired and kept (the warning is a note, not "; skipped")
    good: tuple[str, ...] = ("1", "3")


DEEP_LS = "[" * 200_000 + "]" * 200_000
DEEP_DC = b"[" * 3_000 + b"]" * 3_000
CONLL_GOOD = ("c-1", "c-3")
BRAT_GOOD = ("doc1", "doc3")
CASES = {
    "label-studio: a lone surrogate": Case(
        "label-studio", lambda t: _label_studio(t, json.dumps(_ls_task(2, "Ada \ud800 met"))),
        "ls.json:2 (id 2)", "lone UTF-16 surrogates", kept=True, good=("1", "2", "3"),
    ),
    "label-studio: nested 200,000 deep": Case(
        "label-studio", lambda t: _label_studio(t, DEEP_LS), "ls.json:2", "nested more than",
    ),
    "label-studio: a 4,400-digit id": Case(
        "label-studio", lambda t: _label_studio(t, '{"id": ' + HUGE_ID + "}"), "ls.json:2",
        "number too long",
    ),
    "label-studio: an invalid escape in one task": Case(
        "label-studio", lambda t: _label_studio(t, r'{"id": 2, "data": {"text": "a\q"}}'),
        "ls.json:2", "Invalid \\escape",
    ),
    "label-studio: an escaped NUL": Case(
        "label-studio", lambda t: _label_studio(t, json.dumps(_ls_task(2, "Ada\u0000 met"))),
        "ls.json:2", "NUL",
    ),
    "label-studio: spans over the object cap": Case(
        "label-studio", lambda t: _label_studio(t, json.dumps(_ls_task(2, spans=OVER_CAP))),
        "ls.json:2 (id 2)", f"over the limit of {DEFAULT_MAX_OBJECTS:,}",
    ),
    "doccano: nested 3,000 deep": Case(
        "doccano",
        lambda t: _doccano(t, b'{"id": 2, "text": "x", "label": ' + DEEP_DC + b"}"),
        "dc.jsonl:2", "nested more than",
    ),
    "doccano: a Latin-1 byte": Case(
        "doccano", lambda t: _doccano(t, b'{"id": 2, "text": "caf\xe9", "label": []}'),
        "dc.jsonl:2", "not UTF-8",
    ),
    "doccano: an escaped NUL": Case(
        "doccano", lambda t: _doccano(t, b'{"id": 2, "text": "a\\u0000b", "label": []}'),
        "dc.jsonl:2 (id 2)", "NUL",
    ),
    "doccano: spans over the object cap": Case(
        "doccano",
        lambda t: _doccano(t, json.dumps(
            {"id": 2, "text": TEXT, "label": [[0, 3, "PER"]] * OVER_CAP}).encode()),
        "dc.jsonl:2 (id 2)", f"over the limit of {DEFAULT_MAX_OBJECTS:,}",
    ),
    "conll: a Latin-1 byte": Case(
        "conll", lambda t: _conll(t, b"caf\xe9 O"), "c.conll:4 (id c-2)", "not UTF-8",
        good=CONLL_GOOD,
    ),
    "conll: a NUL byte": Case(
        "conll", lambda t: _conll(t, b"Ada\x00 B-PER"), "c.conll:4 (id c-2)", "NUL",
        good=CONLL_GOOD,
    ),
    "conll: tokens over the object cap": Case(
        "conll", lambda t: _conll(t, b"\n".join([b"Ada B-PER"] * OVER_CAP)),
        "c.conll:4 (id c-2)", f"over the limit of {DEFAULT_MAX_OBJECTS:,}", good=CONLL_GOOD,
    ),
    "brat: a bad byte in one .txt": Case(
        "brat", lambda t: _brat(t, _bad_txt(b"Ada caf\xe9")), "doc2.txt:1 (id doc2)",
        "not UTF-8", good=BRAT_GOOD,
    ),
    "brat: a NUL in one .txt": Case(
        "brat", lambda t: _brat(t, _bad_txt(b"Ada\x00 met")), "doc2.txt:1 (id doc2)", "NUL",
        good=BRAT_GOOD,
    ),
    "brat: an .ann without its .txt": Case(
        "brat", lambda t: _brat(t, _orphan_ann), "doc2.ann:1 (id doc2)", "no .txt file",
        good=BRAT_GOOD,
    ),
    "brat: a link to a file outside the folder": Case(
        "brat", lambda t: _brat(t, _outside_link), "doc2.txt:1 (id doc2)", "outside the folder",
        good=BRAT_GOOD,
    ),
    "brat: a FIFO named doc2.txt": Case(
        "brat", lambda t: _brat(t, _fifo), "doc2.txt:1 (id doc2)", "not a regular file",
        good=BRAT_GOOD,
    ),
    "brat: entities over the object cap": Case(
        "brat", lambda t: _brat(t, _bad_txt(TEXT.encode(), _many_ann(OVER_CAP))),
        "doc2.ann", f"over the limit of {DEFAULT_MAX_OBJECTS:,}", good=BRAT_GOOD,
    ),
}  # fmt: skip


def _import(path: Path, fmt: str, out: Path) -> tuple[int, str, set[str]]:
    """``datasets import --out``, on a thread: a read that blocks (a FIFO) fails the test in
    seconds instead of hanging the suite; the FIFO is then opened for writing to free it."""
    box: dict[str, object] = {}

    def work() -> None:
        box["result"] = runner.invoke(
            app, ["datasets", "import", "hostile", str(path), "--format", fmt, "--out", str(out)]
        )

    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    thread.join(timeout=30)
    if thread.is_alive():
        for fifo in path.glob("*.txt") if path.is_dir() else ():
            if fifo.is_fifo():
                os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        thread.join(timeout=10)
        return -1, "hung: the import blocked reading a file", set()
    result = box["result"]
    assert hasattr(result, "exit_code")
    output: str = result.output
    ids = {json.loads(x)["id"] for x in out.read_text().splitlines()} if out.exists() else set()
    return result.exit_code, output, ids


@pytest.mark.parametrize("name", list(CASES))
def test_a_hostile_record_costs_only_itself(name: str, tmp_path: Path, tally: Tally) -> None:
    case = CASES[name]
    code, output, ids = _import(case.make(tmp_path), case.fmt, tmp_path / "out.jsonl")
    own = [line for line in output.splitlines() if case.where in line]
    held = (
        code == 0
        and "Traceback" not in output
        and ids == set(case.good)
        and len(own) == 1
        and case.note in own[0]
        and own[0].rstrip().endswith("; skipped") != case.kept
        and "root:x:0:0" not in output
    )
    tally.input(held=held)
    assert held, (name, code, output[-2000:], sorted(ids))
