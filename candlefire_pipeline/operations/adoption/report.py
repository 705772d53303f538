"""The adoption report: the app's collection against the ledger, id by id, and whose vectors it
holds. Written under data/adoption/reports/<id>/ (report.json, report.md, classes.parquet)."""

from __future__ import annotations

import json
import logging
import time
import uuid
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from candlefire_pipeline.fsutil import write_atomic
from candlefire_pipeline.operations.adoption.classify import CLASSES, STALE_REASONS, classify
from candlefire_pipeline.operations.adoption.manifest import import_state
from candlefire_pipeline.operations.adoption.model_check import check_model
from candlefire_pipeline.operations.adoption.source import AdoptionError, AppCollection
from candlefire_pipeline.operations.adoption.staging import Staging
from candlefire_pipeline.settings import Settings

log = logging.getLogger(__name__)


@dataclass
class AdoptionReport:
    report_id: str
    created_at: str
    where: str
    collection: str
    fingerprint: str
    rows: int
    dim: int | None
    extra_keys: list[str]
    ledger: dict
    classes: dict
    model: dict
    seconds: dict
    #: the import of this fingerprint as the report found it (importer.import_state)
    imported: dict = field(default_factory=dict)

    @property
    def counts(self) -> dict[str, int]:
        return self.classes["counts"]

    def headline(self) -> str:
        counts = ", ".join(f"{n} {k}" for k, n in self.counts.items() if n)
        return f"{self.rows} app rows vs {self.ledger['chunks']} ledger chunks: {counts or 'none'}"

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> AdoptionReport:
        return cls(**data)


def new_report_id() -> str:
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ") + "-" + uuid.uuid4().hex[:8]


def staging_path(settings: Settings, fingerprint: str) -> Path:
    return settings.adoption_dir / "staging" / f"{fingerprint[:16]}.sqlite3"


def build_report(settings: Settings, embedder, emit=log.info, keep_staging: bool = False):
    """Read the app's collection, compare it with the ledger, check its model; the report
    (written to disk) and, with keep_staging, the open staging (the import reads it)."""
    started = time.perf_counter()
    with AppCollection(settings.app_collection, settings.adoption_dir / "snapshots") as source:
        staging = Staging(staging_path(settings, source.fingerprint))
        try:
            app = staging.load_app(source, emit)
            report = _compare(settings, embedder, source, staging, app, started)
        except BaseException as exc:
            staging.remove()
            if isinstance(exc, AdoptionError):
                source.discard()  # a copy of input that cannot be adopted is kept nowhere
            raise
    if not keep_staging:
        staging.remove()
        staging = None
    return report, staging


def _compare(settings, embedder, source, staging, app, started) -> AdoptionReport:
    read = time.perf_counter()
    ledger = staging.load_ledger(settings.batches_dir)
    report_id = new_report_id()
    folder = reports_dir(settings) / report_id
    classes = classify(staging, folder / "classes.parquet")
    compared = time.perf_counter()
    model = check_model(staging, embedder, settings.app_collection.model_sample)
    emit_seconds = {"read": read - started, "ledger_and_classes": compared - read,
                    "model_check": time.perf_counter() - compared}  # fmt: skip
    report = AdoptionReport(
        report_id=report_id,
        created_at=datetime.now(UTC).isoformat(),
        where=source.where,
        collection=settings.app_collection.collection,
        fingerprint=source.fingerprint,
        rows=app["rows"],
        dim=app["dim"],
        extra_keys=app["extra_keys"],
        ledger=ledger,
        classes=classes.to_dict(),
        model=model.to_dict(),
        seconds={**emit_seconds, "total": time.perf_counter() - started},
    )
    report.imported = import_state(settings, source.fingerprint)
    write_report(report, folder)
    log.info("adoption report %s: %s", report.report_id, report.headline())
    return report


def reports_dir(settings: Settings) -> Path:
    return settings.adoption_dir / "reports"


def write_report(report: AdoptionReport, folder: Path) -> None:
    write_atomic(folder / "report.md", report_markdown(report))
    write_atomic(folder / "report.json", json.dumps(report.to_dict(), indent=1))


def latest_report(settings: Settings) -> AdoptionReport | None:
    """The newest adoption report on disk (None when there is none)."""
    root = reports_dir(settings)
    found = sorted(root.glob("*/report.json")) if root.is_dir() else []
    if not found:
        return None
    return AdoptionReport.from_dict(json.loads(found[-1].read_text()))


def class_table(report: AdoptionReport) -> str:
    lines = ["| class | chunks | example |", "|---|---|---|"]
    for kind in CLASSES:
        example = (report.classes["examples"].get(kind) or [{}])[0]
        shown = f"{example.get('chunk_id', '')} {example.get('detail', '')}".strip()
        cell = shown.replace("|", "\\|").replace("\n", " ")[:160]
        lines.append(f"| {kind} | {report.counts[kind]} | {cell} |")
    return "\n".join(lines)


def report_markdown(report: AdoptionReport) -> str:
    distances = report.classes["vector_distance"]
    stale = report.classes["stale_reasons"]
    lines = [
        f"# Adoption report {report.report_id}",
        "",
        f"The app's collection {report.where}: {report.rows} rows, {report.dim}-dim vectors "
        f"(fingerprint {report.fingerprint[:16]}), against the ledger's "
        f"{report.ledger['chunks']} current chunks of {report.ledger['batches']} drop batches.",
        "",
        class_table(report),
        "",
        "## Stale chunks (only in the app's collection)",
        "",
        *[f"- {n} {kind}: {STALE_REASONS[kind]}" for kind, n in stale.items()],
        f"- {report.classes['stale_papers']} papers keep a bare-pmid abstract chunk beside their "
        "own section chunks",
        "",
        "## Metadata keys that differ",
        "",
        *[f"- {key}: {n}" for key, n in report.classes["metadata_keys"].items()],
        "",
        "## Vectors",
        "",
        f"- model check: {report.model['summary']}",
        f"- pairs whose vectors differ (> 1e-6 cosine distance): {distances['differing']}"
        + (
            f" (min {distances['min']:.3g}, p50 {distances['p50']:.3g}, p95 "
            f"{distances['p95']:.3g}, max {distances['max']:.3g})"
            if distances["differing"]
            else ""
        ),  # fmt: skip
        f"- metadata keys candle-fire's indexer does not write: "
        f"{', '.join(report.extra_keys) or 'none'}",
        "",
        f"Import: {report.imported.get('summary', 'not imported')}",
    ]
    return "\n".join(lines) + "\n"
