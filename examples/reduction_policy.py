"""Reduction policies are part of a program's meaning.

A ``reduce`` region folds its carried state over its domain; its ``policy`` says which
evaluation orders are allowed:

- ``fold_left``: the body runs in domain order. With ``s = s - x`` over ``[1, 2, 3]``
  from 0 that is ``((0 - 1) - 2) - 3 = -6``.
- ``fold_right``: the body runs in reverse domain order. With ``s = x - s`` over
  ``[1, 2, 3]`` from 0 that is ``1 - (2 - (3 - 0)) = 2``.
- ``ordered_tree``: any bracketing of the contributions in order (only for updates with
  an associative merge, here ``s = s + x``).
- ``unordered_tree``: any bracketing of any permutation (associative and commutative),
  shown here with the tile expression ``tc.reduce``.

Integers make every tree exact, so all four results are deterministic:
``Out = [-sum(x), x0 - x1 + x2 - ..., sum(x), sum(x)]``.
"""
import tilecert as tc
from tilecert import i32


@tc.kernel
def reduction_policy(X: tc.Tensor[i32, "N"], Out: tc.Tensor[i32, "P"]):
    N = X.shape[0]
    s = tc.full(i32, (), 0)
    for r in tc.reduction(N, policy="fold_left"):
        s = s - X.at(r.index()).load()
    Out.at(0).store(s)

    t = tc.full(i32, (), 0)
    for r in tc.reduction(N, policy="fold_right"):
        t = X.at(r.index()).load() - t
    Out.at(1).store(t)

    u = tc.full(i32, (), 0)
    for r in tc.reduction(N, policy="ordered_tree"):
        u = u + X.at(r.index()).load()
    Out.at(2).store(u)

    Out.at(3).store(tc.reduce(X.tile((0,), (N,)).load(), 0, "add", policy="unordered_tree"))
