"""How similar two names (or two evidence quotes) are, as whole matrices: the keys names compare
by, equality, normalized Levenshtein (rapidfuzz ``cdist``), the best form of a cluster, and the
Jaccard of word sets. The matcher (``matching``) aligns objects on these; nothing here decides
which objects pair up.
"""

from __future__ import annotations

import re
from collections.abc import Hashable, Sequence
from functools import lru_cache

import numpy as np
from numpy.typing import NDArray
from rapidfuzz import process
from rapidfuzz.distance import Levenshtein

from extraction_eval.evaluators.config import MatchMode

FloatArray = NDArray[np.float64]
BoolArray = NDArray[np.bool_]
IntArray = NDArray[np.intp]

# Absorbs float error in 1 - d/len so that e.g. a similarity of exactly 0.85 passes 0.85.
EPS = 1e-12
_WORD = re.compile(r"\w+")
_PARALLEL_CELLS = 250_000


@lru_cache(maxsize=1 << 16)
def name_key(name: str, mode: MatchMode) -> str:
    """The comparable form of a name: trimmed for ``exact``, casefolded and whitespace-collapsed
    otherwise (span mode uses casefold for its name-based diagnostics)."""
    if mode == "exact":
        return name.strip()
    return " ".join(name.casefold().split())


def _codes(pred: Sequence[Hashable], gold: Sequence[Hashable]) -> tuple[IntArray, IntArray]:
    table: dict[Hashable, int] = {}
    p = np.fromiter((table.setdefault(k, len(table)) for k in pred), dtype=np.intp, count=len(pred))
    g = np.fromiter((table.setdefault(k, len(table)) for k in gold), dtype=np.intp, count=len(gold))
    return p, g


def equality_matrix(pred: Sequence[Hashable], gold: Sequence[Hashable]) -> BoolArray:
    """``pred[i] == gold[j]`` for all pairs, without a Python loop over pairs."""
    p, g = _codes(pred, gold)
    return np.equal.outer(p, g)


def name_similarity(
    pred_keys: Sequence[str], gold_keys: Sequence[str], mode: MatchMode, threshold: float
) -> tuple[FloatArray, BoolArray]:
    """Similarity matrix in [0, 1] and the admissibility mask for already-keyed names.

    ``exact``/``casefold``: 1.0 on equal keys, else 0 (not admissible). ``fuzzy`` (and span
    mode's name diagnostics): rapidfuzz normalized Levenshtein similarity of the casefolded
    keys, admissible when >= threshold; equal keys score exactly 1.0.
    """
    if mode in ("exact", "casefold"):
        eq = equality_matrix(pred_keys, gold_keys)
        return eq.astype(np.float64), eq
    if not pred_keys or not gold_keys:
        sim = np.zeros((len(pred_keys), len(gold_keys)), dtype=np.float64)
        return sim, sim.astype(bool)
    # Threads only pay off on big matrices (rapidfuzz releases the GIL).
    workers = -1 if len(pred_keys) * len(gold_keys) >= _PARALLEL_CELLS else 1
    sim = process.cdist(
        pred_keys,
        gold_keys,
        scorer=Levenshtein.normalized_similarity,
        dtype=np.float64,
        workers=workers,
    )
    return sim, sim >= threshold - EPS


def cluster_similarity(
    pred_keys: Sequence[str],
    forms: Sequence[Sequence[str]],
    mode: MatchMode,
    threshold: float,
) -> tuple[FloatArray, BoolArray, IntArray]:
    """Like :func:`name_similarity` against clusters: column j is the best similarity to any of
    ``forms[j]`` (already keyed), with the index of that form (the first on a tie, so a cluster's
    own name wins over an equally good mention)."""
    n, m = len(pred_keys), len(forms)
    which = np.zeros((n, m), dtype=np.intp)
    if n == 0 or m == 0:
        sim = np.zeros((n, m), dtype=np.float64)
        return sim, sim.astype(bool), which
    columns: dict[str, int] = {}
    flat = [columns.setdefault(k, len(columns)) for fs in forms for k in fs]
    starts = np.cumsum([0, *(len(fs) for fs in forms[:-1])])
    sim_u, _ = name_similarity(pred_keys, list(columns), mode, threshold)
    sim_flat = sim_u[:, flat]
    sim = np.maximum.reduceat(sim_flat, starts, axis=1)
    for j, fs in enumerate(forms):
        if len(fs) > 1:
            s0 = int(starts[j])
            which[:, j] = np.argmax(sim_flat[:, s0 : s0 + len(fs)], axis=1)
    if mode in ("exact", "casefold"):
        return sim, sim >= 1.0, which
    return sim, sim >= threshold - EPS, which


def word_set(text: str) -> frozenset[str]:
    """Lowercased (casefolded) word set used by span mode; punctuation is not a word."""
    return frozenset(_WORD.findall(text.casefold()))


def jaccard_matrix(pred: Sequence[frozenset[str]], gold: Sequence[frozenset[str]]) -> FloatArray:
    """Pairwise Jaccard similarity via a sparse incidence product (two empty sets -> 1.0)."""
    from scipy import sparse  # deferred: scipy costs ~0.5 s to import, the CLI's --help none

    n, m = len(pred), len(gold)
    if n == 0 or m == 0:
        return np.zeros((n, m), dtype=np.float64)
    vocab: dict[str, int] = {}

    def postings(sets: Sequence[frozenset[str]]) -> tuple[list[int], list[int]]:
        indptr = [0]
        indices: list[int] = []
        for s in sets:
            indices.extend(vocab.setdefault(w, len(vocab)) for w in s)
            indptr.append(len(indices))
        return indices, indptr

    p_idx, p_ptr = postings(pred)
    g_idx, g_ptr = postings(gold)
    width = max(len(vocab), 1)
    p = sparse.csr_matrix((np.ones(len(p_idx)), p_idx, p_ptr), shape=(n, width))
    g = sparse.csr_matrix((np.ones(len(g_idx)), g_idx, g_ptr), shape=(m, width))
    inter = np.asarray((p @ g.T).toarray(), dtype=np.float64)
    sizes_p = np.diff(np.asarray(p_ptr, dtype=np.float64))
    sizes_g = np.diff(np.asarray(g_ptr, dtype=np.float64))
    union = sizes_p[:, None] + sizes_g[None, :] - inter
    safe = np.where(union > 0, union, 1.0)
    return np.asarray(np.where(union > 0, inter / safe, 1.0), dtype=np.float64)
