"""The term cache: keyword, entity and grounding answers kept by text beside the chunk table,
exact through every write (docs/RETRIEVAL.md, "What a request costs").

Entry: `cache` (TermCache: the read side). `lookup` reads kept entries, `compute` and `cold` make
missing ones, `keep` stores them; `upkeep` maintains every entry in the writer's transaction by
the rules of `entries`; `schema` holds the tables and the content version; `audit` checks kept
entries against fresh computations; `summary` reports size and hit rate.
"""
