"""``--help`` stays fast: importing the CLI loads no heavy library (an import check, not a
timing).

Each command imports the library it calls inside its body, and the package root re-exports its
types lazily, so ``extraction-eval --help`` pays for typer and rich only: not numpy/scipy (the
scorers), the provider SDKs, langfuse, nor pydantic (building the types' models costs more CPU
than typer and rich together). The check runs in a fresh interpreter: this test process has long
since imported everything.
"""

from __future__ import annotations

import json
import subprocess
import sys

from typer.testing import CliRunner

from extraction_eval.cli import _seed_app, app
from extraction_eval.commands import datasets as datasets_cmd
from extraction_eval.commands import prompts as prompts_cmd
from extraction_eval.commands import seed as seed_cmd
from extraction_eval.datasets.bundled import JOURNAL_DATASET
from extraction_eval.prompts.template import PROMPT_NAME
from extraction_eval.seeds.from_trace import DEFAULT_DATASET

HEAVY = (
    "scipy",
    "numpy",
    "openai",
    "google.genai",
    "langfuse",
    "rapidfuzz",
    "genai_prices",
    "pydantic",
)

_PROBE = (
    "import json, sys\n"
    "import extraction_eval.cli\n"
    f"print(json.dumps(sorted(m for m in {list(HEAVY)!r} if m in sys.modules)))\n"
)


def test_importing_the_cli_loads_no_heavy_library() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE], capture_output=True, text=True, check=True, timeout=60
    )
    loaded = json.loads(done.stdout)
    assert loaded == [], f"importing extraction_eval.cli loaded {loaded}"


def test_the_probe_sees_a_heavy_import() -> None:
    """The same probe after importing the scorers names numpy (scipy loads only when an
    alignment is solved): it can fail."""
    probe = _PROBE.replace("import extraction_eval.cli\n", "import extraction_eval.evaluators\n")
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    assert "numpy" in set(json.loads(done.stdout))


def test_help_names_the_library_defaults_it_does_not_import() -> None:
    """The names the help shows without importing their modules are the library's own."""
    assert datasets_cmd.JOURNAL_DATASET_NAME == JOURNAL_DATASET
    assert seed_cmd.DEFAULT_DATASET == DEFAULT_DATASET
    assert prompts_cmd.PROMPT_NAME == PROMPT_NAME
    runner = CliRunner()
    upload = runner.invoke(app, ["datasets", "upload", "--help"], terminal_width=200)
    assert upload.exit_code == 0 and JOURNAL_DATASET in upload.output
    seeding = runner.invoke(_seed_app, ["--help"], terminal_width=200)
    assert seeding.exit_code == 0 and DEFAULT_DATASET in seeding.output
    show = runner.invoke(app, ["prompts", "show", "--help"], terminal_width=200)
    assert show.exit_code == 0 and PROMPT_NAME in show.output
