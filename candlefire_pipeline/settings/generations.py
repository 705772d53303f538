"""The index-generation section of the settings: retention, the quality gate, the judged set."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from candlefire_pipeline.settings.env import env_float, env_int, env_str

#: CANDLEFIRE_QUALITY_CORPUS value that judges relevance against the live corpus itself.
LIVE_CORPUS = "live"
#: ndcg_drop and bootstrap bounds: the quality gate cannot be switched off from the environment.
NDCG_DROP_RANGE = (0.0, 0.2)
BOOTSTRAP_RANGE = (200, 100_000)


def shared_data_dir(repo_root: Path) -> Path:
    """Where the shared corpora live (CANDLEFIRE_SHARED_DATA, default ../shared/data)."""
    raw = env_str("CANDLEFIRE_SHARED_DATA")
    return Path(raw).expanduser().resolve() if raw else (repo_root.parent / "shared/data")


@dataclass(frozen=True)
class GenerationSettings:
    """How generations are judged against each other and how long an unused one is kept."""

    #: gc keeps a generation this many days after its creation or the last time it served
    retention_days: float = 7.0
    #: a cross-model promotion passes when mean nDCG@10 falls by at most this much
    ndcg_drop: float = 0.02
    #: paired bootstrap resamples of the judged queries for the 95% interval
    bootstrap_samples: int = 2000
    #: judged papers (papers.jsonl) or LIVE_CORPUS; None: the SciFact corpus of the shared data
    quality_corpus: str | None = None
    #: judged queries ({"qid", "text", "relevant": [ids]} per line); None: SciFact's training
    quality_queries: Path | None = None

    def __post_init__(self) -> None:
        low, high = NDCG_DROP_RANGE
        if not low <= self.ndcg_drop <= high:
            raise ValueError(
                f"CANDLEFIRE_GENERATION_NDCG_DROP must be between {low:g} and {high:g}, "
                f"got {self.ndcg_drop!r}"
            )
        low, high = BOOTSTRAP_RANGE
        if not low <= self.bootstrap_samples <= high:
            raise ValueError(
                f"CANDLEFIRE_GENERATION_BOOTSTRAP must be between {low} and {high}, "
                f"got {self.bootstrap_samples!r}"
            )
        if not self.retention_days >= 0:
            raise ValueError(
                f"CANDLEFIRE_GENERATION_RETENTION_DAYS must be >= 0, got {self.retention_days!r}"
            )

    def judged_set(self, repo_root: Path) -> tuple[str, Path]:
        """(corpus path or LIVE_CORPUS, queries path) with the SciFact defaults filled in."""
        scifact = shared_data_dir(repo_root) / "scifact"
        corpus = self.quality_corpus or str(scifact / "corpus.jsonl")
        return corpus, self.quality_queries or scifact / "queries_train.jsonl"

    @classmethod
    def from_env(cls) -> GenerationSettings:
        corpus = env_str("CANDLEFIRE_QUALITY_CORPUS")
        if corpus is not None and corpus.lower() != LIVE_CORPUS:
            corpus = str(Path(os.path.expanduser(corpus)).resolve())
        queries = env_str("CANDLEFIRE_QUALITY_QUERIES")
        return cls(
            retention_days=env_float("CANDLEFIRE_GENERATION_RETENTION_DAYS", cls.retention_days),
            ndcg_drop=env_float("CANDLEFIRE_GENERATION_NDCG_DROP", cls.ndcg_drop),
            bootstrap_samples=env_int("CANDLEFIRE_GENERATION_BOOTSTRAP", cls.bootstrap_samples),
            quality_corpus=corpus.lower() if corpus and corpus.lower() == LIVE_CORPUS else corpus,
            quality_queries=Path(queries).expanduser().resolve() if queries else None,
        )
