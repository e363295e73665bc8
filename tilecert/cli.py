"""The ``tilecert`` command line: ``demo``, ``ir``, ``emit``, ``diff``, ``fuzz`` and ``check``.

Exit status 0 only when everything asked for matched.
"""
from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from pathlib import Path
from types import ModuleType

import numpy as np

import tilecert as tc
from tilecert.backends import resolve
from tilecert.lowering import format_lowered, lower

REPO = Path(__file__).resolve().parents[1]


def load_module(path: Path) -> ModuleType:
    """Import a Python file by path (an example, or a user's kernel file)."""
    if not path.is_file():
        raise tc.TilecertError(f"no such file: {path}", hint="give the path of a Python file that defines kernels")
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module
    spec.loader.exec_module(module)
    return module


def cmd_demo(args: argparse.Namespace) -> int:
    gemm = load_module(REPO / "examples" / "gemm.py").gemm
    program = tc.capture(gemm)
    print(tc.format_program(program))
    rng = np.random.default_rng(args.seed)
    m, k, n = args.size
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    ok = True
    for checked in (True, False):
        t0 = time.perf_counter()
        out = tc.run(gemm, A=a, B=b, C=np.zeros((m, n), np.float32), checked=checked)
        dt = time.perf_counter() - t0
        ref = a.astype(np.float64) @ b.astype(np.float64)
        err = float(np.abs(out["C"] - ref).max() / max(1.0, np.abs(ref).max()))
        match = err < 1e-5
        ok &= match
        mode = "checked" if checked else "unchecked"
        print(f"\ngemm {m}x{k}x{n} ({mode}, {dt * 1e3:.1f} ms): max relative error vs numpy float64 {err:.2e}"
              f" -> {'MATCH' if match else 'MISMATCH'}")
    print(f"digest {tc.digest(program)[:16]}, JSON round trip {'ok' if tc.load(tc.dump(program)) == program else 'BROKEN'}")
    return 0 if ok else 1


def cmd_ir(args: argparse.Namespace) -> int:
    module = load_module(Path(args.file))
    kernels = {name: obj for name, obj in vars(module).items() if isinstance(obj, tc.Kernel)}
    if args.kernel:
        if args.kernel not in kernels:
            raise tc.TilecertError(f"no kernel {args.kernel!r} in {args.file}", hint=f"kernels: {sorted(kernels)}")
        kernels = {args.kernel: kernels[args.kernel]}
    for k in kernels.values():
        program = tc.capture(k)
        print(tc.dump(program) if args.json else tc.format_program(program))
    return 0


def parse_sizes(items: list[str]) -> dict[str, int]:
    sizes = {}
    for item in items or []:
        name, _, value = item.partition("=")
        if not value.lstrip("-").isdigit():
            raise tc.TilecertError(f"--size {item!r} is not NAME=INT", hint="e.g. --size M=64")
        sizes[name] = int(value)
    return sizes


def targets_in(args: argparse.Namespace) -> list:
    """The kernels (as schedules when sizes are given) and schedules a Python file defines."""
    module = load_module(Path(args.file))
    found = {name: obj for name, obj in vars(module).items() if isinstance(obj, (tc.Kernel, tc.Schedule))}
    if args.kernel:
        if args.kernel not in found:
            raise tc.TilecertError(f"no kernel or schedule {args.kernel!r} in {args.file}",
                                   hint=f"found: {sorted(found)}")
        found = {args.kernel: found[args.kernel]}
    sizes = parse_sizes(args.size)
    return [tc.schedule(obj, **sizes) if isinstance(obj, tc.Kernel) and sizes else obj for obj in found.values()]


def cmd_emit(args: argparse.Namespace) -> int:
    for obj in targets_in(args):
        if args.lowered:
            program, sizes = resolve(obj, {})
            print(format_lowered(lower(program, sizes)))
        else:
            print(tc.emit(obj, target=args.target))
    return 0


def cmd_diff(args: argparse.Namespace) -> int:
    from tilecert.backends.fuzz import FuzzCase, replay
    from tilecert.strategies import kernel_from_source
    if args.file.endswith(".json"):
        case = FuzzCase.from_json(Path(args.file).read_text())
        check = lambda s, **kw: tc.differential(s, target=args.target, sanitize=args.sanitize, **kw)  # noqa: E731
        reports = [replay(case, kernel_from_source, check, trials=args.trials)]
    else:
        reports = [tc.differential(obj, target=args.target, trials=args.trials, seed=args.seed,
                                   sanitize=args.sanitize) for obj in targets_in(args)]
    for report in reports:
        print(("MATCH     " if report.matched else "MISMATCH  ") + str(report))
        for trial in report.trials if args.verbose else ():
            print(f"  {trial}")
    return 0 if all(r.matched for r in reports) else 1


def cmd_check(args: argparse.Namespace) -> int:
    """Check every schedule in the file, and every kernel no schedule there covers; 0 only if all is proved."""
    found = targets_in(args)
    if not found:
        raise tc.TilecertError(f"no kernel or schedule in {args.file}", hint="define a @tc.kernel or a tc.schedule(...)")
    covered = {id(obj.kernel) for obj in found if isinstance(obj, tc.Schedule)}
    ok = True
    for obj in found:
        if isinstance(obj, tc.Kernel) and id(obj) in covered:
            continue
        report = tc.check(obj, timeout_ms=args.timeout_ms, replay=not args.no_replay)
        print(report.explain())
        ok = ok and report.ok
    return 0 if ok else 1


def cmd_fuzz(args: argparse.Namespace) -> int:
    from tilecert import strategies
    from tilecert.backends.fuzz import campaign, fuzz_cases, replay
    counts: dict[str, int] = {}
    t0 = time.perf_counter()

    def run(case):
        check = lambda s, **kw: tc.differential(s, target=args.target, **kw)  # noqa: E731
        return replay(case, strategies.kernel_from_source, check, trials=args.trials)

    def on_result(done, case, report, path):
        outcome = "failed" if report.failed else ("matched" if report.matched else report.trials[0].outcome
                                                  if len(report.trials) == 1 else "invalid")
        counts[outcome] = counts.get(outcome, 0) + 1
        summary = ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
        print(f"\r[{done}/{args.cases}] {summary} ({time.perf_counter() - t0:.0f} s)", end="", flush=True)
        if path is not None:
            print(f"\n  failing case written to {path}: {report.first_failure}")

    campaign(fuzz_cases(strategies.kernels(), strategies.schedules, args.max_ops), args.cases, args.seed, run,
             Path(args.out), on_result)
    print()
    return 1 if counts.get("failed") else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tilecert", description=__doc__)
    sub = parser.add_subparsers(dest="cmd", required=True)
    demo = sub.add_parser("demo", help="capture, print and run the GEMM example against numpy")
    demo.add_argument("--size", type=int, nargs=3, default=(50, 37, 29), metavar=("M", "K", "N"))
    demo.add_argument("--seed", type=int, default=0)
    ir_cmd = sub.add_parser("ir", help="print the IR of the kernels in a Python file")
    ir_cmd.add_argument("file")
    ir_cmd.add_argument("--kernel")
    ir_cmd.add_argument("--json", action="store_true", help="print the JSON form")
    for name, help_text in (("emit", "print the C source of the kernels in a Python file"),
                            ("diff", "compare the interpreter with compiled code on random inputs")):
        cmd = sub.add_parser(name, help=help_text)
        cmd.add_argument("file", help="a Python file defining kernels or schedules" +
                         (", or a fuzz case .json" if name == "diff" else ""))
        cmd.add_argument("--target", default="c")
        cmd.add_argument("--kernel", help="only this kernel or schedule")
        cmd.add_argument("--size", action="append", metavar="NAME=INT", help="bind a size (repeatable)")
        if name == "emit":
            cmd.add_argument("--lowered", action="store_true", help="print the lowered loop program instead")
        else:
            cmd.add_argument("--trials", type=int, default=10)
            cmd.add_argument("--seed", type=int, default=0)
            cmd.add_argument("--sanitize", action="store_true", help="build with ASan and UBSan")
            cmd.add_argument("--verbose", "-v", action="store_true", help="print every trial")
    check_cmd = sub.add_parser("check", help="prove the obligations of the kernels and schedules in a Python file")
    check_cmd.add_argument("file", help="a Python file defining kernels or schedules")
    check_cmd.add_argument("--kernel", help="only this kernel or schedule")
    check_cmd.add_argument("--size", action="append", metavar="NAME=INT", help="bind a size of a kernel (repeatable)")
    check_cmd.add_argument("--timeout-ms", type=int, default=2000, help="z3 timeout per query")
    check_cmd.add_argument("--no-replay", action="store_true", help="do not replay witnesses on the interpreter")
    fuzz = sub.add_parser("fuzz", help="random kernels and schedules, interpreter against compiled code")
    fuzz.add_argument("--target", default="c")
    fuzz.add_argument("--cases", type=int, default=100)
    fuzz.add_argument("--seed", type=int, default=0)
    fuzz.add_argument("--trials", type=int, default=2, help="random inputs per case")
    fuzz.add_argument("--max-ops", type=int, default=4, help="schedule ops per case")
    fuzz.add_argument("--out", default="fuzz-failures", help="where failing cases are written")
    args = parser.parse_args(argv)
    try:
        return {"demo": cmd_demo, "ir": cmd_ir, "emit": cmd_emit, "diff": cmd_diff, "fuzz": cmd_fuzz,
                "check": cmd_check}[args.cmd](args)
    except tc.TilecertError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
