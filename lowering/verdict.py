"""Verdicts of translation validation: proved, disproved (with a witness) or unknown (with a reason).

Unknown is never success: a lowering whose validation is not all ``proved`` is not emitted
(or, when the sizes were left symbolic, is validated again for the concrete sizes of a call).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from tilecert.semantics.errors import TilecertError

STATUSES = ("proved", "disproved", "unknown")


@dataclass(frozen=True)
class Verdict:
    """The outcome of one obligation (``kind``: ``coverage`` or ``bounds``) about ``subject``."""

    kind: str
    status: str
    subject: str
    detail: str = ""
    witness: dict[str, int] = field(default_factory=dict)

    @property
    def proved(self) -> bool:
        return self.status == "proved"

    def __str__(self) -> str:
        text = f"{self.kind} {self.status}: {self.subject}"
        if self.detail:
            text += f" -- {self.detail}"
        if self.witness:
            text += " [witness " + ", ".join(f"{k}={v}" for k, v in self.witness.items()) + "]"
        return text


@dataclass(frozen=True)
class Validation:
    """All verdicts of one translation validation."""

    verdicts: tuple[Verdict, ...]

    @property
    def proved(self) -> bool:
        return all(v.proved for v in self.verdicts)

    def failures(self, kind: str | None = None) -> list[Verdict]:
        return [v for v in self.verdicts if not v.proved and (kind is None or v.kind == kind)]

    def __str__(self) -> str:
        bad = self.failures()
        if not bad:
            return f"all {len(self.verdicts)} obligations proved"
        return "\n".join(str(v) for v in bad)


class ValidationError(TilecertError):
    """Translation validation did not prove the lowering: nothing is emitted or run."""

    def __init__(self, validation: Validation, what: str) -> None:
        self.validation = validation
        bad = validation.failures()
        super().__init__(f"{what}: translation validation failed\n" + "\n".join(f"  {v}" for v in bad[:5]),
                         hint="a disproved coverage verdict is a lowering bug; an unknown one needs bound sizes "
                              "(tc.schedule(kernel, M=..., ...)) to make the index arithmetic affine")
