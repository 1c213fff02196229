"""Constraint embedding: articulated-body forward dynamics on Jain's aggregated tree.

Paper: ``jain-constraint-embedding-aggregation.txt`` (its equations were lost in
extraction; ``docs/embedding.md`` derives each step).  Each aggregated body 𝒮
(``loopdyn.topology.aggregation``: the bodies of a loop, or of several loops sharing
bodies, with parent p) carries the n_𝒮 coordinates θ_𝒮 of its joints, of which
k are independent (θ_R) and r = n_𝒮 − k dependent.  Frames: every spatial quantity
below is in its body's frame (``Data`` convention), [angular; linear].

Per aggregated body (``gather_aggregate``, tips to base):

- loop Jacobian J_𝒮 (m_𝒮 × n_𝒮): the rows of 𝒮's closures and couplings restricted to
  θ_𝒮 (the other columns are zero: the relative motion of two closure frames depends
  on the joints between them only), and γ_𝒮 = −J̇_𝒮 θ̇_𝒮 (eq. 58);
- partition (eqs. 58–60): r independent rows, dependent columns with a square,
  well-conditioned block Y1 = J_𝒮[rows, dep] (LU with partial pivoting), the rest
  Y2 = J_𝒮[rows, ind]; θ̇_𝒮 = X_𝒮 θ̇_R with X_𝒮 = [1; −Y1⁻¹ Y2] (eq. 25, 60).  When the
  monitored ratio min|u_ii| / max|J_𝒮| of the LU pivots falls below ``RESELECT``, the
  dependent columns are chosen again by complete pivoting on J_𝒮[rows, :];
- θ̈_𝒮 = X_𝒮 θ̈_R + ζ_𝒮 with ζ_𝒮 = Ẋ_𝒮 θ̇_R (eq. 34): ζ is zero on θ_R and Y1⁻¹ γ on the
  dependent coordinates, because J_𝒮 Ẋ_𝒮 θ̇_R = −J̇_𝒮 X_𝒮 θ̇_R = γ_𝒮 (eq. 61);
- member velocities V_j = 𝒜_j V_p + H_j θ̇_R: H_j = jXλ H_λ + S_j X_𝒮[j] is the
  aggregated body's joint map H^R_𝒮 (eq. 29) restricted to member j, and
  ā_j = jXλ ā_λ + S_j ζ_j + c_j its bias acceleration (eq. 35) with a_p = 0;
- P_j (articulated inertia of member j with its children outside 𝒮) and z_j (its
  bias force) gathered by the ordinary steps; then (eqs. 50, 54)
  D = Σ H_jᵀ P_j H_j (k × k), u = X_𝒮ᵀ τ_𝒮 − Σ H_jᵀ (P_j ā_j + z_j) (eq. 36),
  W = Σ 𝒜_jᵀ P_j H_j (6 × k, in p's frame), and for the parent (eq. 55)
  I^A_p += Σ 𝒜_jᵀ P_j 𝒜_j − W D⁻¹ Wᵀ,  p^A_p += Σ 𝒜_jᵀ (P_j ā_j + z_j) + W D⁻¹ u,
  the sums over members moved to p member by member (𝒜_j = jX_p through 𝒮's tree).

Base to tips (``scatter_aggregate``, eqs. 56–57): θ̈_R = D⁻¹ (u − Wᵀ a_p),
θ̈_𝒮 = X_𝒮 θ̈_R + ζ_𝒮 for every tree coordinate of 𝒮, and a_j = jXλ a_λ + S_j θ̈_j + c_j.
Ordinary bodies take the standard steps (RBDA Table 7.1), so the cost is that of
ABA plus, per aggregated body, O(m_𝒮 n_𝒮 + r³ + B_𝒮 k) for its B_𝒮 members: linear in
the number of bounded-size loops.

Kernel status (``embedding_kernel``'s return value): 0 ok; ``SINGULAR_X`` (Y1 is
singular even after column re-selection: info = [ratio, aggregated body]);
``SINGULAR_D`` (D of an aggregated body not positive definite: info[1] = it);
``SINGULAR_JOINT`` (an ordinary joint's Sᵀ I^A S: info[1] = the body);
``ROWS_CHANGED`` (a row left out of the partition is no longer redundant: info[1]);
``NONFINITE`` / ``BAD_INPUT`` (the inputs).  The runner ``run`` re-partitions,
re-plans or raises :class:`loopdyn.SingularityError` naming the aggregated body.
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
    closure_views,
    context_buffers,
    entry_kernel,
    model_views,
    tree_views,
)
from loopdyn.kernels.linalg import lu_inplace, lu_solve
from loopdyn.kernels.spatial import (
    force_to_parent_at,
    inertia_to_parent_add,
    mat6_vec_at,
    motion_to_child_at,
    rigid_inertia_to_parent_add,
)
from loopdyn.kinematics.closures import bias_acceleration_kernel, closure_terms
from loopdyn.kinematics.frames import fk_kernel
from loopdyn.methods.common import input_status
from loopdyn.tree.aba import invert_spd_inplace

# rows of Data.vec6 and slots of Data.mat6
_V, _A, _C, _PA, _U6 = 0, 1, 2, 3, 4
_IA, _U, _DINV, _TM = 0, 1, 2, 3

# compiled functions of this module: cached, and without numba's reference counting
# (``kernels.layout.entry_kernel``): they allocate nothing, and the views of the
# aggregated bodies' blocks they take would otherwise cost two atomic updates each
kernel = entry_kernel


def inline_kernel(fn):
    """A compiled helper inlined into its caller (numba IR inlining): the kernels pass
    named tuples of ~10 arrays, whose copy at each non-inlined call costs more than the
    small per-aggregated-body work."""
    try:
        return njit(cache=True, _nrt=False, inline="always")(fn)
    except (TypeError, KeyError, ValueError):  # pragma: no cover - numba without the option
        return njit(cache=True, inline="always")(fn)


# kernel status
OK, SINGULAR_X, SINGULAR_D, SINGULAR_JOINT, ROWS_CHANGED, NONFINITE, BAD_INPUT = (
    0, -1, -2, -3, -4, -5, -6,
)  # fmt: skip
# ratio min|u_ii| / max|J_𝒮[rows]| of Y1's LU below which the dependent columns are
# re-selected by complete pivoting, and below which Y1 counts as singular
RESELECT = 1e-2
SINGULAR_RATIO = 1e-10
# |J_𝒮[row] X_𝒮| of a row left out of the partition, relative to |J_𝒮| |X_𝒮|
REDUNDANT_TOL = 1e-8

# columns of the aggregated-body table ``agg`` (int64, na × NAGG)
(A_HEAD, A_PARENT, A_NMEM, A_MEM, A_NS, A_K, A_R, A_MS, A_ROW, A_COL, A_SEL, A_PIV,
 A_JS, A_GS, A_LU, A_X, A_ZETA, A_D, A_U, A_W, A_H, A_UB, A_TMP) = range(23)  # fmt: skip
NAGG = 23
# member flags (``memslot[:, 1]``)
HAS_INNER, RIGID = 1, 2
# aggregated-body row kinds (``agg_rows[:, 0]``)
ROW_CLOSURE, ROW_COUPLING = 0, 1
# header of the plan buffer ``ei``: sizes, then offsets of its arrays, of ``wi``'s and ``wf``'s
(H_NA, H_NB, H_NK, H_NMEM, H_NROWS, H_NCOLS, H_AGG, H_MEMBERS, H_AGG_OF, H_COLSTART,
 H_MEMSLOT, H_AGG_ROWS, H_COLS, H_CP_INT, H_SEL, H_NSEL, H_PIV, H_NPIV, H_CP_F, H_FLT,
 H_NFLT, H_QB, H_YB, H_ABAR, H_RATIO) = range(25)  # fmt: skip
NHEAD = 25

# the arrays of the compiled functions, named as in the paper and RBDA
TreeModel = namedtuple(
    "TreeModel", ["topo", "jgeom", "inertia", "gravity", "cl_body", "cl_X", "row_int", "row_vec"]
)
TreeData = namedtuple(
    "TreeData", ["Xrel", "Xw", "S", "vec6", "mat6", "tmp33", "cw", "rw", "Phi", "J", "gamma"]
)
# the aggregated tree: ``agg`` table; ``members`` (sorted bodies of each 𝒮); per body
# ``agg_of`` (its 𝒮 or -1), ``colstart`` (its first column in θ_𝒮), ``memslot`` (its
# place among 𝒮's members, and flags ``HAS_INNER``: it has children in 𝒮, ``RIGID``: no
# body of its sub-tree in 𝒮 has children outside 𝒮, so its composite is a rigid inertia);
# ``agg_rows`` (kind, model row or coupling) of each 𝒮 row;
# ``cols`` (v index of each θ_𝒮 column); ``cp_int`` couplings (body a, body b, q index
# a, q index b); ``cp_f`` (ratio, offset)
Plan = namedtuple(
    "Plan",
    ["agg", "members", "agg_of", "colstart", "memslot", "agg_rows", "cols", "cp_int", "cp_f"],
)
# workspace: ``sel`` (per 𝒮: r selected rows, then θ_𝒮 columns dependent first), ``piv``
# (Y1's LU pivots), ``flt`` (per-𝒮 blocks J_𝒮, γ_𝒮, LU(Y1), X_𝒮, ζ, D, u, W, H, UB, scratch
# at the offsets of ``agg``), per body ``Qb`` (6×6), ``Yb``, ``abar`` (6), per 𝒮 ``ratio``
Work = namedtuple("Work", ["sel", "piv", "flt", "Qb", "Yb", "abar", "ratio"])


@njit(cache=True, inline="always")
def plan_views(ei, wi, wf):
    """(Plan, Work) views of the plan buffer ``ei`` and the workspaces ``wi``, ``wf``."""
    na, nb, nk = ei[H_NA], ei[H_NB], ei[H_NK]
    e = Plan(
        block(ei, ei[H_AGG], (na, NAGG)),
        block(ei, ei[H_MEMBERS], ei[H_NMEM]),
        block(ei, ei[H_AGG_OF], nb),
        block(ei, ei[H_COLSTART], nb),
        block(ei, ei[H_MEMSLOT], (nb, 2)),
        block(ei, ei[H_AGG_ROWS], (ei[H_NROWS], 2)),
        block(ei, ei[H_COLS], ei[H_NCOLS]),
        block(ei, ei[H_CP_INT], (nk, 4)),
        block(wf, ei[H_CP_F], (nk, 2)),
    )
    w = Work(
        block(wi, ei[H_SEL], ei[H_NSEL]),
        block(wi, ei[H_PIV], ei[H_NPIV]),
        block(wf, ei[H_FLT], ei[H_NFLT]),
        block(wf, ei[H_QB], (nb, 6, 6)),
        block(wf, ei[H_YB], (nb, 6)),
        block(wf, ei[H_ABAR], (nb, 6)),
        block(wf, ei[H_RATIO], na),
    )
    return e, w


# --------------------------------------------------------------------------- loop Jacobian
@inline_kernel
def loop_jacobian(s, m, d, e, w, q, rhs_kind, JS, gS):
    """J_𝒮 (m_𝒮 × n_𝒮) of aggregated body s into ``JS`` and a right-hand side into ``gS``.

    ``rhs_kind`` 0: γ_𝒮 (needs ``closure_terms`` with velocities); 1: Φ_𝒮 (positions).
    Closure row (``loopdyn.kinematics.closures``): J v = u·(v_B − v_A(p_B)) for a
    translation row, n·(ω_B − ω_A) for a rotation row (world vectors ``d.rw``); its
    entries in θ_𝒮 are the point-Jacobian columns R_j S_j of the members on the paths
    from the two closure bodies up to 𝒮's root, with signs + (body B) and − (body A).
    Coupling row (Sec. 5.1): Φ = q_b − ratio·q_a − offset, J = e_b − ratio·e_a, γ = 0.
    """
    topo = m.topo
    Xw = d.Xw
    S = d.S
    ms = JS.shape[0]
    ns = JS.shape[1]
    roff = e.agg[s, A_ROW]
    for lr in range(ms):
        for c in range(ns):
            JS[lr, c] = 0.0
    for lr in range(ms):
        kind = e.agg_rows[roff + lr, 0]
        idx = e.agg_rows[roff + lr, 1]
        if kind == ROW_COUPLING:
            ba, bb = e.cp_int[idx, 0], e.cp_int[idx, 1]
            ratio = e.cp_f[idx, 0]
            JS[lr, e.colstart[bb]] += 1.0
            JS[lr, e.colstart[ba]] -= ratio
            if rhs_kind == 0:
                gS[lr] = 0.0
            else:
                gS[lr] = q[e.cp_int[idx, 3]] - ratio * q[e.cp_int[idx, 2]] - e.cp_f[idx, 1]
            continue
        rr = idx
        k = m.row_int[rr, 0]
        trans = m.row_int[rr, 1] == 0
        u0, u1, u2 = d.rw[rr, 0, 0], d.rw[rr, 0, 1], d.rw[rr, 0, 2]
        n0, n1, n2 = d.rw[rr, 2, 0], d.rw[rr, 2, 1], d.rw[rr, 2, 2]
        P0, P1, P2 = d.cw[k, 7, 0], d.cw[k, 7, 1], d.cw[k, 7, 2]
        gS[lr] = d.gamma[rr] if rhs_kind == 0 else d.Phi[rr]
        for side in range(2):
            sign = 1.0 if side == 1 else -1.0
            j = m.cl_body[k, side]
            # up the tree while inside 𝒮 (above 𝒮 both sides' columns cancel)
            while j >= 0 and e.agg_of[j] == s:
                R = Xw[j, :3]
                d0 = P0 - Xw[j, 3, 0]
                d1 = P1 - Xw[j, 3, 1]
                d2 = P2 - Xw[j, 3, 2]
                c0 = e.colstart[j]
                for kk in range(topo[j, 5]):
                    w0 = R[0, 0] * S[j, 0, kk] + R[0, 1] * S[j, 1, kk] + R[0, 2] * S[j, 2, kk]
                    w1 = R[1, 0] * S[j, 0, kk] + R[1, 1] * S[j, 1, kk] + R[1, 2] * S[j, 2, kk]
                    w2 = R[2, 0] * S[j, 0, kk] + R[2, 1] * S[j, 1, kk] + R[2, 2] * S[j, 2, kk]
                    if trans:
                        l0 = R[0, 0] * S[j, 3, kk] + R[0, 1] * S[j, 4, kk] + R[0, 2] * S[j, 5, kk]
                        l1 = R[1, 0] * S[j, 3, kk] + R[1, 1] * S[j, 4, kk] + R[1, 2] * S[j, 5, kk]
                        l2 = R[2, 0] * S[j, 3, kk] + R[2, 1] * S[j, 4, kk] + R[2, 2] * S[j, 5, kk]
                        # linear velocity of the point p_B: l + ω × (p_B − o_j)
                        val = (
                            u0 * (l0 + w1 * d2 - w2 * d1)
                            + u1 * (l1 + w2 * d0 - w0 * d2)
                            + u2 * (l2 + w0 * d1 - w1 * d0)
                        )
                    else:
                        val = n0 * w0 + n1 * w1 + n2 * w2
                    JS[lr, c0 + kk] += sign * val
                j = topo[j, 0]


# --------------------------------------------------------------------------- partition
@inline_kernel
def factor_y1(s, e, w, JS, LU, piv):
    """LU (partial pivoting) of Y1 = J_𝒮[rows, dependent]; returns min|u_ii| / max|J_𝒮[rows]|."""
    r = e.agg[s, A_R]
    ns = e.agg[s, A_NS]
    so = e.agg[s, A_SEL]
    if r == 0:
        return 1.0
    big = 0.0
    for i in range(r):
        ri = w.sel[so + i]
        for c in range(ns):
            a = abs(JS[ri, c])
            if a > big:
                big = a
        for c in range(r):
            LU[i, c] = JS[ri, w.sel[so + r + c]]
    if big == 0.0:
        return 0.0
    lu_inplace(LU, r, piv)
    small = 1e300
    for i in range(r):
        small = min(small, abs(LU[i, i]))
    return small / big


@kernel
def reselect_columns(s, e, w, JS, T):
    """Choose 𝒮's dependent columns again by complete pivoting on J_𝒮[rows, :].

    Gaussian elimination of a copy (``T``, r × n_𝒮) with the largest remaining entry as
    pivot: the r pivot columns are the dependent coordinates (the best-conditioned
    Y1 that greedy pivoting finds), the others θ_R.  Both sets are kept in increasing
    order in ``w.sel``.
    """
    r = e.agg[s, A_R]
    ns = e.agg[s, A_NS]
    so = e.agg[s, A_SEL]
    order = w.sel[so + r : so + r + ns]
    for i in range(r):
        for c in range(ns):
            T[i, c] = JS[w.sel[so + i], c]
    for c in range(ns):
        order[c] = c
    for t in range(r):
        bi, bj, big = t, t, -1.0
        for i in range(t, r):
            for jj in range(t, ns):
                a = abs(T[i, order[jj]])
                if a > big:
                    big, bi, bj = a, i, jj
        if bi != t:
            for c in range(ns):
                T[t, c], T[bi, c] = T[bi, c], T[t, c]
        order[t], order[bj] = order[bj], order[t]
        pc = order[t]
        if big > 0.0:
            for i in range(t + 1, r):
                f = T[i, pc] / T[t, pc]
                for jj in range(t, ns):
                    T[i, order[jj]] -= f * T[t, order[jj]]
    # insertion sort of the dependent and the independent parts
    for lo, hi in ((0, r), (r, ns)):
        for a in range(lo + 1, hi):
            x = order[a]
            b = a - 1
            while b >= lo and order[b] > x:
                order[b + 1] = order[b]
                b -= 1
            order[b + 1] = x


@inline_kernel
def constraint_map(s, e, w, JS, gS, LU, piv, X, zeta, y):
    """X_𝒮 (n_𝒮 × k, eq. 60) and ζ_𝒮 = Ẋ_𝒮 θ̇_R (n_𝒮, eq. 61) from Y1's LU; ``y`` scratch (r).

    Column c of X: 1 on the c-th independent coordinate, −Y1⁻¹ Y2[:, c] on the
    dependent ones.  ζ: Y1⁻¹ γ on the dependent coordinates, 0 on θ_R.
    Returns False if a row left out of the partition is violated by X (it is no
    longer redundant: the rank of J_𝒮 changed).
    """
    r = e.agg[s, A_R]
    k = e.agg[s, A_K]
    ns = e.agg[s, A_NS]
    ms = e.agg[s, A_MS]
    so = e.agg[s, A_SEL]
    for c in range(k):
        col = w.sel[so + r + r + c]
        for i in range(r):
            y[i] = -JS[w.sel[so + i], col]
        lu_solve(LU, r, piv, y)
        for i in range(r):
            X[w.sel[so + r + i], c] = y[i]
        for c2 in range(k):
            X[w.sel[so + r + r + c2], c] = 1.0 if c2 == c else 0.0
    for i in range(r):
        y[i] = gS[w.sel[so + i]]
    lu_solve(LU, r, piv, y)
    for i in range(r):
        zeta[w.sel[so + r + i]] = y[i]
    for c in range(k):
        zeta[w.sel[so + r + r + c]] = 0.0
    if ms == r:
        return True
    # rows not selected must stay redundant: J_𝒮[row] X_𝒮 = 0
    big = 0.0
    for i in range(ms):
        for c in range(ns):
            big = max(big, abs(JS[i, c]))
    for i in range(ms):
        chosen = False
        for t in range(r):
            if w.sel[so + t] == i:
                chosen = True
        if chosen:
            continue
        for c in range(k):
            acc = 0.0
            xmax = 1.0
            for l in range(ns):
                acc += JS[i, l] * X[l, c]
                xmax = max(xmax, abs(X[l, c]))
            if abs(acc) > REDUNDANT_TOL * big * xmax * ns:
                return False
    return True


# --------------------------------------------------------------------------- gather / scatter
@inline_kernel
def gather_aggregate(s, m, d, e, w, q, tau, info):
    """Tips-to-base step of aggregated body s (eqs. 50, 54–55): D⁻¹, u, W into ``w.flt``;
    its articulated inertia and bias force added to its parent p.  Returns a status."""
    topo = m.topo
    Xrel = d.Xrel
    S = d.S
    vec6 = d.vec6
    mat6 = d.mat6
    a = e.agg[s]
    p, nmem, mo, ns, k, r, ms = a[A_PARENT], a[A_NMEM], a[A_MEM], a[A_NS], a[A_K], a[A_R], a[A_MS]
    JS = block(w.flt, a[A_JS], (ms, ns))
    gS = block(w.flt, a[A_GS], ms)
    LU = block(w.flt, a[A_LU], (r, r))
    X = block(w.flt, a[A_X], (ns, k))
    zeta = block(w.flt, a[A_ZETA], ns)
    D = block(w.flt, a[A_D], (k, k))
    u = block(w.flt, a[A_U], k)
    W = block(w.flt, a[A_W], (6, k))
    H = block(w.flt, a[A_H], (nmem, 6, k))
    UB = block(w.flt, a[A_UB], (nmem, 6, k))
    piv = w.piv[a[A_PIV] : a[A_PIV] + r]
    # loop Jacobian, partition (re-selected when poorly conditioned), X_𝒮 and ζ_𝒮
    loop_jacobian(s, m, d, e, w, q, 0, JS, gS)
    ratio = factor_y1(s, e, w, JS, LU, piv)
    if ratio < RESELECT:
        reselect_columns(s, e, w, JS, block(w.flt, a[A_TMP], (r, ns)))
        ratio = factor_y1(s, e, w, JS, LU, piv)
    w.ratio[s] = ratio
    if ratio < SINGULAR_RATIO:
        info[0] = ratio
        info[1] = s
        return SINGULAR_X
    if not constraint_map(s, e, w, JS, gS, LU, piv, X, zeta, block(w.flt, a[A_TMP], r)):
        info[1] = s
        return ROWS_CHANGED
    # u = X_𝒮ᵀ τ_𝒮 (eq. 36) ; D = 0 ; W = 0
    co = a[A_COL]
    for c in range(k):
        acc = 0.0
        for l in range(ns):
            acc += X[l, c] * tau[e.cols[co + l]]
        u[c] = acc
        for c2 in range(k):
            D[c, c2] = 0.0
        for rr in range(6):
            W[rr, c] = 0.0
    # members, base to tips: H_j = jXλ H_λ + S_j X_𝒮[j], ā_j = jXλ ā_λ + S_j ζ_j + c_j
    # (eq. 35), then with P_j = I^A_j (complete: its children outside 𝒮 are done)
    # UB_j = P_j H_j, D += H_jᵀ P_j H_j, Yb_j = P_j ā_j + z_j, u -= H_jᵀ Yb_j, Qb_j = P_j
    for mi in range(nmem):
        j = e.members[mo + mi]
        lam = topo[j, 0]
        inside = lam >= 0 and e.agg_of[lam] == s
        cs = e.colstart[j]
        nvj = topo[j, 5]
        ls = e.memslot[lam, 0] if inside else 0
        for c in range(k):
            if inside:
                h = motion_to_child_at(
                    Xrel, j, H[ls, 0, c], H[ls, 1, c], H[ls, 2, c],
                    H[ls, 3, c], H[ls, 4, c], H[ls, 5, c],
                )  # fmt: skip
                for rr in range(6):
                    H[mi, rr, c] = h[rr]
            else:
                for rr in range(6):
                    H[mi, rr, c] = 0.0
            for kk in range(nvj):
                x = X[cs + kk, c]
                for rr in range(6):
                    H[mi, rr, c] += S[j, rr, kk] * x
        if inside:
            ab = motion_to_child_at(
                Xrel, j, w.abar[lam, 0], w.abar[lam, 1], w.abar[lam, 2],
                w.abar[lam, 3], w.abar[lam, 4], w.abar[lam, 5],
            )  # fmt: skip
            for rr in range(6):
                w.abar[j, rr] = ab[rr] + vec6[j, _C, rr]
        else:
            for rr in range(6):
                w.abar[j, rr] = vec6[j, _C, rr]
        for kk in range(nvj):
            z = zeta[cs + kk]
            for rr in range(6):
                w.abar[j, rr] += S[j, rr, kk] * z
        for c in range(k):
            for rr in range(6):
                t = 0.0
                for cc in range(6):
                    t += mat6[j, _IA, rr, cc] * H[mi, cc, c]
                UB[mi, rr, c] = t
                for c2 in range(k):
                    D[c2, c] += H[mi, rr, c2] * t
        inner = (e.memslot[j, 1] & HAS_INNER) != 0
        for rr in range(6):
            t = vec6[j, _PA, rr]
            for cc in range(6):
                t += mat6[j, _IA, rr, cc] * w.abar[j, cc]
                if inner:
                    w.Qb[j, rr, cc] = mat6[j, _IA, rr, cc]
            w.Yb[j, rr] = t
            for c in range(k):
                u[c] -= H[mi, rr, c] * t
    # members, tips to base: the composites Qb, Yb, UB moved inward through 𝒮's tree and,
    # from the base bodies, to p (𝒜ᵀ P 𝒜, 𝒜ᵀ (P ā + z) and W = 𝒜ᵀ P H)
    for mi in range(nmem - 1, -1, -1):
        j = e.members[mo + mi]
        lam = topo[j, 0]
        inside = lam >= 0 and e.agg_of[lam] == s
        ls = e.memslot[lam, 0] if inside else 0
        flags = e.memslot[j, 1]
        # the composite: Qb_j, or P_j itself for a member without children in 𝒮
        Q = w.Qb[j] if (flags & HAS_INNER) != 0 else mat6[j, _IA]
        # to the parent member (composite in 𝒮's tree) or, from a base body, to p
        f = force_to_parent_at(
            Xrel, j, w.Yb[j, 0], w.Yb[j, 1], w.Yb[j, 2], w.Yb[j, 3], w.Yb[j, 4], w.Yb[j, 5]
        )
        if inside or p >= 0:
            out = w.Qb[lam] if inside else mat6[p, _IA]
            for rr in range(6):
                if inside:
                    w.Yb[lam, rr] += f[rr]
                else:
                    vec6[p, _PA, rr] += f[rr]
            if (flags & RIGID) != 0:
                rigid_inertia_to_parent_add(Xrel[j, :3], Xrel[j, 3], Q, out)
            else:
                inertia_to_parent_add(Xrel[j, :3], Xrel[j, 3], Q, out, mat6[j, _TM])
        for c in range(k):
            g = force_to_parent_at(
                Xrel, j, UB[mi, 0, c], UB[mi, 1, c], UB[mi, 2, c],
                UB[mi, 3, c], UB[mi, 4, c], UB[mi, 5, c],
            )  # fmt: skip
            if inside:
                for rr in range(6):
                    UB[ls, rr, c] += g[rr]
            else:
                for rr in range(6):
                    W[rr, c] += g[rr]
    # D⁻¹ (k × k, symmetric positive definite for a non-singular mass matrix)
    if k > 0 and not invert_spd_inplace(D, k):
        info[1] = s
        return SINGULAR_D
    if p >= 0 and k > 0:
        # I^A_p -= W D⁻¹ Wᵀ ;  p^A_p += W D⁻¹ u   (eq. 55)
        WD = block(w.flt, a[A_TMP], (6, k))
        for rr in range(6):
            for c in range(k):
                acc = 0.0
                for c2 in range(k):
                    acc += W[rr, c2] * D[c2, c]
                WD[rr, c] = acc
        for rr in range(6):
            acc = 0.0
            for c in range(k):
                acc += WD[rr, c] * u[c]
            vec6[p, _PA, rr] += acc
            for cc in range(rr, 6):
                acc = 0.0
                for c in range(k):
                    acc += WD[rr, c] * W[cc, c]
                mat6[p, _IA, rr, cc] -= acc
                if cc != rr:
                    mat6[p, _IA, cc, rr] -= acc
    return OK


@inline_kernel
def scatter_aggregate(s, m, d, e, w, qdd):
    """Base-to-tips step of aggregated body s (eqs. 56–57): θ̈_R = D⁻¹ (u − Wᵀ a_p),
    θ̈_𝒮 = X_𝒮 θ̈_R + ζ_𝒮 into ``qdd``, member accelerations a_j."""
    topo = m.topo
    Xrel = d.Xrel
    S = d.S
    vec6 = d.vec6
    a = e.agg[s]
    p, nmem, mo, ns, k = a[A_PARENT], a[A_NMEM], a[A_MEM], a[A_NS], a[A_K]
    X = block(w.flt, a[A_X], (ns, k))
    zeta = block(w.flt, a[A_ZETA], ns)
    D = block(w.flt, a[A_D], (k, k))
    u = block(w.flt, a[A_U], k)
    W = block(w.flt, a[A_W], (6, k))
    y = block(w.flt, a[A_TMP], k)
    if p >= 0:
        ap0, ap1, ap2 = vec6[p, _A, 0], vec6[p, _A, 1], vec6[p, _A, 2]
        ap3, ap4, ap5 = vec6[p, _A, 3], vec6[p, _A, 4], vec6[p, _A, 5]
    else:
        ap0 = ap1 = ap2 = 0.0
        ap3, ap4, ap5 = -m.gravity[0], -m.gravity[1], -m.gravity[2]
    for c in range(k):
        y[c] = u[c] - (
            W[0, c] * ap0 + W[1, c] * ap1 + W[2, c] * ap2
            + W[3, c] * ap3 + W[4, c] * ap4 + W[5, c] * ap5
        )  # fmt: skip
    co = a[A_COL]
    for l in range(ns):
        acc = zeta[l]
        for c in range(k):
            t = 0.0
            for c2 in range(k):
                t += D[c, c2] * y[c2]
            acc += X[l, c] * t
        qdd[e.cols[co + l]] = acc
    # a_j = jXλ a_λ + c_j + S_j θ̈_j, members in tree order
    for mi in range(nmem):
        j = e.members[mo + mi]
        lam = topo[j, 0]
        if lam >= 0:
            am = motion_to_child_at(
                Xrel, j, vec6[lam, _A, 0], vec6[lam, _A, 1], vec6[lam, _A, 2],
                vec6[lam, _A, 3], vec6[lam, _A, 4], vec6[lam, _A, 5],
            )  # fmt: skip
        else:
            am = motion_to_child_at(Xrel, j, ap0, ap1, ap2, ap3, ap4, ap5)
        iv = topo[j, 3]
        for rr in range(6):
            acc = am[rr] + vec6[j, _C, rr]
            for kk in range(topo[j, 5]):
                acc += S[j, rr, kk] * qdd[iv + kk]
            vec6[j, _A, rr] = acc


@inline_kernel
def gather_joint(i, m, d, w, tau):
    """Ordinary tips-to-base step of body i (RBDA eqs. 7.34–7.35); False if D is singular.

    U = I^A S, D = Sᵀ U, u = τ − Sᵀ p^A; the parent receives
    iXλᵀ (I^A − U D⁻¹ Uᵀ) iXλ and iXλᵀ (p^A + I^a c + U D⁻¹ u).
    """
    topo = m.topo
    S = d.S
    vec6 = d.vec6
    mat6 = d.mat6
    nvj = topo[i, 5]
    iv = topo[i, 3]
    lam = topo[i, 0]
    for kk in range(nvj):
        acc = tau[iv + kk]
        for rr in range(6):
            t = 0.0
            for cc in range(6):
                t += mat6[i, _IA, rr, cc] * S[i, cc, kk]
            mat6[i, _U, rr, kk] = t
            acc -= S[i, rr, kk] * vec6[i, _PA, rr]
        vec6[i, _U6, kk] = acc
    for kk in range(nvj):
        for k2 in range(nvj):
            t = 0.0
            for rr in range(6):
                t += S[i, rr, kk] * mat6[i, _U, rr, k2]
            mat6[i, _DINV, kk, k2] = t
    if nvj > 0 and not invert_spd_inplace(mat6[i, _DINV], nvj):
        return False
    if lam < 0:
        return True
    # WU = U D⁻¹ (scratch: Qb[i], unused by ordinary bodies)
    WU = w.Qb[i]
    for rr in range(6):
        for kk in range(nvj):
            t = 0.0
            for k2 in range(nvj):
                t += mat6[i, _U, rr, k2] * mat6[i, _DINV, k2, kk]
            WU[rr, kk] = t
    for rr in range(6):
        t = 0.0
        for kk in range(nvj):
            t += WU[rr, kk] * vec6[i, _U6, kk]
        vec6[i, _PA, rr] += t
        for cc in range(rr, 6):
            t = 0.0
            for kk in range(nvj):
                t += WU[rr, kk] * mat6[i, _U, cc, kk]
            mat6[i, _IA, rr, cc] -= t
            if cc != rr:
                mat6[i, _IA, cc, rr] -= t
    for rr in range(6):
        t = 0.0
        for cc in range(6):
            t += mat6[i, _IA, rr, cc] * vec6[i, _C, cc]
        vec6[i, _PA, rr] += t
    inertia_to_parent_add(d.Xrel[i, :3], d.Xrel[i, 3], mat6[i, _IA], mat6[lam, _IA], mat6[i, _TM])
    f = force_to_parent_at(
        d.Xrel, i, vec6[i, _PA, 0], vec6[i, _PA, 1], vec6[i, _PA, 2],
        vec6[i, _PA, 3], vec6[i, _PA, 4], vec6[i, _PA, 5],
    )  # fmt: skip
    for rr in range(6):
        vec6[lam, _PA, rr] += f[rr]
    return True


@inline_kernel
def scatter_joint(i, m, d, qdd):
    """Ordinary base-to-tips step: a' = iXλ a_λ + c, q̈ = D⁻¹ (u − Uᵀ a'), a = a' + S q̈."""
    topo = m.topo
    vec6 = d.vec6
    mat6 = d.mat6
    S = d.S
    lam = topo[i, 0]
    if lam >= 0:
        am = motion_to_child_at(
            d.Xrel, i, vec6[lam, _A, 0], vec6[lam, _A, 1], vec6[lam, _A, 2],
            vec6[lam, _A, 3], vec6[lam, _A, 4], vec6[lam, _A, 5],
        )  # fmt: skip
    else:
        g = m.gravity
        am = motion_to_child_at(d.Xrel, i, 0.0, 0.0, 0.0, -g[0], -g[1], -g[2])
    for rr in range(6):
        vec6[i, _A, rr] = am[rr] + vec6[i, _C, rr]
    nvj = topo[i, 5]
    iv = topo[i, 3]
    for kk in range(nvj):
        t = vec6[i, _U6, kk]
        for rr in range(6):
            t -= mat6[i, _U, rr, kk] * vec6[i, _A, rr]
        vec6[i, 8, kk] = t
    for kk in range(nvj):
        t = 0.0
        for k2 in range(nvj):
            t += mat6[i, _DINV, kk, k2] * vec6[i, 8, k2]
        qdd[iv + kk] = t
    for rr in range(6):
        t = 0.0
        for kk in range(nvj):
            t += S[i, rr, kk] * qdd[iv + kk]
        vec6[i, _A, rr] += t


# --------------------------------------------------------------------------- the kernel
@kernel
def embedding_kernel(m, d, e, w, q, v, tau, qdd, info):
    """q̈ (nv, every tree coordinate) of a closed-loop model by constraint embedding.

    In: the model ``m`` and workspace ``d`` (``TreeModel``, ``TreeData``), the aggregated
    tree ``e`` (``Plan``) and its workspace ``w`` (``Work``), a consistent state ``q``
    (nq), ``v`` (nv) and joint forces ``tau`` (nv).  Out: ``qdd``; ``info`` (2,) explains
    a non-zero status (module docstring).
    """
    topo = m.topo
    nb = topo.shape[0]
    vec6 = d.vec6
    mat6 = d.mat6
    # kinematics: poses, velocities, c = v × S q̇; closure Φ and γ (eq. 58)
    fk_kernel(topo, m.jgeom, q, v, d.Xrel, d.Xw, d.S, vec6, d.tmp33)
    if m.cl_body.shape[0] > 0:
        bias_acceleration_kernel(topo, d.Xrel, vec6)
        closure_terms(
            topo, m.cl_body, m.cl_X, m.row_int, m.row_vec, d.Xw, d.S, vec6, d.cw, d.rw,
            True, False, d.Phi, d.J, d.gamma,
        )  # fmt: skip
    # I^A = I, p^A = v ×* I v
    for i in range(nb):
        v0, v1, v2 = vec6[i, _V, 0], vec6[i, _V, 1], vec6[i, _V, 2]
        v3, v4, v5 = vec6[i, _V, 3], vec6[i, _V, 4], vec6[i, _V, 5]
        h0, h1, h2, h3, h4, h5 = mat6_vec_at(m.inertia, i, v0, v1, v2, v3, v4, v5)
        vec6[i, _PA, 0] = v1 * h2 - v2 * h1 + v4 * h5 - v5 * h4
        vec6[i, _PA, 1] = v2 * h0 - v0 * h2 + v5 * h3 - v3 * h5
        vec6[i, _PA, 2] = v0 * h1 - v1 * h0 + v3 * h4 - v4 * h3
        vec6[i, _PA, 3] = v1 * h5 - v2 * h4
        vec6[i, _PA, 4] = v2 * h3 - v0 * h5
        vec6[i, _PA, 5] = v0 * h4 - v1 * h3
        for rr in range(6):
            for cc in range(6):
                mat6[i, _IA, rr, cc] = m.inertia[i, rr, cc]
    # tips to base: ordinary joints, and each aggregated body at its head
    for i in range(nb - 1, -1, -1):
        s = e.agg_of[i]
        if s < 0:
            if not gather_joint(i, m, d, w, tau):
                info[1] = i
                return SINGULAR_JOINT
        elif e.agg[s, A_HEAD] == i:
            st = gather_aggregate(s, m, d, e, w, q, tau, info)
            if st != OK:
                return st
    # base to tips
    for i in range(nb):
        s = e.agg_of[i]
        if s < 0:
            scatter_joint(i, m, d, qdd)
        elif e.agg[s, A_HEAD] == i:
            scatter_aggregate(s, m, d, e, w, qdd)
    return OK


@entry_kernel
def embedding_entry(ictx, fctx, ei, wi, wf, q, v, tau, qdd, info):
    """``embedding_kernel`` on a Data's context buffers and the embedding buffers."""
    mlay, mi, mf, dlay, df = context_buffers(ictx, fctx)
    topo, cl_body, row_int, jgeom, inertia, gravity, cl_X, row_vec = model_views(mlay, mi, mf)
    Xrel, Xw, S, vec6, mat6, tmp33 = tree_views(dlay, df)
    cw, rw, zeros_nv, Phi, J, gamma, _, _ = closure_views(dlay, df)
    st = input_status(mlay, topo, q, v, tau, block(zeros_nv, 0, (0, 6)))
    if st < 0.0:
        return NONFINITE if st == -3.0 else BAD_INPUT
    if qdd.shape[0] != v.shape[0]:
        return BAD_INPUT
    m = TreeModel(topo, jgeom, inertia, gravity, cl_body, cl_X, row_int, row_vec)
    d = TreeData(Xrel, Xw, S, vec6, mat6, tmp33, cw, rw, Phi, J, gamma)
    e, w = plan_views(ei, wi, wf)
    return embedding_kernel(m, d, e, w, q, v, tau, qdd, info)


@kernel
def projection_kernel(m, d, e, w, q, v, mode, dx, info):
    """Newton / projection step of every aggregated body's dependent coordinates.

    ``mode`` 0 (positions): dx_dep = −Y1⁻¹ Φ_𝒮[rows]; 1 (velocities): dx_dep =
    −Y1⁻¹ (J_𝒮 v_𝒮)[rows], which makes J_𝒮 (v + dx) = 0 exactly.  ``dx`` (nv) is zero
    on every other coordinate.  ``info[0]``: max |residual| over all rows of every
    aggregated body before the step.  Returns a status as ``embedding_kernel``.
    """
    topo = m.topo
    fk_kernel(topo, m.jgeom, q, v[:0], d.Xrel, d.Xw, d.S, d.vec6, d.tmp33)
    if m.cl_body.shape[0] > 0:
        closure_terms(
            topo, m.cl_body, m.cl_X, m.row_int, m.row_vec, d.Xw, d.S, d.vec6, d.cw, d.rw,
            False, False, d.Phi, d.J, d.gamma,
        )  # fmt: skip
    for i in range(dx.shape[0]):
        dx[i] = 0.0
    worst = 0.0
    for s in range(e.agg.shape[0]):
        a = e.agg[s]
        ns, r, ms = a[A_NS], a[A_R], a[A_MS]
        JS = block(w.flt, a[A_JS], (ms, ns))
        gS = block(w.flt, a[A_GS], ms)
        LU = block(w.flt, a[A_LU], (r, r))
        y = block(w.flt, a[A_TMP], r)
        piv = w.piv[a[A_PIV] : a[A_PIV] + r]
        loop_jacobian(s, m, d, e, w, q, 1, JS, gS)
        co = a[A_COL]
        if mode == 1:
            for lr in range(ms):
                acc = 0.0
                for l in range(ns):
                    acc += JS[lr, l] * v[e.cols[co + l]]
                gS[lr] = acc
        for lr in range(ms):
            worst = max(worst, abs(gS[lr]))
        ratio = factor_y1(s, e, w, JS, LU, piv)
        if ratio < RESELECT:
            reselect_columns(s, e, w, JS, block(w.flt, a[A_TMP], (r, ns)))
            ratio = factor_y1(s, e, w, JS, LU, piv)
        if ratio < SINGULAR_RATIO:
            info[0] = ratio
            info[1] = s
            return SINGULAR_X
        so = a[A_SEL]
        for i in range(r):
            y[i] = -gS[w.sel[so + i]]
        lu_solve(LU, r, piv, y)
        for i in range(r):
            dx[e.cols[co + w.sel[so + r + i]]] = y[i]
    info[0] = worst
    return OK


@entry_kernel
def projection_entry(ictx, fctx, ei, wi, wf, q, v, mode, dx, info):
    """``projection_kernel`` on a Data's context buffers and the embedding buffers."""
    mlay, mi, mf, dlay, df = context_buffers(ictx, fctx)
    topo, cl_body, row_int, jgeom, inertia, gravity, cl_X, row_vec = model_views(mlay, mi, mf)
    Xrel, Xw, S, vec6, mat6, tmp33 = tree_views(dlay, df)
    cw, rw, _, Phi, J, gamma, _, _ = closure_views(dlay, df)
    m = TreeModel(topo, jgeom, inertia, gravity, cl_body, cl_X, row_int, row_vec)
    d = TreeData(Xrel, Xw, S, vec6, mat6, tmp33, cw, rw, Phi, J, gamma)
    e, w = plan_views(ei, wi, wf)
    return projection_kernel(m, d, e, w, q, v, mode, dx, info)


_ENTRY = Entry(embedding_entry, types.int64, I1, F1, I1, I1, F1, F1, F1, F1, F1, F1)
_PROJECT = Entry(projection_entry, types.int64, I1, F1, I1, I1, F1, F1, F1, types.int64, F1, F1)


# --------------------------------------------------------------------------- Python side
class Partition:
    """The partition of one aggregated body's loop Jacobian J_𝒮 at a configuration.

    ``coordinates`` (θ_𝒮, indices into v), ``rows`` (``("closure", model row)`` or
    ``("coupling", k)``), ``rank`` r, ``independent`` (θ_R) and ``dependent`` (indices
    into v), ``condition`` (2-norm condition number of Y1), and the same choice in 𝒮's
    local numbering: ``sel_rows`` (r rows of J_𝒮) and ``col_order`` (columns of θ_𝒮,
    dependent first).
    """

    __slots__ = (
        "col_order", "condition", "coordinates", "dependent", "independent", "rank", "rows",
        "sel_rows",
    )  # fmt: skip

    def __init__(self, coordinates, rows, rank, sel_rows, col_order, condition):
        self.coordinates = tuple(int(c) for c in coordinates)
        self.rows = tuple(rows)
        self.rank = int(rank)
        self.sel_rows = np.asarray(sel_rows, dtype=np.int64)
        self.col_order = np.asarray(col_order, dtype=np.int64)
        cols = np.asarray(self.coordinates, dtype=np.int64)
        self.dependent = tuple(int(c) for c in cols[self.col_order[:rank]])
        self.independent = tuple(int(c) for c in cols[self.col_order[rank:]])
        self.condition = float(condition)


def _rank_tol(A):
    smax = np.linalg.norm(A, 2) if A.size else 0.0
    return max(A.shape) * np.finfo(float).eps * max(smax, 1.0) * 10


def choose_partition(JS, prefer_independent=None):
    """(rank, selected rows, column order dependent-first, condition of Y1) of J_𝒮.

    Rank by singular values; independent rows by column-pivoted QR of J_𝒮ᵀ; dependent
    columns by column-pivoted QR of J_𝒮[rows] (the best-conditioned square block Y1
    that greedy pivoting finds).  ``prefer_independent`` (bool per column, e.g. the
    actuated coordinates): these are kept independent when the block Y1 without them
    is no worse than 100 times the best one.
    """
    import scipy.linalg as sla  # lazily: scipy.linalg costs ~0.15 s at import

    ms, ns = JS.shape
    if ms == 0 or not np.any(JS):
        return 0, np.zeros(0, np.int64), np.arange(ns), 1.0
    sv = np.linalg.svd(JS, compute_uv=False)
    rank = int(np.sum(sv > _rank_tol(JS)))
    _, _, prow = sla.qr(JS.T, mode="economic", pivoting=True)
    rows = np.sort(prow[:rank])
    Y = JS[rows]

    def block_for(scale):
        _, _, pc = sla.qr(Y * scale, mode="economic", pivoting=True)
        dep = np.sort(pc[:rank])
        return dep, np.linalg.cond(Y[:, dep])

    dep, cond = block_for(np.ones(ns))
    if prefer_independent is not None and np.any(prefer_independent):
        dep_p, cond_p = block_for(np.where(prefer_independent, 1e-3, 1.0))
        if cond_p <= 100.0 * cond:
            dep, cond = dep_p, cond_p
    ind = np.setdiff1d(np.arange(ns), dep)
    return rank, rows, np.concatenate([dep, ind]).astype(np.int64), float(cond)


def _group_layout(model, members, ix, cuts):
    """(θ_𝒮 as v indices, colstart per member, rows as (kind, index)) of a group."""
    cols, colstart = [], {}
    for b in members:
        colstart[b] = len(cols)
        t = model.topo[b]
        cols.extend(range(int(t[3]), int(t[3] + t[5])))
    rows = []
    for c in ix:
        cut = cuts[c]
        if cut.kind == "closure":
            sl = model.closure_rows[cut.index]
            rows.extend(("closure", r) for r in range(sl.start, sl.stop))
        else:
            rows.append(("coupling", cut.index))
    return cols, colstart, rows


def _dense_rows(model, q, rows, cols):
    """J_𝒮 at ``q`` from the dense closure Jacobian and the coupling rows (setup only)."""
    from loopdyn.kinematics.closures import constraint_jacobian
    from loopdyn.topology.aggregation import couplings_of

    cps = couplings_of(model)
    J = constraint_jacobian(model, q, data=model.create_data()) if model.m else None
    out = np.zeros((len(rows), len(cols)))
    for lr, (kind, idx) in enumerate(rows):
        if kind == "closure":
            out[lr] = J[idx, cols]
        else:
            _, a, b, ratio, _ = cps[idx]
            out[lr, cols.index(int(model.topo[b, 3]))] += 1.0
            out[lr, cols.index(int(model.topo[a, 3]))] -= ratio
    return out


def partition_at(model, q):
    """The :class:`Partition` of every aggregated body of ``model`` at configuration ``q``."""
    from loopdyn.topology.aggregation import structure
    from loopdyn.validation import configuration

    q = configuration(model, q)
    cuts, groups, _ = structure(model)
    act = np.zeros(model.nv, dtype=bool)
    act[model.actuated] = True
    out = []
    for members, _, ix in groups:
        cols, _, rows = _group_layout(model, members, ix, cuts)
        JS = _dense_rows(model, q, rows, cols)
        rank, sel, order, cond = choose_partition(JS, act[cols])
        out.append(Partition(cols, rows, rank, sel, order, cond))
    return out


def _consistent(model, q, tol=1e-8):
    """True if ``q`` satisfies every closure and coupling to ``tol``."""
    from loopdyn.kinematics.closures import closure_residual
    from loopdyn.topology.aggregation import couplings_of

    res = np.abs(closure_residual(model, q, data=model.create_data())) if model.m else [0.0]
    for _, a, b, ratio, off in couplings_of(model):
        qa, qb = q[int(model.topo[a, 2])], q[int(model.topo[b, 2])]
        if abs(qb - ratio * qa - off) > tol:
            return False
    return bool(np.max(res) <= tol)


def _pack(specs, dtype, lead=0):
    arena = Arena(dtype, specs, lead=lead)
    return arena, {name: lead + int(arena.offsets[k]) for k, (name, _) in enumerate(specs)}


class Embedding:
    """The compiled buffers of constraint embedding for one model and one ``Data``.

    Built at a configuration ``q`` (the partition of every aggregated body is chosen
    there, see :func:`choose_partition`); ``call(q, v, tau, qdd)`` runs the compiled
    entry and returns its status, ``info`` explains a non-zero one.
    """

    def __init__(self, model, data, q):
        from loopdyn.topology.aggregation import couplings_of, structure

        self.model = model
        self.couplings = getattr(model, "couplings", None)
        _cuts, groups, aggregate_of = structure(model)
        self.groups = groups
        self.parts = partition_at(model, q)
        # the rank of each J_𝒮 on the constraint manifold: the larger of its ranks at q and
        # at q0 when q0 is consistent (a singular q must not lower it)
        if q is not model.q0 and _consistent(model, model.q0):
            for s, p0 in enumerate(partition_at(model, model.q0)):
                if p0.rank > self.parts[s].rank:
                    self.parts[s] = p0
        self._build(model, data, groups, aggregate_of, couplings_of(model))

    def _build(self, model, data, groups, aggregate_of, cps):
        nb = max(model.nbodies, 1)
        na = len(groups)
        agg = np.zeros((na, NAGG), dtype=np.int64)
        members, agg_rows, cols, sel = [], [], [], []
        colstart = np.zeros(nb, dtype=np.int64)
        memslot = np.zeros((nb, 2), dtype=np.int64)
        npiv = nflt = 0
        children = {}
        for c, p in enumerate(model.parent):
            children.setdefault(p, []).append(c)
        for s, ((bodies, parent, _), part) in enumerate(zip(groups, self.parts, strict=True)):
            B, ns, r = len(bodies), len(part.coordinates), part.rank
            k, ms = ns - r, len(part.rows)
            local = 0
            for slot, b in enumerate(bodies):
                colstart[b] = local
                memslot[b, 0] = slot
                local += int(model.topo[b, 5])
            inside = set(bodies)
            for b in reversed(bodies):  # children after parents: a reverse sweep sees them first
                kids = children.get(b, ())
                inner = [c for c in kids if c in inside]
                rigid = len(inner) == len(kids) and all(memslot[c, 1] & RIGID for c in inner)
                memslot[b, 1] = (HAS_INNER if inner else 0) | (RIGID if rigid else 0)
            sizes = {
                A_JS: ms * ns, A_GS: ms, A_LU: r * r, A_X: ns * k, A_ZETA: ns, A_D: k * k,
                A_U: k, A_W: 6 * k, A_H: B * 6 * k, A_UB: B * 6 * k,
                A_TMP: max(r * ns, r, 6 * k, k, 1),
            }  # fmt: skip
            agg[s, A_HEAD], agg[s, A_PARENT], agg[s, A_NMEM] = bodies[0], parent, B
            agg[s, A_MEM], agg[s, A_NS], agg[s, A_K], agg[s, A_R] = len(members), ns, k, r
            agg[s, A_MS], agg[s, A_ROW], agg[s, A_COL] = ms, len(agg_rows), len(cols)
            agg[s, A_SEL], agg[s, A_PIV] = len(sel), npiv
            for field, size in sizes.items():
                agg[s, field] = nflt
                nflt += size
            members.extend(bodies)
            agg_rows.extend(
                (ROW_CLOSURE if kind == "closure" else ROW_COUPLING, idx) for kind, idx in part.rows
            )
            cols.extend(part.coordinates)
            sel.extend(part.sel_rows.tolist() + part.col_order.tolist())
            npiv += r
        nk = len(cps)
        cp_int = np.array(
            [(a, b, int(model.topo[a, 2]), int(model.topo[b, 2])) for _, a, b, _, _ in cps],
            dtype=np.int64,
        ).reshape(nk, 4)
        cp_f = np.array([(ratio, off) for _, _, _, ratio, off in cps]).reshape(nk, 2)
        ints = [
            ("agg", (na, NAGG)), ("members", (len(members),)), ("agg_of", (nb,)),
            ("colstart", (nb,)), ("memslot", (nb, 2)), ("agg_rows", (len(agg_rows), 2)),
            ("cols", (len(cols),)), ("cp_int", (nk, 4)),
        ]  # fmt: skip
        ai, oi = _pack(ints, np.int64, lead=NHEAD)
        v = ai.views
        v["agg"][...] = agg
        v["members"][...] = members
        v["agg_of"][: model.nbodies] = aggregate_of
        v["colstart"][...] = colstart
        v["memslot"][...] = memslot
        v["agg_rows"][...] = np.array(agg_rows, dtype=np.int64).reshape(-1, 2)
        v["cols"][...] = cols
        v["cp_int"][...] = cp_int
        aw, ow = _pack([("sel", (len(sel),)), ("piv", (npiv,))], np.int64)
        aw.views["sel"][...] = sel
        floats = [
            ("cp_f", (nk, 2)), ("flt", (nflt,)), ("Qb", (nb, 6, 6)), ("Yb", (nb, 6)),
            ("abar", (nb, 6)), ("ratio", (na,)),
        ]  # fmt: skip
        af, of = _pack(floats, np.float64)
        af.views["cp_f"][...] = cp_f
        ei = ai.whole
        head = {
            H_NA: na, H_NB: nb, H_NK: nk, H_NMEM: len(members), H_NROWS: len(agg_rows),
            H_NCOLS: len(cols), H_AGG: oi["agg"], H_MEMBERS: oi["members"],
            H_AGG_OF: oi["agg_of"], H_COLSTART: oi["colstart"], H_MEMSLOT: oi["memslot"],
            H_AGG_ROWS: oi["agg_rows"], H_COLS: oi["cols"], H_CP_INT: oi["cp_int"],
            H_SEL: ow["sel"], H_NSEL: len(sel), H_PIV: ow["piv"], H_NPIV: npiv,
            H_CP_F: of["cp_f"], H_FLT: of["flt"], H_NFLT: nflt, H_QB: of["Qb"], H_YB: of["Yb"],
            H_ABAR: of["abar"], H_RATIO: of["ratio"],
        }  # fmt: skip
        for key, val in head.items():
            ei[key] = val
        self.ei, self.wi, self.wf = ei, aw.whole, af.whole
        self.views_f = af.views
        self.views_i = aw.views
        self.agg = v["agg"]
        self.info = np.zeros(2)
        self.head = (data.ictx, data.fctx, self.ei, self.wi, self.wf)
        self.data = data

    def call(self, q, v, tau, qdd):
        """Status of the compiled forward dynamics; q̈ in ``qdd``."""
        return _ENTRY.call(*self.head, q, v, tau, qdd, self.info)

    def project(self, q, v, mode, dx):
        """Status of the compiled projection step (``projection_kernel``); dx, max residual."""
        return _PROJECT.call(*self.head, q, v, mode, dx, self.info)

    def loop_jacobian(self, s):
        """J_𝒮 of aggregated body s as the kernel last computed it (a copy)."""
        a = self.agg[s]
        o = int(a[A_JS])
        return self.views_f["flt"][o : o + a[A_MS] * a[A_NS]].reshape(a[A_MS], a[A_NS]).copy()

    def constraint_map(self, s):
        """(X_𝒮, ζ_𝒮) of aggregated body s from the last forward-dynamics call (copies)."""
        a = self.agg[s]
        ns, k = int(a[A_NS]), int(a[A_K])
        f = self.views_f["flt"]
        X = f[a[A_X] : a[A_X] + ns * k].reshape(ns, k).copy()
        return X, f[a[A_ZETA] : a[A_ZETA] + ns].copy()

    def selection(self, s):
        """(selected rows, column order dependent-first) of aggregated body s (local)."""
        a = self.agg[s]
        r, ns = int(a[A_R]), int(a[A_NS])
        sl = self.views_i["sel"][a[A_SEL] : a[A_SEL] + r + ns]
        return sl[:r].copy(), sl[r:].copy()

    def set_selection(self, s, rows, order):
        a = self.agg[s]
        r, ns = int(a[A_R]), int(a[A_NS])
        o = int(a[A_SEL])
        self.views_i["sel"][o : o + r] = rows
        self.views_i["sel"][o + r : o + r + ns] = order


def _describe(model, emb, s):
    names = ", ".join(model.body_names[i] for i in emb.groups[s][0])
    return f"aggregated body 𝒮{s} ({{{names}}})"


def embedding_of(model, data=None, q=None):
    """The :class:`Embedding` of ``model`` in ``data`` (built at ``q``, default q0, if new)."""
    from loopdyn.validation import workspace

    d = workspace(model, data)
    emb = getattr(d, "_embedding", None)
    if (
        emb is None
        or emb.model is not model
        or emb.couplings is not getattr(model, "couplings", None)
    ):
        emb = d._embedding = Embedding(model, d, model.q0 if q is None else q)
    return emb


def _fail(model, emb, status, s, q):
    """Raise the error of a non-recoverable kernel status."""
    if status == NONFINITE:
        raise ValueError(f"{model.name}: q, v or tau holds NaN or inf")
    if status == SINGULAR_JOINT:
        raise SingularityError(
            f"{model.name}: articulated inertia of joint {model.joint_names[s]!r} is singular; "
            "check the masses and inertias of the bodies it carries"
        )
    if status == SINGULAR_D:
        raise SingularityError(
            f"{model.name}: the articulated inertia D = H_Sᵀ P_S H_S of {_describe(model, emb, s)} "
            "is singular; check the masses and inertias of its bodies"
        )
    JS = emb.loop_jacobian(s)
    sv = np.linalg.svd(JS, compute_uv=False) if JS.size else np.ones(1)
    r = int(emb.agg[s, A_R])
    cond = float(sv[0] / sv[r - 1]) if r and sv[r - 1] > 0 else np.inf
    raise SingularityError(
        f"{model.name}: X_S of {_describe(model, emb, s)} is singular at this configuration: "
        f"its loop Jacobian has condition number {cond:.3g} (rank {r} expected); the loop is "
        "at a singular configuration, where its independent coordinates no longer determine "
        "the others; use method='augmented' there or avoid the configuration"
    )


def run(model, q, v, tau=None, data=None):
    """q̈ (nv, every tree coordinate) of ``model`` by constraint embedding.

    In: a consistent state ``q`` (nq), ``v`` (nv), joint forces ``tau`` (nv, None for
    zero); ``data`` a workspace of the model (default: the model's own).  Couplings in
    ``model.couplings`` (prototype, ``loopdyn.topology.aggregation.Coupling``) are
    embedded along with the closures.  Raises :class:`SingularityError` naming the
    aggregated body whose X_𝒮 is singular even after re-selecting its independent
    coordinates, ``ValueError`` for bad input.
    """
    from loopdyn.model import Data

    d = (model._data or model.data) if data is None else data
    emb = getattr(d, "_embedding", None) if type(d) is Data else None
    if emb is not None and emb.model is model and tau is not None:
        qdd = np.empty(model.nv)
        try:
            if emb.call(q, v, tau, qdd) == OK:
                return qdd
        except TypeError:
            pass
    return _checked_run(model, q, v, tau, data)


def _checked_run(model, q, v, tau, data):
    from loopdyn.validation import configuration, vector, workspace, writable

    d = workspace(model, data)
    nv = model.nv
    q = writable(configuration(model, q))
    v = writable(vector(v, nv, "v", model))
    tau = np.zeros(nv) if tau is None else writable(vector(tau, nv, "tau", model))
    emb = embedding_of(model, d, q)
    qdd = np.empty(nv)
    for _ in range(3):
        status = emb.call(q, v, tau, qdd)
        if status == OK:
            return qdd
        s = int(emb.info[1])
        if status == BAD_INPUT:  # pragma: no cover - the checks above explain first
            raise ValueError(f"{model.name}: q, v or tau has a wrong shape or a zero quaternion")
        if status not in (SINGULAR_X, ROWS_CHANGED):
            _fail(model, emb, status, s, q)
        # re-partition 𝒮 at q: new rows and columns, or a new plan if its rank changed
        part = partition_at(model, q)[s]
        if part.rank < emb.agg[s, A_R]:
            _fail(model, emb, SINGULAR_X, s, q)
        if part.rank != emb.agg[s, A_R] or status == ROWS_CHANGED:
            emb = d._embedding = Embedding(model, d, q)
        else:
            emb.set_selection(s, part.sel_rows, part.col_order)
    _fail(model, emb, status, s, q)  # pragma: no cover - a re-partition fixes the first


def close_positions(model, q, data=None, tol=1e-12, max_iter=30):
    """``q`` with every aggregated body's dependent coordinates solved for (Newton).

    The independent coordinates θ_R (and every coordinate outside the aggregated
    bodies) are kept; each aggregated body's dependent ones take Newton steps
    −Y1⁻¹ Φ_𝒮 on its closure and coupling rows until max |Φ| ≤ ``tol``.  Cost per
    iteration: linear in the number of bounded-size aggregated bodies.  Raises
    :class:`AssemblyError` if it does not converge.
    """
    from loopdyn.errors import AssemblyError
    from loopdyn.kinematics.configuration import integrate
    from loopdyn.validation import configuration, workspace, writable

    d = workspace(model, data)
    q = writable(configuration(model, q)).copy()
    emb = embedding_of(model, d, q)
    dx = np.empty(model.nv)
    v0 = np.zeros(model.nv)
    res = np.inf
    for _ in range(max_iter):
        status = emb.project(q, v0, 0, dx)
        if status != OK:
            _fail(model, emb, status, int(emb.info[1]), q)
        res = emb.info[0]
        if res <= tol:
            return q
        q = integrate(model, q, dx)
    raise AssemblyError(
        f"{model.name}: the closures and couplings of the aggregated bodies did not close "
        f"(max |Φ| = {res:.3g} after {max_iter} Newton steps); the independent coordinates "
        "may be out of the mechanism's range"
    )


def close_velocities(model, q, v, data=None):
    """``v`` with every aggregated body's dependent velocities set from θ̇_R: θ̇_𝒮 = X_𝒮 θ̇_R."""
    from loopdyn.validation import configuration, vector, workspace, writable

    d = workspace(model, data)
    q = writable(configuration(model, q))
    v = writable(vector(v, model.nv, "v", model)).copy()
    emb = embedding_of(model, d, q)
    dx = np.empty(model.nv)
    status = emb.project(q, v, 1, dx)
    if status != OK:
        _fail(model, emb, status, int(emb.info[1]), q)
    return v + dx


__all__ = [
    "Embedding",
    "Partition",
    "choose_partition",
    "close_positions",
    "close_velocities",
    "embedding_kernel",
    "embedding_of",
    "partition_at",
    "run",
]
