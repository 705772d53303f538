"""The parity report (JSON + Markdown on disk): figures, divergences and the gates it passed."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from candlefire_pipeline.fsutil import write_atomic
from candlefire_pipeline.parity.gates import gate_table_markdown, gates_from_dicts

DIVERGENCE_KINDS = ("case", "short_term", "missing_chunk", "ann_miss", "order", "other")
REPORT_GLOB = "parity-*.json"


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


@dataclass
class Divergence:
    """One disagreement between reference and candidate, with the cause it was traced to."""

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
    divergences: list[Divergence]
    chunk_counts: dict[str, int]
    inventory: dict = field(default_factory=dict)  # reference-vs-candidate chunk_hashes diff
    # what the run saw and how it was judged (operations/parity.py fills these in)
    started_at: str = ""  # UTC ISO 8601, when the run read the ledger (before any query)
    ledger: dict = field(default_factory=dict)  # {"read_at", "applied": {store: {batch: t}}}
    store_diffs: dict = field(default_factory=dict)  # store -> missing/orphaned/stale vs ledger
    thresholds: dict = field(default_factory=dict)  # the ParityThresholds the gates used
    gates: list[dict] = field(default_factory=list)  # GateResult dicts at creation time

    # numbers ----------------------------------------------------------------------
    def latency(self, backend: str, stat: str, store_only: bool = False) -> float:
        """A latency statistic in ms of the whole retrieve(), or (store_only) without the query
        embedding, which is the same model call whatever the backend."""
        table = self.aggregates["store_latency_ms" if store_only else "latency_ms"]
        return float(table[backend][stat])

    def p95_ratio(self) -> float:
        """candidate / reference p95 of the store part of retrieve() (1.0 when both are 0)."""
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
        return out

    # serialization ----------------------------------------------------------------
    def to_dict(self) -> dict:
        return asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True, allow_nan=False)

    @classmethod
    def from_dict(cls, data: dict) -> ParityReport:
        values = dict(data)
        values["queries"] = [QueryRow(**row) for row in data["queries"]]
        values["divergences"] = [Divergence(**d) for d in data["divergences"]]
        return cls(**values)

    def to_markdown(self) -> str:
        """Headline table, the recorded gate table with its thresholds, per-query table and the
        divergence list."""
        return "\n".join(
            [
                f"# Parity report {self.report_id}",
                "",
                f"Created {self.created_at}. Reference `{self.reference}`, candidate "
                f"`{self.candidate}`, oracle `{self.oracle or '-'}`; {len(self.queries)} queries. "
                "Chunks: " + ", ".join(f"{b} {n}" for b, n in self.chunk_counts.items()) + ".",
                "",
                *_table(("metric", "value"), [(k, f"{v:.4g}") for k, v in self.headline().items()]),
                "",
                "## Gates",
                "",
                *_gates_section(self),
                "",
                "## Queries",
                "",
                *_query_table(self),
                "",
                f"## Divergences ({len(self.divergences)})",
                "",
                *_divergence_table(self.divergences),
                "",
            ]
        )

    def write(self, reports_dir: Path) -> tuple[Path, Path]:
        """Write parity-<id>.json and .md atomically; return (json_path, md_path)."""
        reports_dir = Path(reports_dir)
        reports_dir.mkdir(parents=True, exist_ok=True)
        md_path = write_atomic(reports_dir / f"parity-{self.report_id}.md", self.to_markdown())
        # JSON last: load_latest only sees a report once both files exist.
        json_path = write_atomic(reports_dir / f"parity-{self.report_id}.json", self.to_json())
        return json_path, md_path


def load_latest(reports_dir: Path) -> ParityReport | None:
    """The newest report in reports_dir (ids start with a UTC timestamp), or None."""
    paths = sorted(Path(reports_dir).glob(REPORT_GLOB)) if Path(reports_dir).is_dir() else []
    if not paths:
        return None
    return ParityReport.from_dict(json.loads(paths[-1].read_text(encoding="utf-8")))


def _cell(value: object) -> str:
    return str(value if value is not None else "").replace("|", "\\|").replace("\n", " ")


def _table(header: tuple[str, ...], rows: list[tuple]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return lines + ["| " + " | ".join(_cell(v) for v in row) + " |" for row in rows]


def _gates_section(report: ParityReport) -> list[str]:
    if not report.gates:
        return ["Not evaluated: this report was not produced by a parity run; it cannot flip."]
    thresholds = ", ".join(f"{k} {v:g}" for k, v in sorted(report.thresholds.items()))
    return [
        f"Thresholds used: {thresholds}. Freshness is checked again against the ledger whenever "
        "the report is used (blocking checks, `candlefire status`, the switch).",
        "",
        gate_table_markdown(gates_from_dicts(report.gates)),
    ]


def _query_table(report: ParityReport) -> list[str]:
    header = ("query", "overlap", "jaccard", "rbo", "grounding", "keywords") + tuple(
        f"{b} ms" for b in report.backends
    )
    rows = [
        (
            row.query_id, f"{row.overlap:.3f}", f"{row.jaccard:.3f}", f"{row.rbo:.3f}",
            "=" if row.grounding_equal else "DIFF", "=" if row.keyword_equal else "DIFF",
            *(f"{row.latency_ms[b]:.1f}" for b in report.backends),
        )
        for row in report.queries
    ]  # fmt: skip
    return _table(header, rows)


def _divergence_table(divergences: list[Divergence]) -> list[str]:
    if not divergences:
        return ["None: every compared result agrees."]
    rows = [
        (d.query_id or "-", d.kind, d.field, d.pmid or d.term or "-", d.chunk_id or "-",
         d.present_in or "-", d.detail)
        for d in divergences
    ]  # fmt: skip
    return _table(("query", "kind", "field", "pmid/term", "chunk", "present in", "detail"), rows)
