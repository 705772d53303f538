"""The parity report as data: figures, divergences, the gates (parity/report/files.py writes
its JSON, Markdown and plots; parity/report/markdown.py and plots.py render it)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

DIVERGENCE_KINDS = ("case", "short_term", "missing_chunk", "ann_miss", "order", "other")
#: The roles a store plays in a report: the gates compare reference and candidate only. A
#: retired store is not written and not compared (the exact oracle is the reference then).
REFERENCE_ROLE, CANDIDATE_ROLE, EVALUATED_ROLE = "reference", "candidate", "evaluated"
RETIRED_ROLE = "retired"


@dataclass
class QueryRow:
    """One query's comparison: candidate vs reference top-k PMIDs, agreement flags, latency."""

    query_id: str
    text: str
    top: dict[str, list[str]]  # backend -> final top-k PMIDs, best first
    overlap: float
    jaccard: float
    recall: float
    rbo: float
    grounding_equal: bool
    keyword_equal: bool
    latency_ms: dict[str, float]  # the whole retrieve() call
    store_ms: dict[str, float] = field(default_factory=dict)  # latency_ms minus query embedding
    ann_recall: dict[str, float] = field(default_factory=dict)
    stage_ms: dict[str, dict[str, float]] = field(default_factory=dict)  # backend -> stage -> ms
    #: store -> {"overlap": float, "grounding_equal": bool, "keyword_equal": bool} vs the oracle
    vs_oracle: dict[str, dict] = field(default_factory=dict)


@dataclass
class Divergence:
    """One disagreement between two backends, with the cause it was traced to."""

    kind: str  # one of DIVERGENCE_KINDS
    field: str  # "top15" | "keyword" | "grounding" | "inventory"
    query_id: str | None = None
    pmid: str | None = None
    term: str | None = None
    chunk_id: str | None = None
    present_in: str | None = None  # the backend that has the PMID / chunk / says True
    detail: str = ""


@dataclass
class ParityReport:
    report_id: str
    created_at: str  # UTC ISO 8601, e.g. 2025-06-07T03:00:00.123456+00:00
    reference: str
    candidate: str
    oracle: str | None
    backends: list[str]
    queries: list[QueryRow]
    aggregates: dict
    divergences: list[Divergence]  # reference vs candidate: what the gates judge
    chunk_counts: dict[str, int]
    inventory: dict = field(default_factory=dict)  # reference-vs-candidate chunk_hashes diff
    # what the run saw and how it was judged (operations/parity.py fills these in)
    started_at: str = ""  # UTC ISO 8601, when the run read the ledger (before any query)
    ledger: dict = field(default_factory=dict)  # {"read_at", "applied": {store: {batch: t}}}
    store_diffs: dict = field(default_factory=dict)  # store -> missing/orphaned/stale vs ledger
    thresholds: dict = field(default_factory=dict)  # the ParityThresholds the gates used
    gates: list[dict] = field(default_factory=list)  # GateResult dicts at creation time
    #: store -> its divergences from the exact oracle (every store, gated or evaluated)
    store_divergences: dict[str, list[Divergence]] = field(default_factory=dict)
    #: evaluated stores left out of this run, with why (unreachable, failed mid-run)
    unavailable: dict[str, str] = field(default_factory=dict)
    #: plot kind -> PNG file name beside the markdown (parity/report/plots.py)
    plots: dict[str, str] = field(default_factory=dict)
    #: store -> the server versions it ran on (backends/pg/version.ServerVersions as a dict)
    servers: dict[str, dict] = field(default_factory=dict)
    #: store -> its conformance with candle-fire's recorded answers, or {"error": why}
    #: (operations/conformance.py; parity/conformance.StoreConformance.to_dict())
    conformance: dict[str, dict] = field(default_factory=dict)
    #: store -> its retirement when the report ran ({"since", "report_id", "reference_p95_ms"})
    retired: dict[str, dict] = field(default_factory=dict)
    #: the app's own collection against the candidate, query by query (operations/adoption/
    #: reference.py); {} when no app collection is configured
    app_collection: dict = field(default_factory=dict)

    # roles ------------------------------------------------------------------------
    def stores(self) -> list[str]:
        """Every store the run compared (the backends without the oracle), gated ones first."""
        compared = [b for b in self.backends if b != self.oracle]
        return sorted(compared, key=lambda s: (s not in self.gated_stores(), s != self.reference))

    def gated_stores(self) -> list[str]:
        """The stores the gates and the flip compare: reference and candidate."""
        return [self.reference, self.candidate]

    def evaluated_stores(self) -> list[str]:
        """Stores that are compared with the oracle but never served nor gated."""
        return [b for b in self.stores() if b not in self.gated_stores()]

    def role(self, store: str) -> str:
        if store in self.retired:
            return RETIRED_ROLE
        if store == self.reference:
            return REFERENCE_ROLE
        return CANDIDATE_ROLE if store == self.candidate else EVALUATED_ROLE

    def store_column(self, store: str) -> dict:
        """The store's figures against the oracle ({} for a report from before N stores)."""
        return self.aggregates.get("stores", {}).get(store, {})

    def diverging_stores(self) -> list[str]:
        """Stores whose answers differ from the exact oracle's in any traced way."""
        return [s for s in self.stores() if self.store_column(s).get("divergences")]

    # numbers ----------------------------------------------------------------------
    def latency(self, backend: str, stat: str, store_only: bool = False) -> float:
        """A latency statistic in ms of the whole retrieve(), or (store_only) without the query
        embedding, which is the same model call whatever the backend."""
        table = self.aggregates["store_latency_ms" if store_only else "latency_ms"]
        return float(table[backend][stat])

    def p95_baseline(self) -> tuple[str, float, str] | None:
        """With the reference retired: (that store, its store-side p95 in the report it was
        retired on, that report's id), what the candidate's p95 is judged against."""
        for store, retirement in self.retired.items():
            if retirement.get("reference_p95_ms") is not None:
                return store, float(retirement["reference_p95_ms"]), retirement.get("report_id")
        return None

    def p95_ratio(self) -> float:
        """candidate / reference p95 of the store part of retrieve() (1.0 when both are 0); with
        the reference retired, over its p95 when it retired."""
        baseline = self.p95_baseline() if self.reference == self.oracle else None
        if baseline is not None:
            ref = baseline[1]
        else:
            ref = self.latency(self.reference, "p95", store_only=True)
        cand = self.latency(self.candidate, "p95", store_only=True)
        if ref <= 0.0:
            return 1.0 if cand <= 0.0 else float("inf")
        return cand / ref

    def headline(self) -> dict[str, float]:
        """The report's key figures as flat numbers (Dagster metadata, `candlefire status`)."""
        agg = self.aggregates
        out = {
            "mean_overlap": float(agg["mean_overlap"]),
            "min_overlap": float(agg["min_overlap"]),
            "grounding_agreement": float(agg["grounding_agreement"]),
            "keyword_agreement": float(agg["keyword_agreement"]),
            "p95_ratio": self.p95_ratio(),
            "divergences": float(len(self.divergences)),
        }
        for backend in self.backends:
            out[f"p50_ms_{backend}"] = self.latency(backend, "p50")
            out[f"p95_ms_{backend}"] = self.latency(backend, "p95")
            out[f"p95_store_ms_{backend}"] = self.latency(backend, "p95", store_only=True)
        for backend, value in agg.get("ann_recall", {}).items():
            out[f"ann_recall_{backend}"] = float(value)
        for store in self.stores():
            column = self.store_column(store)
            if column.get("mean_overlap") is not None:
                out[f"oracle_overlap_{store}"] = float(column["mean_overlap"])
            if column:
                out[f"oracle_divergences_{store}"] = float(column["divergences"])
        for store, found in self.conformance.items():
            if "counts" in found:
                out[f"conformance_differing_{store}"] = float(found["differing"])
        return out

    # serialization ----------------------------------------------------------------
    def to_dict(self) -> dict:
        return asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True, allow_nan=False)

    @classmethod
    def from_dict(cls, data: dict) -> ParityReport:
        """A report from its JSON, including one written before a field existed (defaults)."""
        values = dict(data)
        values["queries"] = [QueryRow(**row) for row in data["queries"]]
        values["divergences"] = [Divergence(**d) for d in data["divergences"]]
        values["store_divergences"] = {
            store: [Divergence(**d) for d in found]
            for store, found in data.get("store_divergences", {}).items()
        }
        return cls(**values)
