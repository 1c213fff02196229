"""Batched simulation: one model, many initial states, every core.

``ld.simulate_batch(model, Q0, V0, t_end, tau=...)`` integrates N motions of one model,
each exactly as ``ld.simulate`` would, and returns their N trajectories.  Where the
compiled loop applies (``loopdyn.sim.compiled``: τ None, constant per element or a
numba-compiled controller; RK4, RK45 or DOP853) the elements
run in a pool of threads, each with its own workspace, inside the compiled loop, which
releases the GIL: the threads run in parallel.  An element the compiled loop cannot
finish (a singularity, max_steps, a failed solve) is redone by ``ld.simulate``'s Python
loop, which produces its documented result or error; elsewhere every element takes that
loop, one after the other.
"""

import os
from concurrent.futures import ThreadPoolExecutor, wait

import numpy as np

from loopdyn.analysis.assembly import assemble, complete_velocity
from loopdyn.errors import SimulationError, SimulationInterrupted
from loopdyn.kinematics.closures import closure_residual
from loopdyn.methods import dynamics
from loopdyn.methods.rcr import independent_columns
from loopdyn.model.data import Data
from loopdyn.sim import compiled as compiled_loop
from loopdyn.sim.simulate import check_arguments, simulate
from loopdyn.validation import configuration, model_arg, vector

# ld.simulate's options that simulate_batch passes on
OPTIONS = (
    "integrator", "stabilization", "rtol", "atol", "dt", "max_step", "t_eval", "baumgarte",
    "constraint_tol", "singularities", "max_steps", "independent", "repartition",
    "repartition_cond", "max_outputs",
)  # fmt: skip


def _per_element(model, tau, n):
    """The τ of each of the n elements: None, a shared constant or controller, or row i
    of an (n, nv) / (n, number of actuated coordinates) array."""
    if tau is None or callable(tau):
        return [tau] * n
    t = np.asarray(tau, dtype=float)
    if t.ndim == 2:
        if t.shape[0] != n:
            raise ValueError(
                f"{model.name}: tau has {t.shape[0]} rows for {n} initial states "
                "(one row per element, or one τ for all)"
            )
        return list(t)
    return [t] * n


def _states(model, Q0, V0):
    """(N, nq) and (N, nv) float arrays of the initial states, checked."""
    Q = np.asarray(Q0, dtype=float)
    if Q.ndim != 2 or Q.shape[1] != model.nq:
        raise ValueError(
            f"{model.name}: Q0 must be an (N, nq = {model.nq}) array of initial "
            f"configurations, got shape {Q.shape}"
        )
    n = Q.shape[0]
    if n == 0:
        raise ValueError(f"{model.name}: Q0 holds no initial state")
    V = np.zeros((n, model.nv)) if V0 is None else np.asarray(V0, dtype=float)
    if V.shape != (n, model.nv):
        raise ValueError(
            f"{model.name}: V0 must be an (N = {n}, nv = {model.nv}) array, got shape {V.shape}"
        )
    return Q, V


def simulate_batch(
    model,
    Q0,
    V0=None,
    t_end=1.0,
    tau=None,
    *,
    method="augmented",
    consistent=True,
    threads=None,
    on_error="raise",
    **options,
):
    """Integrate N motions of ``model`` over [0, t_end] in parallel.

    In: ``Q0`` (N, nq) initial configurations, ``V0`` (N, nv) initial velocities
    (default zeros), both made consistent first unless ``consistent=False`` (as
    ``ld.simulate``).  ``tau``: None, one constant for every element (nv, or one per
    actuated coordinate), one row per element ((N, nv) or (N, n_actuated)), or a
    controller ``tau(t, q, v)`` shared by all (compile it with ``@numba.njit`` to run
    in the compiled loop).  ``method`` and ``options`` (``integrator``,
    ``stabilization``, ``rtol``, ``atol``, ``dt``, ``max_step``, ``t_eval``,
    ``baumgarte``, ``constraint_tol``, ``singularities``, ``max_steps``, ``independent``,
    ``repartition``, ``repartition_cond``): as
    ``ld.simulate``.  ``threads``: worker threads (default: the usable cores).

    Out: a list of N :class:`loopdyn.Trajectory`, element i the motion from
    (Q0[i], V0[i]); equal to ``ld.simulate``'s for that element (the same steps; see
    ``loopdyn.sim.compiled``).  ``stats["compiled"]`` says which loop ran it.

    An element that stops early (``ld.simulate`` raises ``SimulationError`` or
    ``SimulationSingularityError``) does not stop the others.  With
    ``on_error="raise"`` (default), once all have run, the first failure's error type
    is raised naming every failed index; it carries ``trajectories`` (all N, the failed
    ones partial, ``completed`` False), ``failed`` (the indices) and the first failed
    element's ``trajectory``, ``t``, ``q``, ``v``.  ``on_error="report"`` returns the
    list with the partial trajectories in place.  Ctrl-C raises
    ``SimulationInterrupted`` carrying ``trajectories`` (None for the elements not
    finished).  Invalid arguments raise ``ValueError`` before anything runs.
    """
    unknown = sorted(set(options) - set(OPTIONS))
    if unknown:
        raise TypeError(f"simulate_batch got unknown options {unknown}; it takes {list(OPTIONS)}")
    if on_error not in ("raise", "report"):
        raise ValueError(f"on_error must be 'raise' or 'report', got {on_error!r}")
    if threads is None:
        threads = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1
    if isinstance(threads, bool) or not isinstance(threads, (int, np.integer)) or threads < 1:
        raise ValueError(f"threads must be a positive integer, got {threads!r}")
    checked = {k: x for k, x in options.items() if k not in ("independent", "repartition")}
    a = check_arguments(method=method, t_end=t_end, **checked)
    dynamics.check_method(model_arg(model), method, model.data)
    Q, V = _states(model, Q0, V0)
    n = Q.shape[0]
    taus = _per_element(model, tau, n)
    integrator = options.get("integrator", "DOP853")
    mode = options.get("stabilization", "projection") if model.m else "none"
    why = compiled_loop.eligible(model, tau, integrator, mode)
    monitor = options.get("singularities", "stop") == "stop"
    max_steps = options.get("max_steps", 1_000_000)
    repartition, independent = options.get("repartition", True), options.get("independent")
    if independent is not None:  # joint names or indices into v: a ValueError, now
        independent = independent_columns(model, independent)
        if method == "rcr" and why is None:
            why = "independent= with method='rcr'"

    # consistent initial states (the main thread: assembly is Python work)
    d = Data(model)
    for i in range(n):
        q = configuration(model, Q[i])
        v = vector(V[i], model.nv, f"V0[{i}]", model)
        if consistent and model.m:
            if np.abs(closure_residual(model, q, data=d)).max() > a["constraint_tol"]:
                q = assemble(model, q, tol=a["constraint_tol"], data=d)
            v = complete_velocity(model, q, v, data=d)
        Q[i], V[i] = q, v

    def compiled(i):
        return compiled_loop.run(
            model, Q[i], V[i], taus[i], method, integrator, mode, a, monitor, max_steps,
            repartition, independent,
        )  # fmt: skip

    out = [None] * n
    if why is None:
        try:  # the first compiles (or loads) the loop, once; Ctrl-C stops it (main thread)
            out[0] = compiled(0)
        except SimulationInterrupted as e:
            raise _interrupted(model, out) from e
        pool = ThreadPoolExecutor(max_workers=threads)
        futures = {pool.submit(compiled, i): i for i in range(1, n)}
        try:
            wait(futures)
        except KeyboardInterrupt as e:
            pool.shutdown(wait=False, cancel_futures=True)
            for f, i in futures.items():
                if f.done() and not f.cancelled() and f.exception() is None:
                    out[i] = f.result()
            raise _interrupted(model, out) from e
        pool.shutdown()
        for f, i in futures.items():
            out[i] = f.result()
    failed, errors = [], []
    for i in range(n):
        if out[i] is not None:
            continue
        try:
            out[i] = simulate(
                model, Q[i], V[i], t_end, taus[i], method=method, consistent=False,
                compiled=False, **options,
            )  # fmt: skip
        except SimulationError as e:
            out[i] = e.trajectory
            failed.append(i)
            errors.append(e)
        except KeyboardInterrupt as e:
            raise _interrupted(model, out) from e
    if failed and on_error == "raise":
        first = errors[0]
        err = type(first)(
            f"{model.name}: {len(failed)} of {n} elements stopped early (indices {failed}); "
            f"element {failed[0]}: {first}",
            trajectory=first.trajectory, t=first.t, q=first.q, v=first.v,
            condition=first.condition,
        )  # fmt: skip
        err.trajectories, err.failed = out, failed
        raise err from first
    return out


def _interrupted(model, out):
    done = sum(t is not None for t in out)
    err = SimulationInterrupted(
        f"{model.name}: interrupted (Ctrl-C) with {done} of {len(out)} elements finished"
    )
    err.trajectories = out
    return err
