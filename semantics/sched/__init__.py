"""Schedule ops on loop form, one module each, and the ``Schedule`` that records them."""
from .schedule import OPS, Schedule, register
from .split import split
from .coalesce import coalesce, reshape
from .fuse import fuse
from .reorder import reorder, swap
from .tile import tile
from .unit import insert_unit, remove_unit
from .bind import bind
from .expand_zero import expand_zero
from .pad import pad
from .partition import partition
from .unroll import unroll
from .privatize import privatize

register("split", split)
register("fuse", fuse)
register("reorder", reorder)
register("swap", swap)
register("tile", tile)
register("insert_unit", insert_unit)
register("remove_unit", remove_unit)
register("coalesce", coalesce)
register("reshape", reshape)
register("bind", bind)
register("unroll", unroll)
register("partition", partition)
register("pad", pad)
register("expand_zero", expand_zero)
register("privatize", privatize)

__all__ = ["OPS", "Schedule", "register"]
