"""Shared pieces of the forward-dynamics methods: system terms, closure loads, statuses,
the result type and the acceptance check every kernel ends with.

A method's entry returns one float: a positive *quality* (the smallest pivot ratio
of its factorisations, in (0, 1]) when q̈ and λ were computed and pass the
acceptance check, or one of the negative statuses below, in which case the output
buffers are not a result and the runner falls back or raises.
"""

import numpy as np
from numba import njit, types

from loopdyn.kernels.checks import STATE_BAD, STATE_NONFINITE, all_finite, state_status
from loopdyn.kernels.numba_internals import (
    _DENSE,
    _PLANNED,
    Entry,
    as_input,
    block,
    block_int,
    entry,
    unliteral,
)
from loopdyn.kernels.views import handles
from loopdyn.kinematics.closures import bias_accelerations, closure_terms
from loopdyn.kinematics.frames import fk_kernel
from loopdyn.model.closures import COUPLING, TRANSLATION
from loopdyn.tree.crba import crba_from_poses
from loopdyn.tree.rnea import rnea_from_kinematics

# statuses (negative) of a method entry; positive values are the quality
SINGULAR = -1.0  # a pivot below PIVOT_TOL: M or the closure system is (near) singular
NONFINITE_OUTPUT = -2.0  # the result is not finite
NONFINITE_INPUT = -3.0  # q, v or tau holds NaN/inf
BAD_INPUT = -4.0  # a wrong length or a zero quaternion (explained by the checked path)
INACCURATE = -5.0  # J q̈ = γ does not hold to RESIDUAL_TOL: the elimination lost accuracy
PIVOT_TOL = 1e-14


def method_entry(fn, planned=False):
    """A method's entry: ``fn`` compiled as an ``entry`` (cached, no reference counting)
    for ``(ctx, q, v, tau, qdd, lam)``, or with ``planned`` ``(ctx, pbuf, q, v, tau, qdd,
    lam)``, -> status (float64), as an ``Entry``: the two signatures the batches and the
    compiled simulation call through (``call_at`` / ``call_at_planned``; denoc's inverse
    entry has the planned one too)."""
    return Entry(entry(fn), types.float64, *(_PLANNED if planned else _DENSE))


def plan_buffer(nint, nflt):
    """A plan's one float64 buffer for its kernels, [len(ip) | ip (``nint`` int64) | fw
    (``nflt`` floats, at least 1)]: ``(buf, ip, fw)``, ip and fw views of buf (what
    ``plan_views`` carves from it in compiled code)."""
    buf = np.zeros(1 + nint + max(nflt, 1))
    buf[:1].view(np.int64)[0] = nint
    return buf, buf[1 : 1 + nint].view(np.int64), buf[1 + nint :]


def pack_int_plan(sections, nhead, nflt):
    """A ``plan_buffer`` whose int plan holds a header of ``nhead`` entries, then the
    arrays of ``sections`` ((header slot, int array) pairs) one after the other, the
    offset of each in its header slot (embedding's and rcr's plans).  Returns
    ``(buf, ip, fw, offsets)``, ``offsets`` by header slot."""
    sections = [(h, np.asarray(a, dtype=np.int64).reshape(-1)) for h, a in sections]
    offsets, o = {}, nhead
    for h, a in sections:
        offsets[h] = o
        o += a.size
    buf, ip, fw = plan_buffer(o, nflt)
    for h, a in sections:
        ip[h] = offsets[h]
        ip[offsets[h] : offsets[h] + a.size] = a
    return buf, ip, fw, offsets


@njit(cache=True, inline="always")  # returns views: see numba_internals item 1
def plan_views(pbuf):
    """(ip, fw): the int plan and the float workspace in a plan's buffer (``plan_buffer``)."""
    n = block_int(pbuf, 0, 1)[0]
    return block_int(pbuf, 1, n), block(pbuf, 1 + n, pbuf.shape[0] - 1 - n)


class DependentRows(ValueError):
    """Raised by a method's ``bind`` when the rows it was given cannot all be
    independent (more rows than coordinates in a loop): the runner detects the
    independent rows and binds again."""


# |J q̈ - γ|∞ <= RESIDUAL_TOL (|J|∞ |q̈|∞ + |γ|∞): what a backward-stable solve achieves
# (~1e-15) with room for rounding on large models; instabilities leave far more
RESIDUAL_TOL = 1e-10
# d.diag slots: the last call's quality, its relative residual, its acceleration scale,
# the refinement steps it took
DIAG_QUALITY, DIAG_RESIDUAL, DIAG_ASCALE, DIAG_REFINED = 0, 1, 2, 3
# ... and, where a method checks it (embedding after a refinement), the relative residual
# of the equations of motion |τ + Jᵀλ - M q̈ - h|∞ / max(|τ + Jᵀλ|∞, |M q̈ + h|∞, |F|∞),
# F the joint wrenches of the RNEA that evaluates it
DIAG_EOM = 4
# the largest such residual accepted: a backward-stable solve leaves ~1e-15 (the rounding
# of the RNEA on large mass ratios up to ~1e-12); an unstable one far more
EOM_TOL = 1e-9
# Iterative refinement (SLM, recursive_lambda): their Schur complement J M⁻¹ Jᵀ squares
# the conditioning of J, so below this pivot ratio the first solve may be off by more
# than ~1e-12 relative; each step solves the same system for the residual of the
# closed-loop equations and gains a factor ~ eps · condition
REFINE_RATIO = 1e-3
MAX_REFINE = 6
# a refinement whose corrections stop shrinking has reached its rounding level: the
# iterate is kept if the correction (~ its error) is below this fraction of the scale,
# else the solve is INACCURATE; one still converging after MAX_REFINE steps is kept if
# the error it leaves, estimated from its geometric decrease (|δ_last|² / |δ_prev|), is
# below the same fraction.  STALL_TOL for the methods that fall back to augmented
# (a closure 1e-10 m off a hinge: rcr stalled at 1e-8 relative where augmented is exact),
# FINAL_STALL_TOL for augmented itself, the fallback, for which INACCURATE is an error
STALL_TOL = 1e-11
FINAL_STALL_TOL = 1e-8
# ... and below this LU pivot ratio of augmented's KKT matrix (eq. 10): the census's misses
# of one LU solve (errors 1.6e-8..8.3e-8, cond J M⁻¹ Jᵀ 1e11..6e12) have ratios 2e-14..1e-11;
# the catalog's lowest is the excavator's ~7e-8 (its mass ratios), which never refines
REFINE_LU_RATIO = 1e-9
# ... or above this estimate of the KKT matrix's condition ‖K‖₁ ‖U⁻¹‖₁ (``lu_inverse_norm``):
# K's condition goes with σ_min(J)², its LU pivots with σ_min(J), so a pair of nearly
# dependent rows can leave a pivot ratio of 8e-9 at cond 4e15 and one solve off by 5e-3
# (hypothesis, seed 20261127); and a chain with mass ratios 0.01..1000 (cond M 3.8e9,
# pivot ratio 3.7e-9) one solve left 1.55e-8 off (seed 20261129): one solve's error is
# up to ~cond·eps, so refine above 1e8 (cond·eps 1e-8); the catalog's largest, the
# excavator's ~4e7 (1-norm of its K), does not refine
REFINE_LU_COND = 1e8
# ... estimated only where one solve's error bound eps |J||λ| / (ratio |q̈|) (relative) is
# above this: the catalog's largest is the excavator's 2e-7 (its pivots spread with its
# mass ratios), then stewart's 4e-12, the others' below 3e-14 (4 random states each)
ONE_SOLVE_TOL = 1e-11
EPS = 2.220446049250313e-16  # the unit roundoff of float64, 2^-52
# ... and below this ratio of the articulated-body pivots (``aba_pivot_ratio``): the
# recursion's own cancellations then cost up to ~1e-7 on mass ratios of 1e6 (Cassie's
# rotors; Pinocchio's ABA alike), which a refinement step removes
REFINE_ABA_RATIO = 1e-5


@njit(cache=True, inline="always")
def input_status(m, q, v, tau):
    """0.0, or ``NONFINITE_INPUT`` / ``BAD_INPUT`` for the entry's inputs."""
    st = state_status(m, q, v, tau, m.nv, m.nv)
    if st == STATE_NONFINITE:
        return NONFINITE_INPUT
    if st == STATE_BAD:
        return BAD_INPUT
    return 0.0


@njit(cache=True, inline="always")  # returns the handles' views (numba_internals item 1)
def checked_handles(ctx, q, v, tau):
    """The preamble of every method's entry: ``(m, d, status)``, the model and data
    handles of a Data's buffer ``ctx`` and ``input_status`` of (q, v, τ) (0.0: go on)."""
    m, d = handles(ctx)
    return m, d, input_status(m, q, v, tau)


@njit(cache=True, inline="always")  # returns the plan's views (numba_internals item 1)
def checked_plan(ctx, pbuf, q, v, tau):
    """``checked_handles`` of a planned method's entry, with its plan's ``(ip, fw)``
    (``plan_views``): ``(m, d, ip, fw, status)``."""
    m, d, st = checked_handles(ctx, q, v, tau)
    ip, fw = plan_views(pbuf)
    return m, d, ip, fw, st


@njit(cache=True, inline="always")
def system_terms(m, d, q, v, tau, want_M):
    """φ = τ - h(q, v) (eq. 10 of the reduced-order paper) into ``d.phi``; J, γ = -J̇q̇;
    and M(q) into ``d.M`` if ``want_M``.  One kinematics pass (poses, S, velocities,
    velocity products) is shared by the RNEA, the closure rows and the CRBA."""
    fk_kernel(m, d, q, v)
    rnea_from_kinematics(m, d, as_input(d.zeros), as_input(d.fext[:0]), d.phi)
    for i in range(m.nv):
        d.phi[i] = tau[i] - d.phi[i]
    bias_accelerations(m, d)  # overwrites the RNEA's accelerations
    closure_terms(m, d, q, v, unliteral(True), unliteral(True))
    if want_M:
        crba_from_poses(m, d, d.M)


@njit(cache=True)
def closure_loads(m, d, rows, lam, fext, tauc):
    """The loads of multipliers ``lam`` on closure ``rows``: body wrenches into ``fext``
    (nb, 6; ``[n; f]`` in the body frame about its origin) and joint forces of the
    coupling rows into ``tauc`` (nv).  Together they are Jᵀ λ.

    Row r of closure k: a force λ u_w (translation) or moment λ n (rotation) on body
    b at B's origin p_B, and its opposite on body a (world vectors of
    ``closure_terms``, moments about the body origins through its levers
    ``d.lev[k]`` = p_B - o, the ones J is built with); a coupling row: +λ on joint b,
    -ratio λ on joint a.
    """
    fext[:, :] = 0.0
    tauc[:] = 0.0
    for jj in range(rows.shape[0]):
        rr = rows[jj]
        kind = m.row_int[rr, 1]
        if kind == COUPLING:
            tauc[m.row_int[rr, 3]] += lam[jj]
            tauc[m.row_int[rr, 2]] -= m.row_vec[rr, 0, 0] * lam[jj]
            continue
        k = m.row_int[rr, 0]
        fw0 = fw1 = fw2 = mw0 = mw1 = mw2 = 0.0
        if kind == TRANSLATION:
            fw0, fw1, fw2 = (
                lam[jj] * d.rw[rr, 0, 0],
                lam[jj] * d.rw[rr, 0, 1],
                lam[jj] * d.rw[rr, 0, 2],
            )
        else:
            mw0, mw1, mw2 = (
                lam[jj] * d.rw[rr, 2, 0],
                lam[jj] * d.rw[rr, 2, 1],
                lam[jj] * d.rw[rr, 2, 2],
            )
        for side in range(2):
            b = m.cl_body[k, side]
            if b < 0:
                continue
            sg = 1.0 if side == 1 else -1.0
            R = d.Xw[b, :3]
            d0, d1, d2 = d.lev[k, b, 0], d.lev[k, b, 1], d.lev[k, b, 2]  # p_B - o_b
            # moment about the body origin: m + d × f (world), then rotate into the body frame
            t0 = mw0 + d1 * fw2 - d2 * fw1
            t1 = mw1 + d2 * fw0 - d0 * fw2
            t2 = mw2 + d0 * fw1 - d1 * fw0
            for c in range(3):
                fext[b, c] += sg * (R[0, c] * t0 + R[1, c] * t1 + R[2, c] * t2)
                fext[b, 3 + c] += sg * (R[0, c] * fw0 + R[1, c] * fw1 + R[2, c] * fw2)


@njit(cache=True)
def closure_forces(m, d, tau, lam, r, x):
    """x = τ + Jᵀλ (nv): the joint forces with the multipliers ``lam`` of the first ``r``
    independent rows ``d.rows`` as generalized forces, from the rows of ``d.J``.

    The same as λ's closure loads (``closure_loads``) carried through the tree, but
    exact where those cancel: the wrenches on the two cut bodies meet in their common
    ancestors, where they cancel only to eps·|λ| (multipliers of 3e14 on rows of 3e-17,
    a closure on levers that small, left 0.06 N on a floating base: q̈ 1e-3 off)."""
    for i in range(m.nv):
        x[i] = tau[i]
    for a in range(r):
        ra = d.rows[a]
        la = lam[a]
        for j in range(m.nv):
            x[j] += d.J[ra, j] * la


@njit(cache=True)
def accept(m, d, quality, qdd, lam, r, ascale):
    """The acceptance check every method ends with: the status to return.

    ``quality`` (> 0) if q̈ and λ (first ``r`` entries) are finite and the
    independent closure rows hold to the accuracy of a stable solve,
    |J q̈ - γ|∞ <= RESIDUAL_TOL (|J|∞ max(|q̈|∞, a) + |γ|∞), else
    ``NONFINITE_OUTPUT`` or ``INACCURATE``.  ``a`` (``ascale``) is the size of the
    accelerations the method combined to form q̈ (e.g. |M⁻¹φ|∞ for SLM, whose q̈ is
    M⁻¹φ + M⁻¹Jᵀλ): near a static equilibrium q̈ is the small difference of large
    terms, and the residual of a stable solve is relative to those.  The relative
    residual goes to ``d.diag``.
    """
    if not (all_finite(qdd) and all_finite(lam[:r])):
        return NONFINITE_OUTPUT
    qmax = ascale
    for j in range(m.nv):
        qmax = max(qmax, abs(qdd[j]))
    res = 0.0
    scale = 0.0
    for a in range(r):
        ra = d.rows[a]
        s = d.gamma[ra]
        jmax = 0.0
        for j in range(m.nv):
            s -= d.J[ra, j] * qdd[j]
            jmax = max(jmax, abs(d.J[ra, j]))
        res = max(res, abs(s))
        scale = max(scale, jmax * qmax + abs(d.gamma[ra]))
    return check_verdict(d, quality, res, scale, qmax)


@njit(cache=True, inline="always")
def check_verdict(d, quality, res, scale, qmax):
    """The end of an acceptance check (``accept``, denoc's ``loop_check``): the relative
    residual res / scale and the acceleration scale ``qmax`` into ``d.diag``; returns
    ``quality``, or ``INACCURATE`` above ``RESIDUAL_TOL``."""
    rel = res / scale if scale > 0.0 else res
    d.diag[DIAG_QUALITY] = quality
    d.diag[DIAG_RESIDUAL] = rel
    d.diag[DIAG_ASCALE] = qmax
    if rel > RESIDUAL_TOL:
        return INACCURATE
    return quality


@njit(cache=True)
def subtract_rows(J, rows, r, n, x, y):
    """y[a] -= J[rows[a], :n] · x for a < ``r``: r2 - J δη of a refinement step (SLM,
    SSLM, recursive_lambda)."""
    for a in range(r):
        ra = rows[a]
        s = y[a]
        for j in range(n):
            s -= J[ra, j] * x[j]
        y[a] = s


@njit(cache=True)
def kkt_residual(m, d, tau, qdd, lam, r, r1, r2):
    """Residuals of the closed-loop equations at (q̈, λ) on the kinematics in ``d``:
    r1 = τ + Jᵀλ - M q̈ - h (nv; the RNEA, O(n), no M, and Jᵀλ from the rows of J,
    O(r n)) and r2 = γ - J q̈ on the first ``r`` independent rows.  Jᵀλ is taken from
    the very J the solves use, not from λ's closure loads (``closure_forces``): those
    cancel in the cut bodies' common ancestors only to eps·|λ|, and a refinement
    measuring with them would converge to another system.  Overwrites ``A`` and ``F``;
    needs ``Xrel``, ``S``, ``V``, ``C`` and the closure rows with ``d.J``."""
    rnea_from_kinematics(m, d, as_input(qdd), as_input(d.fext[:0]), r1)
    for i in range(m.nv):
        r1[i] = tau[i] - r1[i]
    for a in range(r):
        ra = d.rows[a]
        la = lam[a]
        s = d.gamma[ra]
        for j in range(m.nv):
            r1[j] += d.J[ra, j] * la
            s -= d.J[ra, j] * qdd[j]
        r2[a] = s


@njit(cache=True, inline="always")
def refinement_verdict(step, dmax, prev, scale, stall):
    """After refinement step ``step`` with correction |δq̈|∞ = ``dmax`` (the previous
    one ``prev``): 1 to apply it and go on, 0 to apply it and stop (converged), -1 to
    stop without it (stagnated at rounding level: below ``stall`` · scale), -2
    diverging or stagnated above it (an inaccurate solve)."""
    if dmax <= 4e-16 * scale:
        return 0
    if step > 0 and dmax > 0.5 * prev:
        return -2 if dmax > stall * scale else -1
    return 1


REFINE_GO_ON = -3  # take_correction: refinement goes on


@njit(cache=True, inline="always")
def take_correction(d, step, prev, scale, n, r, dq, dl, qdd, lam, stall):
    """The end of refinement step ``step``, shared by the refining kernels: the verdict
    of ``refinement_verdict`` on δq̈ = ``dq[:n]``; an accepted correction is added
    (q̈ += δq̈, λ[:r] += δλ = ``dl``; ``d.diag[DIAG_REFINED]`` counts the steps).
    Returns (code, |δq̈|∞): code -1 if the corrections grow or stall above ``stall`` ·
    ``scale`` (``STALL_TOL``, or ``FINAL_STALL_TOL`` for augmented), or if after the last
    of ``MAX_REFINE`` steps the error left, |δ_last|² / |δ_prev|, is above it (an
    inaccurate solve), the number of steps applied if refinement ends here, or
    ``REFINE_GO_ON``."""
    dmax = 0.0
    for j in range(n):
        dmax = max(dmax, abs(dq[j]))
    verdict = refinement_verdict(step, dmax, prev, scale, stall)
    if verdict == -2:
        return -1, dmax
    if verdict == -1:
        return step, dmax
    for j in range(n):
        qdd[j] += dq[j]
    for a in range(r):
        lam[a] += dl[a]
    d.diag[DIAG_REFINED] = step + 1
    if verdict == 0:
        return step + 1, dmax
    if step == MAX_REFINE - 1:  # the last step, not converged: what is left?
        return (step + 1 if dmax * dmax <= stall * scale * prev else -1), dmax
    return REFINE_GO_ON, dmax


@njit(cache=True)
def aba_pivot_ratio(m, d):
    """min / max over the joints of the articulated-body pivots 1 / (D⁻¹)_kk that the
    last ABA left in ``d.Dinv`` (1 without coordinates)."""
    lo, hi = 1e300, 0.0
    for i in range(m.nb):
        for k in range(m.topo[i, 5]):
            p = 1.0 / d.Dinv[i, k, k]
            lo = min(lo, p)
            hi = max(hi, p)
    return lo / hi if hi > 0.0 else 1.0


@njit(cache=True)
def max_abs(x):
    """|x|∞ of a vector."""
    s = 0.0
    for i in range(x.shape[0]):
        s = max(s, abs(x[i]))
    return s


class ForwardDynamicsResult:
    """Result of ``ld.forward_dynamics``.

    ``qdd`` (nv): accelerations of every tree coordinate.  ``lam`` (m,) or None:
    the closure multipliers, row by row (``model.closure_rows[k]`` slices closure
    k): for a translation row, the force along u_A that body A's side exerts on
    body B at frame B's origin; for a rotation row, the moment about n (≈ the row's
    axis of frame A) on body B; body A gets the opposite (see
    ``loopdyn.model.closures``); for a coupling row, the joint force on joint b.
    With redundant closures λ is the minimum-norm solution.  ``rank``: independent
    rows used; ``dropped``: redundant rows; ``condition``: 1 / the smallest pivot
    ratio of the method's factorisations (a cheap estimate); ``method``: the method
    that produced the result (``augmented`` when another method fell back to it).
    """

    __slots__ = ("_info", "_quality", "lam", "qdd")

    def __init__(self, qdd, lam, info, quality):
        # info = (method, rank, dropped), shared by the results of one bound method
        self.qdd = qdd
        self.lam = lam
        self._info = info
        self._quality = quality

    @property
    def method(self):
        return self._info[0]

    @property
    def rank(self):
        return self._info[1]

    @property
    def dropped(self):
        return self._info[2]

    @property
    def condition(self):
        return 1.0 / self._quality

    def __repr__(self):
        return (
            f"ForwardDynamicsResult(method={self.method!r}, qdd={self.qdd!r}, lam={self.lam!r}, "
            f"rank={self.rank}, dropped={self.dropped!r}, condition={self.condition:.3g})"
        )


NO_ROWS = np.zeros(0, dtype=np.int64)
NO_ROWS.setflags(write=False)
