"""Document-level relation extraction as thunlp/DocRED's ``evaluation.py`` defines it.

A fact is (document, relation type, head cluster, tail cluster); a gold entity with its
mentions is a cluster. Gold facts come from the relationships' ``head``/``tail``. A
predicted relationship names its endpoints (as an LLM does): a predicted endpoint whose
offsets equal a gold mention's stands for that mention's cluster; otherwise its name
resolves to the one gold cluster whose name, mentions or aliases it equals (casefolded,
whitespace collapsed), or, with an alias table (``--aliases``, a schema's ``aliases``), whose
forms share an alias-table group with it ("NYC" names the cluster of "New York City"). A
name that fits two clusters is ``ambiguous`` and one that fits none ``unresolved``: neither
is guessed, both stay submitted facts that cannot be correct.
A repeated fact counts once: a submitted one with the first's evidence (as the official
script), a gold one with the union of its repeats' (DocRED's data repeats no fact).

P = correct / submitted, R = correct / gold, F1 = 2PR / (P + R). **Ign F1**: a correct fact
is "in train" when some mention name of its head and some of its tail appear with the same
relation in a training document (names compared exactly, as the official script does);
P_ign = (correct − in_train) / (submitted − in_train), Ign F1 = 2 P_ign R / (P_ign + R)
(R unchanged). **Evidence F1**: evidence passages map to the sentences (``sentences``
offsets in the item's metadata) they overlap; P_evi = Σ over correct facts |gold ∩ predicted
sentences| / Σ over submitted facts |predicted sentences|, R_evi = the same numerator / Σ
over gold facts |gold sentences|. Nothing gold and nothing submitted is 1.0 (no failed
item); other 0/0 are 0. Pure, no I/O.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from extraction_eval.evaluators.protocols.rows import CountRows
from extraction_eval.evaluators.protocols.spans import (
    DocumentFold,
    Problems,
    check_span,
    type_key,
)
from extraction_eval.types import Entity, Extraction, Relationship

__all__ = ["DocredAccumulator", "TrainFacts", "train_facts"]

TrainFacts = frozenset[tuple[str, str, str]]
# a name -> the alias-table group holding it (() when none): ``evaluators.clusters.alias_lookup``
AliasesOf = Callable[[str], Iterable[str]]
_Fact = tuple[str, Any, Any]


def surface_names(entity: Entity) -> list[str]:
    """The names DocRED's ``vertexSet`` lists for an entity: its mentions', else its own."""
    names = [m.name for m in entity.mentions]
    return names or [entity.name]


def _endpoint(r: Relationship, which: str, n_entities: int) -> int | None:
    value = r.head if which == "head" else r.tail
    return value if value is not None and 0 <= value < n_entities else None


def train_facts(documents: Iterable[Extraction]) -> TrainFacts:
    """(head mention name, tail mention name, relation) of every training fact."""
    out: set[tuple[str, str, str]] = set()
    for doc in documents:
        by_name: dict[str, list[int]] = {}
        for i, e in enumerate(doc.entities):
            by_name.setdefault(type_key(e.name), []).append(i)
        for r in doc.relationships:
            ends = []
            for which, name in (("head", r.source), ("tail", r.target)):
                index = _endpoint(r, which, len(doc.entities))
                if index is None:
                    found = by_name.get(type_key(name), [])
                    index = found[0] if len(found) == 1 else None
                ends.append(index)
            h, t = ends
            heads = surface_names(doc.entities[h]) if h is not None else [r.source]
            tails = surface_names(doc.entities[t]) if t is not None else [r.target]
            out.update((n1, n2, r.type) for n1 in heads for n2 in tails)
    return frozenset(out)


def _passages(quote: str | None) -> list[str]:
    """The passages of a quote: lists become " … "-joined quotes (``datasets.jsonl``)."""
    if not quote:
        return []
    return [p.strip() for p in quote.split(" … ") if p.strip()]


def _pieces(passage: str) -> list[str]:
    """An elided passage ("a … b", "a ... b") as the pieces the text holds."""
    return [p.strip() for p in passage.replace("...", "…").split("…") if p.strip()]


class _Sentences:
    """Sentence ids by character offset, from ``metadata["sentences"]`` ({start, end})."""

    def __init__(self, text: str, raw: Any) -> None:
        self.text = text
        self.starts: list[int] = []
        self.ends: list[int] = []
        self.ok = isinstance(raw, list) and bool(raw)
        for s in raw if self.ok else []:
            start = s.get("start") if isinstance(s, dict) else None
            end = s.get("end") if isinstance(s, dict) else None
            if (
                not isinstance(start, int)
                or not isinstance(end, int)
                or check_span(start, end, len(text))
            ):
                self.ok = False
                break
            self.starts.append(start)
            self.ends.append(end)
        if self.starts != sorted(self.starts):
            self.ok = False
        self.cache: dict[str | None, tuple[set[int], int]] = {}
        self.whole: dict[str, int] = {}
        for k, (start, end) in enumerate(zip(self.starts, self.ends, strict=True)):
            self.whole.setdefault(text[start:end].strip(), k)

    def ids(self, quote: str | None) -> tuple[set[int], int]:
        """``located`` once per distinct quote (a document's facts share their sentences)."""
        known = self.cache.get(quote)
        if known is None:
            known = self.cache[quote] = self.located(quote)
        return set(known[0]), known[1]

    def located(self, quote: str | None) -> tuple[set[int], int]:
        """The sentences the quote's passages stand for, and how many were not found. A
        passage that is a whole sentence is that sentence (the first, when the text repeats
        it); any other passage stands for the sentences its first occurrence overlaps."""
        found: set[int] = set()
        missing = 0
        for passage in _passages(quote):
            whole = self.whole.get(passage)
            if whole is not None:
                found.add(whole)
                continue
            located = False
            for piece in [passage] if passage in self.text else _pieces(passage):
                at = self.text.find(piece)
                if at < 0:
                    continue
                located = True
                k = bisect_right(self.starts, at + len(piece) - 1) - 1
                while k >= 0 and self.ends[k] > at:
                    found.add(k)
                    k -= 1
            missing += not located
        return found, missing


def _spans(entity: Entity) -> set[tuple[int, int]]:
    out = {(m.start, m.end) for m in entity.mentions if m.start is not None and m.end is not None}
    if entity.start is not None and entity.end is not None:
        out.add((entity.start, entity.end))
    return out


class _Resolver:
    """Gold clusters by mention offsets and by surface key (name, mentions, aliases, and the
    alias-table groups of any of those)."""

    def __init__(self, entities: Sequence[Entity], aliases_of: AliasesOf | None = None) -> None:
        self.aliases_of = aliases_of
        self.spans = [_spans(e) for e in entities]
        self.by_span: dict[tuple[int, int], set[int]] = {}
        self.entities = entities
        self._by_key: dict[str, set[int]] | None = None
        for i, span_set in enumerate(self.spans):
            for span in span_set:
                self.by_span.setdefault(span, set()).add(i)
        # a document's relationships name the same endpoints again and again
        self.answers: dict[tuple[str, int | None], tuple[int | None, str]] = {}

    @property
    def by_key(self) -> dict[str, set[int]]:
        """Clusters by surface key, built on the first name lookup (predictions that point
        at entities with offsets never need it)."""
        if self._by_key is None:
            self._by_key = {}
            for i, e in enumerate(self.entities):
                names = [e.name, *(m.name for m in e.mentions), *e.aliases]
                if self.aliases_of is not None:
                    names += [a for name in names for a in self.aliases_of(name)]
                for name in names:
                    self._by_key.setdefault(type_key(name), set()).add(i)
        return self._by_key

    def _by_offsets(self, entity: Entity, index: int | None) -> int | None:
        """The cluster the predicted entity's offsets point at: the only one they touch, else
        the only one with exactly its spans, else (identical clusters) the one at the
        prediction's own index when that is among them."""
        spans = _spans(entity)
        hits: set[int] = set()
        for span in spans:
            hits |= self.by_span.get(span, set())
        if len(hits) <= 1:
            return next(iter(hits), None)
        same = [i for i in sorted(hits) if self.spans[i] == spans]
        if len(same) == 1:
            return same[0]
        return index if index in same else None

    def resolve(
        self, name: str, entity: Entity | None = None, index: int | None = None
    ) -> tuple[int | None, str]:
        """(cluster, "") or (None, "ambiguous" | "unresolved"). ``entity`` is the predicted
        entity at ``index`` (the same index is the same entity within a document)."""
        key = (name, index if entity is not None else None)
        known = self.answers.get(key)
        if known is None:
            known = self.answers[key] = self._resolve(name, entity, index)
        return known

    def _resolve(
        self, name: str, entity: Entity | None, index: int | None
    ) -> tuple[int | None, str]:
        if entity is not None:
            cluster = self._by_offsets(entity, index)
            if cluster is not None:
                return cluster, ""
        found = self.by_key.get(type_key(name), set())
        if len(found) == 1:
            return next(iter(found)), ""
        return None, "ambiguous" if found else "unresolved"


class DocredAccumulator(DocumentFold):
    """Relation, Ign and evidence counts summed over documents."""

    def __init__(
        self,
        train: TrainFacts | None = None,
        problems: Problems | None = None,
        rows: CountRows | None = None,
    ) -> None:
        super().__init__(problems, rows)
        self.train = train
        self.gold = self.submitted = self.correct = self.in_train = 0
        self.gold_evidence = self.pred_evidence = self.correct_evidence = 0
        self.evidence_documents = 0
        self.unlocated_passages = 0
        self.ambiguous = self.unresolved = 0

    def _gold_facts(
        self, item_id: str, gold: Extraction, sentences: _Sentences, resolver: _Resolver
    ) -> dict[_Fact, set[int]]:
        facts: dict[_Fact, set[int]] = {}
        for n, r in enumerate(gold.relationships):
            ends: list[int] = []
            for which, name in (("head", r.source), ("tail", r.target)):
                value = r.head if which == "head" else r.tail
                if value is not None and not 0 <= value < len(gold.entities):
                    self._skip(
                        item_id,
                        f"gold relationship {n}",
                        f"{which} {value} out of range ({len(gold.entities)} entities)",
                    )
                    break
                if value is None:
                    cluster, why = resolver.resolve(name)
                    if cluster is None:
                        self._skip(item_id, f"gold relationship {n}", f"{name!r} {why}")
                        break
                    value = cluster
                ends.append(value)
            if len(ends) != 2:
                continue
            evidence: set[int] = set()
            if sentences.ok:
                evidence, missing = sentences.ids(r.evidence)
                self.unlocated_passages += missing
            facts.setdefault((r.type, ends[0], ends[1]), set()).update(evidence)
        return facts

    def add(
        self,
        item_id: str,
        text: str,
        gold: Extraction,
        pred: Extraction | None,
        metadata: Mapping[str, Any] | None = None,
        aliases_of: AliasesOf | None = None,
    ) -> None:
        """One document; ``pred`` None is a failed item (its gold facts are missed);
        ``aliases_of`` gives a name's alias-table group (names resolve through it too)."""
        before = (self.correct, self.submitted, self.gold)
        self._add(item_id, text, gold, pred, metadata, aliases_of)
        if self.rows is not None:
            correct, submitted, expected = (
                now - then
                for now, then in zip((self.correct, self.submitted, self.gold), before, strict=True)
            )
            self.rows.add("docred", correct, submitted - correct, expected - correct)

    def _add(
        self,
        item_id: str,
        text: str,
        gold: Extraction,
        pred: Extraction | None,
        metadata: Mapping[str, Any] | None,
        aliases_of: AliasesOf | None,
    ) -> None:
        self.documents += 1
        self.failed = self.failed or pred is None
        sentences = _Sentences(text, (metadata or {}).get("sentences"))
        self.evidence_documents += sentences.ok
        resolver = _Resolver(gold.entities, aliases_of)
        facts = self._gold_facts(item_id, gold, sentences, resolver)
        self.gold += len(facts)
        self.gold_evidence += sum(len(v) for v in facts.values())
        if pred is None:
            return
        submitted: dict[_Fact, set[int]] = {}
        entities = pred.entities
        n_entities = len(entities)
        for n, r in enumerate(pred.relationships):
            bad = next(
                (
                    f"{which} {index} out of range ({n_entities} entities)"
                    for which, index in (("head", r.head), ("tail", r.tail))
                    if index is not None and not 0 <= index < n_entities
                ),
                None,
            )
            if bad is not None:
                self._skip(item_id, f"predicted relationship {n}", bad)
                continue
            ends: list[Any] = []
            for name, index in ((r.source, r.head), (r.target, r.tail)):
                entity = entities[index] if index is not None else None
                cluster, why = resolver.resolve(name, entity, index)
                if cluster is None:
                    if why == "ambiguous":
                        self.ambiguous += 1
                    else:
                        self.unresolved += 1
                    ends.append((why, type_key(name)))
                else:
                    ends.append(cluster)
            evidence: set[int] = set()
            if sentences.ok and r.evidence:
                evidence, missing = sentences.ids(r.evidence)
                self.unlocated_passages += missing
            submitted.setdefault((r.type, ends[0], ends[1]), evidence)  # the first's, as official
        names: dict[int, list[str]] = {}
        for fact, evidence in submitted.items():
            self.submitted += 1
            self.pred_evidence += len(evidence)
            if fact not in facts:
                continue
            self.correct += 1
            self.correct_evidence += len(facts[fact] & evidence)
            if self.train is not None:
                heads = names.get(fact[1]) or names.setdefault(
                    fact[1], surface_names(gold.entities[fact[1]])
                )
                tails = names.get(fact[2]) or names.setdefault(
                    fact[2], surface_names(gold.entities[fact[2]])
                )
                if any((n1, n2, fact[0]) in self.train for n1 in heads for n2 in tails):
                    self.in_train += 1

    def _prf(self, correct: int, submitted: int, gold: int) -> tuple[float, float, float]:
        if submitted == 0 and gold == 0 and not self.failed:
            return 1.0, 1.0, 1.0
        p = correct / submitted if submitted else 0.0
        r = correct / gold if gold else 0.0
        return p, r, (2 * p * r / (p + r) if p + r > 0 else 0.0)

    def report(self) -> dict[str, Any]:
        p, r, f = self._prf(self.correct, self.submitted, self.gold)
        out: dict[str, Any] = {
            "precision": p,
            "recall": r,
            "f1": f,
            "correct": self.correct,
            "submitted": self.submitted,
            "gold": self.gold,
            "ambiguous": self.ambiguous,
            "unresolved": self.unresolved,
            "documents": self.documents,
            "skipped": self.skipped,
            "ign_f1": None,
            "ign_precision": None,
            "in_train": None,
            "evidence_f1": None,
            "evidence_precision": None,
            "evidence_recall": None,
            "evidence_documents": self.evidence_documents,
            "unlocated_passages": self.unlocated_passages,
        }
        if self.train is not None:
            kept = self.submitted - self.in_train
            if kept == 0 and self.gold == 0 and not self.failed:
                ign_p = 1.0
            else:
                ign_p = (self.correct - self.in_train) / kept if kept else 0.0
            out["ign_precision"] = ign_p
            out["ign_f1"] = 2 * ign_p * r / (ign_p + r) if ign_p + r > 0 else 0.0
            out["in_train"] = self.in_train
        if self.evidence_documents:
            ep, er, ef = self._prf(self.correct_evidence, self.pred_evidence, self.gold_evidence)
            out["evidence_precision"], out["evidence_recall"], out["evidence_f1"] = ep, er, ef
        return out
