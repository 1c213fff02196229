"""Alternated timing for the benchmarks: per-call medians and ratios with their spread.

The machines these run on are shared and noisy, so functions are never timed one
after the other: each round times every function once (A B C A B C ...), and a
ratio is taken within each round, so a change in load affects numerator and
denominator alike.  Reported: the median per-call time of each function and, for
each ratio, its median and min–max over the rounds.  ``CLOCK`` is the process's
CPU time (``time.process_time``) when ``LOOPDYN_BENCH_CLOCK=cpu`` (or the
scripts' ``--cpu-time``): on a machine shared with other jobs it counts only
this process's work; the wall clock (``time.perf_counter``) otherwise.
"""

import os
import time
import timeit

import numpy as np

CLOCK = time.process_time if os.environ.get("LOOPDYN_BENCH_CLOCK") == "cpu" else time.perf_counter


def use_cpu_time():
    """Time with the process's CPU time from now on (see the module docstring)."""
    global CLOCK
    CLOCK = time.process_time


def calls_per_run(fn, min_time):
    """Number of calls of ``fn`` lasting about ``min_time`` seconds."""
    t = timeit.Timer(fn, timer=CLOCK)
    n = 1
    while True:
        elapsed = t.timeit(n)
        if elapsed >= min_time:
            return n
        n = max(n * 2, int(n * min_time / max(elapsed, 1e-9) * 1.1))


def alternate(fns, rounds=21, min_time=0.02):
    """(rounds × len(fns)) array of per-call times in µs, timed in alternation.

    Every function is called a few times first: a first call may compile, load a
    cache or bind a workspace, and must not set the number of calls per run."""
    for f in fns:
        for _ in range(3):
            f()
    timers = [timeit.Timer(f, timer=CLOCK) for f in fns]
    ns = [calls_per_run(f, min_time) for f in fns]
    out = np.empty((rounds, len(fns)))
    for r in range(rounds):
        for k, (t, n) in enumerate(zip(timers, ns, strict=True)):
            out[r, k] = 1e6 * t.timeit(n) / n
    return out


def ratio(times, k, ref):
    """(median, min, max) over the rounds of times[:, k] / times[:, ref]."""
    x = times[:, k] / times[:, ref]
    return float(np.median(x)), float(x.min()), float(x.max())


def fmt_ratio(r):
    return f"{r[0]:.2f} ({r[1]:.2f}–{r[2]:.2f})"


def median_us(times, k):
    return float(np.median(times[:, k]))


def pinocchio_call(model, q, v, tau, solver="constraintDynamics", prox=(1e-12, 1e-8, 20)):
    """``(call, export)``: a zero-argument call of Pinocchio's closed-loop ``solver``
    (``"constraintDynamics"``, or ``"lcaba"`` after ``computeJointMinimalOrdering``) on
    ``model`` at (q, v, tau), with its fast ``StdVec_RigidConstraintModel`` /
    ``StdVec_RigidConstraintData`` containers (a Python list is converted at every
    call) and ``ProximalSettings(*prox)`` (accuracy, mu, iterations).  ``call()``
    returns Pinocchio's q̈ in its layout (``export.v_from`` converts it); (None, None)
    when Pinocchio is missing or cannot express the model's closures."""
    try:
        import pinocchio as pin

        from loopdyn.interop.pinocchio import PinocchioExport
    except ImportError:  # pragma: no cover - optional peer
        return None, None
    ex = PinocchioExport(model)
    if ex.unexported:
        return None, None
    pd = ex.model.createData()
    cms = pin.StdVec_RigidConstraintModel()
    cds = pin.StdVec_RigidConstraintData()
    for c in ex.constraints:
        cms.append(c)
        cds.append(c.createData())
    if solver == "lcaba":
        pin.computeJointMinimalOrdering(ex.model, pd, cms)
        fn = pin.lcaba
    elif solver == "constraintDynamics":
        pin.initConstraintDynamics(ex.model, pd, cms, cds)
        fn = pin.constraintDynamics
    else:
        raise ValueError(f"unknown Pinocchio solver {solver!r}")
    settings = pin.ProximalSettings(*prox)
    qp, vp, tp = ex.q(q), ex.v(v), ex.v(tau)

    def call():
        return fn(ex.model, pd, qp, vp, tp, cms, cds, settings)

    return call, ex
