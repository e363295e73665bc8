#!/usr/bin/env python3
"""Run a tilecert GPU suite: build each case with nvcc, run it, compare with the interpreter.

Needs only python3 with numpy, nvcc and the CUDA runtime (this file imports nothing of
tilecert). Each case folder holds ``kernel.cu`` (the emitted kernels, their launcher and a
``main`` that reads raw tensors from a folder and writes the outputs back),
``case.json``, ``inputs/*.npy``, the interpreter's ``expected/*.npy`` and the differential
oracle's per-element ``bounds/*.npy``.

    python3 run.py                      # every case, for this machine's GPU (-arch=native)
    python3 run.py --arch sm_90 tree_reduction gemm
    python3 run.py --sanitizer racecheck   # each run under compute-sanitizer --tool racecheck
    python3 run.py --demos              # the racy / divergent variants: the named tool must report them

Prints one line per case (PASS / FAIL with the first difference) and ``N passed, N failed``;
exits 0 only when every case passed. Comparison (the differential oracle's admission rule,
``backends/oracle.py``, restated here so this file stands alone): an element whose bound is 0
compares bitwise (any NaN matches any NaN); one whose bound is inf is admitted; otherwise
NaN matches NaN, an infinity the same infinity, and finite values within the bound.
"""
import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent


def build(case: Path, arch: str, out: Path) -> str:
    """Compile the case; an error text, or '' when it built."""
    cmd = ["nvcc", "-O2", f"-arch={arch}", "-lineinfo", "-o", str(out), str(case / "kernel.cu")]
    res = subprocess.run(cmd, capture_output=True, text=True)
    return "" if res.returncode == 0 else "nvcc failed: " + " | ".join(res.stderr.splitlines()[-5:])


def first_difference(name: str, want: np.ndarray, got: np.ndarray, bound: np.ndarray) -> str:
    both_nan = np.isnan(want) & np.isnan(got) if want.dtype.kind == "f" else np.zeros(want.shape, bool)
    bits = np.dtype(f"u{want.dtype.itemsize}") if want.dtype.kind == "f" else want.dtype
    same = (want.view(bits) == got.view(bits)) | both_nan
    w, g = want.astype(np.float64), got.astype(np.float64)
    with np.errstate(invalid="ignore"):
        near = np.isfinite(w) & np.isfinite(g) & (np.abs(g - w) <= bound)
    ok = np.where(bound == 0, same, near | both_nan | (np.isinf(w) & (w == g)) | np.isinf(bound))
    if ok.all():
        return ""
    where = tuple(int(x) for x in np.argwhere(~ok)[0])
    return f"{ascii(name)[1:-1]}{list(where)}: expected {want[where]!r}, got {got[where]!r} " \
           f"(bound {bound[where]:.3g})"  # one ASCII line


def run_case(case: Path, exe: Path, sanitizer: str) -> str:
    """Run one built case; an error text, or '' when every output matched (for a demo: when its
    compute-sanitizer tool reported the hazard)."""
    spec = json.loads((case / "case.json").read_text())
    sanitizer = spec.get("demo", sanitizer)
    with tempfile.TemporaryDirectory(prefix="tilecert-suite-") as tmp:
        folder = Path(tmp)
        np.asarray(spec["sizes"], np.int64).tofile(folder / "sizes")
        for k in range(len(spec["tensors"])):
            np.load(case / "inputs" / f"t{k}.npy").tofile(folder / f"t{k}")
        cmd = [str(exe), str(folder)]
        if sanitizer:
            cmd = ["compute-sanitizer", f"--tool={sanitizer}", "--error-exitcode=99"] + cmd
        res = subprocess.run(cmd, capture_output=True, text=True)
        if "demo" in spec:
            return "" if res.returncode == 99 else f"compute-sanitizer --tool={sanitizer} reported nothing"
        if res.returncode != 0:
            return f"exit {res.returncode}: " + " | ".join((res.stdout + res.stderr).splitlines()[-6:])
        err = int(np.fromfile(folder / "err", dtype=np.int32)[0])
        if err:
            return f"kernel error flag {err}: " + " | ".join(res.stderr.splitlines()[-3:])
        for k, t in enumerate(spec["tensors"]):
            if not t["written"]:
                continue
            want = np.load(case / "expected" / f"t{k}.npy")
            got = np.fromfile(folder / f"t{k}", dtype=want.dtype).reshape(want.shape)
            diff = first_difference(t["name"], want, got, np.load(case / "bounds" / f"t{k}.npy"))
            if diff:
                return diff
    return ""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cases", nargs="*", help="case names (default: all)")
    parser.add_argument("--arch", default="native", help="nvcc -arch (default: native)")
    parser.add_argument("--sanitizer", default="", choices=["", "memcheck", "racecheck", "synccheck", "initcheck"])
    parser.add_argument("--demos", action="store_true", help="run the sanitizer demos instead of the cases")
    args = parser.parse_args()
    if shutil.which("nvcc") is None:
        print("nvcc is not on PATH")
        return 2
    if args.demos and shutil.which("compute-sanitizer") is None:
        print("compute-sanitizer is not on PATH")
        return 2
    names = args.cases or json.loads((HERE / ("demos.json" if args.demos else "cases.json")).read_text())
    passed = failed = 0
    with tempfile.TemporaryDirectory(prefix="tilecert-build-") as tmp:
        for name in names:
            case = HERE / name
            exe = Path(tmp) / name.replace("/", "_")
            problem = build(case, args.arch, exe) or run_case(case, exe, args.sanitizer)
            print(f"{'FAIL' if problem else 'PASS'} {name}" + (f": {problem}" if problem else ""), flush=True)
            passed += not problem
            failed += bool(problem)
    print(f"{passed} passed, {failed} failed")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
