"""Consistent states: positions by Gauss–Newton / Levenberg–Marquardt on Φ(q) = 0,
velocities from J v = 0.

Generalized coordinate partitioning (``partition``) picks dependent coordinates as
the pivot columns of a column-pivoted QR of J; the rest are independent.

``assemble`` works on the closure rows Φ (m) and their exact tangent-space Jacobian J
(m × nv, J v = dΦ/dt; ``kinematics.closures.evaluate``) only: a step δ over the free
coordinates moves q to q ⊕ δ = ``integrate(model, q, δ)`` (quaternion joints have nq != nv).
"""

import logging
import time
from dataclasses import dataclass

import numpy as np

from loopdyn.errors import AssemblyError
from loopdyn.kinematics.closures import constraint_jacobian, evaluate, rank_tolerance
from loopdyn.kinematics.configuration import integrate_into
from loopdyn.validation import configuration, model_arg, scalar, vector, workspace

log = logging.getLogger("loopdyn.assembly")

# restarts of ``assemble`` when a start ends in a local minimum of |Φ|² away from a
# solution: the free coordinates of the guess moved uniformly by up to these radii (rad
# or m), in turn, from a fixed seed (the result is reproducible).  The 30 000 guesses
# of the seed-11 census (10 000 mechanisms, 0.1 from a solution) all close: 29 979 from
# the guess itself, the rest within 8 restarts (median 4 iterations, at most 396).
RESTARTS = 12
RESTART_RADII = (0.05, 0.1, 0.2)
# accepted at max |Φ| <= FLOOR · tol when no step reduces |Φ| any more (the rounding
# floor of the geometry)
FLOOR = 100.0
# default caps, scaled with the model: iterations per start (the guess and each restart;
# at most (1 + RESTARTS) times as many in all) and seconds of wall time in all
ITER_BASE, ITER_PER_V = 100, 2
TIME_BASE, TIME_PER_V, TIME_MAX = 2.0, 0.1, 60.0
LOG_EVERY = 2.0  # seconds between two progress messages (logger "loopdyn.assembly", INFO)
LINE_SEARCH = 8  # halvings of the Gauss–Newton step
ARMIJO = 1e-4  # its sufficient decrease of |Φ|², a fraction of the linear model's
LM_ACCEPT = 1e-4  # a damped step's least gain ratio (actual / predicted decrease of |Φ|²)
LM_MU0 = 1e-3  # first damping, relative to σ_max(J)²
LM_MU_MAX = 1e16  # ... and the largest: a stationary point of |Φ|²
STALL_WINDOW, STALL_GAIN = 32, 0.99  # a start stalls if |Φ| fell < 1 % in 32 iterations
# from this many closure rows on, the steps are solved sparsely (``_Sparse``: J Jᵀ by a
# sparse LU, O(nnz) per step on a ladder) instead of by a dense SVD of J (O(m² n): the
# whole build of spatial_ladder(1024), 3072 rows, took 52-223 s, nearly all in SVDs)
SPARSE_ROWS = 64
# a sparse step must solve its linear model to this relative residual, else the dense
# SVD takes that iteration (rank-deficient or ill-conditioned J: redundant closures,
# singular configurations, where the SVD leaves the dependent directions out)
SPARSE_RESIDUAL = 1e-9


def default_max_iter(model):
    """``assemble``'s default iteration cap per start: 100 + 2 nv."""
    return ITER_BASE + ITER_PER_V * model.nv


def default_time_limit(model):
    """``assemble``'s default wall-time cap: 2 s + 0.1 s per coordinate of v, at most
    a minute."""
    return min(TIME_BASE + TIME_PER_V * model.nv, TIME_MAX)


@dataclass(frozen=True)
class Partition:
    """Independent / dependent coordinates (indices into v) and the condition number of J_dep."""

    independent: np.ndarray
    dependent: np.ndarray
    condition: float


@dataclass(frozen=True)
class AssemblyInfo:
    """How ``assemble`` went (``return_info=True``, ``AssemblyError.info``, ``progress``).

    ``iterations``: Jacobian evaluations and SVDs so far, over every start;
    ``max_iterations``: the cap on them, (1 + ``RESTARTS``) ``max_iter``; ``starts``: the
    guess and the restarts begun; ``residual``: max |Φ| (the final one, or the current
    start's); ``elapsed``: seconds (a first call's numba compilation excluded);
    ``converged``; ``reason``: why the last start stopped (``"converged"``, ``"floor"``:
    no step reduces |Φ| <= 100 tol, ``"stationary"`` / ``"stalled"``: a local minimum of
    |Φ|², ``"iterations"``, ``"time"``, or ``"running"`` in a progress report).
    """

    iterations: int
    max_iterations: int
    starts: int
    residual: float
    elapsed: float
    converged: bool
    reason: str


def partition(model, q, data=None):
    """Choose independent coordinates automatically (generalized coordinate partitioning).

    Column-pivoted QR of J(q): the first rank(J) pivot columns are the dependent
    coordinates (the best-conditioned square block J_dep), the others independent.
    rank(J) is ``ld.constraint_rank``'s (``rank_tolerance``).  With a tolerance of its own
    (10 max(m, nv) ε on the QR's diagonal), at a state 3.6e-13 off the manifold, where a
    swapped duplicate closure's rows are independent to that order (σ_11 = 5.7e-13 =
    1e-13 σ_max), it found one dependent coordinate more than the independent rows, and a
    simulation's re-partitioning stopped there.
    """
    J = constraint_jacobian(model, q, data)
    if model.m == 0:
        return Partition(np.arange(model.nv), np.zeros(0, dtype=np.int64), 1.0)
    import scipy.linalg as sla  # lazily: scipy.linalg costs ~0.15 s at import

    _, _, piv = sla.qr(J, mode="economic", pivoting=True)
    sv_all = np.linalg.svd(J, compute_uv=False)
    rank = int(np.sum(sv_all > rank_tolerance(J.shape, sv_all)))
    dep = np.sort(piv[:rank])
    ind = np.sort(piv[rank:])
    sv = np.linalg.svd(J[:, dep], compute_uv=False)
    cond = float(sv[0] / sv[rank - 1]) if rank else 1.0
    return Partition(ind.astype(np.int64), dep.astype(np.int64), cond)


def fixed_coordinates(model, fixed):
    """Indices into v (sorted, int64) of ``fixed``: None (``model.actuated``), an index
    into v, a joint name (all its coordinates), or a list of them.  ValueError for an
    index out of range, :class:`ModelError` naming an unknown joint."""
    if fixed is None:
        return np.asarray(model.actuated, dtype=np.int64).reshape(-1)
    if isinstance(fixed, str | int | np.integer | np.str_):
        items = [fixed]
    elif isinstance(fixed, np.ndarray):
        items = fixed.ravel().tolist()
    else:
        items = list(fixed)
    out = []
    for x in items:
        if isinstance(x, str | np.str_):  # a joint: every coordinate of it
            sl = model.v_slice(model.joint_index(str(x)))
            out.extend(range(sl.start, sl.stop))
            continue
        if isinstance(x, float | np.floating) and float(x).is_integer():
            x = int(x)
        if isinstance(x, bool | np.bool_) or not isinstance(x, int | np.integer):
            raise ValueError(
                f"{model.name}: fixed must hold indices into v or joint names, got {x!r}"
            )
        if not 0 <= x < model.nv:
            raise ValueError(f"{model.name}: fixed indices must lie in 0..{model.nv - 1}, got {x}")
        out.append(int(x))
    return np.unique(np.asarray(out, dtype=np.int64))


def _free_columns(model, fixed):
    fixed = fixed_coordinates(model, fixed)
    mask = np.ones(model.nv, dtype=bool)
    mask[fixed] = False
    return np.flatnonzero(mask), fixed


def assemble(model, q_guess, fixed=None, tol=1e-12, max_iter=None, data=None, *,
             time_limit=None, progress=None, return_info=False):  # fmt: skip
    """Positions satisfying every closure, keeping the ``fixed`` coordinates.

    ``fixed``: the coordinates held at their guessed values: indices into v, joint names
    (all of a joint's coordinates), or a list mixing them (default: ``model.actuated``;
    pass ``[]`` to move every coordinate).  An unknown joint name raises
    :class:`ModelError` listing the joints.

    Each iteration evaluates Φ and J at q, takes the SVD of J's free columns and tries
    the Gauss–Newton step δ = -J⁺Φ (minimum norm: redundant closures, rank-deficient J,
    are fine), halved up to ``LINE_SEARCH`` times until |Φ|² falls by an Armijo fraction
    of its prediction (or max |Φ| falls); where none does, Levenberg–Marquardt steps
    δ = -(JᵀJ + μI)⁻¹JᵀΦ with μ raised until the gain ratio is positive enough (a trust
    region on |Φ|; the SVD serves every μ).  A start that ends in a local minimum of |Φ|²
    (no descent direction, or |Φ| down by less than 1 % in ``STALL_WINDOW``
    iterations) is followed by up to ``RESTARTS`` restarts from the guess with the free
    coordinates moved by up to 0.05, 0.1 or 0.2 (seeded: reproducible), keeping the best.
    Converged when ``max |Φ| <= tol``, or when no step reduces it and it is below
    100 ``tol`` (the rounding floor of the geometry).

    Bounded work: ``max_iter`` iterations per start (default ``default_max_iter``:
    100 + 2 nv), so at most (1 + ``RESTARTS``) ``max_iter`` in all, each one evaluation
    of Φ and J, one SVD and at most ~20 evaluations of Φ; and ``time_limit`` seconds of
    wall time in all (default ``default_time_limit``: 2 + 0.1 nv, at most 60;
    ``math.inf`` for none; a first call's numba compilation is not counted).
    ``progress(info)``, if given, is called before every iteration with an
    :class:`AssemblyInfo` (raise from it to stop); a run longer than 2 s also reports
    every 2 s on the logger ``"loopdyn.assembly"`` at INFO level (silent unless logging
    is configured, e.g. ``logging.basicConfig(level=logging.INFO)``).

    Returns q, or ``(q, info)`` with ``return_info=True``.  Raises
    :class:`AssemblyError` naming the closure with the largest residual |Φ_c|, by how
    much it stays open, the closures whose rows remain open, why it stopped and what to
    try; the error carries ``info``, ``q`` (the best configuration found) and ``closure``.
    """
    q = configuration(model, q_guess).copy()
    tol = scalar(tol, "tol", model, positive=True)
    if max_iter is None:
        max_iter = default_max_iter(model)
    if isinstance(max_iter, bool) or not isinstance(max_iter, int | np.integer) or max_iter < 1:
        raise ValueError(f"{model.name}: max_iter must be a positive integer, got {max_iter!r}")
    time_limit = default_time_limit(model) if time_limit is None else time_limit
    try:
        time_limit = float(time_limit)
    except (TypeError, ValueError):
        time_limit = np.nan
    if not time_limit > 0.0:  # NaN too
        raise ValueError(f"{model.name}: time_limit must be a positive number of seconds")
    free, fixed = _free_columns(model, fixed)
    if model.m == 0:
        info = AssemblyInfo(0, 0, 0, 0.0, 0.0, True, "converged")
        return (q, info) if return_info else q
    d = workspace(model, data)
    evaluate(model, q, None, True, d)  # compiled here on a first call: before the clock
    integrate_into(model.topo, q, np.zeros(model.nv), 1.0, np.empty(model.nq))
    run = _Run(model, int(max_iter), time_limit, progress)
    best = _start(model, q, free, tol, run, d)
    # a local minimum of |Φ|² (often a singular configuration of the loops): restarts
    # from the guess moved by up to RESTART_RADII on the free coordinates, seeded
    rng = np.random.default_rng(0)
    restarts = 0
    while best[1] > FLOOR * tol and free.size and restarts < RESTARTS and not run.spent():
        dv = np.zeros(model.nv)
        dv[free] = rng.uniform(-1.0, 1.0, free.size) * RESTART_RADII[restarts % len(RESTART_RADII)]
        restarts += 1
        res = _start(model, _moved(model, q, dv), free, tol, run, d)
        if res[1] < best[1]:
            best = res
    q_best, err, Phi, why = best
    if err <= FLOOR * tol:
        info = run.info(err, True, why)
        return (q_best, info) if return_info else q_best
    info = run.info(err, False, run.why or why)
    name, message = _open_message(
        model, Phi, err, tol, fixed, info, restarts, time_limit, int(max_iter)
    )
    raise AssemblyError(message, info=info, q=q_best, closure=name)


class _Run:
    """The budget of one ``assemble`` call (iterations, wall time) and its reports."""

    def __init__(self, model, per_start, time_limit, progress):
        self.model, self.per_start, self.progress = model, per_start, progress
        self.cap = per_start * (1 + RESTARTS)
        self.time_limit = time_limit
        self.iterations = self.starts = 0
        self.why = ""  # "iterations" or "time" once a cap stopped a start
        self.t0 = time.perf_counter()
        self.next_log = self.t0 + LOG_EVERY

    def spent(self):
        if self.iterations >= self.cap:
            self.why = "iterations"
        elif time.perf_counter() - self.t0 > self.time_limit:
            self.why = "time"
        return bool(self.why)

    def tick(self, err):
        """One more iteration at max |Φ| = err: progress and log reports."""
        self.iterations += 1
        if self.progress is not None:
            self.progress(self.info(err, False, "running"))
        now = time.perf_counter()
        if now >= self.next_log:
            self.next_log = now + LOG_EVERY
            log.info(
                "%s: assembling, start %d, iteration %d (cap %d), max |Φ| = %.3g, %.1f s",
                self.model.name, self.starts, self.iterations, self.cap, err, now - self.t0,
            )  # fmt: skip

    def info(self, err, converged, reason):
        elapsed = time.perf_counter() - self.t0
        return AssemblyInfo(
            self.iterations, self.cap, self.starts, float(err), elapsed, converged, reason
        )


def _moved(model, q, dv):
    """q ⊕ dv (``integrate`` without the checks: may overflow to inf)."""
    out = np.empty(model.nq)
    integrate_into(model.topo, q, dv, 1.0, out)
    return out


def _trial(model, q, dv, d):
    """(q ⊕ dv, |Φ|², max |Φ|) there; inf where the step overflows."""
    q_t = _moved(model, q, dv)
    if not np.all(np.isfinite(q_t)):
        return q_t, np.inf, np.inf
    Phi = evaluate(model, q_t, None, False, d).Phi
    f = float(Phi @ Phi)
    if not np.isfinite(f):
        return q_t, np.inf, np.inf
    return q_t, f, float(np.abs(Phi).max())


class _Sparse:
    """The steps of ``_start`` for a J of full row rank, without its SVD.

    With J = U S Vᵀ (m ≤ n, full row rank) and y = (J Jᵀ + μ I)⁻¹ Φ:
    the Levenberg–Marquardt step -V diag(s / (s² + μ)) Uᵀ Φ = -Jᵀ y, its residual
    Uᵀ Φ - S c = μ Uᵀ y (so the predicted decrease |Φ|² - |Φ + J δ|² = |Φ|² - μ² |y|²),
    and μ = 0 is the minimum-norm Gauss–Newton step, whose slope |Uᵀ Φ|² is |Φ|².  J Jᵀ
    is sparse (a row couples the coordinates of one loop) and factorised by SuperLU;
    ``gauss_newton`` returns None where its step misses J δ = -Φ by more than
    ``SPARSE_RESIDUAL`` (then the dense SVD decides, leaving dependent rows out)."""

    def __init__(self, J, Phi):
        from scipy import sparse

        self.J = sparse.csr_matrix(J)
        self.A = (self.J @ self.J.T).tocsc()
        self.Phi = Phi
        self.m = J.shape[0]
        # σ_max(J)² = λ_max(J Jᵀ), by power iteration (a scale for μ only)
        x = np.ones(self.m) / np.sqrt(self.m)
        lam = 0.0
        for _ in range(30):
            y = self.A @ x
            lam = float(np.linalg.norm(y))
            if lam == 0.0:
                break
            x = y / lam
        self.s0 = np.sqrt(lam)

    def _solve(self, mu):
        from scipy import sparse
        from scipy.sparse.linalg import splu

        A = self.A if mu == 0.0 else (self.A + mu * sparse.identity(self.m, format="csc"))
        try:
            return splu(A, permc_spec="MMD_AT_PLUS_A").solve(self.Phi)
        except RuntimeError:  # exactly singular
            return None

    def gauss_newton(self):
        """(δ, slope) of the minimum-norm Gauss–Newton step, or None (see the class)."""
        if self.s0 == 0.0:
            return None
        y = self._solve(0.0)
        if y is None or not np.all(np.isfinite(y)):
            return None
        dx = -(self.J.T @ y)
        res = np.linalg.norm(self.J @ dx + self.Phi)
        if not res <= SPARSE_RESIDUAL * np.linalg.norm(self.Phi):
            return None
        return dx, float(self.Phi @ self.Phi)

    def levenberg_marquardt(self, mu):
        """(δ, predicted decrease of |Φ|²) of the step damped by ``mu``, or None."""
        y = self._solve(mu)
        if y is None or not np.all(np.isfinite(y)):
            return None
        return -(self.J.T @ y), float(self.Phi @ self.Phi - mu * mu * (y @ y))


def _start(model, q, free, tol, run, d):
    """Gauss–Newton / Levenberg–Marquardt on ½|Φ(q ⊕ δ)|² over the free coordinates δ,
    from q: (q, max |Φ|, Φ, why it stopped)."""
    run.starts += 1
    w = evaluate(model, q, None, True, d)
    Phi, J = w.Phi.copy(), w.J[:, free]
    f, err = float(Phi @ Phi), float(np.abs(Phi).max())
    mu = 0.0  # the damping that last worked (0: none needed)
    dv = np.zeros(model.nv)
    history = []
    for _ in range(run.per_start):
        if err <= tol:
            return q, err, Phi, "converged"
        if run.spent():
            return q, err, Phi, run.why
        run.tick(err)
        history.append(f)
        if len(history) > STALL_WINDOW and f > STALL_GAIN**2 * history[-1 - STALL_WINDOW]:
            return q, err, Phi, "stalled"  # |Φ| down by less than 1 % in STALL_WINDOW
        # large J: the sparse steps where J has full row rank (``_Sparse``)
        sp = _Sparse(J, Phi) if J.shape[0] >= SPARSE_ROWS and J.shape[0] <= J.shape[1] else None
        gn = sp.gauss_newton() if sp is not None else None
        if gn is not None:
            dx, slope = gn
            s0 = sp.s0
        else:
            sp = None
            # J_free = U diag(s) Vᵀ; g: Φ along U.  Rows of J below the rank tolerance (a
            # redundant closure, a singular configuration) are left out of the step.
            U, s, Vt = np.linalg.svd(J, full_matrices=False)
            if s.size == 0 or not s[0] > 0.0:
                return q, err, Phi, "stationary"  # nothing free moves Φ
            s0 = s[0]
            g = U.T @ Phi
            keep = s > rank_tolerance(J.shape, s)
            gk = np.where(keep, g, 0.0)
            slope = float(gk @ gk)  # -½ d|Φ(q ⊕ α δ)|²/dα at α = 0 for the Gauss–Newton δ
            if np.sqrt(slope) <= 1e-12 * np.sqrt(f):
                return q, err, Phi, "stationary"  # Φ ⟂ range(J): no descent direction
            # 1. Gauss–Newton, minimum norm: δ = -V diag(1/s) gk, halved until |Φ|² falls
            #    by an Armijo fraction of its prediction, or max |Φ| falls
            dx = -(Vt.T @ np.divide(gk, s, out=np.zeros_like(s), where=keep))
        q_new = None
        alpha = 1.0
        for _ in range(LINE_SEARCH):
            dv[free] = alpha * dx
            q_t, f_t, e_t = _trial(model, q, dv, d)
            if f_t <= f - 2.0 * ARMIJO * alpha * slope or e_t < err:
                q_new = q_t
                mu /= 3.0
                break
            alpha *= 0.5
        if q_new is None and err <= FLOOR * tol:
            return q, err, Phi, "floor"  # the rounding floor: no step reduces |Φ|
        # 2. Levenberg–Marquardt: δ = -V diag(s / (s² + μ)) g, μ raised until the gain
        #    ratio (actual / linear-model decrease of |Φ|²) exceeds LM_ACCEPT; the
        #    accepted μ is then lowered as Nielsen's rule says
        if q_new is None:
            mu, nu = max(mu, LM_MU0 * s0**2), 2.0
            while True:
                lm = sp.levenberg_marquardt(mu) if sp is not None else None
                if lm is not None:
                    dx, pred = lm
                else:
                    c = s * g / (s * s + mu) if sp is None else None
                    if c is None:  # the sparse solve failed: the SVD from here on
                        U, s, Vt = np.linalg.svd(J, full_matrices=False)
                        g, sp = U.T @ Phi, None
                        c = s * g / (s * s + mu)
                    dx = -(Vt.T @ c)
                    r = g - s * c
                    pred = float(g @ g - r @ r)  # |Φ|² - |Φ + J δ|²
                dv[free] = dx
                q_t, f_t, _ = _trial(model, q, dv, d)
                gain = (f - f_t) / pred if pred > 0.0 else -1.0
                if gain >= LM_ACCEPT:
                    q_new = q_t
                    mu *= max(1.0 / 3.0, 1.0 - (2.0 * gain - 1.0) ** 3)
                    break
                mu, nu = mu * nu, 2.0 * nu
                if mu > LM_MU_MAX * s0**2 or np.abs(dx).max() <= 1e-15 * (1.0 + np.abs(q).max()):
                    return q, err, Phi, "stationary"
        q = q_new
        w = evaluate(model, q, None, True, d)
        Phi, J = w.Phi.copy(), w.J[:, free]
        f, err = float(Phi @ Phi), float(np.abs(Phi).max())
    return q, err, Phi, ("converged" if err <= tol else "iterations")


def _open_message(model, Phi, err, tol, fixed, info, restarts, time_limit, per_start):
    """(the closure with the largest residual, ``AssemblyError``'s message)."""
    still = []  # (|Φ_c|, closure, rows open, rows) of every closure left open
    for c, cname in enumerate(model.closures):
        rows = Phi[model.closure_rows[c]]
        n_open = int(np.sum(np.abs(rows) > tol))
        if n_open:
            still.append((float(np.linalg.norm(rows)), cname, n_open, rows.size))
    still.sort(key=lambda x: -x[0])
    res, name = still[0][:2]  # err > tol: one is open
    listing = "; ".join(f"{n!r} {k} of {r} rows, |Φ| = {x:.3g}" for x, n, k, r in still[:6])
    if len(still) > 6:
        listing += f"; {len(still) - 6} more"
    joint_of = {}
    for j, jn in enumerate(model.joint_names):
        sl = model.v_slice(j)
        joint_of.update(dict.fromkeys(range(sl.start, sl.stop), jn))
    held = ", ".join(f"{i} ({joint_of.get(int(i), '?')})" for i in fixed) or "none"
    if info.reason == "time":
        why = f"stopped at the time limit, time_limit={time_limit:.3g} s"
    elif info.iterations >= info.max_iterations:
        why = f"stopped at the iteration cap, {info.max_iterations} in all, max_iter={per_start}"
    elif info.reason == "iterations":
        why = f"the best start stopped at its cap, max_iter={per_start}"
    else:
        why = "each start ended in a local minimum of |Φ|"
    return name, (
        f"{model.name}: closure {name!r} stays open by {res:.3g} (max |Φ| = {err:.3g}, "
        f"tolerance {tol:.3g}) with coordinates [{held}] held fixed; rows still open: "
        f"{listing}.  {info.iterations} Gauss–Newton/Levenberg–Marquardt iterations in "
        f"{info.elapsed:.2g} s from the guess and {restarts} restarts within "
        f"{max(RESTART_RADII)} of it ({why}).  The loops may not close for these values: "
        "try another guess, nearer a closed configuration, or fewer fixed coordinates "
        "(fixed=[] moves every one)"
    )


def complete_velocity(model, q, v_guess, fixed=None, data=None):
    """Velocities with J(q) v = 0 keeping ``v[fixed]`` (default: the actuated ones).

    The other components are the minimum-norm correction of ``v_guess``; raises
    :class:`AssemblyError` if the fixed velocities are incompatible with the
    closures (e.g. two actuators of one loop given inconsistent rates).
    """
    v = vector(v_guess, model_arg(model).nv, "v", model).copy()
    if model.m == 0 or model.nv == 0:  # nothing to complete (nothing moves: J v = 0)
        return v
    free, fixed = _free_columns(model, fixed)
    J = constraint_jacobian(model, q, data)
    rhs = -J @ v
    dv = np.linalg.lstsq(J[:, free], rhs, rcond=None)[0]
    v[free] += dv
    res = np.abs(J @ v).max()
    scale = max(1.0, np.abs(v).max()) * max(1.0, np.abs(J).max())
    if res > 1e-9 * scale:
        raise AssemblyError(
            f"{model.name}: velocities of coordinates {list(fixed)} violate the closures "
            f"(residual {res:.3g}); they cannot all be prescribed independently"
        )
    return v
