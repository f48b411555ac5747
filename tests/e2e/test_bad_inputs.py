"""Every bad option value of every command: exit 2, one ``error:`` line naming the option, no
traceback or rich panel, nothing persisted. Driven through the real entry points (``main``,
``run_experiment_main``, ``seed_from_trace_main``), which turn typer usage errors into one line.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable, Iterator
from itertools import islice
from pathlib import Path

import pytest

from extraction_eval.backends.local import LocalStore
from extraction_eval.cli import main, run_experiment_main, seed_from_trace_main
from extraction_eval.experiments import local_mode as run_module

PIPE = "tests.support.pipelines:first_entity"
BOX = ("╭", "│", "╰", "Traceback")

Entry = Callable[[], object]


@pytest.fixture(autouse=True)
def _restore_environ() -> Iterator[None]:
    """The entry points read ``.env`` (``_startup``; logging is restored by the root
    conftest); later tests must not inherit its variables."""
    environ = dict(os.environ)
    yield
    for name in set(os.environ) - set(environ):
        del os.environ[name]
    os.environ.update(environ)


def _call(
    entry: Entry, argv: list[str], capsys: pytest.CaptureFixture[str]
) -> tuple[int, str, str]:
    """Exactly what the console script does: ``sys.argv`` in, ``SystemExit`` out."""
    with pytest.MonkeyPatch.context() as mp, pytest.raises(SystemExit) as info:
        mp.setattr(sys, "argv", ["prog", *argv])
        entry()
    captured = capsys.readouterr()
    code = info.value.code
    return (code if isinstance(code, int) else 1), captured.out, captured.err


@pytest.fixture
def files(tmp_path: Path) -> dict[str, str]:
    good = tmp_path / "good.jsonl"
    good.write_text('{"id": "a", "text": "Ann", "entities": []}\n', encoding="utf-8")
    return {
        "GOOD": str(good),
        "DIR": str(tmp_path),
        "MISSING": str(tmp_path / "missing.jsonl"),
        "NODIR": str(tmp_path / "no-such-dir" / "out.jsonl"),
    }


EE, RUN, SEED = "extraction-eval", "run-experiment", "seed-from-trace"
ENTRIES: dict[str, Entry] = {EE: main, RUN: run_experiment_main, SEED: seed_from_trace_main}

# (entry point, argv, what the error line must name). GOOD/DIR/MISSING/NODIR are paths.
CASES: list[tuple[str, list[str], str]] = [
    # typer's own usage errors: one line, not a panel
    (EE, ["nosuchcmd"], "nosuchcmd"),
    (EE, ["run", "--nope"], "--nope"),
    (EE, ["run", "--temperature", "hot"], "--temperature"),
    (EE, ["run", "--concurrency", "1.5"], "--concurrency"),
    (EE, ["runs", "show"], "name"),
    (EE, ["compare", "a"], "run_b"),
    # run
    (EE, ["run", "--timeout", "-1"], "--timeout"),
    (EE, ["run", "--timeout", "0"], "--timeout"),
    (EE, ["run", "--timeout", "nan"], "--timeout"),
    (EE, ["run", "--timeout", "inf"], "--timeout"),
    (EE, ["run", "--max-attempts", "0"], "--max-attempts"),
    (EE, ["run", "--max-attempts", "-2"], "--max-attempts"),
    (EE, ["run", "--concurrency", "0"], "--concurrency"),
    (EE, ["run", "--limit", "0"], "--limit"),
    (EE, ["run", "--limit", "-3"], "--limit"),
    (EE, ["run", "--temperature", "-0.5"], "--temperature"),
    (EE, ["run", "--temperature", "nan"], "--temperature"),
    (EE, ["run", "--temperature", "inf"], "--temperature"),
    (EE, ["run", "--threshold", "1.5"], "--threshold"),
    (EE, ["run", "--threshold", "nan"], "--threshold"),
    (EE, ["run", "--match", "regex"], "--match"),
    (EE, ["run", "--backend", "cloud"], "--backend"),
    (EE, ["run", "--base-url", "localhost:8000/v1"], "--base-url"),
    (EE, ["run", "--name", ""], "--name"),
    (EE, ["run", "--dataset", " "], "--dataset"),
    (EE, ["run", "--model", ""], "--model"),
    (EE, ["run", "--prompt-name", ""], "--prompt-name"),
    (EE, ["run", "--prompt-label", ""], "--prompt-label"),
    (EE, ["run", "--pipeline", "no_colon"], "--pipeline"),
    (EE, ["run", "--fail-under", "entity_f1=1.5"], "--fail-under"),
    (EE, ["run", "--fail-under", "entity_f1=-0.1"], "--fail-under"),
    (EE, ["run", "--fail-under", "error_rate=0.1"], "--fail-under"),  # lower is better
    (EE, ["run", "--fail-over", "error_rate=2"], "--fail-over"),
    (EE, ["run", "--fail-over", "entity_f1=0.5"], "--fail-over"),  # higher is better
    (EE, ["run", "--fail-under", "entity_f1_ci_low=1.2"], "--fail-under"),
    (EE, ["run", "--fail-over", "hallucination_rate=-1"], "--fail-over"),
    (EE, ["run", "--fail-under", "entity_f1=nan"], "--fail-under"),
    (EE, ["run", "--fail-under", "entity_f1=inf"], "--fail-under"),
    (EE, ["run", "--fail-under", "entity_f1"], "--fail-under"),
    (EE, ["run", "--fail-under", "entity_f1=high"], "--fail-under"),
    (EE, ["run", "--fail-under", "nope=0.5"], "--fail-under"),
    (EE, ["run", "--prompt-version", "0"], "--prompt-version"),
    (EE, ["run", "--prompt-version", "one"], "--prompt-version"),
    (EE, ["run", "--prompt-label", "staging"], "--prompt-label"),  # the baseline sends no prompt
    (EE, ["run", "--price-in", "1"], "--price-out"),
    (EE, ["run", "--price-out", "1"], "--price-in"),
    (EE, ["run", "--price-in", "-1", "--price-out", "1"], "--price-in"),
    (EE, ["run", "--price-in", "1", "--price-out", "nan"], "--price-out"),
    (EE, ["run", "--fail-under", "attr.=0.5"], "--fail-under"),
    (EE, ["run", "--fail-under", "attr.polarity=1.5"], "--fail-under"),
    (EE, ["run", "--fail-under", "attr.nosuchkey=0.5"], "--fail-under"),  # not in the dataset
    (EE, ["runs", "show", "x", "--category", "nosuchcategory"], "--category"),
    (EE, ["runs", "show", "x", "--worst", "--category", "nosuchcategory"], "--category"),
    (EE, ["runs", "show", "x", "--worst", "--limit", "0"], "--limit"),
    (EE, ["runs", "show", "x", "--worst", "--limit", "many"], "--limit"),
    (EE, ["runs", "show", "x", "--page", "0"], "--page"),
    (EE, ["runs", "show", "x", "--all", "--page", "2"], "--all"),
    (EE, ["runs", "show", "x", "--all", "--worst"], "--all"),
    (EE, ["runs", "show", "x", "--by-category"], "--by-category"),
    (EE, ["runs", "show", "x", "--worst", "--by-category", "--category", "missed"], "--by-"),
    (EE, ["run", "--shard", "0/2"], "--shard"),  # shards are numbered from 1
    (EE, ["run", "--shard", "3/2"], "--shard"),
    (EE, ["run", "--shard", "1/0"], "--shard"),
    (EE, ["run", "--shard", "half"], "--shard"),
    (RUN, ["--shard", "2"], "--shard"),
    (EE, ["runs", "merge", "x"], "--from"),
    (EE, ["runs", "merge", "x", "--from", "MISSING"], "--from"),
    (EE, ["runs", "merge", "x", "--from", "DIR"], "--from"),
    (EE, ["runs", "finalize", "x", "--fail-under", "nope=0.5"], "--fail-under"),
    (EE, ["prompts", "show", "--version", "0"], "--version"),
    (EE, ["run", "--max-cost", "-1"], "--max-cost"),
    (EE, ["run", "--max-cost", "nan"], "--max-cost"),
    (EE, ["run", "--max-cost", "lots"], "--max-cost"),
    (EE, ["run", "--pipeline", PIPE, "--max-cost", "1"], "--max-cost"),  # cost unknowable
    (RUN, ["--max-cost", "inf", "--dry-run"], "--max-cost"),
    (RUN, ["--timeout", "-1"], "--timeout"),
    (RUN, ["--temperature", "hot"], "--temperature"),
    (RUN, ["--max-attempts", "0"], "--max-attempts"),
    # matrix: every cell is checked before the first one is created
    (EE, ["matrix"], "--model"),
    (EE, ["matrix", "--model", "fake:a", "--model", "fake:a"], "--model"),
    (EE, ["matrix", "--model", "fake:a", "--temperature", "0", "--temperature", "0.0"], "--temp"),
    (EE, ["matrix", "--model", "fake:a", "--temperature", "-1"], "--temperature"),
    (EE, ["matrix", "--model", "fake:a", "--temperature", "hot"], "--temperature"),
    (EE, ["matrix", "--model", "fake:a", "--prompt-label", ""], "--prompt-label"),
    (EE, ["matrix", "--model", "fake:a", "--repeats", "0"], "--repeats"),
    (EE, ["matrix", "--model", "fake:a", "--resume"], "--resume"),  # needs --name
    (EE, ["matrix", "--model", "fake:a", "--concurrency", "0"], "--concurrency"),
    (EE, ["matrix", "--model", "fake:a", "--match", "regex"], "--match"),
    (EE, ["matrix", "--model", "fake:a", "--config", "MISSING"], "--config"),
    (EE, ["matrix", "--model", "fake:a", "--config", "GOOD"], "--config"),  # not TOML
    (EE, ["matrix", "--model", "fake:a", "--prompt-label", "nosuch"], "prompt"),
    (EE, ["matrix", "--model", "offline:baseline", "--prompt-label", "x"], "--prompt-label"),
    # the second model is refused after the first cell was prepared: nothing is kept
    (EE, ["matrix", "--model", "fake:a", "--model", "nope:x", "--limit", "2"], "nope"),
    (EE, ["matrix", "--model", "fake:a", "--shard", "3/2"], "--shard"),
    # the matrix's estimate (all cells summed) is above --max-cost: refused, nothing kept
    (
        EE,
        [
            "matrix",
            "--model",
            "fake:a",
            "--model",
            "fake:b",
            "--price-in",
            "1000",
            "--price-out",
            "1000",
            "--max-cost",
            "0.5",
            "--limit",
            "2",
        ],
        "--max-cost",
    ),
    # score
    (EE, ["score", "--gold", "MISSING", "--predictions", "GOOD"], "--gold"),
    (EE, ["score", "--gold", "GOOD", "--predictions", "DIR"], "--predictions"),
    (EE, ["score", "--out", "NODIR", "--resamples", "0"], "--out"),
    (EE, ["score", "--per-item", "DIR", "--resamples", "0"], "--per-item"),
    (EE, ["score", "--threshold", "nan"], "--threshold"),
    (EE, ["score", "--span-threshold", "inf"], "--span-threshold"),
    (EE, ["score", "--resamples", "-1"], "--resamples"),
    (EE, ["score", "--seed", "-1"], "--seed"),
    (EE, ["score", "--seed", "abc"], "--seed"),
    (EE, ["score", "--format", "xml"], "--format"),
    (EE, ["score", "--match", "regex"], "--match"),
    (EE, ["score", "--evidence", "loose"], "--evidence"),
    # compare / runs
    (EE, ["compare", "a", "b", "--top", "-1"], "--top"),
    (EE, ["compare", "a", "b", "--top", "many"], "--top"),
    (EE, ["compare", "a", "b", "--resamples", "0"], "--resamples"),
    (EE, ["compare", "a", "b", "--seed", "-1"], "--seed"),
    (EE, ["compare", "a", "b", "--format", "xml"], "--format"),
    (EE, ["compare", "a", "b", "--fail-on-regression", "entity_f2=0.1"], "--fail-on-regression"),
    (EE, ["compare", "a", "b", "--fail-on-regression", "entity_f1"], "--fail-on-regression"),
    (EE, ["compare", "a", "b", "--fail-on-regression", "entity_f1=x"], "--fail-on-regression"),
    (EE, ["compare", "a", "b", "--fail-on-regression", "entity_f1=-0.1"], "--fail-on-regression"),
    (EE, ["compare", "a", "b", "--fail-on-regression", "error_rate=1.5"], "--fail-on-regression"),
    (EE, ["run", "--fail-on-regression", "entity_f1=0.1"], "--baseline"),
    (EE, ["run", "--baseline", "nope"], "--baseline"),
    (EE, ["run", "--baseline", "nope", "--fail-on-regression", "f1=0.1"], "--fail-on-regression"),
    (RUN, ["--baseline", "nope", "--fail-on-regression", "entity_f1=nan"], "--fail-on-regression"),
    (EE, ["runs", "export", "r", "--out", "NODIR"], "--out"),
    (EE, ["runs", "export", "r", "--out", "DIR"], "--out"),
    (EE, ["runs", "export", "r", "--format", "xml"], "--format"),
    # datasets
    (EE, ["datasets", "upload", " "], "NAME"),
    (EE, ["datasets", "upload", "d", "MISSING"], "FILE"),
    (EE, ["datasets", "upload", "d", "DIR"], "FILE"),
    (EE, ["datasets", "show", "extraction-eval", "--limit", "-1"], "--limit"),
    (EE, ["datasets", "show", "extraction-eval", "--version", "abc"], "--version"),
    (EE, ["datasets", "export", "extraction-eval", "--version", "-1"], "--version"),
    (EE, ["datasets", "export", "extraction-eval", "--out", "NODIR"], "--out"),
    (EE, ["datasets", "export", "extraction-eval", "--out", "DIR"], "--out"),
    # prompts
    (EE, ["prompts", "push", "--label", ""], "--label"),
    (EE, ["prompts", "push", "--name", " "], "--name"),
    (EE, ["prompts", "show", "--version", "0"], "--version"),
    (EE, ["prompts", "show", "--version", "x"], "--version"),
    (EE, ["prompts", "show", "--label", ""], "--label"),
    # seed (options are checked before LangFuse is needed)
    (EE, ["seed", "--since", "yesterday"], "--since"),
    (EE, ["seed", "--score", "no_equals"], "--score"),
    (EE, ["seed", "--tag", "x", "--dataset", ""], "--dataset"),
    (EE, ["seed", "--tag", ""], "--tag"),
    (EE, ["seed", "--tag", "x", "--input-path", "a..b"], "--input-path"),
    (EE, ["seed", "--tag", "x", "--output-path", "."], "--output-path"),
    (EE, ["seed"], "--tag"),
    (SEED, ["--since", "soon"], "--since"),
]


@pytest.mark.parametrize(
    ("entry", "argv", "option"), CASES, ids=[f"{e}:{' '.join(a)}" for e, a, _ in CASES]
)
def test_bad_value_is_one_error_line_exit_2_and_nothing_persisted(
    entry: str,
    argv: list[str],
    option: str,
    files: dict[str, str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = [files.get(a, a) for a in argv]
    before = [d.name for d in LocalStore().list_datasets()]
    code, out, err = _call(ENTRIES[entry], argv, capsys)
    assert code == 2, err
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("error: ") and option in lines[0], err
    assert not any(mark in err for mark in BOX), err
    assert out == ""
    store = LocalStore()
    assert store.list_runs() == []
    assert [d.name for d in store.list_datasets()] == before
    assert not Path(files["NODIR"]).parent.exists()


# The library names API fields (in its problem text too); the CLI shows each as its flag.
FLAGGED: list[tuple[list[str], tuple[str, ...]]] = [
    (
        ["run", "--pipeline", PIPE, "--max-cost", "1"],
        ("error: --max-cost cannot be checked", "give prices with --price-in/--price-out"),
    ),
    (["matrix", "--model", "fake:a", "--resume"], ("error: --resume needs the matrix's --name",)),
    (
        ["datasets", "show", "extraction-eval", "--version", "abc"],
        ("error: --version must be a number for a local dataset, got 'abc'",),
    ),
]


@pytest.mark.parametrize(("argv", "parts"), FLAGGED, ids=[" ".join(a) for a, _ in FLAGGED])
def test_the_cli_names_the_flags_the_library_names_as_fields(
    argv: list[str], parts: tuple[str, ...], capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = _call(main, argv, capsys)
    assert code == 2 and err.count("\n") == 1, err
    assert err.startswith(parts[0]) and all(p in err for p in parts), err


def test_help_still_works(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _call(main, ["run", "--help"], capsys)
    assert code == 0 and "--max-attempts" in out
    code, out, _ = _call(run_experiment_main, ["--help"], capsys)
    assert code == 0 and "--fail-under" in out


def test_bad_log_level_env_is_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("EXTRACTION_EVAL_LOG_LEVEL", "loud")
    code, _, err = _call(main, ["runs", "list"], capsys)
    assert code == 2 and err.count("\n") == 1
    assert err.startswith("error: EXTRACTION_EVAL_LOG_LEVEL") and "Traceback" not in err


# --- a setup failure leaves no stuck run ----------------------------------------------------

SETUP_FAILURES: list[tuple[list[str], str]] = [
    (["--model", "nope:x"], "unknown model provider"),
    (["--model", "openai:gpt-4o-mini"], "OPENAI_API_KEY"),
    (["--pipeline", "nosuchmod:fn"], "--pipeline 'nosuchmod:fn': cannot import"),
    # the library names the config field; the CLI shows the flag
    (["--model", "openai:"], "--model 'openai:' names no model"),
    (["--model", "compatible:qwen"], "--base-url is required for 'compatible:qwen'"),
    (["--max-attempts", "0"], "--max-attempts"),
]


@pytest.mark.parametrize(("bad", "message"), SETUP_FAILURES, ids=[b[1] for b in SETUP_FAILURES])
def test_setup_failure_leaves_no_run_and_the_name_is_free(
    bad: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    base = ["run", "--name", "same", "--limit", "2"]
    code, _, err = _call(main, [*base, *bad], capsys)
    assert code != 0 and len(err.splitlines()) == 1 and message in err, err
    assert LocalStore().list_runs() == []
    code, out, _ = _call(main, ["runs", "list"], capsys)
    assert code == 0 and "same" not in out
    code, _, err = _call(main, [*base, "--pipeline", PIPE], capsys)  # no --resume needed
    assert code == 0, err
    [run] = LocalStore().list_runs()
    assert run.name == "same" and run.status == "finished"


def test_a_run_that_dies_before_its_first_item_is_deleted(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    async def interrupted(*_: object, **__: object) -> None:
        raise KeyboardInterrupt  # Ctrl-C after the run was created, before any item ended

    real = run_module.run_bounded
    monkeypatch.setattr(run_module, "run_bounded", interrupted)
    code, _, err = _call(main, ["run", "--name", "early", "--limit", "2"], capsys)
    assert code == 130 and err.splitlines()[-1].startswith("error: interrupted"), err
    assert LocalStore().list_runs() == []
    monkeypatch.setattr(run_module, "run_bounded", real)
    code, _, err = _call(main, ["run", "--name", "early", "--limit", "2"], capsys)
    assert code == 0, err


def test_an_interrupted_run_with_results_is_kept(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    real = run_module.run_bounded

    async def one_then_interrupt(todo: Iterable[object], *args: object, **kwargs: object) -> None:
        await real(islice(todo, 1), *args, **kwargs)  # type: ignore[arg-type]
        raise KeyboardInterrupt

    monkeypatch.setattr(run_module, "run_bounded", one_then_interrupt)
    code, _, _ = _call(main, ["run", "--name", "half", "--limit", "3"], capsys)
    assert code == 130
    [run] = LocalStore().list_runs()
    assert run.status == "interrupted" and len(LocalStore().results(run.id)) == 1


def test_a_bad_shard_says_how_shards_are_numbered(capsys: pytest.CaptureFixture[str]) -> None:
    """Not typer's "no such option": the run command knows --shard and explains it."""
    code, _, err = _call(main, ["run", "--shard", "0/2"], capsys)
    assert code == 2 and err.strip() == (
        "error: --shard expects I/N with 1 <= I <= N (shards are numbered from 1, e.g. 1/4),"
        " got 0/2"
    )
    code, _, err = _call(main, ["runs", "merge", "x", "--from", "nope.db"], capsys)
    assert code == 2 and err.strip() == "error: --from nope.db: file not found"
