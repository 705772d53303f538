"""A comparison between two generations: JSON + Markdown on disk, read back for promotion."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from candlefire_pipeline.fsutil import write_atomic
from candlefire_pipeline.parity.gates import gate_table_markdown, gates_from_dicts
from candlefire_pipeline.parity.report.model import ParityReport

REPORT_GLOB = "compare-*.json"


@dataclass
class GenerationReport:
    report_id: str
    created_at: str
    #: when the ledgers were read, before any query (UTC ISO 8601)
    started_at: str
    #: "quality" (model or chunker differ) or "overlap" (only the layout differs), and why
    kind: str
    why: str
    #: {"backend", "generation", "gid", "identity"} of each side
    reference: dict
    candidate: dict
    #: the parity harness run on the two (ParityReport as a dict; ann_recall from the
    #: candidate's own oracle)
    parity: dict
    #: QualityComparison as a dict, {"error": ...}, or None for an overlap comparison
    quality: dict | None = None
    #: candidate store -> {missing, orphaned, stale} against its ledger, or {"error"}
    store_diffs: dict = field(default_factory=dict)
    #: {"read_at", "applied": {"<generation>/<store>": {batch: applied_at}}}
    ledger: dict = field(default_factory=dict)
    thresholds: dict = field(default_factory=dict)
    gates: list[dict] = field(default_factory=list)

    def parity_report(self) -> ParityReport:
        return ParityReport.from_dict(self.parity)

    def target(self, side: str) -> tuple[str, str]:
        """(backend, generation) of "reference" or "candidate"."""
        entry = getattr(self, side)
        return entry["backend"], entry["generation"]

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, sort_keys=True, allow_nan=False)

    @classmethod
    def from_dict(cls, data: dict) -> GenerationReport:
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})

    def write(self, reports_dir: Path) -> tuple[Path, Path]:
        """compare-<id>.md, then .json (load_latest sees a report once both exist)."""
        md_path = write_atomic(Path(reports_dir) / f"compare-{self.report_id}.md", self.markdown())
        json_path = write_atomic(
            Path(reports_dir) / f"compare-{self.report_id}.json", self.to_json()
        )
        return json_path, md_path

    def markdown(self) -> str:
        ref, cand = self.reference, self.candidate
        parity = self.parity_report()
        lines = [
            f"# Generation comparison {self.report_id}",
            "",
            f"Created {self.created_at}. **Kind: {self.kind}** - {self.why}.",
            "",
            "| side | backend | generation | id | identity |",
            "|---|---|---|---|---|",
            *(
                f"| {side} | {e['backend']} | {e['generation']} | {e['gid']} | {e['describe']} |"
                for side, e in (("reference", ref), ("candidate", cand))
            ),
            "",
            "## Gates",
            "",
            gate_table_markdown(gates_from_dicts(self.gates)) if self.gates else "not evaluated",
            "",
            *self._quality_lines(),
            "## Retrieval on the live stores",
            "",
            "| metric | value |",
            "|---|---|",
            *(f"| {k} | {v:.4g} |" for k, v in sorted(parity.headline().items())),
            "",
            "## Candidate stores against its ledger",
            "",
            *(f"- {store}: {diff}" for store, diff in sorted(self.store_diffs.items())),
        ]
        return "\n".join(lines) + "\n"

    def _quality_lines(self) -> list[str]:
        quality = self.quality
        if quality is None:
            return ["## Quality", "", "Not judged: both sides hold the same vectors.", ""]
        if "error" in quality:
            return ["## Quality", "", f"Not judged: {quality['error']}", ""]
        lines = [
            "## Quality (nDCG@10, exact search, judged set)",
            "",
            f"Judged set: {quality['judged_set']}: {quality['judged']} of {quality['queries']} "
            f"queries have a relevant paper among {quality['corpus_papers']} papers.",
            "",
            "| reference | candidate | delta | 95% CI (paired bootstrap) |",
            "|---|---|---|---|",
            f"| {quality['reference_ndcg']:.4f} | {quality['candidate_ndcg']:.4f} | "
            f"{quality['delta']:+.4f} | [{quality['ci_low']:+.4f}, {quality['ci_high']:+.4f}] |",
            "",
        ]
        if quality.get("worst"):
            lines += ["Queries that lost the most (qid: reference -> candidate): "
                      + ", ".join(f"{q}: {r:.3f} -> {c:.3f}" for q, r, c in quality["worst"]),
                      ""]  # fmt: skip
        return lines


def load_latest(reports_dir: Path) -> GenerationReport | None:
    """The newest comparison in reports_dir (ids start with a UTC timestamp), or None."""
    folder = Path(reports_dir)
    paths = sorted(folder.glob(REPORT_GLOB)) if folder.is_dir() else []
    if not paths:
        return None
    return GenerationReport.from_dict(json.loads(paths[-1].read_text(encoding="utf-8")))
