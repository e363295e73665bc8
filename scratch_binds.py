import tilecert as tc
from examples import EXAMPLES
from tilecert.semantics import loopir as L
from tilecert.semantics.sched.base import ScheduleError
from tilecert.checker import check_transform
from tilecert.schedule import Schedule

def parallel_loops(s):
    return [lp.name for lp in L.loops(s.program.body) if lp.kind == "parallel"]

def greedy(name, sizes):
    s = tc.schedule(EXAMPLES[name].kernel, **sizes)
    before = len(parallel_loops(s))
    progress = True
    while progress:
        progress = False
        for a in list(L.loops(s.program.body)):
            for st_b in [b for b in L.loops(s.program.body) if b is not a]:
                trial = Schedule.from_json(s.to_json(), s.kernel)
                try:
                    trial.merge(a.name, st_b.name)
                except ScheduleError:
                    continue
                t = trial.transforms[-1]
                r = check_transform(trial.programs[-2], trial.programs[-1], t.tau, trial.sizes, replay=False, final=False, listed=t.obligations)
                if r.ok:
                    s = trial; progress = True; break
            if progress: break
    print(name, "parallel loops", before, "->", len(parallel_loops(s)), "ops", len(s.history), "check", s.check(replay=False).ok)
    return s

greedy("softmax", dict(M=8, N=8))
greedy("all_regions", dict(M=8, N=8, K=8))
