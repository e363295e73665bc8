"""The one rule for making a DSL name unique: ``base``, else ``base1``, ``base2``, ...

Buffers, loops and printed values are named after the DSL (a variable, a loop variable, a
tile op); where that name is taken, the smallest number that frees it is appended. The
number depends only on the names taken before, never on a counter over the program.
"""
from __future__ import annotations

from typing import Callable


def numbered(base: str, taken: Callable[[str], bool]) -> str:
    """The first of ``base``, ``base1``, ``base2``, ... that is not ``taken``."""
    name, k = base, 1
    while taken(name):
        name, k = f"{base}{k}", k + 1
    return name
