"""The fenced blocks of README.md and docs/*.md, read the way the docs tests need them.

A block is *code* when it is ``bash`` / ``shell`` / ``sh`` / ``console`` / ``python``, or a
``text`` / unlabelled block whose first line is a ``$ command`` (a terminal session). Code runs
in the docs test unless an HTML comment on the line before the fence marks it
(``<!-- docs-test: needs-keys -->``; several marks are separated by commas):

- ``needs-keys`` (a model or LangFuse key), ``needs-server`` (a local model or LangFuse
  server), ``needs-files`` (files a reader brings: their own data, a config), ``slow`` (more
  than the suite's budget), ``synopsis`` (placeholders such as ``A B`` or ``FILE``): the block
  is not run; its command lines are still parsed against the real CLI, a Python block is
  compiled and its ``extraction_eval`` imports are resolved;
- ``shared-data``: runs only when ``../shared/data`` exists (skipped otherwise);
- ``exit=N``: the block ends with exit code N (0 by default);
- ``columns=N``: the block runs in a terminal N columns wide (100 by default), for output whose
  layout depends on the width;
- ``output`` (on a ``text`` / unlabelled block): the output of the code block before it,
  compared with what that block prints.

Quoted output is compared robustly: every quoted line must appear in the output, in order,
with runs of spaces and of table rules counted as one (so a table at another width or a line
wrapped elsewhere still matches); ``...`` skips lines; figures that change from one run to the
next (latencies, durations, a file's size, ids, times, temporary paths) are masked on both sides.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# made by scripts/gen_docs.py (index.md is the README): their blocks are the README's, or help
GENERATED = frozenset({ROOT / "docs" / "index.md", ROOT / "docs" / "cli.md"})
ENTRY = {"extraction-eval": (), "run-experiment": ("run",), "seed-from-trace": ("seed",)}
SHELL = {"bash", "shell", "sh", "console"}
NOT_RUN = {"needs-keys", "needs-server", "needs-files", "slow", "synopsis"}
MARKS = NOT_RUN | {"shared-data", "output", "run"}
MARK = re.compile(r"<!-- docs-test(?::\s*(.*?))?\s*-->")
FENCE = re.compile(r"^(\s*)```(\S*)\s*$")


@dataclass(frozen=True)
class Block:
    """One fenced block: where it is, its language, its text and its marks."""

    page: Path
    line: int  # 1-based line of the first code line
    lang: str
    code: str
    marks: frozenset[str] = frozenset()
    exit: int = 0
    columns: int | None = None  # ``columns=N``: the terminal width the output was taken at
    bad_marks: tuple[str, ...] = field(default=())

    @property
    def where(self) -> str:
        return f"{self.page.name}:{self.line}"

    @property
    def kind(self) -> str:
        """``shell``, ``console``, ``python``, ``output`` or ``other``."""
        first = next((ln for ln in self.code.splitlines() if ln.strip()), "")
        if "output" in self.marks:
            return "output"
        if self.lang == "console" or (self.lang in ("", "text") and first.startswith("$ ")):
            return "console"
        if self.lang in SHELL:
            return "shell"
        if self.lang == "python":
            return "python"
        return "other"

    @property
    def runs(self) -> bool:
        return self.kind in ("shell", "console", "python") and not self.marks & NOT_RUN


def blocks(page: Path) -> list[Block]:
    """Every fenced block of a page, with the marks on the line before it."""
    lines = page.read_text(encoding="utf-8").splitlines()
    out: list[Block] = []
    i = 0
    while i < len(lines):
        fence = FENCE.match(lines[i])
        if not fence:
            i += 1
            continue
        mark = MARK.fullmatch(lines[i - 1].strip()) if i else None
        words = [w.strip() for w in (mark.group(1) or "run").split(",")] if mark else []
        start, body = i + 1, []
        i += 1
        while i < len(lines) and not re.match(r"^\s*```\s*$", lines[i]):
            body.append(lines[i][len(fence.group(1)) :])
            i += 1
        exits = [int(w[5:]) for w in words if re.fullmatch(r"exit=\d+", w)]
        widths = [int(w[8:]) for w in words if re.fullmatch(r"columns=\d+", w)]
        names = [w for w in words if not re.fullmatch(r"(exit|columns)=\d+", w)]
        out.append(
            Block(
                page=page,
                line=start + 1,
                lang=fence.group(2),
                code="\n".join(body),
                marks=frozenset(names),
                exit=exits[0] if exits else 0,
                columns=widths[0] if widths else None,
                bad_marks=tuple(w for w in names if w not in MARKS),
            )
        )
        i += 1
    return out


@dataclass(frozen=True)
class Step:
    """One ``$ command`` of a terminal session and the output quoted under it."""

    command: str
    quoted: tuple[str, ...]

    @property
    def expected_exit(self) -> int | None:
        """``[exit N]`` quoted: N; an ``error:`` line quoted: any failure (None); else 0."""
        for line in self.quoted:
            found = re.fullmatch(r"\[exit (\d+)\]", line.strip())
            if found:
                return int(found.group(1))
        if any(line.strip().startswith("error:") for line in self.quoted):
            return None
        return 0


def console_steps(code: str) -> list[Step]:
    """A terminal session's commands (continuation lines joined) and their quoted output."""
    steps: list[Step] = []
    command: list[str] = []
    quoted: list[str] = []
    lines = code.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("$ "):
            if command:
                steps.append(Step("\n".join(command), tuple(quoted)))
            command, quoted = [line[2:]], []
            while command[-1].endswith("\\") and i + 1 < len(lines):
                i += 1
                command.append(lines[i])
        else:
            quoted.append(line)
        i += 1
    if command:
        steps.append(Step("\n".join(command), tuple(quoted)))
    return steps


def shell_text(block: Block) -> str:
    """The shell code of a block: a session's commands, or the block as written."""
    if block.kind == "console":
        return "\n".join(step.command for step in console_steps(block.code))
    return block.code


def commands(code: str) -> list[list[str]]:
    """Our CLI's invocations in shell code: continuations joined, comments, env prefixes and
    optional ``[...]`` parts dropped, ``&&`` chains split, heredoc bodies skipped."""
    out = []
    joined = re.sub(r"\\\n\s*", " ", code)
    heredoc: str | None = None
    for raw in joined.splitlines():
        if heredoc is not None:
            heredoc = None if raw.strip() == heredoc else heredoc
            continue
        found = re.search(r"<<-?\s*'?\"?(\w+)", raw)
        if found:
            heredoc = found.group(1)
        line = re.sub(r"\s\[[^\]]*\]", "", raw)
        for part in line.split("&&"):
            try:
                words = shlex.split(part, comments=True)
            except ValueError:
                continue
            while words and re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", words[0]):
                words = words[1:]
            if words and Path(words[0]).name in ENTRY:
                out.append([Path(words[0]).name, *words[1:]])
    return out


# figures that differ between two runs of the same command: masked on both sides
VOLATILE = [
    (re.compile(r"(latency p50 / p95 ms)\s+[\d.]+ / [\d.]+"), r"\1 # / #"),
    (re.compile(r"\(\d+(\.\d+)? MB\)"), "(# MB)"),
    (re.compile(r"\b\d+(\.\d+)?s\)"), "#s)"),
    (re.compile(r"\b[0-9a-f]{16,}\b"), "<id>"),
    (re.compile(r"\d{4}-\d\d-\d\dT[\d:.]+(\+00:00|Z)?"), "<time>"),
    (re.compile(r"\d{8}T\d{6}Z"), "<time>"),
    (re.compile(r"pid \d+"), "pid #"),
    (re.compile(r"/tmp/\S+"), "<tmp>"),
    (re.compile(r"(genai-prices) \d+\.\d+\.\d+"), r"\1 #"),
]
RULES = re.compile(r"([─━═┈-])\1+")


def normalise(text: str) -> str:
    """One line of text as the comparison sees it: volatile figures masked, runs of spaces and
    of a table rule's character counted as one."""
    for pattern, replacement in VOLATILE:
        text = pattern.sub(replacement, text)
    return " ".join(RULES.sub(r"\1", text).split())


def missing_lines(quoted: list[str] | tuple[str, ...], output: str) -> list[str]:
    """The quoted lines that do not appear in ``output`` in order (each found from where the
    previous one ended, whole words only); ``...`` lines and blank lines are skipped."""
    flat = f" {normalise(' '.join(output.splitlines()))} "
    position = 0
    missing = []
    for line in quoted:
        want = normalise(line)
        if not want or want in ("...", "…") or re.fullmatch(r"\[exit \d+\]", want):
            continue
        at = flat.find(f" {want} ", position)
        if at < 0:
            missing.append(line)
        else:
            position = at + len(want) + 1
    return missing
