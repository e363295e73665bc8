"""Argument kinds of schedule ops: what each parameter accepts, declared once (``registry.schedule_op``).

A kind gives, for one parameter:

- ``schema()``: a JSON Schema fragment (the subset ``matches`` reads: ``type``, ``enum``,
  ``minimum`` / ``maximum``, ``minLength``, ``items``, ``prefixItems``, ``minItems`` / ``maxItems``,
  ``uniqueItems``, ``anyOf``, an object's ``additionalProperties`` schema);
  a schedule file's argument is checked against it before anything is replayed (``schema.py``);
- ``validate(value, site)``: the value normalized to its JSON form (lists for sequences), or a
  ``ScheduleError`` naming the op, the parameter, the kind expected, the value got and a hint.
  The structural part is the schema fragment itself (one rule for files and for calls); a kind
  adds what needs the program: a loop or buffer name must name one of its loops or buffers;
- ``strategy(draw)``: a hypothesis strategy of values for the program being scheduled (None when
  the program offers none, e.g. no loop), used by ``tilecert.strategies.op_calls``.

Relations between parameters are declared by name: ``LoopName(inside="outer")`` is meant to be a
loop directly inside the loop ``outer`` names; ``ListOf(..., length_of="loops")`` has one item per
item of ``loops`` (checked); ``ListOf(Int(), within="loop")`` holds points inside that loop's range
and ``ListOf(PosInt(), product_of="loop")`` extents whose product is its extent (both drawn so by
the strategies; the op proves them); ``StageName(of="loop")`` names a stage of the pipeline loop that
parameter names. ``BoundSizes`` is supplied by the ``Schedule`` (the sizes it
binds, facts an op may use), never recorded or drawn.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Optional as Opt

from .. import ir
from .. import loopir as L
from ..index import evaluate, free_vars, size_names
from ..jsondata import INT64
from .base import ScheduleError, buffer_names, find_loops, named_positions, statement_names


def show(value: Any, limit: int = 60) -> str:
    """``repr(value)``, cut to ``limit`` characters."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def matches(value: Any, schema: Mapping[str, Any]) -> bool:
    """Whether ``value`` satisfies the JSON Schema fragment ``schema`` (a list or tuple is an array;
    an integer is never a bool)."""
    if "anyOf" in schema:
        return any(matches(value, s) for s in schema["anyOf"])
    if "enum" in schema and not any(type(value) is type(c) and value == c for c in schema["enum"]):
        return False
    kind = schema.get("type")
    if kind == "null":
        return value is None
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool) and \
            schema.get("minimum", value) <= value <= schema.get("maximum", value)
    if kind == "string":
        return isinstance(value, str) and len(value) >= schema.get("minLength", 0)
    if kind == "object":
        values = schema.get("additionalProperties")
        return isinstance(value, dict) and all(isinstance(k, str) for k in value) and (
            not isinstance(values, dict) or all(matches(v, values) for v in value.values()))
    if kind == "array":
        if not isinstance(value, (list, tuple)) or not schema.get("minItems", 0) <= len(value) <= schema.get(
                "maxItems", len(value)):
            return False
        if schema.get("uniqueItems") and len(set(map(repr, value))) < len(value):
            return False
        prefix = schema.get("prefixItems", [])
        return all(matches(v, prefix[k] if k < len(prefix) else schema.get("items", {})) for k, v in enumerate(value))
    return True


@dataclass(frozen=True)
class Site:
    """Where a value is validated: op ``op``'s parameter ``param`` on ``program``; ``args`` holds the
    op's arguments validated before this one."""

    op: str
    param: str
    program: ir.Program
    args: Mapping[str, Any] = field(default_factory=dict)

    def error(self, kind: "Kind", value: Any, detail: str = "", hint: str = "") -> ScheduleError:
        return ScheduleError(f"{self.op}: {self.param} must be {kind.expected}, got {show(value)}" +
                             (f": {detail}" if detail else ""), hint=hint or kind.hint(self))


@dataclass(frozen=True)
class Draw:
    """What a strategy may draw from: the program, its bound sizes and the arguments drawn so far."""

    program: ir.Program
    sizes: Mapping[str, int]
    args: Mapping[str, Any]

    def loop_names(self) -> list[str]:
        return [lp.name for lp in L.loops(self.program.body)]

    def loop_range(self, name: Any) -> Opt[tuple[int, int]]:
        """(start, extent) of the loop ``name`` when both evaluate under the bound sizes (else None)."""
        found = find_loops(self.program.body, name) if isinstance(name, str) else []
        if len(found) != 1 or any(size_names(e) - set(self.sizes) or free_vars(e)
                                  for e in (found[0].start, found[0].extent)):
            return None
        return int(evaluate(found[0].start, self.sizes, {})), int(evaluate(found[0].extent, self.sizes, {}))


def _st() -> Any:
    from hypothesis import strategies  # imported on use: only drawing needs hypothesis
    return strategies


class Kind:
    """An argument kind (see the module doc); ``expected`` and ``plural`` say it in words."""

    expected = "a value"
    plural = "values"
    annotation: Any = Any
    supplied = False  # given by the Schedule, not by the caller

    def schema(self) -> dict[str, Any]:
        return {}

    def hint(self, site: Site) -> str:
        return f"pass {self.expected} as {site.param}"

    def validate(self, value: Any, site: Site) -> Any:
        if not matches(value, self.schema()):
            raise site.error(self, value, self.flaw(value))
        return self.check(value, site)

    def flaw(self, value: Any) -> str:
        """Why ``value``, which fails the schema, fails it, where its type and the kind's words do not say it."""
        return ""

    def check(self, value: Any, site: Site) -> Any:
        """What ``validate`` adds past the schema: program facts, normalization (the value by default)."""
        return value

    def strategy(self, draw: Draw) -> Any:
        return None

    def list_strategy(self, draw: Draw, length: int, distinct: bool) -> Any:
        """Lists of ``length`` values of this kind (None when none can be drawn)."""
        item = self.strategy(draw)
        return None if item is None else _st().lists(item, min_size=length, max_size=length, unique=distinct)

    def __repr__(self) -> str:
        return type(self).__name__


class Int(Kind):
    expected, plural, annotation = "an int", "ints", int
    minimum = INT64[0]

    def schema(self) -> dict[str, Any]:
        return {"type": "integer", "minimum": self.minimum, "maximum": INT64[1]}

    def hint(self, site: Site) -> str:
        return f"pass an int in [{self.minimum}, {INT64[1]}] as {site.param}"

    def flaw(self, value: Any) -> str:
        if isinstance(value, int) and not isinstance(value, bool) and not INT64[0] <= value <= INT64[1]:
            return "outside int64, the index type of the backends"
        return ""

    def strategy(self, draw: Draw) -> Any:
        return _st().integers(max(self.minimum, -1), 6)


class PosInt(Int):
    expected, plural = "a positive int", "positive ints"
    minimum = 1

    def hint(self, site: Site) -> str:
        return f"pass an int > 0 (at most {INT64[1]}) as {site.param}"


class NonNegInt(Int):
    expected, plural = "a non-negative int", "non-negative ints"
    minimum = 0

    def hint(self, site: Site) -> str:
        return f"pass an int >= 0 (at most {INT64[1]}) as {site.param}"


class Bool(Kind):
    expected, plural, annotation = "a bool", "bools", bool

    def schema(self) -> dict[str, Any]:
        return {"type": "boolean"}

    def strategy(self, draw: Draw) -> Any:
        return _st().booleans()


class Enum(Kind):
    """One of ``choices``; ``hints`` maps a wrong value to a hint of its own."""

    annotation = str

    def __init__(self, choices: tuple[str, ...], hints: Opt[Mapping[str, str]] = None) -> None:
        self.choices, self.hints = tuple(choices), dict(hints or {})
        self.expected = "one of " + ", ".join(map(repr, self.choices))
        self.plural = f"values among {', '.join(map(repr, self.choices))}"

    def schema(self) -> dict[str, Any]:
        return {"type": "string", "enum": list(self.choices)}

    def validate(self, value: Any, site: Site) -> Any:
        if not matches(value, self.schema()):
            raise site.error(self, value, hint=self.hints.get(value) if isinstance(value, str) else "")
        return value

    def hint(self, site: Site) -> str:
        return f"{site.param} is one of: {', '.join(self.choices)}"

    def strategy(self, draw: Draw) -> Any:
        return _st().sampled_from(self.choices)

    def __repr__(self) -> str:
        return f"Enum({self.choices!r})"


class LoopName(Kind):
    """The name of a loop of the program. ``inside``: another parameter, whose loop this one is meant to
    lie directly inside; ``follows``: another parameter, whose loop this one is meant to follow in one
    block; ``nesting``: this loop is meant to have a loop directly inside it (strategies draw such loops
    half of the time; the op checks the nesting and the order)."""

    expected, plural, annotation = "a loop name", "loop names", str

    def __init__(self, inside: Opt[str] = None, nesting: bool = False, follows: Opt[str] = None) -> None:
        self.inside, self.nesting, self.follows = inside, nesting, follows

    def schema(self) -> dict[str, Any]:
        return {"type": "string"}

    def hint(self, site: Site) -> str:
        return f"loops are: {', '.join(lp.name for lp in L.loops(site.program.body)) or 'none'}"

    def check(self, value: Any, site: Site) -> Any:
        if not find_loops(site.program.body, value):
            raise site.error(self, value, f"no loop named {value!r}")
        return value

    def strategy(self, draw: Draw) -> Any:
        names = draw.loop_names()
        if not names:
            return None
        if self.inside:
            outer = find_loops(draw.program.body, draw.args.get(self.inside))
            preferred = [st.name for lp in outer[:1] for st in lp.body.ops if isinstance(st, L.Loop)]
        elif self.follows:
            preferred = _loops_after(draw.program.body, draw.args.get(self.follows))
        else:
            preferred = [lp.name for lp in L.loops(draw.program.body) if self.nesting and
                         any(isinstance(st, L.Loop) for st in lp.body.ops)]
        everything = _st().sampled_from(names)
        return everything | _st().sampled_from(preferred) if preferred else everything

    def list_strategy(self, draw: Draw, length: int, distinct: bool) -> Any:
        """Permutations of ``length`` consecutive loops of a run of directly nested loops."""
        st = _st()
        chains = []
        for lp in L.loops(draw.program.body):
            chain = [lp.name]
            while len(lp.body.ops) == 1 and isinstance(lp.body.ops[0], L.Loop):
                lp = lp.body.ops[0]
                chain.append(lp.name)
            if len(chain) >= length:
                chains.append(chain)
        if not chains:
            return None
        return st.sampled_from(chains).flatmap(lambda c: st.integers(0, len(c) - length).flatmap(
            lambda i: st.permutations(c[i:i + length])))


def _loops_after(block: Any, name: Any) -> list[str]:
    """The loops that follow the loop ``name`` in the block holding it."""
    for b in [block] + [st.body for st in ir.walk(block) if isinstance(st, (L.Loop, L.If))]:
        at = [k for k, op in enumerate(b.ops) if isinstance(op, L.Loop) and op.name == name]
        if at:
            return [op.name for op in b.ops[at[0] + 1:] if isinstance(op, L.Loop)]
    return []


class StatementName(Kind):
    """The name of a statement directly in the body of the loop parameter ``inside`` names, as ``s.show()``
    prints it: a loop's name, or the buffer a store or update writes (a guard answers to the names of
    what it holds). ``base.statement_names`` says which names a statement answers to."""

    expected, plural, annotation = "a statement name (a loop, or a buffer a statement stores to)", \
        "statement names", str

    def __init__(self, inside: str) -> None:
        self.inside = inside

    def schema(self) -> dict[str, Any]:
        return {"type": "string"}

    def _names(self, program: ir.Program, loop: Any) -> list[str]:
        found = find_loops(program.body, loop) if isinstance(loop, str) else []
        return sorted(set().union(*(statement_names(st) for st in found[0].body.ops))) if len(found) == 1 else []

    def hint(self, site: Site) -> str:
        names = self._names(site.program, site.args.get(self.inside))
        return f"statements directly in {site.args.get(self.inside)!r} answer to: {', '.join(names) or 'none'}"

    def check(self, value: Any, site: Site) -> Any:
        found = find_loops(site.program.body, site.args.get(self.inside))
        if len(found) == 1 and not named_positions(found[0].body, value):
            raise site.error(self, value, f"no statement directly in loop {found[0].name!r} answers to {value!r}")
        return value

    def strategy(self, draw: Draw) -> Any:
        names = self._names(draw.program, draw.args.get(self.inside)) or sorted(
            {n for st in ir.walk(draw.program.body) for n in statement_names(st)})
        return _st().sampled_from(names) if names else None


class NewLoopName(Kind):
    """The name of a loop the op makes: a non-empty str (the op checks that no other loop keeps it)."""

    expected, plural, annotation = "a new loop name (a non-empty str)", "new loop names", str
    FRESH = ("fresh", "fresh1", "fresh2")

    def schema(self) -> dict[str, Any]:
        return {"type": "string", "minLength": 1}

    def hint(self, site: Site) -> str:
        return "pass a str no loop has, or leave the name out for a generated one"

    def strategy(self, draw: Draw) -> Any:
        return _st().sampled_from(draw.loop_names() + list(self.FRESH))


class BufferName(Kind):
    """The name of a buffer of the program: a tensor or a buffer its body declares."""

    expected, plural, annotation = "a buffer name", "buffer names", str

    def schema(self) -> dict[str, Any]:
        return {"type": "string"}

    def hint(self, site: Site) -> str:
        return f"buffers are: {', '.join(sorted(buffer_names(site.program)))}"

    def check(self, value: Any, site: Site) -> Any:
        if value not in buffer_names(site.program):
            raise site.error(self, value, f"no buffer named {value!r}")
        return value

    def strategy(self, draw: Draw) -> Any:
        names = sorted(buffer_names(draw.program))
        return _st().sampled_from(names) if names else None


class StageName(Kind):
    """A stage of the pipeline loop the parameter ``of`` names: its name, or its ordinal (an int, or the int's
    digits, as a schedule file's object keys hold it). A name two stages share must be given by ordinal."""

    expected, plural, annotation = "a stage (its name or its ordinal)", "stages", Any

    def __init__(self, of: str) -> None:
        self.of = of

    def schema(self) -> dict[str, Any]:
        return {"anyOf": [{"type": "string", "minLength": 1}, {"type": "integer", "minimum": 0, "maximum": INT64[1]}]}

    def _stages(self, program: ir.Program, loop: Any) -> list[L.StageBlock]:
        found = find_loops(program.body, loop) if isinstance(loop, str) else []
        return [st for st in found[0].body.ops if isinstance(st, L.StageBlock)] if len(found) == 1 else []

    def hint(self, site: Site) -> str:
        stages = self._stages(site.program, site.args.get(self.of))
        return f"the stages of {site.args.get(self.of)!r} are: " + (
            ", ".join(f"{st.ordinal} ({st.name})" for st in stages) or "none (not a pipeline loop)")

    def check(self, value: Any, site: Site) -> Any:
        if self.ordinal(value, site.program, site.args.get(self.of)) is None:
            raise site.error(self, value, f"no single stage of loop {site.args.get(self.of)!r} is {value!r}")
        return value

    def ordinal(self, value: Any, program: ir.Program, loop: Any) -> Opt[int]:
        """The ordinal of the stage ``value`` names in ``loop`` (a name first, then an ordinal; None if none, or
        if two stages have that name)."""
        stages = self._stages(program, loop)
        named = [st.ordinal for st in stages if st.name == value]
        if named:
            return named[0] if len(named) == 1 else None
        if isinstance(value, str) and value.isdigit():
            value = int(value)
        return value if isinstance(value, int) and any(st.ordinal == value for st in stages) else None

    def strategy(self, draw: Draw) -> Any:
        stages = self._stages(draw.program, draw.args.get(self.of))
        return _st().sampled_from([st.name for st in stages] + [st.ordinal for st in stages]) if stages else None


class MapOf(Kind):
    """A dict from values of ``key`` to values of ``value``; an int key is normalized to its digits (a JSON object's
    keys are strings)."""

    annotation = dict

    def __init__(self, key: Kind, value: Kind) -> None:
        self.key, self.value = key, value
        self.expected = f"a dict from {key.plural} to {value.plural}"
        self.plural = f"dicts from {key.plural} to {value.plural}"

    def schema(self) -> dict[str, Any]:
        return {"type": "object", "additionalProperties": self.value.schema()}

    def hint(self, site: Site) -> str:
        return f"pass {site.param} as a dict, e.g. {{key: value}}; keys: {self.key.hint(site)}"

    def validate(self, value: Any, site: Site) -> Any:
        if isinstance(value, dict):
            value = {str(k) if isinstance(k, int) and not isinstance(k, bool) else k: v for k, v in value.items()}
        if not matches(value, self.schema()):
            raise site.error(self, value, self.flaw(value))
        return {self.key.validate(k, Site(site.op, f"{site.param} key", site.program, site.args)):
                self.value.validate(v, Site(site.op, f"{site.param}[{k!r}]", site.program, site.args))
                for k, v in value.items()}

    def flaw(self, value: Any) -> str:
        if not isinstance(value, dict):
            return ""
        if not all(isinstance(k, str) for k in value):
            return "its keys are not all names or ints"
        bad = next(k for k, v in value.items() if not matches(v, self.value.schema()))
        return f"the value of {bad!r} ({show(value[bad], 30)}) is not {self.value.expected}"

    def strategy(self, draw: Draw) -> Any:
        keys, values = self.key.strategy(draw), self.value.strategy(draw)
        if keys is None or values is None:
            return None
        return _st().dictionaries(keys.map(str), values, max_size=4)

    def __repr__(self) -> str:
        return f"MapOf({self.key!r}, {self.value!r})"


class TupleOf(Kind):
    """A list of exactly one value of each of ``kinds``, in order; ``example`` shows one in a hint."""

    annotation = list

    def __init__(self, *kinds: Kind, example: str = "") -> None:
        self.kinds, self.example = kinds, example
        self.expected = "a list of " + ", ".join(k.expected for k in kinds)
        self.plural = "lists of " + ", ".join(k.expected for k in kinds)

    def schema(self) -> dict[str, Any]:
        return {"type": "array", "prefixItems": [k.schema() for k in self.kinds], "minItems": len(self.kinds),
                "maxItems": len(self.kinds)}

    def validate(self, value: Any, site: Site) -> Any:
        if not matches(value, self.schema()):
            raise site.error(self, value, self.flaw(value))
        return [k.validate(v, Site(site.op, f"{site.param}[{n}]", site.program, site.args))
                for n, (k, v) in enumerate(zip(self.kinds, value))]

    def flaw(self, value: Any) -> str:
        if not isinstance(value, (list, tuple)):
            return ""
        if len(value) != len(self.kinds):
            return f"{len(self.kinds)} items, {len(value)} here"
        bad = next(k for k, (kind, v) in enumerate(zip(self.kinds, value)) if not matches(v, kind.schema()))
        return f"item {bad} ({value[bad]!r}) is not {self.kinds[bad].expected}"

    def strategy(self, draw: Draw) -> Any:
        parts = [k.strategy(draw) for k in self.kinds]
        return None if any(x is None for x in parts) else _st().tuples(*parts).map(list)

    def __repr__(self) -> str:
        return f"TupleOf{self.kinds!r}"


class Optional(Kind):
    """None, or a value of ``kind``."""

    def __init__(self, kind: Kind) -> None:
        self.kind = kind
        self.expected, self.plural = f"{kind.expected} or None", f"{kind.plural} or None"
        self.annotation = Opt[kind.annotation]

    def schema(self) -> dict[str, Any]:
        return {"anyOf": [self.kind.schema(), {"type": "null"}]}

    def hint(self, site: Site) -> str:
        return self.kind.hint(site)

    def validate(self, value: Any, site: Site) -> Any:
        return None if value is None else self.kind.validate(value, site)

    def strategy(self, draw: Draw) -> Any:
        inner = self.kind.strategy(draw)
        return _st().none() if inner is None else inner | _st().none()

    def __repr__(self) -> str:
        return f"Optional({self.kind!r})"


class ListOf(Kind):
    """A list of at least ``min_len`` values of ``item`` (``distinct``: no value twice); see the module
    doc for ``length_of``, ``within`` and ``product_of``."""

    def __init__(self, item: Kind, min_len: int = 1, distinct: bool = False, length_of: Opt[str] = None,
                 within: Opt[str] = None, product_of: Opt[str] = None) -> None:
        self.item, self.min_len, self.distinct = item, min_len, distinct
        self.length_of, self.within, self.product_of = length_of, within, product_of
        size = "a non-empty list of" if min_len == 1 else f"a list of {min_len} or more"
        self.expected = f"{size} {'distinct ' if distinct else ''}{item.plural}" + \
            (f", one per item of {length_of}" if length_of else "")
        self.plural = f"lists of {item.plural}"
        self.annotation = list[item.annotation]

    def schema(self) -> dict[str, Any]:
        return {"type": "array", "items": self.item.schema(), "minItems": self.min_len,
                **({"uniqueItems": True} if self.distinct else {})}

    def hint(self, site: Site) -> str:
        return f"pass {site.param} as a list, e.g. {self._example(site)}"

    def _example(self, site: Site) -> str:
        n = max(self.min_len, len(site.args.get(self.length_of) or ()) if self.length_of else 0, 1)
        if isinstance(self.item, LoopName):
            names = [lp.name for lp in L.loops(site.program.body)][:n]
            return repr(names + ["i"] * (n - len(names)))
        if isinstance(self.item, TupleOf) and self.item.example:
            return f"[{self.item.example}]"
        return repr(list(range(2, n + 2)))

    def validate(self, value: Any, site: Site) -> Any:
        if not matches(value, self.schema()):
            raise site.error(self, value, self.flaw(value))
        wanted = site.args.get(self.length_of) if self.length_of else None
        if wanted is not None and len(value) != len(wanted):
            raise site.error(self, value, f"{len(wanted)} item(s) in {self.length_of}, {len(value)} here")
        return [self.item.validate(v, Site(site.op, f"{site.param}[{k}]", site.program, site.args))
                for k, v in enumerate(value)]

    def flaw(self, value: Any) -> str:
        if not isinstance(value, (list, tuple)) or len(value) < self.min_len:
            return ""
        bad = next((k for k, v in enumerate(value) if not matches(v, self.item.schema())), None)
        if bad is not None:
            why = self.item.flaw(value[bad])
            return f"item {bad} ({value[bad]!r}) is not {self.item.expected}" + (f" ({why})" if why else "")
        return "a value appears more than once"

    def strategy(self, draw: Draw) -> Any:
        st = _st()
        fixed = draw.args.get(self.length_of) if self.length_of else None
        if fixed is not None:
            return self.item.list_strategy(draw, len(fixed), self.distinct)
        lengths = [n for n in range(self.min_len, max(self.min_len, 3) + 1)
                   if self.item.list_strategy(draw, n, self.distinct) is not None]
        if not lengths:
            return None
        generic = st.sampled_from(lengths).flatmap(lambda n: self.item.list_strategy(draw, n, self.distinct))
        fitted = self._fitted(draw)
        return generic if fitted is None else generic | fitted

    def _fitted(self, draw: Draw) -> Any:
        """Lists that fit the range of the loop ``within`` / ``product_of`` names (None when it is unknown)."""
        st = _st()
        if self.within:
            known = draw.loop_range(draw.args.get(self.within))
            if known is None or known[1] < 2:
                return None
            lo, n = known
            return st.lists(st.integers(lo + 1, lo + n - 1), min_size=self.min_len, max_size=max(self.min_len, 3),
                            unique=True).map(sorted)
        if self.product_of:
            known = draw.loop_range(draw.args.get(self.product_of))
            if known is None or known[1] < 1:
                return None
            n = known[1]
            divisors = [d for d in range(1, n + 1) if n % d == 0]
            return st.sampled_from(divisors).flatmap(lambda d: st.sampled_from([[d, n // d], [1, d, n // d],
                                                                                [d, n // d, 1]]))
        return None

    def __repr__(self) -> str:
        return f"ListOf({self.item!r}, min_len={self.min_len})"


class BoundSizes(Kind):
    """The sizes the schedule binds (a dict or None), facts an op may use to prove its preconditions:
    supplied by ``Schedule.apply``, never recorded, never drawn."""

    expected, annotation, supplied = "the schedule's bound sizes (a dict or None)", Opt[dict[str, int]], True

    def schema(self) -> dict[str, Any]:
        return {"anyOf": [{"type": "object"}, {"type": "null"}]}

    def hint(self, site: Site) -> str:
        return "bind sizes in tc.schedule(kernel, ...)"
