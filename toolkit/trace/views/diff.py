"""Two attributions compared per original layer, per op and per backend, with run-to-run noise.

    d = tk.diff(att_a, att_b)       # any two attributions (toolkit, native, ExecuTorch, ORT,
    d.by_layer()                    # fleet, Vela estimates), a = before, b = after
    d.moved_ops()                   # ops fused in one compile and not in the other

Every side is read through the views all attributions share (``by_layer()``, ``by_op()``,
``by_backend()`` where there is one, ``summary()``) and their per-run tables (``per_run(by)``:
``row``, id, ``run``, ``ns``), so a diff works on every source the join reads.

**Noise.** A row's per-run times in ``a`` and in ``b`` are compared with the Mann–Whitney U
rank test (two-sided; :mod:`toolkit.trace.views._ranktest`), and the rows of one view are corrected
together with Benjamini–Hochberg at ``alpha`` (a false discovery rate, so that a view of 200
layers does not mark ten of them by chance). A rank test, not a t-test or a bootstrap: per-run
times are skewed and have outliers (a preempted run, a cache miss, a warm-up run left in),
which a rank test shrugs off; it needs no distribution and no resampling, so a verdict is
deterministic (no seed), exact for small run counts, and vectorised over every row at once
(a bootstrap of a million-event trace's layers would be slow and its interval would move with
the seed). Its price: with fewer than 4 runs on a side it can never reach ``p < 0.05``; such a
diff gives the deltas without a verdict and says why (``reason``).
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from toolkit.errors import ToolkitError
from toolkit.trace.join.layer_views import LayerAttribution
from toolkit.trace.views._ranktest import bh_reject, mann_whitney_p, min_p_value

__all__ = ["LayerDiff", "diff", "DIFF_COLUMNS", "MATCH_MODES"]

#: columns every table of a :class:`LayerDiff` has after its id column
DIFF_COLUMNS: tuple[str, ...] = (
    "present", "a_mean_ms", "a_p50_ms", "b_mean_ms", "b_p50_ms", "delta_ns", "delta_pct",
    "delta_share", "p_value", "beyond_noise", "verdict", "reason")
#: ``match=`` values: ``model`` (one source model, refused otherwise) or ``name``
MATCH_MODES = ("model", "name")
_STR = pd.Series([""]).dtype
_NO_RUNS = "{side} has no per-run times ({kind} offers no per_run()); the means come from its " \
           "by_{view}() table"


@dataclass
class _Side:
    """One view of one attribution: row ids, per-run ns matrix (rows, runs) or None."""

    ids: list[str]
    matrix: np.ndarray | None
    mean_ms: np.ndarray
    p50_ms: np.ndarray
    total_ns: np.ndarray
    runs: int
    why_no_runs: str = ""


def _as_attribution(x: Any, side: str) -> Any:
    """An attribution of either kind: a :class:`LayerAttribution`, or Vela's estimates (whose
    ``join()`` is one)."""
    if isinstance(x, LayerAttribution):
        return x
    join = getattr(x, "join", None)
    if callable(join) and hasattr(x, "metrics"):
        return join()
    raise ToolkitError(f"diff: {side} is a {type(x).__name__}, not an attribution",
                       fix="pass what tk.trace_join, tk.join_ort, tk.trace_join_many, "
                           "tk.read_executorch(...).attribution() or "
                           "tk.read_vela(...).attribution() returned")


def _run_values(att: Any) -> np.ndarray:
    values = getattr(att, "run_values", None)
    if callable(values):
        return np.asarray(values(), dtype=np.int64)
    return np.arange(int(att.summary()["runs"]), dtype=np.int64)


def _layer_rows(table: pd.DataFrame) -> np.ndarray:
    """Rows of a ``by_layer()`` table that are layers (an ExecuTorch profile's buckets are
    runtime time, not layers: they are left to the summary's totals)."""
    if "kind" in table.columns:
        return (table["kind"].astype(str) == "layer").to_numpy()
    return np.ones(len(table), dtype=bool)


def _side(att: Any, view: str, table: pd.DataFrame, ids: list[str], keep: np.ndarray,
          side: str) -> _Side:
    """Per-run matrix of ``table`` (the ``by_<view>()`` rows ``keep``), ids ``ids``."""
    runs = int(att.summary()["runs"])
    rows = np.flatnonzero(keep)
    total = table["total_ns"].to_numpy(dtype=np.float64)[rows]
    per_run = getattr(att, "per_run", None)
    matrix = None
    why = ""
    if callable(per_run):
        values = _run_values(att)
        # the id column is not needed (rows are positions in the view): left out when it can
        takes_ids = "ids" in inspect.signature(per_run).parameters
        long = per_run(by=view, ids=False) if takes_ids else per_run(by=view)
        col = np.searchsorted(values, long["run"].to_numpy(dtype=np.int64))
        full = np.zeros((len(table), len(values)), dtype=np.float64)
        np.add.at(full, (long["row"].to_numpy(dtype=np.int64), col),
                  long["ns"].to_numpy(dtype=np.float64))
        matrix = full[rows]
        runs = len(values)
    else:
        why = _NO_RUNS.format(side=side, kind=type(att).__name__, view=view)
    if matrix is not None and matrix.shape[1]:
        mean = matrix.mean(axis=1) / 1e6
        p50 = np.median(matrix, axis=1) / 1e6
    else:
        mean = (table["avg_ms"].to_numpy(dtype=np.float64)[rows] if "avg_ms" in table
                else total / max(runs, 1) / 1e6)
        p50 = (table["p50_ms"].to_numpy(dtype=np.float64)[rows] if "p50_ms" in table
               else np.full(len(rows), np.nan))
    return _Side(ids, matrix, mean, p50, total, runs, why)


def _align(a: _Side, b: _Side) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Union of ids in a's order then b's new ones; positions in a and b (-1: absent)."""
    keys = list(dict.fromkeys([*a.ids, *b.ids]))
    ia = {k: i for i, k in enumerate(a.ids)}
    ib = {k: i for i, k in enumerate(b.ids)}
    return (keys, np.array([ia.get(k, -1) for k in keys], dtype=np.int64),
            np.array([ib.get(k, -1) for k in keys], dtype=np.int64))


def _pick(values: np.ndarray, at: np.ndarray, fill: float = 0.0) -> np.ndarray:
    out = np.full(len(at), fill, dtype=np.float64)
    ok = at >= 0
    out[ok] = values[at[ok]]
    return out


def _runs_of(side: _Side, at: np.ndarray) -> np.ndarray:
    assert side.matrix is not None
    out = np.zeros((len(at), side.matrix.shape[1]), dtype=np.float64)
    ok = at >= 0
    out[ok] = side.matrix[at[ok]]
    return out


def _compare(id_column: str, a: _Side, b: _Side, alpha: float, by_name: bool
             ) -> pd.DataFrame:
    """The diff table of one view (see :meth:`LayerDiff.by_layer`)."""
    keys, ia, ib = _align(a, b)
    n = len(keys)
    a_mean, b_mean = _pick(a.mean_ms, ia), _pick(b.mean_ms, ib)
    a_tot, b_tot = _pick(a.total_ns, ia), _pick(b.total_ns, ib)
    has_a = (ia >= 0) & (a_tot > 0)
    has_b = (ib >= 0) & (b_tot > 0)
    present = np.where(has_a & has_b, "both", np.where(has_a, "a only",
                                                       np.where(has_b, "b only", "neither")))
    delta = (b_mean - a_mean) * 1e6  # ns per run
    total_delta = float(delta.sum())
    with np.errstate(divide="ignore", invalid="ignore"):
        pct = np.where(a_mean > 0, 100.0 * delta / np.where(a_mean > 0, a_mean * 1e6, 1.0),
                       np.nan)
        share = delta / total_delta if total_delta else np.full(n, np.nan)
    p = np.full(n, np.nan)
    verdict = np.full(n, "no verdict", dtype=object)
    reason = np.full(n, "", dtype=object)
    beyond = pd.array([pd.NA] * n, dtype="boolean")
    if a.matrix is None or b.matrix is None:
        reason[:] = a.why_no_runs or b.why_no_runs
    elif min_p_value(a.runs, b.runs) > alpha:
        reason[:] = (f"too few runs for a noise estimate: {a.runs} in a and {b.runs} in b; a "
                     f"rank test cannot reach p < {alpha:g} with these counts (its smallest "
                     f"p is {min_p_value(a.runs, b.runs):.3g}): record at least 4 runs on "
                     "each side, 10 or more for small changes")
    else:
        testable = (ia >= 0) & (ib >= 0) if by_name else np.ones(n, dtype=bool)
        testable &= has_a | has_b
        rows = np.flatnonzero(testable)
        p[rows] = mann_whitney_p(_runs_of(a, ia[rows]), _runs_of(b, ib[rows]))
        hit = bh_reject(p, alpha)
        beyond = pd.array(np.where(testable, hit, False), dtype="boolean")
        beyond[~testable] = pd.NA
        verdict[testable] = np.where(hit[testable],
                                     np.where(delta[testable] > 0, "slower in b",
                                              "faster in b"), "within noise")
        one_side = ~testable & ((ia < 0) | (ib < 0))
        reason[one_side] = np.where(ia[one_side] < 0, f"no {id_column} of this name in a",
                                    f"no {id_column} of this name in b")
        reason[~testable & ~one_side] = "no time on either side"
    out = pd.DataFrame({
        id_column: pd.Series(keys, dtype=_STR),
        "present": pd.Series(present, dtype=_STR),
        "a_mean_ms": a_mean, "a_p50_ms": _pick(a.p50_ms, ia),
        "b_mean_ms": b_mean, "b_p50_ms": _pick(b.p50_ms, ib),
        "delta_ns": delta, "delta_pct": pct, "delta_share": share, "p_value": p,
        "beyond_noise": beyond,
        "verdict": pd.Series(verdict, dtype=_STR), "reason": pd.Series(reason, dtype=_STR),
    })
    order = np.argsort(-np.abs(delta), kind="stable")
    return out.iloc[order].reset_index(drop=True)


def _split_layers(text: str) -> tuple[str, ...]:
    """The layers of a ``by_source_op()`` row (the join writes them ``;``-joined)."""
    return tuple(x for x in str(text).split(";") if x)


def _op_members(att: Any) -> tuple[pd.DataFrame, dict[str, tuple[str, ...]]] | None:
    """Per row of ``by_op()``: its label and the source ops it holds (``members``, a tuple of
    str), and the layers of each source op; None when the attribution names no source ops per
    op."""
    ops = att.by_op()
    if "source_ids" in ops.columns and callable(getattr(att, "by_source_op", None)):
        src = att.by_source_op()
        layers = {str(s): _split_layers(t) for s, t in
                  zip(src["source_id"].tolist(), src["layers"].tolist())}
        members = [tuple(str(s) for s in ids) for ids in ops["source_ids"].tolist()]
    elif "original" in ops.columns and callable(getattr(att, "by_node", None)):
        nodes = att.by_node()
        layers = {str(nm): (str(ly),) for nm, ly in zip(nodes["name"].tolist(),
                                                       nodes["layer"].tolist())}
        members = [tuple(str(s) for s in ids) for ids in ops["original"].tolist()]
    else:
        return None
    kind = ops["operator"] if "operator" in ops.columns else ops.get("op", "")
    labels = [f"{k} {nm}".strip() for k, nm in zip(pd.Series(kind).astype(str).tolist(),
                                                    ops["name"].astype(str).tolist())]
    return pd.DataFrame({"op": labels, "members": members}), layers


def _op_key(members: tuple[str, ...]) -> str:
    return "{" + ", ".join(sorted(members, key=lambda m: (len(m), m))) + "}"


class LayerDiff:
    """Two attributions compared: ``a`` (before, baseline) and ``b`` (after).

    Every table has its id column, then :data:`DIFF_COLUMNS`: ``present`` (``both``, ``a
    only``, ``b only``: where the row has time; ``neither``), ``a_mean_ms``, ``a_p50_ms``,
    ``b_mean_ms``, ``b_p50_ms`` (float64 ms per run: mean and median over the runs, a run
    without time counting 0), ``delta_ns`` (float64 ns per run, mean b - mean a), ``delta_pct``
    (% of a's mean; NaN when a has none), ``delta_share`` (the row's part of the summed
    ``delta_ns`` of the table; NaN when that is 0), ``p_value`` (float64, Mann–Whitney U,
    two-sided; NaN: not tested), ``beyond_noise`` (nullable bool: True when the change is
    beyond run-to-run noise after the Benjamini–Hochberg correction; NA: no verdict),
    ``verdict`` (``slower in b``, ``faster in b``, ``within noise``, ``no verdict``) and
    ``reason`` (why there is no verdict). Rows are sorted by ``|delta_ns|``, largest first.

    Attributes: ``a``, ``b`` (the attributions), ``match`` (``model`` or ``name``),
    ``alpha`` (the false discovery rate of the noise test), ``labels`` (names of a and b).
    """

    def __init__(self, a: Any, b: Any, *, match: str = "model", alpha: float = 0.05,
                 labels: tuple[str, str] = ("a", "b")) -> None:
        if match not in MATCH_MODES:
            raise ToolkitError(f"diff: unknown match={match!r}", fix=f"use one of {MATCH_MODES}")
        if not 0 < float(alpha) < 1:
            raise ToolkitError(f"diff: alpha={alpha!r} is not a probability",
                               fix="pass alpha between 0 and 1, e.g. 0.05")
        self.a = _as_attribution(a, "a")
        self.b = _as_attribution(b, "b")
        self.match = match
        self.alpha = float(alpha)
        self.labels = (str(labels[0]), str(labels[1]))
        self._cache: dict[str, pd.DataFrame] = {}
        self._layers_a = self.a.by_layer()
        self._layers_b = self.b.by_layer()
        self.same_model, self._mismatch = self._same_model()
        if not self.same_model and match == "model":
            raise ToolkitError(
                f"diff: a and b are profiles of different source models ({self._mismatch})",
                fix="compare two profiles of one model, or pass match='name' to pair the "
                    "layers of the same name (LayerDiff.unmatched() then lists the others)")

    def __repr__(self) -> str:
        s = self.summary()
        return (f"<LayerDiff {self.labels[0]} -> {self.labels[1]}: "
                f"{s['delta_ns'] / 1e6:+.3f} ms per run ({s['delta_pct']:+.1f} %), "
                f"{s['beyond_noise']} layer(s) beyond noise, match={self.match}>")

    # ------------------------------------------------------------------ identity
    def _layer_ids(self, table: pd.DataFrame) -> list[str]:
        return table.loc[_layer_rows(table), "layer"].astype(str).tolist()

    def _same_model(self) -> tuple[bool, str]:
        """Whether a and b measured one source model, and what differs when not: the source
        ops (id and name) when both attributions list them, else the layer names."""
        for view, cols in (("by_source_op", ("source_id", "name")), ("by_node", ("name",))):
            fa, fb = getattr(self.a, view, None), getattr(self.b, view, None)
            if callable(fa) and callable(fb):
                ta, tb = fa(), fb()
                sa = list(zip(*(ta[c].astype(str).tolist() for c in cols)))
                sb = list(zip(*(tb[c].astype(str).tolist() for c in cols)))
                if sa != sb:
                    only_a = [":".join(x) for x in sa if x not in set(sb)][:3]
                    only_b = [":".join(x) for x in sb if x not in set(sa)][:3]
                    return False, (f"{len(sa)} and {len(sb)} source ops; a has {only_a}, "
                                   f"b has {only_b}")
                return True, ""
        la, lb = self._layer_ids(self._layers_a), self._layer_ids(self._layers_b)
        if set(la) != set(lb):
            only_a = [x for x in la if x not in set(lb)]
            only_b = [x for x in lb if x not in set(la)]
            return False, (f"{len(only_a)} layer(s) of a are not in b, e.g. {only_a[:3]}; "
                           f"{len(only_b)} of b are not in a, e.g. {only_b[:3]}")
        return True, ""

    # ------------------------------------------------------------------ views
    def _layer_side(self, att: Any, table: pd.DataFrame, side: str) -> _Side:
        keep = _layer_rows(table)
        return _side(att, "layer", table, table.loc[keep, "layer"].astype(str).tolist(), keep,
                     side)

    def by_layer(self) -> pd.DataFrame:
        """One row per original layer of either side: ``layer`` (str), then
        :data:`DIFF_COLUMNS` (see the class), largest ``|delta_ns|`` first."""
        if "layer" not in self._cache:
            a = self._layer_side(self.a, self._layers_a, "a")
            b = self._layer_side(self.b, self._layers_b, "b")
            self._cache["layer"] = _compare("layer", a, b, self.alpha, self.match == "name")
        return self._cache["layer"].copy()

    def _op_side(self, att: Any, side: str, groups: pd.DataFrame | None) -> _Side:
        table = att.by_op()
        if groups is not None and self.same_model:
            ids = [_op_key(m) for m in groups["members"].tolist()]
        else:
            ids = table["name"].astype(str).tolist()
        keep = np.ones(len(table), dtype=bool)
        s = _side(att, "op", table, ids, keep, side)
        if len(set(ids)) < len(ids):  # ops sharing a key (one ORT group): one row
            uniq = list(dict.fromkeys(ids))
            at = np.array([uniq.index(i) for i in ids], dtype=np.int64)
            matrix = None
            if s.matrix is not None:
                matrix = np.zeros((len(uniq), s.matrix.shape[1]))
                np.add.at(matrix, at, s.matrix)
            total = np.bincount(at, weights=s.total_ns, minlength=len(uniq))
            mean = np.bincount(at, weights=s.mean_ms, minlength=len(uniq))
            p50 = (np.median(matrix, axis=1) / 1e6 if matrix is not None and matrix.shape[1]
                   else np.full(len(uniq), np.nan))
            s = _Side(uniq, matrix, mean, p50, total, s.runs, s.why_no_runs)
        return s

    def by_op(self) -> pd.DataFrame:
        """One row per op of either side: ``op`` (str: the source ops the op holds, ``{3,
        4}``, when both sides list them for one source model, so that an op fused in one
        compile and not in the other is a row of its own on each side; else the op's name),
        ``ops`` (str: the ops of a and b with that key), then :data:`DIFF_COLUMNS`."""
        if "op" not in self._cache:
            ga, gb = _op_members(self.a), _op_members(self.b)
            use = ga is not None and gb is not None and self.same_model
            a = self._op_side(self.a, "a", ga[0] if use and ga else None)
            b = self._op_side(self.b, "b", gb[0] if use and gb else None)
            table = _compare("op", a, b, self.alpha, self.match == "name" or not use)
            names: dict[str, list[str]] = {}
            if use and ga and gb:
                for g in (ga[0], gb[0]):
                    for label, m in zip(g["op"].tolist(), g["members"].tolist()):
                        names.setdefault(_op_key(m), []).append(label)
            table.insert(1, "ops", pd.Series([" | ".join(dict.fromkeys(names.get(k, [k])))
                                              for k in table["op"].tolist()], dtype=_STR))
            self._cache["op"] = table
        return self._cache["op"].copy()

    def _backend_side(self, att: Any, side: str) -> _Side:
        fb = getattr(att, "by_backend", None)
        if callable(fb):
            table = fb()
            if len(table):
                return _side(att, "backend", table, table["backend"].astype(str).tolist(),
                             np.ones(len(table), dtype=bool), side)
        layers = self._layer_side(att, att.by_layer(), side)  # one row: the whole runtime
        matrix = None if layers.matrix is None else layers.matrix.sum(axis=0, keepdims=True)
        mean = np.array([layers.mean_ms.sum()])
        p50 = (np.median(matrix, axis=1) / 1e6 if matrix is not None and matrix.shape[1]
               else np.array([np.nan]))
        return _Side(["(all)"], matrix, mean, p50, np.array([layers.total_ns.sum()]),
                     layers.runs, layers.why_no_runs)

    def by_backend(self) -> pd.DataFrame:
        """One row per backend of either side (``backend`` str; an attribution without
        backends is one row ``(all)``), then :data:`DIFF_COLUMNS`."""
        if "backend" not in self._cache:
            self._cache["backend"] = _compare(
                "backend", self._backend_side(self.a, "a"), self._backend_side(self.b, "b"),
                self.alpha, True)
        return self._cache["backend"].copy()

    def moved_ops(self) -> pd.DataFrame:
        """The ops that moved between two compiles of one source model: each op of one side
        whose set of source ops is held by no single op of the other side (fused in one, not
        in the other).

        Columns: ``side`` (``a`` or ``b``), ``op`` (str: its operator and name; ops with the
        same source ops joined by ``|``), ``source_ops`` (str: the source ops it holds, ``{3,
        4}``), ``layers`` (object: tuple of their original layers), ``other_side`` (str: the ops
        of the other side holding any of them), ``change`` (str: ``fused``: it holds source
        ops that the other side runs apart; ``split``: the other side fuses them with more;
        ``regrouped``). Empty when the compiles group the source ops alike, or when either
        side lists no source ops per op (ExecuTorch) or the models differ."""
        cols = ["side", "op", "source_ops", "layers", "other_side", "change"]
        ga, gb = _op_members(self.a), _op_members(self.b)
        if ga is None or gb is None or not self.same_model:
            return pd.DataFrame({c: pd.Series([], dtype=object if c == "layers" else _STR)
                                 for c in cols})
        rows = []
        for side, (mine, layers), (other, _) in (("a", ga, gb), ("b", gb, ga)):
            other_sets = {frozenset(m) for m in other["members"].tolist() if m}
            grouped: dict[frozenset[str], list[str]] = {}
            for label, m in zip(mine["op"].tolist(), mine["members"].tolist()):
                if m:
                    grouped.setdefault(frozenset(m), []).append(label)
            for members, labels in grouped.items():
                if members in other_sets:
                    continue
                holders = [lab for lab, m in zip(other["op"].tolist(),
                                                 other["members"].tolist())
                           if members & set(m)]
                bigger = any(members < set(m) for m in other["members"].tolist())
                smaller = all(set(m) <= members for m in other["members"].tolist()
                              if members & set(m))
                change = "split" if bigger else ("fused" if smaller else "regrouped")
                lay = tuple(dict.fromkeys(x for s in sorted(members) for x in layers.get(s, ())))
                rows.append({"side": side, "op": " | ".join(dict.fromkeys(labels)),
                             "source_ops": _op_key(tuple(members)), "layers": lay,
                             "other_side": " | ".join(dict.fromkeys(holders)),
                             "change": change})
        out = pd.DataFrame(rows, columns=cols)
        for c in cols:
            if c != "layers":
                out[c] = out[c].astype(_STR)
        return out

    def unmatched(self) -> pd.DataFrame:
        """Layers of one side that have no layer of the same name on the other: ``layer``
        (str), ``side`` (``a`` or ``b``), ``total_ns`` (float64: its time on that side).
        Empty when both sides list the same layers."""
        la, lb = self._layer_ids(self._layers_a), self._layer_ids(self._layers_b)
        rows = []
        for side, mine, other, table in (("a", la, lb, self._layers_a),
                                         ("b", lb, la, self._layers_b)):
            keep = table.loc[_layer_rows(table)]
            tot = dict(zip(keep["layer"].astype(str).tolist(),
                           keep["total_ns"].astype(float).tolist()))
            rows += [{"layer": x, "side": side, "total_ns": tot[x]} for x in mine
                     if x not in set(other)]
        return pd.DataFrame(rows, columns=["layer", "side", "total_ns"]).astype(
            {"layer": _STR, "side": _STR, "total_ns": np.float64})

    def summary(self) -> dict[str, Any]:
        """Headline figures: ``a_ms`` and ``b_ms`` (float: attributed time per run, mean over
        runs), ``delta_ns`` (per run), ``delta_pct``, ``runs_a``, ``runs_b``, ``layers``
        (rows of :meth:`by_layer`), ``beyond_noise`` (int: layers marked), ``slower`` and
        ``faster`` (int), ``verdict_reason`` (str: why no layer has a verdict, else ``""``),
        ``moved_ops`` (int), ``unmatched`` (int), ``match``, ``same_model`` (bool),
        ``alpha``."""
        t = self.by_layer()
        a_ms, b_ms = float(t["a_mean_ms"].sum()), float(t["b_mean_ms"].sum())
        marked = t["beyond_noise"].fillna(False).astype(bool)
        no_verdict = t["beyond_noise"].isna().all() and len(t)
        return {"a_ms": a_ms, "b_ms": b_ms, "delta_ns": (b_ms - a_ms) * 1e6,
                "delta_pct": 100 * (b_ms - a_ms) / a_ms if a_ms else float("nan"),
                "runs_a": int(self.a.summary()["runs"]), "runs_b": int(self.b.summary()["runs"]),
                "layers": len(t), "beyond_noise": int(marked.sum()),
                "slower": int((marked & (t["delta_ns"] > 0)).sum()),
                "faster": int((marked & (t["delta_ns"] < 0)).sum()),
                "verdict_reason": str(t["reason"].iloc[0]) if no_verdict else "",
                "moved_ops": len(self.moved_ops()), "unmatched": len(self.unmatched()),
                "match": self.match, "same_model": self.same_model, "alpha": self.alpha}

    def top(self, n: int = 10) -> pd.DataFrame:
        """The ``n`` layers with the largest ``|delta_ns|``: ``layer``, ``a_mean_ms``,
        ``b_mean_ms``, ``delta_ns``, ``delta_pct``, ``verdict``."""
        return self.by_layer().head(n)[["layer", "a_mean_ms", "b_mean_ms", "delta_ns",
                                        "delta_pct", "verdict"]]

    def _repr_html_(self) -> str:
        """Rich view: the summary line, the layers by |delta| with their verdicts, the moved
        ops and the unmatched layers when there are any, and bars of the largest deltas."""
        from toolkit.reprs import html_bars, html_table, html_view

        s = self.summary()
        a, b = self.labels
        line = (f"{a}: {s['a_ms']:,.3f} ms, {b}: {s['b_ms']:,.3f} ms per run "
                f"({s['delta_pct']:+.1f} %); {s['beyond_noise']} of {s['layers']} layers "
                f"beyond noise ({s['slower']} slower, {s['faster']} faster; Mann–Whitney U, "
                f"FDR {self.alpha:g})")
        if s["verdict_reason"]:
            line += f"; no verdict: {s['verdict_reason']}"
        layers = self.by_layer().assign(abs_delta_ns=lambda t: t["delta_ns"].abs())
        cols = ["layer", "present", "a_mean_ms", "b_mean_ms", "delta_ns", "delta_pct",
                "p_value", "verdict"]
        sections = [("layers by |delta|", html_table(layers, "abs_delta_ns", 12,
                                                      columns=cols))]
        moved = self.moved_ops()
        if len(moved):
            sections.append(("ops that moved between the compiles", html_table(moved, None, 12)))
        un = self.unmatched()
        if len(un):
            sections.append(("layers without a match", html_table(un, "total_ns", 12)))
        top = layers.head(8)
        grow = top[top["delta_ns"] > 0]
        return html_view(f"LayerDiff {a} -> {b}", line, sections,
                         figure=html_bars(grow["layer"].astype(str).tolist(),
                                          (grow["delta_ns"] / 1e3).tolist(), unit=" us",
                                          title="layers slower in b (us per run)"))


def diff(a: Any, b: Any, *, match: str = "model", alpha: float = 0.05,
         labels: tuple[str, str] = ("a", "b")) -> LayerDiff:
    """Compare two attributions (see :class:`LayerDiff`)."""
    return LayerDiff(a, b, match=match, alpha=alpha, labels=labels)
