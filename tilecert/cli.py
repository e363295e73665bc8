"""The ``tilecert`` command line: ``demo``, ``ir``, ``emit``, ``diff``, ``fuzz``, ``check``, ``explain`` and
``gpu-suite``.

Exit status 0 only when everything asked for was proved and matched; 1 when something was not
(``emit`` / ``diff`` / ``gpu-suite`` of an unproved schedule without ``--allow-unproved``, a
disproved obligation, a mismatch, or a report that is not a certificate); 2 for a usage or input
error. Every failure is rendered by ``report_error`` as ``error: FILE:LINE: message`` and
``hint: ...`` (a traceback only with ``--traceback``).
"""
from __future__ import annotations

import argparse
import hashlib
import importlib.util
import os
import re
import sys
import traceback
from pathlib import Path
from types import ModuleType, TracebackType
from typing import Any, Callable, NoReturn, Optional

import tilecert as tc
from tilecert.backends import TARGETS, resolve, subject
from tilecert.checker.gate import require
from tilecert.lowering import format_lowered
from tilecert.lowering.pipeline import lower_for
from tilecert.progress import FuzzView, check_all, diff_all, name_of
from tilecert.semantics.errors import InputError, Loc
from tilecert.semantics.jsondata import INT64

REPO = Path(__file__).resolve().parents[1]
COMMAND_LINE = Loc("<command line>", 0)
PACKAGE_DIRS = tuple(str(REPO / d) + os.sep for d in ("semantics", "tilecert", "checker", "lowering", "backends"))
EXAMPLE_DIRS = (str(REPO / "examples") + os.sep, str(REPO / "tilecert" / "examples") + os.sep)  # users' code, installed or not
DEMO_N = (4, 256)


class UsageError(InputError):
    """A command line that cannot run: an unknown option, an argument out of range, a file of the wrong kind."""


class ArgumentParser(argparse.ArgumentParser):
    """argparse whose usage errors are ``UsageError`` (one line and a hint, exit 2), not usage text."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(message, COMMAND_LINE, f"see `{self.prog} --help`")


def int_arg(low: int, high: int = INT64[1]) -> Callable[[str], int]:
    """An argparse type: an int written in ASCII digits, in ``[low, high]``."""
    def parse(text: str) -> int:
        if not re.fullmatch(r"[+-]?[0-9]+", text) or not low <= int(text) <= high:
            raise argparse.ArgumentTypeError(f"{text!r} is not an int in [{low}, {high}]")
        return int(text)
    return parse


def size_arg(text: str) -> tuple[str, int]:
    """An argparse type: ``NAME=INT``, NAME an identifier, INT in [0, 2**63 - 1]."""
    name, eq, value = text.partition("=")
    if not (eq and name.isidentifier() and re.fullmatch(r"[0-9]+", value) and int(value) <= INT64[1]):
        raise argparse.ArgumentTypeError(f"{text!r} is not NAME=INT with INT in [0, {INT64[1]}] (e.g. M=64)")
    return name, int(value)


def existing_file(path: Path, what: str, suffixes: tuple[str, ...] = (".py",)) -> Path:
    """``path``, if it names a file with one of ``suffixes``; else a ``UsageError`` asking for ``what``."""
    if not path.is_file():
        raise UsageError(f"no such file: {path}", COMMAND_LINE, f"give the path of {what}")
    if path.suffix not in suffixes:
        raise UsageError(f"{path} is not a {' or '.join(suffixes)} file", Loc(str(path), 0), f"give {what}")
    return path


def user_loc(tb: Optional[TracebackType], path: Path) -> Loc:
    """The innermost frame of ``tb`` in the user's file ``path`` (else the file itself, line 0)."""
    target = os.path.abspath(path)
    lines = [t.tb_lineno for t in _walk(tb) if os.path.abspath(t.tb_frame.f_code.co_filename) == target]
    return Loc(str(path), lines[-1] if lines else 0)


def load_module(path: Path) -> ModuleType:
    """Import a Python file by path, under a private module name (a file named ``numpy.py`` or
    ``tilecert.py`` shadows nothing) and without putting its folder on ``sys.path``. A file that does not
    parse, raises or exits while it loads is a ``UsageError`` located in it."""
    existing_file(path, "a Python file that defines kernels")
    name = f"tilecert_user_{hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:12]}"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except tc.TilecertError:
        raise
    except SyntaxError as exc:
        raise UsageError(f"does not parse: {exc.msg}", Loc(str(path), exc.lineno or 0),
                         "fix the syntax error") from exc
    except SystemExit as exc:
        raise UsageError(f"called sys.exit({exc.code!r}) while loading", user_loc(exc.__traceback__, path),
                         "a kernel file defines kernels; do not exit while it is imported") from exc
    except ImportError as exc:
        raise UsageError(f"failed to import: {type(exc).__name__}: {exc}", user_loc(exc.__traceback__, path),
                         "install the module it imports, or fix the import") from exc
    except Exception as exc:
        raise UsageError(f"raised {type(exc).__name__} while loading: {exc}", user_loc(exc.__traceback__, path),
                         "fix the error in the file (run it with python to see the traceback)") from exc
    return module


def definitions(args: argparse.Namespace, kinds: tuple[type, ...]) -> dict[str, Any]:
    """The objects of ``kinds`` the user's file defines (only ``--kernel`` when given); an error if none."""
    path = Path(args.file)
    module = load_module(path)
    found = {name: obj for name, obj in vars(module).items() if isinstance(obj, kinds)}
    what = " or ".join("kernel" if k is tc.Kernel else "schedule" for k in kinds)
    if args.kernel is not None:
        if args.kernel not in found:
            raise UsageError(f"no {what} {args.kernel!r} in {path}", Loc(str(path), 0),
                             f"found: {', '.join(sorted(found)) or 'none'}")
        found = {args.kernel: found[args.kernel]}
    if not found:
        raise UsageError(f"{path} defines no {what}", Loc(str(path), 0),
                         "define a @tc.kernel" + (" or a tc.schedule(...)" if tc.Schedule in kinds else ""))
    return found


def targets_in(args: argparse.Namespace) -> list:
    """The kernels (as schedules when sizes are given) and schedules a Python file defines."""
    return list(named_targets(args).values())


def named_targets(args: argparse.Namespace) -> dict[str, Any]:
    """``targets_in``, by the names the file binds them to."""
    found = definitions(args, (tc.Kernel, tc.Schedule))
    sizes = dict(args.size or [])
    for name, value in args.size or []:
        if sizes[name] != value:
            raise UsageError(f"--size {name} is given twice, as {value} and {sizes[name]}", COMMAND_LINE,
                             "give each size once")
    return {name: tc.schedule(obj, **sizes) if isinstance(obj, tc.Kernel) and sizes else obj
            for name, obj in found.items()}


def cmd_demo(args: argparse.Namespace) -> int:
    from tilecert.demo import run_demo

    return run_demo(args.n, args.seed)


def cmd_ir(args: argparse.Namespace) -> int:
    for k in definitions(args, (tc.Kernel,)).values():
        program = tc.capture(k)
        print(tc.dump(program) if args.json else tc.format_program(program))
    return 0


def cmd_emit(args: argparse.Namespace) -> int:
    """Print each target's source (or lowering); 1 when some was not proved (``--allow-unproved``)."""
    ok = True
    for obj in targets_in(args):
        s = subject(obj, {})
        proof = require(s, allow_unproved=args.allow_unproved, action="emit")
        ok = ok and proof.ok
        if args.lowered:
            print("\n".join(f"# {line}" for line in proof.lines()))
            print(unsupported_as_usage(args.target, lambda: format_lowered(
                lower_for(args.target, *resolve(s, {})).lowered)))
        else:
            print(unsupported_as_usage(args.target, lambda: tc.emit(s, target=args.target,
                                                                    allow_unproved=args.allow_unproved)))
    return 0 if ok else 1


def cmd_diff(args: argparse.Namespace) -> int:
    from tilecert.backends.fuzz import FuzzCase, replay
    from tilecert.strategies import kernel_from_source
    path = Path(args.file)
    if path.suffix == ".json":
        case = FuzzCase.from_json(existing_file(path, "a fuzz case .json", (".json",)).read_bytes(), str(path))
        check = lambda s, **kw: tc.differential(s, target=args.target, sanitize=args.sanitize,  # noqa: E731
                                                allow_unproved=args.allow_unproved, **kw)
        runs = {f"{case.kernel}/{path.name}": lambda **kw: unsupported_as_usage(args.target, lambda: replay(
            case, lambda s, **more: check(s, **kw, **more), trials=args.trials,
            load_source=kernel_from_source if args.trust_source else None, file=str(path)))}
    else:
        runs = {name_of(name, obj): lambda obj=obj, **kw: unsupported_as_usage(args.target, lambda: tc.differential(
            obj, target=args.target, trials=args.trials, seed=args.seed, sanitize=args.sanitize,
            allow_unproved=args.allow_unproved, **kw))
            for name, obj in named_targets(args).items()}
    return 0 if diff_all(runs, args.trials, verbose=args.verbose, as_json=args.json) else 1


def unsupported_as_usage(target: str, run: Callable[[], Any]) -> Any:
    """``run()``; a construct the target refuses is an error that says ``unsupported`` (exit 2), not a mismatch."""
    from tilecert.backends.fuzz import UNSUPPORTED
    try:
        return run()
    except UNSUPPORTED as exc:
        raise UsageError(f"unsupported by target {target}: {exc.message}", exc.loc, exc.hint) from exc


def cmd_check(args: argparse.Namespace) -> int:
    """Check every schedule in the file, and every kernel no schedule there covers; 0 only if all is proved."""
    ok = check_all(uncovered(named_targets(args)), timeout_ms=args.timeout_ms, replay=not args.no_replay,
                   verbose=args.verbose, as_json=args.json)
    return 0 if ok else 1


def uncovered(found: dict[str, Any]) -> dict[str, Any]:
    """The schedules of ``found``, and the kernels no schedule there covers."""
    covered = {id(obj.kernel) for obj in found.values() if isinstance(obj, tc.Schedule)}
    return {name: obj for name, obj in found.items() if not (isinstance(obj, tc.Kernel) and id(obj) in covered)}


def cmd_explain(args: argparse.Namespace) -> int:
    """Each schedule's ops and verdicts as text, or (``--html``) one self-contained page; 1 unless all is proved."""
    from tilecert import report_html
    found = uncovered(named_targets(args))
    if args.html is None:
        ok = True
        for name, obj in found.items():
            print(f"== {name_of(name, obj)}")
            if isinstance(obj, tc.Schedule):
                print(obj.explain())
            report = tc.check(obj, timeout_ms=args.timeout_ms)
            print(report.explain())
            ok = ok and report.ok
        return 0 if ok else 1
    out = Path(args.html)
    if out.suffix not in (".html", ".htm"):
        raise UsageError(f"--html {out} does not end in .html", COMMAND_LINE, "give a path such as report.html")
    writable_folder(out.parent, "--html", create=False)
    ok = report_html.write(out, found, Path(args.file).name, target=args.target, timeout_ms=args.timeout_ms)
    print(f"wrote {out}: {'every schedule proved' if ok else 'NOT OK: some schedule is not proved'}")
    return 0 if ok else 1


def cmd_fuzz(args: argparse.Namespace) -> int:
    """A campaign: 1 if a case failed; an error if no case could be compared (all unsupported or invalid)."""
    from tilecert import strategies
    from tilecert.backends.campaigns import DifferentialRun, executor_for
    from tilecert.backends.fuzz import campaign, fuzz_cases
    out = writable_folder(Path(args.out), "--out", create=False)
    context, where = executor_for(args.workers, args.scheduler)
    with context as executor:
        if not args.json:
            print(f"fuzz: {args.cases} cases {where}")
        with FuzzView(args.cases, verbose=args.verbose, as_json=args.json) as view:  # timed from here
            campaign(fuzz_cases(strategies.kernels(), strategies.schedules, args.max_ops), args.cases, args.seed,
                     DifferentialRun(args.target, args.trials, args.allow_unproved), out, view.case, executor)
    view.finish()
    counts = view.counts
    if counts.get("failed"):
        return 1
    if not counts.get("matched"):
        reason = f"{counts.get('unsupported', 0)} of {args.cases} cases unsupported by {args.target}"
        raise UsageError(f"no case was compared: {reason}" +
                         (f" (first: {view.first_unsupported})" if view.first_unsupported else ""), COMMAND_LINE,
                         "nothing was checked; use a target that supports these kernels (e.g. --target c)")
    return 0


def writable_folder(folder: Path, what: str, create: bool = True) -> Path:
    """``folder``, an existing or creatable folder we may write into; a ``UsageError`` otherwise."""
    if folder.exists() and not folder.is_dir():
        raise UsageError(f"{what} {folder} is a file, not a folder", COMMAND_LINE, "give a folder path")
    probe = folder
    while not probe.exists():
        probe = probe.parent
    if not (probe.is_dir() and os.access(probe, os.W_OK | os.X_OK)):
        raise UsageError(f"{what} {folder}: {probe} is not a writable folder", COMMAND_LINE,
                         "give a folder you can write into")
    if create:
        folder.mkdir(parents=True, exist_ok=True)
    return folder


def example_kernels() -> dict[str, tc.Kernel]:
    """The kernels of the examples registry (the package ``tilecert.examples``, ``examples/`` in the repository)."""
    return {name: entry.kernel for name, entry in importlib.import_module("tilecert.examples").EXAMPLES.items()}


def cmd_gpu_suite(args: argparse.Namespace) -> int:
    from tilecert.backends.cuda.suite import default_cases, write_suite
    folder = writable_folder(Path(args.dir), "gpu-suite")
    names = write_suite(folder, default_cases(example_kernels(), args.case), seed=args.seed,
                        allow_unproved=args.allow_unproved)
    print(f"wrote {len(names)} cases to {folder}: {', '.join(names)}")
    print(f"on a machine with a GPU, nvcc and numpy: python3 {folder / 'run.py'}  (see {folder / 'README.md'})")
    return 0


def views(cmd: argparse.ArgumentParser, every: str) -> None:
    """The ``--verbose`` and ``--json`` options of a command that reports verdicts (``progress.py``)."""
    cmd.add_argument("--verbose", "-v", action="store_true", help=f"print {every}")
    cmd.add_argument("--json", action="store_true", help="print one JSON document (for CI) instead of text")


UNPROVED_HELP = "go on when the checker does not prove every obligation (the output is marked NOT PROVED)"


def build_parser() -> ArgumentParser:
    parser = ArgumentParser(prog="tilecert", description=__doc__)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--traceback", action="store_true", default=argparse.SUPPRESS,
                        help="print the Python traceback of an error")
    parser.add_argument("--traceback", action="store_true", help="print the Python traceback of an error")
    sub = parser.add_subparsers(dest="cmd", required=True)

    def command(name: str, help_text: str) -> ArgumentParser:
        return sub.add_parser(name, help=help_text, parents=[common])

    positive, natural = int_arg(1), int_arg(0)
    demo = command("demo", "the GEMM example end to end: capture, interpret, schedule, check, emit C, "
                           "differential run")
    demo.add_argument("--n", type=int_arg(*DEMO_N), default=64, help="the scheduled GEMM size (n x n x n), "
                      f"{DEMO_N[0]} to {DEMO_N[1]}")
    demo.add_argument("--seed", type=natural, default=0)
    ir_cmd = command("ir", "print the IR of the kernels in a Python file")
    ir_cmd.add_argument("file")
    ir_cmd.add_argument("--kernel")
    ir_cmd.add_argument("--json", action="store_true", help="print the JSON form")
    for name, help_text in (("emit", "print the C or CUDA source (--target) of the kernels in a Python file"),
                            ("diff", "compare the interpreter with compiled code on random inputs")):
        cmd = command(name, help_text)
        cmd.add_argument("file", help="a Python file defining kernels or schedules" +
                         (", or a fuzz case .json" if name == "diff" else ""))
        cmd.add_argument("--target", default="c", choices=TARGETS)
        cmd.add_argument("--kernel", help="only this kernel or schedule")
        cmd.add_argument("--size", action="append", type=size_arg, metavar="NAME=INT", help="bind a size (repeatable)")
        cmd.add_argument("--allow-unproved", action="store_true", help=UNPROVED_HELP)
        if name == "emit":
            cmd.add_argument("--lowered", action="store_true", help="print the lowered loop program instead")
        else:
            cmd.add_argument("--trials", type=positive, default=10)
            cmd.add_argument("--seed", type=natural, default=0)
            cmd.add_argument("--sanitize", action="store_true",
                             help="build with sanitizers (c: ASan and UBSan; cuda-host: TSan and UBSan)")
            views(cmd, "every trial")
            cmd.add_argument("--trust-source", action="store_true",
                             help="replay a fuzz case file that carries Python source (runs that code)")
    check_cmd = command("check", "prove the obligations of the kernels and schedules in a Python file")
    check_cmd.add_argument("file", help="a Python file defining kernels or schedules")
    check_cmd.add_argument("--kernel", help="only this kernel or schedule")
    check_cmd.add_argument("--size", action="append", type=size_arg, metavar="NAME=INT",
                           help="bind a size of a kernel (repeatable)")
    check_cmd.add_argument("--timeout-ms", type=positive, default=2000, help="z3 timeout per query")
    check_cmd.add_argument("--no-replay", action="store_true", help="do not replay witnesses on the interpreter")
    views(check_cmd, "every obligation (default: those not proved)")
    explain = command("explain", "show each schedule's ops, obligations, witnesses and code (--html: one page)")
    explain.add_argument("file", help="a Python file defining kernels or schedules")
    explain.add_argument("--kernel", help="only this kernel or schedule")
    explain.add_argument("--size", action="append", type=size_arg, metavar="NAME=INT",
                         help="bind a size of a kernel (repeatable)")
    explain.add_argument("--html", metavar="OUT.html", help="write one self-contained HTML page there")
    explain.add_argument("--target", default="c", choices=TARGETS, help="the code shown")
    explain.add_argument("--timeout-ms", type=positive, default=2000, help="z3 timeout per query")
    fuzz = command("fuzz", "random kernels and schedules, interpreter against compiled code")
    fuzz.add_argument("--target", default="c", choices=TARGETS)
    fuzz.add_argument("--cases", type=positive, default=100)
    fuzz.add_argument("--seed", type=natural, default=0)
    fuzz.add_argument("--trials", type=positive, default=2, help="random inputs per case")
    fuzz.add_argument("--max-ops", type=natural, default=4, help="schedule ops per case")
    fuzz.add_argument("--out", default="fuzz-failures", help="where failing cases are written")
    fuzz.add_argument("--workers", type=natural, default=2, help="local dask worker processes (0: run the cases "
                      "in this process)")
    fuzz.add_argument("--scheduler", metavar="tcp://HOST:PORT", help="run the cases on this running dask cluster")
    fuzz.add_argument("--allow-unproved", action="store_true", help="also compare the cases the checker does not "
                      "prove (else they count as unproved and are not run)")
    views(fuzz, "every case (default: the failing ones)")
    suite = command("gpu-suite", "write CUDA kernels, inputs and expected outputs for a GPU machine")
    suite.add_argument("dir", help="the folder to write (created)")
    suite.add_argument("--seed", type=natural, default=0)
    suite.add_argument("--case", action="append", metavar="NAME", help="only this case (repeatable)")
    suite.add_argument("--allow-unproved", action="store_true", help=UNPROVED_HELP)
    return parser


COMMANDS = {"demo": cmd_demo, "ir": cmd_ir, "emit": cmd_emit, "diff": cmd_diff, "fuzz": cmd_fuzz,
            "check": cmd_check, "explain": cmd_explain, "gpu-suite": cmd_gpu_suite}


def main(argv: list[str] | None = None) -> int:
    """Run one command; every failure is rendered by ``report_error`` (exit 2, or the error's ``exit_status``)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    outside = {os.path.abspath(f.f_code.co_filename) for f in _frames(sys._getframe(1))}
    try:
        args = build_parser().parse_args(argv)  # --help exits 0 here, and only here
    except UsageError as exc:
        return report_error(exc, None, outside, "--traceback" in argv)
    user_file: Optional[str] = getattr(args, "file", None)
    try:
        return COMMANDS[args.cmd](args)
    except (Exception, SystemExit) as exc:  # noqa: BLE001 -- every failure becomes one located line
        return report_error(exc, user_file, outside, "--traceback" in argv)  # a user's exit(0) is no pass


def _frames(frame: Any) -> list[Any]:
    out = []
    while frame is not None:
        out.append(frame)
        frame = frame.f_back
    return out


def report_error(exc: BaseException, user_file: Optional[str], outside: set[str], show_traceback: bool) -> int:
    """Print ``error: FILE:LINE: message`` and ``hint: ...`` on stderr; the exit status.

    A ``TilecertError`` keeps its location when it points into the user's code; a location in tilecert's
    own packages or in a file that was on the stack when ``main`` started (the installed ``tilecert``
    script, a test harness) is replaced by the user's file (or ``<command line>``). Another exception
    raised by the user's code (a kernel body, or a library it calls) is located at the innermost
    frame of the user's code; one raised inside tilecert is an internal error. The status is the error's ``exit_status`` attribute when it has
    one (an unproved verdict is 1), else 2.
    """
    if show_traceback:
        traceback.print_exception(exc)
    fallback = COMMAND_LINE if user_file is None else Loc(user_file, 0)
    if isinstance(exc, tc.TilecertError):
        path = os.path.abspath(exc.loc.file)
        ours = exc.loc.file == "<unknown>" or path in outside or _ours(path)
        loc, message, hint = (fallback if ours else exc.loc), exc.message, exc.hint
    elif isinstance(exc, SystemExit):
        loc, message, hint = fallback, f"exit({exc.code!r}) called while running the command", \
            "a kernel must not exit the process"
    elif isinstance(exc, OSError):
        loc, message = fallback, f"{exc.strerror or exc}" + (f": {exc.filename}" if exc.filename else "")
        hint = "check the path and its permissions"
    else:
        frames = [(tb.tb_frame.f_code.co_filename, tb.tb_lineno) for tb in _walk(exc.__traceback__)]
        user = [Loc(f, n) for f, n in frames if _is_user(f, outside)]
        raised_by_us = bool(frames) and _ours(os.path.abspath(frames[-1][0]))
        loc = user[-1] if user else fallback
        if user and not raised_by_us:
            message, hint = f"raised {type(exc).__name__}: {exc}", \
                "fix the error at that line (rerun with --traceback to see the traceback)"
        else:
            message, hint = f"internal error: {type(exc).__name__}: {exc}", "rerun with --traceback and report it"
    print(f"error: {loc}: {_one_line(message)}", file=sys.stderr)
    print(f"hint: {_one_line(hint) or 'see tilecert --help'}", file=sys.stderr)
    return int(getattr(exc, "exit_status", 2))


def _walk(tb: Optional[TracebackType]) -> list[TracebackType]:
    out = []
    while tb is not None:
        out.append(tb)
        tb = tb.tb_next
    return out


LIBRARY_DIRS = tuple({os.path.abspath(p) + os.sep for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)})


def _ours(path: str) -> bool:
    """Whether the absolute ``path`` is tilecert's own code (its example kernels are the user's)."""
    return path.startswith(PACKAGE_DIRS) and not path.startswith(EXAMPLE_DIRS)


def _is_user(file: str, outside: set[str]) -> bool:
    """Whether ``file`` is the user's code: not tilecert's, not an installed library, not the caller of ``main``."""
    path = os.path.abspath(file)
    if file.startswith("<") or path in outside:
        return False
    return path.startswith(EXAMPLE_DIRS) or not (_ours(path) or path.startswith(LIBRARY_DIRS))


def _one_line(text: str) -> str:
    return " ".join(part.strip() for part in str(text).splitlines() if part.strip())


if __name__ == "__main__":
    sys.exit(main())
