"""The options ``run``, ``matrix`` and ``gold build`` share, each declared once (typer
``Annotated`` aliases, as fastapi-cli does), so a flag reads and behaves the same everywhere.

An option has one declaration (its flag and help) and up to two aliases: the plain one for a
command that has a default (``run``), and ``...OrFile`` (``None`` when not given) for a command
whose TOML file fills what the command line leaves out (``matrix``, ``gold build``): the
library's ``resolve`` merges the two, the command line winning.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from extraction_eval.commands.common import NO_CACHE_HELP, REFRESH_CACHE_HELP


def _option(*decls: str, help: str) -> Any:
    return typer.Option(*decls, help=help)


_DATASET = _option(help="Dataset name.")
_NAME = _option(
    help="Run name (the same name on the same dataset is the same run); a matrix: the prefix"
    " of its cells' run names."
)
_MODEL = _option(
    help="provider:model, e.g. offline:baseline, openai:gpt-4o-mini, anthropic:claude-…, gemini:…"
    " (a matrix: one cell per model, repeatable)."
)
_PROMPT_LABEL = _option(
    help="Prompt label: LangFuse's, or the local store's (prompts push); a matrix: one cell"
    " per label, repeatable."
)
_PROMPT_NAME = _option(help="Prompt name.")
_TEMPERATURE = _option(
    help="Sampling temperature (a matrix: one cell per temperature, repeatable; gold: for every"
    " run, default 0.7 for a model run more than once, else 0)."
)
_CONCURRENCY = _option(help="Model calls in flight at once (a matrix: over all its cells).")
_WORKERS = _option(
    help="Item worker processes: each runs and scores its share of the items on its own"
    " event loop (LangFuse mode: through the SDK's run_experiment, into the run's one"
    " experiment); this process stores them. Results are the same as with 1."
)
_LIMIT = _option(help="Run only the first N items.")
_BASE_URL = _option(
    help="OpenAI-compatible server (vLLM, Ollama, llama.cpp); with anthropic:, a gateway that"
    " speaks Anthropic's Messages API."
)
_RESPONSE_FORMAT = _option(
    help="How an OpenAI-compatible server is asked for JSON: auto (detected once per run and"
    " model, before the items) | json_schema | json_object_schema | json_object | text"
    " (anthropic: auto | json_schema, a forced tool call | text)."
)
_STRICT_JSON = _option(
    "--strict-json",
    help="A reply that is not bare JSON (in a Markdown fence, with text around it, wrapped"
    " in one key) is a schema failure instead of being read and counted as repaired.",
)
_RESUME = _option(
    help="Continue the named run, skipping finished items (a matrix: every unfinished cell)."
)
_TAKE_OVER_LOCK = _option(
    help="Take over a run's lock held by a process that is gone (on another host, or"
    " not provably dead); a dead process on this host is taken over anyway."
)
_MIN_GOLD_CONFIDENCE = _option(
    help="Ensemble gold: gold objects below this confidence are ignore regions (not"
    " missed; predictions aligned with them not counted)."
)
_PROTOCOL = typer.Option(
    "--protocol",
    help="Also score by a published protocol: semeval | re | docred (repeatable).",
)
_TRAIN = typer.Option(
    "--train", help="Gold JSONL of the training documents: --protocol docred adds Ign F1."
)
_TIMEOUT = _option(help="Per-call timeout, seconds.")
_MAX_ATTEMPTS = _option(help="Attempts per item, retries included.")
_MATCH = _option(help="Name matching: exact|casefold|fuzzy|span.")
_THRESHOLD = _option(help="Fuzzy name similarity threshold.")
_BACKEND = _option(help="auto (LangFuse when keys are set) | local | langfuse.")
_VERIFY = _option(help="LangFuse mode: read back that every trace and score arrived.")
_PRICE_IN = _option(help="USD per 1M input tokens (with --price-out): replaces genai-prices.")
_PRICE_OUT = _option(help="USD per 1M output tokens (with --price-in).")
_MAX_COST = _option(
    help="USD ceiling for the whole run (a matrix: all its cells): refused when the estimate is"
    " above it; no new item starts once the spend reaches it (--resume continues)."
)
_DRY_RUN = _option(
    "--dry-run", help="Print the cost estimate only: no model call, nothing created."
)
_BATCH = _option(
    "--batch",
    help="OpenAI Batch API or Anthropic Message Batches: half price, answers within 24 h; an"
    " interrupted run resumes polling (same --name, --resume).",
)
_SHARD = _option(
    help="I/N: run only shard I of N (1..N) of the items, by a hash of their id; then runs"
    " merge + runs finalize. auto: from the orchestrator's environment (Kubernetes Indexed"
    " Job, Slurm array, EXTRACTION_EVAL_SHARD_INDEX/_COUNT)."
)
_SHARD_COUNT = _option(
    help="With --shard auto: the number of shards when the environment does not say it (a"
    " Kubernetes Indexed Job's completions)."
)
_MAX_OBJECTS = _option(
    help="Entities or relationships per item (gold or answer) above which the item is an error"
    " instead of being scored (matching memory grows with their product)."
)
_ALIASES = _option(
    "--aliases",
    help="Alias table FILE: groups of names of one entity (JSON list of lists, or CSV/TSV one"
    " group a line); a prediction naming one name of a group matches gold named by another.",
)
_NO_ALIASES = _option(
    "--no-aliases",
    help="Score surface names only: gold mentions, aliases and alias tables are not used.",
)
_NO_CACHE = _option("--no-cache", help=NO_CACHE_HELP)
_REFRESH_CACHE = _option("--refresh-cache", help=REFRESH_CACHE_HELP)
_CONFIG = _option(
    "--config", help="A TOML file with these options' settings; options given win over it."
)

Aliases = Annotated[Path | None, _ALIASES]
NoAliases = Annotated[bool, _NO_ALIASES]
Dataset = Annotated[str, _DATASET]
DatasetOrFile = Annotated[str | None, _DATASET]
Name = Annotated[str | None, _NAME]
Model = Annotated[str, _MODEL]
Models = Annotated[list[str] | None, _MODEL]
PromptLabel = Annotated[str | None, _PROMPT_LABEL]
PromptLabels = Annotated[list[str] | None, _PROMPT_LABEL]
PromptName = Annotated[str, _PROMPT_NAME]
PromptNameOrFile = Annotated[str | None, _PROMPT_NAME]
Temperature = Annotated[float, _TEMPERATURE]
TemperatureOrFile = Annotated[float | None, _TEMPERATURE]
Temperatures = Annotated[list[float] | None, _TEMPERATURE]
Concurrency = Annotated[int, _CONCURRENCY]
ConcurrencyOrFile = Annotated[int | None, _CONCURRENCY]
Workers = Annotated[int, _WORKERS]
Limit = Annotated[int | None, _LIMIT]
BaseUrl = Annotated[str | None, _BASE_URL]
ResponseFormat = Annotated[str, _RESPONSE_FORMAT]
ResponseFormatOrFile = Annotated[str | None, _RESPONSE_FORMAT]
Resume = Annotated[bool, _RESUME]
StrictJson = Annotated[bool, _STRICT_JSON]
TakeOverLock = Annotated[bool, _TAKE_OVER_LOCK]
MinGoldConfidence = Annotated[float | None, _MIN_GOLD_CONFIDENCE]
Protocol = Annotated[list[str] | None, _PROTOCOL]
Train = Annotated[Path | None, _TRAIN]
Timeout = Annotated[float, _TIMEOUT]
TimeoutOrFile = Annotated[float | None, _TIMEOUT]
MaxAttempts = Annotated[int, _MAX_ATTEMPTS]
MaxAttemptsOrFile = Annotated[int | None, _MAX_ATTEMPTS]
Match = Annotated[str, _MATCH]
MatchOrFile = Annotated[str | None, _MATCH]
_CI = typer.Option(
    "--ci",
    help="Bootstrap interval: expanded (Hesterberg's expanded percentile, honest at small N)"
    " | percentile.",
)
# the regression gate (compare; run-experiment with --baseline)
FailOnRegression = Annotated[
    list[str] | None,
    _option(
        help="METRIC=TOLERANCE: exit 1 when the paired 95% CI of Δ (run: against --baseline)"
        " reaches a drop larger than TOLERANCE (its low bound is below −TOLERANCE; mirrored for"
        " lower-is-better rates). Repeatable.",
    ),
]
# thresholds on a run's figures (run-experiment; runs finalize)
FailUnder = Annotated[
    list[str] | None,
    _option(help="NAME=VALUE: exit 1 when a run-level value is below (repeatable)."),
]
FailOver = Annotated[
    list[str] | None,
    _option(help="NAME=VALUE: exit 1 when a lower-is-better value (error_rate, ...) is above."),
]
# a stored run by name (compare, runs ..., report, power)
RunDataset = Annotated[str | None, _option(help="Dataset, when run names repeat.")]
Ci = Annotated[str, _CI]
CiOrFile = Annotated[str | None, _CI]
Threshold = Annotated[float, _THRESHOLD]
ThresholdOrFile = Annotated[float | None, _THRESHOLD]
Backend = Annotated[str, _BACKEND]
BackendOrFile = Annotated[str | None, _BACKEND]
Verify = Annotated[bool, _VERIFY]
PriceIn = Annotated[float | None, _PRICE_IN]
PriceOut = Annotated[float | None, _PRICE_OUT]
MaxCost = Annotated[float | None, _MAX_COST]
DryRun = Annotated[bool, _DRY_RUN]
Batch = Annotated[bool, _BATCH]
BatchOrFile = Annotated[bool | None, _BATCH]
Shard = Annotated[str | None, _SHARD]
ShardCount = Annotated[int | None, _SHARD_COUNT]
MaxObjects = Annotated[int, _MAX_OBJECTS]
MaxObjectsOrFile = Annotated[int | None, _MAX_OBJECTS]
NoCache = Annotated[bool, _NO_CACHE]
RefreshCache = Annotated[bool, _REFRESH_CACHE]
ConfigFile = Annotated[Path | None, _CONFIG]

# the semantic judge (score; judge calibrate): judged figures beside the string ones
_JUDGE = typer.Option(
    "--judge",
    help="Judge unmatched pairs with MODEL (offline:rules, openai:…, gemini:…, fake:…);"
    " judged figures are shown beside the unchanged string ones.",
)
_JUDGE_BASE_URL = typer.Option(
    "--judge-base-url", help="OpenAI-compatible server for the --judge model."
)
_JUDGE_OVERRIDES = typer.Option(
    "--judge-overrides",
    help="Pairs JSONL (a, b, type, same, reason) whose labels overrule the judge's verdicts.",
)
JudgeModel = Annotated[str | None, _JUDGE]
JudgeOverrides = Annotated[Path | None, _JUDGE_OVERRIDES]
JudgeBaseUrl = Annotated[str | None, _JUDGE_BASE_URL]
_JUDGE_PROMPT_LABEL = typer.Option(
    "--judge-prompt-label",
    help="With LangFuse keys set: the label of the judge prompt read from LangFuse prompt"
    " management (created from the built-in text when missing). [default: production]",
)
_JUDGE_MAX_COST = typer.Option(
    "--max-cost",
    help="USD ceiling for the --judge model's calls (this command makes no other): past it"
    " the remaining pairs are not judged (judge errors, never matches); what was judged is kept.",
)
JudgePromptLabel = Annotated[str | None, _JUDGE_PROMPT_LABEL]
JudgeMaxCost = Annotated[float | None, _JUDGE_MAX_COST]
