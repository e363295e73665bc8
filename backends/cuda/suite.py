"""``tilecert gpu-suite DIR``: a self-contained folder that takes CUDA kernels to a GPU machine.

For each case, ``DIR/<case>/`` holds ``kernel.cu`` (the validated emitted source with the
C backend's file-protocol ``main``), ``inputs/t<k>.npy`` (tensor ``k`` in argument order,
random contents drawn like the differential harness's), ``expected/t<k>.npy`` (the
interpreter's outputs, checked mode), ``bounds/t<k>.npy`` (the differential oracle's bound of
each element: 0 bitwise, inf unbounded) and ``case.json`` (the tensors in argument order with
their names, dtypes, the size values). No user name becomes a path: files
are numbered, and a case whose name is not ``[A-Za-z0-9_]+`` (under ``demos/`` for the
demos) is written to ``case-<k>`` (``k``: its position in the suite). ``DIR/run.py``
(``suite_runner.py``; python3 + numpy + nvcc + the CUDA runtime) builds and runs them; ``DIR/README.md`` says how, and how to run compute-sanitizer.
``DIR/demos/`` holds the racy and divergent variants of the shared-memory programs, which
``run.py --demos`` runs under the compute-sanitizer tool that must report them.

Cases: the shared-memory programs of ``cases`` (``ok`` variants) at sizes that give several
blocks and partial tiles, and the given kernels with ``cases.gpu_schedule``, their symbolic
sizes drawn in ``[5, 30]`` (redrawn when the interpreter rejects the inputs).

Each case passes the gate first (``checker/gate.py``: its schedule, or else its program, is
checked; ``UnprovedScheduleError`` unless proved or ``allow_unproved``); each ``kernel.cu``
starts with the verdicts and a ``NOT PROVED`` line per open obligation. A demo is buggy on
purpose: it always goes through, marked.
"""
from __future__ import annotations

import json
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Collection, Iterable, Mapping, Optional

import numpy as np

from tilecert.checker.gate import require
from tilecert.lowering import ValidationError, validate
from tilecert.semantics import ir
from tilecert.semantics.errors import ExecutionError, InputError
from tilecert.semantics.inputs import prepare_inputs
from tilecert.semantics.kernel import Kernel
from tilecert.semantics.loopinterp import interpret_loops
from tilecert.semantics.sched import Schedule

from ..c.emit import standalone_main
from ..oracle import draw_inputs, oracle_for
from . import cases as gpu_cases
from . import lowered

SIZE_RANGE = (5, 30)
REDRAWS = 8
PROGRAM_SIZES = {"tree_reduction": {"N": 203, "G": 27}, "shared_transpose": {"M": 37, "N": 29},
                 "halo_stencil": {"N": 203}, "warp_reduction": {"N": 300, "W": 11}}
DEMO_TOOLS = {"racy": "racecheck", "divergent": "synccheck"}
FOLDER_NAME = re.compile(r"(demos/)?[A-Za-z0-9_]+")


@dataclass(frozen=True)
class SuiteCase:
    name: str
    program: ir.Program
    bound: Mapping[str, int] = field(default_factory=dict)  # sizes compiled into the kernel
    sizes: Mapping[str, int] = field(default_factory=dict)  # values of the others (drawn when missing)
    demo: str = ""  # a compute-sanitizer tool that must report the case (no expected outputs)
    schedule: Optional[Schedule] = None  # what the program was scheduled from (checked instead of the program)


def case_names(kernels: Mapping[str, Kernel]) -> list[str]:
    """The names of the default cases, in suite order."""
    return list(gpu_cases.PROGRAMS) + sorted(kernels) + [f"demos/{name}_{variant}" for name in gpu_cases.PROGRAMS
                                                          for variant in DEMO_TOOLS]


def default_cases(kernels: Mapping[str, Kernel], only: Optional[Collection[str]] = None) -> list[SuiteCase]:
    """The shared-memory programs and ``kernels`` with their GPU schedules (see the module doc), or
    the cases named in ``only``."""
    names = case_names(kernels)
    unknown = sorted(set(only or ()) - set(names))
    if unknown:
        raise InputError(f"no gpu-suite case {', '.join(unknown)}", hint=f"cases: {', '.join(names)}")
    out = []
    for name in names:
        if only is not None and name not in only:
            continue
        program, variant = (name[len("demos/"):].rsplit("_", 1) + [""])[:2] if name.startswith("demos/") \
            else (name, "ok")
        if program in gpu_cases.PROGRAMS:
            demo = DEMO_TOOLS.get(variant, "")
            out.append(SuiteCase(name, gpu_cases.PROGRAMS[program](variant), sizes=PROGRAM_SIZES[program], demo=demo))
        else:
            s = gpu_cases.gpu_schedule(kernels[name])
            out.append(SuiteCase(name, s.program, bound=dict(s.sizes), schedule=s))
    return out


def write_suite(folder: Path, suite: Iterable[SuiteCase], seed: int = 0, allow_unproved: bool = False) -> list[str]:
    """Write the suite into ``folder`` (created); the folders of the cases written, in order. Every case is gated
    (see the module doc)."""
    folder.mkdir(parents=True, exist_ok=True)
    names: list[str] = []
    for k, case in enumerate(suite):
        name = case.name if FOLDER_NAME.fullmatch(case.name) else f"case-{k}"
        write_case(folder / name, case, np.random.default_rng([seed, k]), allow_unproved)
        names.append(name)
    shutil.copyfile(Path(__file__).with_name("suite_runner.py"), folder / "run.py")
    (folder / "cases.json").write_text(json.dumps([n for n in names if not n.startswith("demos/")], indent=1))
    (folder / "demos.json").write_text(json.dumps([n for n in names if n.startswith("demos/")], indent=1))
    (folder / "README.md").write_text(README)
    return names


def write_case(folder: Path, case: SuiteCase, rng: np.random.Generator, allow_unproved: bool = False) -> None:
    """Draw the case's sizes and inputs, check it at those sizes (the gate), write its files."""
    p = case.program
    for _ in range(REDRAWS):
        sizes = {s: int(case.bound.get(s, case.sizes.get(s, rng.integers(*SIZE_RANGE, endpoint=True))))
                 for s in p.sizes}
        arrays = draw_inputs(rng, p, sizes, edge=False)
        expected = None if case.demo else _interpret(p, arrays, sizes)
        if case.demo or expected is not None:
            break
    else:
        raise ExecutionError(f"the interpreter rejects {REDRAWS} random inputs of {case.name}", p.loc,
                             "give the case sizes on which the program has a meaning")
    proof = require(case.schedule or p, sizes, allow_unproved=allow_unproved or bool(case.demo),
                    action=f"gpu-suite case {case.name}")
    low, source = lowered(p, case.bound, proof)
    lp = low.lowered
    check = validate(low.program, low.lowered, sizes)
    if not check.ok:
        raise ValidationError(check, f"kernel {case.name} with sizes {sizes}")
    for sub in ("inputs", "expected", "bounds"):
        (folder / sub).mkdir(parents=True, exist_ok=True)
    (folder / "kernel.cu").write_text(source + "\n" + standalone_main(lp))
    oracle = None if expected is None else oracle_for(p, sizes, arrays)
    for k, t in enumerate(lp.tensors):
        np.save(folder / "inputs" / f"t{k}.npy", arrays[t.name])
        if oracle is not None and t.written:
            np.save(folder / "expected" / f"t{k}.npy", expected[t.name])
            np.save(folder / "bounds" / f"t{k}.npy", oracle.bounds[t.name])
    spec = {"kernel": p.name, "sizes": [sizes[s] for s in lp.sizes], "size_names": list(lp.sizes),
            "tensors": [{"name": t.name, "dtype": t.dtype, "written": t.written} for t in lp.tensors]}
    if case.demo:
        spec["demo"] = case.demo
    (folder / "case.json").write_text(json.dumps(spec, indent=1))


def _interpret(p: ir.Program, arrays: Mapping[str, np.ndarray], sizes: Mapping[str, int]):
    try:
        data, bound = prepare_inputs(p, {name: a.copy() for name, a in arrays.items()})
        interpret_loops(p, {**bound, **sizes}, data, checked=True)
    except ExecutionError:
        return None
    return {name: data[name] for name in p.outputs}


README = """# tilecert GPU suite

Kernels emitted by tilecert's CUDA backend, each with random inputs and the outputs of the
reference interpreter. Running them on a GPU checks the emitted CUDA against the
interpreter on real hardware.

Requirements: an NVIDIA GPU with its driver, the CUDA toolkit (`nvcc`, and
`compute-sanitizer` for the sanitizer runs), python3 with numpy. Nothing of tilecert.

    python3 run.py                          # build (nvcc -O2 -arch=native) and run every case
    python3 run.py --arch sm_90 gemm        # some cases, for a given architecture

One line per case, `PASS name` or `FAIL name: <first difference or error>`, then
`N passed, N failed`; the exit status is 0 only when all passed. Each element is compared
by its bound in `bounds/<tensor>.npy`: 0 means bitwise (any NaN matches any NaN), inf means
any value is admitted, otherwise NaN must match NaN, an infinity the same infinity, and a
finite value lie within the bound of the expected one.

## compute-sanitizer

    python3 run.py --sanitizer racecheck    # shared-memory races: every case must stay clean
    python3 run.py --sanitizer synccheck    # barrier misuse (divergent __syncthreads / __syncwarp)
    python3 run.py --sanitizer memcheck     # out-of-bounds and misaligned accesses

run each case under `compute-sanitizer --tool=<tool> --error-exitcode=99`; a report fails
the case. `demos/` holds variants with a bug on purpose: `*_racy` leave out a barrier
(racecheck must report a hazard), `*_divergent` put one under a thread-dependent guard
(synccheck must report it). `python3 run.py --demos` runs each under its tool and passes
when the tool reports the bug. By hand, for one case:

    nvcc -O2 -arch=native -lineinfo -o k demos/tree_reduction_racy/kernel.cu
    mkdir -p io && python3 -c "import json, numpy as np; d='demos/tree_reduction_racy'; \\
      s=json.load(open(d+'/case.json')); np.asarray(s['sizes'], np.int64).tofile('io/sizes'); \\
      [np.load(f'{d}/inputs/t{k}.npy').tofile(f'io/t{k}') for k in range(len(s['tensors']))]"
    compute-sanitizer --tool racecheck ./k io

Each `kernel.cu` reads `DIR/sizes` (int64 values, `case.json` `size_names` order) and
`DIR/t<k>` (raw tensor k in argument order), runs the launcher and writes the written
tensors back and the error flag to `DIR/err`.
"""
