"""The ``tilecert`` command line: ``demo`` and ``ir``.

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
    args = parser.parse_args(argv)
    try:
        return {"demo": cmd_demo, "ir": cmd_ir}[args.cmd](args)
    except tc.TilecertError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
