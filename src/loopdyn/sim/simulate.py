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
from contextlib import contextmanager, suppress

import numpy as np
from numba import njit

from loopdyn.analysis.assembly import assemble, complete_velocity, partition
from loopdyn.errors import (
    LoopdynError,
    SimulationError,
    SimulationSingularityError,
    SingularityError,
)
from loopdyn.kinematics.closures import closure_residual, constraint_rank, constraints
from loopdyn.kinematics.configuration import integrate
from loopdyn.methods import dynamics
from loopdyn.model.joints import FREE, SPHERICAL
from loopdyn.sim.trajectory import Trajectory
from loopdyn.tree import crba
from loopdyn.validation import configuration, vector

INTEGRATORS = ("RK45", "DOP853", "Radau", "BDF", "LSODA", "RK4")
STABILIZATIONS = ("none", "baumgarte", "projection", "partitioning")


# ---------------------------------------------------------------- the chart
@njit(cache=True)
def _hat(w0, w1, w2):
    return np.array([[0.0, -w2, w1], [w2, 0.0, -w0], [-w1, w0, 0.0]])


@njit(cache=True)
def _so3_jr_inv(P, th2):
    """J_r(φ)⁻¹ = I + ½ φ^ + c φ^² (P = φ^, θ² = |φ|²)."""
    if th2 < 0.04:
        c = 1.0 / 12.0 + th2 * (1.0 / 720.0 + th2 * (1.0 / 30240.0 + th2 / 1209600.0))
    else:
        th = np.sqrt(th2)
        c = 1.0 / th2 - (1.0 + np.cos(th)) / (2.0 * th * np.sin(th))
    return np.eye(3) + 0.5 * P + c * (P @ P)


@njit(cache=True)
def _se3_q(P, R, th2):
    """Barfoot's Q(ρ, φ) of the SE(3) left Jacobian (P = φ^, R = ρ^)."""
    if th2 < 0.04:
        a = 1.0 / 6.0 - th2 * (1.0 / 120.0 - th2 * (1.0 / 5040.0 - th2 / 362880.0))
        b = 1.0 / 24.0 - th2 * (1.0 / 720.0 - th2 * (1.0 / 40320.0 - th2 / 3628800.0))
        c = 1.0 / 120.0 - th2 * (1.0 / 2520.0 - th2 * (1.0 / 120960.0 - th2 / 9979200.0))
    else:
        th = np.sqrt(th2)
        s, co = np.sin(th), np.cos(th)
        a = (th - s) / (th2 * th)
        b = (th2 + 2.0 * co - 2.0) / (2.0 * th2 * th2)
        c = (2.0 * th - 3.0 * s + th * co) / (2.0 * th2 * th2 * th)
    PR = P @ R
    RP = R @ P
    PRP = PR @ P
    PP = P @ P
    return (
        0.5 * R + a * (PR + RP + PRP) + b * (PP @ R + R @ PP - 3.0 * PRP) + c * (PRP @ P + P @ PRP)
    )


@njit(cache=True)
def chart_rate_kernel(topo, delta, v, out):
    """out = δ̇ for q = q_a ⊕ δ moving with velocity v: δ̇ = J_r(δ)⁻¹ v, joint by joint.

    Spherical: SO(3), δ = φ, v = ω (body frame).  Free: SE(3), δ = [φ; ρ], v = [ω; u]
    (body twist, ld.integrate's convention); J_r(δ) = J_l(-δ) = [[A, 0], [Q, A]] with
    A = J_r(φ) of SO(3) and Q = Barfoot's Q(-ρ, -φ), so δ̇_φ = A⁻¹ω and
    δ̇_ρ = A⁻¹(u - Q δ̇_φ).  Other joints: δ̇ = v.
    """
    for i in range(topo.shape[0]):
        jt, iv, nvj = topo[i, 1], topo[i, 3], topo[i, 5]
        if jt == SPHERICAL or jt == FREE:
            p0, p1, p2 = delta[iv], delta[iv + 1], delta[iv + 2]
            th2 = p0 * p0 + p1 * p1 + p2 * p2
            Ainv = _so3_jr_inv(_hat(p0, p1, p2), th2)
            w = Ainv @ v[iv : iv + 3]
            out[iv], out[iv + 1], out[iv + 2] = w[0], w[1], w[2]
            if jt == FREE:
                Q = _se3_q(
                    _hat(-p0, -p1, -p2), _hat(-delta[iv + 3], -delta[iv + 4], -delta[iv + 5]), th2
                )
                u = Ainv @ (v[iv + 3 : iv + 6] - Q @ w)
                out[iv + 3], out[iv + 4], out[iv + 5] = u[0], u[1], u[2]
        else:
            for k in range(nvj):
                out[iv + k] = v[iv + k]


@njit(cache=True)
def _gauss_solve(A, X):
    """X ← A⁻¹ X (A n×n, X n×k; A is overwritten): elimination with partial pivoting.

    Returns min/max |pivot| (0: singular)."""
    n = A.shape[0]
    pmin, pmax = np.inf, 0.0
    for c in range(n):
        p = c
        for r in range(c + 1, n):
            if abs(A[r, c]) > abs(A[p, c]):
                p = r
        a = abs(A[p, c])
        if not a > 0.0:
            return 0.0
        pmin, pmax = min(pmin, a), max(pmax, a)
        if p != c:
            for j in range(n):
                A[c, j], A[p, j] = A[p, j], A[c, j]
            for j in range(X.shape[1]):
                X[c, j], X[p, j] = X[p, j], X[c, j]
        for r in range(c + 1, n):
            f = A[r, c] / A[c, c]
            if f != 0.0:
                for j in range(c, n):
                    A[r, j] -= f * A[c, j]
                for j in range(X.shape[1]):
                    X[r, j] -= f * X[c, j]
    for c in range(n - 1, -1, -1):
        for j in range(X.shape[1]):
            t = X[c, j]
            for k in range(c + 1, n):
                t -= A[c, k] * X[k, j]
            X[c, j] = t / A[c, c]
    return pmin / pmax


@njit(cache=True)
def partition_kernel(J, Phi, rows, ind, dep, d, v, G, tol):
    """One Newton step of generalized coordinate partitioning, in place.

    With J_d = J[rows, dep], J_i = J[rows, ind]: if max |Φ| > tol, d[dep] -= J_d⁻¹ Φ;
    always G = -J_d⁻¹ J_i and v[dep] = G v[ind].  Returns (max |Φ|, pivot ratio).
    """
    nr, ni = rows.shape[0], ind.shape[0]
    A = np.empty((nr, nr))
    X = np.empty((nr, ni + 1))
    err = 0.0
    for a in range(nr):
        r = rows[a]
        for b in range(nr):
            A[a, b] = J[r, dep[b]]
        X[a, 0] = Phi[r]
        for b in range(ni):
            X[a, b + 1] = J[r, ind[b]]
    for r in range(Phi.shape[0]):
        err = max(err, abs(Phi[r]))
    ratio = _gauss_solve(A, X)
    if ratio == 0.0:
        return err, ratio
    if err > tol:
        for a in range(nr):
            d[dep[a]] -= X[a, 0]
    for a in range(nr):
        s = 0.0
        for b in range(ni):
            G[a, b] = -X[a, b + 1]
            s += G[a, b] * v[ind[b]]
        v[dep[a]] = s
    return err, ratio


class _Chart:
    """q = integrate(q_a, δ); Euclidean models use q = δ directly."""

    def __init__(self, model, q):
        self.model = model
        self.euclid = not model.has_quaternions
        self.anchor = None if self.euclid else np.array(q, dtype=float)

    def delta(self, q):
        """Chart coordinates of q: q itself, or 0 after re-anchoring at q."""
        if self.euclid:
            return np.array(q, dtype=float)
        self.anchor = np.array(q, dtype=float)
        return np.zeros(self.model.nv)

    def q(self, delta):
        if self.euclid:
            return delta
        return integrate(self.model, self.anchor, delta)

    def rate(self, delta, v):
        if self.euclid:
            return v
        out = np.empty(self.model.nv)
        chart_rate_kernel(self.model.topo, delta, v, out)
        return out


# ----------------------------------------------------------- joint forces
def _tau_function(model, tau):
    """A callable (t, q, v) -> τ (nv,) from None, a constant or a controller."""
    nv, act = model.nv, model.actuated

    def expand(u, where):
        u = np.asarray(u, dtype=float)
        if u.shape == (nv,):
            return np.ascontiguousarray(u)
        if u.ndim == 0 and act.size == 1:
            u = u.reshape(1)
        if u.shape == (act.size,):
            out = np.zeros(nv)
            out[act] = u
            return out
        raise ValueError(
            f"{model.name}: tau {where}must have {nv} entries (one per coordinate) or "
            f"{act.size} (one per actuated coordinate {act.tolist()}), got shape {u.shape}"
        )

    if tau is None:
        zero = np.zeros(nv)
        return lambda t, q, v: zero
    if callable(tau):

        def controller(t, q, v):
            u = expand(tau(t, q, v), "returned by the controller ")
            if not np.all(np.isfinite(u)):
                raise FloatingPointError(f"the controller returned a non-finite tau at t = {t}")
            return u

        return controller
    const = expand(tau, "")
    if not np.all(np.isfinite(const)):
        raise ValueError(f"{model.name}: tau must be finite, got {const}")
    return lambda t, q, v: const


# ------------------------------------------------------------ the system
class _System:
    """Right-hand sides, reconstruction of full states, projections."""

    def __init__(self, model, method, tau_fn, stabilization, gains, tol, data, independent):
        self.model = model
        self.method = method
        self.tau_fn = tau_fn
        self.mode = stabilization
        self.alpha, self.beta = gains
        self.tol = tol
        self.data = data
        self.nv = model.nv
        self.closed = model.m > 0
        self.rows = None
        self.ind = self.dep = None
        self.cond = None
        self.orientation = 0.0  # sign of det J_d for the current partition
        self.G = None
        self._independent = independent

    # ---- setup at a consistent state
    def start(self, q, v):
        """Initial chart, partition and ODE state y."""
        self.chart = _Chart(self.model, q)
        if self.mode == "partitioning" and self.closed:
            self.set_partition(q, self._independent)
        return self.state(q, v)

    def candidate(self, q, independent=None):
        """(independent, dependent, rows, cond(J_d)) at q: ld.partition's or the given choice."""
        model = self.model
        rows = constraint_rank(model, q, data=self.data).independent
        if independent is None:
            part = partition(model, q, data=self.data)
            ind, dep = part.independent, part.dependent
        else:
            ind = np.unique(np.asarray(independent, dtype=np.int64).reshape(-1))
            dep = np.setdiff1d(np.arange(model.nv), ind)
        if dep.size != rows.size or np.any((ind < 0) | (ind >= model.nv)):
            raise ValueError(
                f"{model.name}: independent coordinates {ind.tolist()} do not fit the closures: "
                f"{model.nv - rows.size} independent coordinates (indices into v) are needed"
            )
        _, J, _ = constraints(model, q, data=self.data)
        try:
            cond = float(np.linalg.cond(J[np.ix_(rows, dep)]))
        except np.linalg.LinAlgError:
            cond = np.inf
        return ind, dep, rows, cond

    def set_partition(self, q, independent=None):
        self.ind, self.dep, self.rows, self.cond = self.candidate(q, independent)
        self.orientation = self.orientation_at(q)

    def orientation_at(self, q):
        """Sign of det J_d at q for the current partition (0 if J_d is singular).

        It flips where the independent coordinates cross a configuration at which
        they cannot parametrise the mechanism (a fold of q_d(q_i)); a step can jump
        over such a point, so the sign is compared from one accepted step to the next.
        """
        _, J, _ = constraints(self.model, q, data=self.data)
        return float(np.linalg.slogdet(J[np.ix_(self.rows, self.dep)])[0])

    def state(self, q, v):
        """ODE state y of the full state (q, v); re-anchors the chart at q."""
        d = self.chart.delta(q)
        if self.ind is not None:
            self.guess, self.G = d.copy(), None
            return np.concatenate([d[self.ind], v[self.ind]])
        return np.concatenate([d, v])

    @property
    def reduced(self):
        return self.ind is not None

    # ---- dependent coordinates (partitioning)
    def _dependent(self, y):
        """Full (δ, q, v) from the independent (δ_i, v_i): Newton on Φ = 0, then J v = 0.

        The starting guess is the last solution moved to first order,
        δ_d ≈ δ_d⁰ + G (δ_i - δ_i⁰) with G = -J_d⁻¹ J_i (the same G gives v_d = G v_i).
        """
        ind, dep, rows = self.ind, self.dep, self.rows
        ni = ind.size
        d = self.guess.copy()
        di = y[:ni]
        G = self.G
        if G is not None:
            d[dep] += G @ (di - d[ind])
        else:
            G = np.empty((dep.size, ni))
        d[ind] = di
        v = np.empty(self.nv)
        v[ind] = y[ni:]
        last = np.inf
        for _ in range(25):
            q = self.chart.q(d)
            Phi, J, _ = constraints(self.model, q, data=self.data)
            err, ratio = partition_kernel(J, Phi, rows, ind, dep, d, v, G, self.tol)
            if ratio < 1e-14:
                raise SingularityError(
                    f"{self.model.name}: the dependent block J_d (coordinates "
                    f"{dep.tolist()}) is singular (pivot ratio {ratio:.3g})"
                )
            if err <= self.tol or (err >= 0.5 * last and err <= 1e3 * self.tol):
                break
            last = err
        else:
            raise SingularityError(
                f"{self.model.name}: Newton's method for the dependent coordinates "
                f"{dep.tolist()} did not converge (max |Φ| = {err:.3g}); J_d is near singular"
            )
        self.guess, self.G = d, G
        return d, q, v

    def full(self, y):
        """(q, v) of the ODE state y."""
        if self.reduced:
            _, q, v = self._dependent(y)
            return np.array(q), v
        n = self.nv
        return np.array(self.chart.q(y[:n])), np.array(y[n:])

    # ---- right-hand sides
    def rhs(self, t, y):
        n = self.nv
        d, v = y[:n], y[n:]
        q = self.chart.q(d)
        res = dynamics.forward_dynamics(
            self.model, q, v, self.tau_fn(t, q, v), method=self.method, data=self.data
        )
        out = np.empty(2 * n)
        out[:n] = self.chart.rate(d, v)
        out[n:] = res.qdd
        if self.mode == "baumgarte" and self.closed:
            out[n:] += self.baumgarte(q, v)[0]
        return out

    def rhs_reduced(self, t, y):
        d, q, v = self._dependent(y)
        res = dynamics.forward_dynamics(
            self.model, q, v, self.tau_fn(t, q, v), method=self.method, data=self.data
        )
        ni = self.ind.size
        out = np.empty(2 * ni)
        out[:ni] = self.chart.rate(d, v)[self.ind]
        out[ni:] = res.qdd[self.ind]
        return out

    @property
    def fun(self):
        return self.rhs_reduced if self.reduced else self.rhs

    def baumgarte(self, q, v):
        """(Δq̈, Δλ) of J q̈ = γ - 2α J v - β² Φ: Δq̈ = M⁻¹Jᵀ S⁻¹ c, Δλ = S⁻¹ c."""
        Phi, J, _ = constraints(self.model, q, data=self.data)
        if self.rows is None:
            self.rows = constraint_rank(self.model, q, data=self.data).independent
        Jr = J[self.rows]
        c = -2.0 * self.alpha * (Jr @ v) - self.beta**2 * Phi[self.rows]
        M = crba(self.model, q, data=self.data)
        X = np.linalg.solve(M, Jr.T)
        dl = np.linalg.solve(Jr @ X, c)
        lam = np.zeros(self.model.m)
        lam[self.rows] = dl
        return X @ dl, lam

    # ---- projection onto Φ = 0, J v = 0
    def project(self, q, v, threshold=0.0):
        """(q, v) on the position and velocity manifolds, and whether anything moved.

        Newton's method with minimum-norm steps Δq = -Jᵀ(J Jᵀ)⁻¹Φ (on the independent
        rows; the factor is kept while it converges), then v -= Jᵀ(J Jᵀ)⁻¹ J v with J
        at the projected q.  Nothing is done while max |Φ| and max |J v| stay below
        ``threshold``.
        """
        if not self.closed:
            return q, v, False
        if self.rows is None:
            self.rows = constraint_rank(self.model, q, data=self.data).independent
        rows, euclid = self.rows, not self.model.has_quaternions
        if threshold > 0.0:
            Phi, J, _ = constraints(self.model, q, data=self.data)
            if max(np.abs(Phi).max(), np.abs(J @ v).max()) <= threshold:
                return q, v, False
        moved = False
        last = np.inf
        P = None
        for _ in range(20):
            Phi, J, _ = constraints(self.model, q, data=self.data)
            err = np.abs(Phi).max()
            if err <= self.tol or (err >= 0.5 * last and err <= 1e3 * self.tol):
                break
            if P is None or err > 0.1 * last:
                P = self._pinv(J[rows])
            last = err
            dq = P @ Phi[rows]
            q = q - dq if euclid else integrate(self.model, q, -dq)
            moved = True
        else:
            raise SingularityError(
                f"{self.model.name}: projection onto the closures did not converge "
                f"(max |Φ| = {err:.3g})"
            )
        Jv = J[rows] @ v
        if np.abs(Jv).max() > self.tol * max(1.0, np.abs(v).max()):
            v = v - self._pinv(J[rows]) @ Jv
            moved = True
        return q, v, moved

    @staticmethod
    def _pinv(Jr):
        """Jᵀ(J Jᵀ)⁻¹ of full-row-rank rows Jr (the Moore–Penrose inverse)."""
        try:
            return Jr.T @ np.linalg.inv(Jr @ Jr.T)
        except np.linalg.LinAlgError:
            return np.linalg.pinv(Jr)

    # ---- diagnostics
    def condition(self, q):
        """Condition number of the constraint solve at q (J_d when partitioning)."""
        if not self.closed:
            return 1.0
        try:
            _, J, _ = constraints(self.model, q, data=self.data)
            if self.reduced:
                return float(np.linalg.cond(J[np.ix_(self.rows, self.dep)]))
            rows = self.rows if self.rows is not None else slice(None)
            return float(np.linalg.cond(J[rows] @ J[rows].T)) ** 0.5
        except (np.linalg.LinAlgError, ValueError, LoopdynError):
            return np.inf


# -------------------------------------------------------------- steppers
class _IntegratorFailure(Exception):
    pass


class _ScipyStepper:
    """One of scipy's OdeSolver classes driven step by step.

    ``cheap``: the state can be changed without restarting (all but LSODA, whose
    state lives in Fortran).
    """

    def __init__(self, name, fun, t0, y0, t_end, rtol, atol, max_step, first_step):
        self.name = name
        self.opts = dict(rtol=rtol, atol=atol, max_step=max_step)
        self.t_end = t_end
        self.nfev = 0
        self.restarts = 0
        self.cheap = name != "LSODA"
        self._new(fun, t0, y0, first_step)

    def _new(self, fun, t0, y0, first_step):
        self.fun = fun
        if first_step is not None:
            first_step = min(first_step, self.t_end - t0)
            first_step = first_step if first_step > 0 else None
        import scipy.integrate  # lazily: it costs ~0.1 s at import

        self.solver = getattr(scipy.integrate, self.name)(
            fun, t0, np.array(y0, dtype=float), self.t_end, first_step=first_step, **self.opts
        )
        self._dense = None

    @property
    def t(self):
        return self.solver.t

    @property
    def y(self):
        return self.solver.y

    @property
    def h(self):
        h = getattr(self.solver, "h_abs", None)
        return h if h else self.solver.step_size

    def step(self):
        self._dense = None
        msg = self.solver.step()
        if self.solver.status == "failed":
            raise _IntegratorFailure(msg or "integrator failure")

    def dense(self, t):
        if self._dense is None:
            self._dense = self.solver.dense_output()
        return self._dense(t)

    def modify(self, y):
        """Replace the current state (projection, re-anchoring) keeping the history.

        y = [positions; velocities] with position rates equal to the velocities
        (Euclidean coordinates or a fresh chart).  The one-step methods keep the
        last accelerations in f: they were evaluated at the unprojected state, a
        difference of the order of the projection, far below the tolerances.
        """
        s = self.solver
        y = np.array(y, dtype=float)
        if self.name in ("RK45", "DOP853", "Radau"):
            k = y.size // 2
            f = s.f.copy()
            f[:k] = y[k:]
            s.y = y
            s.f = f
        elif self.name == "BDF":
            # D[0] is the current value; the differences (history) are kept
            s.D[0] = y
            s.y = y
        else:
            self.restart(self.fun, s.t, y, 0.0)

    def restart(self, fun, t, y, h=None):
        """A fresh solver from (t, y) with first step ``h`` (default: the last one;
        0: the solver's own choice)."""
        h = self.h if h is None else (h or None)
        self.nfev += self.solver.nfev
        self.restarts += 1
        self._new(fun, t, y, h)

    @property
    def total_nfev(self):
        return self.nfev + self.solver.nfev


class _RK4Stepper:
    """Classical fixed-step RK4 whose steps end exactly on the output times."""

    def __init__(self, fun, t0, y0, t_end, dt, stops):
        self.fun = fun
        self.t = t0
        self.y = np.array(y0, dtype=float)
        self.t_end = t_end
        self.dt = dt
        self.stops = np.unique(np.append(stops[stops > t0], t_end))
        self.k = 0
        self.total_nfev = 0
        self.restarts = 0
        self.h = dt
        self.cheap = True

    def step(self):
        while self.stops[self.k] <= self.t:
            self.k += 1
        stop = self.stops[self.k]
        t, y, h, f = self.t, self.y, self.dt, self.fun
        if t + h >= stop - 1e-9 * h:
            h = stop - t
            t_new = stop
        else:
            t_new = t + h
        k1 = f(t, y)
        k2 = f(t + 0.5 * h, y + 0.5 * h * k1)
        k3 = f(t + 0.5 * h, y + 0.5 * h * k2)
        k4 = f(t + h, y + h * k3)
        self.total_nfev += 4
        self.y = y + (h / 6.0) * (k1 + 2.0 * k2 + 2.0 * k3 + k4)
        self.t = t_new

    def dense(self, t):  # pragma: no cover - steps always end on the output times
        raise AssertionError("RK4 steps end on the output times")

    def modify(self, y):
        self.y = np.array(y, dtype=float)

    def restart(self, fun, t, y, h=None):
        self.fun = fun
        self.t = t
        self.y = np.array(y, dtype=float)
        self.restarts += 1


# ------------------------------------------------------------- simulate
def _output_times(t_end, t_eval):
    if t_eval is None:
        t_eval = 501
    if isinstance(t_eval, (int, np.integer)):
        n = int(t_eval)
        if n < 2:
            raise ValueError("t_eval as a count needs at least 2 output times")
        return np.linspace(0.0, t_end, n)
    te = np.asarray(t_eval, dtype=float).reshape(-1)
    if te.size == 0 or np.any(np.diff(te) <= 0) or te[0] < 0 or te[-1] > t_end * (1 + 1e-12):
        raise ValueError("t_eval must be increasing times in [0, t_end]")
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
    progress=None,
    data=None,
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
      coordinates, indices into v, default from ``ld.partition``; re-selected
      when cond(J_d) > ``repartition_cond`` unless ``repartition=False``); see
      the module docstring.  ``constraint_tol``: Newton tolerance on max |Φ|
      (projection, partitioning) and on J v.
      ``t_eval``: output times (increasing, in [0, t_end]) or their number
      (default 501, evenly spaced).  ``progress(t, t_end)``: called after every
      step.

    Out: a :class:`loopdyn.Trajectory` at the output times (states, q̈, λ, τ,
    closure residuals, energy) with ``stats`` (steps, nfev, wall time,
    projections, repartitions).

    Raises :class:`loopdyn.SimulationSingularityError` (a ``SingularityError``)
    at a singular configuration it cannot pass, and
    :class:`loopdyn.SimulationError` when the integrator fails or the state stops
    being finite; both carry ``trajectory`` (computed so far), ``t``, ``q``,
    ``v`` and ``condition`` of the last accepted state.
    """
    if method not in dynamics.METHODS:
        raise ValueError(f"unknown method {method!r}; available: {', '.join(dynamics.METHODS)}")
    if integrator not in INTEGRATORS:
        raise ValueError(f"unknown integrator {integrator!r}; available: {', '.join(INTEGRATORS)}")
    if stabilization not in STABILIZATIONS:
        raise ValueError(
            f"unknown stabilization {stabilization!r}; available: {', '.join(STABILIZATIONS)}"
        )
    t_end = float(t_end)
    if not t_end > 0:
        raise ValueError(f"t_end must be positive, got {t_end}")
    if integrator == "RK4":
        dt = 1e-3 if dt is None else float(dt)
        if not dt > 0:
            raise ValueError(f"dt must be positive, got {dt}")
    elif dt is not None:
        raise ValueError(
            "dt is the step of the fixed-step RK4; adaptive integrators take rtol, atol, max_step"
        )
    d = model.data if data is None else data
    q = np.array(configuration(model, model.q0 if q0 is None else q0), dtype=float)
    v = np.zeros(model.nv) if v0 is None else np.array(vector(v0, model.nv, "v0", model))
    if consistent and model.m:
        if np.abs(closure_residual(model, q, data=d)).max() > constraint_tol:
            q = assemble(model, q, tol=constraint_tol, data=d)
        v = complete_velocity(model, q, v, data=d)
    t_out = _output_times(t_end, t_eval)
    mode = stabilization if model.m else "none"
    system = _System(
        model, method, _tau_function(model, tau), mode, tuple(float(g) for g in baumgarte),
        float(constraint_tol), d, independent,
    )  # fmt: skip
    if mode == "partitioning" and independent is not None:  # bad indices: a ValueError, now
        system.candidate(q, independent)
    if callable(tau):  # a controller returning the wrong shape is a ValueError, now
        with suppress(FloatingPointError):  # (not finite: a SimulationError, below)
            system.tau_fn(0.0, q.copy(), v.copy())
    run = _Run(system, integrator, rtol, atol, t_out)
    run.start(q, v, dt, max_step)
    run.loop(t_end, repartition, repartition_cond, progress)
    run.finish()
    return run.trajectory(True, "completed")


class _NotFinite(Exception):
    pass


def _named(model, message):
    """``message`` prefixed with the model name unless it already starts with it."""
    return message if message.startswith(f"{model.name}:") else f"{model.name}: {message}"


class _Run:
    """The integration loop: steps, outputs, stabilisation, failures."""

    def __init__(self, system, integrator, rtol, atol, t_out):
        self.system = system
        self.integrator = integrator
        self.rtol, self.atol = rtol, atol
        self.t_out = t_out
        self.T, self.Q, self.V = [], [], []
        self.stats = dict(steps=0, nfev=0, projections=0, repartitions=[], restarts=0)
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
            y = sy.start(q, v)
            if self.integrator == "RK4":
                self.stepper = _RK4Stepper(sy.fun, 0.0, y, self.t_out[-1], dt, self.t_out)
            else:
                self.stepper = _ScipyStepper(
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
        return _trajectory(
            self.system, self.T, self.Q, self.V, self.stats, self.integrator, self.rtol,
            self.atol, completed, message,
        )  # fmt: skip

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
            st.cheap or np.abs(sy.guess if sy.reduced else y[: sy.nv]).max() > 0.5
        )
        if sy.mode == "projection":
            # LSODA restarts on every change of state: project only at 100 atol
            q, v, moved = sy.project(q, v, 0.0 if st.cheap else 100.0 * self.atol)
            self.stats["projections"] += int(moved)
            changed = changed or moved
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
        retried_at = None
        while st.t < t_end:
            t0, n0, k0 = self.last[0], len(self.T), self.k
            try:
                q, v = self.step(repartition, repartition_cond)
            except SingularityError as e:
                # outputs the failed step recorded inside it are not on the motion
                del self.T[n0:], self.Q[n0:], self.V[n0:]
                self.k = k0
                # a trial stage (or an output) is singular: with partitioning, choose
                # new independent coordinates at the last accepted state, once per step
                if sy.reduced and repartition and retried_at != t0:
                    retried_at = t0
                    _, q0, v0 = self.last
                    old = sy.ind
                    sy.set_partition(q0)
                    if not np.array_equal(old, sy.ind):
                        self.stats["repartitions"].append((float(t0), sy.ind.tolist()))
                    st.restart(sy.fun, t0, sy.state(q0, v0), 0.25 * st.h)
                    continue
                self.fail(SimulationSingularityError, _named(model, str(e)), e)
            except _IntegratorFailure as e:
                cond = sy.condition(self.last[1])
                kind = SimulationSingularityError if cond > 1e8 else SimulationError
                self.fail(kind, f"{model.name}: the {self.integrator} integrator failed ({e})", e)
            except _NotFinite:
                self.fail(SimulationError, f"{model.name}: the state is not finite after a step")
            except (ArithmeticError, ValueError, np.linalg.LinAlgError, LoopdynError) as e:
                self.fail(SimulationError, _named(model, f"{type(e).__name__}: {e}"), e)
            self.stats["steps"] += 1
            self.last = (st.t, q, v)
            if self.k < self.t_out.size and self.t_out[self.k] == st.t:
                self.record(st.t, q, v)
                self.k += 1
            if progress is not None:
                progress(st.t, t_end)


# -------------------------------------------------------- post-processing
def _trajectory(system, T, Q, V, stats, integrator, rtol, atol, completed, message):
    """Evaluate q̈, λ, τ, residuals and energy at the recorded states."""
    from loopdyn.analysis.energy import total_energy

    model, d = system.model, system.data
    n = len(T)
    nv, m = model.nv, model.m
    qdd = np.full((n, nv), np.nan)
    lam = np.full((n, m), np.nan)
    tau = np.zeros((n, nv))
    rp = np.zeros(n)
    rv = np.zeros(n)
    energy = np.zeros(n)
    cond = np.ones(n)
    for i in range(n):
        q, v = Q[i], V[i]
        try:
            tau[i] = system.tau_fn(T[i], q, v)
        except Exception:  # a failing controller: keep the state, mark τ unknown
            tau[i] = np.nan
        try:
            res = dynamics.forward_dynamics(model, q, v, tau[i], method=system.method, data=d)
            qdd[i] = res.qdd
            if res.lam is not None and m:
                lam[i] = res.lam
            cond[i] = res.condition
            if system.mode == "baumgarte" and m:
                da, dl = system.baumgarte(q, v)
                qdd[i] += da
                lam[i] += dl
        except (LoopdynError, ValueError, ArithmeticError, np.linalg.LinAlgError):
            cond[i] = np.inf
        if m:
            Phi, J, _ = constraints(model, q, data=d)
            rp[i] = np.abs(Phi).max()
            rv[i] = np.abs(J @ v).max()
        energy[i] = total_energy(model, q, v, data=d)
    stats = dict(stats)
    return Trajectory(
        t=np.asarray(T, dtype=float),
        q=np.asarray(Q, dtype=float).reshape(n, model.nq),
        v=np.asarray(V, dtype=float).reshape(n, nv),
        qdd=qdd,
        lam=lam,
        tau=tau,
        residual_position=rp,
        residual_velocity=rv,
        energy=energy,
        condition=cond,
        model_name=model.name,
        method=system.method,
        integrator=integrator,
        stabilization=system.mode,
        rtol=float(rtol),
        atol=float(atol),
        stats=stats,
        completed=completed,
        message=message,
        model=model,
    )
