"""The C backend's refusal of shared staging.

A block-shared tile is a GPU construct: the block's threads fill it cooperatively and meet at a
block barrier before any of them reads it. The rule, as the seed states it: C lowers packing
(``stage(shared=False)``) and hoisted packs, and refuses shared staging. A program holds a
shared staging exactly when some block holds both a ``shared``-scope declaration and a block
barrier directly (Stage's anchor body: the tile, its load nest, the phase barrier and closer; a
pipelined ring's declaration, prologue and closer sit beside its anchor loop the same way).
A shared declaration with no barrier beside it (for instance one a tile op lowers to) is not a
staging and compiles as before.
"""
from __future__ import annotations

from typing import Optional

from tilecert.lowering.program import LoweringError
from tilecert.semantics import ir
from tilecert.semantics import loopir as L


def shared_stage(block: ir.Block) -> Optional[L.Decl]:
    """The first shared-scope declaration that shares its block with a block barrier, searched in
    ``block`` and every block nested in it; None when the program stages nothing shared."""
    ops = block.ops
    if any(isinstance(st, L.Barrier) and st.scope == "block" for st in ops):
        decl = next((st for st in ops if isinstance(st, L.Decl) and st.buf.scope == "shared"), None)
        if decl is not None:
            return decl
    for st in ops:
        found = shared_stage(st.body) if isinstance(st, (L.Loop, L.If)) else None
        if found is not None:
            return found
    return None


def refuse_shared_staging(program: ir.Program) -> None:
    """Raise ``LoweringError`` when ``program`` holds a shared staging (``shared_stage``)."""
    decl = shared_stage(program.body)
    if decl is not None:
        raise LoweringError(f"kernel {program.name}: the C backend does not lower the block-shared tile "
                            f"{decl.buf.name} (a shared stage: the block's threads fill it and meet at a "
                            "block barrier)", decl.loc,
                            "compile for cuda or cuda-host, or stage with shared=False")
