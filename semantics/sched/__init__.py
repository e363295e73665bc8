"""Schedule ops on loop form, one module each, and the ``Schedule`` that records them.

Each op module declares its op with ``@schedule_op`` (``registry.py``) and registers it by being
imported here; ``Schedule`` then gets one method per registered op (``install_methods``).
"""
from . import (bind, coalesce, constant, expand_dim, expand_zero, fission, fuse, lift_alloc, merge, pad,  # noqa: F401
               modulo, partition, privatize, reorder, split, stage, tile, unit, unroll)
from .registry import OPS, OpDecl, schedule_op
from .schedule import Schedule, install_methods

install_methods()

__all__ = ["OPS", "OpDecl", "Schedule", "install_methods", "schedule_op"]
