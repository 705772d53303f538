"""Exactly the top-k chunks of each sub-query, whatever a store does with ties at the cut."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from candlefire_pipeline.backends.base import ResultRow
from candlefire_pipeline.retrieval.ties import TIE_MARGIN, canonical_order, cut_is_open

log = logging.getLogger(__name__)

#: Sub-query indices and a limit n -> one answer (top-n rows) per index, in the same order.
Ask = Callable[[Sequence[int], int], list[list[ResultRow]]]

#: A tie group still open at this many rows is cut where the store cut it (a degenerate corpus:
#: thousands of chunks at one similarity); the retriever says so in the log.
MAX_ASKED = 4096


def top_k(ask: Ask, count: int, keep: int) -> list[list[ResultRow]]:
    """For each of `count` sub-queries, the first `keep` rows of the store's full answer in
    canonical order (ties.py), asking again with a larger limit only for the sub-queries whose
    tie group at the cut may go on beyond what the store returned."""
    if count == 0:
        return []
    asked = keep + TIE_MARGIN
    answers = ask(range(count), asked)
    if len(answers) != count:
        raise ValueError(f"store answered {len(answers)} of {count} sub-queries")
    pending = [i for i in range(count) if cut_is_open(answers[i], keep, asked)]
    while pending:
        if asked >= MAX_ASKED:
            log.warning(
                "%d sub-queries still end in a tie group at %d rows; cut where the store cut",
                len(pending), asked,
            )  # fmt: skip
            break
        asked = min(MAX_ASKED, asked * 4)
        for index, rows in zip(pending, ask(pending, asked), strict=True):
            answers[index] = rows
        pending = [i for i in pending if cut_is_open(answers[i], keep, asked)]
    return [canonical_order(rows)[:keep] for rows in answers]
