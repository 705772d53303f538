"""What a generation is: an immutable index identity, its short id and its registry record."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import asdict, dataclass, field, replace

from candlefire_pipeline.settings import PG_QUANTIZATIONS, PG_VECTOR_TYPES
from candlefire_pipeline.settings.env import check_choice

#: Operator-given names: also the Dagster asset key prefix, so short and identifier-like.
NAME = re.compile(r"^[a-z][a-z0-9_]{0,23}$")
DEFAULT_NAME = "default"
#: Registry states; building / ready / serving are derived (ledger, switch), never stored.
LIVE, DROPPING, DROPPED = "live", "dropping", "dropped"
STATES = (LIVE, DROPPING, DROPPED)
#: `generation create --layout` choices -> (vector type, quantization).
LAYOUTS = {
    "vector": ("vector", "none"),
    "halfvec": ("halfvec", "none"),
    "binary": ("vector", "binary"),
    "halfvec-binary": ("halfvec", "binary"),
}


@dataclass(frozen=True)
class IndexLayout:
    """How the stores keep and index the vectors (pgvector type + ANN index, HNSW build)."""

    vector_type: str = "vector"
    quantization: str = "none"
    hnsw_m: int = 16
    #: a record written before layouts were recorded was built at the default of its day (64)
    hnsw_ef_construction: int = 64

    def __post_init__(self) -> None:
        check_choice("vector type", self.vector_type, PG_VECTOR_TYPES)
        check_choice("quantization", self.quantization, PG_QUANTIZATIONS)
        for name in ("hnsw_m", "hnsw_ef_construction"):
            if not 2 <= getattr(self, name) <= 1000:
                raise ValueError(f"{name} must be between 2 and 1000, got {getattr(self, name)}")

    @classmethod
    def named(cls, layout: str, **hnsw) -> IndexLayout:
        if layout not in LAYOUTS:
            raise ValueError(f"layout must be one of {', '.join(LAYOUTS)}, got {layout!r}")
        vector_type, quantization = LAYOUTS[layout]
        return cls(vector_type, quantization, **hnsw)

    def describe(self) -> str:
        kind = self.vector_type + ("+binary" if self.quantization == "binary" else "")
        return f"{kind} m={self.hnsw_m} efc={self.hnsw_ef_construction}"


@dataclass(frozen=True)
class Identity:
    """The vectors (model identity, dimension), the chunks (chunker) and how they are stored."""

    embedding_id: str
    dim: int
    chunker: str
    layout: IndexLayout = field(default_factory=IndexLayout)

    def canonical(self) -> str:
        return json.dumps(asdict(self), sort_keys=True, separators=(",", ":"))

    @property
    def gid(self) -> str:
        """`g` + 8 hex digits of the identity's SHA-256: names every physical target."""
        return "g" + hashlib.sha256(self.canonical().encode("utf-8")).hexdigest()[:8]

    def same_vectors(self, other: Identity) -> bool:
        """Same model identity and chunker: only the layout can differ (an overlap comparison)."""
        return (self.embedding_id, self.dim, self.chunker) == (
            other.embedding_id,
            other.dim,
            other.chunker,
        )

    def describe(self) -> str:
        layout = self.layout.describe()
        return f"{self.embedding_id} ({self.dim}-dim), chunker {self.chunker}, {layout}"


@dataclass(frozen=True)
class Generation:
    """One registry record: a name for an identity, the model to build it with, its life."""

    name: str
    identity: Identity
    #: the model as configured (id, path or hashing-v1:N) and the runtime the bulk path uses
    model: str
    build_runtime: str
    default: bool = False
    state: str = LIVE
    created_at: str | None = None
    created_by: str | None = None
    last_served_at: str | None = None
    dropped_at: str | None = None

    def __post_init__(self) -> None:
        if not NAME.match(self.name):
            raise ValueError(
                f"generation name must match {NAME.pattern} (lower case, a letter first, at "
                f"most 24 characters: it is also the Dagster asset key prefix), got {self.name!r}"
            )
        if self.state not in STATES:
            raise ValueError(f"generation state must be one of {STATES}, got {self.state!r}")

    @property
    def gid(self) -> str:
        return self.identity.gid

    @property
    def live(self) -> bool:
        return self.state == LIVE

    def to_dict(self) -> dict:
        return {**asdict(self), "gid": self.gid}

    @classmethod
    def from_dict(cls, data: dict) -> Generation:
        values = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        identity = dict(values["identity"])
        identity["layout"] = IndexLayout(**identity.get("layout", {}))
        values["identity"] = Identity(**identity)
        generation = cls(**values)
        if data.get("gid") not in (None, generation.gid):
            raise ValueError(
                f"generation {generation.name!r}: recorded id {data['gid']} does not match its "
                f"identity ({generation.gid}); the registry was edited by hand"
            )
        return generation

    def with_state(self, state: str, **changes) -> Generation:
        return replace(self, state=state, **changes)
