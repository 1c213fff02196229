"""Constraint embedding: articulated-body forward dynamics on Jain's aggregated tree.

Paper: ``jain-constraint-embedding-aggregation.txt`` (its equations were lost in
extraction; ``docs/embedding.md`` derives each step).  Each aggregated body 𝒮
(``loopdyn.topology.aggregation``: the bodies of a loop, or of several loops and
couplings sharing bodies, with parent p) carries the n_𝒮 coordinates θ_𝒮 of its
joints, of which k are independent (θ_R) and r = n_𝒮 − k dependent, r being the
number of 𝒮's rows among the model's independent closure rows (``d.rows``; the rows
of one aggregated body involve θ_𝒮 only, so J is block-diagonal over the aggregated
bodies and the independent rows split into independent sets per 𝒮).  Frames: every
spatial quantity below is in its body's frame (``Data`` convention), [angular; linear].

Per aggregated body, tips to base (``aggregate_inward``):

- loop Jacobian J_𝒮 (r × n_𝒮): 𝒮's independent rows restricted to θ_𝒮, and γ_𝒮 (eq. 58);
- partition (eqs. 58–60): dependent columns with a square, well-conditioned block
  Y1 = J_𝒮[:, dep] (LU with partial pivoting), Y2 = J_𝒮[:, ind];
  θ̇_𝒮 = X_𝒮 θ̇_R, X_𝒮 = [1; −Y1⁻¹ Y2] (eqs. 25, 60).  The dependent columns are chosen
  at the first call by complete pivoting on J_𝒮 with the actuated columns weighted
  down (so that they stay independent), and chosen again by plain complete pivoting
  whenever the monitored ratio min|u_ii| / max|J_𝒮| of Y1's LU falls below ``RESELECT``;
- θ̈_𝒮 = X_𝒮 θ̈_R + ζ_𝒮, ζ_𝒮 = Ẋ_𝒮 θ̇_R (eq. 34): zero on θ_R and Y1⁻¹ γ_𝒮 on the
  dependent coordinates, because J_𝒮 Ẋ_𝒮 θ̇_R = −J̇_𝒮 X_𝒮 θ̇_R = γ_𝒮 (eq. 61);
- member velocities V_j = 𝒜_j V_p + H_j θ̇_R: H_j = jXλ H_λ + S_j X_𝒮[j] is the
  aggregated body's joint map H^R_𝒮 (eq. 29) restricted to member j, and
  ā_j = jXλ ā_λ + S_j ζ_j + c_j its bias acceleration (eq. 35) with a_p = 0;
- P_j (articulated inertia of member j with its children outside 𝒮) and z_j (its
  bias force) gathered by the ordinary steps; then (eqs. 50, 54)
  D = Σ H_jᵀ P_j H_j (k × k), u = X_𝒮ᵀ τ_𝒮 − Σ H_jᵀ (P_j ā_j + z_j) (eq. 36),
  W = Σ 𝒜_jᵀ P_j H_j (6 × k, in p's frame), and for the parent (eq. 55)
  I^A_p += Σ 𝒜_jᵀ P_j 𝒜_j − W D⁻¹ Wᵀ,  p^A_p += Σ 𝒜_jᵀ (P_j ā_j + z_j) + W D⁻¹ u.

Base to tips (``aggregate_outward``, eqs. 56–57): θ̈_R = D⁻¹ (u − Wᵀ a_p),
θ̈_𝒮 = X_𝒮 θ̈_R + ζ_𝒮 for every tree coordinate of 𝒮, a_j = jXλ a_λ + S_j θ̈_j + c_j.
Then (``aggregate_multipliers``) the member joint forces F_j = P_j a_j + z_j +
Σ_{c in 𝒮} cXjᵀ F_c give τ_𝒮 + J_𝒮ᵀ λ_𝒮 = S_𝒮ᵀ F_𝒮, hence λ_𝒮 = Y1⁻ᵀ (S_𝒮ᵀ F_𝒮 − τ_𝒮)[dep],
and the acceptance check J_𝒮 θ̈_𝒮 = γ_𝒮 on 𝒮's rows.  Ordinary bodies take the
standard articulated-body steps (RBDA Table 7.1), so the cost is that of ABA plus, per
aggregated body, O(r n_𝒮 + r³ + B_𝒮 k (36 + k) + k³) for its B_𝒮 members: linear in the
number of bounded-size loops.  No dense m × nv Jacobian is formed, except when the
model has redundant rows: the runner then needs it for its minimum-norm multipliers
and its check of the dropped rows.

One module (~1,300 lines), for a reason: ``rcr`` is built on its plan (the header
``H_*`` / ``A_*``, ``EmbeddingPlan``'s packing) and its kernels (``member_forces``,
``factor_columns``, ``open_residual``/``close_residual``, ``hold_bias``/``restore_bias``,
``take_step``, ``eom_verdict``, ``verdict``), which stand here once for both.
"""

from functools import partial

import numpy as np
from numba import njit, types

from loopdyn.kernels.linalg import (
    lu_inplace,
    lu_inverse_norm_exact,
    lu_solve,
    lu_solve_transpose,
)
from loopdyn.kernels.numba_internals import (
    BUF,
    IN,
    Entry,
    as_input,
    block,
    entry,
    unliteral,
)
from loopdyn.kernels.spatial import (
    force_to_parent_at,
    inertia_to_parent_add,
    mat6_vec_at,
    motion_to_child_at,
    rigid_inertia_to_parent_add,
)
from loopdyn.kernels.views import handles
from loopdyn.kinematics.closures import _common_ancestor, bias_accelerations, closure_terms
from loopdyn.kinematics.frames import fk_kernel
from loopdyn.methods.common import (
    DIAG_ASCALE,
    DIAG_EOM,
    DIAG_QUALITY,
    DIAG_REFINED,
    DIAG_RESIDUAL,
    EOM_TOL,
    INACCURATE,
    MAX_REFINE,
    NONFINITE_OUTPUT,
    REFINE_GO_ON,
    RESIDUAL_TOL,
    SINGULAR,
    STALL_TOL,
    DependentRows,
    checked_plan,
    method_entry,
    pack_int_plan,
    plan_views,
    take_correction,
)
from loopdyn.model.closures import COUPLING, TRANSLATION
from loopdyn.topology.aggregation import build_aggregation, structure
from loopdyn.tree.aba import invert_spd_inplace
from loopdyn.tree.rnea import rnea_from_kinematics

# The compiled functions of this module are compiled like entries (cached, without
# numba's reference counting): they allocate nothing, and the views of the aggregated
# bodies' blocks they carve with ``block`` would otherwise cost atomic updates each.
kernel = entry

# ratio min|u_ii| / max|J_𝒮| of Y1's LU below which the dependent columns are chosen
# again by complete pivoting, and below which Y1 counts as singular.  The reduction
# carries 1/ρ into q̈ even refined (an error of ~0.03 eps/ρ measured: two closure rows
# parallel to 7e-11 gave rcr q̈ 2e-8 off the exact answer at ρ = 1.4e-10), so below
# 1e-7 the answer could miss 1e-10 and the call falls back to augmented, or raises
RESELECT = 1e-2
SINGULAR_RATIO = 1e-7
# below this pivot ratio the 1-norm condition number of Y1 is computed too, and 1/cond(Y1)
# is the ratio judged against SINGULAR_RATIO where it is the smaller: pivots can miss the
# condition by orders of magnitude (hypothesis seed 20261130: a 12-row block with pivot
# ratio 2.9e-7 and cond(Y1) 2e8 gave q̈ 6e-8 off, accepted)
CHECK_RATIO = 0.1
# articulated pivot ratio (``pivot_ratio``) below which the answer is refined: higher than
# ABA's ``REFINE_ABA_RATIO``, as the census of issue 11 found errors of 5e-8 at 1.5e-5
# (case 4402 of seed 11: mass ratio 5e4, cond(M) 1.4e7)
REFINE_PIVOT_RATIO = 1e-4
# ... and between it and this ratio, where the residual of the equations of motion
# (``eom_residual``: one RNEA) is above REFINE_EOM_TOL: the pivots alone can miss the
# loss (hypothesis seed 20261133: a 464 kg body among 1 kg ones in a 16-coordinate
# aggregated body, cond(D) 1.5e6, ratio 1.4e-4, q̈ 4.5e-8 off with a residual of 7.7e-9).
# A backward-stable solve leaves ~1e-15 (the catalog's largest 9.4e-15, the excavator's);
# the catalog's ratios are all above this one, so none of its calls pays the RNEA
CHECK_PIVOT_RATIO = 1e-2
REFINE_EOM_TOL = 1e-13
# weight of an actuated column when the dependent columns are first chosen: an actuated
# coordinate becomes dependent only if its column is 1/ACTUATED_WEIGHT times larger
ACTUATED_WEIGHT = 1e-3

# ------------------------------------------------------------------ the plan
# header of the int plan ``ip``: sizes, then the offsets of its arrays
(H_NA, H_NB, H_WANTJ, H_AGG, H_MEM, H_AGGOF, H_COLSTART, H_SLOT, H_FLAGS, H_ROWS, H_LPOS,
 H_COLS, H_ACT, H_ORDER, H_PIV) = range(15)  # fmt: skip
NHEAD = 15
# columns of the aggregated-body table (na × NAGG): head body, parent p, members (count,
# offset), n_𝒮, k, r, offsets of its rows, columns and pivots, "columns chosen" flag,
# then the offsets in ``fw`` of its float blocks (A_RS: the sizes of its rows)
(A_HEAD, A_PARENT, A_NMEM, A_MEM, A_NS, A_K, A_R, A_ROW, A_COL, A_PIV, A_CHOSEN, A_JS,
 A_GS, A_LU, A_X, A_ZETA, A_D, A_U, A_W, A_H, A_UB, A_TMP, A_SC, A_RS) = range(24)  # fmt: skip
NAGG = 24
# member flags: children in 𝒮; rigid composite (no body of its sub-tree in 𝒮 has
# children outside 𝒮, so the inertia moved inward is a rigid-body inertia)
HAS_INNER, RIGID = 1, 2


class EmbeddingPlan:
    """The aggregated tree of a model, packed for the kernels, for one set of independent
    closure rows (``rows``, sorted model row indices, as ``Data.rows``).

    ``buf`` (float64): ``[n | ip (n int64) | fw]``.  ``ip`` holds the header
    (``H_*``), the table ``agg`` (``A_*`` columns per aggregated body) and, per body,
    ``agg_of`` (its aggregated body or -1), ``colstart`` (its first column in θ_𝒮),
    ``slot`` (its place among the members) and ``flags``; per aggregated body its
    selected rows (model indices, their positions in ``rows``), θ_𝒮 (v indices), the
    actuated flags of θ_𝒮, the column order (dependent first; written by the kernel)
    and Y1's LU pivots.  ``fw`` holds, per aggregated body, J_𝒮, γ_𝒮, LU(Y1), X_𝒮, ζ_𝒮,
    D⁻¹, u, W, H, P H, scratch and its acceleration scale.  Per member, the kernels
    keep the composite inertia Q_j in ``d.U[j]``, y_j = P_j ā_j + z_j in ``d.u[j]``,
    ā_j in ``d.T1[j]`` and the joint force in ``d.F[j]`` (rows no ordinary step uses).
    """

    def __init__(self, model, rows):
        rows = np.asarray(rows, dtype=np.int64)
        pos = {int(r): t for t, r in enumerate(rows)}
        cuts, groups, aggregate_of = structure(model)
        nb, na = model.nbodies, len(groups)
        actuated = np.zeros(model.nv, dtype=np.int64)
        actuated[model.actuated] = 1
        children = {}
        for c, p in enumerate(model.parent):
            children.setdefault(p, []).append(c)
        agg = np.zeros((na, NAGG), dtype=np.int64)
        colstart = np.zeros(nb, dtype=np.int64)
        slot = np.zeros(nb, dtype=np.int64)
        flags = np.zeros(nb, dtype=np.int64)
        members, srows, lpos, cols, order, self.rows = [], [], [], [], [], []
        npiv = nflt = 0
        for s, (bodies, parent, ix) in enumerate(groups):
            local = 0
            for k, b in enumerate(bodies):
                colstart[b], slot[b] = local, k
                local += int(model.topo[b, 5])
            inside = set(bodies)
            for b in reversed(bodies):  # children after parents: seen first here
                kids = children.get(b, ())
                inner = [c for c in kids if c in inside]
                rigid = len(inner) == len(kids) and all(flags[c] & RIGID for c in inner)
                flags[b] = (HAS_INNER if inner else 0) | (RIGID if rigid else 0)
            all_rows = sorted(
                r for c in ix for r in range(*model.closure_rows[cuts[c].index].indices(model.m))
            )
            sel = [r for r in all_rows if r in pos]
            self.rows.append(tuple(all_rows))
            B, ns, r = len(bodies), local, len(sel)
            if r > ns:  # rows not yet reduced to an independent set (SELF_RANKED)
                raise DependentRows(f"{model.name}: {r} rows on {ns} coordinates")
            k = ns - r
            agg[s, :A_CHOSEN] = (bodies[0], parent, B, len(members), ns, k, r, len(srows),
                                 len(cols), npiv)  # fmt: skip
            sizes = (r * ns, r, r * r, ns * k, ns, k * k, k, 6 * k, B * 6 * k, B * 6 * k,
                     max(r * ns, 6 * k, ns + r, 1), 1, r)  # fmt: skip
            for col, size in zip(range(A_JS, A_RS + 1), sizes, strict=True):
                agg[s, col] = nflt
                nflt += size
            members.extend(bodies)
            srows.extend(sel)
            lpos.extend(pos[r] for r in sel)
            vcols = [int(model.topo[b, 3]) + c for b in bodies for c in range(model.topo[b, 5])]
            cols.extend(vcols)
            order.extend(range(ns))
            npiv += r
        parts = dict(
            agg=agg, mem=members, aggof=aggregate_of, colstart=colstart, slot=slot, flags=flags,
            rows=srows, lpos=lpos, cols=cols, act=actuated[np.array(cols, dtype=np.int64)],
            order=order, piv=np.zeros(npiv),
        )  # fmt: skip
        heads = (H_AGG, H_MEM, H_AGGOF, H_COLSTART, H_SLOT, H_FLAGS, H_ROWS, H_LPOS, H_COLS,
                 H_ACT, H_ORDER, H_PIV)  # fmt: skip
        sections = zip(heads, parts.values(), strict=True)
        self.buf, ip, self.fw, offsets = pack_int_plan(sections, NHEAD, nflt)
        ip[H_NA], ip[H_NB], ip[H_WANTJ] = na, nb, int(len(rows) < model.m)
        self.ip = ip
        self.agg = ip[offsets[H_AGG] : offsets[H_AGG] + na * NAGG].reshape(na, NAGG)
        self._order = ip[offsets[H_ORDER] : offsets[H_ORDER] + len(order)]
        self.groups = groups
        self.columns = [tuple(cols[a[A_COL] : a[A_COL] + a[A_NS]]) for a in agg]
        self.independent_rows = rows

    def _block(self, s, col, shape):
        o = int(self.agg[s, col])
        return self.fw[o : o + int(np.prod(shape))].reshape(shape)

    def loop_jacobian(self, s):
        """J_𝒮 (r × n_𝒮) of aggregated body s as the kernel last computed it (a copy; the
        model's rows, unscaled)."""
        r = self.agg[s, A_R]
        return self._block(s, A_JS, (r, self.agg[s, A_NS])) * self._block(s, A_RS, (r,))[:, None]

    def constraint_map(self, s):
        """(X_𝒮 (n_𝒮 × k), ζ_𝒮 (n_𝒮)) of aggregated body s from the last call (copies)."""
        ns, k = self.agg[s, A_NS], self.agg[s, A_K]
        return self._block(s, A_X, (ns, k)).copy(), self._block(s, A_ZETA, (ns,)).copy()

    def column_order(self, s):
        """θ_𝒮's local columns of aggregated body s, its r dependent ones first (a copy)."""
        a = self.agg[s]
        return self._order[a[A_COL] : a[A_COL] + a[A_NS]].copy()

    def set_column_order(self, s, order):
        """Impose the column order (dependent first) of aggregated body s; the kernel keeps
        it while Y1 stays well conditioned."""
        a = self.agg[s]
        self._order[a[A_COL] : a[A_COL] + a[A_NS]] = order
        a[A_CHOSEN] = 1


def plan_for(model, d, rows=None):
    """The ``EmbeddingPlan`` of ``d``'s current independent rows (or of ``rows``), cached
    on ``d``."""
    rows = d.rows[: d.nrows] if rows is None else rows
    key = ("embedding", np.asarray(rows, dtype=np.int64).tobytes())
    p = d.plans.get(key)
    if p is None:
        p = d.plans[key] = EmbeddingPlan(model, np.array(rows))
    return p


# ------------------------------------------------------------------ loop Jacobian, partition
@kernel
def loop_jacobian(m, d, ip, fw, s):
    """J_𝒮 (r × n_𝒮) and γ_𝒮 (r) of aggregated body s from the closure kinematics in ``d``.

    A closure row (``loopdyn.kinematics.closures``): J v = u·(v_B − v_A(p_B)) for a
    translation, n·(ω_B − ω_A) for a rotation (world vectors ``d.rw``); its entries in
    θ_𝒮 are the point-Jacobian columns R_j S_j of the members on the paths from the two
    closure bodies up to the loop's root c (excluded; within 𝒮), + for body B and − for
    body A (from c up both sides carry the same columns, which cancel).  A coupling row (Sec. 5.1):
    J = e_b − ratio e_a.  γ_𝒮 is ``d.gamma`` on the rows (0 for a coupling).

    Each row of J_𝒮 and γ_𝒮 is then divided by its size σ_i = max_c |J_𝒮[i, c]| (kept in
    the A_RS section): the rows are judged at their own scale by the column choice, Y1's
    pivots and condition and the acceptance check (Cassie's shin-spring closure keeps a
    row of size 2e-6 beside rows of size 1: unscaled, its Y1 read as singular).  The
    multipliers of the scaled rows are σ_i λ_i (``aggregate_multipliers`` and
    ``eom_residual`` scale back).
    """
    topo, Xw, S, rw = m.topo, d.Xw, d.S, d.rw
    row_int, row_vec, cl_body = m.row_int, m.row_vec, m.cl_body
    a = ip[ip[H_AGG] + s * NAGG : ip[H_AGG] + (s + 1) * NAGG]
    ns, r = a[A_NS], a[A_R]
    JS = block(fw, a[A_JS], (r, ns))
    gS = block(fw, a[A_GS], r)
    rows = ip[ip[H_ROWS] + a[A_ROW] : ip[H_ROWS] + a[A_ROW] + r]
    aggof = ip[ip[H_AGGOF] : ip[H_AGGOF] + ip[H_NB]]
    colstart = ip[ip[H_COLSTART] : ip[H_COLSTART] + ip[H_NB]]
    for i in range(r):
        for c in range(ns):
            JS[i, c] = 0.0
    for i in range(r):
        rr = rows[i]
        k = row_int[rr, 0]
        gS[i] = d.gamma[rr]
        if row_int[rr, 1] == COUPLING:
            JS[i, colstart[cl_body[k, 1]]] += 1.0
            JS[i, colstart[cl_body[k, 0]]] -= row_vec[rr, 0, 0]
            continue
        trans = row_int[rr, 1] == TRANSLATION
        u0, u1, u2 = rw[rr, 0, 0], rw[rr, 0, 1], rw[rr, 0, 2]
        n0, n1, n2 = rw[rr, 2, 0], rw[rr, 2, 1], rw[rr, 2, 2]
        lev = d.lev[k]  # p_B - o_j (closure_levers: up to the loop's root c only)
        c = _common_ancestor(topo, cl_body[k, 0], cl_body[k, 1])
        for side in range(2):
            sign = 1.0 if side == 1 else -1.0
            j = cl_body[k, side]
            while j != c and j >= 0 and aggof[j] == s:
                d0, d1, d2 = lev[j, 0], lev[j, 1], lev[j, 2]
                c0 = colstart[j]
                for kk in range(topo[j, 5]):
                    s0, s1, s2 = S[j, 0, kk], S[j, 1, kk], S[j, 2, kk]
                    w0 = Xw[j, 0, 0] * s0 + Xw[j, 0, 1] * s1 + Xw[j, 0, 2] * s2
                    w1 = Xw[j, 1, 0] * s0 + Xw[j, 1, 1] * s1 + Xw[j, 1, 2] * s2
                    w2 = Xw[j, 2, 0] * s0 + Xw[j, 2, 1] * s1 + Xw[j, 2, 2] * s2
                    if trans:
                        s3, s4, s5 = S[j, 3, kk], S[j, 4, kk], S[j, 5, kk]
                        l0 = Xw[j, 0, 0] * s3 + Xw[j, 0, 1] * s4 + Xw[j, 0, 2] * s5
                        l1 = Xw[j, 1, 0] * s3 + Xw[j, 1, 1] * s4 + Xw[j, 1, 2] * s5
                        l2 = Xw[j, 2, 0] * s3 + Xw[j, 2, 1] * s4 + Xw[j, 2, 2] * s5
                        # velocity of the point p_B: l + ω × (p_B − o_j)
                        val = (
                            u0 * (l0 + w1 * d2 - w2 * d1)
                            + u1 * (l1 + w2 * d0 - w0 * d2)
                            + u2 * (l2 + w0 * d1 - w1 * d0)
                        )
                    else:
                        val = n0 * w0 + n1 * w1 + n2 * w2
                    JS[i, c0 + kk] += sign * val
                j = topo[j, 0]
    sz = block(fw, a[A_RS], r)
    for i in range(r):
        big = 0.0
        for c in range(ns):
            big = max(big, abs(JS[i, c]))
        if not big > 0.0:
            big = 1.0
        sz[i] = big
        inv = 1.0 / big
        for c in range(ns):
            JS[i, c] *= inv
        gS[i] *= inv


@kernel
def choose_columns(ip, fw, s, weighted):
    """Choose 𝒮's dependent columns by complete pivoting on J_𝒮 (r × n_𝒮).

    Gaussian elimination of a copy with the largest remaining entry as pivot (times
    ``ACTUATED_WEIGHT`` on actuated columns if ``weighted``, so that they stay
    independent when possible): the r pivot columns become the dependent coordinates
    (the best-conditioned Y1 that greedy pivoting finds), the others θ_R.  Both parts
    of the order are kept increasing.
    """
    a = ip[ip[H_AGG] + s * NAGG : ip[H_AGG] + (s + 1) * NAGG]
    ns, r = a[A_NS], a[A_R]
    JS = block(fw, a[A_JS], (r, ns))
    T = block(fw, a[A_TMP], (r, ns))
    order = ip[ip[H_ORDER] + a[A_COL] : ip[H_ORDER] + a[A_COL] + ns]
    act = ip[ip[H_ACT] + a[A_COL] : ip[H_ACT] + a[A_COL] + ns]
    for i in range(r):
        for c in range(ns):
            T[i, c] = JS[i, c]
    for c in range(ns):
        order[c] = c
    for t in range(r):
        bi, bj, big = t, t, -1.0
        for i in range(t, r):
            for jj in range(t, ns):
                x = abs(T[i, order[jj]])
                if weighted and act[order[jj]] != 0:
                    x *= ACTUATED_WEIGHT
                if x > big:
                    big, bi, bj = x, i, jj
        if bi != t:
            for c in range(ns):
                T[t, c], T[bi, c] = T[bi, c], T[t, c]
        order[t], order[bj] = order[bj], order[t]
        pc = order[t]
        if T[t, pc] != 0.0:
            for i in range(t + 1, r):
                f = T[i, pc] / T[t, pc]
                for jj in range(t, ns):
                    T[i, order[jj]] -= f * T[t, order[jj]]
    for lo, hi in ((0, r), (r, ns)):  # insertion sort of both parts
        for x0 in range(lo + 1, hi):
            x = order[x0]
            b = x0 - 1
            while b >= lo and order[b] > x:
                order[b + 1] = order[b]
                b -= 1
            order[b + 1] = x
    a[A_CHOSEN] = 1


@kernel
def factor_y1(ip, fw, s):
    """LU (partial pivoting) of Y1 = J_𝒮[:, dependent]; returns min|u_ii| / max|J_𝒮|
    (1 for r = 0, 0 for a zero J_𝒮)."""
    a = ip[ip[H_AGG] + s * NAGG : ip[H_AGG] + (s + 1) * NAGG]
    ns, r = a[A_NS], a[A_R]
    if r == 0:
        return 1.0
    JS = block(fw, a[A_JS], (r, ns))
    LU = block(fw, a[A_LU], (r, r))
    order = ip[ip[H_ORDER] + a[A_COL] : ip[H_ORDER] + a[A_COL] + ns]
    piv = ip[ip[H_PIV] + a[A_PIV] : ip[H_PIV] + a[A_PIV] + r]
    return factor_columns(JS, ns, order, LU, piv)


@kernel
def factor_columns(J, nc, dep, LU, piv):
    """LU (partial pivoting) of Y1 = J[:, dep[:r]] into ``LU`` and ``piv`` (J r × ``nc``,
    r = ``LU``'s order); returns min|u_ii| / max|J| (0 for a zero J).  Shared by
    ``factor_y1`` and rcr's ``factor_loop``."""
    r = LU.shape[0]
    big = 0.0
    for i in range(r):
        for c in range(nc):
            big = max(big, abs(J[i, c]))
        for c in range(r):
            LU[i, c] = J[i, dep[c]]
    if big == 0.0:
        return 0.0
    lu_inplace(LU, r, piv)
    small = 1e300
    for i in range(r):
        small = min(small, abs(LU[i, i]))
    return small / big


@kernel
def partition(m, d, ip, fw, s):
    """J_𝒮 and the factored partition of aggregated body s (eqs. 58–60); the ratio of
    ``factor_y1`` (the dependent columns chosen again below ``RESELECT``), or 1/cond₁(Y1)
    where that is smaller (computed below ``CHECK_RATIO``)."""
    a = ip[ip[H_AGG] + s * NAGG : ip[H_AGG] + (s + 1) * NAGG]
    loop_jacobian(m, d, ip, fw, s)
    if a[A_CHOSEN] == 0:
        choose_columns(ip, fw, s, unliteral(True))
    ratio = factor_y1(ip, fw, s)
    if ratio < RESELECT:
        choose_columns(ip, fw, s, unliteral(False))
        ratio = factor_y1(ip, fw, s)
    if 0.0 < ratio < CHECK_RATIO:
        ratio = min(ratio, 1.0 / y1_condition(ip, fw, s))
    return ratio


@kernel
def y1_condition(ip, fw, s):
    """‖Y1‖₁ ‖Y1⁻¹‖₁ of aggregated body s from ``factor_y1``'s LU (r solves)."""
    a = ip[ip[H_AGG] + s * NAGG : ip[H_AGG] + (s + 1) * NAGG]
    ns, r = a[A_NS], a[A_R]
    JS = block(fw, a[A_JS], (r, ns))
    LU = block(fw, a[A_LU], (r, r))
    y = block(fw, a[A_TMP], r)
    order = ip[ip[H_ORDER] + a[A_COL] : ip[H_ORDER] + a[A_COL] + ns]
    piv = ip[ip[H_PIV] + a[A_PIV] : ip[H_PIV] + a[A_PIV] + r]
    norm = 0.0
    for c in range(r):
        t = 0.0
        for i in range(r):
            t += abs(JS[i, order[c]])
        norm = max(norm, t)
    return norm * lu_inverse_norm_exact(LU, r, piv, y)


@kernel
def constraint_map(ip, fw, s):
    """X_𝒮 (n_𝒮 × k, eq. 60) and ζ_𝒮 = Ẋ_𝒮 θ̇_R (n_𝒮, eq. 61) from Y1's LU.

    Column c of X: 1 on the c-th independent coordinate, −Y1⁻¹ Y2[:, c] on the
    dependent ones.  ζ: Y1⁻¹ γ_𝒮 on the dependent coordinates, 0 on θ_R.
    """
    a = ip[ip[H_AGG] + s * NAGG : ip[H_AGG] + (s + 1) * NAGG]
    ns, k, r = a[A_NS], a[A_K], a[A_R]
    JS = block(fw, a[A_JS], (r, ns))
    gS = block(fw, a[A_GS], r)
    LU = block(fw, a[A_LU], (r, r))
    X = block(fw, a[A_X], (ns, k))
    zeta = block(fw, a[A_ZETA], ns)
    y = block(fw, a[A_TMP], r)
    order = ip[ip[H_ORDER] + a[A_COL] : ip[H_ORDER] + a[A_COL] + ns]
    piv = ip[ip[H_PIV] + a[A_PIV] : ip[H_PIV] + a[A_PIV] + r]
    for c in range(k):
        col = order[r + c]
        for i in range(r):
            y[i] = -JS[i, col]
        lu_solve(LU, r, piv, y)
        for i in range(r):
            X[order[i], c] = y[i]
        for c2 in range(k):
            X[order[r + c2], c] = 1.0 if c2 == c else 0.0
    for i in range(r):
        y[i] = gS[i]
    lu_solve(LU, r, piv, y)
    for i in range(r):
        zeta[order[i]] = y[i]
    for c in range(k):
        zeta[order[r + c]] = 0.0


# ------------------------------------------------------------------ aggregated bodies
@kernel
def aggregate_inward(m, d, ip, fw, s, tau):
    """Tips-to-base step of aggregated body s (eqs. 50, 54–55): partition, X_𝒮, ζ_𝒮,
    D⁻¹, u and W into ``fw``; its articulated inertia and bias force added to its
    parent p.  Returns Y1's pivot ratio (> 0) or ``SINGULAR``."""
    topo, Xrel, S = m.topo, d.Xrel, d.S
    IA, pA, C, Q, Yb, abar, TM = d.IA, d.pA, d.C, d.U, d.u, d.T1, d.TM
    a = ip[ip[H_AGG] + s * NAGG : ip[H_AGG] + (s + 1) * NAGG]
    p, nmem, ns, k = a[A_PARENT], a[A_NMEM], a[A_NS], a[A_K]
    mem = ip[ip[H_MEM] + a[A_MEM] : ip[H_MEM] + a[A_MEM] + nmem]
    cols = ip[ip[H_COLS] + a[A_COL] : ip[H_COLS] + a[A_COL] + ns]
    aggof = ip[ip[H_AGGOF] : ip[H_AGGOF] + ip[H_NB]]
    colstart = ip[ip[H_COLSTART] : ip[H_COLSTART] + ip[H_NB]]
    slot = ip[ip[H_SLOT] : ip[H_SLOT] + ip[H_NB]]
    flags = ip[ip[H_FLAGS] : ip[H_FLAGS] + ip[H_NB]]
    ratio = partition(m, d, ip, fw, s)
    if ratio < SINGULAR_RATIO:
        return SINGULAR
    constraint_map(ip, fw, s)
    X = block(fw, a[A_X], (ns, k))
    zeta = block(fw, a[A_ZETA], ns)
    D = block(fw, a[A_D], (k, k))
    u = block(fw, a[A_U], k)
    W = block(fw, a[A_W], (6, k))
    H = block(fw, a[A_H], (nmem, 6, k))
    UB = block(fw, a[A_UB], (nmem, 6, k))
    # u = X_𝒮ᵀ τ_𝒮 (eq. 36); D = 0; W = 0
    for c in range(k):
        acc = 0.0
        for col in range(ns):
            acc += X[col, c] * tau[cols[col]]
        u[c] = acc
        for c2 in range(k):
            D[c, c2] = 0.0
        for rr in range(6):
            W[rr, c] = 0.0
    # members, base to tips: H_j = jXλ H_λ + S_j X_𝒮[j], ā_j = jXλ ā_λ + S_j ζ_j + c_j
    # (eq. 35); with P_j = I^A_j (complete: its children outside 𝒮 are done):
    # UB_j = P_j H_j, D += H_jᵀ P_j H_j, y_j = P_j ā_j + z_j, u -= H_jᵀ y_j, Q_j = P_j
    for mi in range(nmem):
        j = mem[mi]
        lam = topo[j, 0]
        inside = lam >= 0 and aggof[lam] == s
        ls = slot[lam] if inside else 0
        cs = colstart[j]
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
            for kk in range(topo[j, 5]):
                x = X[cs + kk, c]
                for rr in range(6):
                    H[mi, rr, c] += S[j, rr, kk] * x
        if inside:
            ab = motion_to_child_at(
                Xrel, j, abar[lam, 0], abar[lam, 1], abar[lam, 2],
                abar[lam, 3], abar[lam, 4], abar[lam, 5],
            )  # fmt: skip
            for rr in range(6):
                abar[j, rr] = ab[rr] + C[j, rr]
        else:
            for rr in range(6):
                abar[j, rr] = C[j, rr]
        for kk in range(topo[j, 5]):
            z = zeta[cs + kk]
            for rr in range(6):
                abar[j, rr] += S[j, rr, kk] * z
        for c in range(k):
            for rr in range(6):
                t = 0.0
                for cc in range(6):
                    t += IA[j, rr, cc] * H[mi, cc, c]
                UB[mi, rr, c] = t
                for c2 in range(k):
                    D[c2, c] += H[mi, rr, c2] * t
        inner = (flags[j] & HAS_INNER) != 0
        for rr in range(6):
            t = pA[j, rr]
            for cc in range(6):
                t += IA[j, rr, cc] * abar[j, cc]
                if inner:
                    Q[j, rr, cc] = IA[j, rr, cc]
            Yb[j, rr] = t
            for c in range(k):
                u[c] -= H[mi, rr, c] * t
    # members, tips to base: the composites Q, y, UB moved inward through 𝒮's tree and,
    # from the base bodies, to p (Σ 𝒜ᵀ P 𝒜, Σ 𝒜ᵀ (P ā + z) and W = Σ 𝒜ᵀ P H)
    for mi in range(nmem - 1, -1, -1):
        j = mem[mi]
        lam = topo[j, 0]
        inside = lam >= 0 and aggof[lam] == s
        ls = slot[lam] if inside else 0
        if inside or p >= 0:
            f = force_to_parent_at(Xrel, j, Yb[j, 0], Yb[j, 1], Yb[j, 2], Yb[j, 3], Yb[j, 4],
                                   Yb[j, 5])  # fmt: skip
            tgt = lam if inside else p
            for rr in range(6):
                if inside:
                    Yb[tgt, rr] += f[rr]
                else:
                    pA[tgt, rr] += f[rr]
            src = Q[j] if (flags[j] & HAS_INNER) != 0 else IA[j]
            out = Q[tgt] if inside else IA[tgt]
            if (flags[j] & RIGID) != 0:
                rigid_inertia_to_parent_add(Xrel[j, :3], Xrel[j, 3], src, out)
            else:
                inertia_to_parent_add(Xrel[j, :3], Xrel[j, 3], src, out, TM[j])
        for c in range(k):
            g = force_to_parent_at(
                Xrel, j, UB[mi, 0, c], UB[mi, 1, c], UB[mi, 2, c],
                UB[mi, 3, c], UB[mi, 4, c], UB[mi, 5, c],
            )  # fmt: skip
            for rr in range(6):
                if inside:
                    UB[ls, rr, c] += g[rr]
                else:
                    W[rr, c] += g[rr]
    # D⁻¹ (k × k, symmetric positive definite for a non-singular mass matrix)
    if k > 0 and not invert_spd_inplace(D, k):
        return SINGULAR
    if p >= 0 and k > 0:
        # I^A_p -= W D⁻¹ Wᵀ ;  p^A_p += W D⁻¹ u   (eq. 55)
        WD = block(fw, a[A_TMP], (6, k))
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
            pA[p, rr] += acc
            for cc in range(rr, 6):
                acc = 0.0
                for c in range(k):
                    acc += WD[rr, c] * W[cc, c]
                IA[p, rr, cc] -= acc
                if cc != rr:
                    IA[p, cc, rr] -= acc
    return ratio


@kernel
def aggregate_outward(m, d, ip, fw, s, qdd):
    """Base-to-tips step of aggregated body s (eqs. 56–57): θ̈_R = D⁻¹ (u − Wᵀ a_p),
    θ̈_𝒮 = X_𝒮 θ̈_R + ζ_𝒮 into ``qdd``, the member accelerations a_j into ``d.A``, and
    the size of the accelerations combined, max(|ζ_𝒮|, |X_𝒮[l, c] θ̈_R[c]|), into fw."""
    topo, Xrel, S, A, C = m.topo, d.Xrel, d.S, d.A, d.C
    a = ip[ip[H_AGG] + s * NAGG : ip[H_AGG] + (s + 1) * NAGG]
    p, nmem, ns, k = a[A_PARENT], a[A_NMEM], a[A_NS], a[A_K]
    mem = ip[ip[H_MEM] + a[A_MEM] : ip[H_MEM] + a[A_MEM] + nmem]
    cols = ip[ip[H_COLS] + a[A_COL] : ip[H_COLS] + a[A_COL] + ns]
    X = block(fw, a[A_X], (ns, k))
    zeta = block(fw, a[A_ZETA], ns)
    D = block(fw, a[A_D], (k, k))
    u = block(fw, a[A_U], k)
    W = block(fw, a[A_W], (6, k))
    y = block(fw, a[A_TMP], 2 * k)
    if p >= 0:
        ap0, ap1, ap2, ap3, ap4, ap5 = A[p, 0], A[p, 1], A[p, 2], A[p, 3], A[p, 4], A[p, 5]
    else:
        ap0 = ap1 = ap2 = 0.0
        ap3, ap4, ap5 = -m.gravity[0], -m.gravity[1], -m.gravity[2]
    for c in range(k):
        y[c] = u[c] - (
            W[0, c] * ap0 + W[1, c] * ap1 + W[2, c] * ap2
            + W[3, c] * ap3 + W[4, c] * ap4 + W[5, c] * ap5
        )  # fmt: skip
    for c in range(k):  # θ̈_R
        t = 0.0
        for c2 in range(k):
            t += D[c, c2] * y[c2]
        y[k + c] = t
    scale = 0.0
    for col in range(ns):
        acc = zeta[col]
        scale = max(scale, abs(acc))
        for c in range(k):
            t = X[col, c] * y[k + c]
            scale = max(scale, abs(t))
            acc += t
        qdd[cols[col]] = acc
    fw[a[A_SC]] = scale
    # a_j = jXλ a_λ + c_j + S_j θ̈_j, members in tree order (a_p = −g for the ground)
    for mi in range(nmem):
        j = mem[mi]
        lam = topo[j, 0]
        if lam >= 0:
            am = motion_to_child_at(Xrel, j, A[lam, 0], A[lam, 1], A[lam, 2], A[lam, 3],
                                    A[lam, 4], A[lam, 5])  # fmt: skip
        else:
            am = motion_to_child_at(Xrel, j, ap0, ap1, ap2, ap3, ap4, ap5)
        iv = topo[j, 3]
        for rr in range(6):
            acc = am[rr] + C[j, rr]
            for kk in range(topo[j, 5]):
                acc += S[j, rr, kk] * qdd[iv + kk]
            A[j, rr] = acc


@kernel
def member_forces(m, d, s, mem, cols, colstart, aggof, tau, rho):
    """The joint forces of aggregated body s's members ``mem`` (base to tips), tips to
    base: F_j = P_j a_j + z_j + Σ_{c in 𝒮} cXjᵀ F_c into ``d.F`` (RNEA on 𝒮's tree, the
    outside children entering through P_j and z_j), and ρ = S_𝒮ᵀ F_𝒮 − τ_𝒮 into ``rho``
    in 𝒮's column order (``cols``: 𝒮's coordinates, ``colstart[j]``: member j's first
    position in them).  Shared by ``aggregate_multipliers`` and rcr's ``loop_multipliers``."""
    topo, Xrel, S, A, IA, pA, F = m.topo, d.Xrel, d.S, d.A, d.IA, d.pA, d.F
    nmem = mem.shape[0]
    for mi in range(nmem):
        j = mem[mi]
        f = mat6_vec_at(IA, j, A[j, 0], A[j, 1], A[j, 2], A[j, 3], A[j, 4], A[j, 5])
        for rr in range(6):
            F[j, rr] = f[rr] + pA[j, rr]
    for mi in range(nmem - 1, -1, -1):
        j = mem[mi]
        cs = colstart[j]
        for kk in range(topo[j, 5]):
            t = -tau[cols[cs + kk]]
            for rr in range(6):
                t += S[j, rr, kk] * F[j, rr]
            rho[cs + kk] = t
        lm = topo[j, 0]
        if lm >= 0 and aggof[lm] == s:
            g = force_to_parent_at(Xrel, j, F[j, 0], F[j, 1], F[j, 2], F[j, 3], F[j, 4], F[j, 5])
            for rr in range(6):
                F[lm, rr] += g[rr]


@kernel
def aggregate_multipliers(m, d, ip, fw, s, tau, qdd, lam):
    """Multipliers of aggregated body s's rows into ``lam`` (positions in ``d.rows``), and
    the relative residual of J_𝒮 θ̈_𝒮 = γ_𝒮 on those rows (the acceptance check).

    The joint forces of the members, F_j = P_j a_j + z_j + Σ_{c in 𝒮} cXjᵀ F_c (RNEA on
    𝒮's tree, the outside children entering through P_j and z_j), satisfy
    S_𝒮ᵀ F_𝒮 = τ_𝒮 + J_𝒮ᵀ λ_𝒮 (M q̈ + h = τ + Jᵀλ restricted to θ_𝒮); on the dependent
    columns Y1ᵀ λ_𝒮 = (S_𝒮ᵀ F_𝒮 − τ_𝒮)[dep].  The residual is relative to
    |J_𝒮| max(|θ̈_𝒮|, a) + |γ_𝒮|, a the size of the accelerations combined
    (``aggregate_outward``).
    """
    a = ip[ip[H_AGG] + s * NAGG : ip[H_AGG] + (s + 1) * NAGG]
    nmem, ns, r = a[A_NMEM], a[A_NS], a[A_R]
    if r == 0:
        return 0.0
    mem = ip[ip[H_MEM] + a[A_MEM] : ip[H_MEM] + a[A_MEM] + nmem]
    cols = ip[ip[H_COLS] + a[A_COL] : ip[H_COLS] + a[A_COL] + ns]
    order = ip[ip[H_ORDER] + a[A_COL] : ip[H_ORDER] + a[A_COL] + ns]
    piv = ip[ip[H_PIV] + a[A_PIV] : ip[H_PIV] + a[A_PIV] + r]
    lpos = ip[ip[H_LPOS] + a[A_ROW] : ip[H_LPOS] + a[A_ROW] + r]
    aggof = ip[ip[H_AGGOF] : ip[H_AGGOF] + ip[H_NB]]
    colstart = ip[ip[H_COLSTART] : ip[H_COLSTART] + ip[H_NB]]
    JS = block(fw, a[A_JS], (r, ns))
    gS = block(fw, a[A_GS], r)
    LU = block(fw, a[A_LU], (r, r))
    rho = block(fw, a[A_TMP], ns + r)
    # acceptance: |J_𝒮 θ̈_𝒮 − γ_𝒮|∞ relative to the accelerations combined
    qmax = fw[a[A_SC]]
    for col in range(ns):
        qmax = max(qmax, abs(qdd[cols[col]]))
    res = 0.0
    scale = 0.0
    for i in range(r):
        t = -gS[i]
        jmax = 0.0
        for col in range(ns):
            t += JS[i, col] * qdd[cols[col]]
            jmax = max(jmax, abs(JS[i, col]))
        res = max(res, abs(t))
        scale = max(scale, jmax * qmax + abs(gS[i]))
    member_forces(m, d, s, mem, cols, colstart, aggof, tau, rho)
    # Y1ᵀ λ = ρ[dep]
    y = rho[ns:]
    for i in range(r):
        y[i] = rho[order[i]]
    lu_solve_transpose(LU, r, piv, y)
    # the rows were scaled by 1/σ_i (``loop_jacobian``): λ_i = μ_i / σ_i
    sz = block(fw, a[A_RS], r)
    for i in range(r):
        lam[lpos[i]] = y[i] / sz[i]
    return res / scale if scale > 0.0 else res


# ------------------------------------------------------------------ ordinary bodies
@kernel
def joint_inward(m, d, i, tau):
    """Ordinary tips-to-base step of body i (RBDA eqs. 7.34–7.35); False if Sᵀ I^A S is
    singular.  U = I^A S, D = Sᵀ U, u = τ − Sᵀ p^A; the parent receives
    iXλᵀ (I^A − U D⁻¹ Uᵀ) iXλ and iXλᵀ (p^A + I^a c + U D⁻¹ u)."""
    topo, S, IA, pA, U, Dinv, u, C, TM = m.topo, d.S, d.IA, d.pA, d.U, d.Dinv, d.u, d.C, d.TM
    nvj, iv, lam = topo[i, 5], topo[i, 3], topo[i, 0]
    for kk in range(nvj):
        acc = tau[iv + kk]
        for rr in range(6):
            t = 0.0
            for cc in range(6):
                t += IA[i, rr, cc] * S[i, cc, kk]
            U[i, rr, kk] = t
            acc -= S[i, rr, kk] * pA[i, rr]
        u[i, kk] = acc
    for kk in range(nvj):
        for k2 in range(nvj):
            t = 0.0
            for rr in range(6):
                t += S[i, rr, kk] * U[i, rr, k2]
            Dinv[i, kk, k2] = t
    if nvj > 0 and not invert_spd_inplace(Dinv[i], nvj):
        return False
    if lam < 0:
        return True
    WU = TM[i]  # U D⁻¹, then the scratch of inertia_to_parent_add
    for rr in range(6):
        for kk in range(nvj):
            t = 0.0
            for k2 in range(nvj):
                t += U[i, rr, k2] * Dinv[i, k2, kk]
            WU[rr, kk] = t
    for rr in range(6):
        t = 0.0
        for kk in range(nvj):
            t += WU[rr, kk] * u[i, kk]
        pA[i, rr] += t
        for cc in range(rr, 6):
            t = 0.0
            for kk in range(nvj):
                t += WU[rr, kk] * U[i, cc, kk]
            IA[i, rr, cc] -= t
            if cc != rr:
                IA[i, cc, rr] -= t
    f = mat6_vec_at(IA, i, C[i, 0], C[i, 1], C[i, 2], C[i, 3], C[i, 4], C[i, 5])
    for rr in range(6):
        pA[i, rr] += f[rr]
    inertia_to_parent_add(d.Xrel[i, :3], d.Xrel[i, 3], IA[i], IA[lam], TM[i])
    g = force_to_parent_at(d.Xrel, i, pA[i, 0], pA[i, 1], pA[i, 2], pA[i, 3], pA[i, 4], pA[i, 5])
    for rr in range(6):
        pA[lam, rr] += g[rr]
    return True


@kernel
def joint_outward(m, d, i, qdd):
    """Ordinary base-to-tips step: a' = iXλ a_λ + c, q̈ = D⁻¹ (u − Uᵀ a'), a = a' + S q̈."""
    topo, S, A, C, U, Dinv, u, T1 = m.topo, d.S, d.A, d.C, d.U, d.Dinv, d.u, d.T1
    lam = topo[i, 0]
    if lam >= 0:
        am = motion_to_child_at(d.Xrel, i, A[lam, 0], A[lam, 1], A[lam, 2], A[lam, 3],
                                A[lam, 4], A[lam, 5])  # fmt: skip
    else:
        g = m.gravity
        am = motion_to_child_at(d.Xrel, i, 0.0, 0.0, 0.0, -g[0], -g[1], -g[2])
    for rr in range(6):
        A[i, rr] = am[rr] + C[i, rr]
    nvj, iv = topo[i, 5], topo[i, 3]
    for kk in range(nvj):
        t = u[i, kk]
        for rr in range(6):
            t -= U[i, rr, kk] * A[i, rr]
        T1[i, kk] = t
    for kk in range(nvj):
        t = 0.0
        for k2 in range(nvj):
            t += Dinv[i, kk, k2] * T1[i, k2]
        qdd[iv + kk] = t
    for rr in range(6):
        t = 0.0
        for kk in range(nvj):
            t += S[i, rr, kk] * qdd[iv + kk]
        A[i, rr] += t


# ------------------------------------------------------------------ the kernel
@njit(cache=True, inline="always")  # one call site (its entry / kernel): no library of its own
def embedding_kernel(m, d, ip, fw, q, v, tau, qdd, lam):
    """q̈ (nv, every tree coordinate) and λ (the independent rows, ``d.rows`` order) of a
    closed-loop model by constraint embedding.

    In: the handles ``m``, ``d``, the plan ``ip``, ``fw`` (``EmbeddingPlan``), a state
    ``q`` (nq), ``v`` (nv) and joint forces ``tau`` (nv).  Returns the smallest pivot
    ratio of the Y1 factorisations (> 0) or a status < 0 (``methods.common``).
    """
    # kinematics: poses, S, velocities, c = v ×m S q̇ + Ṡ q̇; closure rows and γ (eq. 58)
    fk_kernel(m, d, q, v)
    bias_accelerations(m, d)
    closure_terms(m, d, q, v, unliteral(True), ip[H_WANTJ] != 0)
    quality, rel, ascale = articulated_pass(m, d, ip, fw, tau, qdd, lam, unliteral(True))
    if quality < 0.0:
        d.diag[DIAG_QUALITY] = 0.0
        return quality
    # iterative refinement where the articulated-body pivots spread over many decades
    # (mass ratios ~1e6: the recursion's cancellations cost up to ~1e-7, as in ABA)
    d.diag[DIAG_REFINED] = 0.0
    pr = pivot_ratio(m, d, ip, fw)
    if rel <= RESIDUAL_TOL and (
        pr < REFINE_PIVOT_RATIO
        or (
            pr < CHECK_PIVOT_RATIO
            and eom_residual(m, d, ip, fw, tau, qdd, lam, d.phi) > REFINE_EOM_TOL
        )
    ):
        ascale = acceleration_scale(m, d, ascale, qdd)
        if refine(m, d, ip, fw, tau, qdd, lam, ascale) < 0:
            d.diag[DIAG_QUALITY] = quality
            d.diag[DIAG_RESIDUAL] = d.diag[DIAG_EOM]
            d.diag[DIAG_ASCALE] = ascale
            return INACCURATE
    return verdict(m, d, quality, rel, ascale, qdd, lam)


@kernel
def articulated_start(m, d, bias):
    """The start of the articulated-body inward sweep for every body: I^A = I and
    p^A = v ×* I v (body frame, RBDA Table 7.1), or p^A = 0 when not ``bias`` (a
    correction solve); shared by embedding and RCR."""
    IA, pA, V, inertia = d.IA, d.pA, d.V, m.inertia
    for i in range(m.nb):
        if bias:
            v0, v1, v2, v3, v4, v5 = V[i, 0], V[i, 1], V[i, 2], V[i, 3], V[i, 4], V[i, 5]
            h0, h1, h2, h3, h4, h5 = mat6_vec_at(inertia, i, v0, v1, v2, v3, v4, v5)
            pA[i, 0] = v1 * h2 - v2 * h1 + v4 * h5 - v5 * h4
            pA[i, 1] = v2 * h0 - v0 * h2 + v5 * h3 - v3 * h5
            pA[i, 2] = v0 * h1 - v1 * h0 + v3 * h4 - v4 * h3
            pA[i, 3] = v1 * h5 - v2 * h4
            pA[i, 4] = v2 * h3 - v0 * h5
            pA[i, 5] = v0 * h4 - v1 * h3
        else:
            for rr in range(6):
                pA[i, rr] = 0.0
        for rr in range(6):
            for cc in range(6):
                IA[i, rr, cc] = inertia[i, rr, cc]


@kernel
def articulated_pass(m, d, ip, fw, tau, qdd, lam, bias):
    """The recursion of ``embedding_kernel`` on the kinematics in ``d``: tips to base
    (ordinary joints, aggregated bodies at their heads), base to tips, then the
    multipliers.  ``bias``: start from p^A = v ×* I v (else 0: the velocity products
    ``d.C``, gravity and γ are then whatever ``d`` holds, zero for a correction).
    Returns (quality, rel, ascale): the smallest Y1 pivot ratio (or a status < 0),
    the largest relative residual of J_𝒮 θ̈_𝒮 = γ_𝒮 and the acceleration scale."""
    nb = m.nb
    agg = ip[ip[H_AGG] : ip[H_AGG] + ip[H_NA] * NAGG]
    aggof = ip[ip[H_AGGOF] : ip[H_AGGOF] + nb]
    articulated_start(m, d, bias)
    # tips to base: ordinary joints, and each aggregated body at its head
    quality = 1.0
    for i in range(nb - 1, -1, -1):
        s = aggof[i]
        if s < 0:
            if not joint_inward(m, d, i, tau):
                return SINGULAR, 0.0, 0.0
        elif agg[s * NAGG + A_HEAD] == i:
            st = aggregate_inward(m, d, ip, fw, s, tau)
            if st < 0.0:
                return st, 0.0, 0.0
            quality = min(quality, st)
    # base to tips
    for i in range(nb):
        s = aggof[i]
        if s < 0:
            joint_outward(m, d, i, qdd)
        elif agg[s * NAGG + A_HEAD] == i:
            aggregate_outward(m, d, ip, fw, s, qdd)
    # multipliers and the acceptance check, aggregated body by aggregated body
    rel = 0.0
    ascale = 0.0
    for s in range(ip[H_NA]):
        rel = max(rel, aggregate_multipliers(m, d, ip, fw, s, tau, qdd, lam))
        ascale = max(ascale, fw[agg[s * NAGG + A_SC]])
    return quality, rel, ascale


@kernel
def pivot_ratio(m, d, ip, fw):
    """min / max of the articulated pivots of the last pass: 1 / (D⁻¹)_kk of the ordinary
    joints (``d.Dinv``) and of the aggregated bodies' D (k × k, its inverse in fw);
    1 without coordinates.  The analogue of ``methods.common.aba_pivot_ratio``."""
    agg = ip[ip[H_AGG] : ip[H_AGG] + ip[H_NA] * NAGG]
    aggof = ip[ip[H_AGGOF] : ip[H_AGGOF] + ip[H_NB]]
    lo, hi = 1e300, 0.0
    for i in range(m.nb):
        s = aggof[i]
        if s < 0:
            for kk in range(m.topo[i, 5]):
                p = 1.0 / d.Dinv[i, kk, kk]
                lo = min(lo, p)
                hi = max(hi, p)
        elif agg[s * NAGG + A_HEAD] == i:
            k = agg[s * NAGG + A_K]
            D = block(fw, agg[s * NAGG + A_D], (k, k))
            for c in range(k):
                p = 1.0 / D[c, c]
                lo = min(lo, p)
                hi = max(hi, p)
    return lo / hi if hi > 0.0 else 1.0


@kernel
def acceleration_scale(m, d, ascale, qdd):
    """max(ascale, |q̈|∞, |a_i|∞ over the bodies): the accelerations a solve combined."""
    for j in range(m.nv):
        ascale = max(ascale, abs(qdd[j]))
    for i in range(m.nb):
        for rr in range(6):
            ascale = max(ascale, abs(d.A[i, rr]))
    return ascale


@kernel
def open_residual(m, d, qdd, r1):
    """The start of an ``eom_residual`` (embedding's, rcr's): M q̈ + h into ``r1`` (the
    RNEA on the kinematics in ``d``) and ``d.tauc`` zeroed for Jᵀλ."""
    rnea_from_kinematics(m, d, as_input(qdd), as_input(d.fext[:0]), r1)
    d.tauc[:] = 0.0


@kernel
def close_residual(m, d, tau, r1):
    """The end of an ``eom_residual`` (embedding's, rcr's): with M q̈ + h in ``r1`` (the
    RNEA) and Jᵀλ in ``d.tauc``, r1 ← τ + Jᵀλ − M q̈ − h; returns |r1|∞ relative to the
    forces that cancel in it, max(|τ + Jᵀλ|∞, |M q̈ + h|∞, the joint wrenches |F_i|∞)."""
    jt = d.tauc
    res = 0.0
    scale = 0.0
    for i in range(m.nb):
        for rr in range(6):
            scale = max(scale, abs(d.F[i, rr]))
    for i in range(m.nv):
        f = tau[i] + jt[i]
        scale = max(scale, abs(f), abs(r1[i]))
        r1[i] = f - r1[i]
        res = max(res, abs(r1[i]))
    return res / scale if scale > 0.0 else res


@kernel
def eom_residual(m, d, ip, fw, tau, qdd, lam, r1):
    """r1 = τ + Jᵀλ - M q̈ - h on the kinematics in ``d`` (the RNEA, O(n), no M, and Jᵀλ
    from the aggregated bodies' own J_𝒮 blocks, ``loop_jacobian``); returns |r1|∞
    relative to the size of the forces that cancel in it, max(|τ + Jᵀλ|∞, |M q̈ + h|∞,
    the joint wrenches |F_i|∞ the RNEA projects).  Jᵀλ is not taken from λ's closure
    loads: carried through the tree they are the transpose of J only to rounding (they
    cancel in the cut bodies' common ancestors to eps·|λ|; when they were placed from
    world positions, a universal joint 2.2e-13 m off a free body's origin left a
    refinement measuring with them converged to another system, q̈ 2.5e-8 off).
    Overwrites ``A``, ``F`` and ``tauc``."""
    open_residual(m, d, qdd, r1)
    jt = d.tauc
    for s in range(ip[H_NA]):
        a = ip[ip[H_AGG] + s * NAGG : ip[H_AGG] + (s + 1) * NAGG]
        ns, r = a[A_NS], a[A_R]
        if r == 0:
            continue
        JS = block(fw, a[A_JS], (r, ns))
        cols = ip[ip[H_COLS] + a[A_COL] : ip[H_COLS] + a[A_COL] + ns]
        lpos = ip[ip[H_LPOS] + a[A_ROW] : ip[H_LPOS] + a[A_ROW] + r]
        sz = block(fw, a[A_RS], r)  # J_𝒮's rows scaled by 1/σ_i (``loop_jacobian``)
        for i in range(r):
            li = lam[lpos[i]] * sz[i]
            for c in range(ns):
                jt[cols[c]] += JS[i, c] * li
    return close_residual(m, d, tau, r1)


@njit(cache=True, inline="always")  # one call site (its entry / kernel): no library of its own
def refine(m, d, ip, fw, tau, qdd, lam, scale):
    """Iterative refinement of (q̈, λ): for the residual of the equations of motion
    r1 = τ + Jᵀλ - M q̈ - h (``eom_residual``), the correction (δq̈, δλ) with
    M δq̈ = r1 + Jᵀ δλ, J δq̈ = 0 is the same recursion (``articulated_pass``) with r1 as
    joint forces and no velocity products, gravity or γ (held aside meanwhile: C in
    ``d.fext``, γ's rows in ``d.tauc``, g in registers; restored after).  Up to
    ``MAX_REFINE`` steps until the correction is at rounding level; then the residual
    is checked again: above ``EOM_TOL`` (into ``d.diag[DIAG_EOM]``) or diverging
    corrections return -1 (the runner falls back, or raises with the residual).
    Returns the steps taken.  Workspace: ``d.phi`` (r1), ``d.x`` (δq̈), ``d.lam`` (δλ)."""
    r = d.nrows
    rows, gamma, keep_g = d.rows, d.gamma, d.tauc
    r1, dq, dl = d.phi, d.x, d.lam[:r]
    code, prev = REFINE_GO_ON, 0.0
    for step in range(MAX_REFINE):
        eom_residual(m, d, ip, fw, tau, qdd, lam, r1)
        # the correction solve: no velocity products, no gravity, J δq̈ = 0
        for a in range(r):
            keep_g[a] = gamma[rows[a]]
            gamma[rows[a]] = 0.0
        g0, g1, g2 = hold_bias(m, d)
        # r1 typed as the entry's τ (as_input): one compiled articulated_pass, not two
        st, _, _ = articulated_pass(m, d, ip, fw, as_input(r1), dq, dl, unliteral(False))
        for a in range(r):
            gamma[rows[a]] = keep_g[a]
        restore_bias(m, d, g0, g1, g2)
        code, prev = take_step(d, st, step, prev, scale, dq, dl, qdd, lam)
        if code != REFINE_GO_ON:
            break
    return -1 if code < 0 else eom_verdict(d, eom_residual(m, d, ip, fw, tau, qdd, lam, r1), code)


@kernel
def hold_bias(m, d):
    """Before a refinement's correction solve (embedding's, rcr's): the velocity products
    ``d.C`` held in ``d.fext`` and zeroed, gravity zeroed; returns gravity (g0, g1, g2)
    for ``restore_bias``."""
    C, keep_c, g = d.C, d.fext, m.gravity
    for i in range(m.nb):
        for rr in range(6):
            keep_c[i, rr] = C[i, rr]
            C[i, rr] = 0.0
    g0, g1, g2 = g[0], g[1], g[2]
    g[0] = g[1] = g[2] = 0.0
    return g0, g1, g2


@kernel
def restore_bias(m, d, g0, g1, g2):
    """After the correction solve: gravity and ``d.C`` as ``hold_bias`` found them."""
    C, keep_c, g = d.C, d.fext, m.gravity
    g[0], g[1], g[2] = g0, g1, g2
    for i in range(m.nb):
        for rr in range(6):
            C[i, rr] = keep_c[i, rr]


@njit(cache=True, inline="always")
def take_step(d, st, step, prev, scale, dq, dl, qdd, lam):
    """``take_correction`` after a correction solve that returned status ``st``: (-1, prev)
    if that solve failed."""
    if st < 0.0:
        return -1, prev
    return take_correction(
        d, step, prev, scale, dq.shape[0], dl.shape[0], dq, dl, qdd, lam, STALL_TOL
    )


@njit(cache=True, inline="always")
def eom_verdict(d, res, steps):
    """The end of a refinement (embedding's, rcr's): the residual of the equations of motion
    ``res`` into ``d.diag[DIAG_EOM]``; ``steps`` if it is at most ``EOM_TOL``, else -1."""
    d.diag[DIAG_EOM] = res
    if not res <= EOM_TOL:
        return -1
    return steps


@kernel
def verdict(m, d, quality, rel, ascale, qdd, lam):
    """The status of an aggregated-body solve (embedding, rcr): the diagnostics written
    (quality, closure residual ``rel``, the acceleration scale ``ascale`` widened by q̈
    and the body accelerations), NONFINITE_OUTPUT, INACCURATE or ``quality``."""
    # the runner checks dropped rows against |J| ascale + |γ|: the recursion also combined
    # the body accelerations (which carry −g from the base)
    A = d.A
    for j in range(m.nv):
        ascale = max(ascale, abs(qdd[j]))
    for i in range(m.nb):
        for rr in range(6):
            ascale = max(ascale, abs(A[i, rr]))
    d.diag[DIAG_QUALITY] = quality
    d.diag[DIAG_RESIDUAL] = rel
    d.diag[DIAG_ASCALE] = ascale
    for j in range(m.nv):
        if not np.isfinite(qdd[j]):
            return NONFINITE_OUTPUT
    for j in range(d.nrows):
        if not np.isfinite(lam[j]):
            return NONFINITE_OUTPUT
    if not rel <= RESIDUAL_TOL:
        return INACCURATE
    return quality


def embedding_entry(ctx, pbuf, q, v, tau, qdd, lam):
    """``embedding_kernel`` on a Data's buffer and the plan's buffer, inputs checked."""
    m, d, ip, fw, st = checked_plan(ctx, pbuf, q, v, tau)
    return st if st < 0.0 else embedding_kernel(m, d, ip, fw, q, v, tau, qdd, lam)


ENTRY = method_entry(embedding_entry, planned=True)


@entry
def partition_entry(ctx, pbuf, q):
    """Positions only: every aggregated body's J_𝒮 and partition at ``q``; the smallest
    pivot ratio of the Y1 factorisations (``partition_at``)."""
    m, d = handles(ctx)
    ip, fw = plan_views(pbuf)
    fk_kernel(m, d, q, q[:0])
    closure_terms(m, d, q, q[:0], unliteral(False), unliteral(False))
    worst = 1.0
    for s in range(ip[H_NA]):
        worst = min(worst, partition(m, d, ip, fw, s))
    return worst


PARTITION = Entry(partition_entry, types.float64, BUF, BUF, IN)


def bind(model, d):
    """The ``ld.forward_dynamics`` call of constraint embedding on ``d`` for its current
    independent rows: ``(q, v, tau, qdd, lam) -> quality > 0 or a status < 0``.

    Constraint embedding applies to every model: any set of closures and couplings
    aggregates into a tree (``loopdyn.topology.aggregation``); loops that share bodies
    merge into one aggregated body, whose cost grows with the cube of its size.  The
    dense J is only read when rows were dropped as redundant.
    """
    plan = plan_for(model, d)
    if d.nrows < model.m:
        d.ensure_dense()
    return partial(ENTRY.compile(), d.ctx, plan.buf)


# ------------------------------------------------------------------ the partition at q
class Partition:
    """The partition of one aggregated body's loop Jacobian at a configuration.

    ``coordinates`` (θ_𝒮, indices into v), ``rows`` (all its model rows), ``rank`` r
    (its independent rows at q), ``independent`` (θ_R) and ``dependent`` (indices into
    v, as the kernel chooses them), ``condition`` (2-norm condition number of Y1).
    """

    __slots__ = ("condition", "coordinates", "dependent", "independent", "rank", "rows")

    def __init__(self, coordinates, rows, rank, dependent, independent, condition):
        self.coordinates = tuple(int(c) for c in coordinates)
        self.rows = tuple(int(r) for r in rows)
        self.rank = int(rank)
        self.dependent = tuple(int(c) for c in dependent)
        self.independent = tuple(int(c) for c in independent)
        self.condition = float(condition)


def partition_at(model, q):
    """The :class:`Partition` of every aggregated body of ``model`` at configuration ``q``.

    The independent rows are those of ``constraint_rank`` at q; the dependent columns
    are chosen as the kernel chooses them at its first call (complete pivoting on
    J_𝒮, actuated columns kept independent when possible, again without that
    preference if Y1 is poorly conditioned).
    """
    from loopdyn.kinematics.closures import constraint_rank
    from loopdyn.validation import configuration

    q = configuration(model, q)
    d = model.create_data()
    rows = constraint_rank(model, q, data=d).independent if model.m else np.zeros(0, np.int64)
    plan = EmbeddingPlan(model, rows)
    PARTITION.call(d.ctx, plan.buf, q)
    out = []
    for s in range(len(plan.groups)):
        r = int(plan.agg[s, A_R])
        cols = np.array(plan.columns[s], dtype=np.int64)
        order = plan.column_order(s)
        JS = plan.loop_jacobian(s)
        cond = np.linalg.cond(JS[:, order[:r]]) if r else 1.0
        out.append(Partition(cols, plan.rows[s], r, cols[order[:r]], cols[order[r:]], cond))
    return out


def aggregation(model, q=None):
    """The aggregated tree of ``model`` (Jain Sec. 4.2), with its coordinates at ``q``
    (``ld.aggregation``).

    ``q`` (default ``model.q0``) is the configuration at which each aggregated body's
    loop Jacobian J_𝒮 is partitioned (``partition_at``): its independent rows (rank),
    the dependent coordinates (a square, best-conditioned block Y1, found by column
    pivoting that prefers the actuated coordinates as independent ones) and the
    independent θ_R.  Returns a :class:`loopdyn.topology.aggregation.Aggregation`
    (``build_aggregation``); ``print()`` it for a summary.
    """
    from loopdyn.validation import model_arg

    model = model_arg(model)
    return build_aggregation(model, partition_at(model, model.q0 if q is None else q))


__all__ = [
    "ENTRY",
    "EmbeddingPlan",
    "Partition",
    "aggregation",
    "bind",
    "partition_at",
    "plan_for",
]
