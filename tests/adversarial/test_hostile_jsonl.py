"""Hostile JSONL lines in every file the tool reads: ``datasets upload``, ``score``'s gold and
predictions, and ``gold override --file``. Each bad line is one ``FILE:LINE (id X): problem;
skipped`` warning (a repairable one is kept, and says so); every good line is still read.

One CLI invocation per file kind holds every variant between good lines; each variant is then
checked (and tallied) on its own."""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import CliRunner

from extraction_eval.cli import app
from tests.support.tally import Tally

runner = CliRunner()
GOOD = 4  # good lines between (and around) the hostile ones


@dataclass(frozen=True)
class Variant:
    name: str
    line: Callable[[str], bytes]  # the good JSON of this line (id inside) -> the hostile line
    kept: bool  # read (repaired if need be), or skipped with a warning
    note: str = ""  # the warning's problem (kept: the repair note)


def _extra(payload: bytes | str) -> Callable[[str], bytes]:
    """The good object with one more key whose value is ``payload``, as raw bytes."""
    raw = payload.encode() if isinstance(payload, str) else payload
    return lambda good: good[:-1].encode() + b', "extra": ' + raw + b"}"


VARIANTS = [
    Variant("nesting 100,000 deep", _extra("[" * 100_000 + "]" * 100_000), False, "nested"),
    Variant("nesting 500 deep", _extra("[" * 500 + "]" * 500), False, "nested more than 64"),
    Variant("a 5,000-digit number", _extra("9" * 5000), False, "number too long"),
    Variant("an invalid escape", _extra(r'"\q"'), False, "Invalid \\escape"),
    Variant("a short unicode escape", _extra(r'"\u12"'), False, "invalid JSON"),
    Variant("a raw NUL in a string", _extra(b'"a\x00b"'), False, "NUL"),
    Variant("a NUL outside strings", lambda g: g.encode() + b"\x00", False, "NUL"),
    Variant("an escaped NUL", _extra(r'"a\u0000b"'), False, "NUL character"),
    Variant("a Latin-1 byte", _extra(b'"caf\xe9"'), False, "not UTF-8"),
    Variant("a truncated UTF-8 sequence", _extra(b'"\xe2\x82"'), False, "not UTF-8"),
    Variant("a UTF-16 line", lambda g: g.encode("utf-16-le"), False, "NUL bytes"),
    Variant("trailing garbage", lambda g: g.encode() + b" junk", False, "invalid JSON"),
    Variant("a truncated line", lambda g: g[:-7].encode(), False, "invalid JSON"),
    Variant("an array", lambda g: b"[" + g.encode() + b"]", False, "expected a JSON object"),
    Variant("a bare string", lambda g: json.dumps(g).encode(), False, "expected a JSON object"),
    Variant("a lone high surrogate", _extra(r'"\ud800"'), True, "lone UTF-16 surrogates"),
    Variant("a lone low surrogate", _extra(r'"x\udfff"'), True, "lone UTF-16 surrogates"),
    Variant("a surrogate in a key", _extra(r'{"\udbff": 1}'), True, "lone UTF-16 surrogates"),
    Variant("an escaped surrogate pair", _extra(r'"\ud83d\ude00"'), True),
    Variant("an infinite number", _extra("1e999"), True),
    Variant("nesting 60 deep", _extra("[" * 59 + "]" * 59), True),
    Variant("a 1 MB string", _extra(json.dumps("é" * 500_000)), True),
    Variant("a BOM mid-file", lambda g: "\ufeff".encode() + g.encode(), False, "invalid JSON"),
]


@dataclass(frozen=True)
class Kind:
    """A file kind: how its good lines look and how the CLI reads it."""

    name: str
    good: Callable[[str], dict[str, object]]  # id -> a good object

    def run(self, folder: Path, path: Path) -> tuple[str, set[str]]:
        """Invoke the command; return its stderr + stdout and the ids it took in."""
        raise NotImplementedError


def _item(i: str) -> dict[str, object]:
    return {
        "id": i,
        "text": f"Ada Lovelace met Charles Babbage ({i}).",
        "entities": [{"name": "Ada Lovelace", "type": "person"}],
        "relationships": [],
    }


class Upload(Kind):
    def run(self, folder: Path, path: Path) -> tuple[str, set[str]]:
        result = runner.invoke(app, ["datasets", "upload", "hostile", str(path)])
        assert result.exit_code == 0, result.output
        export = runner.invoke(app, ["datasets", "export", "hostile"])
        return result.output, {json.loads(x)["id"] for x in export.stdout.splitlines()}


class Gold(Kind):
    def run(self, folder: Path, path: Path) -> tuple[str, set[str]]:
        preds = folder / "preds.jsonl"
        preds.write_text("".join(json.dumps(_item(f"good-{n}")) + "\n" for n in range(GOOD * 40)))
        out = folder / "report.json"
        result = runner.invoke(app, ["score", "--gold", str(path), "--predictions", str(preds),
                                     "--format", "json", "--per-item", str(out)])  # fmt: skip
        assert result.exit_code == 0, result.output
        report = json.loads(result.stdout)
        ids = {json.loads(x)["id"] for x in out.read_text().splitlines()}
        return "\n".join(report["warnings"]), ids


class Predictions(Kind):
    def run(self, folder: Path, path: Path) -> tuple[str, set[str]]:
        gold = folder / "gold.jsonl"  # every id of the file: good-N and bad-LINE
        count = len(path.read_bytes().splitlines())
        ids = [f"good-{n}" for n in range(count)] + [f"bad-{n}" for n in range(1, count + 1)]
        gold.write_text("".join(json.dumps(_item(i)) + "\n" for i in ids))
        out = folder / "items.jsonl"
        result = runner.invoke(app, ["score", "--gold", str(gold), "--predictions", str(path),
                                     "--format", "json", "--per-item", str(out)])  # fmt: skip
        assert result.exit_code == 0, result.output
        report = json.loads(result.stdout)
        read = {json.loads(x)["id"] for x in out.read_text().splitlines() if '"failed": false' in x}
        return "\n".join(report["warnings"]), read


class Overrides(Kind):
    def run(self, folder: Path, path: Path) -> tuple[str, set[str]]:
        result = runner.invoke(app, ["gold", "override", "ds", "--file", str(path)])
        assert result.exit_code == 0, result.output
        from extraction_eval.backends.local import LocalStore

        with LocalStore() as store:
            ids = {o.item_id for o in store.gold_overrides("ds")}
        return result.output, ids


def _override(i: str) -> dict[str, object]:
    return {"item_id": i, "action": "remove", "kind": "entity", "target": "Ada", "reason": "r"}


KINDS = {
    "datasets upload": Upload("datasets upload", _item),
    "score gold": Gold("score gold", _item),
    "score predictions": Predictions("score predictions", _item),
    "gold overrides": Overrides("gold overrides", _override),
}


@functools.cache
def _outcome(kind_name: str, folder: Path) -> tuple[str, set[str], dict[str, int]]:
    """Write the file (good lines around every variant), read it once through the CLI."""
    kind = KINDS[kind_name]
    lines: list[bytes] = []
    where: dict[str, int] = {}
    n = 0
    for variant in VARIANTS:
        for _ in range(GOOD):
            lines.append(json.dumps(kind.good(f"good-{n}")).encode())
            n += 1
        where[variant.name] = len(lines) + 1
        lines.append(variant.line(json.dumps(kind.good(f"bad-{len(lines) + 1}"))))
    lines.extend(json.dumps(kind.good(f"good-{n + k}")).encode() for k in range(GOOD))
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "hostile.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    output, ids = kind.run(folder, path)
    return output, ids, where


@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("variant", VARIANTS, ids=[v.name for v in VARIANTS])
def test_a_hostile_line_costs_only_itself(
    kind: str, variant: Variant, tally: Tally, tmp_path_factory: pytest.TempPathFactory
) -> None:
    output, ids, where = _outcome(kind, tmp_path_factory.getbasetemp() / f"jsonl-{kind}")
    number = where[variant.name]
    own = [line for line in output.splitlines() if re.search(rf"hostile\.jsonl:{number}\b", line)]
    good = {i for i in ids if i.startswith("good-")}
    expected_good = GOOD * (len(VARIANTS) + 1)
    held = len(good) == expected_good and "Traceback" not in output
    if variant.kept:
        held = held and f"bad-{number}" in ids and not any("skipped" in w for w in own)
        if variant.note:
            held = held and len(own) == 1 and variant.note in own[0]
    else:
        held = held and f"bad-{number}" not in ids and len(own) == 1
        held = held and own[0].rstrip().endswith("; skipped") and variant.note in own[0]
    tally.input(held=held)
    assert held, (variant.name, own, len(good), expected_good)


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-be"])
def test_a_file_with_a_byte_order_mark_is_read_whole(
    encoding: str, tmp_path: Path, tally: Tally
) -> None:
    path = tmp_path / "bom.jsonl"
    text = "".join(json.dumps(_item(f"i{n}"), ensure_ascii=False) + "\n" for n in range(5))
    data = text.encode(encoding)
    if encoding == "utf-16-be":
        data = b"\xfe\xff" + data
    path.write_bytes(data)
    result = runner.invoke(app, ["datasets", "upload", "bom", str(path)])
    held = result.exit_code == 0 and "5 created" in result.output and "warning" not in result.output
    tally.input(held=held)
    assert held, result.output
