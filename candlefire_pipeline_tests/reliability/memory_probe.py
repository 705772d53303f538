"""Child process for memory tests: write_papers on one drop, then report peak RSS as JSON.

python -m candlefire_pipeline_tests.reliability.memory_probe DROP OUT_DIR
Limits come from the environment (Settings.from_env().ingest), as in the ingest asset.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from candlefire_pipeline.corpus.drops import DropFileError, write_papers
from candlefire_pipeline.settings import Settings


def _status_kb(field: str) -> int:
    for row in Path("/proc/self/status").read_text().splitlines():
        if row.startswith(field + ":"):
            return int(row.split()[1])
    raise KeyError(field)


def _reset_peak() -> bool:
    """Set the peak RSS (VmHWM) back to the current RSS; False where the kernel refuses."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def main(drop: str, out_dir: str) -> dict:
    limits = Settings.from_env().ingest
    reset = _reset_peak()
    # without a reset, the peak so far (imports) is the baseline: the delta can only shrink
    baseline = _status_kb("VmRSS") if reset else _status_kb("VmHWM")
    outcome: dict = {}
    try:
        summary = write_papers(Path(drop), Path(out_dir), limits)
        outcome = {"accepted": summary.accepted, "rejected": summary.rejected}
    except DropFileError as err:
        outcome = {"error": str(err)}
    outcome |= {"baseline_kb": baseline, "peak_kb": _status_kb("VmHWM"), "peak_reset": reset}
    return outcome


if __name__ == "__main__":
    print(json.dumps(main(*sys.argv[1:3])))
