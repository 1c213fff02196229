"""The system ``ld.simulate`` integrates, with its constraint stabilisation.

``System`` evaluates the right-hand sides (forward dynamics of any method, with
Baumgarte terms), reconstructs full states from the independent coordinates
(partitioning), and projects states onto Φ = 0 and J v = 0 (projection); the
modes are described in ``loopdyn.sim.simulate``.
"""

import numpy as np

from loopdyn.analysis.assembly import partition
from loopdyn.errors import LoopdynError, SingularityError
from loopdyn.kernels.tiers import kernel
from loopdyn.kinematics.closures import constraint_rank, constraints
from loopdyn.kinematics.configuration import integrate
from loopdyn.methods import dynamics
from loopdyn.sim.charts import Chart
from loopdyn.sim.partitioning import partition_kernel
from loopdyn.sim.trajectory import Trajectory
from loopdyn.tree import crba

STABILIZATIONS = ("none", "baumgarte", "projection", "partitioning")
# smallest σ_min / σ_max of the independent closure rows before a state counts as singular
MOBILITY_TOL = 1e-8


class MobilityChange(SingularityError):
    """The closures lost rank (a change of mobility): raised inside ``ld.simulate``."""


def tau_function(model, tau):
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


def partition_condition(J, rows, dep):
    """κ = σ_max(J_r) / σ_min(J_d) of a partition: the closure rows ``rows`` of J against
    their block J_d on the dependent coordinates ``dep`` (inf if J_d is singular).

    It bounds the amplification of the dependent coordinates' errors, δq_d = -J_d⁻¹ J_i
    δq_i, and is at least cond(J_d).  cond(J_d) alone is blind to a block that shrinks as
    a whole: a 1×1 J_d always has cond 1, and a planar closure whose dependent coordinate
    lost its hold on the row (|J_d| -> 0, random mechanism (5, 297)) was never
    re-partitioned; the velocities grew to 2e10 in 0.4 ms and the integrator failed."""
    Jr = J[rows]
    if not rows.size:
        return 1.0
    try:
        smin = np.linalg.svd(Jr[:, dep], compute_uv=False)[-1]
        smax = np.linalg.svd(Jr, compute_uv=False)[0]
    except np.linalg.LinAlgError:
        return np.inf
    return float(smax / smin) if smin > 0.0 else np.inf


class System:
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
        # RCR's own independent coordinates follow the chosen ones (ld.forward_dynamics)
        rcr_choice = method == "rcr" and independent is not None and self.closed
        self.fd_options = {"independent": independent} if rcr_choice else {}

    # ---- setup at a consistent state
    def start(self, q, v):
        """Initial chart, partition and ODE state y."""
        self.chart = Chart(self.model, q)
        if self.mode == "partitioning" and self.closed:
            self.set_partition(q, self._independent)
        elif self.closed:
            # the independent rows for projection and Baumgarte, chosen here: off the
            # constraint manifold (after a step) redundant rows are independent to first
            # order in |Φ|, and a swapped duplicate ball closure gave a fourth row of a
            # rank-3 set, whose near-singular J Jᵀ threw v off by 1e-8 a step
            self.rows = constraint_rank(self.model, q, data=self.data).independent
        return self.state(q, v)

    def candidate(self, q, independent=None):
        """(independent, dependent, rows, κ(J_d)) at q: ld.partition's or the given choice
        (κ: ``partition_condition``)."""
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
        return ind, dep, rows, partition_condition(J, rows, dep)

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
        if not dep.size:  # every row vacuous (rank 0): every coordinate independent
            d[ind] = di
            v = np.empty(self.nv)
            v[ind] = y[ni:]
            self.guess = d
            return d, self.chart.q(d), v
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
            err, ratio = kernel(partition_kernel)(J, Phi, rows, ind, dep, d, v, G, self.tol)
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
            self.model, q, v, self.tau_fn(t, q, v), method=self.method, data=self.data,
            **self.fd_options,
        )  # fmt: skip
        out = np.empty(2 * n)
        out[:n] = self.chart.rate(d, v)
        out[n:] = res.qdd
        if self.mode == "baumgarte" and self.closed:
            out[n:] += self.baumgarte(q, v)[0]
        return out

    def rhs_reduced(self, t, y):
        d, q, v = self._dependent(y)
        res = dynamics.forward_dynamics(
            self.model, q, v, self.tau_fn(t, q, v), method=self.method, data=self.data,
            **self.fd_options,
        )  # fmt: skip
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
        if not rows.size:  # every row vacuous (rank 0): nothing to project onto
            return q, v, False
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
        if np.abs(Jv).max() > self.tol * max(1.0, np.abs(v).max(initial=0.0)):
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

    # ---- a change of mobility
    def mobility_start(self, q):
        """Reference for ``mobility_crossed``: the independent closure rows at q, an
        orthonormal basis N of their null space (the motions the closures allow) and the
        sign of det [J; Nᵀ].  Raises SingularityError if the rows are (nearly) dependent
        at q already."""
        if not self.closed:
            return
        self.monitor_rows = constraint_rank(self.model, q, data=self.data).independent
        self._frame = self._mobility_frame(q, None)

    def _mobility_frame(self, q, N_ref):
        """(N, sign of det [J; Nᵀ], sign of det [J; N_refᵀ], how much worse the monitored
        rows are conditioned than J: their σ_r/σ_1 over J's) at q on the monitored rows;
        raise if J (every row) is near singular."""
        _, J, _ = constraints(self.model, q, data=self.data)
        Jr = J[self.monitor_rows]
        r = Jr.shape[0]
        _, sv, Vt = np.linalg.svd(Jr)
        own_ratio = sv[-1] / sv[0] if r and sv[0] > 0 else (1.0 if not r else 0.0)
        ratio = own_ratio
        if r and J.shape[0] > r:  # redundant rows: the closures' conditioning is J's
            s = np.linalg.svd(J, compute_uv=False)
            ratio = s[r - 1] / s[0] if s[0] > 0 else 0.0
        if ratio < MOBILITY_TOL:
            raise MobilityChange(
                f"{self.model.name}: the closures lose rank here (smallest/largest singular "
                f"value of the {r} independent rows of J: {ratio:.3g}): a singular "
                "configuration, where the mechanism changes mobility"
            )
        N = Vt[r:].T
        own = np.linalg.slogdet(np.vstack([Jr, N.T]))[0]
        ref = own if N_ref is None else np.linalg.slogdet(np.vstack([Jr, N_ref.T]))[0]
        return N, own, ref, own_ratio / max(ratio, np.finfo(float).tiny)

    def mobility_crossed(self, q, t0, t1):
        """Raise ``MobilityChange`` if the closures lost rank between the reference state
        and q, else make q the reference.

        det [J(q); N_refᵀ] is continuous along the motion and non-zero at the reference;
        it vanishes where J loses rank, so a change of its sign within a step means the
        step passed a singular configuration (even one no accepted state landed near).
        """
        if not self.closed:
            return
        N_old, sign_old, _, _ = self._frame
        N, own, ref, worse = self._mobility_frame(q, N_old)
        if ref != sign_old:
            raise MobilityChange(
                f"{self.model.name}: the closures lost rank between t = {t0:.6g} and "
                f"{t1:.6g} s (det [J; Nᵀ] changed sign: the motion passed a singular "
                "configuration, where the mechanism changes mobility and each method could "
                "continue on another branch)"
            )
        if worse < 0.5:
            # the rows chosen at the start (of redundant closures) lose rank where J does
            # not: a ball closure and its swapped duplicate, rows in two frames, degenerate
            # where those frames align, and det [J_r; Nᵀ] changed sign on a motion whose
            # J kept its conditioning (random mechanism (3, 106)).  The next step is
            # watched on the rows independent here.
            rows = constraint_rank(self.model, q, data=self.data).independent
            if rows.size == self.monitor_rows.size:
                self.monitor_rows = rows
                N, own, _, _ = self._mobility_frame(q, None)
        self._frame = (N, own, own, 1.0)

    # ---- diagnostics
    def condition(self, q):
        """Condition number of the constraint solve at q (κ(J_d) when partitioning)."""
        if not self.closed:
            return 1.0
        try:
            _, J, _ = constraints(self.model, q, data=self.data)
            if self.reduced:
                return partition_condition(J, self.rows, self.dep)
            rows = self.rows if self.rows is not None else slice(None)
            return float(np.linalg.cond(J[rows] @ J[rows].T)) ** 0.5
        except (np.linalg.LinAlgError, ValueError, LoopdynError):
            return np.inf


def evaluate_trajectory(system, T, Q, V, stats, integrator, rtol, atol, completed, message):
    """The :class:`Trajectory` of ``system`` at the states (T, Q, V): q̈, λ, τ, residuals
    and energy evaluated there (a failed evaluation: NaN q̈/λ, condition inf)."""
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
            res = dynamics.forward_dynamics(
                model, q, v, tau[i], method=system.method, data=d, **system.fd_options
            )
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
