"""The collection the candle-fire app serves today (its indexer's Chroma folder or server), which
the pipeline reads, never writes: adoption report, import, reference column (docs/OPERATIONS.md,
"Adopting the app's collection")."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from candlefire_pipeline.settings.env import (
    check_between,
    env_bool,
    env_int,
    env_path,
    env_positive_int,
    env_str,
)

#: candle-fire's collection name (its config.CHROMA_COLLECTION).
DEFAULT_APP_COLLECTION = "als_papers"


@dataclass(frozen=True)
class AppCollectionSettings:
    """Where the app's collection is: a persisted folder or a Chroma server (one of them)."""

    path: Path | None = None
    host: str | None = None
    port: int = 8000
    token: str | None = field(default=None, repr=False)
    ssl: bool = False
    ca_bundle: Path | None = None
    collection: str = DEFAULT_APP_COLLECTION
    #: rows read per get() page (bounded memory whatever the collection's size)
    page_rows: int = 1000
    #: documents re-embedded with the configured model to tell whose vectors the app stored
    model_sample: int = 32
    #: rows per imported part (one ledger batch of whole papers; memory stays flat)
    part_rows: int = 10_000

    def __post_init__(self) -> None:
        if self.path is not None and self.host is not None:
            raise ValueError(
                "set one of CANDLEFIRE_APP_CHROMA_PATH (a folder) and CANDLEFIRE_APP_CHROMA_HOST "
                "(a server), not both"
            )
        check_between("CANDLEFIRE_APP_PAGE_ROWS", self.page_rows, 1, 100_000)
        check_between("CANDLEFIRE_APP_MODEL_SAMPLE", self.model_sample, 1, 10_000)
        check_between("CANDLEFIRE_APP_PART_ROWS", self.part_rows, 1, 1_000_000)
        if len(self.collection) < 3:
            raise ValueError(
                f"CANDLEFIRE_APP_COLLECTION must name a collection (3+ characters), got "
                f"{self.collection!r}"
            )

    @property
    def configured(self) -> bool:
        return self.path is not None or self.host is not None

    @property
    def where(self) -> str:
        """Where it is, safe to log (never the token)."""
        if self.host is not None:
            scheme = "https" if self.ssl else "http"
            return f"{scheme}://{self.host}:{self.port} collection {self.collection!r}"
        return f"{self.path} collection {self.collection!r}"

    @classmethod
    def from_env(cls) -> AppCollectionSettings:
        return cls(
            path=env_path("CANDLEFIRE_APP_CHROMA_PATH"),
            host=env_str("CANDLEFIRE_APP_CHROMA_HOST"),
            port=env_int("CANDLEFIRE_APP_CHROMA_PORT", cls.port),
            token=env_str("CANDLEFIRE_APP_CHROMA_TOKEN"),
            ssl=env_bool("CANDLEFIRE_APP_CHROMA_SSL", cls.ssl),
            ca_bundle=env_path("CANDLEFIRE_APP_CHROMA_CA_BUNDLE"),
            collection=env_str("CANDLEFIRE_APP_COLLECTION", cls.collection),
            page_rows=env_positive_int("CANDLEFIRE_APP_PAGE_ROWS", cls.page_rows),
            model_sample=env_positive_int("CANDLEFIRE_APP_MODEL_SAMPLE", cls.model_sample),
            part_rows=env_positive_int("CANDLEFIRE_APP_PART_ROWS", cls.part_rows),
        )
