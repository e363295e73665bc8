"""Every ```python block of README.md runs as written: each saved as a file of its own and run by
this Python from the repository root (so ``examples`` imports), with its ``assert`` statements
holding and exit status 0."""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BLOCKS = re.findall(r"^```python\n(.*?)^```", (ROOT / "README.md").read_text(), flags=re.S | re.M)


def test_the_readme_has_python_blocks():
    assert len(BLOCKS) >= 4


@pytest.mark.parametrize("k", range(len(BLOCKS)))
def test_readme_block_runs(k, tmp_path):
    script = tmp_path / f"readme_block_{k}.py"
    script.write_text(BLOCKS[k])
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TILECERT_FAILURES": str(tmp_path / "failures")}
    res = subprocess.run([sys.executable, str(script)], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=600)
    assert res.returncode == 0, f"block {k}:\n{BLOCKS[k]}\n--- stderr ---\n{res.stderr[-4000:]}"
