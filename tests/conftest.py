"""Shared pytest setup: the repository root on ``sys.path`` so tests can ``import examples``, and
the hypothesis profiles: ``default`` (a bounded sample, the normal run) and ``full`` (long
campaigns), selected by ``TILECERT_FULL=1``."""
import os
import sys

from hypothesis import HealthCheck, settings

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

settings.register_profile("default", max_examples=10, deadline=None, derandomize=True,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.register_profile("full", max_examples=500, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.load_profile("full" if os.environ.get("TILECERT_FULL") == "1" else "default")
