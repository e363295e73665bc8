"""tilecert.lowering: scheduled loop form -> explicit loop program, validated with isl (see ARCHITECTURE.md)."""
from .lower import lower
from .program import Lowered, LoweringError, format_lowered
from .validation import validate
from .verdict import Validation, ValidationError, Verdict

__all__ = ["lower", "validate", "Lowered", "LoweringError", "format_lowered", "Validation", "ValidationError", "Verdict"]
