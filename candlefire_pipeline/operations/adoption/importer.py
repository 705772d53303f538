"""Import the app's collection: its rows become the ledger's first batches and every written store
is seeded from them, ids, documents and vectors bit for bit (no re-embedding).

The rows are read, validated and compared first (report.py): a bad row or a vector of another
model stops the import before anything reaches the ledger. Then the rows are cut into parts by
insertion order (each with the earlier chunks of its papers, so a part holds its papers whole),
each published into the ledger as one batch (`+app-<n>-<fp>-part-<k>`, sorting before every
drop: a drop's version of a paper always wins) by one directory rename, and applied to every
written store with the usual markers, which leaves the stores in the collection's own order. A
part holds about CANDLEFIRE_APP_PART_ROWS rows, so memory stays flat whatever the collection's
size. A crash anywhere is finished by the next run: staging is rebuilt from the snapshot,
published parts are kept (the same rows give the same files), and applying is idempotent (an
unchanged paper is skipped).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from candlefire_pipeline.corpus.schema import (
    CHUNK_SCHEMA,
    DELETED_SCHEMA,
    PAPER_SCHEMA,
    REJECT_SCHEMA,
    embedding_schema,
    vector_column,
)
from candlefire_pipeline.fsutil import remove_dead_temporaries, temporary_for
from candlefire_pipeline.operations.adoption.apply import apply_everywhere
from candlefire_pipeline.operations.adoption.manifest import (
    ImportManifest,
    import_state,
    load_manifest,
    next_seq,
    save_manifest,
)
from candlefire_pipeline.operations.adoption.mapping import reconstruct_paper
from candlefire_pipeline.operations.adoption.report import AdoptionReport, build_report
from candlefire_pipeline.operations.adoption.source import AdoptionError, discard_snapshot
from candlefire_pipeline.operations.adoption.staging import Staging
from candlefire_pipeline.settings import Settings

log = logging.getLogger(__name__)

PROVENANCE = "adopted.json"


@dataclass
class ImportResult:
    report: AdoptionReport
    manifest: ImportManifest
    #: store -> rows written and papers replaced over every part (0 on a re-run)
    applied: dict[str, dict]
    seconds: dict

    def summary(self) -> str:
        return import_state_line(self.report.imported)


def import_state_line(state: dict) -> str:
    return state.get("summary", "not imported")


def run_import(
    settings: Settings, embedder, emit: Callable[[str], None] = log.info
) -> ImportResult:
    """Read, check, publish and apply the app's collection; finishes an earlier cut-short run."""
    started = time.perf_counter()
    report, staging = build_report(settings, embedder, emit, keep_staging=True)
    try:
        if report.rows == 0:
            raise AdoptionError(f"the app's collection {report.where} holds no rows: nothing to "
                                "import; nothing was written")  # fmt: skip
        _check_model(report, emit)
        manifest = _plan(settings, report, embedder.model_id, staging)
        publish_started = time.perf_counter()
        _publish(settings, manifest, staging, emit)
        apply_started = time.perf_counter()
        applied = apply_everywhere(settings, manifest, emit)
    except AdoptionError:
        discard_snapshot(settings.adoption_dir / "snapshots", report.fingerprint)
        raise
    finally:
        staging.remove()
    manifest.state = "applied"
    save_manifest(settings, manifest)
    report.imported = import_state(settings, manifest.fingerprint)
    done = time.perf_counter()
    seconds = {"read_and_compare": publish_started - started,
               "publish": apply_started - publish_started, "apply": done - apply_started,
               "total": done - started}  # fmt: skip
    _record(settings, report)
    emit(f"import: {report.imported['summary']} in {seconds['total']:.1f} s")
    return ImportResult(report, manifest, applied, seconds)


def _record(settings: Settings, report: AdoptionReport) -> None:
    from candlefire_pipeline.operations.adoption.report import reports_dir, write_report

    write_report(report, reports_dir(settings) / report.report_id)


def _check_model(report: AdoptionReport, emit) -> None:
    """Refuse vectors of another model; import a mixed sample (drift) as it is, loudly: those
    vectors are what the app serves, and no re-embedding is the point of an import."""
    model = report.model
    if model["verdict"] in ("other_model", "other_dimension"):
        raise AdoptionError(
            f"the app's vectors are {model['summary']}: the stores would compare queries of "
            f"{model['model_id']} with them. Set CANDLEFIRE_EMBED_MODEL to the model the app's "
            "collection was built with (BioLORD-2023-C in production); nothing was written"
        )
    if model["verdict"] == "mixed":
        emit(
            f"import: WARNING the app's vectors are {model['summary']}; imported as they are "
            "(a paper's next drop re-embeds it)"
        )


#: The rows of a part: its seq range, and the earlier rows of every paper it holds (so that the
#: part holds each of its papers whole, up to the range's end).
PART_ROWS_SQL = """SELECT {what} FROM app WHERE seq <= :end AND pmid IN
    (SELECT pmid FROM app WHERE seq > :start AND seq <= :end)"""


def _plan(settings: Settings, report: AdoptionReport, model_id: str,
          staging: Staging) -> ImportManifest:  # fmt: skip
    """Parts by insertion order: rows (k * n, (k + 1) * n], each with the earlier chunks of its
    papers. A paper whose chunks are far apart (a bare abstract chunk indexed long before its
    section chunks) is written again by the later part, whose replace keeps every surviving
    chunk's place: the stores end with the app's order exactly."""
    manifest = load_manifest(settings, report.fingerprint)
    if manifest is not None:
        return manifest  # a re-run cuts nothing anew: the same parts, the same keys
    part_rows = settings.app_collection.part_rows
    manifest = ImportManifest(
        fingerprint=report.fingerprint, seq=next_seq(settings), where=report.where,
        model_id=model_id, dim=int(report.dim), rows=report.rows, part_rows=part_rows,
        created_at=datetime.now(UTC).isoformat(),
    )  # fmt: skip
    for number, start in enumerate(range(0, report.rows, part_rows)):
        manifest.parts.append({"key": manifest.part_key(number), "start": start,
                               "end": start + part_rows})  # fmt: skip
    manifest.papers = staging.db.execute("SELECT count(DISTINCT pmid) FROM app").fetchone()[0]
    save_manifest(settings, manifest)
    return manifest


def _publish(settings: Settings, manifest: ImportManifest, staging: Staging, emit) -> None:
    for index, part in enumerate(manifest.parts):
        target = settings.batch_dir(part["key"])
        if (target / PROVENANCE).is_file() and (target / "papers.parquet").is_file():
            continue  # published by an earlier run from the same rows
        _write_part(settings, manifest, part, staging, target)
        emit(f"import: part {index + 1}/{len(manifest.parts)} in the ledger")
    manifest.state = "published"
    save_manifest(settings, manifest)


def _write_part(settings, manifest, part, staging: Staging, target: Path) -> None:
    query = PART_ROWS_SQL.format(what="seq, row, vector") + " ORDER BY seq"
    rows = [(seq, json.loads(row), np.frombuffer(vector, np.float32))
            for seq, row, vector in staging.db.execute(query, part)]  # fmt: skip
    by_paper: dict[str, list[dict]] = {}
    for _, row, _ in rows:
        by_paper.setdefault(row["pmid"], []).append(row)
    papers = [reconstruct_paper(chunks, n) for n, chunks in enumerate(by_paper.values(), 1)]
    hashes = {paper["pmid"]: paper["paper_hash"] for paper in papers}
    chunks = [{**row, "paper_hash": hashes[row["pmid"]]} for _, row, _ in rows]
    if not chunks:
        raise AdoptionError(f"part {part['key']}: no staged rows in ({part['start']}, "
                            f"{part['end']}]: the staging does not match the manifest")  # fmt: skip
    tmp = temporary_for(target)
    for stale in remove_dead_temporaries(target):  # a killed run's part, never read
        log.info("import: removed %s, left by a run that was killed", stale.name)
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        _write_files(tmp, chunks, [vector for _, _, vector in rows], papers, manifest)
        shutil.rmtree(target, ignore_errors=True)  # a part cut short by a crash
        os.replace(tmp, target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _write_files(folder: Path, chunks, vectors, papers, manifest: ImportManifest) -> None:
    table = pa.Table.from_pylist(chunks, schema=CHUNK_SCHEMA)
    pq.write_table(table, folder / "chunks.parquet")
    n = table.num_rows
    embeddings = pa.Table.from_arrays(
        [table["chunk_id"], table["content_hash"], pa.array([manifest.model_id] * n),
         pa.array([manifest.dim] * n, pa.int32()), vector_column(vectors, manifest.dim)],
        schema=embedding_schema(manifest.dim),
    )  # fmt: skip
    pq.write_table(embeddings, folder / "embeddings.parquet")
    pq.write_table(DELETED_SCHEMA.empty_table(), folder / "deleted.parquet")
    pq.write_table(REJECT_SCHEMA.empty_table(), folder / "rejects.parquet")
    provenance = {"fingerprint": manifest.fingerprint, "where": manifest.where,
                  "import": manifest.seq, "rows": n, "papers": len(papers),
                  "papers_reconstructed": "from the chunks: title, year, doi, citation count, "
                  "entity names and mesh terms (first 10) from metadata, abstract and full "
                  "text from the documents; no authors"}  # fmt: skip
    (folder / PROVENANCE).write_text(json.dumps(provenance, indent=1))
    # papers last: its presence marks a complete batch
    pq.write_table(pa.Table.from_pylist(papers, schema=PAPER_SCHEMA), folder / "papers.parquet")
