"""One gate's verdict (parity/gates.py evaluates them; parity/shadow/gates.py judges live
evidence with the same type)."""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class GateResult:
    name: str
    passed: bool
    value: float
    threshold: float
    detail: str

    def to_dict(self) -> dict:
        return asdict(self)


def failed(gates: list[GateResult]) -> list[str]:
    """Names of the gates that did not pass."""
    return [g.name for g in gates if not g.passed]
