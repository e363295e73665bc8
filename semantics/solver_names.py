"""User names inside solver text (isl sets and maps, z3 variables): one reserved namespace.

Rule: the size (dimension) named ``n`` is the solver variable ``p_`` + ``encode(n)``, where
``encode`` keeps each ASCII letter and digit and writes every other character ``c`` as
``_<hex code point of c>_`` (``_`` itself is ``_5f_``). So the result

- is an ASCII identifier that isl and z3 read as one name, never a keyword of either
  (``min``, ``exists``, ``NaN``, ``Ñ`` ... all start with ``p_`` once mangled);
- is injective (``_`` always opens an escape), so two sizes never share a variable;
- never equals a generated name: no generated name starts with ``p_`` (loop variables are
  ``i<region>_<axis>``, instance coordinates a letter stem, maybe a counter, then the loop
  number: ``a3``, ``z0_3``; tuple names ``S<k>`` / ``N<k>``; value variables ``o<k>``,
  ``z``, ``e<k>``).

``user_name`` inverts the mapping, so witnesses shown to users name the user's sizes.
"""
from __future__ import annotations

import re
from typing import Optional

PREFIX = "p_"
_KEEP = re.compile(r"[A-Za-z0-9]")
_TOKEN = re.compile(r"[A-Za-z0-9]|_([0-9a-f]+)_")


def solver_name(name: str) -> str:
    """The solver variable of size ``name`` (see the module doc for the rule)."""
    return PREFIX + "".join(c if _KEEP.fullmatch(c) else f"_{ord(c):x}_" for c in str(name))


def user_name(text: str) -> Optional[str]:
    """The size name whose solver variable is ``text``; None when ``text`` is not one."""
    if not text.startswith(PREFIX):
        return None
    out, pos, body = [], 0, text[len(PREFIX):]
    while pos < len(body):
        m = _TOKEN.match(body, pos)
        if m is None:
            return None
        code = int(m.group(1), 16) if m.group(1) else ord(m.group(0))
        if code > 0x10FFFF:
            return None
        out.append(chr(code))
        pos = m.end()
    return "".join(out)
