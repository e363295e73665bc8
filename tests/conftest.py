"""Shared pytest setup: the repository root on ``sys.path`` so tests can ``import examples``."""
import os
import sys

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)
