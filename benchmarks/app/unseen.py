"""Requests whose question text the app has not seen, their entity names and codes as before.

The collection keeps a process copy of its answers (app/local_answers.py): a request repeated
word for word is answered whole from it, with no round trip and no embedding, which is not what a
Space sees (every user types a new question). A timed pass therefore asks each request's claim
with a suffix naming the pass: the semantic search meets a text none of its caches holds, while
the names and codes (an assistant's vocabulary, recurring across requests) were asked in the
warm pass.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from benchmarks.common.requests import Request


def unseen(requests: Sequence[Request], tag: str) -> list[Request]:
    """The requests with their question text made new for the pass `tag`."""
    return [replace(r, query=f"{r.query} [{tag}]") for r in requests]
