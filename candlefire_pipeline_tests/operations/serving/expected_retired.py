"""The serving table's retirement rows written out by hand (not derived from TRANSITIONS):
`retire` and `unretire` from every row, and every event from the rows with Chroma retired."""

from __future__ import annotations

from candlefire_pipeline.operations.serving.machine import (
    AUTO_PROMOTE,
    CHANGED,
    PROMOTE,
    PROMOTE_GENERATION,
    REFUSED,
    RETIRE,
    ROLLBACK,
    UNCHANGED,
    UNRETIRE,
    WINDOW_FAILED,
    WINDOW_PASSED,
)
from candlefire_pipeline.operations.serving.state import (
    DEGRADED,
    DEGRADED_RETIRED,
    INITIAL,
    PINNED,
    PINNED_PGVECTOR,
    PINNED_PGVECTOR_RETIRED,
    PROMOTED,
    PROMOTED_RETIRED,
)
from candlefire_pipeline_tests.operations.serving.states import REPORT, SHADOW

P_R, D_R, PP_R = (f"{s}, chroma retired" for s in (PROMOTED, DEGRADED, PINNED_PGVECTOR))
#: the exact command a refused rollback names
RESTORE = 'Run `candlefire unretire chroma --reason "..."`'
SOAKED = "soaked, passing report"

#: (state, event, evidence) -> (outcome, row after, words the message must contain)
EXPECTED_RETIRED = [
    # retire: only from pgvector serving the default generation, on the soak's evidence
    (INITIAL, RETIRE, SOAKED, REFUSED, INITIAL, "chroma serves (never promoted)"),
    (PROMOTED, RETIRE, SOAKED, CHANGED, PROMOTED_RETIRED, ""),
    (PROMOTED, RETIRE, "soak too short", REFUSED, PROMOTED,
     "since 2026-02-26T00:00:00+00:00 (3.0 of the 14-day soak): retire after 2026-03-12"),
    (PROMOTED, RETIRE, "a window failed inside the soak", REFUSED, PROMOTED,
     "1 watched window(s) failed inside the 14-day soak, the last at 2026-02-24T00:00:00+00:00 "
     "(degraded: a shadow_parity window failed: w9 fails ...): retire after 2026-03-10"),
    (PROMOTED, RETIRE, "soaked, failing report", REFUSED, PROMOTED, "fails gates: p95_ratio"),
    (PROMOTED, RETIRE, "soaked, report before the soak", REFUSED, PROMOTED,
     "report r-soak started 2026-02-09T00:00:00+00:00, before the soak began (2026-02-15"),
    (PROMOTED, RETIRE, "soaked, no report", REFUSED, PROMOTED, "no parity report yet"),
    (PROMOTED, RETIRE, "the default never served", REFUSED, PROMOTED, "shows no promotion"),
    (PROMOTED, RETIRE, "no report", REFUSED, PROMOTED, "no soak evidence"),
    ("pgvector@gen_a", RETIRE, SOAKED, REFUSED, PROMOTED, "generation gen_a serves"),
    (DEGRADED, RETIRE, SOAKED, REFUSED, DEGRADED, "degraded since 2026-01-01T12:00:00+00:00"),
    (PINNED, RETIRE, SOAKED, REFUSED, PINNED,
     "pinned to chroma by tester since 2026-01-01T12:00:00+00:00"),
    (PINNED_PGVECTOR, RETIRE, SOAKED, REFUSED, PINNED_PGVECTOR, "pinned by tester since"),
    # unretire where nothing is retired: nothing to do
    *((row, UNRETIRE, "rebuilt and checked", UNCHANGED, row, "chroma is not retired")
      for row in (INITIAL, PROMOTED, DEGRADED, PINNED, PINNED_PGVECTOR)),
    # pgvector serves, Chroma retired
    (P_R, AUTO_PROMOTE, "passing, newer than the pin", UNCHANGED, PROMOTED_RETIRED, "already"),
    (P_R, PROMOTE, "passing, newer than the pin", UNCHANGED, PROMOTED_RETIRED, "already"),
    (P_R, ROLLBACK, "no report", REFUSED, PROMOTED_RETIRED, RESTORE),
    (P_R, WINDOW_FAILED, "failing window", CHANGED, DEGRADED_RETIRED, "degraded: a shadow"),
    (P_R, WINDOW_FAILED, "failing window, auto-rollback after 1", CHANGED, DEGRADED_RETIRED,
     "auto-rollback due after 1 failing shadow_parity windows, but chroma is retired (since "
     "2026-02-20"),
    (P_R, WINDOW_PASSED, "passing window", UNCHANGED, PROMOTED_RETIRED, "healthy"),
    (P_R, PROMOTE_GENERATION, "gen_a compared with what serves", CHANGED, PROMOTED_RETIRED, ""),
    (P_R, RETIRE, SOAKED, UNCHANGED, PROMOTED_RETIRED,
     "retired already (since 2026-02-20T00:00:00+00:00)"),
    (P_R, UNRETIRE, "rebuilt and checked", CHANGED, PROMOTED,
     "chroma rebuilt from the ledger (612 chunks of 3 batches, 1 target(s))"),
    (P_R, UNRETIRE, "no report", REFUSED, PROMOTED_RETIRED, "was not rebuilt from the ledger"),
    (P_R, UNRETIRE, "rebuilt, differing", REFUSED, PROMOTED_RETIRED,
     "differs from its ledger (2 missing): still retired"),
    # a generation over pgvector: its rollback target is on pgvector, so that way stays open
    ("pgvector@gen_a, chroma retired", ROLLBACK, "no report", CHANGED, PINNED_PGVECTOR_RETIRED,
     ""),
    ("pgvector@gen_a, chroma retired", WINDOW_FAILED, "failing window, auto-rollback after 1",
     CHANGED, PINNED_PGVECTOR_RETIRED, "auto-rollback after 1"),
    ("pgvector@gen_a, chroma retired", PROMOTE, "passing, newer than the pin", REFUSED,
     PROMOTED_RETIRED, "--generation default` returns"),
    ("pgvector@gen_a, chroma retired", RETIRE, SOAKED, UNCHANGED, PROMOTED_RETIRED, "already"),
    # degraded, Chroma retired
    (D_R, AUTO_PROMOTE, "passing, newer than the pin", UNCHANGED, DEGRADED_RETIRED, "already"),
    (D_R, PROMOTE, "passing, older than the pin", CHANGED, PROMOTED_RETIRED, ""),
    (D_R, PROMOTE, "failing gates", REFUSED, DEGRADED_RETIRED, "p95_ratio"),
    (D_R, ROLLBACK, "no report", REFUSED, DEGRADED_RETIRED, RESTORE),
    (D_R, WINDOW_FAILED, "failing window", CHANGED, DEGRADED_RETIRED,
     "still degraded: 2 failing shadow_parity windows in a row"),
    (D_R, WINDOW_FAILED, "failing window, auto-rollback after 2", CHANGED, DEGRADED_RETIRED,
     "auto-rollback due after 2 failing shadow_parity windows, but chroma is retired"),
    (D_R, WINDOW_FAILED, "the counted window again, auto-rollback after 1", UNCHANGED,
     DEGRADED_RETIRED, "already counted"),
    (D_R, WINDOW_PASSED, "passing window", CHANGED, PROMOTED_RETIRED, "recovered"),
    (D_R, WINDOW_PASSED, "passing report window", UNCHANGED, DEGRADED_RETIRED,
     "no failing parity_report window"),
    ("degraded, two sources, chroma retired", WINDOW_PASSED, "passing window", CHANGED,
     DEGRADED_RETIRED, "another source still fails"),
    (D_R, PROMOTE_GENERATION, "gen_a compared with what serves", CHANGED, PROMOTED_RETIRED, ""),
    (D_R, RETIRE, SOAKED, UNCHANGED, DEGRADED_RETIRED, "retired already"),
    (D_R, UNRETIRE, "rebuilt and checked", CHANGED, DEGRADED, "a rollback target again"),
    ("degraded@gen_a, chroma retired", WINDOW_FAILED, "failing window, auto-rollback after 2",
     CHANGED, PINNED_PGVECTOR_RETIRED, "auto-rollback after 2 failing shadow_parity windows"),
    # pinned to pgvector, Chroma retired
    (PP_R, AUTO_PROMOTE, "passing, newer than the pin", REFUSED, PINNED_PGVECTOR_RETIRED,
     "pinned"),
    (PP_R, PROMOTE, "passing, newer than the pin", CHANGED, PROMOTED_RETIRED, ""),
    (PP_R, PROMOTE, "passing, older than the pin", REFUSED, PINNED_PGVECTOR_RETIRED,
     "not newer than the pin"),
    (PP_R, ROLLBACK, "no report", REFUSED, PINNED_PGVECTOR_RETIRED, RESTORE),
    (PP_R, WINDOW_FAILED, "failing window, auto-rollback after 1", UNCHANGED,
     PINNED_PGVECTOR_RETIRED, "pinned by an operator"),
    (PP_R, WINDOW_PASSED, "passing window", UNCHANGED, PINNED_PGVECTOR_RETIRED, "pinned"),
    (PP_R, PROMOTE_GENERATION, "gen_a compared with what serves", CHANGED, PROMOTED_RETIRED, ""),
    (PP_R, RETIRE, SOAKED, UNCHANGED, PINNED_PGVECTOR_RETIRED, "retired already"),
    (PP_R, UNRETIRE, "rebuilt and checked", CHANGED, PINNED_PGVECTOR, "a rollback target"),
]  # fmt: skip

#: (setup, event, evidence) -> where the serving target is not the default on the row's backend
SERVES_AFTER_RETIRED = {
    (P_R, PROMOTE_GENERATION, "gen_a compared with what serves"): "pgvector/gen_a",
    (D_R, PROMOTE_GENERATION, "gen_a compared with what serves"): "pgvector/gen_a",
    (PP_R, PROMOTE_GENERATION, "gen_a compared with what serves"): "pgvector/gen_a",
    ("pgvector@gen_a, chroma retired", PROMOTE, "passing, newer than the pin"): "pgvector/gen_a",
    ("pgvector@gen_a, chroma retired", RETIRE, SOAKED): "pgvector/gen_a",
    ("pgvector@gen_a", RETIRE, SOAKED): "pgvector/gen_a",
}

#: what each change from a retired row leaves in `failing` (source -> windows in a row)
FAILING_AFTER_RETIRED = {
    (P_R, "failing window"): {SHADOW: ["w2"]},
    (P_R, "failing window, auto-rollback after 1"): {SHADOW: ["w2"]},
    (D_R, "failing window"): {SHADOW: ["w1", "w2"]},
    (D_R, "failing window, auto-rollback after 2"): {SHADOW: ["w1", "w2"]},
    ("degraded, two sources, chroma retired", "passing window"): {REPORT: ["r-bad"]},
    (D_R, "rebuilt and checked"): {SHADOW: ["w1"]},
}
