"""The correspondence of a transform: which old instance each new statement instance performs.

A schedule op gives ``tau`` (``semantics.sched.base.Tau``): pieces mapping each old loop
variable to an expression over new loop variables, under a guard; the identity on every
variable no piece mentions. For a new statement ``s'`` and an old statement ``s``, a piece
*applies* when the expressions it gives for ``s``'s loops (and its guard, if it maps any
of them) read only loops around ``s'``; a piece that maps none of ``s``'s loops reads as the
identity, which applies when ``s``'s loops all surround ``s'``. So a statement outside a
split loop keeps its coordinates and a copy of a body is tied to the piece of its copy.

An *image* of ``s'`` is an old statement ``s`` with the applicable pieces, and the relation

    R(x', x) = x' in D_s'  and  OR_pieces (guard(x') and x = subst(x'))
               and  x in D_s  and  agree(s, s')(x, x')

(with one piece, ``x`` is written as the expressions ``subst(x')``: no variables of its own)

(``agreement.py``): the new instance performs the old one's operation. Images are chosen
per new statement in program order, declarations first (their matching is the buffer
correspondence, from the op's declarations, ``semantics.transform``: a declaration the
op ``Renamed`` matches one of its original, a buffer it minted as a ``Copy``, ``Forward`` or
``Ring`` or declared ``Expanded`` or ``Lifted`` matches none (``forwarding.read_through`` restores it
first), any other declaration one of the same name; each of the same dtype, scope and
rank). A
statement with several readings (alternative pieces with trivial guards, as the copies of
a materializing unroll without inner loops have, or several matching old statements) takes
the first whose relation covers its whole domain and claims old instances no earlier
choice claimed; such choices are recorded in ``ambiguous``, and an obligation that then
fails is reported unknown rather than disproved. New declarations with no counterpart are
*fresh* buffers (temporaries a transform introduced); one that matches by name but to whose
coordinates no reading of tau applies (a crossed cut) stands for the old buffer without an
image, which ``prefix_cut`` then judges instance by instance.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional, Sequence

from tilecert.semantics.index import IConst, IExpr, IVar, free_vars
from tilecert.semantics.transform import Piece as TauPiece, Tau, DataMap, Renamed

from .agreement import agree
from .formula import FALSE, Formula, cmp, cond_of, conj, disj, equal_all, exists, term_of
from .model import BufferRec, Inst, Model, Stmt, domain, inst, order_shape
from .solve import Case, search


@dataclass(frozen=True)
class Piece:
    """One reading of tau for a statement pair: old variable -> expression over new variables."""

    subst: tuple[tuple[int, IExpr], ...]
    guard: IExpr = IConst(1)


@dataclass(frozen=True, eq=False)
class Image:
    new: Stmt
    old: Stmt
    pieces: tuple[Piece, ...]

    @property
    def identity(self) -> bool:
        """Tau keeps the coordinates: one piece, every old variable mapped to itself."""
        return len(self.pieces) == 1 and all(e == IVar(v, 0) for v, e in self.pieces[0].subst)


@dataclass
class Correspondence:
    old: Model
    new: Model
    images: dict[int, Image] = field(default_factory=dict)  # new statement id -> its image
    unmatched: list[Stmt] = field(default_factory=list)  # new effectful statements with no image
    fresh: list[BufferRec] = field(default_factory=list)  # new buffers with no counterpart
    ambiguous: list[str] = field(default_factory=list)
    buffers: dict[int, BufferRec] = field(default_factory=dict)  # id(new buffer) -> old buffer

    def buffer_of(self, new: BufferRec) -> Optional[BufferRec]:
        if new.decl is None:
            return next((b for b in self.old.buffers if b.decl is None and b.name == new.name), None)
        return self.buffers.get(id(new))

    def images_of(self, old: Stmt) -> list[Image]:
        return [img for img in self.images.values() if img.old is old]

    def unchanged(self, img: Image) -> bool:
        """The new statement is the old one, untouched: identity tau, the same loops (variable, start,
        extent), guards and statement, on corresponding buffers, and the only image of the old one.
        Its instances and operations are then those of the old statement, one for one."""
        s, o = img.new, img.old
        return (img.identity and img.pieces[0].guard == IConst(1) and s.node == o.node and s.guards == o.guards
                and [(lp.var, lp.node.start, lp.node.extent) for lp in s.loops]
                == [(lp.var, lp.node.start, lp.node.extent) for lp in o.loops]
                and all(self.buffer_of(a.buffer) is b.buffer for a, b in zip(s.accesses, o.accesses))
                and len(self.images_of(o)) == 1)

    def kept(self, s: Stmt) -> bool:
        """New statement ``s`` is an old one untouched, and so are the declarations of what it accesses."""
        img = self.images.get(s.id)
        return img is not None and self.unchanged(img) and all(
            a.buffer.decl is None or (a.buffer.decl.id in self.images and self.unchanged(self.images[a.buffer.decl.id]))
            for a in s.accesses)

    def kept_pair(self, s: Stmt, t: Stmt) -> bool:
        """``kept`` for both, in the same order structure as their originals: any formula about the pair is
        then, term for term, the same formula about the old pair."""
        if not (self.kept(s) and self.kept(t)):
            return False
        shape = order_shape(s, t)
        return shape is not None and shape == order_shape(self.images[s.id].old, self.images[t.id].old)

    def image_of(self, img: Image, xn: Inst, prefix: str) -> tuple[Inst, Formula, list[str]]:
        """The old instance tau maps new instance ``xn`` to, the condition under which it does, and the
        variables introduced for it: none when one piece gives the old coordinates as expressions of
        ``xn``'s, otherwise a copy named by ``prefix`` tied to ``xn`` by equalities."""
        if len(img.pieces) == 1:
            en = self.new.env(xn.at)
            p = img.pieces[0]
            return Inst(img.old, {v: term_of(e, en) for v, e in p.subst}), cond_of(p.guard, en), []
        xo = inst(img.old, prefix)
        return xo, self.reading(img, xn, xo), xo.owned()

    def reading(self, img: Image, xn: Inst, xo: Inst) -> Formula:
        """Tau maps ``xn`` to ``xo`` under one of the image's pieces."""
        en = self.new.env(xn.at)
        return disj(*(conj(cond_of(p.guard, en), *(cmp("eq", xo.at[v], term_of(e, en)) for v, e in p.subst))
                      for p in img.pieces))

    def relation(self, img: Image, xn: Inst, xo: Inst, tau_part: Formula, full: bool = True) -> Formula:
        """``R(xn, xo)`` given the formula tying ``xo`` to ``xn``: both in their domains and, when
        ``full``, performing the same operation."""
        parts = [domain(self.new, xn), tau_part, domain(self.old, xo)]
        if full:
            parts.append(agree(img.old, img.new, self.old.env(xo.at), self.new.env(xn.at), self.buffer_of))
        return conj(*parts)

    def forward(self, img: Image, xn: Inst, prefix: str, full: bool = True) -> tuple[Inst, Formula, list[str]]:
        """``image_of`` with the relation: ``(xo, R(xn, xo), variables introduced for xo)``."""
        xo, tau_part, extra = self.image_of(img, xn, prefix)
        return xo, self.relation(img, xn, xo, tau_part, full), extra


def correspond(old: Model, new: Model, tau: Tau, timeout_ms: int, datamaps: Sequence[DataMap] = ()) -> Correspondence:
    """The correspondence of ``old`` and ``new`` under ``tau``, buffers matched by the op's ``datamaps``."""
    c = Correspondence(old, new)
    decls = [s for s in new.statements if s.kind == "decl"]
    for s in decls:
        named = [o for o in _named_decls(old, s, datamaps) if _agree_shape(c, o, s) != FALSE]
        chosen = _choose(c, s, [(o, ps) for o in named for ps in _readings(tau, s, o)], timeout_ms)
        if chosen is not None:
            c.buffers[id(s.target)] = chosen.old.target
        elif named:  # tau gives the allocation no old coordinates (its cut is crossed): matched by name only
            c.buffers[id(s.target)] = named[0].target
        else:
            c.fresh.append(s.target)
    for s in new.statements:
        if s.kind not in ("assign", "accum"):
            continue
        cands = [(o, ps) for o in old.statements if o.kind == s.kind for ps in _readings(tau, s, o)
                 if _agree_shape(c, o, s) != FALSE]
        if _choose(c, s, cands, timeout_ms) is None:
            c.unmatched.append(s)
    return c


def _named_decls(old: Model, s: Stmt, datamaps: Sequence[DataMap]) -> list[Stmt]:
    """Old declarations ``s`` may stand for: those of the buffer the op declares it renamed from, none when
    the op minted it (a copy or a forwarded value: a fresh buffer), else those of its own name."""
    name = s.node.buf.name
    if any(d.buffer == name and not isinstance(d, Renamed) for d in datamaps):
        return []
    original = next((d.original for d in datamaps if isinstance(d, Renamed) and d.buffer == name), name)
    return [o for o in old.statements if o.kind == "decl" and o.node.buf.name == original]


def _readings(tau: Tau, new: Stmt, old: Stmt) -> list[tuple[Piece, ...]]:
    """The readings of tau for (new, old): alternatives, each a tuple of pieces (a union)."""
    around = set(new.vars)
    found: list[Piece] = []
    for p in tau.pieces or (TauPiece(()),):
        given = dict(p.subst)
        subst = tuple((v, given.get(v, IVar(v, 0))) for v in old.vars)
        if not all({r for r, _ in free_vars(e)} <= around for _, e in subst):
            continue
        maps = any(v in given for v in old.vars)
        guard = p.guard if maps else IConst(1)
        if {r for r, _ in free_vars(guard)} <= around:
            piece = Piece(subst, guard)
            if piece not in found:
                found.append(piece)
    if len(found) > 1 and any(p.guard != IConst(1) for p in found):
        return [tuple(found)]
    return [(p,) for p in found]


def _agree_shape(c: Correspondence, old: Stmt, new: Stmt) -> Formula:
    """The agreement formula with placeholder coordinates (false when the statements cannot match)."""
    xo, xn = inst(old, "c"), inst(new, "a")
    return agree(old, new, c.old.env(xo.at), c.new.env(xn.at), c.buffer_of)


def _choose(c: Correspondence, s: Stmt, cands: list[tuple[Stmt, tuple[Piece, ...]]],
            timeout_ms: int) -> Optional[Image]:
    images = [Image(s, o, ps) for o, ps in cands]
    if not images:
        return None
    chosen = images[0]
    if len(images) > 1:
        c.ambiguous.append(f"`{s.label()}` has {len(images)} readings under tau")
        chosen = next((img for img in images if _total(c, img, timeout_ms) and _unclaimed(c, img, timeout_ms)),
                      images[0])
    c.images[s.id] = chosen
    return chosen


def _total(c: Correspondence, img: Image, timeout_ms: int) -> bool:
    xn = inst(img.new, "a")
    _, rel, extra = c.forward(img, xn, "c")
    return search([Case("total", domain(c.new, xn), exists(extra, rel))], timeout_ms).status == "empty"


def _unclaimed(c: Correspondence, img: Image, timeout_ms: int) -> bool:
    xn = inst(img.new, "a")
    xo, rel, _ = c.forward(img, xn, "c")
    cases = []
    for k, other in enumerate(c.images_of(img.old)):
        yo, rel2, _ = c.forward(other, inst(other.new, "b"), "e")
        cases.append(Case(f"claim{k}", conj(rel, rel2, equal_all(xo.coords(), yo.coords()))))
    return search(cases, timeout_ms).status == "empty"
