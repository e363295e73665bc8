"""Hoisted constant packs: data computed once from constant inputs, before the kernel proper.

A program hoists a pack when its body starts with pairs ``Decl(Buffer(name, dtype, shape,
"constant"))``, ``Loop`` (the *pack nest*): the nest (loops and guards around ``Assign`` /
``Accum`` statements) writes only ``name`` and loads only tensors the program declares constant
(``semantics.constants``), besides literals and index values; the rest of the program never
writes ``name``. A pack is then a function of the constant inputs and the sizes alone, which a
backend may compute once per input identity and reuse (the C backend does). Any other
``"constant"`` declaration is a ``PackError``: its buffer would be recomputed per call, or
depend on data that changes between calls.
"""
from __future__ import annotations

from dataclasses import dataclass

from tilecert.semantics import ir
from tilecert.semantics import loopir as L
from tilecert.semantics.constants import constant_inputs

from .program import LoweringError

SCOPE = "constant"
HINT = ("a hoisted pack is a root-level `constant` declaration at the start of the program, followed by one loop "
        "nest that writes only it and reads only inputs declared constant (s.constant(name)); declare the buffer "
        "`local` to recompute it per call")


class PackError(LoweringError):
    """A ``constant`` declaration that is not a hoisted pack (see ``lowering.packs``)."""


@dataclass(frozen=True)
class PackNest:
    """One hoisted pack of a loop-form program: its declaration, its nest, the constant inputs it loads."""

    decl: L.Decl
    nest: L.Loop
    reads: tuple[str, ...]


def constant_packs(p: ir.Program) -> tuple[PackNest, ...]:
    """The hoisted packs at the start of ``p``'s body, in order; ``PackError`` for a ``constant``
    declaration anywhere else, or a pack nest that writes another buffer, loads a tensor not declared
    constant (or a tensor ``p`` writes), declares or synchronizes, or a pack written after its nest."""
    ops = p.body.ops
    constants = constant_inputs(p) - set(p.outputs)
    packs: list[PackNest] = []
    k = 0
    while k < len(ops) and isinstance(ops[k], L.Decl) and ops[k].buf.scope == SCOPE:
        decl, nest = ops[k], ops[k + 1] if k + 1 < len(ops) else None
        name = decl.buf.name
        if not isinstance(nest, L.Loop):
            raise PackError(f"constant buffer {name} is not followed by the loop nest that computes it", decl.loc, HINT)
        packs.append(PackNest(decl, nest, _pack_reads(name, nest, constants)))
        k += 2
    names = {pk.decl.buf.name for pk in packs}
    for st in ir.walk(ir.Block((), ops[k:])):
        if isinstance(st, L.Decl) and st.buf.scope == SCOPE:
            raise PackError(f"constant buffer {st.buf.name} is declared after the start of the program or inside a "
                            "loop or guard", st.loc, HINT)
        if isinstance(st, (L.Assign, L.Accum)) and st.buf in names:
            raise PackError(f"constant buffer {st.buf} is written after its pack nest", st.loc, HINT)
    return tuple(packs)


def _pack_reads(name: str, nest: L.Loop, constants: frozenset[str]) -> tuple[str, ...]:
    """The tensors pack nest ``nest`` of buffer ``name`` loads, checked against the pack form."""
    reads: list[str] = []
    for st in ir.walk(ir.Block((), (nest,))):
        if isinstance(st, (L.Decl, L.Barrier)):
            raise PackError(f"the pack nest of constant buffer {name} holds a {type(st).__name__.lower()}", st.loc, HINT)
        if isinstance(st, (L.Assign, L.Accum)):
            if st.buf != name:
                raise PackError(f"the pack nest of constant buffer {name} writes {st.buf}", st.loc, HINT)
            for ld in L.loads(st.value):
                if ld.buf not in constants:
                    raise PackError(f"the pack nest of constant buffer {name} reads {ld.buf}, which is not an input "
                                    "declared constant", st.loc, HINT)
                if ld.buf not in reads:
                    reads.append(ld.buf)
    return tuple(reads)
