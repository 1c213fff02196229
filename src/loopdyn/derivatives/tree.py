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
term (product rule) with (T1), (T2): the tangent recursion below, vectorised over all
nv directions at once.  It is exact (no finite difference) and costs O(nb · nv).
"""

import numpy as np

from loopdyn.model.joints import FREE, SPHERICAL


def cross_m(a, b):
    """Motion cross product a × b of spatial motions (…, 6)."""
    aw, av, bw, bv = a[..., :3], a[..., 3:], b[..., :3], b[..., 3:]
    return np.concatenate([np.cross(aw, bw), np.cross(aw, bv) + np.cross(av, bw)], axis=-1)


def cross_f(a, f):
    """Force cross product a ×* f of a motion a and a force f (…, 6)."""
    aw, av, fn, ff = a[..., :3], a[..., 3:], f[..., :3], f[..., 3:]
    return np.concatenate([np.cross(aw, fn) + np.cross(av, ff), np.cross(aw, ff)], axis=-1)


def _skew(p):
    return np.array([[0.0, -p[2], p[1]], [p[2], 0.0, -p[0]], [-p[1], p[0], 0.0]])


class TreeTangents:
    """World-frame kinematics of a tree and their derivatives in every direction.

    Attributes (world axes, about the world origin; index ``nb`` is the ground):
    ``R``, ``p`` (nb+1, 3, 3), (nb+1, 3) body poses; ``Sw`` list of (6, nv_j) world
    motion subspaces; ``I`` (nb, 6, 6) world inertias; ``V``, ``A`` (nb+1, 6)
    velocities and accelerations (A with the gravity offset a_0 = -[0; g]); ``eta``
    (nb+1, nv, 6) body Jacobians (η_i: column d the twist that moves body i for
    q ⊕ e_d); ``dVq``, ``dAq`` (nb+1, nv, 6): ∂V_i/∂q, ∂A_i/∂q (row d: direction d);
    ``dVv``, ``dAv``: ∂/∂v.  ``dS`` list of (nv, 6, nv_j): ∂S_i,col/∂q.
    """

    def __init__(self, model, Xw, S_body, v, qdd):
        topo = np.asarray(model.topo)
        nb, n = model.nbodies, model.nv
        self.nb, self.n, self.topo = nb, n, topo
        g = np.asarray(model.gravity, dtype=float)
        a0 = np.concatenate([np.zeros(3), -g])
        self.a0 = a0
        R = np.zeros((nb + 1, 3, 3))
        p = np.zeros((nb + 1, 3))
        R[nb] = np.eye(3)
        V = np.zeros((nb + 1, 6))
        A = np.zeros((nb + 1, 6))
        A[nb] = a0
        eta = np.zeros((nb + 1, n, 6))
        dVq, dAq = np.zeros((nb + 1, n, 6)), np.zeros((nb + 1, n, 6))
        dVv, dAv = np.zeros((nb + 1, n, 6)), np.zeros((nb + 1, n, 6))
        I = np.zeros((nb, 6, 6))
        Sw, dS = [], []
        inertia = np.asarray(model.inertia)
        for i in range(nb):
            lam = topo[i, 0]
            lam = nb if lam < 0 else lam
            jt, iv, nvj = topo[i, 1], topo[i, 3], topo[i, 5]
            Ri, pi = Xw[i, :3], Xw[i, 3]
            R[i], p[i] = Ri, pi
            # world inertia I = X⁻ᵀ I_b X⁻¹, X = [[R, 0], [p̂ R, R]] (body -> world motions)
            Xi = np.zeros((6, 6))
            Xi[:3, :3] = Ri.T
            Xi[3:, 3:] = Ri.T
            Xi[3:, :3] = -Ri.T @ _skew(pi)
            I[i] = Xi.T @ inertia[i] @ Xi
            ang = Ri @ S_body[i, :3, :nvj]
            S = np.concatenate([ang, Ri @ S_body[i, 3:, :nvj] + np.cross(pi, ang.T).T])
            Sw.append(S)
            local = jt == SPHERICAL or jt == FREE
            vj, aj = v[iv : iv + nvj], qdd[iv : iv + nvj]
            e = eta[lam].copy()
            e[iv : iv + nvj] = S.T
            eta[i] = e
            # (T1): the directions that move column col
            dSi = np.zeros((n, 6, nvj))
            Wc, moves = [], []
            for c in range(nvj):
                mv = list(range(nvj)) if local else list(range(c))
                moves.append(mv)
                Jc = eta[lam].copy()
                for c2 in mv:
                    Jc[iv + c2] = S[:, c2]
                dSi[:, :, c] = cross_m(Jc, S[:, c])
                Wc.append(V[lam] + S[:, mv] @ vj[mv])
            dS.append(dSi)
            # (R1), (R2) and their tangents
            V[i] = V[lam] + S @ vj
            dVq[i] = dVq[lam] + dSi @ vj
            dVv[i] = dVv[lam]
            dVv[i, iv : iv + nvj] += S.T
            A[i] = A[lam] + S @ aj
            dAq[i] = dAq[lam] + dSi @ aj
            dAv[i] = dAv[lam].copy()
            for c in range(nvj):
                mv = moves[c]
                dWq = dVq[lam] + dSi[:, :, mv] @ vj[mv]
                dWv = dVv[lam].copy()
                for c2 in mv:
                    dWv[iv + c2] += S[:, c2]
                A[i] += cross_m(Wc[c], S[:, c]) * vj[c]
                dAq[i] += (cross_m(dWq, S[:, c]) + cross_m(Wc[c], dSi[:, :, c])) * vj[c]
                dAv[i] += cross_m(dWv, S[:, c]) * vj[c]
                dAv[i, iv + c] += cross_m(Wc[c], S[:, c])
        self.R, self.p, self.V, self.A, self.I = R, p, V, A, I
        self.eta, self.dVq, self.dAq, self.dVv, self.dAv = eta, dVq, dAq, dVv, dAv
        self.Sw, self.dS = Sw, dS

    def forces(self, fext=None, dfext=None):
        """(∂τ/∂q, ∂τ/∂v) (nv × nv) of (R3)-(R4) with world wrenches ``fext`` (nb, 6)
        (about the world origin, acting on each body) whose derivatives along the
        directions are ``dfext`` (nb, nv, 6); also sets ``self.tau`` (nv)."""
        nb, n, topo = self.nb, self.n, self.topo
        V, A, I, eta = self.V, self.A, self.I, self.eta
        F = np.zeros((nb, 6))
        dFq = np.zeros((nb, n, 6))
        dFv = np.zeros((nb, n, 6))
        for i in range(nb):
            Ii, vi, ai, e = I[i], V[i], A[i], eta[i]
            Iv, Ia = Ii @ vi, Ii @ ai
            dIa = cross_f(e, Ia) - cross_m(e, ai) @ Ii.T  # (T2) applied to a
            dIv = cross_f(e, Iv) - cross_m(e, vi) @ Ii.T
            F[i] = Ia + cross_f(vi, Iv)
            dFq[i] = (
                dIa
                + self.dAq[i] @ Ii.T
                + cross_f(self.dVq[i], Iv)
                + cross_f(vi, dIv + self.dVq[i] @ Ii.T)
            )
            dFv[i] = self.dAv[i] @ Ii.T + cross_f(self.dVv[i], Iv) + cross_f(vi, self.dVv[i] @ Ii.T)
            if fext is not None:
                F[i] -= fext[i]
                dFq[i] -= dfext[i]
        tau = np.zeros(n)
        dtq, dtv = np.zeros((n, n)), np.zeros((n, n))
        for i in range(nb - 1, -1, -1):
            iv, nvj = topo[i, 3], topo[i, 5]
            S = self.Sw[i]
            tau[iv : iv + nvj] = S.T @ F[i]
            dtq[iv : iv + nvj] = (dFq[i] @ S).T + np.einsum("dkc,k->cd", self.dS[i], F[i])
            dtv[iv : iv + nvj] = (dFv[i] @ S).T
            lam = topo[i, 0]
            if lam >= 0:
                F[lam] += F[i]
                dFq[lam] += dFq[i]
                dFv[lam] += dFv[i]
        self.tau = tau
        return dtq, dtv
