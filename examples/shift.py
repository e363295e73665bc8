"""A wavefront recurrence and a schedule the checker disproves: interchanging across a (1, -1) dependence.

``B[r, c] = B[r - 1, c + 1] + A[r, c]`` for every row ``r`` and column ``c`` in order (serial
loops, row-major), where ``B`` outside its bounds reads 0. Each cell reads the cell one row
up and one column right, written one iteration of ``r`` earlier. ``swapped`` interchanges the
two loops (``s.swap("r", "c")``): column-major order runs ``(r, c) = (1, 0)`` before ``(0, 1)``,
so the read of ``B[0, 1]`` sees the input instead of the new value. The checker disproves
its ``dependence`` obligation with that witness; ``tc.emit``, ``tc.compile`` and
``tc.differential`` refuse it (``UnprovedScheduleError``), and with ``allow_unproved=True`` the
differential harness names the transform as the broken link. The data are 32-bit integers.
"""
import tilecert as tc
from tilecert import i32


@tc.kernel
def shift(A: tc.Tensor[i32, "N", "M"], B: tc.Tensor[i32, "N", "M"]):
    N, M = A.shape
    for r in tc.serial(N):
        for c in r.serial(M):
            i, j = r.index(), c.index()
            B.at(i, j).store(B.at(i - 1, j + 1).load() + A.at(i, j).load())


def shift_swapped(n: int = 4, m: int = 4) -> tc.Schedule:
    """The interchanged schedule at sizes ``N = n``, ``M = m`` (disproved)."""
    s = tc.schedule(shift, N=n, M=m)
    s.swap("r", "c")
    return s


swapped = shift_swapped()
