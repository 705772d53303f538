"""The pgvector store's term cache: keyword, entity and grounding answers kept by text
(docs/RETRIEVAL.md, "What a request costs")."""

from __future__ import annotations

from dataclasses import dataclass

from candlefire_pipeline.settings.env import check_between, check_choice, env_fields

#: "auto": a keyword variant held by more than sqrt(depth x chunks) chunks is answered by an
#: HNSW walk filtered by the substring (approximate, like candle-fire's filtered Chroma query);
#: "off": every holder is ranked exactly, whatever their number.
KEYWORD_WALKS = ("auto", "off")
#: field -> the variable it is read from
_VARIABLES = {
    "enabled": "CANDLEFIRE_TERM_CACHE",
    "max_entries": "CANDLEFIRE_TERM_CACHE_ENTRIES",
    "depth": "CANDLEFIRE_TERM_CACHE_DEPTH",
    "keyword_walk": "CANDLEFIRE_KEYWORD_WALK",
    "phrase_index": "CANDLEFIRE_PHRASE_INDEX",
}


@dataclass(frozen=True)
class TermCacheSettings:
    #: keep answers (off: every term computed every request; for a diagnosis)
    enabled: bool = True
    #: entries kept per store target; the least recently used go beyond it
    max_entries: int = 50_000
    #: chunks kept per entry: a request reads 18 (10 + the tie margin), the rest absorbs deletes
    depth: int = 40
    keyword_walk: str = "auto"
    #: build the phrase index after a write and find rare phrases of short words through it
    #: (off: neither; the trigram index answers every substring, for a diagnosis)
    phrase_index: bool = True

    def __post_init__(self) -> None:
        check_between("CANDLEFIRE_TERM_CACHE_ENTRIES", self.max_entries, 100, 100_000_000)
        # a request reads 18 rows per entry: a shallower entry could never answer one
        check_between("CANDLEFIRE_TERM_CACHE_DEPTH", self.depth, 18, 1000)
        check_choice("CANDLEFIRE_KEYWORD_WALK", self.keyword_walk, KEYWORD_WALKS)

    @classmethod
    def from_env(cls) -> TermCacheSettings:
        return cls(**env_fields(cls, _VARIABLES, {"keyword_walk": KEYWORD_WALKS}))
