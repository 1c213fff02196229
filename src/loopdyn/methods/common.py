"""Shared pieces of the multiplier methods: system terms, workspaces, results."""

import numpy as np
from numba import njit, types

from loopdyn.kernels.layout import F1, I1, model_sizes
from loopdyn.kinematics.closures import bias_acceleration_kernel, closure_terms
from loopdyn.kinematics.frames import fk_kernel
from loopdyn.tree.crba import crba_from_poses
from loopdyn.tree.rnea import rnea_from_kinematics
from loopdyn.validation import STATE_BAD, STATE_NONFINITE, state_status

# the signature of the methods' entries: (ictx, fctx, pivots, rows, q, v, tau, qdd, lam)
METHOD_ARGS = (types.float64, I1, F1, I1, I1, F1, F1, F1, F1, F1)


@njit(cache=True, inline="always")
def system_terms(
    topo, jgeom, inertia, gravity, cl_body, cl_X, row_int, row_vec, q, v, tau,
    Xrel, Xw, S, vec6, mat6, tmp33, cw, rw, zeros_nv, fext_none, Phi, J, gamma, M, phi, want_M,
):  # fmt: skip
    """φ = τ - h(q, v) (eq. 10), J, γ = -J̇q̇, and M(q) if ``want_M``."""
    # one kinematics pass (poses, S, velocities, c) shared by RNEA, closures and CRBA
    fk_kernel(topo, jgeom, q, v, Xrel, Xw, S, vec6, tmp33)
    rnea_from_kinematics(topo, inertia, gravity, zeros_nv, fext_none, Xrel, S, vec6, phi)
    for i in range(phi.shape[0]):
        phi[i] = tau[i] - phi[i]
    bias_acceleration_kernel(topo, Xrel, vec6)  # overwrites RNEA's accelerations
    closure_terms(
        topo, cl_body, cl_X, row_int, row_vec, Xw, S, vec6, cw, rw, True, True, Phi, J, gamma
    )
    if want_M:
        crba_from_poses(topo, inertia, Xrel, S, vec6, mat6, M)


@njit(cache=True)
def closure_body_wrenches(topo, Xw, cl_body, row_int, rw, cw, rows, lam, fext):
    """Body-frame wrenches ``[n; f]`` (about body origins) of multipliers ``lam`` on ``rows``.

    Row r of closure k: a force λ u_w (translation) or moment λ n (rotation) on body
    b at B's origin p_B, and its opposite on body a (world vectors, see constraints).
    """
    fext[:, :] = 0.0
    for jj in range(rows.shape[0]):
        rr = rows[jj]
        k = row_int[rr, 0]
        P = cw[k, 7]
        fw0 = fw1 = fw2 = mw0 = mw1 = mw2 = 0.0
        if row_int[rr, 1] == 0:
            fw0, fw1, fw2 = lam[jj] * rw[rr, 0, 0], lam[jj] * rw[rr, 0, 1], lam[jj] * rw[rr, 0, 2]
        else:
            mw0, mw1, mw2 = lam[jj] * rw[rr, 2, 0], lam[jj] * rw[rr, 2, 1], lam[jj] * rw[rr, 2, 2]
        for side in range(2):
            b = cl_body[k, side]
            if b < 0:
                continue
            sg = 1.0 if side == 1 else -1.0
            R = Xw[b, :3]
            o = Xw[b, 3]
            d0, d1, d2 = P[0] - o[0], P[1] - o[1], P[2] - o[2]
            # moment about the body origin: m + d × f (world), then rotate into the body frame
            t0 = mw0 + d1 * fw2 - d2 * fw1
            t1 = mw1 + d2 * fw0 - d0 * fw2
            t2 = mw2 + d0 * fw1 - d1 * fw0
            for c in range(3):
                fext[b, c] += sg * (R[0, c] * t0 + R[1, c] * t1 + R[2, c] * t2)
                fext[b, 3 + c] += sg * (R[0, c] * fw0 + R[1, c] * fw1 + R[2, c] * fw2)


_NO_ROWS = np.zeros(0, dtype=np.int64)
_NO_ROWS.setflags(write=False)


def dyn_work(model, data):
    """The multiplier methods' workspace of ``data`` (``Data.dyn``)."""
    return data.dyn


class ForwardDynamicsResult:
    """Result of ``ld.forward_dynamics``.

    ``qdd`` (nv): accelerations of every tree coordinate.  ``lam`` (m,) or None:
    the closure multipliers, row by row (``model.closure_rows[k]`` slices closure
    k): for a translation row, the force along u_A that body A's side exerts on
    body B at frame B's origin; for a rotation row, the moment about n (≈ the row's
    axis of frame A) on body B; body A gets the opposite (see
    ``loopdyn.model.closures``).  With redundant closures λ is the minimum-norm
    solution.  ``rank``: independent rows used; ``dropped``: redundant rows;
    ``condition``: a cheap estimate from the factorisation's pivots.
    """

    __slots__ = ("condition", "dropped", "lam", "method", "qdd", "rank")

    def __init__(self, qdd, lam, method, rank=0, dropped=_NO_ROWS, condition=1.0):
        self.qdd = qdd
        self.lam = lam
        self.method = method
        self.rank = rank
        self.dropped = dropped
        self.condition = condition

    def __repr__(self):
        return (
            f"ForwardDynamicsResult(method={self.method!r}, qdd={self.qdd!r}, lam={self.lam!r}, "
            f"rank={self.rank}, dropped={self.dropped!r}, condition={self.condition:.3g})"
        )


NONFINITE_INPUT = -3.0  # kernel status: q, v or tau holds NaN/inf
NONFINITE_OUTPUT = -2.0  # kernel status: the result is not finite
BAD_INPUT = -4.0  # entry status: a wrong length or a zero quaternion (explained in Python)


@njit(cache=True, inline="always")
def input_status(mlay, topo, q, v, tau, fext_none):
    """0.0 if the entry's inputs are fine, else ``NONFINITE_INPUT`` or ``BAD_INPUT``
    (``validation.state_status``: lengths, finite entries, non-zero quaternions)."""
    nv = model_sizes(mlay)[1]
    st = state_status(mlay, topo, q, v, tau, fext_none, nv, nv)
    if st == STATE_NONFINITE:
        return NONFINITE_INPUT
    if st == STATE_BAD:
        return BAD_INPUT
    return 0.0


class BoundKernel:
    """A method's single-signature entry (``arena.Entry``) with its leading arguments
    (the Data's context buffers, method buffers and the row set ``rows``) bound."""

    __slots__ = ("entry", "head", "rows")

    def __init__(self, entry, head, rows):
        self.entry = entry
        self.head = head
        self.rows = rows

    def __call__(self, q, v, tau, qdd, lam):
        return self.entry.call(*self.head, q, v, tau, qdd, lam)


def bound_kernel(name, entry, d, rows):
    """The cached :class:`BoundKernel` of method ``name`` (head: context, pivots, rows)."""
    cache = d.bound_kernels
    b = cache.get(name)
    if b is None or b.rows is not rows:
        b = cache[name] = BoundKernel(entry, (d.ictx, d.fctx, d.piv, rows), rows)
    return b
