"""Saha & Schiehlen's recursive minimal-order dynamics of parallel mechanisms (DeNOC).

Paper: ``../shared/papers/saha-schiehlen-recursive-closed-loop-denoc.txt``.  The class
of mechanisms (a fixed base, one platform, legs of 1-DOF joints with at most one
actuated joint each, DOF = number of actuated joints) is detected by
``loopdyn.topology.parallel.parallel_structure``; ``docs/denoc.md`` explains the
algorithm with the paper's equation numbers.

Conventions.  Every twist ``t = [ω; v]`` and wrench ``w = [n; f]`` below is in world
axes about the platform point E (the platform's centre of mass, the world origin
when all legs close on the ground), frozen at the current instant: the paper's
``A_{e,i} t_i`` and ``A_{i,e}ᵀ w_i``.  In these coordinates the twist propagation
matrices of (7b) are identities, ``p_i`` of the paper becomes the unit joint twist
``s_i = A_{e,i} p_i`` (9b) and accelerations are spatial accelerations about the
fixed point, so that

    t_i = t_{i-1} + s_i θ̇_i,     ṫ_i = ṫ_{i-1} + s_i θ̈_i + ṡ_i θ̇_i          (7a)

with ``ṡ_i = t_X ×m s_i``, X the body the axis is fixed in.  Each leg is a list of
1-DOF "columns" (``parallel.Column``; a universal joint is two, a spherical joint or
ball closure three), ordered from the base to the platform, signed along the leg.

Kernels (numba, no allocation; the paper's steps):

- ``joint_twists``:   s_i of every column (7b), (9b)
- ``projections``:    p̃_i and δ_i of every leg, from the platform end (10)–(12); the
                      projectors Φ_i are applied in product form (``apply_phi``)
- ``platform_jacobian``: Φ = Σ Φ_2 (14a), its Cholesky factor (``chol6``) and J (14b)
- ``leg_rates``:      unactuated rates (11b)/(12b) (and accelerations) of one leg
- ``joint_biases``:   ṡ_i θ̇_i and the leg sums ξ
- ``body_inertias``/``body_wrenches``: M_i about E, w_i = M_i(ṫ_i - g) + t_i ×* M_i t_i (18a)
- ``backward_pass``:  IDA-1/2 (21)–(23) and, for forward dynamics, FDA-1/2 (28)–(33)
- ``generalized_inertia``: FDA-2/3: the GIM I = Nᵀ M N (30)–(34)
- ``denoc_rates``, ``denoc_accelerations``, ``denoc_inverse_dynamics``: the steps;
  ``denoc_forward`` / ``denoc_inverse``: the algorithms; ``run`` / ``inverse``: the Python
  entries; ``kinematics``, ``denoc_matrices``, ``generalized_inertia_matrix``: teaching.
"""

from collections import namedtuple

import numpy as np
from numba import njit, types

from loopdyn.errors import SingularityError
from loopdyn.kernels.layout import (
    F1,
    I1,
    Arena,
    Entry,
    block,
    context_buffers,
    entry_kernel,
    model_sizes,
    model_views,
    tree_views,
)
from loopdyn.kernels.linalg import cholesky_inplace, cholesky_solve
from loopdyn.kernels.spatial import rigid_inertia_to_parent_add
from loopdyn.kinematics.frames import fk_kernel
from loopdyn.methods.common import BAD_INPUT, NONFINITE_INPUT, NONFINITE_OUTPUT, input_status
from loopdyn.model import Data
from loopdyn.topology.parallel import ON_BASE, ON_PLATFORM, parallel_structure
from loopdyn.validation import all_finite, configuration, vector, workspace, writable

# kernel status codes (negative; a positive return value is the solve's pivot ratio)
BAD_LEG = -10.0  # a leg's unactuated joints are dependent: δ_i ≈ 0 (info[0]: the column)
BAD_PHI = -11.0  # Φ of eq. (14a) is singular: the platform moves with the actuators locked
BAD_GIM = -12.0  # the GIM I of eq. (25) is not positive definite
# relative size of δ_i (sin² of the angle between s_i and the later unactuated twists)
# and of Φ's and I's Cholesky pivots below which the configuration is called singular
DELTA_TOL = 1e-12
PIVOT_TOL = 1e-13

# columns of the structure table ``col`` (C, 11)
_TYPE, _OBJ, _SUB, _SIGN, _IV, _AFTER, _G0, _G1, _SLOT, _SIDE, _ROT = range(11)
# rows of the small-vector scratch ``vec`` (8, 6)
_TE, _AE, _WBAR, _Y, _Z, _T1, _T2, _E = range(8)


# --------------------------------------------------------------------------- kinematics
@njit(cache=True, inline="always")
def joint_twists(topo, cl_body, cl_X, Xw, S, col, cax, E, s):
    """Unit joint twists s_i = A_{e,i} p_i (eqs. 7b, 9b) of every column, signed along its leg.

    ``Xw`` (nb, 4, 3) world poses and ``S`` (nb, 6, 6) body-frame motion subspaces of
    the tree (``fk_kernel``); ``col`` the structure table, ``cax`` (C, 3) the closure
    axes in their frame; ``E`` (3,) the platform point.  Out: ``s`` (C, 6), ``[ω; v_E]``
    in world axes.
    """
    for c in range(col.shape[0]):
        if col[c, _TYPE] == 0:
            # tree joint: column `sub` of body b's S, rotated to world axes, moved to E
            b, a = col[c, _OBJ], col[c, _SUB]
            w0 = Xw[b, 0, 0] * S[b, 0, a] + Xw[b, 0, 1] * S[b, 1, a] + Xw[b, 0, 2] * S[b, 2, a]
            w1 = Xw[b, 1, 0] * S[b, 0, a] + Xw[b, 1, 1] * S[b, 1, a] + Xw[b, 1, 2] * S[b, 2, a]
            w2 = Xw[b, 2, 0] * S[b, 0, a] + Xw[b, 2, 1] * S[b, 1, a] + Xw[b, 2, 2] * S[b, 2, a]
            u0 = Xw[b, 0, 0] * S[b, 3, a] + Xw[b, 0, 1] * S[b, 4, a] + Xw[b, 0, 2] * S[b, 5, a]
            u1 = Xw[b, 1, 0] * S[b, 3, a] + Xw[b, 1, 1] * S[b, 4, a] + Xw[b, 1, 2] * S[b, 5, a]
            u2 = Xw[b, 2, 0] * S[b, 3, a] + Xw[b, 2, 1] * S[b, 4, a] + Xw[b, 2, 2] * S[b, 5, a]
            d0, d1, d2 = E[0] - Xw[b, 3, 0], E[1] - Xw[b, 3, 1], E[2] - Xw[b, 3, 2]
        else:
            # closure axis fixed in frame A or B: world direction a through the frame origin
            k, side = col[c, _OBJ], col[c, _SIDE]
            bb = cl_body[k, side]
            x0, x1, x2 = cax[c, 0], cax[c, 1], cax[c, 2]
            # direction in the body frame (the frame's rotation), then in world axes
            f0 = cl_X[k, side, 0, 0] * x0 + cl_X[k, side, 0, 1] * x1 + cl_X[k, side, 0, 2] * x2
            f1 = cl_X[k, side, 1, 0] * x0 + cl_X[k, side, 1, 1] * x1 + cl_X[k, side, 1, 2] * x2
            f2 = cl_X[k, side, 2, 0] * x0 + cl_X[k, side, 2, 1] * x1 + cl_X[k, side, 2, 2] * x2
            o0, o1, o2 = cl_X[k, side, 3, 0], cl_X[k, side, 3, 1], cl_X[k, side, 3, 2]
            if bb >= 0:
                a0 = Xw[bb, 0, 0] * f0 + Xw[bb, 0, 1] * f1 + Xw[bb, 0, 2] * f2
                a1 = Xw[bb, 1, 0] * f0 + Xw[bb, 1, 1] * f1 + Xw[bb, 1, 2] * f2
                a2 = Xw[bb, 2, 0] * f0 + Xw[bb, 2, 1] * f1 + Xw[bb, 2, 2] * f2
                p0 = Xw[bb, 3, 0] + Xw[bb, 0, 0] * o0 + Xw[bb, 0, 1] * o1 + Xw[bb, 0, 2] * o2
                p1 = Xw[bb, 3, 1] + Xw[bb, 1, 0] * o0 + Xw[bb, 1, 1] * o1 + Xw[bb, 1, 2] * o2
                p2 = Xw[bb, 3, 2] + Xw[bb, 2, 0] * o0 + Xw[bb, 2, 1] * o1 + Xw[bb, 2, 2] * o2
            else:
                a0, a1, a2, p0, p1, p2 = f0, f1, f2, o0, o1, o2
            if col[c, _ROT] == 1:
                w0, w1, w2, u0, u1, u2 = a0, a1, a2, 0.0, 0.0, 0.0
            else:
                w0, w1, w2, u0, u1, u2 = 0.0, 0.0, 0.0, a0, a1, a2
            d0, d1, d2 = E[0] - p0, E[1] - p1, E[2] - p2
        g = float(col[c, _SIGN])
        s[c, 0] = g * w0
        s[c, 1] = g * w1
        s[c, 2] = g * w2
        # v_E = v_o + ω × (E - o)
        s[c, 3] = g * (u0 + w1 * d2 - w2 * d1)
        s[c, 4] = g * (u1 + w2 * d0 - w0 * d2)
        s[c, 5] = g * (u2 + w0 * d1 - w1 * d0)


@njit(cache=True, inline="always")
def chol6(A, L):
    """L Lᵀ = A for a symmetric 6×6 A (lower triangle of L; its diagonal holds 1/L_ii).

    Returns min/max pivot² (0.0 if A is not positive definite)."""
    dmin = 1e300
    dmax = 0.0
    for j in range(6):
        x = A[j, j]
        for c in range(j):
            x -= L[j, c] * L[j, c]
        if not x > 0.0:
            return 0.0
        dmin = min(dmin, x)
        dmax = max(dmax, x)
        inv = 1.0 / np.sqrt(x)
        L[j, j] = inv
        for r in range(j + 1, 6):
            y = A[r, j]
            for c in range(j):
                y -= L[r, c] * L[j, c]
            L[r, j] = y * inv
    return dmin / dmax


@njit(cache=True, inline="always")
def chol6_solve(L, x):
    """x ← A⁻¹ x with the factor of ``chol6``."""
    for r in range(6):
        y = x[r]
        for c in range(r):
            y -= L[r, c] * x[c]
        x[r] = y * L[r, r]
    for r in range(5, -1, -1):
        y = x[r]
        for c in range(r + 1, 6):
            y -= L[c, r] * x[c]
        x[r] = y * L[r, r]


@njit(cache=True, inline="always")
def apply_phi(c0, c1, k, i0, pt, dinv, x):
    """x ← Φ_{i0} x, Φ_{i0} the projector of eq. (11d)/(12d) removing the unactuated twists of
    columns i0 … c1-1: the product Π_j (1 - p̃_j p̃_jᵀ/δ_j) of the leg's orthogonal p̃_j
    (j = c1-1 … i0, j ≠ k), applied factor by factor (modified Gram–Schmidt)."""
    for j in range(c1 - 1, i0 - 1, -1):
        if j == k:
            continue
        c = (
            pt[j, 0] * x[0] + pt[j, 1] * x[1] + pt[j, 2] * x[2] + pt[j, 3] * x[3]
            + pt[j, 4] * x[4] + pt[j, 5] * x[5]
        ) * dinv[j]  # fmt: skip
        for r in range(6):
            x[r] -= c * pt[j, r]


@njit(cache=True, inline="always")
def projections(leg, s, pt, dinv):
    """p̃_i and δ_i of every leg, eqs. (9b)–(12d).

    Per leg, from the platform end (i = m, …, 1), skipping the actuated joint k:
    p̃_i = Φ_{i+1} s_i (11c, 12c), δ_i = p̃_iᵀ p̃_i, where Φ_{i+1} = Φ_{i+2} -
    p̃_{i+1} p̃_{i+1}ᵀ/δ_{i+1} (11d, 12d), Φ_{m+1} = 1: Gram–Schmidt on the leg's
    unactuated twists.  Each Φ_i is thus the orthogonal projector onto the complement
    of the unactuated twists s_i … s_m (eq. 10b: Φ_iᵀ Φ_i = Φ_i Φ_iᵀ = Φ_i) and the
    product of the factors (1 - p̃_j p̃_jᵀ/δ_j), j ≥ i; it is applied in that form
    (``apply_phi``) and never stored (``DenocKinematics.projectors`` rebuilds it).
    The paper shifts the index of Φ by one below k (Φ_{i+2} in (12)); here the
    product simply skips k.  Out: ``pt`` (C, 6), ``dinv`` (C): 1/δ_i.  Returns -1, or the
    first column whose δ_i is below ``DELTA_TOL`` ‖s_i‖²: the leg's unactuated joints
    are dependent (a singularity of the leg).
    """
    for l in range(leg.shape[0]):
        c0, c1, k = leg[l, 0], leg[l, 1], leg[l, 2]
        for i in range(c1 - 1, c0 - 1, -1):
            if i == k:
                continue
            ss = 0.0
            for r in range(6):
                pt[i, r] = s[i, r]
                ss += s[i, r] * s[i, r]
            x = pt[i]
            apply_phi(c0, c1, k, i + 1, pt, dinv, x)
            d = 0.0
            for r in range(6):
                d += pt[i, r] * pt[i, r]
            if d < 1e-2 * ss:
                # strong cancellation: project once more, so that p̃_i stays orthogonal
                # to the later p̃_j ("twice is enough")
                apply_phi(c0, c1, k, i + 1, pt, dinv, x)
                d = 0.0
                for r in range(6):
                    d += pt[i, r] * pt[i, r]
            if not d > DELTA_TOL * ss:
                return i
            dinv[i] = 1.0 / d
    return -1


@njit(cache=True, inline="always")
def platform_jacobian(leg, s, pt, dinv, Phi, Lc, JT):
    """Φ = Σ_l Φ_2⁽ˡ⁾ (eq. 14a), its Cholesky factor ``Lc`` and J = Φ⁻¹ [Φ_2 s_k]⁽ˡ⁾ (14b).

    ``JT`` (n, 6) holds Jᵀ: row a is J's column of actuated leg a.

    Φ_2⁽ˡ⁾ = 1 - Σ_i p̃_i p̃_iᵀ/δ_i over the leg's unactuated joints.  Legs closing on
    the ground (``leg[l, 3]``) have t_e = 0 and no part in Φ; their columns of J are
    zero, as are those of the legs without actuator.  Returns the Cholesky pivot
    ratio of Φ (1.0 when no leg reaches a platform; 0.0: singular).
    """
    L = leg.shape[0]
    n = JT.shape[0]
    npl = 0
    for l in range(L):
        if leg[l, 3] == 0:
            npl += 1
    for a in range(n):
        for r in range(6):
            JT[a, r] = 0.0
    for r in range(6):
        for c in range(6):
            Phi[r, c] = float(npl) if r == c else 0.0
    if npl == 0:
        return 1.0
    for l in range(L):
        if leg[l, 3] == 1:
            continue
        c0, c1, k = leg[l, 0], leg[l, 1], leg[l, 2]
        for i in range(c0, c1):
            if i == k:
                continue
            for r in range(6):
                a = pt[i, r] * dinv[i]
                for c in range(r, 6):
                    Phi[r, c] -= a * pt[i, c]
    for r in range(6):
        for c in range(r):
            Phi[r, c] = Phi[c, r]
    ratio = chol6(Phi, Lc)
    if not ratio > PIVOT_TOL:
        return 0.0
    for l in range(L):
        k = leg[l, 2]
        if k < 0 or leg[l, 3] == 1:
            continue
        for r in range(6):
            JT[l, r] = s[k, r]
        x = JT[l]
        apply_phi(leg[l, 0], leg[l, 1], k, leg[l, 0], pt, dinv, x)
        chol6_solve(Lc, x)
    return ratio


@njit(cache=True, inline="always")
def leg_rates(c0, c1, k, s, pt, dinv, target, th_k, b, rate, cum, mode):
    """Joint rates (or accelerations) of one leg, eqs. (11b) and (12b), base to platform.

    ``target``: t_e (velocities) or ṫ_e - ξ (accelerations; 0 - ξ for a leg closing
    on the ground); ``th_k``: the actuated joint's rate (ignored if k < 0).  For
    i ≠ k: θ_i = p̃_iᵀ (target - Σ_{j<i} s_j θ_j - [i < k] s_k θ_k) / δ_i, the
    paper's (11b) for i > k and (12b), with t'_e = t_e - s_k θ̇_k (12a), for i < k.
    Out: ``rate`` (C) and, if ``mode`` > 0, ``cum`` (C, 6): the twist (mode 1:
    Σ_{j<=i} s_j θ_j) or the spatial acceleration (mode 2: Σ_{j<=i} (s_j θ_j + b_j),
    ``b`` (C, 6) the columns' ṡ_j θ̇_j) of the body after column i.
    """
    a0 = a1 = a2 = a3 = a4 = a5 = 0.0  # Σ s_j θ_j
    g0 = g1 = g2 = g3 = g4 = g5 = 0.0  # Σ b_j (mode 2)
    y0, y1, y2, y3, y4, y5 = target[0], target[1], target[2], target[3], target[4], target[5]
    if k >= 0:
        # t'_e of (12a), the target below the actuated joint
        y0 -= s[k, 0] * th_k
        y1 -= s[k, 1] * th_k
        y2 -= s[k, 2] * th_k
        y3 -= s[k, 3] * th_k
        y4 -= s[k, 4] * th_k
        y5 -= s[k, 5] * th_k
    for i in range(c0, c1):
        if i == k:
            r = th_k
            # above k the target is t_e again: its s_k θ_k is now part of Σ s_j θ_j
            y0, y1, y2 = target[0], target[1], target[2]
            y3, y4, y5 = target[3], target[4], target[5]
        else:
            r = (
                pt[i, 0] * (y0 - a0) + pt[i, 1] * (y1 - a1) + pt[i, 2] * (y2 - a2)
                + pt[i, 3] * (y3 - a3) + pt[i, 4] * (y4 - a4) + pt[i, 5] * (y5 - a5)
            ) * dinv[i]  # fmt: skip
        rate[i] = r
        a0 += s[i, 0] * r
        a1 += s[i, 1] * r
        a2 += s[i, 2] * r
        a3 += s[i, 3] * r
        a4 += s[i, 4] * r
        a5 += s[i, 5] * r
        if mode == 2:
            g0 += b[i, 0]
            g1 += b[i, 1]
            g2 += b[i, 2]
            g3 += b[i, 3]
            g4 += b[i, 4]
            g5 += b[i, 5]
        if mode > 0:
            cum[i, 0] = a0 + g0
            cum[i, 1] = a1 + g1
            cum[i, 2] = a2 + g2
            cum[i, 3] = a3 + g3
            cum[i, 4] = a4 + g4
            cum[i, 5] = a5 + g5


@njit(cache=True, inline="always")
def joint_biases(leg, col, s, tw, rate, b, xi):
    """b_i = ṡ_i θ̇_i = (t_X ×m s_i) θ̇_i for every column, and ξ = Σ_i b_i per leg.

    The axis of column i is fixed in body X: the body before its joint along the
    leg (twist ``tw`` of the column before the joint, 0 at the base) or the one
    after it (``tw`` of the joint's last column); the motion cross product is
    [ω; v] ×m [ω'; v'] = [ω × ω'; ω × v' + v × ω'].  ``xi`` (L, 6): each leg's
    ṫ_e when all its θ̈ vanish, the term the paper folds into "the time
    derivatives of (7a), (8) with necessary algebraic manipulation" (Sec. VI.A).
    """
    for l in range(leg.shape[0]):
        c0, c1 = leg[l, 0], leg[l, 1]
        for r in range(6):
            xi[l, r] = 0.0
        for i in range(c0, c1):
            if col[i, _AFTER] == 1:
                j = col[i, _G1]
            else:
                j = col[i, _G0] - 1
            if j >= c0:
                t0, t1, t2, t3, t4, t5 = tw[j, 0], tw[j, 1], tw[j, 2], tw[j, 3], tw[j, 4], tw[j, 5]
            else:
                t0 = t1 = t2 = t3 = t4 = t5 = 0.0
            x0, x1, x2, x3, x4, x5 = s[i, 0], s[i, 1], s[i, 2], s[i, 3], s[i, 4], s[i, 5]
            r = rate[i]
            b[i, 0] = (t1 * x2 - t2 * x1) * r
            b[i, 1] = (t2 * x0 - t0 * x2) * r
            b[i, 2] = (t0 * x1 - t1 * x0) * r
            b[i, 3] = (t1 * x5 - t2 * x4 + t4 * x2 - t5 * x1) * r
            b[i, 4] = (t2 * x3 - t0 * x5 + t5 * x0 - t3 * x2) * r
            b[i, 5] = (t0 * x4 - t1 * x3 + t3 * x1 - t4 * x0) * r
            for c in range(6):
                xi[l, c] += b[i, c]


# --------------------------------------------------------------------------- dynamics
@njit(cache=True, inline="always")
def body_inertias(bslot, inertia, Xw, E, Ms, p):
    """M_i of eq. (2) of every leg body and of the platform, about E in world axes.

    ``bslot`` (nb): slot of each body (``ON_BASE``: skipped, ``ON_PLATFORM``: the last
    slot); bodies welded together share a slot and their inertias add.  ``p`` (3,)
    is scratch.
    """
    NS = Ms.shape[0] - 1
    for sl in range(NS + 1):
        for r in range(6):
            for c in range(6):
                Ms[sl, r, c] = 0.0
    for i in range(bslot.shape[0]):
        sl = bslot[i]
        if sl == ON_BASE:
            continue
        if sl == ON_PLATFORM:
            sl = NS
        for r in range(3):
            p[r] = Xw[i, 3, r] - E[r]
        rigid_inertia_to_parent_add(Xw[i, :3], p, inertia[i], Ms[sl])


@njit(cache=True, inline="always")
def _wrench(M, t, a, gravity, out):
    """out = M (a - g) + t ×* (M t): the Newton–Euler wrench of eq. (18a) about E.

    Gravity enters as an acceleration of the base (the paper's Sec. IV, after [15]);
    the force cross product is [ω; v] ×* [n; f] = [ω × n + v × f; ω × f].
    """
    a3, a4, a5 = a[3] - gravity[0], a[4] - gravity[1], a[5] - gravity[2]
    t0, t1, t2, t3, t4, t5 = t[0], t[1], t[2], t[3], t[4], t[5]
    n0 = M[0, 0] * t0 + M[0, 1] * t1 + M[0, 2] * t2 + M[0, 3] * t3 + M[0, 4] * t4 + M[0, 5] * t5
    n1 = M[1, 0] * t0 + M[1, 1] * t1 + M[1, 2] * t2 + M[1, 3] * t3 + M[1, 4] * t4 + M[1, 5] * t5
    n2 = M[2, 0] * t0 + M[2, 1] * t1 + M[2, 2] * t2 + M[2, 3] * t3 + M[2, 4] * t4 + M[2, 5] * t5
    f0 = M[3, 0] * t0 + M[3, 1] * t1 + M[3, 2] * t2 + M[3, 3] * t3 + M[3, 4] * t4 + M[3, 5] * t5
    f1 = M[4, 0] * t0 + M[4, 1] * t1 + M[4, 2] * t2 + M[4, 3] * t3 + M[4, 4] * t4 + M[4, 5] * t5
    f2 = M[5, 0] * t0 + M[5, 1] * t1 + M[5, 2] * t2 + M[5, 3] * t3 + M[5, 4] * t4 + M[5, 5] * t5
    for r in range(6):
        out[r] = (
            M[r, 0] * a[0] + M[r, 1] * a[1] + M[r, 2] * a[2] + M[r, 3] * a3 + M[r, 4] * a4
            + M[r, 5] * a5
        )  # fmt: skip
    out[0] += t1 * n2 - t2 * n1 + t4 * f2 - t5 * f1
    out[1] += t2 * n0 - t0 * n2 + t5 * f0 - t3 * f2
    out[2] += t0 * n1 - t1 * n0 + t3 * f1 - t4 * f0
    out[3] += t1 * f2 - t2 * f1
    out[4] += t2 * f0 - t0 * f2
    out[5] += t0 * f1 - t1 * f0


@njit(cache=True, inline="always")
def body_wrenches(slotcol, Ms, tw, ac, te, ae, gravity, ws):
    """w_i = M_i (ṫ_i - g) + t_i ×* M_i t_i (eq. 18a) of every leg body and of the platform.

    ``slotcol`` (NS): the column after which each leg body sits, whose ``tw`` and ``ac``
    are the body's twist and acceleration; the platform (last slot) has t_e, ṫ_e.
    """
    NS = slotcol.shape[0]
    for sl in range(NS):
        c = slotcol[sl]
        _wrench(Ms[sl], tw[c], ac[c], gravity, ws[sl])
    _wrench(Ms[NS], te, ae, gravity, ws[NS])


@njit(cache=True, inline="always")
def backward_pass(leg, col, s, pt, dinv, ws, tau, Ms, want_gim, l7, R7, P, Q, rv):
    """IDA-1/2 (eqs. 20–23) and, if ``want_gim``, FDA-1/2 (eqs. 27–33), leg by leg.

    Each leg's body twists are linear in y = (t_e, θ̇_k) (7 numbers):
    t_i = Ψ_i t_{i-1} + s_i ρ_iᵀ y (15a–e), with Ψ_i = 1 - s_i p̃_iᵀ/δ_i (15f),
    ρ_i = (p̃_i, -[i < k] p̃_iᵀ s_k)/δ_i for unactuated i and ρ_k = e_7 (Ψ_k = 1).

    IDA-1 (21): w̃_i = w_i + Ψ_{i+1}ᵀ w̃_{i+1}, i.e. w̃ ← w̃ - p̃_i f_i/δ_i with
    f_i = s_iᵀ w̃_i - τ_i (τ_i: a joint force applied to coordinate i, with ``tau``);
    IDA-2 (22)–(23): the leg's generalized force on y, l7 = Σ_i ρ_i f_i (6 + 1
    numbers; the first six, g = Σ_{i≠k} p̃_i f_i/δ_i, act on the platform).

    FDA-1 (28): the composite inertia with the modified propagation,
    M̃_i = M_i + Ψ_{i+1}ᵀ M̃_{i+1} Ψ_{i+1}, and FDA-2 (29)–(33): the sums of its
    blocks that the paper writes M̃_(pq:rs), here accumulated by the backward
    recursion E_i(t_{i-1}, y) = t_{i-1}ᵀ P_i t_{i-1} + 2 t_{i-1}ᵀ Q_i y + yᵀ R_i y of
    the leg's kinetic energy (×2): P_i = Ψ_iᵀ M̃_i Ψ_i, Q_i = Ψ_iᵀ (M̃_i s_i ρ_iᵀ +
    Q_{i+1}), R_i = R_{i+1} + ρ_i s_iᵀM̃_i s_i ρ_iᵀ + ρ_i s_iᵀQ_{i+1} + Q_{i+1}ᵀ s_i ρ_iᵀ;
    ``R7[l]`` = R_1 = [[X⁽ˡ⁾, Y⁽ˡ⁾], [Y⁽ˡ⁾ᵀ, Z⁽ˡ⁾]] (X, Y of eqs. 31–32).
    Scratch: ``P`` (6, 6), ``Q`` (6, 7), ``rv`` (3, 7).  Cost O(m) per leg.
    """
    with_tau = tau.shape[0] > 0
    for l in range(leg.shape[0]):
        c0, c1, k = leg[l, 0], leg[l, 1], leg[l, 2]
        w0 = w1 = w2 = w3 = w4 = w5 = 0.0  # w̃ (IDA-1)
        started = False  # a leg body met (FDA: P, Q, R are zero before)
        for r in range(7):
            l7[l, r] = 0.0
        if want_gim:
            P[:, :] = 0.0
            Q[:, :] = 0.0
            R7[l, :, :] = 0.0
        for i in range(c1 - 1, c0 - 1, -1):
            sl = col[i, _SLOT]
            if sl >= 0:
                w0 += ws[sl, 0]
                w1 += ws[sl, 1]
                w2 += ws[sl, 2]
                w3 += ws[sl, 3]
                w4 += ws[sl, 4]
                w5 += ws[sl, 5]
            # IDA-1: f_i = s_iᵀ w̃_i (minus an applied joint force)
            f = (
                s[i, 0] * w0 + s[i, 1] * w1 + s[i, 2] * w2 + s[i, 3] * w3 + s[i, 4] * w4
                + s[i, 5] * w5
            )  # fmt: skip
            if with_tau and col[i, _IV] >= 0:
                f -= tau[col[i, _IV]]
            # ρ_i (7)
            rho = rv[0]
            if i == k:
                for r in range(6):
                    rho[r] = 0.0
                rho[6] = 1.0
                l7[l, 6] += f
            else:
                inv = dinv[i]
                for r in range(6):
                    rho[r] = pt[i, r] * inv
                rho[6] = 0.0
                if i < k:
                    rho[6] = -(
                        pt[i, 0] * s[k, 0] + pt[i, 1] * s[k, 1] + pt[i, 2] * s[k, 2]
                        + pt[i, 3] * s[k, 3] + pt[i, 4] * s[k, 4] + pt[i, 5] * s[k, 5]
                    ) * inv  # fmt: skip
                for r in range(7):
                    l7[l, r] += rho[r] * f
                # w̃ ← Ψ_iᵀ w̃ = w̃ - p̃_i f_i / δ_i
                c = f * inv
                w0 -= pt[i, 0] * c
                w1 -= pt[i, 1] * c
                w2 -= pt[i, 2] * c
                w3 -= pt[i, 3] * c
                w4 -= pt[i, 4] * c
                w5 -= pt[i, 5] * c
            if sl >= 0:
                started = True
            if not (want_gim and started):
                continue  # FDA: nothing accumulated yet past the platform end of the leg
            # FDA-1: M̃_i = M_i + P_{i+1} (kept in P), u = M̃_i s_i, σ = s_iᵀ u
            if sl >= 0:
                for r in range(6):
                    for c in range(6):
                        P[r, c] += Ms[sl, r, c]
            u = rv[1]
            sig = 0.0
            for r in range(6):
                x = 0.0
                for c in range(6):
                    x += P[r, c] * s[i, c]
                u[r] = x
                sig += s[i, r] * x
            # Q's last column is zero until the actuated joint (legs are swept from the
            # platform end): past it only six columns of Q and R take part
            nq = 7 if i <= k else 6
            sQ = rv[2]
            for c in range(nq):
                x = 0.0
                for r in range(6):
                    x += s[i, r] * Q[r, c]
                sQ[c] = x
            if i == k:
                # ρ = e_7, Ψ_k = 1: R[:, 6] += sQ (+ σ on the diagonal), Q[:, 6] += u
                for r in range(6):
                    R7[l, r, 6] += sQ[r]
                    Q[r, 6] += u[r]
                R7[l, 6, 6] += sig + 2.0 * sQ[6]
                continue
            # R += σ ρρᵀ + ρ sQᵀ + sQ ρᵀ = ρ zᵀ + z ρᵀ with z = σ/2 ρ + sQ (upper triangle)
            hs = 0.5 * sig
            for c in range(nq):
                sQ[c] += hs * rho[c]
            for r in range(nq):
                for c in range(r, nq):
                    R7[l, r, c] += rho[r] * sQ[c] + sQ[r] * rho[c]
            if i == c0:
                continue  # t_0 = 0: P_1 and Q_1 are never used
            # Q ← Ψ_iᵀ (Q + u ρᵀ) = Q + u ρᵀ - p̃_i (s_iᵀQ + σ ρᵀ) / δ_i
            inv = dinv[i]
            for c in range(nq):
                x = (sQ[c] + hs * rho[c]) * inv
                for r in range(6):
                    Q[r, c] += u[r] * rho[c] - pt[i, r] * x
            # P ← Ψ_iᵀ M̃_i Ψ_i = M̃ - (p̃ uᵀ + u p̃ᵀ)/δ + σ p̃ p̃ᵀ/δ² (symmetric)
            sd = sig * inv * inv
            for r in range(6):
                pr, ur = pt[i, r], u[r]
                for c in range(r, 6):
                    x = P[r, c] - (pr * u[c] + ur * pt[i, c]) * inv + sd * pr * pt[i, c]
                    P[r, c] = x
                    P[c, r] = x
        if want_gim:
            for r in range(7):
                for c in range(r):
                    R7[l, r, c] = R7[l, c, r]


@njit(cache=True, inline="always")
def generalized_inertia(leg, JT, R7, Me, X, XJ, Ig):
    """FDA-2/3 (eqs. 29–34): the n×n GIM I = Nᵀ M N in the actuated rates.

    With t_e = J θ̇ (14b) and each leg's kinetic energy yᵀ R⁽ˡ⁾ y/2 in y = (t_e,
    θ̇_k): X = M_e + Σ_l X⁽ˡ⁾ (31), and I_ab = J_aᵀ X J_b + J_aᵀ Y⁽ᵇ⁾ + Y⁽ᵃ⁾ᵀ J_b +
    δ_ab Z⁽ᵃ⁾ (30), the paper's M̄_ab reduced by p_k⁽ᵃ⁾ᵀ · p_k⁽ᵇ⁾ (34).  Legs closing
    on the ground contribute Z only (their t_e is 0).  Scratch: ``X`` (6, 6),
    ``XJ`` (n, 6): (X J)ᵀ.  ``JT`` (n, 6): Jᵀ.  Out: ``Ig`` (n, n).
    """
    n = Ig.shape[0]
    for r in range(6):
        for c in range(6):
            X[r, c] = Me[r, c]
    for l in range(leg.shape[0]):
        if leg[l, 3] == 0:
            for r in range(6):
                for c in range(6):
                    X[r, c] += R7[l, r, c]
    for b in range(n):
        for r in range(6):
            x = 0.0
            for c in range(6):
                x += X[r, c] * JT[b, c]
            XJ[b, r] = x
    for a in range(n):
        for b in range(a + 1):
            x = 0.0
            for r in range(6):
                x += JT[a, r] * (XJ[b, r] + R7[b, r, 6]) + R7[a, r, 6] * JT[b, r]
            if a == b:
                x += R7[a, 6, 6]
            Ig[a, b] = x
            Ig[b, a] = x


# ------------------------------------------------------------------ packed layout
# The structure (ints, built once per model) and the workspace (floats, one per Data):
#   dni = header | leg (L, 4) | col (C, 11) | bslot (nb) | slotcol (NS)
#   header: L, C, NS, n, platform body, the 4 int offsets, the float offsets (_FLOATS)
#   leg row: first column, end column, actuated column (-1: none), closes on the ground
#   col row: see _TYPE … _ROT above
Model6 = namedtuple("Model6", "topo jgeom inertia gravity cl_body cl_X")
Tree5 = namedtuple("Tree5", "Xrel Xw S vec6 tmp33")
Denoc = namedtuple(
    "Denoc",
    "leg col bslot slotcol pb cax s pt dinv rate arate tw ac b Phi Lc JT xi vec Ms ws "
    "R7 l7 P Q rv Ig Lg XJ X th thdd info none",
)


_HEAD = 9
_FLOATS = (
    "cax", "s", "pt", "dinv", "rate", "arate", "tw", "ac", "b", "Phi", "Lc", "JT", "xi",
    "vec", "Ms", "ws", "R7", "l7", "P", "Q", "rv", "Ig", "Lg", "XJ", "X", "th", "thdd", "info",
)  # fmt: skip


def _float_specs(L, C, NS, n):
    shapes = {
        "cax": (C, 3), "s": (C, 6), "pt": (C, 6), "dinv": (C,), "rate": (C,), "arate": (C,),
        "tw": (C, 6), "ac": (C, 6), "b": (C, 6), "Phi": (6, 6),
        "Lc": (6, 6), "JT": (n, 6), "xi": (L, 6), "vec": (8, 6), "Ms": (NS + 1, 6, 6),
        "ws": (NS + 1, 6), "R7": (L, 7, 7), "l7": (L, 7), "P": (6, 6), "Q": (6, 7),
        "rv": (3, 7), "Ig": (n, n), "Lg": (n, n), "XJ": (n, 6), "X": (6, 6), "th": (n,),
        "thdd": (n,), "info": (4,),
    }  # fmt: skip
    return [(k, shapes[k]) for k in _FLOATS]


@njit(cache=True, inline="always")
def denoc_views(dni, dnf):
    """The :data:`Denoc` named tuple of views of the packed structure and workspace."""
    L, C, NS, n, pb = dni[0], dni[1], dni[2], dni[3], dni[4]
    leg = block(dni, dni[5], (L, 4))
    col = block(dni, dni[6], (C, 11))
    bslot = block(dni, dni[7], dni[8] - dni[7])
    slotcol = block(dni, dni[8], NS)
    o = _HEAD
    cax = block(dnf, dni[o], (C, 3))
    s = block(dnf, dni[o + 1], (C, 6))
    pt = block(dnf, dni[o + 2], (C, 6))
    dinv = block(dnf, dni[o + 3], C)
    rate = block(dnf, dni[o + 4], C)
    arate = block(dnf, dni[o + 5], C)
    tw = block(dnf, dni[o + 6], (C, 6))
    ac = block(dnf, dni[o + 7], (C, 6))
    b = block(dnf, dni[o + 8], (C, 6))
    Phi = block(dnf, dni[o + 9], (6, 6))
    Lc = block(dnf, dni[o + 10], (6, 6))
    JT = block(dnf, dni[o + 11], (n, 6))
    xi = block(dnf, dni[o + 12], (L, 6))
    vec = block(dnf, dni[o + 13], (8, 6))
    Ms = block(dnf, dni[o + 14], (NS + 1, 6, 6))
    ws = block(dnf, dni[o + 15], (NS + 1, 6))
    R7 = block(dnf, dni[o + 16], (L, 7, 7))
    l7 = block(dnf, dni[o + 17], (L, 7))
    P = block(dnf, dni[o + 18], (6, 6))
    Q = block(dnf, dni[o + 19], (6, 7))
    rv = block(dnf, dni[o + 20], (3, 7))
    Ig = block(dnf, dni[o + 21], (n, n))
    Lg = block(dnf, dni[o + 22], (n, n))
    XJ = block(dnf, dni[o + 23], (n, 6))
    X = block(dnf, dni[o + 24], (6, 6))
    th = block(dnf, dni[o + 25], n)
    thdd = block(dnf, dni[o + 26], n)
    info = block(dnf, dni[o + 27], 4)
    none = block(dnf, 0, 0)
    return Denoc(
        leg, col, bslot, slotcol, pb, cax, s, pt, dinv, rate, arate, tw, ac, b, Phi, Lc,
        JT, xi, vec, Ms, ws, R7, l7, P, Q, rv, Ig, Lg, XJ, X, th, thdd, info, none,
    )  # fmt: skip


@njit(cache=True, inline="always")
def _unpack(ictx, fctx):
    mlay, mi, mf, dlay, df = context_buffers(ictx, fctx)
    topo, cl_body, _, jgeom, inertia, gravity, cl_X, _ = model_views(mlay, mi, mf)
    Xrel, Xw, S, vec6, _, tmp33 = tree_views(dlay, df)
    return (
        mlay,
        Model6(topo, jgeom, inertia, gravity, cl_body, cl_X),
        Tree5(Xrel, Xw, S, vec6, tmp33),
    )


# ------------------------------------------------------------------------ algorithms
@entry_kernel
def denoc_rates(ictx, fctx, dni, dnf, q, v):
    """Positions, projections, J and all joint rates from the actuated ones (eqs. 7–14).

    Reads only the actuated entries of ``v``.  Leaves in the workspace: s, p̃, δ, Φ,
    J, the column rates ``rate``, twists ``tw``, biases ``b`` and ξ, t_e
    (``vec[_TE]``), E (``vec[_E, :3]``), θ̇ (``th``).  Returns the pivot ratio of Φ, or
    ``BAD_LEG`` (column in ``info[0]``) / ``BAD_PHI``.  The orchestrators take the
    packed buffers (Data context ``ictx``, ``fctx``; DeNOC ``dni``, ``dnf``) and build
    their views themselves: a named tuple of 33 views passed to a non-inlined numba
    function costs ~0.35 µs per call.
    """
    _, m, t = _unpack(ictx, fctx)
    w = denoc_views(dni, dnf)
    fk_kernel(m.topo, m.jgeom, q, w.none, t.Xrel, t.Xw, t.S, t.vec6, t.tmp33)
    # E: the platform's centre of mass (world origin without platform)
    E = w.vec[_E]
    pb = w.pb
    if pb >= 0:
        I6 = m.inertia[pb]
        mass = I6[3, 3]
        c0, c1, c2 = I6[2, 4] / mass, I6[0, 5] / mass, I6[1, 3] / mass
        for r in range(3):
            E[r] = t.Xw[pb, 3, r] + t.Xw[pb, r, 0] * c0 + t.Xw[pb, r, 1] * c1 + t.Xw[pb, r, 2] * c2
    else:
        for r in range(3):
            E[r] = 0.0
    joint_twists(m.topo, m.cl_body, m.cl_X, t.Xw, t.S, w.col, w.cax, E, w.s)
    bad = projections(w.leg, w.s, w.pt, w.dinv)
    if bad >= 0:
        w.info[0] = bad
        return BAD_LEG
    ratio = platform_jacobian(w.leg, w.s, w.pt, w.dinv, w.Phi, w.Lc, w.JT)
    if not ratio > 0.0:
        return BAD_PHI
    # θ̇ (6) and t_e = J θ̇ (14b)
    n = w.th.shape[0]
    for a in range(n):
        w.th[a] = v[w.col[w.leg[a, 2], _IV]] if w.leg[a, 2] >= 0 else 0.0
    te = w.vec[_TE]
    for r in range(6):
        x = 0.0
        for a in range(n):
            x += w.JT[a, r] * w.th[a]
        te[r] = x
    # unactuated rates (11b), (12b), leg by leg
    zero = w.vec[_Z]
    zero[:] = 0.0
    for l in range(w.leg.shape[0]):
        thk = w.th[l] if l < n else 0.0
        target = zero if w.leg[l, 3] == 1 else te
        leg_rates(w.leg[l, 0], w.leg[l, 1], w.leg[l, 2], w.s, w.pt, w.dinv, target, thk, w.b,
                  w.rate, w.tw, 1)  # fmt: skip
    joint_biases(w.leg, w.col, w.s, w.tw, w.rate, w.b, w.xi)
    return ratio


@entry_kernel
def denoc_accelerations(dni, dnf, thdd, first):
    """ṫ_e and every column's θ̈ (and body accelerations ``ac``) from the actuated θ̈.

    The time derivative of (7a) along each leg gives Σ_i s_i θ̈_i = ṫ_e - ξ, so the
    same projections apply: Φ ṫ_e = Σ_l Φ_2⁽ˡ⁾ (s_k θ̈_k + ξ⁽ˡ⁾) (the derivative of
    14a), ṫ_e = J θ̈ + Φ⁻¹ Σ_l Φ_2⁽ˡ⁾ ξ⁽ˡ⁾, then (11b)/(12b) with target ṫ_e - ξ.
    ``first``: compute Φ⁻¹ Σ_l Φ_2⁽ˡ⁾ ξ⁽ˡ⁾ (kept in ``vec[_Y]``), else reuse it.
    """
    w = denoc_views(dni, dnf)
    n = thdd.shape[0]
    ae = w.vec[_AE]
    y = w.vec[_Y]
    if first:
        y[:] = 0.0
        any_platform = False
        z = w.vec[_T1]
        for l in range(w.leg.shape[0]):
            if w.leg[l, 3] == 0:
                any_platform = True
                for r in range(6):
                    z[r] = w.xi[l, r]
                apply_phi(w.leg[l, 0], w.leg[l, 1], w.leg[l, 2], w.leg[l, 0], w.pt, w.dinv, z)
                for r in range(6):
                    y[r] += z[r]
        if any_platform:
            chol6_solve(w.Lc, y)
    for r in range(6):
        x = y[r]
        for a in range(n):
            x += w.JT[a, r] * thdd[a]
        ae[r] = x
    tg = w.vec[_T2]
    for l in range(w.leg.shape[0]):
        closed = w.leg[l, 3] == 1
        for r in range(6):
            tg[r] = (0.0 if closed else ae[r]) - w.xi[l, r]
        thk = thdd[l] if l < n else 0.0
        leg_rates(w.leg[l, 0], w.leg[l, 1], w.leg[l, 2], w.s, w.pt, w.dinv, tg, thk, w.b,
                  w.arate, w.ac, 2 if first else 0)  # fmt: skip


@entry_kernel
def denoc_inverse_dynamics(ictx, fctx, dni, dnf, tau, want_gim):
    """IDA-1..3 (eqs. 20–24) at the accelerations left by ``denoc_accelerations``.

    Returns nothing; ``w.thdd`` is overwritten by the generalized forces
    r_a = Nᵀ w - (applied ``tau``) = l7_a[6] + J_aᵀ w̄, w̄ = w_e + Σ_l g⁽ˡ⁾ (IDA-2's
    w̄_k of eq. 22, reduced by p_kᵀ as in IDA-3, eq. 24).  With ``want_gim`` the
    legs' R⁽ˡ⁾ of FDA-1/2 are formed in the same backward pass.
    """
    _, m, t = _unpack(ictx, fctx)
    w = denoc_views(dni, dnf)
    body_inertias(w.bslot, m.inertia, t.Xw, w.vec[_E], w.Ms, w.vec[_T1])
    body_wrenches(w.slotcol, w.Ms, w.tw, w.ac, w.vec[_TE], w.vec[_AE], m.gravity, w.ws)
    backward_pass(w.leg, w.col, w.s, w.pt, w.dinv, w.ws, tau, w.Ms, want_gim, w.l7, w.R7, w.P,
                  w.Q, w.rv)  # fmt: skip
    NS = w.Ms.shape[0] - 1
    wbar = w.vec[_WBAR]
    for r in range(6):
        wbar[r] = w.ws[NS, r]
    for l in range(w.leg.shape[0]):
        if w.leg[l, 3] == 0:
            for r in range(6):
                wbar[r] += w.l7[l, r]
    n = w.thdd.shape[0]
    for a in range(n):
        x = w.l7[a, 6]
        for r in range(6):
            x += w.JT[a, r] * wbar[r]
        w.thdd[a] = x


@entry_kernel
def denoc_forward(ictx, fctx, dni, dnf, q, v, tau, qdd):
    """Forward dynamics: q̈ (every tree coordinate) from (q, v, τ); returns a pivot ratio or a
    status < 0.

    1. kinematics and all rates from θ̇ = v[actuated] (``denoc_rates``);
    2. C θ̇ + gravity - τ by the inverse dynamics with θ̈ = 0, together with the legs'
       FDA-1/2 reductions (``denoc_inverse_dynamics``);
    3. the GIM I (``generalized_inertia``) and I θ̈ = τ - C θ̇ (eq. 25, Cholesky);
    4. θ̈ of every joint from θ̈ (``denoc_accelerations``), written to q̈.
    """
    ratio = denoc_rates(ictx, fctx, dni, dnf, q, v)
    if not ratio > 0.0:
        return ratio
    w = denoc_views(dni, dnf)
    n = w.thdd.shape[0]
    w.thdd[:] = 0.0
    denoc_accelerations(dni, dnf, w.thdd, True)
    denoc_inverse_dynamics(ictx, fctx, dni, dnf, tau, True)
    NS = w.Ms.shape[0] - 1
    generalized_inertia(w.leg, w.JT, w.R7, w.Ms[NS], w.X, w.XJ, w.Ig)
    for a in range(n):
        for c in range(n):
            w.Lg[a, c] = w.Ig[a, c]
    gratio = cholesky_inplace(w.Lg, n) if n > 0 else 1.0
    if not gratio > PIVOT_TOL:
        return BAD_GIM
    # I θ̈ = -(C θ̇ + g - τ)
    for a in range(n):
        w.thdd[a] = -w.thdd[a]
    cholesky_solve(w.Lg, n, w.thdd)
    denoc_accelerations(dni, dnf, w.thdd, False)
    for i in range(w.col.shape[0]):
        iv = w.col[i, _IV]
        if iv >= 0:
            qdd[iv] = w.arate[i]
    if not all_finite(qdd):
        return NONFINITE_OUTPUT
    return min(ratio, gratio)


@entry_kernel
def denoc_inverse(ictx, fctx, dni, dnf, q, v, qdd, tau_act):
    """Inverse dynamics: actuator forces ``tau_act`` (n, leg order) producing the actuated
    accelerations ``qdd[actuated]`` at (q, v); the other entries of ``qdd`` are not read
    (the unactuated ones follow from the closures).  Returns a pivot ratio or a status."""
    ratio = denoc_rates(ictx, fctx, dni, dnf, q, v)
    if not ratio > 0.0:
        return ratio
    w = denoc_views(dni, dnf)
    n = w.thdd.shape[0]
    for a in range(n):
        tau_act[a] = qdd[w.col[w.leg[a, 2], _IV]]
    denoc_accelerations(dni, dnf, tau_act, True)
    denoc_inverse_dynamics(ictx, fctx, dni, dnf, w.none, False)
    for a in range(n):
        tau_act[a] = w.thdd[a]
    if not all_finite(tau_act):
        return NONFINITE_OUTPUT
    return ratio


# ------------------------------------------------------------------- entries
@entry_kernel
def denoc_forward_entry(ictx, fctx, dni, dnf, q, v, tau, qdd):
    """``denoc_forward`` on a Data's context and the DeNOC buffers, inputs checked."""
    mlay, m, _ = _unpack(ictx, fctx)
    status = input_status(mlay, m.topo, q, v, tau, block(dnf, 0, (0, 6)))
    if status < 0.0:
        return status
    if qdd.shape[0] != model_sizes(mlay)[1]:
        return BAD_INPUT
    return denoc_forward(ictx, fctx, dni, dnf, q, v, tau, qdd)


@entry_kernel
def denoc_inverse_entry(ictx, fctx, dni, dnf, q, v, qdd, tau_act):
    """``denoc_inverse`` on a Data's context and the DeNOC buffers, inputs checked."""
    mlay, m, _ = _unpack(ictx, fctx)
    status = input_status(mlay, m.topo, q, v, qdd, block(dnf, 0, (0, 6)))
    if status < 0.0:
        return status
    if tau_act.shape[0] != dni[3]:
        return BAD_INPUT
    return denoc_inverse(ictx, fctx, dni, dnf, q, v, qdd, tau_act)


@entry_kernel
def denoc_rates_entry(ictx, fctx, dni, dnf, q, v):
    """``denoc_rates`` (kinematics only), inputs checked."""
    mlay, m, _ = _unpack(ictx, fctx)
    status = input_status(mlay, m.topo, q, v, v, block(dnf, 0, (0, 6)))
    if status < 0.0:
        return status
    return denoc_rates(ictx, fctx, dni, dnf, q, v)


_FORWARD = Entry(denoc_forward_entry, types.float64, I1, F1, I1, F1, F1, F1, F1, F1)
_INVERSE = Entry(denoc_inverse_entry, types.float64, I1, F1, I1, F1, F1, F1, F1, F1)
_RATES = Entry(denoc_rates_entry, types.float64, I1, F1, I1, F1, F1, F1)


class DenocStructure:
    """The packed DeNOC structure of a model (built once, cached on the model).

    ``ps``: the :class:`~loopdyn.topology.parallel.ParallelStructure`; ``ints``: the
    int buffer (header, leg and column tables, body slots); ``columns``: every
    column in order, as ``(leg, Column)``; ``slot_after`` (C): the leg body after
    each column (``ps.slots`` index; -1 on the ground, -2 the platform, -3 none: the
    massless link between two axes of one joint).
    """

    def __init__(self, model, ps):
        self.ps = ps
        cols, legrows = [], []
        for leg in ps.legs:
            c0 = len(cols)
            cols.extend((leg.index, c) for c in leg.columns)
            k = c0 + leg.k_column if leg.k_column is not None else -1
            legrows.append((c0, len(cols), k, 1 if leg.closes_on_base else 0))
        C, L, NS, n = len(cols), len(ps.legs), len(ps.slots), ps.n
        table = np.zeros((C, 11), dtype=np.int64)
        cax = np.zeros((C, 3))
        slotcol = np.zeros(NS, dtype=np.int64)
        c = 0
        for leg in ps.legs:
            for j, name in enumerate(leg.joints):
                g0 = c
                while c < C and cols[c][0] == leg.index and cols[c][1].joint == name:
                    c += 1
                g1 = c - 1
                for i in range(g0, c):
                    col = cols[i][1]
                    table[i] = (
                        1 if col.closure else 0, col.index, col.axis, col.sign, col.v,
                        1 if col.fixed_after else 0, g0, g1, -3, col.side,
                        1 if col.rotation else 0,
                    )  # fmt: skip
                    cax[i] = col.local_axis
                table[g1, _SLOT] = leg.after[j]
                if leg.after[j] >= 0:
                    slotcol[leg.after[j]] = g1
        self.columns = tuple(cols)
        self.slot_after = table[:, _SLOT].copy()
        ints = [
            ("leg", np.array(legrows, dtype=np.int64).reshape(L, 4)),
            ("col", table),
            ("bslot", np.asarray(ps.body_slot, dtype=np.int64)),
            ("slotcol", slotcol),
        ]
        specs = _float_specs(L, C, NS, n)
        head = _HEAD + len(specs)
        offs, pos = [], head
        for _, a in ints:
            offs.append(pos)
            pos += a.size
        farena = Arena(np.float64, specs)
        header = [L, C, NS, n, ps.platform_index, *offs, *farena.offsets[:-1]]
        self.ints = np.concatenate(
            [np.array(header, dtype=np.int64)] + [a.ravel() for _, a in ints]
        )
        self.float_size = int(farena.offsets[-1])
        self.float_specs = specs
        self.cax = cax
        self.L, self.C, self.NS, self.n = L, C, NS, n


class DenocWork:
    """A Data's DeNOC workspace: the float buffer ``buf`` and its named views ``views``."""

    def __init__(self, st):
        arena = Arena(np.float64, st.float_specs)
        self.buf = arena.buf
        self.views = arena.views
        self.views["cax"][...] = st.cax
        self.structure = st
        self.ints = st.ints


def structure(model):
    """The :class:`DenocStructure` of ``model`` (built once, cached on the model)."""
    st = getattr(model, "_denoc_structure", None)
    if st is None:
        st = model._denoc_structure = DenocStructure(model, parallel_structure(model))
    return st


def _work(model, d):
    w = getattr(d, "_denoc_work", None)
    if w is None or w.structure is not getattr(model, "_denoc_structure", None):
        w = d._denoc_work = DenocWork(structure(model))
    return w


def _raise(model, w, status, what="q, v or tau"):
    st = w.structure
    if status == NONFINITE_INPUT:
        raise ValueError(f"{model.name}: {what} holds NaN or inf")
    if status == BAD_INPUT:  # pragma: no cover - the checked path converts first
        raise ValueError(f"{model.name}: {what}: wrong length or zero quaternion")
    if status == BAD_LEG:
        i = int(w.views["info"][0])
        leg, col = st.columns[i]
        raise SingularityError(
            f"{model.name}: leg {leg + 1}: the axis {col.axis} of joint {col.joint!r} is "
            "dependent on the leg's other unactuated joints at this configuration (δ_i ≈ 0 "
            "in eq. 11c): a singularity of the leg"
        )
    if status == BAD_PHI:
        cond = np.linalg.cond(w.views["Phi"])
        raise SingularityError(
            f"{model.name}: Φ = Σ Φ_2 of eq. (14a) is singular at this configuration (condition "
            f"number {cond:.3g}): the platform can move with every actuator locked (a parallel "
            "singularity)"
        )
    if status == BAD_GIM:
        cond = np.linalg.cond(w.views["Ig"])
        raise SingularityError(
            f"{model.name}: the generalized inertia matrix I of eq. (25) is not positive "
            f"definite (condition number {cond:.3g})"
        )
    if status == NONFINITE_OUTPUT:
        raise SingularityError(f"{model.name}: the DeNOC solve produced non-finite values")


def run(model, q, v, tau, data=None):
    """Forward dynamics by DeNOC: q̈ (nv) of every tree coordinate.

    In: a consistent state ``q`` (nq), ``v`` (nv; only its actuated entries are read:
    the others follow from the closures, eqs. 11b/12b) and joint forces ``tau`` (nv,
    any coordinate; None for zero).  Raises :class:`loopdyn.ModelError` if the model
    is not in the DeNOC class (``ld.parallel_structure`` says why) and
    :class:`loopdyn.SingularityError` at a singular configuration.
    """
    d = (model._data or model.data) if data is None else data
    if type(d) is Data and d.model is model and tau is not None:
        w = getattr(d, "_denoc_work", None)
        if w is not None:
            qdd = np.empty(model.nv)
            try:
                if _FORWARD.call(d.ictx, d.fctx, w.ints, w.buf, q, v, tau, qdd) > 0.0:
                    return qdd
            except TypeError:
                pass
    d = workspace(model, data)
    w = _work(model, d)
    q = writable(configuration(model, q))
    v = writable(vector(v, model.nv, "v", model))
    tau = np.zeros(model.nv) if tau is None else writable(vector(tau, model.nv, "tau", model))
    qdd = np.empty(model.nv)
    status = _FORWARD.call(d.ictx, d.fctx, w.ints, w.buf, q, v, tau, qdd)
    if not status > 0.0:
        _raise(model, w, status)
    return qdd


def inverse(model, q, v, qdd, data=None):
    """Inverse dynamics by DeNOC, IDA-1..3: the actuator forces (in ``model.actuated`` order).

    In: ``q`` (nq), ``v`` (nv) and ``qdd`` (nv), of which only the actuated entries
    are read (the rest follows from the closures).  Out: the forces of the actuated
    coordinates that produce this motion under gravity.
    """
    d = workspace(model, data)
    w = _work(model, d)
    q = writable(configuration(model, q))
    v = writable(vector(v, model.nv, "v", model))
    qdd = writable(vector(qdd, model.nv, "qdd", model))
    tau = np.empty(w.structure.n)
    status = _INVERSE.call(d.ictx, d.fctx, w.ints, w.buf, q, v, qdd, tau)
    if not status > 0.0:
        _raise(model, w, status, "q, v or qdd")
    return tau


class DenocKinematics:
    """The DeNOC kinematics of eqs. (7)–(14) at one state, as the compiled kernel left them.

    ``E`` (3,): the platform point; per leg l (lists): ``s[l]`` (m_l, 6) the unit
    joint twists A_{e,i} p_i (9b) about E in world axes, ``ptilde[l]`` (m_l, 6) and
    ``delta[l]`` (m_l,) the p̃_i and δ_i of (11c)/(12c) (zero at the actuated
    joint), ``rates[l]`` (m_l,) every joint's rate (11b)/(12b); ``Phi2`` (L, 6, 6)
    each leg's Φ_2 (13a), ``Phi`` (6, 6) their sum (14a), ``J`` (6, n) the Jacobian
    of (14b), ``te`` (6,) the platform twist J θ̇.  ``structure``: the
    :class:`DenocStructure` (``structure.ps.legs[l].columns`` names the joints).
    """

    def __init__(self, st, views):
        self.structure = st
        leg = st.ints[st.ints[5] : st.ints[5] + 4 * st.L].reshape(st.L, 4)
        cut = [slice(int(a), int(b)) for a, b in leg[:, :2]]
        self.E = views["vec"][_E, :3].copy()
        self.s = [views["s"][c].copy() for c in cut]
        self.ptilde = [views["pt"][c].copy() for c in cut]
        dinv = views["dinv"]
        self.delta = [np.divide(1.0, dinv[c], out=np.zeros(c.stop - c.start), where=dinv[c] != 0)
                      for c in cut]  # fmt: skip
        self.rates = [views["rate"][c].copy() for c in cut]
        for lg, p, d in zip(st.ps.legs, self.ptilde, self.delta, strict=True):
            if lg.k_column is not None:
                p[lg.k_column] = 0.0
                d[lg.k_column] = 0.0
        self.Phi2 = np.array([self.projectors(l)[0] for l in range(st.L)]).reshape(st.L, 6, 6)
        self.Phi = views["Phi"].copy()
        self.J = views["JT"].T.copy()
        self.te = views["vec"][_TE].copy()

    def projectors(self, leg):
        """Φ_i of leg ``leg`` rebuilt from the kernel's p̃_i, δ_i by (11d)/(12d): an array
        (m + 1, 6, 6) whose entry i removes the unactuated twists of columns i … m-1
        (entry m: the identity Φ_{m+1}; entry 0: Φ_2 of eq. 13a)."""
        p, d = self.ptilde[leg], self.delta[leg]
        m = p.shape[0]
        out = np.empty((m + 1, 6, 6))
        out[m] = np.eye(6)
        for i in range(m - 1, -1, -1):
            out[i] = out[i + 1] - (np.outer(p[i], p[i]) / d[i] if d[i] > 0.0 else 0.0)
        return out


def kinematics(model, q, v=None, data=None):
    """:class:`DenocKinematics` of ``model`` at ``q`` (and the actuated rates of ``v``)."""
    d = workspace(model, data)
    w = _work(model, d)
    q = writable(configuration(model, q))
    v = np.zeros(model.nv) if v is None else writable(vector(v, model.nv, "v", model))
    status = _RATES.call(d.ictx, d.fctx, w.ints, w.buf, q, v)
    if not status > 0.0:
        _raise(model, w, status, "q or v")
    return DenocKinematics(w.structure, w.views)


def generalized_inertia_matrix(model, q, data=None):
    """The n×n GIM I = Nᵀ M N of eq. (26) in the actuated rates, by FDA-1..3 (eqs. 27–34)."""
    d = workspace(model, data)
    w = _work(model, d)
    q = writable(configuration(model, q))
    z = np.zeros(model.nv)
    status = _FORWARD.call(d.ictx, d.fctx, w.ints, w.buf, q, z, z, np.empty(model.nv))
    if not status > 0.0:
        _raise(model, w, status, "q")
    return w.views["Ig"].copy()


class DenocMatrices:
    """Dense DeNOC matrices of eqs. (15)–(17) (teaching and tests; O((Σm)²) memory).

    Bodies are the leg columns in order (the body after each 1-DOF joint; the bodies
    between the axes of a universal or spherical joint are massless), all twists in
    world axes about E (so A_{i,i-1} = 1 and p_i = s_i).  With C columns and n
    actuated legs: ``Nl`` (6C, 6C) = (1 - A)⁻¹ (17b) with the blocks
    Ã_{i,i-1} = Ψ_i (16e, 15f); ``Nc`` (6C, 6n) (16c): row block i of leg l is 1
    at the actuated joint, β_i (Σ_a Ā_ek⁽ᵃ⁾ - [i < k] 1⁽ˡ⁾) otherwise, with
    β_i = s_i p̃_iᵀ/δ_i (the factor of (15a)–(15e)) and Ā_ek⁽ᵃ⁾ = Φ⁻¹ Φ_2⁽ᵃ⁾ (16e)
    (no Ā term for legs closing on the ground, whose t_e is 0); ``Nd`` (6n, n) =
    diag(s_k⁽ᵃ⁾) (16c); ``N`` = Nl Nc Nd, so that t = N θ̇ (17a) stacks the twist after
    every column.  ``M`` (6C, 6C): the bodies' mass matrices about E (the platform's
    on the last column of the first leg that reaches it).  ``Phi[l]`` (m_l + 1, 6, 6):
    the projectors of leg l as in :meth:`DenocKinematics.projectors`; ``s``, ``E``.
    """

    def __init__(self, model, q):
        from loopdyn.kinematics.frames import forward_kinematics
        from loopdyn.topology.parallel import leg_twists

        st = structure(model)
        ps = st.ps
        q = configuration(model, q)
        s, E = leg_twists(model, ps, q)
        legs = ps.legs
        C, n = st.C, ps.n
        c0 = np.cumsum([0] + [len(g.columns) for g in legs])
        self.s, self.E = s, E
        # projections (10)–(12), in numpy
        self.Phi, pt, dl = [], [], []
        Phi2 = []
        for g, S in zip(legs, s, strict=True):
            m = len(g.columns)
            P = np.empty((m + 1, 6, 6))
            P[m] = np.eye(6)
            p = np.zeros((m, 6))
            dd = np.zeros(m)
            for i in range(m - 1, -1, -1):
                if i == g.k_column:
                    P[i] = P[i + 1]
                    continue
                p[i] = P[i + 1] @ S[i]
                dd[i] = p[i] @ p[i]
                P[i] = P[i + 1] - np.outer(p[i], p[i]) / dd[i]
            self.Phi.append(P)
            pt.append(p)
            dl.append(dd)
            Phi2.append(P[0])
        Phi = sum((P2 for g, P2 in zip(legs, Phi2, strict=True) if not g.closes_on_base),
                  np.zeros((6, 6)))  # fmt: skip
        Abar = [
            np.linalg.solve(Phi, P2) if not g.closes_on_base else np.zeros((6, 6))
            for g, P2 in zip(legs, Phi2, strict=True)
        ]
        A = np.zeros((6 * C, 6 * C))
        Nc = np.zeros((6 * C, 6 * n))
        Nd = np.zeros((6 * n, n))
        for l, g in enumerate(legs):
            k = g.k_column
            if k is not None:
                Nd[6 * l : 6 * l + 6, l] = s[l][k]
            for i in range(len(g.columns)):
                r = 6 * (c0[l] + i)
                if i == k:
                    Nc[r : r + 6, 6 * l : 6 * l + 6] = np.eye(6)
                    Psi = np.eye(6)
                else:
                    beta = np.outer(s[l][i], pt[l][i]) / dl[l][i]
                    for a in range(n):
                        Nc[r : r + 6, 6 * a : 6 * a + 6] = beta @ Abar[a]
                    if k is not None and i < k:
                        Nc[r : r + 6, 6 * l : 6 * l + 6] -= beta
                    Psi = np.eye(6) - beta
                if i > 0:
                    A[r : r + 6, r - 6 : r] = Psi
        self.Nl = np.linalg.inv(np.eye(6 * C) - A)
        self.Nc, self.Nd = Nc, Nd
        self.N = self.Nl @ Nc @ Nd
        # mass matrices about E, world axes
        d = forward_kinematics(model, q, data=model.create_data())
        M = np.zeros((6 * C, 6 * C))
        first_platform_leg = next((l for l, g in enumerate(legs) if not g.closes_on_base), None)
        for b in range(model.nbodies):
            sl = int(ps.body_slot[b])
            if sl == ON_BASE:
                continue
            if sl == ON_PLATFORM:
                col = c0[first_platform_leg] + len(legs[first_platform_leg].columns) - 1
            else:
                col = int(np.flatnonzero(st.slot_after == sl)[0])
            R, o = d.Xw[b, :3], d.Xw[b, 3]
            X = np.zeros((6, 6))  # motion transform from E (world axes) to the body frame
            X[:3, :3] = R.T
            X[3:, 3:] = R.T
            X[3:, :3] = -R.T @ _skew(o - E)
            M[6 * col : 6 * col + 6, 6 * col : 6 * col + 6] += X.T @ model.inertia[b] @ X
        self.M = M


def _skew(x):
    return np.array([[0.0, -x[2], x[1]], [x[2], 0.0, -x[0]], [-x[1], x[0], 0.0]])


def denoc_matrices(model, q):
    """The dense DeNOC matrices N_l, N_c, N_d (eqs. 15–17) at ``q``: :class:`DenocMatrices`."""
    return DenocMatrices(model, q)
