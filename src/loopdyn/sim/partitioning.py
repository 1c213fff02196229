"""Generalized coordinate partitioning (Wehage & Haug): the dependent coordinates and
velocities from the independent ones, one Newton step at a time (compiled).

With J_d = J[rows, dep] and J_i = J[rows, ind] (independent rows of the closures):
q_d solves Φ(q) = 0 by Newton's method (Δq_d = -J_d⁻¹ Φ) and v_d = G v_i with
G = -J_d⁻¹ J_i.  ``ld.partition`` (``analysis.assembly``) chooses the partition.
"""

import numpy as np
from numba import njit


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
