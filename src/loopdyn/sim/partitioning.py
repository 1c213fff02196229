"""Generalized coordinate partitioning (Wehage & Haug): the dependent coordinates and
velocities from the independent ones, one Newton step at a time (compiled).

With J_d = J[rows, dep] and J_i = J[rows, ind] (independent rows of the closures):
q_d solves Φ(q) = 0 by Newton's method (Δq_d = -J_d⁻¹ Φ) and v_d = G v_i with
G = -J_d⁻¹ J_i.  ``ld.partition`` (``analysis.assembly``) chooses the partition.
"""

import numpy as np
from numba import njit

from loopdyn.kernels.linalg import lu_inplace, lu_solve_rows


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
    piv = np.empty(nr, np.int64)
    ratio = lu_inplace(A, nr, piv)  # |pivot| min / max (0: J_d singular)
    if ratio == 0.0:
        return err, ratio
    lu_solve_rows(A, nr, piv, X)  # X <- J_d^-1 [Phi, J_i]
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
