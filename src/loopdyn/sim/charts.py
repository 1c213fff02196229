"""Charts of the configuration manifold for the integrators: q = q_a ⊕ δ.

The state integrated is y = (δ, v) with q = integrate(q_a, δ) in a chart around an
anchor q_a; δ̇ = J_r(δ)⁻¹ v (the inverse right Jacobian of SO(3)/SE(3) for
spherical/free joints, the identity otherwise), re-anchored after every step
(Runge–Kutta–Munthe-Kaas): quaternions stay unit.  Models without spherical or
free joints use q itself (q_a = 0).
"""

import numpy as np
from numba import njit

from loopdyn.kernels.tiers import kernel
from loopdyn.kinematics.configuration import integrate
from loopdyn.model.joints import FREE, SPHERICAL


@njit(cache=True, inline="always")
def _cross(a, b):
    """a × b of 3-tuples."""
    return a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]


@njit(cache=True, inline="always")
def _so3_jr_inv_apply(p0, p1, p2, th2, x0, x1, x2):
    """J_r(φ)⁻¹ x = x + ½ φ × x + c φ × (φ × x) (θ² = |φ|²)."""
    if th2 < 0.04:
        c = 1.0 / 12.0 + th2 * (1.0 / 720.0 + th2 * (1.0 / 30240.0 + th2 / 1209600.0))
    else:
        th = np.sqrt(th2)
        c = 1.0 / th2 - (1.0 + np.cos(th)) / (2.0 * th * np.sin(th))
    p = (p0, p1, p2)
    a0, a1, a2 = _cross(p, (x0, x1, x2))
    b0, b1, b2 = _cross(p, (a0, a1, a2))
    return x0 + 0.5 * a0 + c * b0, x1 + 0.5 * a1 + c * b1, x2 + 0.5 * a2 + c * b2


@njit(cache=True, inline="always")
def _se3_q_apply(p0, p1, p2, r0, r1, r2, th2, w0, w1, w2):
    """Barfoot's Q(ρ, φ) w of the SE(3) left Jacobian for φ = p, ρ = r (θ² = |p|²):
    Q = ½R + a(PR + RP + PRP) + b(PPR + RPP - 3PRP) + c(PRPP + PPRP), P = p^, R = r^,
    applied to w by cross products."""
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
    p, r, w = (p0, p1, p2), (r0, r1, r2), (w0, w1, w2)
    Rw = _cross(r, w)
    Pw = _cross(p, w)
    PPw = _cross(p, Pw)
    PRw = _cross(p, Rw)
    RPw = _cross(r, Pw)
    PRPw = _cross(p, RPw)
    PPRw = _cross(p, PRw)
    RPPw = _cross(r, PPw)
    PRPPw = _cross(p, RPPw)
    PPRPw = _cross(p, PRPw)
    return (
        0.5 * Rw[0] + a * (PRw[0] + RPw[0] + PRPw[0]) + b * (PPRw[0] + RPPw[0] - 3.0 * PRPw[0])
        + c * (PRPPw[0] + PPRPw[0]),
        0.5 * Rw[1] + a * (PRw[1] + RPw[1] + PRPw[1]) + b * (PPRw[1] + RPPw[1] - 3.0 * PRPw[1])
        + c * (PRPPw[1] + PPRPw[1]),
        0.5 * Rw[2] + a * (PRw[2] + RPw[2] + PRPw[2]) + b * (PPRw[2] + RPPw[2] - 3.0 * PRPw[2])
        + c * (PRPPw[2] + PPRPw[2]),
    )  # fmt: skip


@njit(cache=True)
def chart_rate_kernel(topo, delta, v, out):
    """out = δ̇ for q = q_a ⊕ δ moving with velocity v: δ̇ = J_r(δ)⁻¹ v, joint by joint.

    Spherical: SO(3), δ = φ, v = ω (body frame).  Free: SE(3), δ = [φ; ρ], v = [ω; u]
    (body twist, ld.integrate's convention); J_r(δ) = J_l(-δ) = [[A, 0], [Q, A]] with
    A = J_r(φ) of SO(3) and Q = Barfoot's Q(-ρ, -φ), so δ̇_φ = A⁻¹ω and
    δ̇_ρ = A⁻¹(u - Q δ̇_φ).  Other joints: δ̇ = v.  Allocates nothing (the compiled
    simulation loop calls it at every stage).
    """
    for i in range(topo.shape[0]):
        jt, iv, nvj = topo[i, 1], topo[i, 3], topo[i, 5]
        if jt == SPHERICAL or jt == FREE:
            p0, p1, p2 = delta[iv], delta[iv + 1], delta[iv + 2]
            th2 = p0 * p0 + p1 * p1 + p2 * p2
            w0, w1, w2 = _so3_jr_inv_apply(p0, p1, p2, th2, v[iv], v[iv + 1], v[iv + 2])
            out[iv], out[iv + 1], out[iv + 2] = w0, w1, w2
            if jt == FREE:
                r0, r1, r2 = -delta[iv + 3], -delta[iv + 4], -delta[iv + 5]
                e0, e1, e2 = _se3_q_apply(-p0, -p1, -p2, r0, r1, r2, th2, w0, w1, w2)
                u0, u1, u2 = _so3_jr_inv_apply(
                    p0, p1, p2, th2, v[iv + 3] - e0, v[iv + 4] - e1, v[iv + 5] - e2
                )
                out[iv + 3], out[iv + 4], out[iv + 5] = u0, u1, u2
        else:
            for k in range(nvj):
                out[iv + k] = v[iv + k]


class Chart:
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
        kernel(chart_rate_kernel)(self.model.topo, delta, v, out)
        return out
