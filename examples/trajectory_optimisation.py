"""Minimum-effort pick-and-place of the five-bar through closed-loop inverse dynamics.

    python examples/trajectory_optimisation.py                  # N = 16 nodes, 2 x 4 coefficients
    python examples/trajectory_optimisation.py --quick          # N = 8, 2 x 2 (the test runs this)
    python examples/trajectory_optimisation.py --plot out.png   # trajectories, torques, timings

Saha & Schiehlen's five-bar (``ld.examples.five_bar``, both proximal joints actuated)
carries its end-effector, the closure point where the two distal links meet (frame
``leg1_tip``), from a pick point to a place point in T seconds, at rest at both ends,
with the least effort ∫ |u|² dt, u the two motor torques.  scipy's SLSQP solves it twice:
with the analytic gradient below, then with scipy's own finite-difference gradient;
both runs are printed (cost, evaluations, wall time) and must reach the same optimum.

Motion.  The actuated angles y = q[a] (a = ``model.actuated``) are the decision
variables, τ = t / T:

    y(t) = y_pick + (y_place - y_pick) s(τ) + Σ_k c_k b_k(τ),   k = 0..K-1          (1)
    s(τ) = 3τ² - 2τ³,   b_k(τ) = 16 τ² (1 - τ)² P_k(2τ - 1)

(P_k Legendre), so y is at the pick and place angles with ẏ = 0 at both ends for any
coefficients c (K × 2; y_pick, y_place by inverse kinematics of the closure point); the
accelerations there are free (the optimum starts and stops with a torque step).  The
start point c = 0 is the cubic rest-to-rest motion in the actuated angles.  The other
coordinates d (the distal angles) follow from the closures Φ(q) = 0 (``ld.constraints``:
Φ, the Jacobian J = ∂Φ/∂q and γ = -J̇ v; Newton on q[d], continued along the time
nodes from the pick configuration, so the assembly branch is the pick's):

    Φ(q) = 0,  v = G ẏ,  q̈ = G ÿ + P γ,                                          (2)
    G = ∂q/∂y:  G[a] = I,  G[d] = -J_d⁻¹ J_a;   P (nv × m):  P[a] = 0,  P[d] = J_d⁻¹

(J_d, J_a: J's columns d, a; J_d is square and invertible away from the singular
configurations, checked).  The torques u = ``ld.inverse_dynamics(model, q, v, q̈)`` are
exact; the cost is Gauss–Legendre quadrature over N nodes t_i (weights w_i):

    F(c) = Σ_i w_i |u(t_i)|²  ≈  ∫_0^T |u|² dt.                                   (3)

Analytic gradient (the chain rule).  With ``d = ld.inverse_dynamics_derivatives(model,
q, v, q̈)`` the partials U_q = d.dtau_dq[a], U_v = d.dtau_dv[a], U_a = d.dtau_dqdd[a]
(all coordinates are revolute: the tangent perturbation q ⊕ δ is q + δ), the
derivatives of the motor torques along the closures are

    ∂u/∂y = U_q G + U_v V_y + U_a A_y,   ∂u/∂ẏ = U_v G + U_a A_ẏ,   ∂u/∂ÿ = U_a G      (4)

where V_y = ∂v/∂y (at fixed ẏ), A_y = ∂q̈/∂y, A_ẏ = ∂q̈/∂ẏ (at fixed ÿ) follow from
differentiating J v = 0 and the acceleration rows Φ̈(q, v, q̈) = J q̈ - γ = 0 along (2):

    V_y = -P H G,   A_y = -P (Φ̈_q G + Φ̈_v V_y),   A_ẏ = -P Φ̈_v G,                   (5)
    H = ∂(J v)/∂q = ½ Φ̈_v   (Φ̈ = J q̈ + (∂(J v)/∂q) v, and ∂(J v)/∂q = J̇ for a Φ(q)
                              on Euclidean coordinates: the symmetric Hessian of Φ)

Φ̈_q = ∂Φ̈/∂q and Φ̈_v = ∂Φ̈/∂v at fixed q̈ come from loopdyn's analytic forward-dynamics
derivatives: forward dynamics satisfies Φ̈(q, v, q̈_FD(q, v, τ)) = 0 identically in
(q, v, τ), so at τ = B u (the inverse dynamics' own torques, where q̈_FD = q̈)

    Φ̈_q = -J ∂q̈_FD/∂q,   Φ̈_v = -J ∂q̈_FD/∂v                                          (6)

(``ld.forward_dynamics_derivatives(model, q, v, tau).dqdd_dq, .dqdd_dv``).  Finally, by (1),
∂y(t_i)/∂c_k = b_k(τ_i) (per motor), ∂ẏ/∂c_k = b_k'/T, ∂ÿ/∂c_k = b_k''/T², and

    ∂F/∂c_k = Σ_i 2 w_i u_iᵀ (∂u/∂y b_k + ∂u/∂ẏ b_k'/T + ∂u/∂ÿ b_k''/T²)(t_i).        (7)

Checks, printed: the analytic gradient against a central finite difference of F at
the start point c = 0 (relative error < 1e-6); the two optimisations' costs and
trajectories; the final trajectory on a dense grid: closure residual and the
end-effector's distance to the place point.  The program exits with status 1 if a
check fails.

The derivative functions are a NumPy reference for now (tens of ms a call, see
docs/derivatives.md), so the analytic gradient costs more than scipy's finite
differences of the µs-cheap inverse dynamics; the printed speed-up is what it is today.
"""

import argparse
import sys
import time
from dataclasses import dataclass

import numpy as np
from numpy.polynomial import Polynomial
from numpy.polynomial import legendre as leg
from scipy.optimize import minimize

import loopdyn as ld

FRAME = "leg1_tip"  # the end-effector: the closure point, on leg 1's distal link
PICK = np.array([0.3, 0.9])  # m, world x-y (leg 1 pivots at the origin, leg 2 at (1.2, 0))
PLACE = np.array([1.4, 0.8])
T_MOVE = 1.0  # s
CLOSE_TOL = 1e-14  # Newton on the dependent angles: max |Φ| (m)
# SLSQP: both runs stop when F / F(0) changes by less than this between iterations
FTOL = 1e-12
# the two optima: both runs end with F / F(0) within ~FTOL of the minimum (superlinear
# convergence; scipy's forward differences, error ~1.5e-8 λ_max, move the minimiser by
# ~1.5e-8 κ with κ = λ_max / λ_min = 10..25 measured: negligible), so their costs agree
# to COST_RTOL = 1000 FTOL (margin); each run's coefficients are within
# sqrt(2 FTOL / λ_min) = 3e-6 of the minimiser (λ_min = 0.26 of the scaled Hessian,
# measured for K = 2, 3), so the two runs' angles within 2 K 3e-6 <= 2.4e-5 rad for
# K <= 4 (|b_k| <= 1): ANGLE_TOL = 1e-4 (measured 3e-8..3e-7)
COST_RTOL = 1e-9
ANGLE_TOL = 1e-4
GRAD_RTOL = 1e-6
# the cost of a trial motion outside the workspace, times F(0) (PickAndPlace.cost)
OUTSIDE_FACTOR = 1e3


def rest_to_rest_basis(K):
    """s (cubic, 0 → 1 with s' = 0 at both ends) and the K bubbles
    b_k = 16 τ² (1 - τ)² P_k(2τ - 1) (b = b' = 0 at both ends), polynomials in τ."""
    x = Polynomial([-1.0, 2.0])  # 2τ - 1
    bubble = 16.0 * Polynomial([0.0, 0.0, 1.0]) * Polynomial([1.0, -1.0]) ** 2
    bks = [bubble * Polynomial(leg.leg2poly(np.eye(K)[k]))(x) for k in range(K)]
    return Polynomial([0.0, 0.0, 3.0, -2.0]), bks


class PickAndPlace:
    """The optimisation problem (module doc): ``cost(c)`` (3), ``gradient(c)`` (7),
    ``states(t, c)`` the consistent (q, v, q̈) and torques along the motion (2)."""

    def __init__(self, model, q_pick, q_place, T, N, K):
        self.model, self.T, self.K = model, T, K
        self.a = np.asarray(model.actuated)
        self.d = np.setdiff1d(np.arange(model.nv), self.a)
        self.q_pick = q_pick
        self.y0, self.y1 = q_pick[self.a], q_place[self.a]
        self.s, self.bks = rest_to_rest_basis(K)
        tau, w = leg.leggauss(N)  # Gauss–Legendre on [-1, 1] → [0, T]
        self.t, self.w = 0.5 * T * (tau + 1.0), 0.5 * T * w
        self.B = self._basis(self.t)
        # the pick's assembly branch ("working mode"): the sign of det J_d, kept
        self.mode = np.sign(np.linalg.det(ld.constraint_jacobian(model, q_pick)[:, self.d]))
        self.n_cost = self.n_grad = self.n_out = 0
        self.time_cost = self.time_grad = 0.0
        self._cache = (None, None)

    def _basis(self, t):
        """(3, len(t), K): b_k, ḃ_k, b̈_k at times t (per second, per second²)."""
        tau = np.asarray(t) / self.T
        B = [[bk.deriv(r)(tau) / self.T**r for bk in self.bks] for r in range(3)]
        return np.array(B).transpose(0, 2, 1)

    def actuated(self, t, c, B=None):
        """y, ẏ, ÿ (len(t) × 2) of (1); c: K × 2 (or flat)."""
        c = np.reshape(c, (self.K, self.a.size))
        tau = np.asarray(t) / self.T
        B = self._basis(t) if B is None else B
        dy = self.y1 - self.y0
        ys = [self.s.deriv(r)(tau)[:, None] * dy / self.T**r for r in range(3)]
        ys[0] = ys[0] + self.y0
        return [ys[r] + B[r] @ c for r in range(3)]

    def _close(self, q, y):
        """Newton on q[d] with q[a] = y until max |Φ| <= CLOSE_TOL; returns (q, J)."""
        model = self.model
        q = q.copy()
        q[self.a] = y
        for _ in range(30):
            Phi, J, _ = ld.constraints(model, q)
            if np.abs(Phi).max() <= CLOSE_TOL:
                return q, J
            q[self.d] -= np.linalg.solve(J[:, self.d], Phi)
        raise ld.AssemblyError(
            f"{model.name}: the closure does not close at actuated angles {y} "
            f"(max |Φ| = {np.abs(Phi).max():.3g}): a singular or unreachable pose"
        )

    def states(self, t, c, B=None):
        """Consistent (q, v, q̈, u, J) at the increasing times t, (2) and the torques."""
        model, a, d = self.model, self.a, self.d
        y, dy, ddy = self.actuated(t, c, B)
        Q, V, A, U, JS = [], [], [], [], []
        q_prev, G_prev, y_prev = self.q_pick, None, self.y0
        for i in range(len(y)):
            guess = q_prev.copy()
            if G_prev is not None:  # first-order predictor along the motion
                guess = q_prev + G_prev @ (y[i] - y_prev)
            q, J = self._close(guess, y[i])
            Jd = J[:, d]
            if np.linalg.cond(Jd) > 1e8 or np.sign(np.linalg.det(Jd)) != self.mode:
                raise ld.SingularityError(
                    f"{model.name}: the motion crosses a singular configuration or leaves the "
                    f"pick's assembly branch (sign of det J_d) at t = {t[i]:.4g}"
                )
            G = np.zeros((model.nv, a.size))
            G[a] = np.eye(a.size)
            G[d] = -np.linalg.solve(Jd, J[:, a])
            v = G @ dy[i]
            gamma = ld.constraint_bias(model, q, v)
            qdd = np.zeros(model.nv)
            qdd[a] = ddy[i]
            qdd[d] = np.linalg.solve(Jd, gamma - J[:, a] @ ddy[i])
            u = ld.inverse_dynamics(model, q, v, qdd).tau[a]
            Q.append(q), V.append(v), A.append(qdd), U.append(u), JS.append(J)
            q_prev, G_prev, y_prev = q, G, y[i]
        return np.array(Q), np.array(V), np.array(A), np.array(U), np.array(JS)

    def _nodes(self, c):
        """The node states for c, cached (scipy asks for the cost and the gradient at
        the same point)."""
        c = np.array(c, dtype=float).ravel()
        if self._cache[0] is None or not np.array_equal(self._cache[0], c):
            self._cache = (c, self.states(self.t, c, self.B))
        return self._cache[1]

    def cost(self, c, outside=None):
        """F(c) of (3), N² m² s.  A motion that leaves the workspace (an actuated pose
        where the closure cannot close, or a crossing of a singular configuration, where
        F grows without bound) costs ``outside`` if given (the optimiser's line search
        then backs off), else raises the loopdyn error."""
        start = time.perf_counter()
        self.n_cost += 1
        try:
            U = self._nodes(c)[3]
        except (ld.AssemblyError, ld.SingularityError):
            if outside is None:
                raise
            self.n_out += 1
            return outside
        finally:
            self.time_cost += time.perf_counter() - start
        return float(self.w @ (U**2).sum(axis=1))

    def torque_sensitivities(self, q, v, qdd, J):
        """(∂u/∂y, ∂u/∂ẏ, ∂u/∂ÿ) (na × na each) at one consistent state, (4)-(6)."""
        model, a, d = self.model, self.a, self.d
        idd = ld.inverse_dynamics_derivatives(model, q, v, qdd)
        fdd = ld.forward_dynamics_derivatives(model, q, v, idd.tau, tangent=False)
        Phidd_q = -J @ fdd.dqdd_dq  # (6)
        Phidd_v = -J @ fdd.dqdd_dv
        H = 0.5 * Phidd_v  # (5): ∂(J v)/∂q
        P = np.zeros((model.nv, J.shape[0]))
        P[d] = np.linalg.inv(J[:, d])
        G = np.zeros((model.nv, a.size))
        G[a] = np.eye(a.size)
        G[d] = -P[d] @ J[:, a]
        V_y = -P @ H @ G
        A_y = -P @ (Phidd_q @ G + Phidd_v @ V_y)
        A_yd = -P @ Phidd_v @ G
        Uq, Uv, Ua = idd.dtau_dq[a], idd.dtau_dv[a], idd.dtau_dqdd[a]
        return Uq @ G + Uv @ V_y + Ua @ A_y, Uv @ G + Ua @ A_yd, Ua @ G  # (4)

    def gradient(self, c):
        """∂F/∂c of (7), flattened like c (K × 2)."""
        self.n_grad += 1
        start = time.perf_counter()
        Q, V, A, U, JS = self._nodes(c)
        g = np.zeros((self.K, self.a.size))
        for i in range(len(self.t)):
            du = self.torque_sensitivities(Q[i], V[i], A[i], JS[i])
            r = 2.0 * self.w[i] * U[i]
            # Σ_r (∂u/∂y^(r))ᵀ r ⊗ b_k^(r)(t_i)
            for k in range(3):
                g += np.outer(self.B[k, i], du[k].T @ r)
        self.time_grad += time.perf_counter() - start
        return g.ravel()


def inverse_kinematics(model, target, q):
    """A configuration with the closure closed and the end-effector at ``target``
    (x, y), by Newton on [Φ; p - target] over all coordinates, continued from q's own
    end-effector position in 20 steps (stays on q's assembly branch)."""
    p0 = ld.frame_placement(model, q, FRAME)[1][:2]
    q = np.array(q, dtype=float)
    for s in np.linspace(0.0, 1.0, 21)[1:]:
        goal = p0 + s * (target - p0)
        for _ in range(50):
            p = ld.frame_placement(model, q, FRAME)[1][:2]
            r = np.r_[ld.closure_residual(model, q), p - goal]
            if np.abs(r).max() <= CLOSE_TOL:
                break
            Jt = ld.frame_jacobian(model, q, FRAME)[3:5]
            q -= np.linalg.solve(np.vstack([ld.constraint_jacobian(model, q), Jt]), r)
        else:
            raise ld.AssemblyError(f"{model.name}: {FRAME} cannot reach {goal}")
    return q


@dataclass
class Run:
    """One SLSQP run: its result, wall time (s), the cost and gradient evaluations it
    asked for, the trial motions outside the workspace among them, the seconds spent in
    the cost and in the analytic gradient, and F at its end (N² m² s)."""

    res: object
    wall: float
    n_cost: int
    n_grad: int
    n_out: int
    time_cost: float
    time_grad: float
    F: float


def optimise(problem, c0, analytic, maxiter):
    """SLSQP on F / F(c0) from c0, with the analytic gradient or scipy's finite
    differences (``jac=None``: forward differences, one cost evaluation per variable)."""
    scale = problem.cost(c0)
    problem.n_cost = problem.n_grad = problem.n_out = 0
    problem.time_cost = problem.time_grad = 0.0
    problem._cache = (None, None)
    start = time.perf_counter()
    res = minimize(
        lambda c: problem.cost(c, outside=OUTSIDE_FACTOR * scale) / scale,
        c0,
        jac=(lambda c: problem.gradient(c) / scale) if analytic else None,
        method="SLSQP",
        options={"ftol": FTOL, "maxiter": maxiter},
    )
    wall = time.perf_counter() - start
    p = problem
    counts = (p.n_cost, p.n_grad, p.n_out, p.time_cost, p.time_grad)
    return Run(res, wall, *counts, problem.cost(res.x))


def gradient_check(problem, c, h=1e-5):
    """max |g_analytic - g_central| / max |g_central| at c (central differences of F,
    step h in each coefficient: truncation O(h²) ~ 1e-10, rounding ~ ε F / h ~ 1e-11)."""
    g = problem.gradient(c)
    fd = np.zeros_like(g)
    for j in range(c.size):
        e = np.zeros_like(c)
        e[j] = h
        fd[j] = (problem.cost(c + e) - problem.cost(c - e)) / (2 * h)
    return np.abs(g - fd).max() / np.abs(fd).max(), g, fd


def plot(path, problem, motions, t, runs):
    """The end-effector paths, actuated angles and motor torques of ``motions``
    (name: (c, line style)) over the times t, and the two runs' wall times."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(2, 2, figsize=(11, 8))
    for name, (c, style) in motions.items():
        Q, _, _, U, _ = problem.states(t, c)
        tips = np.array([ld.frame_placement(problem.model, q, FRAME)[1][:2] for q in Q])
        ax[0, 0].plot(tips[:, 0], tips[:, 1], style, label=name)
        for j, ja in enumerate(problem.a):
            lab = f"{problem.model.joint_names[ja]} ({name})"
            ax[0, 1].plot(t, Q[:, ja], style, color=f"C{j}", label=lab)
            ax[1, 0].plot(t, U[:, j], style, color=f"C{j}", label=lab)
    ax[0, 0].plot(*PICK, "ko", label="pick")
    ax[0, 0].plot(*PLACE, "ks", label="place")
    ax[0, 0].set(xlabel="x (m)", ylabel="y (m)", title=f"end-effector ({FRAME}) path")
    ax[0, 0].set_aspect("equal")
    ax[0, 1].set(xlabel="t (s)", ylabel="angle (rad)", title="actuated angles")
    ax[1, 0].set(xlabel="t (s)", ylabel="torque (N m)", title="motor torques")
    for a_ in (ax[0, 0], ax[0, 1], ax[1, 0]):
        a_.legend(fontsize=6, loc="best")
    names = list(runs)
    bars = ax[1, 1].bar(names, [runs[n].wall for n in names], color=["C2", "C3"])
    for b_, n in zip(bars, names, strict=True):
        r = runs[n]
        lab = f"{r.n_cost} cost + {r.n_grad} gradient" if r.n_grad else f"{r.n_cost} cost"
        ax[1, 1].annotate(f"{lab} evaluations\n{r.wall:.2f} s",
                          (b_.get_x() + b_.get_width() / 2, b_.get_height()),
                          ha="center", va="bottom", fontsize=8)  # fmt: skip
    speedup = runs["finite-difference"].wall / runs["analytic"].wall
    title = f"analytic vs finite-difference gradient: speed-up {speedup:.2f}x"
    ax[1, 1].set(ylabel="SLSQP wall time (s)", title=title)
    ax[1, 1].margins(y=0.15)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="N = 8, K = 2 (a test, < 30 s)")
    ap.add_argument("--nodes", type=int, default=None, help="quadrature nodes N")
    ap.add_argument("--coefficients", type=int, default=None, help="K per motor")
    ap.add_argument("--t-move", type=float, default=T_MOVE, help="duration T (s)")
    ap.add_argument("--plot", default=None, help="write a figure (PNG)")
    args = ap.parse_args(argv)
    N = args.nodes or (8 if args.quick else 16)
    K = args.coefficients or (2 if args.quick else 4)
    maxiter = 60 if args.quick else 200

    model = ld.examples.five_bar()
    q_pick = inverse_kinematics(model, PICK, model.q0)
    q_place = inverse_kinematics(model, PLACE, q_pick)
    problem = PickAndPlace(model, q_pick, q_place, args.t_move, N, K)
    c0 = np.zeros(K * problem.a.size)
    print(
        f"five-bar pick-and-place: {FRAME} from {PICK} to {PLACE} m in {args.t_move:g} s, "
        f"{N} Gauss-Legendre nodes, {K} coefficients per motor ({c0.size} variables)"
    )
    print(f"pick angles {np.round(q_pick, 4)}, place angles {np.round(q_place, 4)} rad")

    start = time.perf_counter()
    err, g, _ = gradient_check(problem, c0)
    print(f"gradient check at c = 0: relative error {err:.3e} "
          f"(|g| = {np.abs(g).max():.4g}, {time.perf_counter() - start:.2f} s)")  # fmt: skip

    F0 = problem.cost(c0)
    runs = {}
    for name, analytic in (("analytic", True), ("finite-difference", False)):
        r = runs[name] = optimise(problem, c0, analytic, maxiter)
        grads = f"{r.n_grad} gradient" if analytic else f"0 gradient (scipy: {r.res.njev} FD)"
        print(f"{name:>17} gradient: F = {r.F:.10g} N^2 m^2 s (start {F0:.6g}), "
              f"{r.res.nit} iterations, {r.n_cost} cost ({r.n_out} outside the workspace) and "
              f"{grads} evaluations, {r.wall:.2f} s "
              f"(in the cost {r.time_cost:.2f} s, in the analytic gradient {r.time_grad:.2f} s), "
              f"status {r.res.status} ({r.res.message})")  # fmt: skip

    ra, rf = runs["analytic"], runs["finite-difference"]
    t_dense = np.linspace(0.0, args.t_move, 201)
    ya, yf = problem.actuated(t_dense, ra.res.x)[0], problem.actuated(t_dense, rf.res.x)[0]
    dcost = abs(ra.F - rf.F) / abs(rf.F)
    dang = np.abs(ya - yf).max()
    print(f"same optimum: |ΔF| / F = {dcost:.3e} (tolerance {COST_RTOL:g}), "
          f"max |Δy| = {dang:.3e} rad (tolerance {ANGLE_TOL:g})")  # fmt: skip
    speedup = rf.wall / ra.wall
    print(f"wall time: analytic {ra.wall:.2f} s, finite-difference {rf.wall:.2f} s, "
          f"speed-up {speedup:.2f}x")  # fmt: skip
    per_node = ra.time_grad / max(ra.n_grad, 1) / N
    per_cost = rf.time_cost / max(rf.n_cost, 1)
    print(f"per call: analytic gradient {per_node * 1e3:.1f} ms per node "
          f"(ld.inverse_dynamics_derivatives + ld.forward_dynamics_derivatives), "
          f"cost {per_cost * 1e3:.2f} ms ({N} nodes)")  # fmt: skip
    fine = PickAndPlace(model, q_pick, q_place, args.t_move, 4 * N, K)
    print(f"quadrature: F at the optimum with {4 * N} nodes {fine.cost(ra.res.x):.10g} "
          f"({N} nodes: {ra.F:.10g})")  # fmt: skip

    Q, V, _, U, _ = problem.states(t_dense, ra.res.x)
    resid = max(np.abs(ld.closure_residual(model, q)).max() for q in Q)
    tip_end = ld.frame_placement(model, Q[-1], FRAME)[1][:2]
    miss = np.abs(tip_end - PLACE).max()
    print(f"final trajectory ({t_dense.size} samples): closure residual {resid:.3e} m, "
          f"end-effector to place point {miss:.3e} m, end speeds {np.abs(V[-1]).max():.1e}, "
          f"peak torques {np.round(np.abs(U).max(axis=0), 3)} N m")  # fmt: skip

    if args.plot:
        motions = {"start (cubic)": (c0, ":"), "optimum (analytic)": (ra.res.x, "-"),
                   "optimum (FD)": (rf.res.x, "--")}  # fmt: skip
        plot(args.plot, problem, motions, t_dense, runs)
        print(f"wrote {args.plot}")

    checks = {
        "gradient check": err < GRAD_RTOL,
        "both converged": ra.res.success and rf.res.success,
        "same cost": dcost < COST_RTOL,
        "same trajectory": dang < ANGLE_TOL,
        "closures": resid < 1e-9,
        "place reached": miss < 1e-9,
    }
    failed = [k for k, ok in checks.items() if not ok]
    print("checks:", "all passed" if not failed else "FAILED " + ", ".join(failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
