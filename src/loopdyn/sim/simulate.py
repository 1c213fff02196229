"""Time integration of closed-loop models: ``ld.simulate`` and constraint stabilisation.

The equations of motion of a closed-loop model are an index-3 DAE: M q̈ + h = τ + Jᵀλ
with Φ(q) = 0.  Every forward-dynamics method enforces the closures at the
acceleration level only (J q̈ = γ), so the integrated positions and velocities
drift off Φ = 0 and J q̇ = 0 (Anderson & Critchley Sec. 4.1: quadratically in
time).  ``simulate`` offers four treatments (``stabilization=``):

``"none"``
    acceleration level only: the "traditional" formulation, for comparison;
``"baumgarte"``
    J q̈ = γ - 2α J q̇ - β² Φ (gains ``baumgarte=(α, β)`` in 1/s): the residuals
    decay like a critically damped oscillator; q̈ = q̈₀ + M⁻¹Jᵀ S⁻¹ c with
    S = J M⁻¹ Jᵀ and c the right-hand side change, so any ``method`` can be used;
``"projection"``
    after each accepted step, Newton's method with minimum-norm steps puts q back
    on Φ(q) = 0, then v is projected onto J v = 0 (and every output state too);
``"partitioning"``
    generalized coordinate partitioning (Wehage & Haug): only the independent
    coordinates and velocities are integrated, the dependent ones are solved from
    Φ = 0 (Newton) and J v = 0 at every right-hand side evaluation; the choice is
    re-made automatically (``ld.partition``, pivoted QR) when the dependent block
    J_d becomes ill-conditioned, which lets a five-bar pass configurations where a
    fixed choice (the paper's minimal coordinates) is singular.

Configuration space: the state is y = (δ, v) with q = integrate(q_a, δ) in a chart
around an anchor q_a (δ̇ = J_r(δ)⁻¹ v, the inverse right Jacobian of SO(3)/SE(3)
for spherical/free joints, the identity otherwise), re-anchored after every step
(Runge–Kutta–Munthe-Kaas): quaternions stay unit.  Models without spherical or
free joints use q itself (q_a = 0).

Integrators: scipy's RK45, DOP853, Radau, BDF, LSODA (driven step by step, dense
output at the requested times), and a fixed-step RK4 that lands on the output
times.
"""

import time
import warnings
from contextlib import contextmanager, suppress

import numpy as np

from loopdyn.analysis.assembly import assemble, complete_velocity
from loopdyn.errors import (
    LoopdynError,
    SimulationError,
    SimulationInterrupted,
    SimulationSingularityError,
    SingularityError,
)
from loopdyn.kinematics.closures import closure_residual
from loopdyn.methods import dynamics
from loopdyn.methods.rcr import independent_columns
from loopdyn.sim import compiled as compiled_loop
from loopdyn.sim.integrators import INTEGRATORS, IntegratorFailure, RK4Stepper, ScipyStepper
from loopdyn.sim.stabilization import (
    STABILIZATIONS,
    MobilityChange,
    System,
    evaluate_trajectory,
    tau_function,
)
from loopdyn.validation import configuration, model_arg, vector

# output times (``max_outputs``, default): each costs a dynamics evaluation and holds the
# state and its dynamics (measured, four-bar: 28 µs and 210 bytes each at the peak, so 10⁷
# ran 5 minutes in 2 GB); larger models cost more per output
MAX_OUTPUTS = 1_000_000
_OUTPUT_S, _OUTPUT_BYTES = 30e-6, 200  # the four-bar's cost of one output time, rounded
# an adaptive step whose trial stage is singular is retried from the last accepted state
# with a quarter of the step, this many times, before the simulation stops there
STAGE_RETRIES = 4


def _positive(x, name, finite=True):
    """``x`` as a positive float (finite unless ``finite=False``), else ValueError naming it."""
    try:
        y = float(x)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number, got {x!r}") from None
    if not y > 0.0 or (finite and not np.isfinite(y)):
        raise ValueError(f"{name} must be positive{' and finite' if finite else ''}, got {x!r}")
    return y


def _gains(baumgarte):
    """The Baumgarte gains (α, β) in 1/s: two finite non-negative numbers."""
    try:
        a, b = (float(g) for g in baumgarte)
    except (TypeError, ValueError):
        raise ValueError(f"baumgarte must be two gains (alpha, beta), got {baumgarte!r}") from None
    if not (np.isfinite(a) and np.isfinite(b) and a >= 0.0 and b >= 0.0):
        raise ValueError(
            f"baumgarte gains must be finite and >= 0 (negative gains make the closures "
            f"diverge), got {baumgarte!r}"
        )
    return a, b


def _too_many(n, max_outputs, name, cap_name):
    """ValueError: ``n`` output times asked for by ``name``, over ``max_outputs``, with the
    estimate of their cost (``cap_name``: how to raise the cap, None if it cannot be)."""
    s, b = n * _OUTPUT_S, n * _OUTPUT_BYTES
    cost = f"{s / 60:.0f} min" if s >= 120 else f"{s:.0f} s"
    size = f"{b / 1e9:.1f} GB" if b >= 1e9 else f"{b / 1e6:.0f} MB"
    more = f" or pass a larger {cap_name}" if cap_name else ""
    return ValueError(
        f"{name} asks for {n:,} output times, over the limit of {max_outputs:,}: each costs a "
        f"dynamics evaluation and stores the state and its dynamics, ~30 µs and ~200 bytes "
        f"for the four-bar, so {n:,} take ~{cost} and ~{size} (more for larger models); ask "
        f"for fewer{more}"
    )


def _output_times(t_end, t_eval, max_outputs=MAX_OUTPUTS, name="t_eval", cap="max_outputs"):
    if t_eval is None:
        t_eval = 501
    if isinstance(t_eval, (int, np.integer)) and not isinstance(t_eval, bool):
        n = int(t_eval)
        if n > max_outputs:
            raise _too_many(n, max_outputs, name, cap)
        if n < 2:
            raise ValueError(f"{name} as a count must be at least 2, got {n}")
        return np.linspace(0.0, t_end, n)
    try:
        te = np.asarray(t_eval, dtype=float).reshape(-1)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a count or an array of times, got {t_eval!r}") from None
    if te.size > max_outputs:
        raise _too_many(te.size, max_outputs, name, cap)
    if (
        te.size == 0
        or not np.all(np.isfinite(te))
        or np.any(np.diff(te) <= 0)
        or te[0] < 0
        or te[-1] > t_end * (1 + 1e-12)
    ):
        raise ValueError(f"{name} must be increasing times in [0, t_end]")
    return np.minimum(te, t_end)


def simulate(
    model,
    q0=None,
    v0=None,
    t_end=1.0,
    tau=None,
    method="augmented",
    *,
    integrator="DOP853",
    stabilization="projection",
    rtol=1e-8,
    atol=1e-8,
    dt=None,
    max_step=np.inf,
    t_eval=None,
    baumgarte=(10.0, 10.0),
    independent=None,
    repartition=True,
    repartition_cond=10.0,
    constraint_tol=1e-12,
    consistent=True,
    singularities="stop",
    max_steps=1_000_000,
    max_outputs=MAX_OUTPUTS,
    progress=None,
    data=None,
    compiled=None,
):
    """Integrate the motion of ``model`` from (q0, v0) over [0, t_end].

    In:
      ``q0`` (nq, default ``model.q0``), ``v0`` (nv, default zeros): made
      consistent first unless ``consistent=False`` (``ld.assemble`` and
      ``ld.complete_velocity``, keeping the actuated coordinates).
      ``tau``: None, a constant (nv, or one value per actuated coordinate), or a
      controller ``tau(t, q, v)`` returning either.
      ``method``: any of ``ld.methods.dynamics.METHODS``; it is called once per
      right-hand side evaluation.
      ``integrator``: ``"RK45"``, ``"DOP853"``, ``"Radau"``, ``"BDF"``,
      ``"LSODA"`` (scipy, tolerances ``rtol``/``atol``, ``max_step``) or
      ``"RK4"`` (fixed step ``dt``, default 1e-3 s; steps also end on the output
      times).
      ``stabilization``: ``"none"``, ``"baumgarte"`` (gains ``baumgarte=(α,
      β)``), ``"projection"`` or ``"partitioning"`` (initial ``independent``
      coordinates, indices into v or joint names, default from ``ld.partition``; with
      ``method="rcr"`` they are RCR's independent coordinates too, see
      ``ld.forward_dynamics``; re-selected
      when κ(J_d) = σ_max(J_r)/σ_min(J_d) > ``repartition_cond`` unless
      ``repartition=False``); see
      the module docstring.  ``constraint_tol``: Newton tolerance on max |Φ|
      (projection, partitioning) and on J v.
      ``t_eval``: output times (increasing, in [0, t_end]) or their number
      (default 501, evenly spaced; at most ``max_outputs``, default ``MAX_OUTPUTS`` =
      10⁶: each output costs a dynamics evaluation and its storage, ~30 µs and ~200
      bytes for the four-bar, so more is refused before any work, with the estimate).
      ``singularities``: ``"stop"`` (default) ends the run with a
      ``SimulationSingularityError`` when the closures lose rank — a change of
      mobility, detected the same way for every method (see the module
      docstring); ``"pass"`` integrates on through it.
      ``max_steps``: the largest number of integrator steps (a
      ``SimulationError`` with the trajectory so far beyond it).
      ``progress(t, t_end)``: called after every step (the compiled loop: every
      ``loopdyn.sim.compiled.POLL_STEPS`` steps) and at ``t_end``.
      ``compiled``: None (default) runs the loop inside compiled code when it applies
      (τ None, constant or a ``@numba.njit`` controller, ``"RK4"``, ``"RK45"`` or
      ``"DOP853"``, any stabilization, any joint; see
      ``loopdyn.sim.compiled``), else the Python loop; ``True`` the same but a
      ``ValueError`` saying why when it does not apply; ``False`` the Python loop.
      Whatever the compiled loop cannot finish is redone by the Python loop.

    Out: a :class:`loopdyn.Trajectory` at the output times (states, q̈, λ, τ,
    closure residuals, energy) with ``stats`` (steps, nfev, wall time,
    projections, repartitions).

    Raises :class:`loopdyn.SimulationSingularityError` (a ``SingularityError``)
    at a singular configuration it cannot pass, and
    :class:`loopdyn.SimulationError` when the integrator fails, the state stops
    being finite or ``max_steps`` is reached; both carry ``trajectory`` (computed
    so far), ``t``, ``q``, ``v`` and ``condition`` of the last accepted state.
    Ctrl-C raises :class:`loopdyn.SimulationInterrupted` (a ``KeyboardInterrupt``)
    carrying the same.  Invalid arguments raise ``ValueError``, and a method that does
    not apply to the model (``denoc`` outside parallel mechanisms) ``ModelError``,
    before anything is integrated.
    """
    a = check_arguments(
        method=method, integrator=integrator, stabilization=stabilization, t_end=t_end,
        rtol=rtol, atol=atol, dt=dt, max_step=max_step, baumgarte=baumgarte,
        repartition_cond=repartition_cond, constraint_tol=constraint_tol,
        singularities=singularities, max_steps=max_steps, t_eval=t_eval,
        max_outputs=max_outputs,
    )  # fmt: skip
    t_end, rtol, atol, dt, max_step = a["t_end"], a["rtol"], a["atol"], a["dt"], a["max_step"]
    gains, repartition_cond, constraint_tol = a["gains"], a["repartition_cond"], a["constraint_tol"]
    d = model_arg(model).data if data is None else data
    dynamics.check_method(model, method, d)  # a method that does not apply: ModelError, now
    if independent is not None:  # joint names or indices into v: a ValueError, now
        independent = independent_columns(model, independent)
    if method in dynamics.MINIMAL_METHODS and model.m and stabilization != "partitioning":
        warnings.warn(
            f"method={method!r} computes from the independent rates: the integrator's "
            "inconsistent stage velocities send most calls to the augmented fallback; "
            "use stabilization='partitioning' (see docs/denoc.md)",
            stacklevel=2,
        )
    q = np.array(configuration(model, model.q0 if q0 is None else q0), dtype=float)
    v = np.zeros(model.nv) if v0 is None else np.array(vector(v0, model.nv, "v0", model))
    if consistent and model.m:
        if np.abs(closure_residual(model, q, data=d)).max() > constraint_tol:
            q = assemble(model, q, tol=constraint_tol, data=d)
        v = complete_velocity(model, q, v, data=d)
    t_out = a["t_out"]
    mode = stabilization if model.m else "none"
    if compiled is None and data is None and not compiled_loop.ready():
        compiled = False  # the eager tier (loopdyn.kernels.tiers): the Python loop
    if compiled is not False and data is None:
        why = compiled_loop.eligible(model, tau, integrator, mode)
        if why is None and method == "rcr" and independent is not None and model.m:
            why = "independent= with method='rcr' (the compiled loop uses RCR's own choice)"
        if why is None:
            traj = compiled_loop.run(
                model, q, v, tau, method, integrator, mode, a, singularities == "stop", max_steps,
                repartition, independent, progress,
            )  # fmt: skip
            if traj is not None:
                return traj
        elif compiled:
            raise ValueError(f"{model.name}: compiled=True does not apply: {why}")
    system = System(
        model, method, tau_function(model, tau), mode, gains, constraint_tol, d, independent
    )
    if mode == "partitioning" and independent is not None:  # bad indices: a ValueError, now
        system.candidate(q, independent)
    if callable(tau):  # a controller returning the wrong shape is a ValueError, now
        with suppress(FloatingPointError):  # (not finite: a SimulationError, below)
            system.tau_fn(0.0, q.copy(), v.copy())
    run = _Run(system, integrator, rtol, atol, t_out, singularities == "stop", max_steps)
    run.start(q, v, dt, max_step)
    try:
        run.loop(t_end, repartition, repartition_cond, progress)
    except KeyboardInterrupt as e:
        run.interrupted(e)
    run.finish()
    return run.trajectory(True, "completed")


def warm_up():
    """Compile (or load) what the README's first command runs: the four-bar's build,
    its augmented dynamics and the compiled simulation loop (a background build's
    workload, ``loopdyn.kernels.tiers.WORKLOAD``)."""
    from loopdyn.examples import four_bar

    simulate(four_bar(), t_end=1e-3, t_eval=2, method="augmented", compiled=True)


def check_arguments(
    method="augmented", integrator="DOP853", stabilization="projection", t_end=1.0, rtol=1e-8,
    atol=1e-8, dt=None, max_step=np.inf, baumgarte=(10.0, 10.0), repartition_cond=10.0,
    constraint_tol=1e-12, singularities="stop", max_steps=1_000_000, t_eval=None,
    max_outputs=MAX_OUTPUTS, names=None,
):  # fmt: skip
    """The arguments of ``simulate`` checked (ValueError naming the culprit) and
    normalised: a dict of ``t_end``, ``rtol``, ``atol``, ``dt``, ``max_step``,
    ``gains``, ``repartition_cond``, ``constraint_tol``, ``t_out`` (output times).
    Cheap, compiles nothing: the command line calls it before any work.  ``names``:
    how the messages name the arguments (``{"t_end": "--t-end", ...}``; an argument
    mapped to None has no name there: its hint is left out)."""
    names = {} if names is None else names

    def n(arg):
        return names.get(arg, arg)

    if method not in dynamics.METHODS:
        raise ValueError(f"unknown method {method!r}; available: {', '.join(dynamics.METHODS)}")
    if integrator not in INTEGRATORS:
        raise ValueError(f"unknown integrator {integrator!r}; available: {', '.join(INTEGRATORS)}")
    if stabilization not in STABILIZATIONS:
        raise ValueError(
            f"unknown stabilization {stabilization!r}; available: {', '.join(STABILIZATIONS)}"
        )
    t_end = _positive(t_end, n("t_end"))
    rtol, atol = _positive(rtol, n("rtol")), _positive(atol, n("atol"))
    constraint_tol = _positive(constraint_tol, "constraint_tol")
    max_step = _positive(max_step, "max_step", finite=False)
    gains = _gains(baumgarte)
    repartition_cond = _positive(repartition_cond, "repartition_cond")
    if singularities not in ("stop", "pass"):
        raise ValueError(f"singularities must be 'stop' or 'pass', got {singularities!r}")
    if isinstance(max_steps, bool) or not isinstance(max_steps, (int, np.integer)) or max_steps < 1:
        raise ValueError(f"max_steps must be a positive integer, got {max_steps!r}")
    if (
        isinstance(max_outputs, bool)
        or not isinstance(max_outputs, (int, np.integer))
        or max_outputs < 2
    ):
        raise ValueError(f"max_outputs must be an integer >= 2, got {max_outputs!r}")
    if integrator == "RK4":
        dt = 1e-3 if dt is None else _positive(dt, n("dt"))
        if t_end / dt > max_steps:
            raise ValueError(
                f"{n('t_end')} / {n('dt')} = {t_end / dt:.3g} RK4 steps exceed max_steps = "
                f"{max_steps}; raise {n('dt')} or max_steps"
            )
    elif dt is not None:
        raise ValueError(
            "dt is the step of the fixed-step RK4; adaptive integrators take rtol, atol, max_step"
        )
    return dict(
        t_end=t_end, rtol=rtol, atol=atol, dt=dt, max_step=max_step, gains=gains,
        repartition_cond=repartition_cond, constraint_tol=constraint_tol,
        t_out=_output_times(t_end, t_eval, max_outputs, n("t_eval"), n("max_outputs")),
    )  # fmt: skip


class _NotFinite(Exception):
    pass


def _rk4_hint(stepper):
    """What to add to a failure of a fixed-step RK4 run: with no error control a step
    too long for the motion lands anywhere (random mechanisms at dt = 1e-3 with |v| ~
    100: energy off by 14 %, a mass matrix evaluated far off the motion, velocities
    that overflow), so the step may be the cause; '' for the adaptive integrators."""
    if not isinstance(stepper, RK4Stepper):
        return ""
    return (
        f"; or the fixed RK4 step dt = {stepper.dt:g} s is too long for the motion here: a "
        "smaller dt, or an adaptive integrator, tells which"
    )


def _named(model, message):
    """``message`` prefixed with the model name unless it already starts with it."""
    return message if message.startswith(f"{model.name}:") else f"{model.name}: {message}"


class _Run:
    """The integration loop: steps, outputs, stabilisation, failures."""

    def __init__(self, system, integrator, rtol, atol, t_out, stop_at_singularities, max_steps):
        self.system = system
        self.monitor = stop_at_singularities
        self.max_steps = max_steps
        self.integrator = integrator
        self.rtol, self.atol = rtol, atol
        self.t_out = t_out
        self.T, self.Q, self.V = [], [], []
        self.stats = dict(
            steps=0, nfev=0, projections=0, repartitions=[], restarts=0, compiled=False
        )
        self.stats["wall_time"] = 0.0

    def record(self, t, q, v):
        self.T.append(float(t))
        self.Q.append(np.array(q))
        self.V.append(np.array(v))

    def start(self, q, v, dt, max_step):
        sy = self.system
        self.wall0 = time.perf_counter()
        self.stepper = None
        self.last = (0.0, q, v)
        self.k = 0
        if self.t_out[0] == 0.0:
            self.record(0.0, q, v)
            self.k = 1
        with self.guard():
            if self.monitor:
                sy.mobility_start(q)
            y = sy.start(q, v)
            if self.integrator == "RK4":
                self.stepper = RK4Stepper(sy.fun, 0.0, y, self.t_out[-1], dt, self.t_out)
            else:
                self.stepper = ScipyStepper(
                    self.integrator, sy.fun, 0.0, y, self.t_out[-1], self.rtol, self.atol,
                    max_step, None,
                )  # fmt: skip

    def finish(self):
        self.stats["wall_time"] = time.perf_counter() - self.wall0
        if self.stepper is not None:
            self.stats["nfev"] = self.stepper.total_nfev
            self.stats["restarts"] = self.stepper.restarts

    @contextmanager
    def guard(self):
        """Failures at the initial state: raised like those of a step."""
        model = self.system.model
        try:
            yield
        except SingularityError as e:
            self.fail(SimulationSingularityError, _named(model, str(e)), e)
        except (ArithmeticError, ValueError, np.linalg.LinAlgError, LoopdynError) as e:
            self.fail(SimulationError, _named(model, f"{type(e).__name__}: {e}"), e)

    def trajectory(self, completed, message):
        return evaluate_trajectory(
            self.system, self.T, self.Q, self.V, self.stats, self.integrator, self.rtol,
            self.atol, completed, message,
        )  # fmt: skip

    def interrupted(self, cause):
        """Ctrl-C: raise ``SimulationInterrupted`` with the motion up to the last accepted
        step (outputs of a step in progress are dropped)."""
        t = self.last[0]
        keep = sum(1 for tk in self.T if tk <= t)
        del self.T[keep:], self.Q[keep:], self.V[keep:]
        self.fail(SimulationInterrupted, f"{self.system.model.name}: interrupted (Ctrl-C)", cause)

    def fail(self, exc_type, message, cause=None):
        """Raise ``exc_type`` carrying the trajectory so far and the last accepted state."""
        t, q, v = self.last
        self.finish()
        if not self.T or self.T[-1] < t:
            self.record(t, q, v)
        cond = self.system.condition(q)
        message = f"{message}; stopped at t = {t:.6g} s (condition number {cond:.3g})"
        traj = self.trajectory(False, message)
        raise exc_type(message, trajectory=traj, t=t, q=q, v=v, condition=cond) from cause

    def step(self, repartition, repartition_cond):
        """One accepted step: outputs inside it, then the stabilised end state."""
        sy, st, t_out = self.system, self.stepper, self.t_out
        t0 = self.last[0]
        st.step()
        y = st.y
        if not np.all(np.isfinite(y)):
            raise _NotFinite
        # outputs strictly inside the step, from the dense output in the step's chart
        while self.k < t_out.size and t_out[self.k] < st.t:
            qk, vk = sy.full(st.dense(t_out[self.k]))
            if sy.mode == "projection":
                qk, vk, _ = sy.project(qk, vk)
            self.record(t_out[self.k], qk, vk)
            self.k += 1
        # the end of the step, stabilised; the chart is re-anchored there (every step,
        # or when far from the anchor if a change of state restarts the integrator)
        q, v = sy.full(y)
        if sy.reduced and sy.orientation_at(q) != sy.orientation:
            # det J_d changed sign within the step: the independent coordinates passed a
            # singular configuration, and the step's states past it are not the motion
            raise SingularityError(
                f"{sy.model.name}: the dependent block J_d (coordinates {sy.dep.tolist()}) "
                f"became singular between t = {t0:.6g} and {st.t:.6g} s (det J_d changed "
                f"sign): the independent coordinates {sy.ind.tolist()} cannot pass it"
            )
        changed = not sy.chart.euclid and (
            st.cheap or np.abs(sy.guess if sy.reduced else y[: sy.nv]).max(initial=0.0) > 0.5
        )
        if sy.mode == "projection":
            # LSODA restarts on every change of state: project only at 100 atol
            q, v, moved = sy.project(q, v, 0.0 if st.cheap else 100.0 * self.atol)
            self.stats["projections"] += int(moved)
            changed = changed or moved
        if self.monitor:
            sy.mobility_crossed(q, t0, st.t)
        if sy.reduced and repartition:
            cond = sy.condition(q)
            if cond > repartition_cond:
                ind, dep, rows, new = sy.candidate(q)
                if not np.array_equal(ind, sy.ind) and new < 0.5 * cond:
                    sy.ind, sy.dep, sy.rows, sy.cond = ind, dep, rows, new
                    sy.orientation = sy.orientation_at(q)
                    self.stats["repartitions"].append((float(st.t), ind.tolist()))
                    st.restart(sy.fun, st.t, sy.state(q, v))
                    changed = False
        if changed:
            st.modify(sy.state(q, v))
        return q, v

    def loop(self, t_end, repartition, repartition_cond, progress):
        sy, st, model = self.system, self.stepper, self.system.model
        retried_at, retries = None, 0
        while st.t < t_end:
            t0, n0, k0 = self.last[0], len(self.T), self.k
            if self.stats["steps"] >= self.max_steps:
                self.fail(
                    SimulationError,
                    f"{model.name}: max_steps = {self.max_steps} integrator steps reached at "
                    f"t = {self.last[0]:.6g} s of {t_end:.6g}; raise max_steps, or the step "
                    "size (rtol, atol, dt) if that is what keeps the steps small",
                )
            try:
                q, v = self.step(repartition, repartition_cond)
            except MobilityChange as e:
                del self.T[n0:], self.Q[n0:], self.V[n0:]
                self.k = k0
                self.fail(SimulationSingularityError, str(e) + _rk4_hint(st), e)
            except SingularityError as e:
                # outputs the failed step recorded inside it are not on the motion
                del self.T[n0:], self.Q[n0:], self.V[n0:]
                self.k = k0
                if retried_at != t0:
                    retried_at, retries = t0, 0
                retries += 1
                # a trial stage (or an output) is singular: from the last accepted state,
                # with partitioning choose new independent coordinates (once per step; a
                # partition's singular J_d is not passed with smaller steps), else, with an
                # adaptive integrator, retry with a quarter of the step up to STAGE_RETRIES
                # times: a trial step too long for the motion puts its stages far off the
                # constraint manifold (|Φ| 1.2 at rtol = 1e-4 on an RSSR with a duplicate
                # closure), where dependent closure rows no longer hold
                _, q0, v0 = self.last
                again = not (sy.reduced or isinstance(st, RK4Stepper)) and retries <= STAGE_RETRIES
                if sy.reduced and repartition and retries == 1:
                    old = sy.ind
                    sy.set_partition(q0)
                    if not np.array_equal(old, sy.ind):
                        self.stats["repartitions"].append((float(t0), sy.ind.tolist()))
                    again = True
                if again:
                    st.restart(sy.fun, t0, sy.state(q0, v0), 0.25 * st.h)
                    continue
                self.fail(SimulationSingularityError, _named(model, str(e)) + _rk4_hint(st), e)
            except IntegratorFailure as e:
                cond = sy.condition(self.last[1])
                kind = SimulationSingularityError if cond > 1e8 else SimulationError
                self.fail(kind, f"{model.name}: the {self.integrator} integrator failed ({e})", e)
            except _NotFinite:
                self.fail(
                    SimulationError,
                    f"{model.name}: the state is not finite after a step" + _rk4_hint(st),
                )
            except (ArithmeticError, ValueError, np.linalg.LinAlgError, LoopdynError) as e:
                msg = _named(model, f"{type(e).__name__}: {e}")
                self.fail(SimulationError, msg + _rk4_hint(st), e)
            self.stats["steps"] += 1
            self.last = (st.t, q, v)
            if self.k < self.t_out.size and self.t_out[self.k] == st.t:
                self.record(st.t, q, v)
                self.k += 1
            if progress is not None:
                progress(st.t, t_end)
