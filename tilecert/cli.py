"""The ``tilecert`` command line: ``demo``, ``ir``, ``emit``, ``diff``, ``fuzz``, ``check`` and ``gpu-suite``.

Exit status 0 only when everything asked for was proved and matched; 1 when something was not
(``emit`` / ``diff`` / ``gpu-suite`` of an unproved schedule without ``--allow-unproved``, a
mismatch, or a report that is not a certificate); 2 for any other error.
"""
from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from pathlib import Path
from types import ModuleType


import tilecert as tc
from tilecert.backends import resolve, subject
from tilecert.checker.gate import require
from tilecert.lowering import format_lowered, lower

REPO = Path(__file__).resolve().parents[1]


def existing_file(path: Path, what: str) -> Path:
    """``path``, if it names a file; else a TilecertError asking for ``what``."""
    if not path.is_file():
        raise tc.TilecertError(f"no such file: {path}", hint=f"give the path of {what}")
    return path


def load_module(path: Path) -> ModuleType:
    """Import a Python file by path (an example, or a user's kernel file)."""
    existing_file(path, "a Python file that defines kernels")
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module
    spec.loader.exec_module(module)
    return module


def cmd_demo(args: argparse.Namespace) -> int:
    from tilecert.demo import run_demo

    return run_demo(args.n, args.seed)


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
    """Print each target's source (or lowering); 1 when some was not proved (``--allow-unproved``)."""
    ok = True
    for obj in targets_in(args):
        s = subject(obj, {})
        proof = require(s, allow_unproved=args.allow_unproved, action="emit")
        ok = ok and proof.ok
        if args.lowered:
            print("\n".join(f"# {line}" for line in proof.lines()))
            print(format_lowered(lower(*resolve(s, {}))))
        else:
            print(tc.emit(s, target=args.target, allow_unproved=args.allow_unproved))
    return 0 if ok else 1


def cmd_diff(args: argparse.Namespace) -> int:
    from tilecert.backends.fuzz import FuzzCase, replay
    from tilecert.strategies import kernel_from_source
    if args.file.endswith(".json"):
        case = FuzzCase.from_json(existing_file(Path(args.file), "a fuzz case .json").read_text())
        check = lambda s, **kw: tc.differential(s, target=args.target, sanitize=args.sanitize,  # noqa: E731
                                                allow_unproved=args.allow_unproved, **kw)
        reports = [replay(case, kernel_from_source, check, trials=args.trials)]
    else:
        reports = [tc.differential(obj, target=args.target, trials=args.trials, seed=args.seed,
                                   sanitize=args.sanitize, allow_unproved=args.allow_unproved)
                   for obj in targets_in(args)]
    for report in reports:
        print(report.label.ljust(10) + str(report))
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
        check = lambda s, **kw: tc.differential(s, target=args.target, allow_unproved=args.allow_unproved,  # noqa: E731
                                                **kw)
        return replay(case, strategies.kernel_from_source, check, trials=args.trials)

    def on_result(done, case, report, path):
        outcome = "failed" if report.failed else "matched" if report.matched else "unproved" if report.agreed \
            else report.trials[0].outcome if len(report.trials) == 1 else "invalid"
        counts[outcome] = counts.get(outcome, 0) + 1
        summary = ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
        print(f"\r[{done}/{args.cases}] {summary} ({time.perf_counter() - t0:.0f} s)", end="", flush=True)
        if path is not None:
            print(f"\n  failing case written to {path}: {report.first_failure}")

    campaign(fuzz_cases(strategies.kernels(), strategies.schedules, args.max_ops), args.cases, args.seed, run,
             Path(args.out), on_result)
    print()
    return 1 if counts.get("failed") else 0


def example_kernels() -> dict[str, tc.Kernel]:
    """The kernels of the examples registry (``examples/__init__.py`` of the repository)."""
    module = sys.modules.get("examples")
    if module is None:
        spec = importlib.util.spec_from_file_location("examples", REPO / "examples" / "__init__.py",
                                                      submodule_search_locations=[str(REPO / "examples")])
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules["examples"] = module
        spec.loader.exec_module(module)
    return {name: entry.kernel for name, entry in module.EXAMPLES.items()}


def cmd_gpu_suite(args: argparse.Namespace) -> int:
    from tilecert.backends.cuda.suite import default_cases, write_suite
    folder = Path(args.dir)
    names = write_suite(folder, default_cases(example_kernels(), args.case), seed=args.seed,
                        allow_unproved=args.allow_unproved)
    print(f"wrote {len(names)} cases to {folder}: {', '.join(names)}")
    print(f"on a machine with a GPU, nvcc and numpy: python3 {folder / 'run.py'}  (see {folder / 'README.md'})")
    return 0


UNPROVED_HELP = "go on when the checker does not prove every obligation (the output is marked NOT PROVED)"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tilecert", description=__doc__)
    sub = parser.add_subparsers(dest="cmd", required=True)
    demo = sub.add_parser("demo", help="the GEMM example end to end: capture, interpret, schedule, check, emit C, "
                                       "differential run")
    demo.add_argument("--n", type=int, default=64, help="the scheduled GEMM size (n x n x n)")
    demo.add_argument("--seed", type=int, default=0)
    ir_cmd = sub.add_parser("ir", help="print the IR of the kernels in a Python file")
    ir_cmd.add_argument("file")
    ir_cmd.add_argument("--kernel")
    ir_cmd.add_argument("--json", action="store_true", help="print the JSON form")
    for name, help_text in (("emit", "print the C or CUDA source (--target) of the kernels in a Python file"),
                            ("diff", "compare the interpreter with compiled code on random inputs")):
        cmd = sub.add_parser(name, help=help_text)
        cmd.add_argument("file", help="a Python file defining kernels or schedules" +
                         (", or a fuzz case .json" if name == "diff" else ""))
        cmd.add_argument("--target", default="c")
        cmd.add_argument("--kernel", help="only this kernel or schedule")
        cmd.add_argument("--size", action="append", metavar="NAME=INT", help="bind a size (repeatable)")
        cmd.add_argument("--allow-unproved", action="store_true", help=UNPROVED_HELP)
        if name == "emit":
            cmd.add_argument("--lowered", action="store_true", help="print the lowered loop program instead")
        else:
            cmd.add_argument("--trials", type=int, default=10)
            cmd.add_argument("--seed", type=int, default=0)
            cmd.add_argument("--sanitize", action="store_true",
                             help="build with sanitizers (c: ASan and UBSan; cuda-host: TSan and UBSan)")
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
    fuzz.add_argument("--allow-unproved", action="store_true", help="also compare the cases the checker does not "
                      "prove (else they count as unproved and are not run)")
    suite = sub.add_parser("gpu-suite", help="write CUDA kernels, inputs and expected outputs for a GPU machine")
    suite.add_argument("dir", help="the folder to write (created)")
    suite.add_argument("--seed", type=int, default=0)
    suite.add_argument("--case", action="append", metavar="NAME", help="only this case (repeatable)")
    suite.add_argument("--allow-unproved", action="store_true", help=UNPROVED_HELP)
    args = parser.parse_args(argv)
    try:
        return {"demo": cmd_demo, "ir": cmd_ir, "emit": cmd_emit, "diff": cmd_diff, "fuzz": cmd_fuzz,
                "check": cmd_check, "gpu-suite": cmd_gpu_suite}[args.cmd](args)
    except tc.TilecertError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1 if isinstance(err, tc.UnprovedScheduleError) else 2


if __name__ == "__main__":
    sys.exit(main())
