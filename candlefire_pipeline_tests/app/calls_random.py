"""Seeded random collection calls over a deployment's values, and running one call on both sides.

Filters draw their values from what the collection holds (so they match), mixed with values of
another kind (a str for an int field, a float, a bool for an int: Chroma matches none of those),
missing keys, nested $and / $or, substrings cut from the documents (LIKE's metacharacters,
quotes, backslashes, non-ASCII, a changed case) and now and then a filter Chroma refuses.
"""

from __future__ import annotations

import copy
import random

import numpy as np

from candlefire_pipeline.backends.chroma.metadata import META_KEYS
from candlefire_pipeline_tests.app.corpus import TWIN_TEXT, WORDS

KEYS = (*META_KEYS, *META_KEYS[:6], "nokey", "document", "chunk_id")
NUMERIC = ("chunk_index", "citation_count", "year")
OPS = ("bare", "$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$in", "$nin")
NEEDLES = ("%", "_", "\\", "'", '"', "ü", "日本", "100%", "p_v", "%_", "—", "O'B", "\\sl")
GET_ITEMS = ("documents", "metadatas", "embeddings", "uris")
QUERY_ITEMS = (*GET_ITEMS, "distances")
#: Filters Chroma refuses (so must the collection): one of them now and then.
INVALID_WHERE = (
    {}, {"year": {"$gt": "2000"}}, {"year": {"$in": []}}, {"year": {"$in": [1, "a"]}},
    {"$and": [{"year": 2000}]}, {"year": [2000]}, {"year": None}, {"a": 1, "b": 2},
    {"year": {"$gt": 1, "$lt": 3}}, {"year": {"$gt": True}},
)  # fmt: skip


class CallMaker:
    def __init__(self, seed: int, documents: list[str], ids: list[str], metadatas: list[dict],
                 dim: int):  # fmt: skip
        self.rng, self.dim = random.Random(seed), dim
        self.documents, self.ids = documents, ids
        self.values: dict[str, list] = {}
        for metadata in metadatas:
            for key, value in metadata.items():
                self.values.setdefault(key, []).append(value)

    # filters ---------------------------------------------------------------------------------
    def _other_kind(self, value):
        choices = [str(value), 3.5, True, False, 7, "x"]
        if isinstance(value, int) and not isinstance(value, bool):
            choices += [float(value), value + 0.5, value - 0.25]
        return self.rng.choice(choices)

    def value(self, key: str, numeric: bool = False):
        known = self.values.get(key)
        if numeric:
            base = self.rng.choice(self.values[self.rng.choice(NUMERIC)])
            return self.rng.choice([base, float(base), base + 0.5, base - 1])
        if not known or self.rng.random() < 0.2:
            return self._other_kind(self.rng.choice(known) if known else 1)
        return self.rng.choice(known)

    def leaf(self) -> dict:
        key = self.rng.choice(KEYS)
        op = self.rng.choice(OPS)
        if op in ("$gt", "$gte", "$lt", "$lte"):
            return {key: {op: self.value(key, numeric=True)}}
        if op in ("$in", "$nin"):
            first = self.value(key)
            same = [v for v in self.values.get(key, []) if type(v) is type(first)]
            extra = self.rng.sample(same, min(len(same), self.rng.randint(0, 3)))
            return {key: {op: list(dict.fromkeys([first, *extra]))}}
        value = self.value(key)
        return {key: value} if op == "bare" else {key: {op: value}}

    def where(self, depth: int = 0) -> dict:
        if self.rng.random() < 0.03:
            return copy.deepcopy(self.rng.choice(INVALID_WHERE))
        if depth < 2 and self.rng.random() < 0.35:
            parts = [self.where(depth + 1) for _ in range(self.rng.randint(2, 3))]
            return {self.rng.choice(("$and", "$or")): parts}
        return self.leaf()

    def needle(self) -> str:
        roll = self.rng.random()
        if roll < 0.5:
            document = self.rng.choice(self.documents)
            start = self.rng.randrange(len(document))
            text = document[start : start + self.rng.randint(1, 12)]
        elif roll < 0.7:
            text = self.rng.choice(WORDS)
        elif roll < 0.82:
            text = self.rng.choice(NEEDLES)
        elif roll < 0.92:
            text = self.rng.choice(WORDS).swapcase()
        else:
            text = f"absent-{self.rng.randint(0, 999)}"
        return text or "x"

    def where_document(self, depth: int = 0) -> dict:
        if depth < 2 and self.rng.random() < 0.25:
            parts = [self.where_document(depth + 1) for _ in range(2)]
            return {self.rng.choice(("$and", "$or")): parts}
        op = "$not_contains" if self.rng.random() < 0.2 else "$contains"
        return {op: self.needle()}

    # calls -----------------------------------------------------------------------------------
    def include(self, items: tuple[str, ...]) -> dict:
        if self.rng.random() < 0.3:
            return {}
        return {"include": self.rng.sample(items, self.rng.randint(0, len(items)))}

    def texts(self) -> list[str]:
        many = self.rng.random() < 0.1
        count = self.rng.randint(8, 20) if many else self.rng.randint(1, 4)
        pool = [TWIN_TEXT, *WORDS]
        return [
            self.rng.choice(self.documents) if self.rng.random() < 0.3 else self.rng.choice(pool)
            for _ in range(count)
        ]

    def vectors(self):
        """Query vectors as Chroma takes them: a list of lists, one flat list, or an array."""
        rows = np.array([[self.rng.gauss(0, 1) for _ in range(self.dim)]
                         for _ in range(self.rng.randint(1, 3))], dtype=np.float32)  # fmt: skip
        rows /= np.linalg.norm(rows, axis=1, keepdims=True)
        shape = self.rng.choice(("lists", "flat", "array"))
        if shape == "flat":
            return rows[0].tolist()
        return rows.tolist() if shape == "lists" else rows

    def call(self, size: int) -> tuple[str, dict]:
        roll = self.rng.random()
        if roll < 0.05:
            return "count", {}
        if roll < 0.45:
            return "get", self.get(size)
        return "query", self.query(size)

    def get(self, size: int) -> dict:
        kwargs = self.include(GET_ITEMS)
        if self.rng.random() < 0.2:
            chosen = self.rng.sample(self.ids, self.rng.randint(1, 6))
            kwargs["ids"] = chosen + (["nope-1"] if self.rng.random() < 0.3 else [])
        if self.rng.random() < 0.6:
            kwargs["where"] = self.where()
        if self.rng.random() < 0.4:
            kwargs["where_document"] = self.where_document()
        if self.rng.random() < 0.3:
            kwargs["limit"] = self.rng.randint(0, size + 3)
        if self.rng.random() < 0.2:
            kwargs["offset"] = self.rng.randint(0, size + 3)
        return kwargs

    def query(self, size: int) -> dict:
        kwargs = self.include(QUERY_ITEMS)
        if self.rng.random() < 0.2:
            kwargs["query_embeddings"] = self.vectors()
        else:
            kwargs["query_texts"] = self.texts()
        kwargs["n_results"] = self.rng.choice([1, 2, 5, 10, 30, size, size + 7])
        if self.rng.random() < 0.5:
            kwargs["where"] = self.where()
        if self.rng.random() < 0.35:
            kwargs["where_document"] = self.where_document()
        return kwargs


def call_chroma(collection, embedder, kind: str, kwargs: dict):
    """The call on the real collection; query texts embedded here (it has no embedding
    function: the project's collection stores precomputed vectors)."""
    kwargs = copy.deepcopy(kwargs)
    if kind == "count":
        return collection.count()
    if kind == "get":
        return collection.get(**kwargs)
    texts = kwargs.get("query_texts")
    if texts is not None and "query_embeddings" not in kwargs:  # both given: Chroma refuses
        del kwargs["query_texts"]
        kwargs["query_embeddings"] = embedder.embed([texts] if isinstance(texts, str) else texts)
    return collection.query(**kwargs)


def call_app(collection, kind: str, kwargs: dict):
    kwargs = copy.deepcopy(kwargs)
    if kind == "count":
        return collection.count()
    return getattr(collection, kind)(**kwargs)
