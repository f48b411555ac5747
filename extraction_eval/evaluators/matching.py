"""One-to-one alignment of predicted and gold objects.

Every comparison is built as a matrix in one vectorised call (rapidfuzz ``cdist`` or numpy
broadcasting) and solved with scipy's ``linear_sum_assignment``. The lexicographic objective
(most matched pairs, then the best secondary rank, then the highest total similarity) is encoded
exactly as integer weights that stay below 2**53, so float64 arithmetic inside the solver is
exact and no tie is broken by rounding noise.

Inputs are put in a canonical order before solving, so the objects chosen never depend on the
order in which they were listed (identical objects are interchangeable).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

from extraction_eval.evaluators.clusters import Clusters
from extraction_eval.evaluators.config import MatchMode, ScoringConfig, type_key
from extraction_eval.evaluators.similarity import (
    EPS as _EPS,
)
from extraction_eval.evaluators.similarity import (
    cluster_similarity,
    equality_matrix,
    jaccard_matrix,
    name_key,
    name_similarity,
    word_set,
)
from extraction_eval.types import Entity, Relationship

FloatArray = NDArray[np.float64]
BoolArray = NDArray[np.bool_]
IntArray = NDArray[np.intp]

RelationshipMatchType = Literal["exact", "inverse", "fuzzy", "inverse-fuzzy"]
RELATIONSHIP_MATCH_TYPES: tuple[RelationshipMatchType, ...] = (
    "exact",
    "inverse",
    "fuzzy",
    "inverse-fuzzy",
)
# Second level of the objective for relationships: the order of match types.
_RANK: dict[RelationshipMatchType, int] = {"exact": 3, "inverse": 2, "fuzzy": 1, "inverse-fuzzy": 0}
_MAX_EXACT_WEIGHT = 2**53


def _weights_fit(k: int, max_rank: int, quantum: int) -> tuple[int, int, bool]:
    b = k * quantum + 1
    a = k * (max_rank * b + quantum) + 1
    return a, b, k * (a + max_rank * b + quantum) < _MAX_EXACT_WEIGHT


def _solve(
    adm: BoolArray, sim: FloatArray, rank: NDArray[Any] | None, max_rank: int
) -> tuple[IntArray, IntArray]:
    k = min(adm.shape)
    quantum = 1_000_000
    a, b, fits = _weights_fit(k, max_rank, quantum)
    while not fits and quantum > 1:
        quantum //= 10
        a, b, fits = _weights_fit(k, max_rank, quantum)
    if not fits:
        quantum = 0
        a, b, fits = _weights_fit(k, max_rank, quantum)
        if not fits:  # pragma: no cover - needs ~10**5 objects in one item
            raise ValueError(f"alignment too large for exact weights: {adm.shape}")
    weights = np.full(adm.shape, float(a))
    if quantum:
        weights += np.rint(np.clip(sim, 0.0, 1.0) * quantum)
    if rank is not None and max_rank:
        weights += rank.astype(np.float64) * b
    from scipy.optimize import linear_sum_assignment  # deferred, like scipy.sparse above

    weights[~adm] = 0.0
    r, c = linear_sum_assignment(weights, maximize=True)
    keep = adm[r, c]
    return r[keep], c[keep]


def assign(
    admissible: BoolArray,
    similarity: FloatArray,
    rank: NDArray[Any] | None = None,
    max_rank: int = 0,
) -> tuple[IntArray, IntArray]:
    """Maximum one-to-one matching over admissible pairs, lexicographically best.

    Objective: (1) number of pairs, (2) sum of ``rank`` (integers in [0, max_rank]),
    (3) sum of similarity, resolved to 1e-6 (coarser only for huge matrices). With
    k = min(rows, cols), Q the similarity quantum, B = kQ + 1 and A = k(max_rank·B + Q) + 1,
    the weight A + rank·B + round(sim·Q) makes any extra pair worth more than every possible
    gain on levels 2-3 together, and any extra rank unit more than all of level 3.
    Non-admissible pairs get weight 0 and are dropped from the solver's answer.

    An admissible pair whose row and column have no other admissible pair is in every
    optimum, so such isolated pairs are taken directly and only the rest goes to the solver.
    """
    n, m = admissible.shape
    empty = np.zeros(0, dtype=np.intp)
    if n == 0 or m == 0:
        return empty, empty
    row_deg = admissible.sum(axis=1)
    col_deg = admissible.sum(axis=0)
    if row_deg.max() <= 1 and col_deg.max() <= 1:
        r, c = np.nonzero(admissible)  # the admissible pairs already form the only optimum
        return r, c
    if n * m <= 64:
        return _solve(admissible, similarity, rank, max_rank)
    lone = admissible & (row_deg == 1)[:, None] & (col_deg == 1)[None, :]
    r_lone, c_lone = np.nonzero(lone)
    rows_rest = np.flatnonzero(row_deg > 0)
    if r_lone.size == rows_rest.size:
        return r_lone, c_lone
    row_taken = np.zeros(n, dtype=bool)
    row_taken[r_lone] = True
    col_taken = np.zeros(m, dtype=bool)
    col_taken[c_lone] = True
    rows_rest = np.flatnonzero((row_deg > 0) & ~row_taken)
    cols_rest = np.flatnonzero((col_deg > 0) & ~col_taken)
    sub_rank = None if rank is None else rank[rows_rest][:, cols_rest]
    r, c = _solve(
        admissible[rows_rest][:, cols_rest],
        similarity[rows_rest][:, cols_rest],
        sub_rank,
        max_rank,
    )
    rows = np.concatenate([r_lone, rows_rest[r]])
    cols = np.concatenate([c_lone, cols_rest[c]])
    return rows, cols


def identity_matching(
    pred_keys: Sequence[Hashable], gold_keys: Sequence[Hashable]
) -> list[tuple[int, int]] | None:
    """Pairs of equal keys, if they cover every object of the smaller side; else None.

    Used as an exact shortcut: when the key includes everything the objective ranks (name,
    type, and a key match means similarity 1.0), such a matching reaches the maximum on every
    level, so it is an optimum and no matrix is needed. Equal keys pair in list order.
    """
    free: dict[Hashable, list[int]] = {}
    for j in range(len(gold_keys) - 1, -1, -1):
        free.setdefault(gold_keys[j], []).append(j)
    pairs: list[tuple[int, int]] = []
    for i, k in enumerate(pred_keys):
        stack = free.get(k)
        if stack:
            pairs.append((i, stack.pop()))
    return pairs if len(pairs) == min(len(pred_keys), len(gold_keys)) else None


def _canonical(keys: Sequence[tuple[object, ...]]) -> list[int]:
    return sorted(range(len(keys)), key=keys.__getitem__)


def entity_sort_key(e: Entity) -> tuple[object, ...]:
    return (
        e.name,
        e.type,
        e.evidence or "",
        -1 if e.start is None else e.start,
        -1 if e.end is None else e.end,
        tuple(sorted(e.attributes.items())) if e.attributes else (),
    )


def relationship_sort_key(r: Relationship) -> tuple[object, ...]:
    attrs = tuple(sorted(r.attributes.items())) if r.attributes else ()
    return (r.source, r.type, r.target, r.evidence or "", attrs)


@dataclass(frozen=True, slots=True)
class EntityPair:
    """A matched (pred, gold) pair, indices into the lists as given."""

    pred: int
    gold: int
    similarity: float
    type_equal: bool
    # which of the gold entity's surface forms matched (clusters.entity_forms): 0 is its name,
    # more is a mention or an alias
    surface: int = 0

    @property
    def match_type(self) -> Literal["exact", "fuzzy"]:
        return "exact" if self.similarity >= 1.0 else "fuzzy"


@dataclass(frozen=True, slots=True)
class EntityAlignment:
    pairs: tuple[EntityPair, ...]  # by name (span mode: by type + evidence)
    typed_pairs: tuple[EntityPair, ...]  # a pair is admissible only when types are equal


def span_quote_entity(e: Entity) -> str:
    """Span mode compares evidence quotes; an object without one falls back to its name."""
    return e.evidence if e.evidence else e.name


def span_quote_relationship(r: Relationship) -> str:
    return r.evidence if r.evidence else f"{r.source} {r.target}"


def align_entities(
    pred: Sequence[Entity],
    gold: Sequence[Entity],
    config: ScoringConfig,
    clusters: Clusters | None = None,
) -> EntityAlignment:
    """Untyped (by name) and typed alignments of one item's entities.

    Objects are put in canonical order first, so which objects pair up never depends on the
    order they were listed in; indices in the result refer to the lists as given. With
    ``clusters`` (of ``gold`` as given), a prediction is compared with every surface form of a
    gold entity and the best decides.
    """
    if not pred or not gold:
        return EntityAlignment((), ())
    po = _canonical([entity_sort_key(e) for e in pred])
    go = _canonical([entity_sort_key(e) for e in gold])
    ps = [pred[i] for i in po]
    gs = [gold[j] for j in go]
    p_types = [type_key(e.type) for e in ps]
    g_types = [type_key(e.type) for e in gs]
    p_sets: list[frozenset[str]] = []
    g_sets: list[frozenset[str]] = []
    p_keys: list[str] = []
    g_keys: list[str] = []
    if config.match == "span":
        p_sets = [word_set(span_quote_entity(e)) for e in ps]
        g_sets = [word_set(span_quote_entity(e)) for e in gs]
        p_id: Sequence[Hashable] = p_sets
        g_id: Sequence[Hashable] = g_sets
    else:
        p_keys = [name_key(e.name, config.match) for e in ps]
        g_keys = [name_key(e.name, config.match) for e in gs]
        p_id, g_id = p_keys, g_keys
    quick = identity_matching(
        list(zip(p_id, p_types, strict=True)), list(zip(g_id, g_types, strict=True))
    )
    if quick is not None:
        same = [EntityPair(po[i], go[j], 1.0, True) for i, j in quick]
        same.sort(key=lambda p: (p.pred, p.gold))
        return EntityAlignment(tuple(same), tuple(same))
    type_eq = equality_matrix(p_types, g_types)
    which: IntArray | None = None
    if config.match == "span":
        sim = jaccard_matrix(p_sets, g_sets)
        adm = type_eq & (sim >= config.span_threshold - _EPS)
    elif clusters is not None:
        forms = [[name_key(f, config.match) for f in clusters.forms[j]] for j in go]
        sim, adm, which = cluster_similarity(p_keys, forms, config.match, config.threshold)
    else:
        sim, adm = name_similarity(p_keys, g_keys, config.match, config.threshold)
    r, c = assign(adm, sim, type_eq, max_rank=1)
    pairs = _entity_pairs(r, c, sim, type_eq, po, go, which)
    if all(p.type_equal for p in pairs):
        # The untyped optimum already has only type-equal pairs, so it is also a typed optimum
        # (same objective on a subset of the same admissible pairs): skip a second solve.
        return EntityAlignment(pairs, pairs)
    r, c = assign(adm & type_eq, sim)
    return EntityAlignment(pairs, _entity_pairs(r, c, sim, type_eq, po, go, which))


def _entity_pairs(
    r: IntArray,
    c: IntArray,
    sim: FloatArray,
    type_eq: BoolArray,
    po: list[int],
    go: list[int],
    which: IntArray | None = None,
) -> tuple[EntityPair, ...]:
    surface = [0] * len(r) if which is None else which[r, c].tolist()
    out = [
        EntityPair(po[i], go[j], x, t, f)
        for i, j, x, t, f in zip(
            r.tolist(),
            c.tolist(),
            sim[r, c].tolist(),
            type_eq[r, c].tolist(),
            surface,
            strict=True,
        )
    ]
    out.sort(key=lambda p: (p.pred, p.gold))
    return tuple(out)


@dataclass(frozen=True, slots=True)
class RelationshipPair:
    pred: int
    gold: int
    match_type: RelationshipMatchType
    similarity: float  # mean endpoint similarity (span mode: Jaccard of the quotes)
    # an endpoint matched through a mention or alias of its gold entity, not its own name
    via_alias: bool = False


@dataclass(frozen=True, slots=True)
class RelationshipMatrices:
    """Pairwise facts (pred × gold, in canonical order) reused by the failure taxonomy."""

    same_type: BoolArray
    inverse_type: BoolArray
    symmetric: BoolArray  # per pred: its type is symmetric
    straight: BoolArray  # source~source and target~target
    swapped: BoolArray  # source~target and target~source
    pred_order: list[int]  # given index of the pred at each canonical position
    gold_order: list[int]

    def near_misses(self, open_gold: Sequence[int]) -> tuple[BoolArray, BoolArray]:
        """(reversed, wrong_relation_type) masks, rows = preds as given, cols = open_gold.

        reversed: same non-symmetric type with endpoints swapped, or the inverse type with
        endpoints in place. wrong_relation_type: unrelated type, endpoints match either way.
        """
        rows = np.empty(len(self.pred_order), dtype=np.intp)
        rows[self.pred_order] = np.arange(len(self.pred_order))
        gold_pos = np.empty(len(self.gold_order), dtype=np.intp)
        gold_pos[self.gold_order] = np.arange(len(self.gold_order))
        cols = gold_pos[np.asarray(open_gold, dtype=np.intp)]
        same = self.same_type[rows][:, cols]
        inverse = self.inverse_type[rows][:, cols]
        straight = self.straight[rows][:, cols]
        swapped = self.swapped[rows][:, cols]
        sym = self.symmetric[rows][:, None]
        reversed_ = (same & ~sym & swapped) | (inverse & straight)
        wrong = ~(same | inverse) & (straight | swapped)
        return reversed_, wrong


@dataclass(frozen=True, slots=True)
class RelationshipAlignment:
    pairs: tuple[RelationshipPair, ...]
    # None when no near-miss analysis can be needed (an empty side, or an identity matching
    # that leaves no unmatched prediction facing an unmatched gold object).
    matrices: RelationshipMatrices | None


def _endpoint_similarity(
    p_src: Sequence[str],
    p_tgt: Sequence[str],
    g_src: Sequence[str],
    g_tgt: Sequence[str],
    mode: MatchMode,
    threshold: float,
) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
    """SS, TT, ST, TS similarity matrices from one comparison of the distinct endpoint keys."""
    p_index: dict[str, int] = {}
    g_index: dict[str, int] = {}
    ps = [p_index.setdefault(k, len(p_index)) for k in p_src]
    pt = [p_index.setdefault(k, len(p_index)) for k in p_tgt]
    gs = [g_index.setdefault(k, len(g_index)) for k in g_src]
    gt = [g_index.setdefault(k, len(g_index)) for k in g_tgt]
    sim, _ = name_similarity(list(p_index), list(g_index), mode, threshold)
    rows_s, rows_t = sim[ps], sim[pt]
    return rows_s[:, gs], rows_t[:, gt], rows_s[:, gt], rows_t[:, gs]


def _endpoint_cluster_similarity(
    p_src: Sequence[str],
    p_tgt: Sequence[str],
    g_src: Sequence[tuple[str, ...]],
    g_tgt: Sequence[tuple[str, ...]],
    mode: MatchMode,
    threshold: float,
) -> tuple[tuple[FloatArray, FloatArray, FloatArray, FloatArray], BoolArray, BoolArray]:
    """:func:`_endpoint_similarity` where each gold endpoint is a cluster of forms (its own name
    first): the best form decides. Also (via_straight, via_swapped): the pair's endpoints
    matched better through another form than through the gold's own names."""
    p_index: dict[str, int] = {}
    g_index: dict[tuple[str, ...], int] = {}
    ps = [p_index.setdefault(k, len(p_index)) for k in p_src]
    pt = [p_index.setdefault(k, len(p_index)) for k in p_tgt]
    gs = [g_index.setdefault(k, len(g_index)) for k in g_src]
    gt = [g_index.setdefault(k, len(g_index)) for k in g_tgt]
    clusters = list(g_index)
    sim, _, which = cluster_similarity(list(p_index), clusters, mode, threshold)
    alias = which > 0
    rows_s, rows_t = sim[ps], sim[pt]
    via_s, via_t = alias[ps], alias[pt]
    sims = (rows_s[:, gs], rows_t[:, gt], rows_s[:, gt], rows_t[:, gs])
    via_straight = via_s[:, gs] | via_t[:, gt]
    via_swapped = via_s[:, gt] | via_t[:, gs]
    return sims, via_straight, via_swapped


def align_relationships(
    pred: Sequence[Relationship],
    gold: Sequence[Relationship],
    config: ScoringConfig,
    clusters: Clusters | None = None,
) -> RelationshipAlignment:
    """Relationship alignment; a pair matches when types agree and endpoints match.

    Candidates per pair: straight with the same type; swapped with the same symmetric type
    (both ``exact``/``fuzzy``); swapped with the inverse type (``inverse``/``inverse-fuzzy``).
    ``fuzzy`` means at least one endpoint matched below similarity 1.0. Span mode: same type
    and Jaccard of the evidence quotes >= span_threshold (``exact`` when the word sets are equal).
    Ties are broken by match type (exact > inverse > fuzzy > inverse-fuzzy), then similarity.
    With ``clusters`` (the item's gold entities), a gold endpoint matches any surface form of
    its entity; a match through a form other than the gold's own name is ``via_alias``.
    """
    n, m = len(pred), len(gold)
    if n == 0 or m == 0:
        return RelationshipAlignment((), None)
    po = _canonical([relationship_sort_key(r) for r in pred])
    go = _canonical([relationship_sort_key(r) for r in gold])
    ps = [pred[i] for i in po]
    gs = [gold[j] for j in go]
    p_types = [type_key(r.type) for r in ps]
    g_types = [type_key(r.type) for r in gs]
    key_mode: MatchMode = "casefold" if config.match == "span" else config.match
    p_src = [name_key(r.source, key_mode) for r in ps]
    p_tgt = [name_key(r.target, key_mode) for r in ps]
    g_src = [name_key(r.source, key_mode) for r in gs]
    g_tgt = [name_key(r.target, key_mode) for r in gs]
    if config.match == "span":
        p_sets = [word_set(span_quote_relationship(r)) for r in ps]
        g_sets = [word_set(span_quote_relationship(r)) for r in gs]
        p_id: list[Hashable] = list(zip(p_sets, p_types, strict=True))
        g_id: list[Hashable] = list(zip(g_sets, g_types, strict=True))
    else:
        p_id = list(zip(p_src, p_types, p_tgt, strict=True))
        g_id = list(zip(g_src, g_types, g_tgt, strict=True))
    quick = identity_matching(p_id, g_id)
    if quick is not None:
        # Every object of the smaller side has an identical partner: exact matches, optimal.
        found = [RelationshipPair(po[i], go[j], "exact", 1.0) for i, j in quick]
        found.sort(key=lambda p: (p.pred, p.gold))
        return RelationshipAlignment(tuple(found), None)

    table: dict[str, int] = {}
    p_code = np.asarray([table.setdefault(t, len(table)) for t in p_types], dtype=np.intp)
    g_code = np.asarray([table.setdefault(t, len(table)) for t in g_types], dtype=np.intp)
    same = np.equal.outer(p_code, g_code)
    inv = [table.get(t, -1) if (t := config.inverse_of(k)) is not None else -1 for k in p_types]
    if max(inv) >= 0:
        inverse = np.equal.outer(np.asarray(inv, dtype=np.intp), g_code)
    else:
        inverse = np.zeros((n, m), dtype=bool)
    sym_list = [t in config.symmetric for t in p_types]
    symmetric = np.asarray(sym_list, dtype=bool)
    via_straight: BoolArray | None = None
    via_swapped: BoolArray | None = None
    if clusters is not None and config.match != "span":
        src_forms, tgt_forms = clusters.relationship_forms(gs)
        (ss, tt, st, ts), via_straight, via_swapped = _endpoint_cluster_similarity(
            p_src,
            p_tgt,
            [tuple(name_key(f, key_mode) for f in fs) for fs in src_forms],
            [tuple(name_key(f, key_mode) for f in fs) for fs in tgt_forms],
            key_mode,
            config.threshold,
        )
    else:
        ss, tt, st, ts = _endpoint_similarity(
            p_src, p_tgt, g_src, g_tgt, key_mode, config.threshold
        )
    thr = 1.0 if config.match in ("exact", "casefold", "span") else config.threshold - _EPS
    straight = (ss >= thr) & (tt >= thr)
    swapped = (st >= thr) & (ts >= thr)
    matrices = RelationshipMatrices(same, inverse, symmetric, straight, swapped, po, go)

    if config.match == "span":
        jac = jaccard_matrix(p_sets, g_sets)
        ok = same & (jac >= config.span_threshold - _EPS)
        rank = np.where(ok, np.where(jac >= 1.0, _RANK["exact"], _RANK["fuzzy"]), -1)
        sim = np.where(ok, jac, 0.0)
    else:
        ok = same & straight
        sim = np.where(ok, (ss + tt) / 2.0, 0.0)
        rank = np.where(ok, np.where(sim >= 1.0, _RANK["exact"], _RANK["fuzzy"]), -1)
        swapped_sim = (st + ts) / 2.0
        for active, ok_c, inverse_c in (
            (any(sym_list), same & symmetric[:, None] & swapped, False),
            (max(inv) >= 0, inverse & swapped, True),
        ):
            if not active or not ok_c.any():
                continue
            exact_rank = _RANK["inverse"] if inverse_c else _RANK["exact"]
            fuzzy_rank = _RANK["inverse-fuzzy"] if inverse_c else _RANK["fuzzy"]
            rank_c = np.where(swapped_sim >= 1.0, exact_rank, fuzzy_rank)
            better = ok_c & ((rank_c > rank) | ((rank_c == rank) & (swapped_sim > sim)))
            rank = np.where(better, rank_c, rank)
            sim = np.where(better, swapped_sim, sim)
    adm = rank >= 0
    r, c = assign(adm, sim, np.maximum(rank, 0), max_rank=max(_RANK.values()))
    by_rank = {v: k for k, v in _RANK.items()}
    if via_straight is not None and via_swapped is not None:
        # the orientation a pair matched in: straight when its types agree and its endpoints
        # match in place, else swapped (a symmetric type, or the inverse type)
        in_place = (same & straight)[r, c]
        via = np.where(in_place, via_straight[r, c], via_swapped[r, c]).tolist()
    else:
        via = [False] * len(r)
    pairs = [
        RelationshipPair(po[i], go[j], by_rank[k], x, v)
        for i, j, k, x, v in zip(
            r.tolist(), c.tolist(), rank[r, c].tolist(), sim[r, c].tolist(), via, strict=True
        )
    ]
    pairs.sort(key=lambda p: (p.pred, p.gold))
    return RelationshipAlignment(tuple(pairs), matrices)


def any_name_matches(
    names: Sequence[str], reference: Sequence[str], config: ScoringConfig
) -> BoolArray:
    """Per name: does it match any reference name under the configured name mode?"""
    mode: MatchMode = "casefold" if config.match == "span" else config.match
    if not names or not reference:
        return np.zeros(len(names), dtype=bool)
    _, adm = name_similarity(
        [name_key(n, mode) for n in names],
        [name_key(r, mode) for r in reference],
        mode,
        config.threshold,
    )
    return np.asarray(adm.any(axis=1), dtype=bool)
