"""Analytic derivatives of the tree's dynamics: tangent (forward-mode) spatial algebra.

Everything here is in **world axes, Plücker coordinates about the world origin**
(Carpentier & Mansard 2018, "Analytical derivatives of rigid body dynamics
algorithms", RSS, work in the world frame for the same reason: a perturbation of
joint k moves every body of k's subtree rigidly by one twist, so each body quantity's
derivative is one cross product).  Spatial vectors are ``[angular; linear]``.

Perturbation convention (Pinocchio's): a tangent vector δ (nv) acts as
q ⊕ δ = ``ld.integrate(model, q, δ)``: a revolute, prismatic or universal coordinate
is added, a spherical or free joint's pose is multiplied on the right by exp(δ) (body
frame).  Direction d (an index into v, joint k, column c) then moves the frames of
k's subtree by the world twist ψ_d = S_k,c (world), so with η_i = Σ_{j ⪯ i} S_j δ_j
(the body Jacobian of body i, columns ψ_d):

    d S_i,col   = η_i,col × S_i,col                                 (T1)
    d I_i       = η_i ×* I_i - I_i η_i ×                            (T2)

where η_i,col is η of the parent plus joint i's own columns that move column ``col``:
all of them for a spherical or free joint (S constant in the body frame, right
perturbation), the earlier ones for a universal joint (its second axis turns with the
first angle; the first is fixed in the parent).  The forward recursion, world axes:

    v_i = v_λ + S_i q̇_i                                              (R1)
    a_i = a_λ + S_i q̈_i + Σ_col (W_col × S_col) q̇_col,              (R2)
          W_col = v_λ + Σ_{col' moving col} S_col' q̇_col'
    f_i = I_i a_i + v_i ×* I_i v_i - f_ext,i,   F_i = f_i + Σ_children F_c   (R3)
    τ_i = S_iᵀ F_i                                                   (R4)

(a_0 = -[0; g]: gravity as a base acceleration) and each is differentiated term by
term (product rule) with (T1), (T2): the tangent recursion below.  Body i's kinematic
tangents (η, ∂v, ∂a) and its own force's vanish outside the directions of its
ancestors' coordinates (its support, ``w.sup[i, :w.nsup[i]]``): only those are computed
(and read: the ground's rows, index nb, are zero in every direction and stand for a
body that a direction does not move), so the forward pass costs O(Σ_i depth_i) and
the backward one, whose subtree sums fill every direction, O(nb · nv): the work of
Carpentier & Mansard's algorithm, the size of the output.

Compiled kernels (numba) on ``(m, d, w)``: the model and Data handles
(``loopdyn.kernels.views``; the poses ``d.Xw`` and body-frame subspaces ``d.S`` of
``fk_kernel``) and ``w``, the named tuple of views of the derivatives' own workspace
buffer (``tangent_views``).  Nothing is allocated.
"""

from collections import namedtuple

import numpy as np
from numba import njit

from loopdyn.kernels.numba_internals import block, block_int
from loopdyn.kernels.spatial import rigid_inertia_times_at, rigid_inertia_to_parent_add
from loopdyn.model.joints import FREE, SPHERICAL

# the derivatives' workspace: (name, shape in the sizes nb, n = nv, r = closure rows,
# k = n + r); world quantities, index nb of the (nb + 1) arrays the ground
LAYOUT = (
    ("Sw", ("nb", 6, 6)),  # world motion subspaces, column c of body i in Sw[i, c]
    ("Iw", ("nb", 6, 6)),  # world spatial inertias (about the world origin)
    ("V", ("nb1", 6)),  # world velocities
    ("A", ("nb1", 6)),  # world accelerations, gravity offset a_0 = -[0; g] included
    ("F", ("nb", 6)),  # (R3) forces, then summed over subtrees
    ("eta", ("nb1", "n", 6)),  # η_i[d]: the twist moving body i along direction d
    ("dVq", ("nb1", "n", 6)),  # ∂V_i/∂q[d]
    ("dAq", ("nb1", "n", 6)),
    ("dVv", ("nb1", "n", 6)),  # ∂V_i/∂v[d]
    ("dAv", ("nb1", "n", 6)),
    ("dFq", ("nb", "n", 6)),  # ∂F_i/∂q[d]
    ("dFv", ("nb", "n", 6)),
    ("W", (6, 6)),  # scratch: W_col of (R2)
    ("ds", (6, 6)),  # scratch: ∂S_col/∂q[d] of (T1)
    ("trm", (3, 5, 3)),  # scratch: a closure row's terms (u, u̇, w, ẇ, ṗ_B)
    ("M", ("n", "n")),  # the mass matrix
    ("Jk", ("r", "n")),  # the kept closure rows of J
    ("hq", ("r", "n")),  # ∂(J v)/∂q of those rows at fixed v
    ("sc", ("r",)),  # the rows' scales in the KKT matrix
    ("K", ("k", "k")),  # KKT matrix, then its LU factors
    ("kw", ("k",)),  # scratch of the condition estimate
    ("piv", ("k",)),  # int: LU pivots
    ("nsup", ("nb1",)),  # int: how many directions move body i
    ("sup", ("nb1", "n")),  # int: those directions (the ancestors' coordinates), sup[i, :nsup[i]]
    ("mark", ("n",)),  # int: scratch, the directions moving a closure row's bodies
    ("diag", (4,)),  # diag[2]: 1/cond of the KKT matrix
    ("rq", (4, "n")),  # scratch: a swing / log row's c: ∂c/∂q, ∂ċ/∂q, ∂c̈/∂q, ∂c̈/∂v
    ("rx", (2, "n", 6)),  # scratch: ∂ξ/∂q of a rotation row's g (0) and c (1)
)
_INT = ("piv", "nsup", "sup", "mark")
TangentViews = namedtuple("TangentViews", [name for name, _ in LAYOUT])


def workspace_shapes(nb, n, r):
    """{name: shape} of ``LAYOUT`` for the sizes."""
    sizes = {"nb": nb, "nb1": nb + 1, "n": n, "r": r, "k": n + r}
    return {name: tuple(sizes.get(x, x) for x in dims) for name, dims in LAYOUT}


def allocate_workspace(nb, n, r):
    """(buffer, {name: numpy view}) of the derivatives' workspace (``tangent_views``)."""
    shapes = workspace_shapes(nb, n, r)
    size = sum(int(np.prod(s)) for s in shapes.values())
    buf = np.zeros(size)
    views, o = {}, 0
    for name, _ in LAYOUT:
        s = shapes[name]
        part = buf[o : o + int(np.prod(s))]
        views[name] = (part.view(np.int64) if name in _INT else part).reshape(s)
        o += int(np.prod(s))
    return buf, views


@njit(cache=True, inline="always")
def tangent_views(wb, nb, n, r):
    """``TangentViews`` of the buffer ``wb`` (``allocate_workspace``'s order, ``LAYOUT``)."""
    nb1, k = nb + 1, n + r
    o0 = 0
    o1 = o0 + nb * 36
    o2 = o1 + nb * 36
    o3 = o2 + nb1 * 6
    o4 = o3 + nb1 * 6
    o5 = o4 + nb * 6
    o6 = o5 + nb1 * n * 6
    o7 = o6 + nb1 * n * 6
    o8 = o7 + nb1 * n * 6
    o9 = o8 + nb1 * n * 6
    o10 = o9 + nb1 * n * 6
    o11 = o10 + nb * n * 6
    o12 = o11 + nb * n * 6
    o13 = o12 + 36
    o14 = o13 + 36
    o15 = o14 + 45
    o16 = o15 + n * n
    o17 = o16 + r * n
    o18 = o17 + r * n
    o19 = o18 + r
    o20 = o19 + k * k
    o21 = o20 + k
    o22 = o21 + k
    o23 = o22 + nb1
    o24 = o23 + nb1 * n
    o25 = o24 + n
    o26 = o25 + 4
    o27 = o26 + 4 * n
    return TangentViews(
        block(wb, o0, (nb, 6, 6)),
        block(wb, o1, (nb, 6, 6)),
        block(wb, o2, (nb1, 6)),
        block(wb, o3, (nb1, 6)),
        block(wb, o4, (nb, 6)),
        block(wb, o5, (nb1, n, 6)),
        block(wb, o6, (nb1, n, 6)),
        block(wb, o7, (nb1, n, 6)),
        block(wb, o8, (nb1, n, 6)),
        block(wb, o9, (nb1, n, 6)),
        block(wb, o10, (nb, n, 6)),
        block(wb, o11, (nb, n, 6)),
        block(wb, o12, (6, 6)),
        block(wb, o13, (6, 6)),
        block(wb, o14, (3, 5, 3)),
        block(wb, o15, (n, n)),
        block(wb, o16, (r, n)),
        block(wb, o17, (r, n)),
        block(wb, o18, r),
        block(wb, o19, (k, k)),
        block(wb, o20, k),
        block_int(wb, o21, k),
        block_int(wb, o22, nb1),
        block_int(wb, o23, (nb1, n)),
        block_int(wb, o24, n),
        block(wb, o25, 4),
        block(wb, o26, (4, n)),
        block(wb, o27, (2, n, 6)),
    )


# ---------------------------------------------------------------- 6-vector algebra
# a, b: anything indexable with 0..5 (array rows, tuples); results are tuples


@njit(cache=True, inline="always")
def crm(a, b):
    """Motion cross product a × b = [aω × bω; aω × bv + av × bω]."""
    return (
        a[1] * b[2] - a[2] * b[1],
        a[2] * b[0] - a[0] * b[2],
        a[0] * b[1] - a[1] * b[0],
        a[1] * b[5] - a[2] * b[4] + a[4] * b[2] - a[5] * b[1],
        a[2] * b[3] - a[0] * b[5] + a[5] * b[0] - a[3] * b[2],
        a[0] * b[4] - a[1] * b[3] + a[3] * b[1] - a[4] * b[0],
    )


@njit(cache=True, inline="always")
def crf(a, f):
    """Force cross product a ×* f = [aω × fn + av × ff; aω × ff]."""
    return (
        a[1] * f[2] - a[2] * f[1] + a[4] * f[5] - a[5] * f[4],
        a[2] * f[0] - a[0] * f[2] + a[5] * f[3] - a[3] * f[5],
        a[0] * f[1] - a[1] * f[0] + a[3] * f[4] - a[4] * f[3],
        a[1] * f[5] - a[2] * f[4],
        a[2] * f[3] - a[0] * f[5],
        a[0] * f[4] - a[1] * f[3],
    )


@njit(cache=True, inline="always")
def add6(out, s, x):
    """out += s x (out: an array row)."""
    for r in range(6):
        out[r] += s * x[r]


@njit(cache=True, inline="always")
def dot6(a, b):
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2] + a[3] * b[3] + a[4] * b[4] + a[5] * b[5]


@njit(cache=True, inline="always")
def inertia_times(Iw, i, x):
    """Iw[i] x for a rigid-body inertia (world, ``rigid_inertia_times_at``)."""
    return rigid_inertia_times_at(Iw, i, x[0], x[1], x[2], x[3], x[4], x[5])


@njit(cache=True, inline="always")
def _moved(jt, nvj, c):
    """How many of joint i's own columns (the first ones) move its column c: all for a
    spherical or free joint, the earlier ones otherwise (module doc, (T1))."""
    return nvj if (jt == SPHERICAL or jt == FREE) else c


# ---------------------------------------------------------------- the recursions
@njit(cache=True)
def world_tangents(m, d, w, v, qdd):
    """(R1), (R2) and their tangents in every direction: ``w.V``, ``w.A``, ``w.eta``,
    ``w.dVq``, ``w.dAq``, ``w.dVv``, ``w.dAv`` (world axes, about the world origin), the
    world subspaces ``w.Sw`` and inertias ``w.Iw``, the supports ``w.sup``, ``w.nsup``.
    In: the poses ``d.Xw`` and body-frame ``d.S`` (``fk_kernel``), ``v``, ``qdd`` (nv).
    The ground is index nb (zero tangents in every direction)."""
    nb, n = m.nb, m.nv
    topo, Xw, S = m.topo, d.Xw, d.S
    Sw, V, A, W, ds, sup, nsup = w.Sw, w.V, w.A, w.W, w.ds, w.sup, w.nsup
    eta, dVq, dAq, dVv, dAv = w.eta, w.dVq, w.dAq, w.dVv, w.dAv
    for r in range(6):
        V[nb, r] = 0.0
        A[nb, r] = 0.0 if r < 3 else -m.gravity[r - 3]
    for dd in range(n):
        for r in range(6):
            eta[nb, dd, r] = 0.0
            dVq[nb, dd, r] = 0.0
            dAq[nb, dd, r] = 0.0
            dVv[nb, dd, r] = 0.0
            dAv[nb, dd, r] = 0.0
    nsup[nb] = 0
    for i in range(nb):
        lam = topo[i, 0]
        if lam < 0:
            lam = nb
        jt, iv, nvj = topo[i, 1], topo[i, 3], topo[i, 5]
        R = Xw[i]  # rows 0-2: R (body -> world), row 3: the origin p
        # world inertia I = X⁻ᵀ I_b X⁻¹ (the body's pose in the world)
        for r in range(6):
            for c in range(6):
                w.Iw[i, r, c] = 0.0
        rigid_inertia_to_parent_add(R[:3], R[3], m.inertia[i], w.Iw[i])
        # world S: [R s_ω; R s_v + p × R s_ω]
        for c in range(nvj):
            a0 = R[0, 0] * S[i, 0, c] + R[0, 1] * S[i, 1, c] + R[0, 2] * S[i, 2, c]
            a1 = R[1, 0] * S[i, 0, c] + R[1, 1] * S[i, 1, c] + R[1, 2] * S[i, 2, c]
            a2 = R[2, 0] * S[i, 0, c] + R[2, 1] * S[i, 1, c] + R[2, 2] * S[i, 2, c]
            l0 = R[0, 0] * S[i, 3, c] + R[0, 1] * S[i, 4, c] + R[0, 2] * S[i, 5, c]
            l1 = R[1, 0] * S[i, 3, c] + R[1, 1] * S[i, 4, c] + R[1, 2] * S[i, 5, c]
            l2 = R[2, 0] * S[i, 3, c] + R[2, 1] * S[i, 4, c] + R[2, 2] * S[i, 5, c]
            p0, p1, p2 = R[3, 0], R[3, 1], R[3, 2]
            Sw[i, c, 0], Sw[i, c, 1], Sw[i, c, 2] = a0, a1, a2
            Sw[i, c, 3] = l0 + p1 * a2 - p2 * a1
            Sw[i, c, 4] = l1 + p2 * a0 - p0 * a2
            Sw[i, c, 5] = l2 + p0 * a1 - p1 * a0
        ns = nsup[lam]
        for kk in range(ns):
            sup[i, kk] = sup[lam, kk]
        for c in range(nvj):
            sup[i, ns + c] = iv + c
        nsup[i] = ns + nvj
        # W_c = v_λ + Σ_{c' moving c} S_c' q̇_c'   (R2)
        for c in range(nvj):
            nm = _moved(jt, nvj, c)
            for r in range(6):
                s = V[lam, r]
                for c2 in range(nm):
                    s += Sw[i, c2, r] * v[iv + c2]
                W[c, r] = s
        # (R1), (R2)
        for r in range(6):
            sv, sa = V[lam, r], A[lam, r]
            for c in range(nvj):
                sv += Sw[i, c, r] * v[iv + c]
                sa += Sw[i, c, r] * qdd[iv + c]
            V[i, r], A[i, r] = sv, sa
        for c in range(nvj):
            add6(A[i], v[iv + c], crm(W[c], Sw[i, c]))
        # their tangents, direction by direction
        for kk in range(ns + nvj):
            dd = sup[i, kk]
            c0 = dd - iv
            own = kk >= ns
            lam = topo[i, 0] if not own else nb  # a joint's own direction: the parent rests
            if lam < 0:
                lam = nb
            # (T1): ∂S_c/∂q[dd]
            for c in range(nvj):
                if own and c0 < _moved(jt, nvj, c):
                    x = crm(Sw[i, c0], Sw[i, c])
                elif own:
                    x = (0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
                else:
                    x = crm(eta[lam, dd], Sw[i, c])
                for r in range(6):
                    ds[c, r] = x[r]
            for r in range(6):
                eta[i, dd, r] = Sw[i, c0, r] if own else eta[lam, dd, r]
                sv, sa = dVq[lam, dd, r], dAq[lam, dd, r]
                for c in range(nvj):
                    sv += ds[c, r] * v[iv + c]
                    sa += ds[c, r] * qdd[iv + c]
                dVq[i, dd, r], dAq[i, dd, r] = sv, sa
                dVv[i, dd, r] = dVv[lam, dd, r] + (Sw[i, c0, r] if own else 0.0)
                dAv[i, dd, r] = dAv[lam, dd, r]
            for c in range(nvj):
                vc = v[iv + c]
                nm = _moved(jt, nvj, c)
                # ∂W_c/∂q[dd] × S_c + W_c × ∂S_c/∂q[dd]
                wq0 = dVq[lam, dd, 0]
                wq1 = dVq[lam, dd, 1]
                wq2 = dVq[lam, dd, 2]
                wq3 = dVq[lam, dd, 3]
                wq4 = dVq[lam, dd, 4]
                wq5 = dVq[lam, dd, 5]
                for c2 in range(nm):
                    vv = v[iv + c2]
                    wq0 += ds[c2, 0] * vv
                    wq1 += ds[c2, 1] * vv
                    wq2 += ds[c2, 2] * vv
                    wq3 += ds[c2, 3] * vv
                    wq4 += ds[c2, 4] * vv
                    wq5 += ds[c2, 5] * vv
                add6(dAq[i, dd], vc, crm((wq0, wq1, wq2, wq3, wq4, wq5), Sw[i, c]))
                add6(dAq[i, dd], vc, crm(W[c], ds[c]))
                # ∂W_c/∂v[dd] × S_c
                if own and c0 < nm:
                    x = crm(
                        (
                            dVv[lam, dd, 0] + Sw[i, c0, 0],
                            dVv[lam, dd, 1] + Sw[i, c0, 1],
                            dVv[lam, dd, 2] + Sw[i, c0, 2],
                            dVv[lam, dd, 3] + Sw[i, c0, 3],
                            dVv[lam, dd, 4] + Sw[i, c0, 4],
                            dVv[lam, dd, 5] + Sw[i, c0, 5],
                        ),
                        Sw[i, c],
                    )
                else:
                    x = crm(dVv[lam, dd], Sw[i, c])
                add6(dAv[i, dd], vc, x)
            if own:
                add6(dAv[i, dd], 1.0, crm(W[c0], Sw[i, c0]))


@njit(cache=True)
def inertial_forces(m, w):
    """(R3) without external forces and its tangents (T2): ``w.F``, ``w.dFq``, ``w.dFv``
    (world), from ``world_tangents``."""
    nb, n = m.nb, m.nv
    Iw, V, A, F, sup = w.Iw, w.V, w.A, w.F, w.sup
    eta, dVq, dAq, dVv, dAv, dFq, dFv = w.eta, w.dVq, w.dAq, w.dVv, w.dAv, w.dFq, w.dFv
    for i in range(nb):
        Ia = inertia_times(Iw, i, A[i])
        Iv = inertia_times(Iw, i, V[i])
        x = crf(V[i], Iv)
        for r in range(6):
            F[i, r] = Ia[r] + x[r]
        for dd in range(n):
            for r in range(6):
                dFq[i, dd, r] = 0.0
                dFv[i, dd, r] = 0.0
        for kk in range(w.nsup[i]):
            dd = sup[i, kk]
            e = eta[i, dd]
            # (T2) on a and v: ∂I x = η ×* (I x) - I (η × x)
            Iea = inertia_times(Iw, i, crm(e, A[i]))
            Iev = inertia_times(Iw, i, crm(e, V[i]))
            eIa = crf(e, Ia)
            eIv = crf(e, Iv)
            IdA = inertia_times(Iw, i, dAq[i, dd])
            IdV = inertia_times(Iw, i, dVq[i, dd])
            t = crf(dVq[i, dd], Iv)
            u = crf(
                V[i],
                (
                    eIv[0] - Iev[0] + IdV[0],
                    eIv[1] - Iev[1] + IdV[1],
                    eIv[2] - Iev[2] + IdV[2],
                    eIv[3] - Iev[3] + IdV[3],
                    eIv[4] - Iev[4] + IdV[4],
                    eIv[5] - Iev[5] + IdV[5],
                ),
            )
            for r in range(6):
                dFq[i, dd, r] = eIa[r] - Iea[r] + IdA[r] + t[r] + u[r]
            IdAv = inertia_times(Iw, i, dAv[i, dd])
            IdVv = inertia_times(Iw, i, dVv[i, dd])
            t = crf(dVv[i, dd], Iv)
            u = crf(V[i], IdVv)
            for r in range(6):
                dFv[i, dd, r] = IdAv[r] + t[r] + u[r]


@njit(cache=True)
def force_tangents_backward(m, w, B):
    """(R3)'s subtree sums and (R4): B[j, d] = ∂τ_j/∂q[d], B[j, n + d] = ∂τ_j/∂v[d]
    (j, d < nv), the force tangents ``w.dFq``, ``w.dFv`` (with any external wrenches'
    already subtracted) summed leaves first; the product rule's ∂S_c/∂q · F by (T1)."""
    nb, n = m.nb, m.nv
    topo, Sw, F, eta, dFq, dFv, sup = m.topo, w.Sw, w.F, w.eta, w.dFq, w.dFv, w.sup
    for i in range(nb - 1, -1, -1):
        lam = topo[i, 0]
        jt, iv, nvj = topo[i, 1], topo[i, 3], topo[i, 5]
        for c in range(nvj):
            col = iv + c
            Sc = Sw[i, c]
            for dd in range(n):
                B[col, dd] = dot6(Sc, dFq[i, dd])
                B[col, n + dd] = dot6(Sc, dFv[i, dd])
            # (η_λ[d] × S_c) · F_i over the ancestors' directions
            if lam >= 0:
                for kk in range(w.nsup[lam]):
                    dd = sup[lam, kk]
                    B[col, dd] += dot6(crm(eta[lam, dd], Sc), F[i])
            for c2 in range(_moved(jt, nvj, c)):
                B[col, iv + c2] += dot6(crm(Sw[i, c2], Sc), F[i])
        if lam >= 0:
            for r in range(6):
                F[lam, r] += F[i, r]
            for dd in range(n):
                for r in range(6):
                    dFq[lam, dd, r] += dFq[i, dd, r]
                    dFv[lam, dd, r] += dFv[i, dd, r]
