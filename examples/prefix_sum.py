"""A serial prefix sum and a schedule the checker disproves: its loop bound to the cores.

``Y[i] = X[0] + ... + X[i]``: a running sum ``acc`` carried through a serial loop over ``i``.
``on_cores`` binds that loop to ``core`` (``s.bind("i", "core")``): the C backend would run it
as an OpenMP ``parallel for``, every thread reading and writing the one carried ``acc``, and
the result would depend on the threads' timing. The checker disproves its
``noninterference`` and ``dependence`` obligations, so ``tc.emit``, ``tc.compile`` and
``tc.differential`` refuse it (``UnprovedScheduleError``). The data are 32-bit integers.
"""
import tilecert as tc
from tilecert import i32


@tc.kernel
def prefix_sum(X: tc.Tensor[i32, "N"], Y: tc.Tensor[i32, "N"]):
    N = X.shape[0]
    acc = tc.zeros(i32, ())
    for i in tc.serial(N):
        acc = acc + X.at(i.index()).load()
        Y.at(i.index()).store(acc)


def prefix_sum_on_cores() -> tc.Schedule:
    """The prefix sum with its serial loop bound to ``core`` (disproved), sizes symbolic."""
    s = tc.schedule(prefix_sum)
    s.bind("i", "core")
    return s


on_cores = prefix_sum_on_cores()
