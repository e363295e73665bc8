"""User names in generated C / CUDA text: the one rule for comments and the one for identifiers.

- ``c_comment(text)``: ``/* <text> */`` with ``text`` written as Python's ``ascii()`` writes a
  string, without the quotes (backslash, newline, tab, every non-printable and non-ASCII
  character escaped, so the comment is one ASCII line), then every ``*/`` broken as ``*\\/``
  and every ``/*`` as ``/\\*`` (unambiguous: a backslash of the text is already ``\\\\``; a
  backslash between ``*`` and ``/`` creates no new pair). Whatever the text, the comment
  ends only at its own ``*/`` and holds no nested ``/*``; text past ``COMMENT_LIMIT``
  characters is cut and marked ``...``.
- ``c_ident(prefix, name, n)``: ``<prefix><n>_<name reduced>``, where the name's runs of
  characters other than ASCII letters and digits become one ``_`` (so no ``__``, reserved
  in C and C++) and it is cut to ``IDENT_LIMIT`` characters. The prefix (letters and
  single underscores, a letter last) and the number make it unique and keep it off every
  C / CUDA keyword and generated name; the name part is only there to be readable.
"""
from __future__ import annotations

import re

COMMENT_LIMIT = 160
IDENT_LIMIT = 24


def comment_text(text: str) -> str:
    """``text`` as one ASCII line that cannot close a C comment (the escaping of ``c_comment``)."""
    escaped = ascii(str(text))[1:-1].replace("*/", "*\\/").replace("/*", "/\\*")
    return escaped if len(escaped) <= COMMENT_LIMIT else escaped[:COMMENT_LIMIT] + "..."


def c_comment(text: str) -> str:
    """The C / C++ comment ``/* text */`` with ``text`` escaped (see the module doc)."""
    return f"/* {comment_text(text)} */"


def c_ident(prefix: str, name: str, n: int) -> str:
    """The C identifier ``<prefix><n>_<name reduced to [A-Za-z0-9_]>`` (see the module doc)."""
    if not re.fullmatch(r"[A-Za-z](_?[A-Za-z])*", prefix):  # letters, single underscores, a letter last
        raise ValueError(f"c_ident: {prefix!r} is not a prefix of letters")
    reduced = re.sub(r"[^A-Za-z0-9]+", "_", str(name)).strip("_")[:IDENT_LIMIT].rstrip("_")
    return f"{prefix}{n}_{reduced}" if reduced else f"{prefix}{n}"
