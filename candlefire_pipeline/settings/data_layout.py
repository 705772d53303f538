"""Where a deployment keeps its files, all below its data directory (the Settings mixin)."""

from __future__ import annotations

from pathlib import Path


class DataLayout:
    """Paths derived from data_dir; Settings supplies the fields read here."""

    data_dir: Path
    batches_dir_override: Path | None
    onnx_dir_override: Path | None
    conformance_cache_override: Path | None

    @property
    def batches_dir(self) -> Path:
        """The generation's batch files and ledger: its own folder, else the drops' (default)."""
        return self.batches_dir_override or self.drop_batches_dir

    @property
    def drop_batches_dir(self) -> Path:
        """Where every ingested drop's papers and default chunks are, whatever the generation."""
        return self.data_dir / "batches"

    @property
    def generations_file(self) -> Path:
        """The registry of index generations (absent: only the implicit default one)."""
        return self.data_dir / "generations.json"

    @property
    def generations_dir(self) -> Path:
        """One folder per generation id: its batch files, ledger and comparison reports."""
        return self.data_dir / "generations"

    @property
    def cache_dir(self) -> Path:
        return self.data_dir / "cache"

    @property
    def onnx_dir(self) -> Path:
        return self.onnx_dir_override or self.cache_dir / "onnx"

    @property
    def conformance_cache_dir(self) -> Path:
        return self.conformance_cache_override or self.cache_dir / "conformance"

    @property
    def chroma_path(self) -> Path:
        return self.data_dir / "chroma"

    @property
    def qdrant_path(self) -> Path:
        return self.data_dir / "qdrant"

    @property
    def pg_data_dir(self) -> Path:
        return self.data_dir / "pg"

    @property
    def pg_replica_dir(self) -> Path:
        """The embedded streaming replica's data directory (`candlefire replica create`)."""
        return self.data_dir / "pg_replica"

    @property
    def reports_dir(self) -> Path:
        return self.data_dir / "reports"

    @property
    def adoption_dir(self) -> Path:
        """The app collection's snapshots, staging and adoption reports (operations/adoption)."""
        return self.data_dir / "adoption"

    @property
    def serving_file(self) -> Path:
        return self.data_dir / "serving_backend.json"

    @property
    def drop_record_file(self) -> Path:
        """Which drop versions were taken in (runs, register-drops); the drop sensor reads it."""
        return self.data_dir / "ingested_drops.json"

    @property
    def logs_dir(self) -> Path:
        return self.data_dir / "logs"

    @property
    def shadow_pending_file(self) -> Path:
        """Shadow comparisons not yet in Postgres (JSON lines, appended by the shadow worker)."""
        return self.data_dir / "shadow_pending.jsonl"

    @property
    def serving_pending_file(self) -> Path:
        """Switch changes whose history row Postgres has not received yet (JSON lines)."""
        return self.data_dir / "serving_history_pending.jsonl"

    def batch_dir(self, batch_key: str) -> Path:
        return self.batches_dir / batch_key
