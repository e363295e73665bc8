"""Schedule ops on loop form, one module each, and the ``Schedule`` that records them.

Each op module declares its op with ``@schedule_op`` (``registry.py``) and registers it by being
imported here; ``Schedule`` then gets one method per registered op (``install_methods``).
"""
from . import (bind, coalesce, expand_dim, expand_zero, fuse, lift_alloc, pad, partition, privatize,  # noqa: F401
               reorder, split, tile, unit, unroll)
from .registry import OPS, OpDecl, schedule_op
from .schedule import Schedule, install_methods

install_methods()

__all__ = ["OPS", "OpDecl", "Schedule", "install_methods", "schedule_op"]
