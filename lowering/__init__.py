"""tilecert.lowering: scheduled loop form -> explicit loop program, validated on the checker's engine (see ARCHITECTURE.md)."""
from .lower import lower
from .packs import PackError
from .program import Lowered, LoweringError, format_lowered
from .validation import ValidationError, refuses, validate

__all__ = ["lower", "validate", "refuses", "Lowered", "LoweringError", "PackError", "format_lowered", "ValidationError"]
