"""Qdrant backend: local mode (a folder, no server) or a server by URL; cosine, exact substrings.

- Point ids are uuid5 of the chunk id, so a chunk is always the same point; the chunk id and
  every metadata field live in the payload.
- The model contract is the collection's metadata, written by the same call that creates the
  collection with the model's dimension: a collection never exists without its contract.
- Substrings: MatchSubstring is the exact, case-sensitive contract (qdrant_filters); only
  substring_mode "like" can be honored, as with Chroma.
- replace_papers has no transaction: it upserts the new chunks, then deletes the paper's stale
  ones, so a crash leaves old and new chunks side by side, never a paper with none. The next
  apply finishes it (operations/indexing.py: intent markers, exact paper_chunks comparison).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
from qdrant_client import models

from candlefire_pipeline.backends import common
from candlefire_pipeline.backends.base import Filter, ResultRow
from candlefire_pipeline.backends.qdrant import local as qdrant_local
from candlefire_pipeline.backends.qdrant import server as qdrant_server
from candlefire_pipeline.backends.qdrant.filters import (
    PAYLOAD_INDEXES,
    pmid_filter,
    qdrant_filter,
)
from candlefire_pipeline.backends.qdrant.points import (
    contract,
    hits,
    payloads,
    point_id,
    result_row,
)
from candlefire_pipeline.backends.store import UpsertStore

log = logging.getLogger(__name__)

#: Points per upsert call: throughput is flat from 256 up in local mode (docs/BENCHMARKS.md,
#: "Qdrant"); 256 keeps a REST request of 384-dim points near 1 MB.
UPSERT_BATCH = 256
#: Point ids per delete call and pmids per filtered scroll.
ID_BATCH = 1_000
SERVER_PAGE = 5_000
#: Local mode recomputes its filter mask on every scroll page: read everything in one page.
LOCAL_PAGE = 10_000_000


class QdrantBackend(UpsertStore):
    """Chunks in one Qdrant collection with precomputed vectors."""

    name = "qdrant"

    def __init__(
        self,
        path: Path | None = None,
        url: str | None = None,
        api_key: str | None = None,
        collection: str = "candlefire_chunks",
        substring_mode: str = "like",
        narrow: bool | None = None,
        hnsw_m: int = 16,
        hnsw_ef_construction: int = 128,
        ef_search: int | None = 1000,
        lock_timeout: float = 60.0,
        timeout: int = 60,
    ) -> None:
        common.check_case_sensitive_mode(substring_mode, "qdrant", "Qdrant's MatchSubstring")
        if (path is None) == (url is None):
            raise ValueError("QdrantBackend needs exactly one of path (local) or url (server)")
        self.substring_mode = substring_mode
        self.collection = collection
        self.local = path is not None
        #: Narrowing needs the server's full-text index; local mode has no index to narrow with.
        self.narrow = (not self.local) if narrow is None else narrow
        self.hnsw = models.HnswConfigDiff(m=hnsw_m, ef_construct=hnsw_ef_construction)
        self._search = (
            None if self.local or not ef_search else models.SearchParams(hnsw_ef=ef_search)
        )
        self._page = LOCAL_PAGE if self.local else SERVER_PAGE
        self._model: tuple[str, int] | None = None
        self._handle = None
        if self.local:
            self._handle = qdrant_local.acquire(Path(path), lock_timeout)
            self._client, self._guard = self._handle.client, self._handle.guard
            self.where = str(self._handle.path)
        else:
            self.where = qdrant_server.redact_url(url)
            self._client, self._guard = qdrant_server.connect(url, api_key, timeout), nullcontext()

    # model contract --------------------------------------------------------------------------
    def _exists(self) -> bool:
        with self._guard:
            return self._client.collection_exists(self.collection)

    def stored_model(self) -> tuple[str, int] | None:
        if not self._exists():
            return None
        with self._guard:
            config = self._client.get_collection(self.collection).config
        return contract(config, self.collection)

    def ensure_schema(self, model_id: str, dim: int) -> None:
        common.check_model(None, model_id, dim)
        stored = self.stored_model()
        common.check_model(stored, model_id, dim)
        if stored is None:
            self._create(model_id, int(dim))
        elif self._model is None and not self.local:
            self._ensure_indexes()  # a crash between create and indexing left them missing
        self._model = (model_id, int(dim))

    def _create(self, model_id: str, dim: int) -> None:
        with self._guard:
            try:
                self._client.create_collection(
                    self.collection,
                    vectors_config=models.VectorParams(size=dim, distance=models.Distance.COSINE),
                    hnsw_config=self.hnsw,
                    metadata={"model_id": model_id, "dim": dim},
                )
            except Exception:
                if not self._client.collection_exists(self.collection):
                    raise
                # another writer created it first: its contract must match ours
                common.check_model(self.stored_model(), model_id, dim)
            if self.local:
                qdrant_local.tune_storage(self._client)
        if not self.local:
            self._ensure_indexes()
        log.info("created Qdrant collection %s for %s (%d-dim)", self.collection, model_id, dim)

    def _ensure_indexes(self) -> None:
        for name, schema in PAYLOAD_INDEXES.items():
            self._client.create_payload_index(self.collection, name, field_schema=schema, wait=True)

    def reset(self) -> None:
        """Delete the collection and its model contract; the next write fixes a new model."""
        with self._guard:
            if self._client.collection_exists(self.collection):
                self._client.delete_collection(self.collection)
        self._model = None

    # write side (UpsertStore's replace_papers and delete_papers) -----------------------------
    def _upsert_batch(self) -> int:
        return UPSERT_BATCH

    def _upsert(self, part: pa.Table, vectors: np.ndarray) -> None:
        records = payloads(part)
        ids = [point_id(r["chunk_id"]) for r in records]
        batch = models.Batch(ids=ids, vectors=vectors.tolist(), payloads=records)
        with self._guard:
            self._client.upsert(self.collection, points=batch, wait=True)

    def _chunk_ids_of(self, pmids: list[str]) -> list[str]:
        if self._read_model() is None:
            return []
        return [
            record.payload["chunk_id"]
            for start in range(0, len(pmids), ID_BATCH)
            for record in self._scroll(pmid_filter(pmids[start : start + ID_BATCH]), ["chunk_id"])
        ]

    def _delete_chunks(self, chunk_ids: list[str]) -> None:
        for start in range(0, len(chunk_ids), ID_BATCH):
            ids = [point_id(c) for c in chunk_ids[start : start + ID_BATCH]]
            with self._guard:
                self._client.delete(self.collection, models.PointIdsList(points=ids), wait=True)

    # inventory -------------------------------------------------------------------------------
    def _scroll(self, flt: models.Filter | None, fields: list[str] | bool) -> Iterator[Any]:
        offset = None
        while True:
            with self._guard:
                records, offset = self._client.scroll(
                    self.collection, scroll_filter=flt, limit=self._page, offset=offset,
                    with_payload=fields, with_vectors=False,
                )  # fmt: skip
            yield from records
            if offset is None:
                return

    def count(self) -> int:
        if self._read_model() is None:
            return 0
        with self._guard:
            return self._client.count(self.collection, exact=True).count

    def _pmid_filters(self, pmids: Sequence[str] | None) -> list[models.Filter | None]:
        """Filters covering these pmids in pages of ID_BATCH (one None: everything; []: none)."""
        if self._read_model() is None:
            return []
        if pmids is None:
            return [None]
        wanted = sorted(set(pmids))
        return [pmid_filter(wanted[i : i + ID_BATCH]) for i in range(0, len(wanted), ID_BATCH)]

    def paper_hashes(self, pmids: Sequence[str] | None = None) -> dict[str, str]:
        return {
            r.payload["pmid"]: r.payload["paper_hash"]
            for flt in self._pmid_filters(pmids)
            for r in self._scroll(flt, ["pmid", "paper_hash"])
        }

    def paper_chunks(self, pmids: Sequence[str] | None = None) -> dict[str, dict[str, str]]:
        fields = ["pmid", "chunk_id", "content_hash"]
        return common.group_chunks(
            (r.payload["pmid"], r.payload["chunk_id"], r.payload["content_hash"])
            for flt in self._pmid_filters(pmids)
            for r in self._scroll(flt, fields)
        )

    def chunk_hashes(self) -> dict[str, str]:
        if self._read_model() is None:
            return {}
        return {
            r.payload["chunk_id"]: r.payload["content_hash"]
            for r in self._scroll(None, ["chunk_id", "content_hash"])
        }

    def has_paper(self, pmid: str) -> bool:
        return self._any(pmid_filter([pmid]))

    def _any(self, flt: models.Filter | None) -> bool:
        if self._read_model() is None:
            return False
        with self._guard:
            records, _ = self._client.scroll(
                self.collection, scroll_filter=flt, limit=1, with_payload=False
            )
        return bool(records)

    # read side -------------------------------------------------------------------------------
    def _semantic(self, queries, n, where, stage, texts, model) -> list[list[ResultRow]]:
        # one hnsw_ef for every stage here; the texts are not needed
        flt = qdrant_filter(where)
        requests = [
            models.QueryRequest(
                query=q.tolist(), filter=flt, limit=n, with_payload=True, params=self._search
            )
            for q in queries
        ]
        return self._query_batch(requests)

    def _substring(self, variants, queries, n, where, model) -> list[list[ResultRow]]:
        # exact: the filter is a payload scan anyway, and a filtered HNSW walk can stop short
        params = None if self.local else models.SearchParams(exact=True)
        requests = [
            models.QueryRequest(
                query=query.tolist(),
                filter=qdrant_filter(where, [variant], self.narrow),
                limit=n,
                with_payload=True,
                params=params,
            )
            for variant, query in zip(variants, queries, strict=True)
        ]
        return self._query_batch(requests)

    def _query_batch(self, requests: list[models.QueryRequest]) -> list[list[ResultRow]]:
        with self._guard:
            responses = self._client.query_batch_points(self.collection, requests=requests)
        return [hits(response.points) for response in responses]

    def _contains(self, variants: list[str], where: Filter) -> bool:
        return self._any(qdrant_filter(where, variants, self.narrow))

    def _fetch(self, where: Filter) -> list[ResultRow]:
        rows = [result_row(r.payload, None) for r in self._scroll(qdrant_filter(where), True)]
        return common.sort_fetched(rows)

    def close(self) -> None:
        if self._handle is not None:
            handle, self._handle = self._handle, None
            qdrant_local.release(handle)
        elif not self.local:
            self._client.close()
