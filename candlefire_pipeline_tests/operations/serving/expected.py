"""The serving table written out by hand (not derived from serving.TRANSITIONS)."""

from __future__ import annotations

from candlefire_pipeline.operations.serving.machine import (
    AUTO_PROMOTE,
    CHANGED,
    PROMOTE,
    PROMOTE_GENERATION,
    REFUSED,
    ROLLBACK,
    UNCHANGED,
    WINDOW_FAILED,
    WINDOW_PASSED,
)
from candlefire_pipeline.operations.serving.state import (
    BACKEND_OF,
    DEGRADED,
    INITIAL,
    PINNED,
    PINNED_PGVECTOR,
    PROMOTED,
    split_row,
)
from candlefire_pipeline_tests.operations.serving.states import REPORT, SHADOW

#: (state, event, evidence) -> (outcome, state after, words the message must contain)
EXPECTED = [
    (INITIAL, AUTO_PROMOTE, "passing, newer than the pin", CHANGED, PROMOTED, ""),
    (INITIAL, AUTO_PROMOTE, "failing gates", REFUSED, INITIAL, "fails gates: p95_ratio"),
    (INITIAL, AUTO_PROMOTE, "no report", REFUSED, INITIAL, "no parity report"),
    (INITIAL, PROMOTE, "passing, older than the pin", CHANGED, PROMOTED, ""),  # no pin to beat
    (INITIAL, PROMOTE, "failing gates", REFUSED, INITIAL, "p95_ratio"),
    (INITIAL, PROMOTE, "no report", REFUSED, INITIAL, "no parity report"),
    (INITIAL, ROLLBACK, "no report", CHANGED, PINNED, ""),
    (
        INITIAL,
        WINDOW_FAILED,
        "failing window, auto-rollback after 1",
        UNCHANGED,
        INITIAL,
        "not serving pgvector",
    ),  # fmt: skip
    (INITIAL, WINDOW_PASSED, "passing window", UNCHANGED, INITIAL, "not serving pgvector"),
    (PROMOTED, AUTO_PROMOTE, "passing, newer than the pin", UNCHANGED, PROMOTED, "already"),
    (PROMOTED, AUTO_PROMOTE, "failing gates", UNCHANGED, PROMOTED, "already"),
    (PROMOTED, PROMOTE, "passing, newer than the pin", UNCHANGED, PROMOTED, "already"),
    (PROMOTED, ROLLBACK, "passing, newer than the pin", CHANGED, PINNED, ""),
    (PROMOTED, ROLLBACK, "no report", CHANGED, PINNED, ""),
    (PROMOTED, WINDOW_FAILED, "failing window", CHANGED, DEGRADED, "degraded: a shadow_parity"),
    (
        PROMOTED,
        WINDOW_FAILED,
        "failing window, auto-rollback after 2",
        CHANGED,
        DEGRADED,
        "degraded",
    ),  # fmt: skip
    (
        PROMOTED,
        WINDOW_FAILED,
        "failing window, auto-rollback after 1",
        CHANGED,
        PINNED,
        "auto-rollback after 1 failing shadow_parity windows",
    ),  # fmt: skip
    (PROMOTED, WINDOW_PASSED, "passing window", UNCHANGED, PROMOTED, "healthy"),
    (DEGRADED, AUTO_PROMOTE, "passing, newer than the pin", UNCHANGED, DEGRADED, "already"),
    (DEGRADED, PROMOTE, "passing, older than the pin", CHANGED, PROMOTED, ""),  # re-arms
    (DEGRADED, PROMOTE, "failing gates", REFUSED, DEGRADED, "p95_ratio"),
    (DEGRADED, PROMOTE, "no report", REFUSED, DEGRADED, "no parity report"),
    (DEGRADED, ROLLBACK, "no report", CHANGED, PINNED, ""),
    (
        DEGRADED,
        WINDOW_FAILED,
        "failing window",
        CHANGED,
        DEGRADED,
        "still degraded: 2 failing shadow_parity windows in a row",
    ),  # fmt: skip
    (
        DEGRADED,
        WINDOW_FAILED,
        "failing window, auto-rollback after 3",
        CHANGED,
        DEGRADED,
        "still degraded: 2",
    ),  # fmt: skip
    (
        DEGRADED,
        WINDOW_FAILED,
        "failing window, auto-rollback after 2",
        CHANGED,
        PINNED,
        "auto-rollback after 2 failing shadow_parity windows",
    ),  # fmt: skip
    (
        DEGRADED,
        WINDOW_FAILED,
        "the counted window again, auto-rollback after 1",
        UNCHANGED,
        DEGRADED,
        "already counted",
    ),  # fmt: skip
    (DEGRADED, WINDOW_PASSED, "passing window", CHANGED, PROMOTED, "recovered"),
    (
        DEGRADED,
        WINDOW_PASSED,
        "passing report window",
        UNCHANGED,
        DEGRADED,
        "no failing parity_report window",
    ),  # fmt: skip
    (
        "degraded, two sources",
        WINDOW_PASSED,
        "passing window",
        CHANGED,
        DEGRADED,
        "another source still fails",
    ),  # fmt: skip
    (
        "degraded, two sources",
        WINDOW_PASSED,
        "passing report window",
        CHANGED,
        DEGRADED,
        "parity_report recovered",
    ),  # fmt: skip
    # the pin holds against every automatic run, whatever the report
    (PINNED, AUTO_PROMOTE, "passing, newer than the pin", REFUSED, PINNED, "candlefire promote"),
    (PINNED, AUTO_PROMOTE, "passing, older than the pin", REFUSED, PINNED, "pinned"),
    (PINNED, AUTO_PROMOTE, "no report", REFUSED, PINNED, "pinned"),
    (PINNED, PROMOTE, "passing, newer than the pin", CHANGED, PROMOTED, ""),
    (PINNED, PROMOTE, "passing, older than the pin", REFUSED, PINNED, "not newer than the pin"),
    (PINNED, PROMOTE, "failing gates", REFUSED, PINNED, "p95_ratio"),
    (PINNED, PROMOTE, "no report", REFUSED, PINNED, "no parity report"),
    (PINNED, ROLLBACK, "no report", CHANGED, PINNED, ""),
    (
        PINNED,
        WINDOW_FAILED,
        "failing window, auto-rollback after 1",
        UNCHANGED,
        PINNED,
        "not serving pgvector",
    ),  # fmt: skip
    (PINNED, WINDOW_PASSED, "passing window", UNCHANGED, PINNED, "not serving pgvector"),
    (INITIAL, PROMOTE_GENERATION, "gen_a compared with what serves", CHANGED, PROMOTED, ""),
    (
        INITIAL,
        PROMOTE_GENERATION,
        "gen_a compared with another target",
        REFUSED,
        INITIAL,
        "compared pgvector/gen_a with pgvector/x, but chroma/default serves",
    ),
    (
        INITIAL,
        PROMOTE_GENERATION,
        "gen_a failing its comparison",
        REFUSED,
        INITIAL,
        "report c-gen_a fails gates: p95_ratio",
    ),
    (
        INITIAL,
        PROMOTE_GENERATION,
        "gen_a dropped",
        REFUSED,
        INITIAL,
        "generation gen_a is dropped, not live",
    ),
    (
        INITIAL,
        PROMOTE_GENERATION,
        "gen_a never compared",
        REFUSED,
        INITIAL,
        "run `candlefire generation compare gen_a`",
    ),
    (PROMOTED, PROMOTE_GENERATION, "gen_a compared with what serves", CHANGED, PROMOTED, ""),
    (
        PROMOTED,
        PROMOTE_GENERATION,
        "default compared with what serves",
        REFUSED,
        PROMOTED,
        "pgvector/default serves already",
    ),
    ("pgvector@gen_a", AUTO_PROMOTE, "passing, newer than the pin", UNCHANGED, PROMOTED, "already"),
    (
        "pgvector@gen_a",
        PROMOTE,
        "passing, newer than the pin",
        REFUSED,
        PROMOTED,
        "--generation default` returns",
    ),
    ("pgvector@gen_a", ROLLBACK, "no report", CHANGED, PINNED_PGVECTOR, ""),
    (
        "pgvector@gen_a",
        PROMOTE_GENERATION,
        "default compared with what serves",
        CHANGED,
        PROMOTED,
        "",
    ),
    (
        "pgvector@gen_a",
        PROMOTE_GENERATION,
        "gen_a compared with what serves",
        REFUSED,
        PROMOTED,
        "pgvector/gen_a serves already",
    ),
    ("pgvector@gen_b from chroma", ROLLBACK, "no report", CHANGED, PINNED, ""),
    (PINNED, PROMOTE_GENERATION, "gen_a compared with what serves", CHANGED, PROMOTED, ""),
    (
        PINNED,
        PROMOTE_GENERATION,
        "gen_a compared, older than the pin",
        REFUSED,
        PINNED,
        "not newer than the pin (2026-01-01T12:00:00+00:00): run a new comparison",
    ),
    (
        PINNED_PGVECTOR,
        AUTO_PROMOTE,
        "passing, newer than the pin",
        REFUSED,
        PINNED_PGVECTOR,
        "pinned",
    ),
    (PINNED_PGVECTOR, PROMOTE, "passing, newer than the pin", CHANGED, PROMOTED, ""),
    (
        PINNED_PGVECTOR,
        PROMOTE,
        "passing, older than the pin",
        REFUSED,
        PINNED_PGVECTOR,
        "not newer than the pin",
    ),
    (PINNED_PGVECTOR, ROLLBACK, "no report", CHANGED, PINNED, ""),
    (PINNED_PGVECTOR, PROMOTE_GENERATION, "gen_a compared with what serves", CHANGED, PROMOTED, ""),
    (
        PINNED_PGVECTOR,
        PROMOTE_GENERATION,
        "gen_a compared, older than the pin",
        REFUSED,
        PINNED_PGVECTOR,
        "not newer than the pin",
    ),
    (
        "pgvector_pinned@gen_b",
        PROMOTE,
        "passing, newer than the pin",
        REFUSED,
        PINNED_PGVECTOR,
        "generation gen_b serves",
    ),
    ("pgvector_pinned@gen_b", ROLLBACK, "no report", CHANGED, PINNED, ""),
    (
        "pgvector_pinned@gen_b",
        PROMOTE_GENERATION,
        "gen_a compared with what serves",
        CHANGED,
        PROMOTED,
        "",
    ),
    # generations and the windows of the states they add
    (
        PINNED_PGVECTOR,
        WINDOW_FAILED,
        "failing window, auto-rollback after 1",
        UNCHANGED,
        PINNED_PGVECTOR,
        "pinned by an operator",
    ),
    (PINNED_PGVECTOR, WINDOW_PASSED, "passing window", UNCHANGED, PINNED_PGVECTOR, "pinned"),
    (DEGRADED, PROMOTE_GENERATION, "gen_a compared with what serves", CHANGED, PROMOTED, ""),
    (
        "degraded@gen_a",
        PROMOTE,
        "passing, newer than the pin",
        REFUSED,
        DEGRADED,
        "generation gen_a serves",
    ),
    ("degraded@gen_a", ROLLBACK, "no report", CHANGED, PINNED_PGVECTOR, ""),
    # the auto-rollback returns where a rollback does: the target gen_a was promoted over
    (
        "degraded@gen_a",
        WINDOW_FAILED,
        "failing window, auto-rollback after 2",
        CHANGED,
        PINNED_PGVECTOR,
        "auto-rollback after 2 failing shadow_parity windows",
    ),
    (
        "pgvector@gen_a",
        WINDOW_FAILED,
        "failing window, auto-rollback after 1",
        CHANGED,
        PINNED_PGVECTOR,
        "auto-rollback after 1",
    ),
    ("pgvector@gen_a", WINDOW_FAILED, "failing window", CHANGED, DEGRADED, "degraded"),
]

#: (setup, event, evidence) -> the (backend/generation) serving after, where it is not the
#: default generation on the state's backend
SERVES_AFTER = {
    (INITIAL, PROMOTE_GENERATION, "gen_a compared with what serves"): "pgvector/gen_a",
    (PROMOTED, PROMOTE_GENERATION, "gen_a compared with what serves"): "pgvector/gen_a",
    ("pgvector@gen_a", AUTO_PROMOTE, "passing, newer than the pin"): "pgvector/gen_a",
    ("pgvector@gen_a", PROMOTE, "passing, newer than the pin"): "pgvector/gen_a",
    ("pgvector@gen_a", PROMOTE_GENERATION, "gen_a compared with what serves"): "pgvector/gen_a",
    (PINNED, PROMOTE_GENERATION, "gen_a compared with what serves"): "pgvector/gen_a",
    (PINNED_PGVECTOR, PROMOTE_GENERATION, "gen_a compared with what serves"): "pgvector/gen_a",
    ("pgvector_pinned@gen_b", PROMOTE, "passing, newer than the pin"): "pgvector/gen_b",
    (
        "pgvector_pinned@gen_b",
        PROMOTE_GENERATION,
        "gen_a compared with what serves",
    ): "pgvector/gen_a",
    (DEGRADED, PROMOTE_GENERATION, "gen_a compared with what serves"): "pgvector/gen_a",
    ("degraded@gen_a", PROMOTE, "passing, newer than the pin"): "pgvector/gen_a",
    ("pgvector@gen_a", WINDOW_FAILED, "failing window"): "pgvector/gen_a",
}


def serves_after(state: str, event: str, evidence: str, after: str) -> str:
    """`after` is a row: a state, or one with Chroma retired."""
    return SERVES_AFTER.get((state, event, evidence), f"{BACKEND_OF[split_row(after)[0]]}/default")


#: what each window that changes the switch leaves in `failing` (source -> windows in a row)
FAILING_AFTER = {
    (PROMOTED, "failing window"): {SHADOW: ["w2"]},
    (PROMOTED, "failing window, auto-rollback after 2"): {SHADOW: ["w2"]},
    (DEGRADED, "failing window"): {SHADOW: ["w1", "w2"]},
    (DEGRADED, "failing window, auto-rollback after 3"): {SHADOW: ["w1", "w2"]},
    ("degraded, two sources", "passing window"): {REPORT: ["r-bad"]},
    ("degraded, two sources", "passing report window"): {SHADOW: ["w1"]},
    ("pgvector@gen_a", "failing window"): {SHADOW: ["w2"]},
}
