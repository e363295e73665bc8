"""Fuzz campaigns on dask.distributed: the cases of ``fuzz.campaign`` spread over worker processes.

A campaign's case ``i`` is a pure function of the campaign seed and ``i`` (``fuzz.run_indexed``), so
the executor only decides where and when each case runs, never what it is: the merged results
(in index order), the failing-case files (``case-SEED-INDEX.json``) and the counts are those of
the serial run. ``dask_executor(workers)`` starts a ``LocalCluster`` of ``workers`` processes with
one thread each (the interpreters and the C compiler hold the GIL or a core each);
``dask_executor(scheduler="tcp://HOST:PORT")`` uses a running cluster, whose workers must have
tilecert installed. Results come back as they finish. ``executor_for(workers, scheduler)`` picks
the executor of ``tilecert fuzz`` (``--workers 0``: this process, ``fuzz.in_process``).

``DifferentialRun`` is a campaign's run of a case (``tc.differential`` on a target), a plain
picklable value that workers rebuild without the command line.
"""
from __future__ import annotations

import contextlib
import functools
import logging
import warnings
from dataclasses import dataclass
from typing import ContextManager, Iterator, Optional

from tilecert.semantics.errors import InputError, Loc

from .differential import DiffReport
from .fuzz import CaseResult, Executor, FuzzCase, Task, in_process, replay

COMMAND_LINE = Loc("<command line>", 0)
CONNECT_TIMEOUT_S = 10


@dataclass(frozen=True)
class DifferentialRun:
    """``tc.differential(schedule, target=target, allow_unproved=allow_unproved)`` over ``trials`` inputs drawn
    from the case's seed."""

    target: str = "c"
    trials: int = 2
    allow_unproved: bool = False

    def __call__(self, case: FuzzCase) -> DiffReport:
        from tilecert.backends import differential
        check = functools.partial(differential, target=self.target, allow_unproved=self.allow_unproved)
        return replay(case, check, trials=self.trials)


@contextlib.contextmanager
def dask_executor(workers: int = 2, scheduler: Optional[str] = None) -> Iterator[Executor]:
    """An executor (``fuzz.campaign``'s ``executor``) on a dask cluster: a new ``LocalCluster`` of ``workers``
    single-threaded processes, or the running one at ``scheduler`` (``tcp://HOST:PORT``); the cluster this
    starts is closed on exit. A scheduler that cannot be reached in ``CONNECT_TIMEOUT_S`` is an ``InputError``."""
    from dask.distributed import Client, LocalCluster

    with contextlib.ExitStack() as stack:
        if scheduler is None:
            cluster = stack.enter_context(LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                                       dashboard_address=None, silence_logs=logging.ERROR))
            client = stack.enter_context(Client(cluster))
        else:
            try:
                client = stack.enter_context(Client(scheduler, timeout=f"{CONNECT_TIMEOUT_S}s"))
            except (OSError, ValueError, TypeError) as exc:
                raise InputError(f"cannot reach the dask scheduler {scheduler!r}: {exc}", COMMAND_LINE,
                                 "start one (`dask scheduler`, `dask worker tcp://HOST:PORT`) or leave out "
                                 "--scheduler to use local worker processes") from exc
        yield functools.partial(_as_completed, client)


def executor_for(workers: int, scheduler: Optional[str] = None) -> tuple[ContextManager[Executor], str]:
    """The executor of a campaign and where it runs, in words: the running cluster at ``scheduler`` when given,
    else ``workers`` local worker processes, or this process for ``workers == 0``."""
    if scheduler is not None:
        return dask_executor(workers, scheduler), f"on {scheduler}"
    if workers == 0:
        return contextlib.nullcontext(in_process), "in this process"
    return dask_executor(workers), f"on {workers} local dask worker processes"


def _as_completed(client: "object", task: Task, indices: range) -> Iterator[CaseResult]:
    """Submit ``task(i)`` for every index and yield each result as its worker finishes (a case's exception,
    such as ``NoDevice``, is raised here, and the cases not yet run are cancelled)."""
    from dask.distributed import as_completed

    futures = client.map(functools.partial(_in_worker, task), list(indices), pure=False)
    try:
        for future in as_completed(futures):
            yield future.result()
    finally:
        client.cancel(futures)



def _in_worker(task: Task, index: int) -> CaseResult:
    """``task(index)`` in a dask worker, whose own threads use the ``random`` module while hypothesis draws a case:
    hypothesis's warning about strategies that use ``random`` is about those threads there, and is silenced."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Do not use the `random` module inside strategies")
        return task(index)
