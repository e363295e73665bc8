"""Schedule ops on loop form, one module each, and the ``Schedule`` that records them."""
from .schedule import OPS, Schedule, register
from .split import split

register("split", split)

__all__ = ["OPS", "Schedule", "register"]
