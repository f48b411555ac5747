"""Mention-aware scoring: the figures it changes and what it costs. Printed, never asserted.

    .venv/bin/python benchmarks/bench_aliases.py [GOLD.jsonl] [--repeat 3]

GOLD defaults to ../shared/data/redocred_dev.jsonl (500 documents, 9,684 entities). The
predictions are the gold itself with every entity that has another mention of its own named by
that mention (relationships name their endpoints alike): every answer is right. Printed:
entity / relationship F1 with mentions (the default) and with ``--no-aliases``, and the time of
scoring the file both ways (the best of --repeat; files parsed once, outside the timings;
bootstrap off, so the matching is what is timed). Target (issue 31): mention-aware matching
within 1.5x of name-only scoring.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # tests.support (the Re-DocRED renaming) lives in the repo
    sys.path.insert(0, str(REPO))

from extraction_eval.datasets.jsonl import read_gold  # noqa: E402
from extraction_eval.evaluators import ScoringConfig, aggregate, score_item  # noqa: E402
from extraction_eval.types import Extraction  # noqa: E402
from tests.support.redocred import renamed_predictions  # noqa: E402


def _default_gold() -> Path:
    env = os.environ.get("EXTRACTION_EVAL_SHARED_DATA")
    base = Path(env) if env else Path(__file__).resolve().parents[2] / "shared" / "data"
    return base / "redocred_dev.jsonl"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("gold", nargs="?", type=Path, default=_default_gold())
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    if not args.gold.is_file():
        sys.exit(f"gold file not found: {args.gold}")
    preds, renamed = renamed_predictions(args.gold)
    with tempfile.TemporaryDirectory() as tmp:
        pred_path = Path(tmp) / "pred.jsonl"
        pred_path.write_text("".join(json.dumps(p) + "\n" for p in preds), encoding="utf-8")
        gold, _ = read_gold(args.gold)
        pred_gold, _ = read_gold_predictions(pred_path, gold)
    n_ent = sum(len(g.extraction.entities) for g in gold)
    print(f"{args.gold.name}: {len(gold)} documents, {n_ent} entities, {renamed} renamed")
    times: dict[str, float] = {}
    warm = ScoringConfig(resamples=0)  # imports, caches: outside every timing
    aggregate(
        [
            score_item(
                item_id=g.id, text=g.text, gold=g.extraction, pred=pred_gold[g.id], config=warm
            )
            for g in gold[:20]
        ],
        warm,
    )
    for label, config in (
        ("mentions (default)", ScoringConfig(resamples=0)),
        ("--no-aliases", ScoringConfig(resamples=0, aliases=False)),
    ):
        best = float("inf")
        report: dict[str, Any] = {}
        for _ in range(max(1, args.repeat)):
            t0 = time.perf_counter()
            scores = [
                score_item(
                    item_id=g.id,
                    text=g.text,
                    gold=g.extraction,
                    pred=pred_gold[g.id],
                    config=config,
                )
                for g in gold
            ]
            report = aggregate(scores, config)
            best = min(best, time.perf_counter() - t0)
        times[label] = best
        print(
            f"  {label:<20} entity F1 {report['entities']['f1']:.3f}  relationship F1 "
            f"{report['relationships']['f1']:.3f}  through aliases "
            f"{report['alias_matches']['entities']} entities / "
            f"{report['alias_matches']['relationships']} relationships  {best:.2f} s"
        )
    ratio = times["mentions (default)"] / times["--no-aliases"]
    print(f"  mention-aware / name-only time: {ratio:.2f}x (target <= 1.5x)")


def read_gold_predictions(path: Path, gold: list[Any]) -> tuple[dict[str, Extraction], None]:
    """The prediction lines by id (the format `score --predictions` reads)."""
    out: dict[str, Extraction] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        obj = json.loads(line)
        out[str(obj["id"])] = Extraction.model_validate(
            {"entities": obj["entities"], "relationships": obj["relationships"]}
        )
    return out, None


if __name__ == "__main__":
    main()
