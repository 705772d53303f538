"""Whose vectors the app stored: a sample of its documents re-embedded with the configured model.

The same model gives a cosine similarity above MATCH (0.99; the project's runtimes reproduce
torch's float32 vectors within 1e-5, an int8 runtime within ~0.01); another model, even one of the
same dimension, gives unrelated vectors. A sample where only some rows match is embedding drift:
the collection mixes what several model versions wrote.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from candlefire_pipeline.operations.adoption.staging import Staging

MATCH = 0.99


@dataclass(frozen=True)
class ModelCheck:
    model_id: str
    model_dim: int
    stored_dim: int
    sampled: int
    matching: int
    min_cosine: float | None
    median_cosine: float | None
    #: "match" | "mixed" | "other_model" | "other_dimension" | "no_rows"
    verdict: str

    @property
    def matches(self) -> bool:
        return self.verdict == "match"

    def summary(self) -> str:
        if self.verdict == "no_rows":
            return "nothing to check: the collection holds no rows"
        if self.verdict == "other_dimension":
            return (f"not {self.model_id}'s: the stored vectors have {self.stored_dim} "
                    f"dimensions, {self.model_id} gives {self.model_dim}")  # fmt: skip
        figures = f"median cosine {self.median_cosine:.4f}, min {self.min_cosine:.4f}"
        if self.verdict == "match":
            return (
                f"{self.model_id}'s: {self.sampled} of {self.sampled} sampled vectors ({figures})"
            )
        if self.verdict == "mixed":
            return (
                f"mixed: {self.matching} of {self.sampled} sampled vectors are "
                f"{self.model_id}'s, the others another model's (embedding drift; {figures})"
            )
        return f"not {self.model_id}'s: no sampled vector matches ({figures})"

    def to_dict(self) -> dict:
        return {**asdict(self), "summary": self.summary()}


def sample_rows(staging: Staging, size: int) -> list[tuple[dict, np.ndarray]]:
    """`size` rows spread evenly over the collection's insertion order."""
    total = staging.db.execute("SELECT count(*) FROM app").fetchone()[0]
    step = max(total // max(size, 1), 1)
    picked = []
    for _seq, row, vector in staging.app_rows(where="AND (seq - 1) % ? = 0", args=(step,)):
        picked.append((row, vector))
        if len(picked) >= size:
            break
    return picked


def check_model(staging: Staging, embedder, size: int) -> ModelCheck:
    rows = sample_rows(staging, size)
    if not rows:
        return ModelCheck(embedder.model_id, embedder.dim, 0, 0, 0, None, None, "no_rows")
    stored = np.stack([vector for _, vector in rows]).astype(np.float64)
    if stored.shape[1] != embedder.dim:
        return ModelCheck(embedder.model_id, embedder.dim, stored.shape[1], len(rows), 0, None,
                          None, "other_dimension")  # fmt: skip
    fresh = np.asarray(embedder.embed([row["document"] for row, _ in rows]), dtype=np.float64)
    cosines = np.einsum("ij,ij->i", stored, fresh) / (
        np.linalg.norm(stored, axis=1) * np.linalg.norm(fresh, axis=1)
    )
    matching = int((cosines >= MATCH).sum())
    verdict = "match" if matching == len(rows) else "mixed" if matching else "other_model"
    return ModelCheck(embedder.model_id, embedder.dim, stored.shape[1], len(rows), matching,
                      float(cosines.min()), float(np.median(cosines)), verdict)  # fmt: skip
