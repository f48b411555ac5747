"""What every command shares: consoles and turning domain errors into one line + exit code."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, NoReturn, ParamSpec, TypeVar

import typer
from rich.markup import escape

from extraction_eval.errors import ExtractionEvalError, InvalidValue, UsageError, one_line
from extraction_eval.views.console import SafeConsole

if TYPE_CHECKING:  # annotations only: --help loads no store, judge or analysis
    from extraction_eval.analysis.compare.ppi import RunPPI
    from extraction_eval.backends.local import LocalStore, RunRecord
    from extraction_eval.evaluators.protocols import Protocols
    from extraction_eval.judge.base import Judge

# every command prints through these: text from outside cannot drive the terminal
console = SafeConsole()
err_console = SafeConsole(stderr=True)

P = ParamSpec("P")
R = TypeVar("R")


# Options the statistics share across commands (docs/statistics.md); --ci is in options.py.
CorrectionOpt = Annotated[
    str,
    typer.Option(
        help="Many comparisons at once: holm (family-wise error) | bh (false discovery rate)"
        " | none.",
    ),
]
MinItemsOpt = Annotated[
    int,
    typer.Option(help="Fewer paired items than this: every verdict is 'insufficient'."),
]


# One --format vocabulary for what a command prints: table (for people) | json (for programs),
# as `score` has always spelled it. "text", the old name of table on compare / power / gold
# review, is still accepted, with a note on stderr (stdout stays the table).
FORMATS = ("table", "json")
FormatOpt = Annotated[
    str,
    typer.Option(
        "--format", help="table (for people) | json (stdout); 'text' is table's old name."
    ),
]


def output_format(fmt: str) -> Literal["table", "json"]:
    """``--format`` checked before any work: ``table`` or ``json``; the old ``text`` is
    ``table``, said once on stderr so a script can be updated."""
    if fmt == "text":
        err_console.print(
            "note: --format text is now --format table (text still works)", highlight=False
        )
        return "table"
    if fmt not in FORMATS:
        fail(f"--format must be table or json, got {fmt!r}")
    return "json" if fmt == "json" else "table"


PpiOpt = Annotated[
    bool,
    typer.Option(
        "--ppi",
        help="Prediction-powered P/R/F1: model-voted gold corrected by --human's verified items.",
    ),
]
HumanOpt = Annotated[
    Path | None,
    typer.Option(
        "--human",
        help="JSONL of human-verified items (id, entities, relationships): a RANDOM sample.",
    ),
]


def check_ppi(ppi: bool, human: Path | None) -> None:
    """``--ppi`` needs ``--human`` (and the file readable) before any work."""
    if ppi and human is None:
        fail("--ppi needs --human FILE (the human-verified items, a random sample)")
    if human is not None:
        if not ppi:
            fail("--human is read with --ppi")
        check_readable("--human", human)


def check_protocol_options(names: list[str] | None, train: Path | None) -> None:
    """``--protocol`` names and ``--train`` (docred only, readable), before any work."""
    if names:
        from extraction_eval.evaluators.protocols import check_protocols

        try:
            check_protocols(names)
        except ValueError as exc:
            fail(f"--protocol: {exc}")
    if train is not None:
        if "docred" not in (names or []):
            fail("--train is used by --protocol docred (Ign F1); give both")
        check_readable("--train", train)


# What more than one command asks of stored runs, where it prints or names a flag (the rest
# is library code: ``analysis.judged_runs.judged_of_runs``); only cli imports the commands.


def protocols_of_run(
    store: LocalStore, run: RunRecord, names: list[str], train: Path | None
) -> Protocols:
    """One stored run's protocols (``evaluators.protocols.Protocols``); warnings on stderr."""
    from extraction_eval.analysis.protocols_run import run_protocols

    found = run_protocols(store, run, names, train=train)
    for warning in found.warnings:
        err_console.print(f"[yellow]warning:[/] {warning}", highlight=False, soft_wrap=True)
    return found


def judges_for(
    model: str | None,
    base_url: str | None,
    runs: int = 2,
    *,
    max_cost: float | None = None,
    prompt_label: str | None = None,
) -> list[Judge]:
    """``--judge``: one judge per run (each closes its client when done), built, and
    refused, before anything is read; with LangFuse keys set, a model judge's prompt is the
    LangFuse one at ``--judge-prompt-label`` (read once for all of them)."""
    if model is None:
        given = (("--judge-base-url", base_url), ("--max-cost", max_cost))
        for option, value in (*given, ("--judge-prompt-label", prompt_label)):
            if value is not None:
                raise UsageError(f"{option} needs --judge MODEL")
        return []
    if max_cost is not None and max_cost < 0:
        raise UsageError(f"--max-cost must be >= 0, got {max_cost:g}")
    from extraction_eval.judge.factory import make_judge
    from extraction_eval.judge.managed import judge_prompt_when_keyed
    from extraction_eval.judge.prompt import judge_prompt_label

    label = judge_prompt_label(prompt_label)
    judges = [make_judge(model, base_url=base_url) for _ in range(runs)]
    for line in judge_prompt_when_keyed(judges, label):
        err_console.print(line, highlight=False, soft_wrap=True, markup=False)
    return judges


def ppi_of_runs(store: LocalStore, runs: Sequence[RunRecord], human: Path) -> list[RunPPI]:
    """Each run's PPI-corrected P/R/F1 with the verified items of ``human``; the file's
    warnings on stderr before any run is read, then each run's."""
    from extraction_eval.analysis.compare.ppi import read_human_gold, run_ppi

    verified, warnings = read_human_gold(human)
    for warning in warnings:
        err_console.print(f"[yellow]warning:[/] {warning}", highlight=False, soft_wrap=True)
    out = [run_ppi(store, run, verified) for run in runs]
    for r in out:
        for warning in r.warnings:
            err_console.print(f"[yellow]warning:[/] {warning}", highlight=False, soft_wrap=True)
    return out


def warn_line(message: str) -> None:
    """One ``warning:`` line on stderr (e.g. a LangFuse record skipped while pulling)."""
    err_console.print(f"[yellow]warning:[/] {escape(message)}", highlight=False, soft_wrap=True)


def fail(message: str, code: int = 2) -> NoReturn:
    err_console.print(f"[red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


# Config fields whose command-line flag is not ``--`` + the field name with dashes.
_FLAGS = {"timeout_s": "--timeout", "runs": "RUN", "judge_model": "--judge", "new_name": "--name"}


def flag(field: str) -> str:
    """The command-line option for a config field (``max_attempts`` -> ``--max-attempts``)."""
    return _FLAGS.get(field, "--" + field.replace("_", "-"))


def error_line(exc: ExtractionEvalError) -> str:
    """The one line a user sees; a config field is shown as the flag they typed."""
    if isinstance(exc, InvalidValue):
        return f"{flag(exc.field)} {exc.problem_as(flag)}"
    return one_line(exc)


def judge_budget_line(reports: list[dict[str, Any]], max_cost: float | None) -> None:
    """One ``stopped: budget`` line on stderr when ``--max-cost`` left pairs unjudged (in
    ``reports``: judged blocks); the judged figures computed are printed and kept anyway."""
    refused = sum(int((r.get("stats") or {}).get("budget_refused") or 0) for r in reports)
    if max_cost is None or not refused:
        return
    calls = sum(int((r.get("stats") or {}).get("calls") or 0) for r in reports)
    cost = sum(float((r.get("stats") or {}).get("cost_usd") or 0.0) for r in reports)
    lines = [x for r in reports for x in (r.get("stats") or {}).get("error_examples") or []]
    why = next((x.split(";")[0] for x in lines if "budget" in x), "judge budget reached")
    err_console.print(
        f"[red]stopped: budget[/] --max-cost {max_cost:g}: {escape(why)}; {refused} pairs not"
        f" judged (counted as judge errors, never matches) after {calls} judge calls"
        f" (${cost:.4f}); the judged figures above are kept",
        highlight=False,
        soft_wrap=True,
    )


NO_CACHE_HELP = "Neither read nor write the response cache (every item calls the model)."
REFRESH_CACHE_HELP = "Call the model for every item and store the answers (no cache reads)."


def cache_mode(no_cache: bool, refresh_cache: bool) -> str:
    """``--no-cache`` / ``--refresh-cache`` as ``PipelineConfig.cache``."""
    if no_cache and refresh_cache:
        raise UsageError("--no-cache and --refresh-cache exclude each other; give one")
    return "off" if no_cache else "refresh" if refresh_cache else "use"


def check_writable(option: str, path: Path) -> None:
    """Refuse an output path before any work is done, so a typo costs nothing."""
    parent = path.parent if str(path.parent) else Path(".")
    problem = None
    if path.is_dir():
        problem = "is a directory"
    elif not parent.is_dir():
        problem = f"directory {parent} does not exist"
    elif not os.access(path if path.exists() else parent, os.W_OK):
        problem = "permission denied"
    elif _is_store_file(path):
        problem = "that is the local store (writing there would destroy it)"
    if problem:
        raise UsageError(f"{option} {path}: cannot write: {problem}")


def _is_store_file(path: Path) -> bool:
    """Whether ``path`` is the local store's database or one of its side files (by name
    after resolving links, or the same file under another name)."""
    from extraction_eval.backends.local import default_store_path
    from extraction_eval.backends.local.files import SIDE_FILES

    store = default_store_path()
    target = path.resolve()
    for file in (store, *(store.with_name(store.name + s) for s in SIDE_FILES)):
        if target == file.resolve():
            return True
        try:
            if path.exists() and file.exists() and os.path.samefile(path, file):
                return True
        except OSError:
            continue
    return False


def check_readable(option: str, path: Path) -> None:
    """Refuse an input path before anything is written or sent."""
    problem = None
    if not path.exists():
        problem = "file not found"
    elif path.is_dir():
        problem = "is a directory"
    elif not path.is_file():
        problem = "not a file"
    elif not os.access(path, os.R_OK):
        problem = "permission denied"
    if problem:
        raise UsageError(f"{option} {path}: {problem}")


def handle_errors(fn: Callable[P, R]) -> Callable[P, R]:
    """Domain errors become ``error: <one line>`` and their exit code; no traceback."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except ExtractionEvalError as exc:
            fail(error_line(exc), exc.exit_code)
        except KeyboardInterrupt:
            fail("interrupted; what finished is saved (runs: continue with --resume)", 130)

    return wrapper


def alias_settings(aliases: Path | None, no_aliases: bool, err: SafeConsole) -> dict[str, object]:
    """``--aliases FILE`` / ``--no-aliases`` as ``ScoringConfig`` fields; the table's skipped
    groups are one warning line each on ``err``."""
    if aliases is not None and no_aliases:
        raise UsageError("--aliases and --no-aliases exclude each other; give one")
    if no_aliases:
        return {"aliases": False}
    if aliases is None:
        return {}
    from extraction_eval.datasets.aliases import read_alias_table

    check_readable("--aliases", aliases)
    table = read_alias_table(aliases)
    for warning in table.warnings:
        err.print(f"[yellow]warning:[/] {escape(warning)}", highlight=False, soft_wrap=True)
    return {"aliases": True, "alias_groups": tuple(tuple(g) for g in table.groups)}
