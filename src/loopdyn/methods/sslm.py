"""Subsystem-level Lagrange multipliers (SSLM), eqs. (13)–(46) of the reduced-order paper.

The spanning forest is cut into v subsystems (the trees hanging from the ground,
``loopdyn.topology.mechanism``) and u loops (the closures).  With the subsystem GIMs
I_j, the J blocks J_{i,j} (O unless loop i meets subsystem j) and φ_j = τ_j - h_j:

    q̈_j = I_j⁻¹ (φ_j + J_jᵀ λ) = φ̂_j + Î_jᵀ λ                      (19)–(21)
    𝓘 λ = Ψ̄,   𝓘_{r,s} = Σ_j J_{r,j} I_j⁻¹ J_{s,j}ᵀ,
                Ψ̄_i = Ψ_i - Σ_j J_{i,j} φ̂_j,   Ψ = γ = -J̇q̇             (23)–(25)

Only subsystem-level factorisations are used, never the system-level inverse:
I_j = L_jᵀ D_j L_j, factored from the leaves with the sparsity of the
subsystem's tree (no fill); with Y_{i,j} = J_{i,j} L_j⁻¹ and z_j = D_j⁻¹ L_j⁻ᵀ φ_j,
𝓘^{rs}_j = Y_{r,j} D_j⁻¹ Y_{s,j}ᵀ and J_{i,j} φ̂_j = Y_{i,j} z_j, products formed
only over the coordinates on the cut bodies' paths to the root.  The GICM 𝓘 is
assembled only on its non-vanishing blocks (loops sharing a subsystem) and
solved by block Gaussian elimination (block Cholesky) in a minimum-degree order of
the loop graph — for a chain of loops, end to end as in eqs. (34)–(36) and
(45)–(46) — with the pivot blocks factored, not inverted (``_chol_block``).
Then each subsystem's q̈_j = I_j⁻¹ (φ_j + J_jᵀλ) = L_j⁻¹ (z_j + D_j⁻¹ Y_jᵀλ) comes
from the factors already formed (``accelerations``): the subsystems are independent
at that stage (``subsystem_accelerations(..., parallel=True)`` applies λ as external
wrenches on the cut bodies and runs one ABA per subsystem in parallel threads).
``lambda_stage`` isolates the λ computation of SLM and SSLM for timing.

Everything symbolic (subsystem ranges, block pattern, elimination order, fill)
is computed once per (model, independent rows) in Python (``SSLMPlan``) and
packed into one int64 array; the per-call work is one compiled kernel over
preallocated buffers (``SSLMWork``, kept on the ``Data`` object).

One module (~1,400 lines), for a reason: its plan, kernels and inspection entries share
the packed plan's private offsets (``_o``, ``_f`` and the section names), and
``gicm_assemble`` / ``gicm_solve`` carry unrolled paths for the 2- and 3-row blocks of
the common planar and spherical cut joints (the products in registers set SSLM's
per-call time); what it shares with the other methods is in ``methods.common``.
"""

from functools import partial

import numpy as np
from numba import njit, prange, types

from loopdyn.errors import SingularityError
from loopdyn.kernels.numba_internals import (
    BUF,
    IN,
    OUT,
    Entry,
    as_input,
    block,
    entry,
    unliteral,
)
from loopdyn.kernels.views import handles
from loopdyn.kinematics.closures import bias_accelerations, closure_terms, constraint_kernel
from loopdyn.kinematics.frames import fk_kernel
from loopdyn.methods.common import (
    DIAG_REFINED,
    INACCURATE,
    MAX_REFINE,
    PIVOT_TOL,
    REFINE_ABA_RATIO,
    REFINE_GO_ON,
    REFINE_RATIO,
    SINGULAR,
    STALL_TOL,
    accept,
    checked_handles,
    checked_plan,
    closure_loads,
    kkt_residual,
    max_abs,
    method_entry,
    plan_buffer,
    plan_views,
    subtract_rows,
    system_terms,
    take_correction,
)
from loopdyn.methods.slm import slm_multipliers
from loopdyn.topology.mechanism import elimination_order, topology
from loopdyn.tree.aba import aba_bodies
from loopdyn.tree.crba import composite_inertias, crba_columns
from loopdyn.tree.rnea import rnea_from_kinematics
from loopdyn.validation import configuration, model_arg, vector, workspace

# ------------------------------------------------------------------ the plan
# header of the packed int64 plan: counts, then section offsets
_NS, _NL, _NE, _NBLK, _NT, _NNB, _NUP, _NR, _NB = range(9)
_SECTIONS = (
    "sub", "topo", "lp", "lrow", "lout", "pr", "bk", "tm", "nbp", "nbl", "upp", "upl",
    "dpar", "sup", "ix", "pd", "td", "kd", "nd", "ud",
)  # fmt: skip
# float workspace sections (offsets stored in the plan header too)
_FSECTIONS = ("phi", "zeros", "I", "Y", "z", "G", "W", "psi", "lam", "dinv")
_SEC0 = 9  # then the boundaries of the int sections
_FSEC0 = _SEC0 + len(_SECTIONS) + 1  # then the boundaries of the float sections
_HDR = _FSEC0 + len(_FSECTIONS) + 1


class SSLMPlan:
    """Symbolic structure of SSLM for one model and one set of independent rows.

    Loops are renumbered by their position in the elimination order (``order``:
    position -> closure index).  Packed into ``ip`` (int64) with sections:

    - ``sub`` (ns, 7): body range b0, b1, first q, first v, n_j, offset of I_j
      (n_j × n_j, row-major) in the I buffer, nq_j
    - ``topo`` (nb, 6): ``model.topo`` with parents, q and v offsets made local to
      each subsystem (so the tree kernels run on one subsystem's slices)
    - ``lp`` (nl, 6): closure index, p (rows), first internal row, diagonal block,
      first incidence pair, number of pairs (1 or 2)
    - ``lrow`` / ``lout`` (r,): global row and position in ``rows`` of each internal row
    - ``pr`` (ne, 5): loop, subsystem, offset of Y_{i,j} (p × n_j) in the Y buffer,
      offset and length of its support in ``sup``
    - ``bk`` (nblk, 3): row loop, column loop (row >= column), offset in G and W
    - ``tm`` (nt, 5): GICM term: block, pair of the row loop, pair of the column
      loop, offset and length of the common support in ``ix``
    - ``nbp``/``nbl``: per loop k, the blocks (a, k), a > k, of the filled pattern
    - ``upp``/``upl``: per loop k, the Schur updates (target, (a, k), (b, k))
    - ``dpar`` (nv,): parent of each coordinate within its subsystem (-1: root),
      the sparsity of I_j's LᵀL factor (RBDA Sec. 6.5: no fill on a tree)
    - ``sup``: the support of each Y_{i,j} (local coordinates on the paths of the
      cut bodies to the root, ascending; J_{i,j} L_j⁻¹ keeps it); ``ix``: the
      common support of the two pairs of each GICM term
    - ``pd``, ``td``, ``kd``, ``nd``, ``ud``: the same, flattened for the kernels
      (every offset an operation needs in one row: no chains of dependent loads):
      pairs (p, n_j, v0, I offset, Y offset, support offset, support length),
      terms (G offset, p_r, p_s, n_j, Y_r offset, Y_s offset, v0, common support
      offset and length, diagonal?, first row of loop r), loops (p, first row,
      pivot block offset, neighbour range, update range), neighbours ((a, k)
      block offset, p_a, first row of a), updates (target, (a, k), (b, k) block
      offsets, p_a, p_b)
    """

    def __init__(self, model, rows):
        topo = topology(model)
        rows = np.asarray(rows, dtype=np.int64)
        self.rows = rows
        ns = len(topo.subsystems)
        nb = model.nbodies
        # subsystems: contiguous body and coordinate ranges
        sub = np.zeros((ns, 7), dtype=np.int64)
        tloc = np.array(model.topo, dtype=np.int64)
        ioff = 0
        for j, s in enumerate(topo.subsystems):
            b0, b1 = s.bodies[0], s.bodies[-1] + 1
            n = s.nv
            sub[j] = (
                b0,
                b1,
                s.q_slice.start,
                s.v_slice.start,
                n,
                ioff,
                s.q_slice.stop - s.q_slice.start,
            )
            ioff += n * n
            for i in range(b0, b1):
                if tloc[i, 0] >= 0:
                    tloc[i, 0] -= b0
                tloc[i, 2] -= s.q_slice.start
                tloc[i, 3] -= s.v_slice.start
        # coordinate parents within each subsystem (the tree sparsity of I_j)
        dpar = np.full(model.nv, -1, dtype=np.int64)
        last = np.full(nb, -1, dtype=np.int64)  # local index of each body's last coordinate
        for s in topo.subsystems:
            v0 = s.v_slice.start
            for i in s.bodies:
                lam = model.parent[i]
                up = last[lam] if lam >= 0 else -1
                iv, nvj = int(model.topo[i, 3]) - v0, int(model.topo[i, 5])
                for k in range(nvj):
                    dpar[v0 + iv + k] = iv + k - 1 if k else up
                last[i] = iv + nvj - 1 if nvj else up

        def path_support(b, j):
            v0 = topo.subsystems[j].v_slice.start
            out = set()
            while b >= 0:
                iv = int(model.topo[b, 3]) - v0
                out.update(range(iv, iv + int(model.topo[b, 5])))
                b = model.parent[b]
            return out

        # loops: the closures with at least one independent row
        pos_of_row = {int(r): t for t, r in enumerate(rows)}
        sel = {}
        for k in range(model.nc):
            rr = [r for r in range(model.closure_rows[k].start, model.closure_rows[k].stop)
                  if r in pos_of_row]  # fmt: skip
            if rr:
                sel[k] = rr
        closures = sorted(sel)
        g = topo.loop_graph().subgraph(closures).copy()
        sizes = {k: len(sel[k]) for k in closures}
        order, fill = elimination_order(g, sizes)
        self.order = tuple(order)
        self.fill = tuple(fill)
        pos = {k: x for x, k in enumerate(order)}
        nl = len(order)
        lp = np.zeros((nl, 6), dtype=np.int64)
        lrow, lout = [], []
        pr, supports = [], []
        yoff = 0
        for x, k in enumerate(order):
            lp[x, 0], lp[x, 1], lp[x, 2] = k, len(sel[k]), len(lrow)
            lrow.extend(sel[k])
            lout.extend(pos_of_row[r] for r in sel[k])
            lp[x, 4] = len(pr)
            loop = topo.loops[k]
            for j in loop.subsystems:
                supp = set()
                for b in (loop.body_a, loop.body_b):
                    if b >= 0 and topo.subsystem_of_body[b] == j:
                        supp |= path_support(b, j)
                supports.append(sorted(supp))
                pr.append((x, j, yoff, 0, len(supp)))
                yoff += len(sel[k]) * sub[j, 4]
            lp[x, 5] = len(loop.subsystems)
        pr = np.array(pr, dtype=np.int64).reshape(-1, 5)
        sup = []
        for e, lst in enumerate(supports):
            pr[e, 3] = len(sup)
            sup.extend(lst)
        # GICM blocks: lower triangle (row position >= column position) of the filled pattern
        edges = {(max(pos[a], pos[b]), min(pos[a], pos[b])) for a, b in g.edges}
        filled = edges | {(max(pos[a], pos[b]), min(pos[a], pos[b])) for a, b in fill}
        blocks = sorted(filled | {(x, x) for x in range(nl)}, key=lambda t: (t[1], t[0]))
        bidx = {}
        bk = np.zeros((len(blocks), 3), dtype=np.int64)
        goff = 0
        for b, (ra, ca) in enumerate(blocks):
            bidx[(ra, ca)] = b
            bk[b] = (ra, ca, goff)
            goff += lp[ra, 1] * lp[ca, 1]
        for x in range(nl):
            lp[x, 3] = bidx[(x, x)]
        # terms of eq. (25): one per subsystem shared by the row and the column loop
        tm, ix = [], []
        for (ra, ca), b in sorted(bidx.items(), key=lambda t: t[1]):
            for er in range(lp[ra, 4], lp[ra, 4] + lp[ra, 5]):
                for ec in range(lp[ca, 4], lp[ca, 4] + lp[ca, 5]):
                    if pr[er, 1] == pr[ec, 1]:
                        common = sorted(set(supports[er]) & set(supports[ec]))
                        tm.append((b, er, ec, len(ix), len(common)))
                        ix.extend(common)
        # elimination: neighbours (a, k), a > k, and Schur updates, in the filled pattern
        nbp, nbl, upp, upl = [0], [], [0], []
        for x in range(nl):
            nbrs = sorted(a for (a, c) in filled if c == x)
            nbl.extend((bidx[(a, x)], a) for a in nbrs)
            nbp.append(len(nbl))
            for ia, a in enumerate(nbrs):
                for b in nbrs[: ia + 1]:
                    upl.append((bidx[(a, b)], bidx[(a, x)], bidx[(b, x)]))
            upp.append(len(upl))
        self.nloops, self.nsub = nl, ns
        self.blocks = blocks
        self.block_index = bidx
        self.terms = tm
        self.sizes = dict(I=ioff, Y=yoff, G=goff, r=len(lrow))
        parts = {
            "sub": sub, "topo": tloc, "lp": lp, "lrow": np.array(lrow, np.int64),
            "lout": np.array(lout, np.int64), "pr": pr, "bk": bk,
            "tm": np.array(tm, np.int64).reshape(-1, 5), "nbp": np.array(nbp, np.int64),
            "nbl": np.array(nbl, np.int64).reshape(-1, 2), "upp": np.array(upp, np.int64),
            "upl": np.array(upl, np.int64).reshape(-1, 3), "dpar": dpar,
            "sup": np.array(sup, np.int64), "ix": np.array(ix, np.int64),
        }  # fmt: skip
        # flattened descriptors for the kernels
        tm_a = np.array(tm, np.int64).reshape(-1, 5)
        pd = np.array(
            [(lp[pr[e, 0], 1], sub[pr[e, 1], 4], sub[pr[e, 1], 3], sub[pr[e, 1], 5], pr[e, 2],
              pr[e, 3], pr[e, 4]) for e in range(len(pr))], np.int64,
        ).reshape(-1, 7)  # fmt: skip
        td = np.array(
            [(bk[b, 2], lp[bk[b, 0], 1], lp[bk[b, 1], 1], sub[pr[er, 1], 4], pr[er, 2], pr[ec, 2],
              sub[pr[er, 1], 3], xo, xl, int(bk[b, 0] == bk[b, 1]), lp[bk[b, 0], 2])
             for b, er, ec, xo, xl in tm_a], np.int64,
        ).reshape(-1, 11)  # fmt: skip
        kd = np.array(
            [(lp[x, 1], lp[x, 2], bk[lp[x, 3], 2], nbp[x], nbp[x + 1], upp[x], upp[x + 1])
             for x in range(nl)], np.int64,
        ).reshape(-1, 7)  # fmt: skip
        nd = np.array([(bk[b, 2], lp[a, 1], lp[a, 2]) for b, a in nbl], np.int64).reshape(-1, 3)
        ud = np.array(
            [(bk[tg, 2], bk[sa, 2], bk[sb, 2], lp[bk[sa, 0], 1], lp[bk[sb, 0], 1])
             for tg, sa, sb in upl], np.int64,
        ).reshape(-1, 5)  # fmt: skip
        parts.update(pd=pd, td=td, kd=kd, nd=nd, ud=ud)
        head = [ns, nl, len(pr), len(blocks), len(tm), len(nbl), len(upl), len(lrow), nb]
        bounds, o = [], _HDR
        for name in _SECTIONS:
            bounds.append(o)
            o += parts[name].size
        bounds.append(o)
        nv, r = model.nv, len(lrow)
        fsz = dict(phi=nv, zeros=nv, I=ioff, Y=yoff, z=nv, G=goff, W=goff, psi=r, lam=r, dinv=nv)
        fb, fo = [], 0
        for name in _FSECTIONS:
            fb.append(fo)
            fo += fsz[name]
        fb.append(fo)
        # one float64 buffer for the kernels: [len(ip) | ip (int64) | fw (workspace)]
        self.buf, ip, self.fw = plan_buffer(o, fo)
        ip[:9] = head
        ip[_SEC0:_FSEC0] = bounds
        ip[_FSEC0:_HDR] = fb
        for k, name in enumerate(_SECTIONS):
            ip[bounds[k] : bounds[k + 1]] = parts[name].reshape(-1)
        self.ip = ip
        self.parts = parts
        self.sub, self.tloc = sub, tloc
        self.foff = {n: (fb[k], fb[k + 1]) for k, n in enumerate(_FSECTIONS)}
        self.fsize = fo


def plan_for(model, d, rows=None):
    """The ``SSLMPlan`` of ``d``'s current independent rows (or of ``rows``), cached on ``d``."""
    rows = d.rows[: d.nrows] if rows is None else rows
    key = ("sslm", rows.tobytes())
    p = d.plans.get(key)
    if p is None:
        p = d.plans[key] = SSLMPlan(model, np.array(rows))
    return p


# ------------------------------------------------------------------ kernels
# The kernels index the packed plan ``ip`` and the float workspace ``fw`` directly
# (offset arithmetic); the one view, each I_j's ``block`` handed to ``tree.crba``'s
# ``crba_columns`` by ``subsystem_gims``, costs a few stores in an entry (compiled
# without reference counting).
_SUB, _TOPO, _LP, _LROW, _LOUT, _PR, _BK, _TM, _NBP, _NBL, _UPP, _UPL = range(12)
_DPAR, _SUP, _IX, _PD, _TD, _KD, _ND, _UD = range(12, 20)
_PHI, _ZEROS, _I, _Y, _Z, _G, _W, _PSI, _LAM, _DINV = range(10)


# _o and _f are inlined: called with ~20 constant section numbers, each a literal type,
# they were compiled once per constant (22 small libraries, ~0.9 s on an empty cache)
@njit(cache=True, inline="always")
def _o(ip, s):
    """Start of int section s in ``ip``."""
    return ip[_SEC0 + s]


@njit(cache=True, inline="always")
def _f(ip, s):
    """Start of float section s in ``fw``."""
    return ip[_FSEC0 + s]


@njit(cache=True)
def jacobian_blocks(m, d, ip, fw):
    """The non-vanishing blocks J_{i,j} (eq. 16), row-major p_i × n_j, into fw's Y section.

    Copied from the dense J of ``kinematics.closures.closure_terms`` (``d.J``, which
    the acceptance check reads anyway): block (i, j) is loop i's rows restricted to
    subsystem j's coordinates, J's row being zero outside the joints on the paths of
    the cut bodies (a coupling row: -ratio at joint a's coordinate, +1 at joint b's).
    Forming the rows once and slicing them costs less than walking the paths twice.
    """
    J = d.J
    osub, olp, olrow, opr = _o(ip, _SUB), _o(ip, _LP), _o(ip, _LROW), _o(ip, _PR)
    fy = _f(ip, _Y)
    for e in range(ip[_NE]):  # the (loop x, subsystem j) pairs
        x, j, off = ip[opr + 5 * e], ip[opr + 5 * e + 1], fy + ip[opr + 5 * e + 2]
        p, t0 = ip[olp + 6 * x + 1], ip[olp + 6 * x + 2]
        n, v0 = ip[osub + 7 * j + 4], ip[osub + 7 * j + 3]
        for t in range(p):
            rr = ip[olrow + t0 + t]
            for c in range(n):
                fw[off + t * n + c] = J[rr, v0 + c]


@njit(cache=True)
def subsystem_gims(m, d, ip, fw):
    """The subsystem GIMs I_j (eq. 7), row-major n_j × n_j in fw's I section.

    The composite-rigid-body algorithm (RBDA Table 6.2) over the forest, from the
    poses ``Xrel`` and ``S`` already in ``d`` (``fk_kernel``): composite inertias
    (``tree.crba.composite_inertias``, in ``d.IA``), then each subsystem's columns
    (``crba_columns`` on its body range) written into its own block: no system-level M.
    """
    osub, fI = _o(ip, _SUB), _f(ip, _I)
    composite_inertias(m, d)
    for j in range(ip[_NS]):
        b0, b1, v0, n = (
            ip[osub + 7 * j],
            ip[osub + 7 * j + 1],
            ip[osub + 7 * j + 3],
            ip[osub + 7 * j + 4],
        )
        o = fI + ip[osub + 7 * j + 5]
        for y in range(n * n):
            fw[o + y] = 0.0
        crba_columns(m, d, b0, b1, v0, block(fw, o, (n, n)))


@njit(cache=True)
def _chol_block(G, go, p, C, co):
    """C[co:] = the Cholesky factor of the symmetric p × p block G[go:] (lower triangle
    read): G = C Cᵀ, C lower triangular, row-major p × p, stored with its diagonal
    inverted (C[co + r p + r] = 1 / C_rr: the solves multiply) and its strict upper
    triangle neither written nor read as part of the factor.

    The pivot blocks are factored, not inverted: the Schur updates are then Gram
    products 𝓘̃_{a,b} -= Z_a Z_bᵀ of Z_a = 𝓘̃_{a,k} C⁻ᵀ, whose rounding is bounded by the
    diagonal blocks (Z_a Z_aᵀ <= 𝓘̃_{a,a}), where with an explicit inverse it is
    |𝓘̃_{a,k}| |D_k⁻¹| |𝓘̃_{k,b}|, cond(D_k) times more (census seed 11 case 271: a
    weld's 3 × 3 pivot of cond 4.5e5, det / Π diag 8e-9, left its neighbours' Schur
    complement off by 1.2e-5 against a smallest eigenvalue of 7e-5 with the adjugate,
    3.6e-13 with C, and refinement did not converge in 6 steps; issue 41).
    Returns det / Π diag = Π_r C_rr² / G_rr, in (0, 1] for an SPD block (0: a pivot not
    positive: singular or indefinite)."""
    rat = 1.0
    for r in range(p):
        for c in range(r + 1):
            s = G[go + r * p + c]
            for k in range(c):
                s -= C[co + r * p + k] * C[co + c * p + k]
            if c < r:
                C[co + r * p + c] = s * C[co + c * p + c]
            else:
                if not s > 0.0:
                    return 0.0
                rat *= s / G[go + r * p + r]
                C[co + r * p + r] = 1.0 / np.sqrt(s)
    return rat


@njit(cache=True)
def _scaled_rcond(G, go, p, C, co):
    """1 / (‖Ĝ‖₁ ‖Ĉ⁻¹‖_F²) of the symmetric p × p block G[go:] (lower triangle) scaled to
    a unit diagonal, Ĝ_rc = G_rc / √(G_rr G_cc) = Ĉ Ĉᵀ with Ĉ = S⁻¹ C (S = diag √G_rr,
    C the block's Cholesky factor at C[co:], diagonal inverted, ``_chol_block``): O(p³).
    A lower bound of Ĝ's smallest eigenvalue (‖Ĝ⁻¹‖₂ = ‖Ĉ⁻¹‖₂² <= ‖Ĉ⁻¹‖_F², and Ĝ's
    largest is <= ‖Ĝ‖₁ and >= 1), hence of the block's pivots over its smallest diagonal
    entry; 0 where it is not finite.  Column c of Ĉ⁻¹ by forward substitution
    (x_c = S_c / C_cc, x_i = -Σ_k C_ik x_k / C_ii: the row scale cancels), its entries
    below the diagonal kept in the strict upper triangle of C's row c (free: C is lower
    triangular)."""
    n1 = 0.0
    for c in range(p):
        sc = np.sqrt(G[go + c * p + c])
        t1 = 0.0
        for r in range(p):
            t1 += abs(G[go + max(r, c) * p + min(r, c)]) / (np.sqrt(G[go + r * p + r]) * sc)
        n1 = max(n1, t1)
    fro = 0.0
    for c in range(p):
        xc = np.sqrt(G[go + c * p + c]) * C[co + c * p + c]
        fro += xc * xc
        for i in range(c + 1, p):
            s = C[co + i * p + c] * xc
            for k in range(c + 1, i):
                s += C[co + i * p + k] * C[co + c * p + k]
            xi = -s * C[co + i * p + i]
            C[co + c * p + i] = xi
            fro += xi * xi
    rc = 1.0 / (n1 * fro)
    return rc if rc > 0.0 else 0.0


@njit(cache=True, inline="always")
def _forward(C, co, p, x, xo):
    """x[xo:xo+p] ← C⁻¹ x for the lower-triangular p × p factor C[co:] (``_chol_block``:
    diagonal inverted)."""
    for r in range(p):
        s = x[xo + r]
        for k in range(r):
            s -= C[co + r * p + k] * x[xo + k]
        x[xo + r] = s * C[co + r * p + r]


@njit(cache=True, inline="always")
def _backward(C, co, p, x, xo):
    """x[xo:xo+p] ← C⁻ᵀ x for the lower-triangular p × p factor C[co:] (``_chol_block``:
    diagonal inverted)."""
    for r in range(p - 1, -1, -1):
        s = x[xo + r]
        for k in range(r + 1, p):
            s -= C[co + k * p + r] * x[xo + k]
        x[xo + r] = s * C[co + r * p + r]


@njit(cache=True)
def gicm_assemble(ip, fw, gamma):
    """Factor the I_j, form Y_{i,j} = J_{i,j} L_j⁻¹, the GICM blocks and Ψ̄ (eqs. 19–25).

    In (sections of ``fw``): I_j (I), J_{i,j} (Y) and φ (phi), overwritten by the
    factors, Y_{i,j} and L_j⁻ᵀ φ_j; and ``gamma`` = Ψ (m).  Out: the GICM blocks 𝓘_{r,s}
    (G, row-major, lower block triangle in the elimination order), Ψ̄ (psi,
    internal row order), z_j = D_j⁻¹ L_j⁻ᵀ φ_j (z), D_j⁻¹ (dinv).  Returns the
    smallest min/max pivot of the I_j factorisations (0: an I_j is not positive
    definite).

    I_j = L_jᵀ D_j L_j is factored from the leaves (RBDA Sec. 6.5, LTDL), L_j unit
    lower triangular with the sparsity of the subsystem's tree; then
    J_{r,j} I_j⁻¹ J_{s,j}ᵀ = Y_{r,j} D_j⁻¹ Y_{s,j}ᵀ and J_{i,j} I_j⁻¹ φ_j = Y_{i,j} z_j,
    and Y_{i,j} keeps the support of J_{i,j} (the coordinates on the cut bodies'
    paths to the root): only there are products formed.
    """
    osub, olrow, odpar = _o(ip, _SUB), _o(ip, _LROW), _o(ip, _DPAR)
    osup, oix, opd, otd = _o(ip, _SUP), _o(ip, _IX), _o(ip, _PD), _o(ip, _TD)
    fphi, fI, fY, fz = _f(ip, _PHI), _f(ip, _I), _f(ip, _Y), _f(ip, _Z)
    fG, fpsi, fdinv = _f(ip, _G), _f(ip, _PSI), _f(ip, _DINV)
    dmin = 1e300
    dmax = 0.0
    for j in range(ip[_NS]):
        v0, n, off = ip[osub + 7 * j + 3], ip[osub + 7 * j + 4], fI + ip[osub + 7 * j + 5]
        dp = odpar + v0
        # I_j = L_jᵀ D_j L_j (L_j unit lower), leaves first: subsystem level only (eq. 20)
        for k in range(n - 1, -1, -1):
            dk = fw[off + k * n + k]
            if not dk > 0.0:
                return 0.0
            dmin = min(dmin, dk)
            dmax = max(dmax, dk)
            inv = 1.0 / dk
            fw[fdinv + v0 + k] = inv
            # φ_k has its descendants' updates (all > k): z_k = D_k⁻¹ (L_j⁻ᵀ φ_j)_k (so
            # that φ̂_j = I_j⁻¹ φ_j = L_j⁻¹ z_j) in the same walk, L_ka = I_ka / D_k stored
            # once a's updates are done (later ancestors' chains do not hold a): the
            # operations of the separate scaling and solve passes, in their order
            zk = fw[fphi + v0 + k]
            a = ip[dp + k]
            while a >= 0:
                lka = fw[off + k * n + a] * inv
                c = a
                while c >= 0:
                    fw[off + a * n + c] -= lka * fw[off + k * n + c]
                    c = ip[dp + c]
                fw[off + k * n + a] = lka
                fw[fphi + v0 + a] -= lka * zk
                a = ip[dp + a]
            fw[fz + v0 + k] = zk * inv
    # Y_{i,j} = J_{i,j} L_j⁻¹: Lᵀ yᵀ = J rowᵀ, leaves first, on the support only
    for e in range(ip[_NE]):
        d = opd + 7 * e
        p, n, v0, off, yo = ip[d], ip[d + 1], ip[d + 2], fI + ip[d + 3], fY + ip[d + 4]
        so, sl = osup + ip[d + 5], ip[d + 6]
        dp = odpar + v0
        if p == 2:  # the planar cut joints' two rows at once
            for u in range(sl - 1, -1, -1):
                i = ip[so + u]
                y0 = fw[yo + i]
                y1 = fw[yo + n + i]
                a = ip[dp + i]
                while a >= 0:
                    lia = fw[off + i * n + a]
                    fw[yo + a] -= lia * y0
                    fw[yo + n + a] -= lia * y1
                    a = ip[dp + a]
            continue
        if p == 3:  # a ball closure's three rows at once
            for u in range(sl - 1, -1, -1):
                i = ip[so + u]
                y0 = fw[yo + i]
                y1 = fw[yo + n + i]
                y2 = fw[yo + 2 * n + i]
                a = ip[dp + i]
                while a >= 0:
                    lia = fw[off + i * n + a]
                    fw[yo + a] -= lia * y0
                    fw[yo + n + a] -= lia * y1
                    fw[yo + 2 * n + a] -= lia * y2
                    a = ip[dp + a]
            continue
        for u in range(sl - 1, -1, -1):
            i = ip[so + u]
            a = ip[dp + i]
            while a >= 0:
                lia = fw[off + i * n + a]
                for t in range(p):
                    fw[yo + t * n + a] -= lia * fw[yo + t * n + i]
                a = ip[dp + a]
    # GICM blocks 𝓘_{r,s} = Σ_j Y_{r,j} D_j⁻¹ Y_{s,j}ᵀ over the subsystems both loops meet,
    # and Ψ̄_i = Ψ_i - Σ_j J_{i,j} φ̂_j = γ_i - Σ_j Y_{i,j} z_j in the same pass (eq. 25)
    for y in range(fG, fG + ip[_FSEC0 + _G + 1] - ip[_FSEC0 + _G]):
        fw[y] = 0.0
    for t in range(ip[_NR]):
        fw[fpsi + t] = gamma[ip[olrow + t]]
    for x in range(ip[_NT]):
        d = otd + 11 * x
        go, pa, pc, n = fG + ip[d], ip[d + 1], ip[d + 2], ip[d + 3]
        yr, yc, do, zo = fY + ip[d + 4], fY + ip[d + 5], fdinv + ip[d + 6], fz + ip[d + 6]
        xo, xl = oix + ip[d + 7], ip[d + 8]
        if ip[d + 9]:
            # diagonal block (one pair): lower triangle mirrored (exactly symmetric), and Ψ̄
            to = fpsi + ip[d + 10]
            if pa == 2:
                a00 = a10 = a11 = b0 = b1 = 0.0
                for u in range(xl):
                    i = ip[xo + u]
                    r0, r1, zi, di = fw[yr + i], fw[yr + n + i], fw[zo + i], fw[do + i]
                    w0, w1 = r0 * di, r1 * di
                    a00 += w0 * r0
                    a10 += w1 * r0
                    a11 += w1 * r1
                    b0 += r0 * zi
                    b1 += r1 * zi
                fw[go] += a00
                fw[go + 1] += a10
                fw[go + 2] += a10
                fw[go + 3] += a11
                fw[to] -= b0
                fw[to + 1] -= b1
            elif pa == 3:
                a00 = a10 = a11 = a20 = a21 = a22 = b0 = b1 = b2 = 0.0
                for u in range(xl):
                    i = ip[xo + u]
                    r0, r1, r2, zi = fw[yr + i], fw[yr + n + i], fw[yr + 2 * n + i], fw[zo + i]
                    di = fw[do + i]
                    w0, w1, w2 = r0 * di, r1 * di, r2 * di
                    a00 += w0 * r0
                    a10 += w1 * r0
                    a11 += w1 * r1
                    a20 += w2 * r0
                    a21 += w2 * r1
                    a22 += w2 * r2
                    b0 += r0 * zi
                    b1 += r1 * zi
                    b2 += r2 * zi
                fw[go] += a00
                fw[go + 1] += a10
                fw[go + 2] += a20
                fw[go + 3] += a10
                fw[go + 4] += a11
                fw[go + 5] += a21
                fw[go + 6] += a20
                fw[go + 7] += a21
                fw[go + 8] += a22
                fw[to] -= b0
                fw[to + 1] -= b1
                fw[to + 2] -= b2
            else:
                for t in range(pa):
                    for s in range(t + 1):
                        acc = 0.0
                        for u in range(xl):
                            i = ip[xo + u]
                            acc += fw[yr + t * n + i] * fw[do + i] * fw[yr + s * n + i]
                        fw[go + t * pa + s] += acc
                        if s < t:
                            fw[go + s * pa + t] += acc
                    acc = 0.0
                    for u in range(xl):
                        i = ip[xo + u]
                        acc += fw[yr + t * n + i] * fw[zo + i]
                    fw[to + t] -= acc
        elif pa == 2 and pc == 2:  # 2×2 off-diagonal block: one pass over the common support
            a00 = a01 = a10 = a11 = 0.0
            for u in range(xl):
                i = ip[xo + u]
                di = fw[do + i]
                r0, r1 = fw[yr + i] * di, fw[yr + n + i] * di
                c0, c1 = fw[yc + i], fw[yc + n + i]
                a00 += r0 * c0
                a01 += r0 * c1
                a10 += r1 * c0
                a11 += r1 * c1
            fw[go] += a00
            fw[go + 1] += a01
            fw[go + 2] += a10
            fw[go + 3] += a11
        elif pa == 3 and pc == 3:
            a00 = a01 = a02 = a10 = a11 = a12 = a20 = a21 = a22 = 0.0
            for u in range(xl):
                i = ip[xo + u]
                di = fw[do + i]
                r0, r1, r2 = fw[yr + i] * di, fw[yr + n + i] * di, fw[yr + 2 * n + i] * di
                c0, c1, c2 = fw[yc + i], fw[yc + n + i], fw[yc + 2 * n + i]
                a00 += r0 * c0
                a01 += r0 * c1
                a02 += r0 * c2
                a10 += r1 * c0
                a11 += r1 * c1
                a12 += r1 * c2
                a20 += r2 * c0
                a21 += r2 * c1
                a22 += r2 * c2
            fw[go] += a00
            fw[go + 1] += a01
            fw[go + 2] += a02
            fw[go + 3] += a10
            fw[go + 4] += a11
            fw[go + 5] += a12
            fw[go + 6] += a20
            fw[go + 7] += a21
            fw[go + 8] += a22
        else:
            for t in range(pa):
                for s in range(pc):
                    acc = 0.0
                    for u in range(xl):
                        i = ip[xo + u]
                        acc += fw[yr + t * n + i] * fw[do + i] * fw[yc + s * n + i]
                    fw[go + t * pc + s] += acc
    return dmin / dmax if dmax > 0.0 else 1.0


@njit(cache=True)
def gicm_solve(ip, fw):
    """𝓘 λ = Ψ̄ by block Cholesky in the elimination order (eqs. 34–36, 45–46, 51–52).

    Forward, loop k after loop k: the pivot block's factor 𝓘̃_{k,k} = C_k C_kᵀ
    (``_chol_block``, into the W section at the block's offset), y_k = C_k⁻¹ Ψ̃_k (in
    psi), Z_{a,k} = 𝓘̃_{a,k} C_k⁻ᵀ (W section) and the Schur updates 𝓘̃_{a,b} -= Z_{a,k}
    Z_{b,k}ᵀ, Ψ̃_a -= Z_{a,k} y_k on its later neighbours a, b only (the sparsity of the
    loop graph plus its precomputed fill) — the paper's block elimination with
    D_k⁻¹ = C_k⁻ᵀ C_k⁻¹ applied through the factor, never formed (``_chol_block`` says
    why).  Back: λ_k = C_k⁻ᵀ (y_k - Σ_a Z_{a,k}ᵀ λ_a) (``gicm_back``).
    Sections G and psi are overwritten, λ goes to lam (internal row order).
    Returns the pivot ratio (0: singular): the smaller of the pivot blocks' det / Π diag
    (or, where that is below REFINE_RATIO for a block of p > 2 rows, the larger
    lower bound of the reciprocal condition number of the block scaled to a unit
    diagonal, ``_scaled_rcond``) and of min_k (that ratio · min_r D_k,rr / 𝓘_rr) over
    the pivot blocks D_k (𝓘_rr: the diagonal before elimination), a lower bound of
    min/max of the LDLᵀ pivots of 𝓘 scaled to a unit diagonal (an SPD block's pivots are
    at most its diagonal entries, their product its determinant; the scaled matrix's
    largest diagonal entry is 1): as SLM's Cholesky ratio, it sees pivots that spread
    across blocks, each block alone well conditioned (hypothesis seed 20261170: 1×1
    blocks, det / Π diag = 1, cond 𝓘 3e10, λ unrefined 1.2e-8 off), and it judges each
    row at its own scale.
    """
    okd, ond, oud = _o(ip, _KD), _o(ip, _ND), _o(ip, _UD)
    fG, fW, fpsi, flam = _f(ip, _G), _f(ip, _W), _f(ip, _PSI), _f(ip, _LAM)
    nl = ip[_NL]
    ratio = 1.0
    lo = 1e300
    # each row at its own scale: the diagonal 𝓘_rr before any elimination, kept in the
    # lam section (written only by ``gicm_back``, after the forward pass); the bound
    # below is that of the GICM scaled to a unit diagonal, whose block LDLᵀ is this one
    # scaled (elimination commutes with a diagonal scaling), so rows of very different
    # sizes do not read as lost pivots (Cassie's shin-spring rows: 𝓘_rr from 3e-6 to
    # 2e5, the unscaled bound 7e-16 refused every state)
    for k in range(nl):
        d = okd + 7 * k
        p, t0, bo = ip[d], ip[d + 1], ip[d + 2]
        for r in range(p):
            fw[flam + t0 + r] = fw[fG + bo + r * p + r]
    for k in range(nl):
        d = okd + 7 * k
        p, t0, bo = ip[d], ip[d + 1], ip[d + 2]
        dmin = 1e300
        for r in range(p):
            g0 = fw[flam + t0 + r]
            g = fw[fG + bo + r * p + r]
            dmin = min(dmin, g / g0 if g0 > 0.0 else 0.0)
        do = fW + bo
        rk = _chol_block(fw, fG + bo, p, fw, do)
        if p > 2 and 0.0 < rk < REFINE_RATIO:
            # det / Π diag is the product of the block's p relative pivots: tiny for a
            # well-conditioned block of many rows (a weld's 5 × 5 block of cond 8e4 gave
            # 3e-13, and the test below refused well-conditioned states: census seed
            # 11, issue 41); there its scaled condition number decides
            rk = max(rk, _scaled_rcond(fw, fG + bo, p, fw, do))
        if not rk > 1e-14:
            return 0.0
        ratio = min(ratio, rk)
        lo = min(lo, rk * dmin)
        # y_k = C_k⁻¹ Ψ̃_k
        _forward(fw, do, p, fw, fpsi + t0)
        for x in range(ip[d + 3], ip[d + 4]):
            e = ond + 3 * x
            go, pa, ta = fG + ip[e], ip[e + 1], fpsi + ip[e + 2]
            wo = go - fG + fW
            # Z_{a,k} = 𝓘̃_{a,k} C_k⁻ᵀ (pa × p, row t: C_k z = g_t), then Ψ̃_a -= Z_{a,k} y_k
            if p == 2:
                i00, c10, i11 = fw[do], fw[do + 2], fw[do + 3]  # 1 / C_00, C_10, 1 / C_11
                y0, y1 = fw[fpsi + t0], fw[fpsi + t0 + 1]
                for t in range(pa):
                    z0 = fw[go + 2 * t] * i00
                    z1 = (fw[go + 2 * t + 1] - c10 * z0) * i11
                    fw[wo + 2 * t] = z0
                    fw[wo + 2 * t + 1] = z1
                    fw[ta + t] -= z0 * y0 + z1 * y1
                continue
            if p == 3:  # a ball closure's three rows: the loops below, unrolled
                for t in range(pa):
                    acc2 = 0.0
                    for s in range(3):
                        acc = fw[go + t * 3 + s]
                        for m in range(s):
                            acc -= fw[do + s * 3 + m] * fw[wo + t * 3 + m]
                        acc *= fw[do + s * 3 + s]
                        fw[wo + t * 3 + s] = acc
                        acc2 += acc * fw[fpsi + t0 + s]
                    fw[ta + t] -= acc2
                continue
            for t in range(pa):
                acc2 = 0.0
                for s in range(p):
                    acc = fw[go + t * p + s]
                    for m in range(s):
                        acc -= fw[do + s * p + m] * fw[wo + t * p + m]
                    acc *= fw[do + s * p + s]
                    fw[wo + t * p + s] = acc
                    acc2 += acc * fw[fpsi + t0 + s]
                fw[ta + t] -= acc2
        for x in range(ip[d + 5], ip[d + 6]):
            e = oud + 5 * x
            go, wa, gb, pa, pb = fG + ip[e], fW + ip[e + 1], fG + ip[e + 2], ip[e + 3], ip[e + 4]
            wb = gb - fG + fW
            # 𝓘̃_{a,b} -= Z_{a,k} Z_{b,k}ᵀ
            if p == 2 and pa == 2 and pb == 2:
                wa0, wa1, wa2, wa3 = fw[wa], fw[wa + 1], fw[wa + 2], fw[wa + 3]
                wb0, wb1, wb2, wb3 = fw[wb], fw[wb + 1], fw[wb + 2], fw[wb + 3]
                fw[go] -= wa0 * wb0 + wa1 * wb1
                fw[go + 1] -= wa0 * wb2 + wa1 * wb3
                fw[go + 2] -= wa2 * wb0 + wa3 * wb1
                fw[go + 3] -= wa2 * wb2 + wa3 * wb3
                continue
            if p == 3 and pa == 3 and pb == 3:  # ball closures: the loops below, unrolled
                for t in range(3):
                    for s in range(3):
                        acc = 0.0
                        for m in range(3):
                            acc += fw[wa + t * 3 + m] * fw[wb + s * 3 + m]
                        fw[go + t * 3 + s] -= acc
                continue
            for t in range(pa):
                for s in range(pb):
                    acc = 0.0
                    for m in range(p):
                        acc += fw[wa + t * p + m] * fw[wb + s * p + m]
                    fw[go + t * pb + s] -= acc
    gicm_back(ip, fw)
    return min(ratio, lo)


@njit(cache=True)
def gicm_back(ip, fw):
    """Back substitution of the block Cholesky (eq. 46): λ_k = C_k⁻ᵀ (y_k - Σ_a
    Z_{a,k}ᵀ λ_a), loops last to first, from the pivot factors C_k and Z blocks
    ``gicm_solve`` left in ``fw`` and the eliminated y (psi); λ into the lam section."""
    okd, ond = _o(ip, _KD), _o(ip, _ND)
    fW, fpsi, flam = _f(ip, _W), _f(ip, _PSI), _f(ip, _LAM)
    for k in range(ip[_NL] - 1, -1, -1):
        d = okd + 7 * k
        p, t0, do = ip[d], ip[d + 1], fW + ip[d + 2]
        if p == 2:
            l0, l1 = fw[fpsi + t0], fw[fpsi + t0 + 1]
            for x in range(ip[d + 3], ip[d + 4]):
                e = ond + 3 * x
                wo, pa, ta = fW + ip[e], ip[e + 1], flam + ip[e + 2]
                for m in range(pa):
                    lm = fw[ta + m]
                    l0 -= fw[wo + m * 2] * lm
                    l1 -= fw[wo + m * 2 + 1] * lm
            l1 *= fw[do + 3]
            fw[flam + t0 + 1] = l1
            fw[flam + t0] = (l0 - fw[do + 2] * l1) * fw[do]
            continue
        for t in range(p):
            fw[flam + t0 + t] = fw[fpsi + t0 + t]
        for x in range(ip[d + 3], ip[d + 4]):
            e = ond + 3 * x
            wo, pa, ta = fW + ip[e], ip[e + 1], flam + ip[e + 2]
            for t in range(p):
                acc = 0.0
                for m in range(pa):
                    acc += fw[wo + m * p + t] * fw[ta + m]
                fw[flam + t0 + t] -= acc
        _backward(fw, do, p, fw, flam + t0)


@njit(cache=True)
def gicm_resolve(ip, fw):
    """𝓘 λ = Ψ̄ for a new Ψ̄ (psi section) with the factors of the last ``gicm_solve``:
    the forward elimination y_k = C_k⁻¹ Ψ̃_k, Ψ̃_a -= Z_{a,k} y_k (eqs. 34–36), then
    ``gicm_back``.  O(size of the filled block pattern); λ into the lam section."""
    okd, ond = _o(ip, _KD), _o(ip, _ND)
    fW, fpsi = _f(ip, _W), _f(ip, _PSI)
    for k in range(ip[_NL]):
        d = okd + 7 * k
        p, t0 = ip[d], ip[d + 1]
        _forward(fw, fW + ip[d + 2], p, fw, fpsi + t0)
        for x in range(ip[d + 3], ip[d + 4]):
            e = ond + 3 * x
            wo, pa, ta = fW + ip[e], ip[e + 1], fpsi + ip[e + 2]
            for t in range(pa):
                acc = 0.0
                for s in range(p):
                    acc += fw[wo + t * p + s] * fw[fpsi + t0 + s]
                fw[ta + t] -= acc
    gicm_back(ip, fw)


@njit(cache=True)
def sslm_lambda(ip, fw, gamma):
    """The λ stage alone: from I_j, J_{i,j} and φ (in ``fw``) and γ to λ (internal order).

    Overwrites the I and Y sections of ``fw`` with their factors.  Returns the GICM's
    pivot ratio (``gicm_solve``; 0: singular; -1: an I_j is not positive definite).
    """
    if not gicm_assemble(ip, fw, gamma) > 0.0:
        return -1.0
    return gicm_solve(ip, fw)


@njit(cache=True)
def sslm_terms(m, d, ip, fw, q, v, tau):
    """Subsystem-level terms: φ = τ - h (eq. 20), γ = Ψ (eq. 29), J_{i,j} (eq. 16), I_j (eq. 7).

    One kinematics pass (poses, S, velocities, velocity products) shared by the
    RNEA, the closure rows and the CRBA.  ``v.size == 0``: positions only (no φ,
    no γ).  The dense J (m × nv) of ``constraints`` is formed first (the acceptance
    check and the dropped rows read it) and the J_{i,j} are its blocks.
    """
    nv = m.nv
    fphi = _f(ip, _PHI)
    with_v = v.shape[0] > 0
    fk_kernel(m, d, q, v)
    if with_v:
        # φ = τ - C q̇ - g over the whole forest (the φ_j are its slices)
        phi = fw[fphi : fphi + nv]
        rnea_from_kinematics(m, d, as_input(d.zeros), as_input(d.fext[:0]), phi)
        for i in range(nv):
            phi[i] = tau[i] - phi[i]
        bias_accelerations(m, d)  # overwrites the RNEA's accelerations
    # the cut joints' frames, world row vectors and γ = -J̇ q̇
    closure_terms(m, d, q, v, with_v, unliteral(True))
    jacobian_blocks(m, d, ip, fw)
    subsystem_gims(m, d, ip, fw)


@njit(cache=True, inline="always")  # one call site (its entry / kernel): no library of its own
def sslm_kernel(m, d, ip, fw, q, v, tau, qdd, lam):
    """SSLM forward dynamics: λ on the independent rows (``d.rows`` order) and q̈ (nv).

    Returns the smallest pivot ratio (> 0) or a status < 0 (``methods.common``).
    """
    r = d.nrows
    sslm_terms(m, d, ip, fw, q, v, tau)
    ratio = sslm_lambda(ip, fw, d.gamma)
    if not ratio > PIVOT_TOL:
        d.diag[0] = ratio
        return SINGULAR
    olout, flam = _o(ip, _LOUT), _f(ip, _LAM)
    for t in range(ip[_NR]):
        lam[ip[olout + t]] = fw[flam + t]
    # q̈_j = φ̂_j + Î_jᵀ λ (eqs. 17, 19–21): each subsystem a tree under the loads Jᵀλ,
    # solved with the factors L_jᵀ D_j L_j in hand (no second recursion over the forest);
    # |φ̂|∞, the size of the terms q̈ combines, for the acceptance check
    eta, iratio = accelerations(ip, fw, d.x, qdd)
    # refinement where the block elimination (its Schur complements square J's
    # conditioning: REFINE_RATIO, as SLM's) or the tree solve (the D_j pivots, as ABA's
    # articulated pivots: REFINE_ABA_RATIO) may have lost accuracy
    d.diag[DIAG_REFINED] = 0.0
    if ratio < REFINE_RATIO or iratio < REFINE_ABA_RATIO:
        if refine(m, d, ip, fw, tau, qdd, lam, r, max(eta, max_abs(qdd))) < 0:
            return INACCURATE
    return accept(m, d, ratio, qdd, lam, r, eta)


@njit(cache=True)
def accelerations(ip, fw, w, qdd):
    """q̈_j = I_j⁻¹ (φ_j + J_jᵀ λ) = L_j⁻¹ (z_j + D_j⁻¹ Y_jᵀ λ) for every subsystem (eqs.
    17, 19–21), from what ``gicm_assemble`` and ``gicm_solve`` left in ``fw``: z_j, D_j⁻¹,
    the unit lower L_j (tree sparsity), Y_{i,j} = J_{i,j} L_j⁻¹ on its support and λ
    (internal row order).  ``w`` (nv) is scratch: w = Yᵀλ, pair by pair on the
    supports, then φ̂ = L⁻¹ z (the unconstrained accelerations, solved in the same pass).
    Returns (|φ̂|∞, the size of the terms q̈ combines; min/max of the D_j pivots over the
    forest, the I_j's pivot ratio for the refinement test)."""
    osub, olp, opr, osup = _o(ip, _SUB), _o(ip, _LP), _o(ip, _PR), _o(ip, _SUP)
    odpar = _o(ip, _DPAR)
    fI, fY, fz, fdinv, flam = _f(ip, _I), _f(ip, _Y), _f(ip, _Z), _f(ip, _DINV), _f(ip, _LAM)
    for i in range(w.shape[0]):
        w[i] = 0.0
    for e in range(ip[_NE]):  # the (loop x, subsystem j) pairs
        x, j = ip[opr + 5 * e], ip[opr + 5 * e + 1]
        yo, so, sl = fY + ip[opr + 5 * e + 2], osup + ip[opr + 5 * e + 3], ip[opr + 5 * e + 4]
        p, t0 = ip[olp + 6 * x + 1], flam + ip[olp + 6 * x + 2]
        n, v0 = ip[osub + 7 * j + 4], ip[osub + 7 * j + 3]
        if p == 3:  # a ball closure's three rows: the loop below, unrolled
            l0, l1, l2 = fw[t0], fw[t0 + 1], fw[t0 + 2]
            for u in range(sl):
                i = ip[so + u]
                w[v0 + i] += fw[yo + i] * l0 + fw[yo + n + i] * l1 + fw[yo + 2 * n + i] * l2
            continue
        for u in range(sl):
            i = ip[so + u]
            acc = 0.0
            for t in range(p):
                acc += fw[yo + t * n + i] * fw[t0 + t]
            w[v0 + i] += acc
    lo, hi, eta = 1e300, 0.0, 0.0
    for j in range(ip[_NS]):
        v0, n, off = ip[osub + 7 * j + 3], ip[osub + 7 * j + 4], fI + ip[osub + 7 * j + 5]
        dp = odpar + v0
        # L q̈ = z + D⁻¹ w and L φ̂ = z, ancestors (smaller local indices) first; φ̂_k
        # replaces w_k once read (only ancestors' φ̂ are read after)
        for k in range(n):
            dk = fw[fdinv + v0 + k]
            lo, hi = min(lo, dk), max(hi, dk)
            z = fw[fz + v0 + k]
            s, h = z + dk * w[v0 + k], z
            a = ip[dp + k]
            while a >= 0:
                lka = fw[off + k * n + a]
                s -= lka * qdd[v0 + a]
                h -= lka * w[v0 + a]
                a = ip[dp + a]
            qdd[v0 + k] = s
            w[v0 + k] = h
            eta = max(eta, abs(h))
    return eta, (lo / hi if hi > 0.0 else 1.0)


@njit(cache=True)
def subsystem_solve(ip, fw, x):
    """x ← I⁻¹ x subsystem by subsystem (eqs. 19–21), I_j = L_jᵀ D_j L_j from the factors
    ``gicm_assemble`` left in ``fw``: Lᵀ w = x (leaves first), w ← D⁻¹ w, L y = w
    (roots first), on the tree sparsity of each L_j.  ``x`` (nv) in place."""
    osub, odpar = _o(ip, _SUB), _o(ip, _DPAR)
    fI, fdinv = _f(ip, _I), _f(ip, _DINV)
    for j in range(ip[_NS]):
        v0, n, off = ip[osub + 7 * j + 3], ip[osub + 7 * j + 4], fI + ip[osub + 7 * j + 5]
        dp = odpar + v0
        for i in range(n - 1, -1, -1):
            xi = x[v0 + i]
            a = ip[dp + i]
            while a >= 0:
                x[v0 + a] -= fw[off + i * n + a] * xi
                a = ip[dp + a]
            x[v0 + i] = xi * fw[fdinv + v0 + i]
        for k in range(n):
            s = x[v0 + k]
            a = ip[dp + k]
            while a >= 0:
                s -= fw[off + k * n + a] * x[v0 + a]
                a = ip[dp + a]
            x[v0 + k] = s


@njit(cache=True, inline="always")  # one call site (its entry / kernel): no library of its own
def refine(m, d, ip, fw, tau, qdd, lam, r, scale):
    """Iterative refinement of (q̈, λ) with the factors of the solve (the I_j's LᵀDL and
    the GICM's block LDLᵀ in ``fw``), as SLM's ``refine``: for the residuals
    r1 = τ + Jᵀλ - M q̈ - h (``common.kkt_residual``) and r2 = γ - J q̈ on the
    independent rows, δη = I⁻¹ r1 (19), 𝓘 δλ = r2 - J δη (23)–(25), δq̈ = δη + I⁻¹ Jᵀ δλ
    (21).  Returns the steps taken, or -1 if the corrections grow (an inaccurate solve).
    Workspace: ``d.phi``, ``d.x``, ``d.rhs`` (free in SSLM) and fw's psi and lam."""
    n, rows, J = m.nv, d.rows, d.J
    r1, dq, dl = d.phi, d.x, d.rhs[:r]
    olout, fpsi, flam = _o(ip, _LOUT), _f(ip, _PSI), _f(ip, _LAM)
    prev = 0.0
    for step in range(MAX_REFINE):
        kkt_residual(m, d, tau, qdd, lam, r, r1, dl)
        for j in range(n):
            dq[j] = r1[j]
        subsystem_solve(ip, fw, dq)
        subtract_rows(J, rows, r, n, dq, dl)  # r2 - J δη
        for t in range(r):
            fw[fpsi + t] = dl[ip[olout + t]]
        gicm_resolve(ip, fw)
        for t in range(r):
            dl[ip[olout + t]] = fw[flam + t]
        for j in range(n):
            r1[j] = 0.0
        for a in range(r):
            ra, la = rows[a], dl[a]
            for j in range(n):
                r1[j] += J[ra, j] * la
        subsystem_solve(ip, fw, r1)
        for j in range(n):
            dq[j] += r1[j]
        code, prev = take_correction(d, step, prev, scale, n, r, dq, dl, qdd, lam, STALL_TOL)
        if code != REFINE_GO_ON:
            return code
    return MAX_REFINE


def sslm_entry(ctx, pbuf, q, v, tau, qdd, lam):
    """``sslm_kernel`` on a Data's buffer and the plan's buffer, inputs checked."""
    m, d, ip, fw, st = checked_plan(ctx, pbuf, q, v, tau)
    return st if st < 0.0 else sslm_kernel(m, d, ip, fw, q, v, tau, qdd, lam)


ENTRY = method_entry(sslm_entry, planned=True)


def bind(model, d):
    """The ``ld.forward_dynamics`` call of SSLM on ``d`` for its current independent rows."""
    d.ensure_dense()
    return partial(ENTRY.compile(), d.ctx, plan_for(model, d).buf)


# ------------------------------------------------------------------ q̈ subsystem by subsystem
@njit(cache=True)
def aba_subsystem(m, d, ip, j, q, v, tau, fext, qdd):
    """ABA on subsystem j alone (its bodies, coordinates and workspace rows); -1 on success."""
    osub = _o(ip, _SUB)
    return aba_bodies(m, d, ip[osub + 7 * j], ip[osub + 7 * j + 1], q, v, tau, fext, qdd)


@njit(cache=True, parallel=True)
def _aba_subsystems_parallel(m, d, ip, q, v, tau, fext, qdd, bad):
    """ABA of every subsystem in parallel threads (disjoint slices of the workspace)."""
    for j in prange(ip[_NS]):
        bad[j] = aba_subsystem(m, d, ip, j, q, v, tau, fext, qdd)


@njit(cache=True)
def _aba_subsystems(m, d, ip, q, v, tau, fext, qdd, bad):
    for j in range(ip[_NS]):
        bad[j] = aba_subsystem(m, d, ip, j, q, v, tau, fext, qdd)


@entry
def subsystems_entry(ctx, pbuf, q, v, tau, lam, parallel, qdd, bad):
    """λ's loads at q, then every subsystem's ABA (``subsystem_accelerations``)."""
    m, d, st = checked_handles(ctx, q, v, tau)
    if st < 0.0:
        return st
    ip, _ = plan_views(pbuf)
    constraint_kernel(m, d, q, q[:0], unliteral(False))
    closure_loads(m, d, d.rows, lam, d.fext, d.tauc)
    for i in range(m.nv):
        d.x[i] = tau[i] + d.tauc[i]
    if parallel:
        _aba_subsystems_parallel(m, d, ip, q, v, as_input(d.x), as_input(d.fext), qdd, bad)
    else:
        _aba_subsystems(m, d, ip, q, v, as_input(d.x), as_input(d.fext), qdd, bad)
    return 1.0


SUBSYSTEMS = Entry(
    subsystems_entry, types.float64, BUF, BUF, IN, IN, IN, IN, types.boolean, OUT, types.int64[::1]
)


def _use_all_rows(model, d):
    """Make every closure row active on ``d``; its next forward dynamics re-detects the rank."""
    d.set_rows(np.arange(model.m))
    d.rank_info = None
    d.bound.clear()


def subsystem_accelerations(model, q, v, tau, lam, parallel=False, data=None):
    """q̈ of every subsystem from known multipliers: each subsystem's own ABA (eq. 19).

    ``lam`` (m,): multipliers on all closure rows (``ForwardDynamicsResult.lam``).
    Once λ is known the subsystems are independent: ``parallel=True`` runs their
    ABAs in numba threads (``numba.set_num_threads`` sets how many), each on its
    own slices of the workspace; worthwhile only for large subsystems.  Returns
    q̈ (nv).  Raises :class:`SingularityError` if an articulated inertia is singular.
    """
    d = (model.create_data() if data is None else workspace(model, data)).ensure_dense()
    q = configuration(model, q)
    v = vector(v, model.nv, "v", model)
    tau = vector(tau, model.nv, "tau", model)
    lam = vector(lam, model.m, "lam", model)
    _use_all_rows(model, d)
    plan = plan_for(model, d)
    qdd = np.empty(model.nv)
    bad = np.full(plan.nsub, -1, dtype=np.int64)
    SUBSYSTEMS.call(d.ctx, plan.buf, q, v, tau, lam, bool(parallel), qdd, bad)
    if np.any(bad >= 0):
        j = int(np.flatnonzero(bad >= 0)[0])
        raise SingularityError(
            f"{model.name}: articulated inertia of subsystem {j + 1} is singular"
        )
    return qdd


# ------------------------------------------------------------------ the λ stage alone
@entry
def terms_entry(ctx, pbuf, q, v, tau, sslm):
    """System terms for ``lambda_stage``: SLM's (M, J, φ, γ) or SSLM's (I_j, J_{i,j}, φ, γ)."""
    m, d = handles(ctx)
    if sslm:
        ip, fw = plan_views(pbuf)
        sslm_terms(m, d, ip, fw, q, v, tau)
    else:
        system_terms(m, d, q, v, tau, unliteral(True))
    return 0


TERMS = Entry(terms_entry, types.int64, BUF, BUF, IN, IN, IN, types.boolean)


@njit(cache=True)
def sslm_lambda_from(ip, fw, I0, Y0, phi, gamma):
    """``sslm_lambda`` from saved I_j, J_{i,j} and φ (copied in first, as SLM copies M)."""
    fI, fY, fphi = _f(ip, _I), _f(ip, _Y), _f(ip, _PHI)
    for i in range(I0.shape[0]):
        fw[fI + i] = I0[i]
    for i in range(Y0.shape[0]):
        fw[fY + i] = Y0[i]
    for i in range(phi.shape[0]):
        fw[fphi + i] = phi[i]
    return sslm_lambda(ip, fw, gamma)


@njit(cache=True)
def slm_lambda(M, J, phi, gamma, rows, Mf, Y, Sm, x, lam):
    """SLM's λ stage, eq. (12), operation for operation as ``methods.slm.slm_kernel``.

    From M (nv × nv, copied into ``Mf`` first) and the dense J: Cholesky of the
    system-level M, Y = L⁻¹ Jᵀ, x = M⁻¹ φ, Ĩ = Yᵀ Y, rhs γ - J x, Cholesky of Ĩ.
    For timing SLM against SSLM on the same inputs; returns Ĩ's pivot ratio.
    """
    n = phi.shape[0]
    for i in range(n):
        for j in range(n):
            Mf[i, j] = M[i, j]
    return slm_multipliers(Mf, J, phi, gamma, rows, Y, Sm, x, lam)


def lambda_stage(model, q, v, tau=None, method="sslm", rows=None):
    """The λ computation of ``method`` ("slm" or "sslm") alone, ready to be timed.

    Evaluates the system terms once at (q, v, tau) on a private workspace and
    returns ``(kernel, args, result)``: ``kernel(*args)`` (a numba function) runs
    only the λ stage — SLM: eq. (12) from M and J; SSLM: eqs. (19)–(25) and the
    block elimination from the I_j and J_{i,j} — and ``result()`` returns the λ of
    the last call in ``rows`` order.  ``rows`` default: all rows.
    """
    if method not in ("slm", "sslm"):
        raise ValueError(f"lambda_stage: method must be 'slm' or 'sslm', got {method!r}")
    d = model.create_data().ensure_dense()
    q = configuration(model, q)
    v = vector(v, model.nv, "v", model)
    tau = np.zeros(model.nv) if tau is None else vector(tau, model.nv, "tau", model)
    rows = np.arange(model.m, dtype=np.int64) if rows is None else np.asarray(rows, np.int64)
    d.set_rows(rows)
    plan = plan_for(model, d)
    TERMS.call(d.ctx, plan.buf, q, v, tau, method == "sslm")
    if method == "slm":
        Mf = np.zeros_like(d.M)
        lam = np.zeros(rows.shape[0])
        args = (d.M, d.J, d.phi, d.gamma, rows, Mf, d.Y, d.Sm, d.x, lam)
        return slm_lambda, args, lambda: lam.copy()
    f = plan.foff
    I0 = plan.fw[f["I"][0] : f["I"][1]].copy()
    Y0 = plan.fw[f["Y"][0] : f["Y"][1]].copy()
    phi = plan.fw[f["phi"][0] : f["phi"][1]].copy()
    gamma = d.gamma.copy()
    lout = plan.parts["lout"]

    def result():
        out = np.empty(rows.shape[0])
        out[lout] = plan.fw[f["lam"][0] : f["lam"][1]]
        return out

    return sslm_lambda_from, (plan.ip, plan.fw, I0, Y0, phi, gamma), result


# ------------------------------------------------------------------ the GICM
_SUP_DIGITS = str.maketrans("0123456789", "⁰¹²³⁴⁵⁶⁷⁸⁹")


def _term_name(r, s, label):
    if r < 9 and s < 9:
        return f"𝓘{f'{r + 1}{s + 1}'.translate(_SUP_DIGITS)}_{label}"
    return f"𝓘^{{{r + 1},{s + 1}}}_{label}"


class GICM:
    """The Generalized Inertia Constraint Matrix of eqs. (23)–(25) at one configuration.

    Attributes: ``matrix`` (m × m, rows in ``model.closure_rows`` order, symmetric
    positive definite for independent closures), ``blocks`` {(r, s): 𝓘_{r,s}} for
    the non-vanishing blocks, r >= s (0-based loop = closure indices),
    ``contributions`` {(r, s): subsystem indices j with a term 𝓘^{rs}_j} — the
    subsystems both loops meet (eqs. 31–32: 𝓘_{i,i} sums the subsystems forming
    loop i, 𝓘_{r,s} those carrying a link shared by loops r and s), ``terms``
    {(r, s, j): J_{r,j} I_j⁻¹ J_{s,j}ᵀ}, ``incidence`` (loops × subsystems),
    ``psi`` Ψ̄ of eq. (25) (m,; None unless v was given), ``I_hat`` {(i, j):
    Î_{i,j} = J_{i,j} I_j⁻ᵀ} and ``phi_hat`` φ̂ = I⁻¹ φ (eqs. 19–22; φ̂ None
    unless v was given), so that q̈ = φ̂ + Îᵀ λ (eq. 21), ``order`` (the
    elimination order, loop indices) and ``fill`` (loop pairs filled in by it).
    ``str(gicm)`` / ``gicm.table()`` prints the labelled block table.
    """

    def __init__(self, model, matrix, blocks, contributions, terms, psi, order, fill):
        topo = topology(model)
        self.model_name = model.name
        self.loops = tuple(model.closures)
        self.subsystems = tuple(s.label for s in topo.subsystems)
        self.subsystem_bodies = tuple(s.body_names for s in topo.subsystems)
        self.rows = tuple(model.closure_rows)
        self.incidence = topo.incidence
        self.matrix = matrix
        self.blocks = blocks
        self.contributions = contributions
        self.terms = terms
        self.psi = psi
        self.order = order
        self.fill = fill

    def block(self, r, s):
        """𝓘_{r,s} (zeros where the loops share no subsystem; 𝓘_{s,r}ᵀ for r < s)."""
        return self.matrix[self.rows[r], self.rows[s]].copy()

    def table(self):
        """The GICM as a labelled table: pattern, blocks, contributing subsystems."""
        u = len(self.loops)
        lab = self.subsystems
        out = [
            f"GICM of {self.model_name} (eqs. 23–25): {u} loops × {len(lab)} subsystems, "
            f"{self.matrix.shape[0]} × {self.matrix.shape[1]}",
            "subsystems: "
            + "; ".join(
                f"{L} = {{{', '.join(b)}}}" for L, b in zip(lab, self.subsystem_bodies, strict=True)
            ),
            "loops (cut joints): " + ", ".join(f"{i + 1}: {n}" for i, n in enumerate(self.loops)),
            "J block pattern (eq. 16):",
        ]
        for i in range(u):
            cells = [f"J{i + 1},{j + 1}" if self.incidence[i, j] else "O" for j in range(len(lab))]
            out.append("  " + " ".join(f"{c:<7}" for c in cells).rstrip())
        out.append("GICM block pattern (lower triangle, 'sym' above; eq. 24):")
        for r in range(u):
            cells = [f"𝓘{r + 1},{s + 1}" if (r, s) in self.blocks else "O" for s in range(r + 1)]
            out.append("  " + " ".join(f"{c:<7}" for c in cells).rstrip())
        head = f"{'block':<8}{'size':<7}{'subsystems':<13}{'expression (eq. 25)':<34}"
        out.append(f"  {head}{'max |entry|':>12}")
        for r in range(u):
            for s in range(r + 1):
                blk = self.block(r, s)
                size = f"{blk.shape[0]}×{blk.shape[1]}"
                js = self.contributions.get((r, s), ())
                subs = ", ".join(lab[j] for j in js) or "—"
                expr = " + ".join(_term_name(r, s, lab[j]) for j in js) or "O (no shared subsystem)"
                label = f"𝓘{r + 1},{s + 1}"
                out.append(f"  {label:<8}{size:<7}{subs:<13}{expr:<34}{np.abs(blk).max():>12.4g}")
        names = ", ".join(str(k + 1) for k in self.order)
        fill = ", ".join(f"({a + 1},{b + 1})" for a, b in self.fill) or "none"
        out.append(f"elimination order: loops {names}; fill-in: {fill}")
        return "\n".join(out)

    __str__ = table

    def __repr__(self):
        nb = len(self.blocks)
        return f"<GICM of {self.model_name}: {len(self.loops)} loops, {nb} non-zero blocks>"


def gicm(model, q, v=None, tau=None, data=None):
    """The GICM 𝓘 = J I⁻¹ Jᵀ of eqs. (23)–(25), assembled block by block from the subsystems.

    In: a configuration ``q`` (the GICM depends on q only); optionally ``v`` and
    ``tau`` for Ψ̄ = γ - J I⁻¹ φ (eq. 25).  Uses every closure row.  Out: a
    :class:`GICM` with the matrix, its non-vanishing blocks 𝓘_{r,s} labelled by
    loop (closure), and for each block the subsystems whose terms
    J_{r,j} I_j⁻¹ J_{s,j}ᵀ make it up.  Printable as a table.
    """
    if model_arg(model).m == 0:
        raise ValueError(f"{model.name}: the model has no closures, hence no GICM")
    if model.nv == 0:
        raise ValueError(f"{model.name}: nothing moves (nv = 0): no subsystems, hence no GICM")
    d = (model.create_data() if data is None else workspace(model, data)).ensure_dense()
    q = configuration(model, q)
    vv = np.zeros(0) if v is None else vector(v, model.nv, "v", model)
    tau = np.zeros(model.nv) if tau is None else vector(tau, model.nv, "tau", model)
    _use_all_rows(model, d)
    plan = plan_for(model, d)
    TERMS.call(d.ctx, plan.buf, q, vv, tau, True)
    f = plan.foff
    I_raw = plan.fw[f["I"][0] : f["I"][1]].copy()
    Y_raw = plan.fw[f["Y"][0] : f["Y"][1]].copy()
    phi_raw = plan.fw[f["phi"][0] : f["phi"][1]].copy()
    if v is None:
        plan.fw[f["phi"][0] : f["phi"][1]] = 0.0
        gamma = np.zeros(model.m)
    else:
        gamma = d.gamma
    if not gicm_assemble(plan.ip, plan.fw, gamma) > 0.0:
        raise SingularityError(f"{model.name}: a subsystem inertia matrix is not positive definite")
    G = plan.fw[f["G"][0] : f["G"][1]]
    lp, pr, bk = plan.parts["lp"], plan.parts["pr"], plan.parts["bk"]
    lrow = plan.parts["lrow"]
    m = model.m
    matrix = np.zeros((m, m))
    blocks = {}
    for b in range(bk.shape[0]):
        ra, ca, go = bk[b]
        pa, pc = lp[ra, 1], lp[ca, 1]
        blk = G[go : go + pa * pc].reshape(pa, pc)
        rr = lrow[lp[ra, 2] : lp[ra, 2] + pa]
        cc = lrow[lp[ca, 2] : lp[ca, 2] + pc]
        matrix[np.ix_(rr, cc)] = blk
        matrix[np.ix_(cc, rr)] = blk.T
        r, s = int(lp[ra, 0]), int(lp[ca, 0])
        if (r, s) in plan.fill or (s, r) in plan.fill:
            continue  # a fill-in position: zero in the GICM itself
        blocks[(r, s) if r >= s else (s, r)] = blk.copy() if r >= s else blk.T.copy()
    # the individual terms J_{r,j} I_j⁻¹ J_{s,j}ᵀ (eq. 25), from the raw blocks
    sub = plan.sub
    contributions, terms = {}, {}
    for _, er, ec, _, _ in plan.parts["tm"]:
        r, s = int(lp[pr[er, 0], 0]), int(lp[pr[ec, 0], 0])
        j = int(pr[er, 1])
        n, io = sub[j, 4], sub[j, 5]
        Ij = I_raw[io : io + n * n].reshape(n, n)
        Jr = Y_raw[pr[er, 2] : pr[er, 2] + lp[pr[er, 0], 1] * n].reshape(-1, n)
        Js = Y_raw[pr[ec, 2] : pr[ec, 2] + lp[pr[ec, 0], 1] * n].reshape(-1, n)
        term = Jr @ np.linalg.solve(Ij, Js.T)
        if r < s:
            r, s, term = s, r, term.T
        terms[(r, s, j)] = term
        contributions.setdefault((r, s), [])
        if j not in contributions[(r, s)]:
            contributions[(r, s)].append(j)
    contributions = {k: tuple(sorted(js)) for k, js in contributions.items()}
    # Î_{i,j} = J_{i,j} I_j⁻ᵀ (eq. 20, p_i × n_j) and, with v, φ̂_j = I_j⁻¹ φ_j
    I_hat = {}
    for e in range(pr.shape[0]):
        i, j = int(lp[pr[e, 0], 0]), int(pr[e, 1])
        n, io = sub[j, 4], sub[j, 5]
        Ij = I_raw[io : io + n * n].reshape(n, n)
        Jij = Y_raw[pr[e, 2] : pr[e, 2] + lp[pr[e, 0], 1] * n].reshape(-1, n)
        I_hat[(i, j)] = np.linalg.solve(Ij, Jij.T).T
    psi = phi_hat = None
    if v is not None:
        psi = np.zeros(m)
        psi[lrow] = plan.fw[f["psi"][0] : f["psi"][1]]
        phi_hat = np.zeros(model.nv)
        for j in range(sub.shape[0]):
            n, io, v0 = sub[j, 4], sub[j, 5], sub[j, 3]
            Ij = I_raw[io : io + n * n].reshape(n, n)
            phi_hat[v0 : v0 + n] = np.linalg.solve(Ij, phi_raw[v0 : v0 + n])
    fill = tuple((int(a), int(b)) for a, b in plan.fill)
    out = GICM(model, matrix, blocks, contributions, terms, psi, plan.order, fill)
    out.I_hat, out.phi_hat = I_hat, phi_hat
    return out
