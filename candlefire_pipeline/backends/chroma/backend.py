"""Chroma backend: precomputed vectors in a cosine collection, $contains for substrings.

Substring semantics (chromadb 1.5.9, measured on PersistentClient and HttpClient): $contains is
a case-sensitive exact substring match, so only substring_mode "like" can be honored. The
documented trigram trap -- strings under 3 characters never match -- does NOT reproduce with
1.5.9 (short terms match exactly like LIKE); SHORT_TERMS_MATCH records this and the behaviour
suite asserts it, so a Chroma upgrade that brings the trap back fails loudly instead of silently.
An empty $contains string is rejected by Chroma; common.clean_variants rejects it everywhere.

replace_papers is not atomic (Chroma has no transactions): it upserts the new chunks first and
deletes the paper's stale chunk ids afterwards, so a failure midway leaves the old and new
chunks side by side, never a paper with no chunks. Re-running the call repairs it; the next
apply of any batch does so on its own (operations/indexing.py: intent markers, paper_chunks).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa

from candlefire_pipeline.backends import common
from candlefire_pipeline.backends.base import Filter, ResultRow
from candlefire_pipeline.backends.chroma.client import ChromaServerAccess, open_client
from candlefire_pipeline.backends.chroma.filters import chroma_where_document, chroma_wheres
from candlefire_pipeline.backends.chroma.metadata import scalar_metadata
from candlefire_pipeline.backends.chroma.space import check_cosine
from candlefire_pipeline.backends.store import UpsertStore

log = logging.getLogger(__name__)

SHORT_TERMS_MATCH = True
#: Page size for full-collection reads (inventory, fetch).
PAGE = 5_000


class ChromaBackend(UpsertStore):
    """A Chroma collection holding chunks with precomputed vectors (no embedding function)."""

    name = "chroma"

    def __init__(
        self,
        path: Path | None = None,
        host: str | None = None,
        port: int = 8000,
        collection: str = "candlefire_chunks",
        substring_mode: str = "like",
        token: str | None = None,
        ssl: bool = False,
        ca_bundle: Path | None = None,
        ef_search: int = 100,
    ) -> None:
        """A local folder (`path`) or a server (`host`, `port`; `token` and TLS via a proxy)."""
        common.check_case_sensitive_mode(substring_mode, "chroma", "Chroma's $contains")
        if (path is None) == (host is None):
            raise ValueError("ChromaBackend needs exactly one of path (local) or host (server)")
        self.substring_mode = substring_mode
        self.collection_name = collection
        self.ef_search = common.check_n(ef_search)
        server = ChromaServerAccess(host, port, token, ssl, ca_bundle) if host else None
        self._where = server.url if server else str(path)
        self._client = open_client(path, server)
        self._collection = self._open_collection()
        self._model: tuple[str, int] | None = None

    def _open_collection(self):
        collection = self._client.get_or_create_collection(
            self.collection_name,
            configuration={"hnsw": {"space": "cosine", "ef_search": self.ef_search}},
            embedding_function=None,  # vectors are precomputed; no model path gets persisted
        )
        check_cosine(collection, self._where)
        self._apply_ef_search(collection)
        return collection

    def _apply_ef_search(self, collection) -> None:
        """Give an existing collection the configured search effort (Chroma reads it when a
        client loads the index: a process that already had it open keeps the old value)."""
        current = (collection.configuration_json.get("hnsw") or {}).get("ef_search")
        if current is not None and current != self.ef_search:
            collection.modify(configuration={"hnsw": {"ef_search": self.ef_search}})
            log.warning(
                "Chroma collection %s: hnsw ef_search %s -> %s (from the next client start)",
                self.collection_name, current, self.ef_search,
            )  # fmt: skip

    # model contract --------------------------------------------------------------------------
    def stored_model(self) -> tuple[str, int] | None:
        meta = self._client.get_collection(self.collection_name, embedding_function=None).metadata
        if not meta or "model_id" not in meta:
            return None
        return meta["model_id"], int(meta["dim"])

    def ensure_schema(self, model_id: str, dim: int) -> None:
        stored = self.stored_model()
        common.check_model(stored, model_id, dim)
        if stored is None:
            self._collection.modify(metadata={"model_id": model_id, "dim": int(dim)})
        self._model = (model_id, int(dim))

    def reset(self) -> None:
        """Delete the collection and its model contract; an empty one takes its place."""
        self._client.delete_collection(self.collection_name)
        self._collection = self._open_collection()
        self._model = None

    def drop(self) -> None:
        """Delete the collection for good (a dropped index generation); only close() after."""
        self._client.delete_collection(self.collection_name)
        self._model = None

    # write side (UpsertStore's replace_papers and delete_papers) -----------------------------
    def _upsert_batch(self) -> int:
        return self._client.get_max_batch_size()

    def _upsert(self, part: pa.Table, vectors: np.ndarray) -> None:
        self._collection.upsert(
            ids=part["chunk_id"].to_pylist(),
            embeddings=vectors,
            documents=part["document"].to_pylist(),
            metadatas=scalar_metadata(part),
        )

    def _chunk_ids_of(self, pmids: list[str]) -> list[str]:
        return [
            i
            for where in self._pmid_wheres(pmids)
            for i in self._collection.get(where=where, include=[])["ids"]
        ]

    def _delete_chunks(self, ids: list[str]) -> None:
        size = self._client.get_max_batch_size()
        for start in range(0, len(ids), size):
            self._collection.delete(ids=ids[start : start + size])

    # inventory -------------------------------------------------------------------------------
    def count(self) -> int:
        return self._collection.count()

    def _pages(self, where: dict | None = None, documents: bool = False) -> Iterator[dict]:
        include = ["metadatas", "documents"] if documents else ["metadatas"]
        offset = 0
        while True:
            page = self._collection.get(where=where, include=include, limit=PAGE, offset=offset)
            if not page["ids"]:
                return
            yield page
            offset += len(page["ids"])

    def paper_hashes(self, pmids: Sequence[str] | None = None) -> dict[str, str]:
        # a batch asks only for its own papers: a full scan reads every row's metadata
        return {
            m["pmid"]: m["paper_hash"]
            for w in self._pmid_wheres(pmids)
            for p in self._pages(w)
            for m in p["metadatas"]
        }

    def paper_chunks(self, pmids: Sequence[str] | None = None) -> dict[str, dict[str, str]]:
        rows = (
            (m["pmid"], i, m["content_hash"])
            for w in self._pmid_wheres(pmids)
            for p in self._pages(w)
            for i, m in zip(p["ids"], p["metadatas"], strict=True)
        )
        return common.group_chunks(rows)

    def _pmid_wheres(self, pmids: Sequence[str] | None) -> list[dict | None]:
        """Where-documents covering these pmids, paged (one None: everything)."""
        return chroma_wheres(Filter(pmids=None if pmids is None else tuple(pmids)))

    def chunk_hashes(self) -> dict[str, str]:
        return {
            i: m["content_hash"]
            for p in self._pages()
            for i, m in zip(p["ids"], p["metadatas"], strict=True)
        }

    def has_paper(self, pmid: str) -> bool:
        return bool(self._collection.get(where={"pmid": pmid}, limit=1, include=[])["ids"])

    # read side -------------------------------------------------------------------------------
    def _holds_nothing(self, model: tuple[str, int] | None) -> bool:
        # a collection made elsewhere may hold chunks without our contract: Chroma is asked
        return False

    def _semantic(self, queries, n, where, stage, texts, model) -> list[list[ResultRow]]:
        # one effort for every stage here; the texts are not needed
        if self.count() == 0:
            return [[] for _ in range(len(queries))]
        # a long pmids filter is queried page by page; each page's top n, merged, is the top n
        results = [
            self._collection.query(
                query_embeddings=queries,
                n_results=n,
                where=page,
                include=["documents", "metadatas", "distances"],
            )
            for page in chroma_wheres(where)
        ]
        return [_merged_hits(results, q, n) for q in range(len(queries))]

    def _substring(self, variants, queries, n, where, model) -> list[list[ResultRow]]:
        if self.count() == 0:
            return [[] for _ in variants]
        # one where_document per request: a query per variant, as candle-fire does
        pages = chroma_wheres(where)
        return [
            _merged_hits(
                [
                    self._collection.query(
                        query_embeddings=query[None, :],
                        n_results=n,
                        where=page,
                        where_document=chroma_where_document([variant]),
                        include=["documents", "metadatas", "distances"],
                    )
                    for page in pages
                ],
                0,
                n,
            )
            for variant, query in zip(variants, queries, strict=True)
        ]

    def _contains(self, variants: list[str], where: Filter) -> bool:
        return any(
            self._collection.get(
                where=page,
                where_document=chroma_where_document(variants),
                limit=1,
                include=[],
            )["ids"]
            for page in chroma_wheres(where)
        )

    def _fetch(self, where: Filter) -> list[ResultRow]:
        rows = [
            common.result_row(i, d, m, None)
            for page in chroma_wheres(where)
            for p in self._pages(page, documents=True)
            for i, d, m in zip(p["ids"], p["documents"], p["metadatas"], strict=True)
        ]
        return common.sort_fetched(rows)

    def close(self) -> None:
        self._client.close()


def _merged_hits(results: list[dict], q: int, n: int) -> list[ResultRow]:
    """Query q's best n over the answers of every pmids page."""
    if len(results) == 1:
        return _hits(results[0], q)
    return common.sort_hits([row for result in results for row in _hits(result, q)])[:n]


def _hits(result: dict, q: int) -> list[ResultRow]:
    rows = [
        common.result_row(i, d, m, 1.0 - dist)
        for i, d, m, dist in zip(
            result["ids"][q],
            result["documents"][q],
            result["metadatas"][q],
            result["distances"][q],
            strict=True,
        )
    ]
    return common.sort_hits(rows)
