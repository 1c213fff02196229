"""Recursive Coordinate Reduction (RCR): Anderson & Critchley's O(n + m) closed-loop dynamics.

Paper: ``anderson-critchley-recursive-coordinate-reduction.txt``, Sec. 3, eqs. (33)–(80);
``docs/rcr.md`` maps every equation to the code.  Frames: every spatial quantity is in
its body's frame (``Data`` convention), [angular; linear].

Each loop i (a closure, or a coupling) is treated locally.  Its *loop base body* 0_i is
the lowest common ancestor of the two closure bodies; its bodies are numbered locally
around the loop, from 0_i down the branch whose first body comes first in the model,
across the cut, and back up the other branch to the phantom copy n_i of 0_i (Figs. 3–4).
The loop's m_i (independent) rows say that the phantom has no velocity relative to 0_i
(eq. 33): J_i θ̇_i = 0 on the loop's path coordinates θ_i, whose derivative gives
J_i θ̈_i = γ_i (eqs. 35, 54).  As in the paper the first n_i − m_i coordinates of the loop
not already determined are its independent ones, the last m_i its dependent ones.

Loops sharing a base body (the ladders of Sec. 4.3) are chained: a loop's coordinates
already fixed by an earlier loop are *known*, so every loop is solved once, in an order
where it has m_i undetermined coordinates, and the cost stays linear (eqs. 72–80: the
known part of the earlier loops enters through X and ζ, the paper's Γ and Θ).  Per loop:

    Y1 θ̇_dep = −J_i[:, other] θ̇_other                                    (eqs. 34, 47, 51)
    θ̇ = X θ̇_R,  X[dep] = −Y1⁻¹ J_i[:, other] X[other]                    (Γ, Ξ: eqs. 50–53)
    θ̈ = X θ̈_R + ζ,  ζ[dep] = Y1⁻¹ (γ_i − J_i[:, other] ζ[other])          (eqs. 54–55, 79–80)

with Y1 = J_i[:, dep] (m_i × m_i, LU with partial pivoting) in place of the paper's
projector recursion (43)–(49), which eliminates the same m_i unknowns one joint at a time
from the phantom body back.  θ_R are the independent coordinates of the *aggregated
body* that the chained loops form (``loopdyn.topology.aggregation``), so X has one column
per independent coordinate, and computing it costs O(k) per path coordinate.

The loop's bodies then act on its independent coordinates only (the virtual terminal body
p_i of eqs. 56–60 with its multiple inertias Î^{p_i;0_i}, Î^{p_i} and forces F̂^{p_i}): the
member sweep of ``embedding.aggregate_inward`` projects them with the joint maps
H_j = jXλ H_λ + S_j X[j] (the nonholonomic partial velocities Γ^k P of eq. 58), giving
D = Σ H_jᵀ P_j H_j, u and the coupling W = Σ 𝒜_jᵀ P_j H_j to the base 0_i that is
triangularized into the parent (eqs. 61–66); ``embedding.aggregate_outward`` is the
forward substitution (67)–(71).  Ordinary joints take the articulated-body steps.

Multipliers (the paper's method does not produce them: it embeds the loops): the
joint forces of the members F_j (an RNEA over the aggregated body) give
ρ = S_𝒮ᵀ F_𝒮 − τ_𝒮 = J_𝒮ᵀ λ_𝒮; J_𝒮 is block lower triangular (a loop's rows involve
its own and earlier loops' coordinates), so the λ_i follow loop by loop in reverse
order, Y1ᵀ λ_i = ρ[dep_i] − Σ_{later j} J_j[:, dep_i]ᵀ λ_j: O(n + m).

Run-time conditioning (Sec. 4.4): Y1's pivot ratio ρ_i = min|u_ii| / max|J_i| is
monitored; below ``RESELECT`` the loop's dependent coordinates are chosen again among its
undetermined ones by complete pivoting, below ``SINGULAR_RATIO`` the kernel returns
``SINGULAR`` and records the loop (``explain`` turns it into a ``SingularityError`` naming
the loop, its joints and the condition number).  Loops that cannot be solved one by one
(no order gives each of them m_i undetermined coordinates: coupled loops without a
sequential structure) are merged into one block solved together, beyond the paper.

Accuracy (beyond the paper): where the articulated pivots spread over many decades
(``embedding.pivot_ratio`` < ``embedding.REFINE_PIVOT_RATIO``: mass ratios of 1e4–1e6)
or a loop's best Y1 stays below ``RESELECT``, the answer is refined (``refine``): the
residual of the equations of motion (``eom_residual``, Jᵀλ from the loops' own J_i) is
solved again by the same recursion on the same loop reduction, then checked against
``EOM_TOL``; a miss is ``INACCURATE`` (the runner falls back to ``augmented`` or
raises), never a silent answer.

One module (~1,100 lines): its plan extends embedding's (the same header and
packing, ``pack_int_plan``) and its kernels reuse embedding's; what is left is RCR's own
loop reduction.
"""

from functools import partial

import numpy as np
from numba import njit

from loopdyn.errors import ModelError, SingularityError
from loopdyn.kernels.linalg import lu_inverse_norm_exact, lu_solve_transpose
from loopdyn.kernels.numba_internals import (
    as_input,
    block,
    entry,
    unliteral,
)
from loopdyn.kinematics.closures import bias_accelerations, closure_terms
from loopdyn.kinematics.frames import fk_kernel
from loopdyn.methods import embedding as E
from loopdyn.methods.common import (
    DIAG_ASCALE,
    DIAG_EOM,
    DIAG_QUALITY,
    DIAG_REFINED,
    DIAG_RESIDUAL,
    INACCURATE,
    MAX_REFINE,
    REFINE_GO_ON,
    RESIDUAL_TOL,
    SINGULAR,
    DependentRows,
    checked_plan,
    method_entry,
    pack_int_plan,
)
from loopdyn.model.closures import COUPLING, TRANSLATION
from loopdyn.topology.aggregation import coordinate_names, structure

kernel = entry  # compiled like entries: no allocation, no reference counting

# Y1 pivot ratio below which a loop's dependent coordinates are chosen again, and below
# which Y1 counts as singular (Sec. 4.4)
RESELECT = E.RESELECT
SINGULAR_RATIO = E.SINGULAR_RATIO
CHECK_RATIO = E.CHECK_RATIO
# above COND_MAX (cond₁ computed below CHECK_RATIO) the dependent coordinates are chosen
# again: the pivot ratio of a large (merged) block or of a chosen ``independent=`` set can
# miss a cond(Y1) of 1e4, whose X = −Y1⁻¹ J_other then carries cond(Y1)² into the reduced
# mass matrix (q̈ off by 5e-8 on stewart for such a choice)
COND_MAX = 2e2

# ------------------------------------------------------------------ the plan
# RCR's header, after embedding's (``E.NHEAD`` entries): offsets of its arrays
(R_NBLK, R_BLK, R_AGGB, R_CL, R_ROWS, R_LPOS, R_PB, R_PATH, R_CAND, R_DEP, R_PIV, R_FAIL,
 R_RHO) = range(E.NHEAD, E.NHEAD + 13)  # fmt: skip
NHEAD = E.NHEAD + 13
# columns of the block table (one block = one loop, or loops merged): aggregated body,
# closures (count, offset), rows (count m, offset), path coordinates (count, offset),
# undetermined coordinates (count, offset; independent first), independent count, first
# independent slot in the aggregated body, Y1 pivots, float offsets of J, γ, LU(Y1), scratch
(B_AGG, B_NCL, B_CL, B_M, B_ROW, B_NP, B_PATH, B_NU, B_CAND, B_NIND, B_SLOT0, B_PIV,
 B_J, B_G, B_LU, B_T) = range(16)  # fmt: skip
NBLK = 16
# columns of the closure table: closure index, first row in the block, its rows, its
# path bodies (count, offset of (body, side, first position) triples)
C_K, C_ROW0, C_M, C_NPB, C_PB = range(5)
NCL = 5


class RcrPlan:
    """The loops of a model, packed for the RCR kernels, for one set of independent
    closure rows (``rows``, sorted model row indices, as ``Data.rows``).

    ``buf`` (float64): ``[n | ip (n int64) | fw]``.  ``ip`` starts with embedding's
    layout (``embedding.EmbeddingPlan``: the aggregated bodies, their members and
    columns; every aggregated body with r = 0 rows for embedding's sweeps, its
    ``order`` holding the independent columns slot by slot), then RCR's header
    (``R_*``), the block table (``B_*``), the closure table (``C_*``) and per block its
    rows, their positions in ``rows``, path bodies, path columns (local columns of the
    aggregated body), undetermined positions (independent first; rewritten by a
    re-selection), dependent flags per path position and Y1's pivots.  ``fw``: per
    aggregated body embedding's blocks (X, ζ, D⁻¹, u, W, H, P H, scratch, scale), per
    block J_i, γ_i, LU(Y1) and a scratch, and ρ (nv).

    ``blocks``: per block ``(aggregated body, closure names, path v indices,
    independent v indices, dependent v indices)`` as first chosen.

    ``independent``: None for the paper's choice, else the chosen independent
    coordinates (v indices, ``independent_columns``): each loop's dependent ones are
    then its coordinates not fixed by earlier loops and not chosen; coordinates outside
    the loops are independent whether listed or not.  ``ValueError`` if their number
    does not fit the loops' rows, :class:`SingularityError` naming the loop if a loop is
    left fewer dependent coordinates than rows (an invalid choice, Sec. 4.4).
    """

    def __init__(self, model, rows, independent=None, merges=()):
        rows = np.asarray(rows, dtype=np.int64)
        self.merges = tuple(merges)
        chosen = None if independent is None else {int(c) for c in independent}
        pos = {int(r): t for t, r in enumerate(rows)}
        cuts, groups, aggregate_of = structure(model)
        topo = model.topo
        nb, na = model.nbodies, len(groups)
        children = {}
        for c, p in enumerate(model.parent):
            children.setdefault(p, []).append(c)
        agg = np.zeros((na, E.NAGG), dtype=np.int64)
        colstart = np.zeros(nb, dtype=np.int64)
        slot = np.zeros(nb, dtype=np.int64)
        flags = np.zeros(nb, dtype=np.int64)
        members, cols, order = [], [], []
        blk, cltab, brows, blpos, pbs, paths, cands, deps = [], [], [], [], [], [], [], []
        aggb = [0]
        nflt = npiv = 0
        self.blocks = []
        self.block_closures = []  # per block its closure indices
        for s, (bodies, parent, ix) in enumerate(groups):
            local = 0
            for kk, b in enumerate(bodies):
                colstart[b], slot[b] = local, kk
                local += int(topo[b, 5])
            inside = set(bodies)
            for b in reversed(bodies):  # children after parents: seen first here
                kids = children.get(b, ())
                inner = [c for c in kids if c in inside]
                rigid = len(inner) == len(kids) and all(flags[c] & E.RIGID for c in inner)
                flags[b] = (E.HAS_INNER if inner else 0) | (E.RIGID if rigid else 0)
            vcols = [int(topo[b, 3]) + c for b in bodies for c in range(topo[b, 5])]
            loops = [self._loop(model, cuts[c].index, pos, colstart) for c in sorted(ix)]
            loops = self._premerge(model, loops, self.merges)
            ind = None if chosen is None else {c for c, vc in enumerate(vcols) if vc in chosen}
            if ind is not None:
                coords = coordinate_names(model)
                need = local - sum(len(lp["rows"]) for lp in loops)
                onpath = {c for lp in loops for c in lp["path"]}
                listed = ind & onpath
                free = set(range(local)) - onpath
                if len(listed | free) != need:
                    cl = [model.closures[kc] for lp in loops for kc, _, _ in lp["closures"]]
                    raise ValueError(
                        f"{model.name}: independent={sorted(vcols[c] for c in listed)} "
                        f"({', '.join(coords[vcols[c]] for c in sorted(listed)) or 'none'}) "
                        f"does not fit the loops {', '.join(cl)}: {need} independent "
                        f"coordinates are needed among "
                        f"{', '.join(coords[v] for v in vcols)} (indices into v)"
                    )
            labels = [coords[c] for c in vcols] if ind is not None else None
            sblocks = self._schedule(model, loops, local, len(rows) == model.m, ind, labels)
            ns = local
            k = sum(len(b["cand"]) - len(b["rows"]) for b in sblocks)
            B = len(bodies)
            agg[s, : E.A_CHOSEN + 1] = (bodies[0], parent, B, len(members), ns, k, 0, 0,
                                        len(cols), 0, 1)  # fmt: skip
            sizes = (0, 0, 0, ns * k, ns, k * k, k, 6 * k, B * 6 * k, B * 6 * k,
                     max(6 * k, 2 * k, 1), 1)  # fmt: skip
            for col, size in zip(range(E.A_JS, E.A_SC + 1), sizes, strict=True):
                agg[s, col] = nflt
                nflt += size
            members.extend(bodies)
            cols.extend(vcols)
            ind_order, dep_order, nslot = [], [], 0
            for b in sblocks:
                mb, nu, npth = len(b["rows"]), len(b["cand"]), len(b["path"])
                nind = nu - mb
                sizes = (mb * npth, mb, mb * mb, max(mb * nu, mb + npth, mb * (k + 1), 1))
                offs = []
                for size in sizes:
                    offs.append(nflt)
                    nflt += size
                blk.append((s, len(b["closures"]), len(cltab), mb, len(brows), npth, len(paths),
                            nu, len(cands), nind, nslot, npiv, *offs))  # fmt: skip
                r0 = 0
                for kc, crows, pb in b["closures"]:
                    cltab.append((kc, r0, len(crows), len(pb) // 3, len(pbs)))
                    pbs.extend(pb)
                    r0 += len(crows)
                brows.extend(b["rows"])
                blpos.extend(pos[r] for r in b["rows"])
                cands.extend(b["cand"])
                isdep = np.zeros(npth, dtype=np.int64)
                isdep[b["cand"][nind:]] = 1
                deps.extend(isdep)
                ind_order.extend(b["path"][p] for p in b["cand"][:nind])
                dep_order.extend(b["path"][p] for p in b["cand"][nind:])
                paths.extend(b["path"])
                nslot += nind
                npiv += mb
                self.block_closures.append(frozenset(kc for kc, _, _ in b["closures"]))
                self.blocks.append((
                    s, tuple(model.closures[kc] for kc, _, _ in b["closures"]),
                    tuple(vcols[c] for c in b["path"]),
                    tuple(vcols[b["path"][p]] for p in b["cand"][:nind]),
                    tuple(vcols[b["path"][p]] for p in b["cand"][nind:]),
                ))  # fmt: skip
            order.extend(ind_order + dep_order)
            aggb.append(len(blk))
        rho = nflt
        nflt += model.nv
        nblk = len(blk)
        parts = [
            (E.H_AGG, agg), (E.H_MEM, members), (E.H_AGGOF, aggregate_of),
            (E.H_COLSTART, colstart), (E.H_SLOT, slot), (E.H_FLAGS, flags), (E.H_ROWS, []),
            (E.H_LPOS, []), (E.H_COLS, cols), (E.H_ACT, np.zeros(len(cols), np.int64)),
            (E.H_ORDER, order), (E.H_PIV, []),
            (R_BLK, blk), (R_AGGB, aggb), (R_CL, cltab), (R_ROWS, brows), (R_LPOS, blpos),
            (R_PB, pbs), (R_PATH, paths), (R_CAND, cands), (R_DEP, deps),
            (R_PIV, np.zeros(sum(b[B_M] for b in blk), np.int64)),
        ]  # fmt: skip
        self.buf, ip, self.fw, offsets = pack_int_plan(parts, NHEAD, nflt)
        ip[E.H_NA], ip[E.H_NB], ip[E.H_WANTJ] = na, nb, int(len(rows) < model.m)
        ip[R_NBLK], ip[R_FAIL], ip[R_RHO] = nblk, -1, rho
        self.ip = ip
        self.table = ip[offsets[R_BLK] : offsets[R_BLK] + nblk * NBLK].reshape(nblk, NBLK)
        self.cols = np.array(cols, dtype=np.int64)
        self.agg = agg
        self.independent_rows = rows

    def set_dependent(self, b, dependent):
        """Impose block b's dependent coordinates (v indices, m_b of its undetermined
        ones); the kernel keeps them while Y1 stays well conditioned (Sec. 4.4)."""
        bt = self.table[b]
        ip, nu, nind = self.ip, int(bt[B_NU]), int(bt[B_NIND])
        cand = ip[ip[R_CAND] + bt[B_CAND] : ip[R_CAND] + bt[B_CAND] + nu]
        path = ip[ip[R_PATH] + bt[B_PATH] : ip[R_PATH] + bt[B_PATH] + bt[B_NP]]
        isdep = ip[ip[R_DEP] + bt[B_PATH] : ip[R_DEP] + bt[B_PATH] + bt[B_NP]]
        vcol = {int(self.cols[self.agg[bt[B_AGG], E.A_COL] + c]): p for p, c in enumerate(path)}
        dep = sorted(vcol[int(c)] for c in dependent)
        if len(dep) != nu - nind or not set(dep) <= set(cand.tolist()):
            raise ValueError(f"block {b}: {nu - nind} dependent coordinates among {cand}")
        cand[:] = sorted(set(cand.tolist()) - set(dep)) + dep
        isdep[:] = 0
        isdep[dep] = 1
        a = self.agg[bt[B_AGG]]
        order = ip[ip[E.H_ORDER] + a[E.A_COL] : ip[E.H_ORDER] + a[E.A_COL] + a[E.A_NS]]
        order[bt[B_SLOT0] : bt[B_SLOT0] + nind] = path[cand[:nind]]

    def dependent(self, b):
        """Block b's current dependent coordinates (v indices)."""
        bt = self.table[b]
        ip = self.ip
        cand = ip[ip[R_CAND] + bt[B_CAND] : ip[R_CAND] + bt[B_CAND] + bt[B_NU]]
        path = ip[ip[R_PATH] + bt[B_PATH] : ip[R_PATH] + bt[B_PATH] + bt[B_NP]]
        base = self.agg[bt[B_AGG], E.A_COL]
        return tuple(int(self.cols[base + path[p]]) for p in cand[int(bt[B_NIND]) :])

    @staticmethod
    def _loop(model, k, pos, colstart):
        """Loop of closure (or coupling) k: its selected rows, its path bodies as
        (body, side, first position) triples and its path (local columns) in the
        paper's local numbering (Figs. 3–4)."""
        sel = [r for r in range(*model.closure_rows[k].indices(model.m)) if r in pos]
        a, b = (int(x) for x in model.cl_body[k])
        topo = model.topo
        if model.row_int[model.closure_rows[k].start, 1] == COUPLING:
            # J = e_b − ratio e_a on the joints' first coordinates, at positions 0 and 1
            path = [int(colstart[a]), int(colstart[b])]
            return dict(closures=[(k, sel, [a, 0, 0, b, 1, 1])], rows=sel, path=path)

        def up(j):
            out = []
            while j >= 0:
                out.append(j)
                j = int(model.parent[j])
            return out

        ua, ub = up(a), up(b)
        common = set(ua) & set(ub)
        ua = [j for j in ua if j not in common]  # A's side, from A up to 0_i (excluded)
        ub = [j for j in ub if j not in common]
        sa, sb = list(reversed(ua)), list(reversed(ub))  # from 0_i down
        if sb and (not sa or sb[0] < sa[0]):
            first, second = [(j, 1) for j in sb], [(j, 0) for j in ua]
        else:
            first, second = [(j, 0) for j in sa], [(j, 1) for j in ub]
        path, pb = [], []
        for j, side in first + second:  # around the loop: 0_i → … → cut → … → n_i
            if topo[j, 5] == 0:  # a fixed joint: no coordinate, no column
                continue
            pb.extend((j, side, len(path)))
            path.extend(int(colstart[j]) + c for c in range(topo[j, 5]))
        return dict(closures=[(k, sel, pb)], rows=sel, path=path)

    @staticmethod
    def _premerge(model, loops, merges):
        """``loops`` with those whose closures share a set of ``merges`` (closure indices)
        merged into one block, placed where its first loop was (``replan``)."""
        for group in merges:
            hit = [i for i, lp in enumerate(loops) if {kc for kc, _, _ in lp["closures"]} & group]
            if len(hit) < 2:
                continue
            x = loops[hit[0]]
            for i in hit[1:]:
                x = RcrPlan._merge(model, x, loops[i])
            loops = [x if i == hit[0] else lp for i, lp in enumerate(loops) if i not in hit[1:]]
        return loops

    @staticmethod
    def _schedule(model, loops, ns, all_rows, ind=None, labels=None):
        """Blocks in solution order: each with m rows and ≥ m coordinates not fixed by
        earlier blocks (``cand``: positions in its path, the first ``len(cand) − m``
        independent: the paper's choice, or those in ``ind``, local columns chosen
        independent).  Loops that no order can take one by one are merged; coordinates
        of no loop form a first block without rows."""
        determined = set()
        for lp in loops:
            determined.update(lp["path"])
        free = [c for c in range(ns) if c not in determined]
        out = []
        if free:
            out.append(dict(closures=[], rows=[], path=free, cand=list(range(len(free)))))
        loops = list(loops)
        while True:
            for lp in loops:  # more rows than coordinates: no order or merge helps
                if len(lp["rows"]) > len(lp["path"]):
                    names = ", ".join(model.closures[kc] for kc, _, _ in lp["closures"])
                    msg = (f"{model.name}: loops {names}: {len(lp['rows'])} rows on "
                           f"{len(lp['path'])} coordinates")  # fmt: skip
                    if all_rows:  # rows not yet reduced to an independent set (SELF_RANKED)
                        raise DependentRows(msg)
                    raise ModelError(f"{msg}: use method='embedding' or 'sslm'")
            blocks, stuck = RcrPlan._greedy(loops, set(free), ind)
            if stuck is None:
                return out + blocks
            if ind is not None and (stuck < 0 or len(loops) == 1):
                lp = loops[stuck if stuck >= 0 else -stuck - 1]
                RcrPlan._invalid(model, lp, ind, blocks, labels)
            # coupled loops without a sequential structure (beyond the paper): the stuck
            # loop is merged with the loop sharing most coordinates with it, and again
            x = loops.pop(stuck)
            share = [len(set(x["path"]) & set(lp["path"])) for lp in loops]
            y = loops.pop(int(np.argmax(share)))
            loops.insert(min(stuck, len(loops)), RcrPlan._merge(model, y, x))

    @staticmethod
    def _greedy(loops, known, ind=None):
        """Loops in the first order where each has at least m_i coordinates not fixed by
        the loops before it (exactly m_i not in ``ind`` when given): (blocks, None), or
        (partial, index of a stuck loop), or (partial, −1 − index) of a loop left fewer
        dependent coordinates than rows by ``ind``."""
        pending = list(range(len(loops)))
        out = []
        while pending:
            for li in pending:
                lp = loops[li]
                cand = [p for p, c in enumerate(lp["path"]) if c not in known]
                if ind is None:
                    if len(cand) >= len(lp["rows"]):
                        break
                    continue
                dep = [p for p in cand if lp["path"][p] not in ind]
                if len(dep) < len(lp["rows"]):
                    return out, -1 - li
                if len(dep) == len(lp["rows"]):
                    cand = [p for p in cand if lp["path"][p] in ind] + dep
                    break
            else:
                return out, pending[0]
            pending.remove(li)
            # the paper's choice: the first n_i − m_i undetermined coordinates independent
            out.append(dict(lp, cand=cand))
            known.update(lp["path"])
        return out, None

    @staticmethod
    def _invalid(model, lp, ind, blocks, labels):
        """The :class:`SingularityError` of a chosen set of independent coordinates that
        leaves loop ``lp`` more or fewer dependent coordinates than rows (``labels``: the
        coordinate names of the local columns)."""
        known = {c for b in blocks for c in b["path"]}
        free = [c for c in lp["path"] if c not in known]
        dep = [c for c in free if c not in ind]
        names = ", ".join(model.closures[kc] for kc, _, _ in lp["closures"])
        raise SingularityError(
            f"{model.name}: RCR loop {names}: of its joints not fixed by earlier loops "
            f"({', '.join(labels[c] for c in free) or 'none'}) the chosen independent "
            f"coordinates leave {', '.join(labels[c] for c in dep) or 'none'} dependent, "
            f"{len(dep)} for its {len(lp['rows'])} rows (Y1 is "
            f"{len(lp['rows'])} × {len(dep)}, condition number inf): an invalid choice "
            "(Sec. 4.4); choose independent coordinates so that every loop keeps as many "
            "undetermined coordinates as rows, or leave independent=None"
        )

    @staticmethod
    def _merge(model, x, y):
        """Two loops as one block: rows of both, the union of their paths (a joint's
        columns stay consecutive)."""
        path = list(x["path"])
        where = {c: p for p, c in enumerate(path)}
        closures = list(x["closures"])
        for kc, sel, pb in y["closures"]:
            coupling = model.row_int[model.closure_rows[kc].start, 1] == COUPLING
            pb = list(pb)
            for t in range(0, len(pb), 3):
                p0, nj = pb[t + 2], 1 if coupling else int(model.topo[pb[t], 5])
                for c in y["path"][p0 : p0 + nj]:
                    if c not in where:
                        where[c] = len(path)
                        path.append(c)
                pb[t + 2] = where[y["path"][p0]]
            closures.append((kc, sel, pb))
        return dict(closures=closures, rows=x["rows"] + y["rows"], path=path)


def plan_for(model, d, independent=None):
    """The :class:`RcrPlan` of ``d``'s current independent rows and the chosen
    ``independent`` coordinates (None: the paper's choice; else as
    ``independent_columns``), cached in ``d.plans``."""
    rows = d.rows[: d.nrows]
    ind = None if independent is None else independent_columns(model, independent)
    key = ("rcr", rows.tobytes(), None if ind is None else ind.tobytes())
    p = d.plans.get(key)
    if p is None:
        p = d.plans[key] = RcrPlan(model, np.array(rows), ind)
    return p


def independent_columns(model, independent):
    """The v indices (sorted, unique int64) of ``independent``: joint names (all their
    coordinates), coordinate names ``"joint[c]"`` of multi-coordinate joints, or
    indices into v.  ``ValueError`` naming an unknown or fixed joint or a bad index."""
    if isinstance(independent, str | bytes):
        independent = [independent]
    names = {}
    for i, j in enumerate(model.joint_names):
        start, n = int(model.topo[i, 3]), int(model.topo[i, 5])
        names[j] = list(range(start, start + n))
        if n > 1:
            names.update({f"{j}[{c}]": [start + c] for c in range(n)})
    cols = []
    for x in np.asarray(independent, dtype=object).reshape(-1):
        if isinstance(x, str):
            if x not in names:
                raise ValueError(
                    f"{model.name}: independent: unknown joint {x!r}; joints: "
                    f"{', '.join(model.joint_names)}"
                )
            if not names[x]:
                raise ValueError(f"{model.name}: independent: joint {x!r} has no coordinate")
            cols.extend(names[x])
        elif isinstance(x, int | np.integer) and not isinstance(x, bool | np.bool_):
            if not 0 <= x < model.nv:
                raise ValueError(
                    f"{model.name}: independent: index {x} out of range (indices into v, "
                    f"nv = {model.nv})"
                )
            cols.append(int(x))
        else:
            raise ValueError(
                f"{model.name}: independent: {x!r} is neither a joint name nor an index into v"
            )
    return np.unique(np.array(cols, dtype=np.int64))


# ------------------------------------------------------------------ a loop's kinematics
@kernel
def loop_jacobian(m, d, ip, fw, b):
    """J_i (m_i × n_path) and γ_i (m_i) of block b from the closure kinematics in ``d``.

    The phantom body's velocity relative to 0_i (eq. 33) along each closure row
    (``loopdyn.kinematics.closures``): u·(v_B − v_A(p_B)) for a translation row,
    n·(ω_B − ω_A) for a rotation row (world vectors ``d.rw``); the entries of a path
    body j are its point-Jacobian columns R_j S_j, + on B's side and − on A's side.
    A coupling row: J = e_b − ratio e_a.  γ_i: ``d.gamma`` on the rows.
    """
    topo, Xw, S, rw = m.topo, d.Xw, d.S, d.rw
    row_int, row_vec = m.row_int, m.row_vec
    bt = ip[ip[R_BLK] + b * NBLK : ip[R_BLK] + (b + 1) * NBLK]
    mb, npth = bt[B_M], bt[B_NP]
    J = block(fw, bt[B_J], (mb, npth))
    g = block(fw, bt[B_G], mb)
    rows = ip[ip[R_ROWS] + bt[B_ROW] : ip[R_ROWS] + bt[B_ROW] + mb]
    for i in range(mb):
        for p in range(npth):
            J[i, p] = 0.0
    for ci in range(bt[B_NCL]):
        o = ip[R_CL] + (bt[B_CL] + ci) * NCL
        k, r0, mc, npb, opb = ip[o + C_K], ip[o + C_ROW0], ip[o + C_M], ip[o + C_NPB], ip[o + C_PB]
        pb = ip[ip[R_PB] + opb : ip[R_PB] + opb + 3 * npb]
        lev = d.lev[k]  # p_B - o_j (closure_levers)
        coupling = False
        for t in range(mc):
            rr = rows[r0 + t]
            g[r0 + t] = d.gamma[rr]
            if row_int[rr, 1] == COUPLING:
                J[r0 + t, pb[5]] += 1.0
                J[r0 + t, pb[2]] -= row_vec[rr, 0, 0]
                coupling = True
        if coupling:
            continue
        # per path column its world axis w = R_j S_ω and the velocity of the point p_B,
        # l + w × (p_B − o_j), once; then one dot product per row
        for e in range(npb):
            j, p0 = pb[3 * e], pb[3 * e + 2]
            sign = 1.0 if pb[3 * e + 1] == 1 else -1.0
            d0, d1, d2 = lev[j, 0], lev[j, 1], lev[j, 2]
            for kk in range(topo[j, 5]):
                s0, s1, s2 = S[j, 0, kk], S[j, 1, kk], S[j, 2, kk]
                w0 = Xw[j, 0, 0] * s0 + Xw[j, 0, 1] * s1 + Xw[j, 0, 2] * s2
                w1 = Xw[j, 1, 0] * s0 + Xw[j, 1, 1] * s1 + Xw[j, 1, 2] * s2
                w2 = Xw[j, 2, 0] * s0 + Xw[j, 2, 1] * s1 + Xw[j, 2, 2] * s2
                s3, s4, s5 = S[j, 3, kk], S[j, 4, kk], S[j, 5, kk]
                t0 = Xw[j, 0, 0] * s3 + Xw[j, 0, 1] * s4 + Xw[j, 0, 2] * s5 + w1 * d2 - w2 * d1
                t1 = Xw[j, 1, 0] * s3 + Xw[j, 1, 1] * s4 + Xw[j, 1, 2] * s5 + w2 * d0 - w0 * d2
                t2 = Xw[j, 2, 0] * s3 + Xw[j, 2, 1] * s4 + Xw[j, 2, 2] * s5 + w0 * d1 - w1 * d0
                for t in range(mc):
                    rr = rows[r0 + t]
                    if row_int[rr, 1] == TRANSLATION:
                        val = rw[rr, 0, 0] * t0 + rw[rr, 0, 1] * t1 + rw[rr, 0, 2] * t2
                    else:
                        val = rw[rr, 2, 0] * w0 + rw[rr, 2, 1] * w1 + rw[rr, 2, 2] * w2
                    J[r0 + t, p0 + kk] += sign * val


@kernel
def factor_loop(ip, fw, b):
    """LU (partial pivoting) of Y1 = J_i[:, dependent] of block b; returns
    min|u_ii| / max|J_i| (1 for a block without rows, 0 for a zero J_i)."""
    bt = ip[ip[R_BLK] + b * NBLK : ip[R_BLK] + (b + 1) * NBLK]
    mb, npth, nind = bt[B_M], bt[B_NP], bt[B_NIND]
    if mb == 0:
        return 1.0
    J = block(fw, bt[B_J], (mb, npth))
    LU = block(fw, bt[B_LU], (mb, mb))
    cand = ip[ip[R_CAND] + bt[B_CAND] : ip[R_CAND] + bt[B_CAND] + bt[B_NU]]
    piv = ip[ip[R_PIV] + bt[B_PIV] : ip[R_PIV] + bt[B_PIV] + mb]
    return E.factor_columns(J, npth, cand[nind:], LU, piv)


@kernel
def loop_condition(ip, fw, b):
    """‖Y1‖₁ ‖Y1⁻¹‖₁ of block b from ``factor_loop``'s LU (m_i solves)."""
    bt = ip[ip[R_BLK] + b * NBLK : ip[R_BLK] + (b + 1) * NBLK]
    mb, npth, nind = bt[B_M], bt[B_NP], bt[B_NIND]
    J = block(fw, bt[B_J], (mb, npth))
    LU = block(fw, bt[B_LU], (mb, mb))
    y = block(fw, bt[B_T], mb)
    cand = ip[ip[R_CAND] + bt[B_CAND] : ip[R_CAND] + bt[B_CAND] + bt[B_NU]]
    piv = ip[ip[R_PIV] + bt[B_PIV] : ip[R_PIV] + bt[B_PIV] + mb]
    norm = 0.0
    for c in range(mb):
        t = 0.0
        for i in range(mb):
            t += abs(J[i, cand[nind + c]])
        norm = max(norm, t)
    return norm * lu_inverse_norm_exact(LU, mb, piv, y)


@kernel
def reselect(ip, fw, b):
    """Sec. 4.4: choose block b's dependent coordinates again among its undetermined
    ones by complete pivoting on J_i[:, undetermined] (the greedy best-conditioned Y1);
    both parts keep the loop's local order.  The aggregated body's independent columns
    (embedding's ``order``, slot by slot) follow."""
    bt = ip[ip[R_BLK] + b * NBLK : ip[R_BLK] + (b + 1) * NBLK]
    mb, npth, nu, nind = bt[B_M], bt[B_NP], bt[B_NU], bt[B_NIND]
    J = block(fw, bt[B_J], (mb, npth))
    T = block(fw, bt[B_T], (mb, nu))
    cand = ip[ip[R_CAND] + bt[B_CAND] : ip[R_CAND] + bt[B_CAND] + nu]
    isdep = ip[ip[R_DEP] + bt[B_PATH] : ip[R_DEP] + bt[B_PATH] + npth]
    path = ip[ip[R_PATH] + bt[B_PATH] : ip[R_PATH] + bt[B_PATH] + npth]
    for c in range(nu - 1):  # candidates in local order first
        for c2 in range(nu - 1 - c):
            if cand[c2] > cand[c2 + 1]:
                cand[c2], cand[c2 + 1] = cand[c2 + 1], cand[c2]
    for i in range(mb):
        for c in range(nu):
            T[i, c] = J[i, cand[c]]
    for p in range(npth):
        isdep[p] = 0
    for t in range(mb):
        bi, bj, big = t, 0, -1.0
        for i in range(t, mb):
            for c in range(nu):
                if isdep[cand[c]] == 0 and abs(T[i, c]) > big:
                    big, bi, bj = abs(T[i, c]), i, c
        if bi != t:
            for c in range(nu):
                T[t, c], T[bi, c] = T[bi, c], T[t, c]
        isdep[cand[bj]] = 1
        if T[t, bj] != 0.0:
            for i in range(t + 1, mb):
                f = T[i, bj] / T[t, bj]
                for c in range(nu):
                    T[i, c] -= f * T[t, c]
    # independent first, then dependent, each in local order
    t = 0
    for c in range(nu):
        T[0, c] = cand[c]  # scratch copy of the (sorted) candidates
    for flag in range(2):
        for c in range(nu):
            p = int(T[0, c])
            if isdep[p] == flag:
                cand[t] = p
                t += 1
    a = ip[ip[E.H_AGG] + bt[B_AGG] * E.NAGG : ip[E.H_AGG] + (bt[B_AGG] + 1) * E.NAGG]
    order = ip[ip[E.H_ORDER] + a[E.A_COL] : ip[E.H_ORDER] + a[E.A_COL] + a[E.A_NS]]
    for t in range(nind):
        order[bt[B_SLOT0] + t] = path[cand[t]]


@kernel
def reduce_loops(m, d, ip, fw, s):
    """Eqs. (33)–(55), (72)–(80): X (n_𝒮 × k) and ζ (n_𝒮) of aggregated body s, loop by
    loop in solution order.  Independent coordinates get X = e_slot, ζ = 0; a loop's
    dependent ones X[dep] = −Y1⁻¹ J_i[:, other] X[other] (Γ, Ξ) and
    ζ[dep] = Y1⁻¹ (γ_i − J_i[:, other] ζ[other]) (Θ), the other coordinates being its
    independent ones and those fixed by earlier loops.  Returns the smallest Y1 pivot
    ratio (> 0) or ``SINGULAR`` (the loop recorded in ``ip[R_FAIL]``)."""
    a = ip[ip[E.H_AGG] + s * E.NAGG : ip[E.H_AGG] + (s + 1) * E.NAGG]
    ns, k = a[E.A_NS], a[E.A_K]
    X = block(fw, a[E.A_X], (ns, k))
    zeta = block(fw, a[E.A_ZETA], ns)
    aggb = ip[ip[R_AGGB] : ip[R_AGGB] + ip[E.H_NA] + 1]
    worst = 1.0
    for b in range(aggb[s], aggb[s + 1]):
        loop_jacobian(m, d, ip, fw, b)
        ratio = factor_loop(ip, fw, b)
        cond = loop_condition(ip, fw, b) if RESELECT <= ratio < CHECK_RATIO else 0.0
        if ratio < RESELECT or cond > COND_MAX:
            reselect(ip, fw, b)
            ratio = factor_loop(ip, fw, b)
            cond = 0.0
        if 0.0 < ratio < CHECK_RATIO:  # as embedding.partition
            if cond == 0.0:
                cond = loop_condition(ip, fw, b)
            ratio = min(ratio, 1.0 / cond)
        bt = ip[ip[R_BLK] + b * NBLK : ip[R_BLK] + (b + 1) * NBLK]
        if ratio < SINGULAR_RATIO:
            ip[R_FAIL] = b
            fw[bt[B_T]] = ratio
            return SINGULAR
        worst = min(worst, ratio)
        mb, npth, nind, slot0 = bt[B_M], bt[B_NP], bt[B_NIND], bt[B_SLOT0]
        J = block(fw, bt[B_J], (mb, npth))
        g = block(fw, bt[B_G], mb)
        LU = block(fw, bt[B_LU], (mb, mb))
        Y = block(fw, bt[B_T], (mb, k + 1))
        cand = ip[ip[R_CAND] + bt[B_CAND] : ip[R_CAND] + bt[B_CAND] + bt[B_NU]]
        isdep = ip[ip[R_DEP] + bt[B_PATH] : ip[R_DEP] + bt[B_PATH] + npth]
        path = ip[ip[R_PATH] + bt[B_PATH] : ip[R_PATH] + bt[B_PATH] + npth]
        piv = ip[ip[R_PIV] + bt[B_PIV] : ip[R_PIV] + bt[B_PIV] + mb]
        for t in range(nind):
            col = path[cand[t]]
            for c in range(k):
                X[col, c] = 0.0
            X[col, slot0 + t] = 1.0
            zeta[col] = 0.0
        if mb == 0:
            continue
        # right-hand sides [−J_other X_other | γ − J_other ζ_other] (mb × (k + 1)), then
        # one multi-column solve with Y1's LU
        for i in range(mb):
            for c in range(k):
                Y[i, c] = 0.0
            Y[i, k] = g[i]
        for p in range(npth):
            if isdep[p] != 0:
                continue
            row = path[p]
            for i in range(mb):
                jip = J[i, p]
                if jip != 0.0:
                    for c in range(k):
                        Y[i, c] -= jip * X[row, c]
                    Y[i, k] -= jip * zeta[row]
        for i in range(mb):  # row pivots, as lu_solve
            pi = piv[i]
            if pi != i:
                for c in range(k + 1):
                    Y[i, c], Y[pi, c] = Y[pi, c], Y[i, c]
        for i in range(mb):
            for r in range(i):
                f = LU[i, r]
                if f != 0.0:
                    for c in range(k + 1):
                        Y[i, c] -= f * Y[r, c]
        for i in range(mb - 1, -1, -1):
            for r in range(i + 1, mb):
                f = LU[i, r]
                if f != 0.0:
                    for c in range(k + 1):
                        Y[i, c] -= f * Y[r, c]
            f = LU[i, i]
            for c in range(k + 1):
                Y[i, c] /= f
            col = path[cand[nind + i]]
            for c in range(k):
                X[col, c] = Y[i, c]
            zeta[col] = Y[i, k]
    return worst


# ------------------------------------------------------------------ multipliers
@kernel
def loop_multipliers(m, d, ip, fw, s, tau, qdd, lam):
    """Multipliers of aggregated body s's rows into ``lam`` (positions in ``d.rows``) and
    the relative residual of J_i θ̈_i = γ_i over its loops (the acceptance check).

    Member joint forces F_j = P_j a_j + z_j + Σ_{c in 𝒮} cXjᵀ F_c (RNEA on 𝒮's tree,
    outside children through P_j and z_j) give ρ = S_𝒮ᵀ F_𝒮 − τ_𝒮 = J_𝒮ᵀ λ_𝒮; the loops
    in reverse solution order: Y1ᵀ λ_i = ρ[dep_i], then ρ −= J_iᵀ λ_i on the loop's other
    coordinates (those fixed by earlier loops).  The residual is relative to
    |J_i| max(|θ̈_i|, a) + |γ_i|, a the size of the accelerations combined.
    """
    a = ip[ip[E.H_AGG] + s * E.NAGG : ip[E.H_AGG] + (s + 1) * E.NAGG]
    nmem, ns = a[E.A_NMEM], a[E.A_NS]
    aggb = ip[ip[R_AGGB] : ip[R_AGGB] + ip[E.H_NA] + 1]
    mem = ip[ip[E.H_MEM] + a[E.A_MEM] : ip[E.H_MEM] + a[E.A_MEM] + nmem]
    cols = ip[ip[E.H_COLS] + a[E.A_COL] : ip[E.H_COLS] + a[E.A_COL] + ns]
    aggof = ip[ip[E.H_AGGOF] : ip[E.H_AGGOF] + ip[E.H_NB]]
    colstart = ip[ip[E.H_COLSTART] : ip[E.H_COLSTART] + ip[E.H_NB]]
    rho = block(fw, ip[R_RHO], m.nv)
    # member joint forces, tips to base within 𝒮, and ρ = Sᵀ F − τ (𝒮's column order)
    E.member_forces(m, d, s, mem, cols, colstart, aggof, tau, rho)
    qscale = fw[a[E.A_SC]]
    res = 0.0
    scale = 0.0
    for b in range(aggb[s + 1] - 1, aggb[s] - 1, -1):
        bt = ip[ip[R_BLK] + b * NBLK : ip[R_BLK] + (b + 1) * NBLK]
        mb, npth, nind = bt[B_M], bt[B_NP], bt[B_NIND]
        if mb == 0:
            continue
        J = block(fw, bt[B_J], (mb, npth))
        g = block(fw, bt[B_G], mb)
        LU = block(fw, bt[B_LU], (mb, mb))
        y = block(fw, bt[B_T], mb)
        cand = ip[ip[R_CAND] + bt[B_CAND] : ip[R_CAND] + bt[B_CAND] + bt[B_NU]]
        isdep = ip[ip[R_DEP] + bt[B_PATH] : ip[R_DEP] + bt[B_PATH] + npth]
        path = ip[ip[R_PATH] + bt[B_PATH] : ip[R_PATH] + bt[B_PATH] + npth]
        piv = ip[ip[R_PIV] + bt[B_PIV] : ip[R_PIV] + bt[B_PIV] + mb]
        lpos = ip[ip[R_LPOS] + bt[B_ROW] : ip[R_LPOS] + bt[B_ROW] + mb]
        # acceptance: |J_i θ̈_i − γ_i|∞
        qmax = qscale
        for p in range(npth):
            qmax = max(qmax, abs(qdd[cols[path[p]]]))
        for i in range(mb):
            t = -g[i]
            jmax = 0.0
            for p in range(npth):
                t += J[i, p] * qdd[cols[path[p]]]
                jmax = max(jmax, abs(J[i, p]))
            res = max(res, abs(t))
            scale = max(scale, jmax * qmax + abs(g[i]))
        # Y1ᵀ λ_i = ρ[dep]
        for jx in range(mb):
            y[jx] = rho[path[cand[nind + jx]]]
        lu_solve_transpose(LU, mb, piv, y)
        for i in range(mb):
            lam[lpos[i]] = y[i]
        for p in range(npth):
            if isdep[p] == 0:
                t = 0.0
                for i in range(mb):
                    t += J[i, p] * y[i]
                rho[path[p]] -= t
    return res / scale if scale > 0.0 else res


# ------------------------------------------------------------------ the kernel
@njit(cache=True, inline="always")  # one call site (its entry / kernel): no library of its own
def rcr_kernel(m, d, ip, fw, q, v, tau, qdd, lam):
    """q̈ (nv, every tree coordinate) and λ (the independent rows, ``d.rows`` order) of a
    closed-loop model by recursive coordinate reduction.

    In: the handles ``m``, ``d``, the plan ``ip``, ``fw`` (``RcrPlan``), a state ``q``
    (nq), ``v`` (nv) and joint forces ``tau`` (nv).  Returns the smallest Y1 pivot
    ratio of the loops (> 0) or a status < 0 (``methods.common``): ``INACCURATE`` when a
    refined answer misses ``EOM_TOL`` (``refine``).
    """
    ip[R_FAIL] = -1
    # kinematics: poses, S, velocities, c = v ×m S q̇ + Ṡ q̇; closure rows and γ
    fk_kernel(m, d, q, v)
    bias_accelerations(m, d)
    closure_terms(m, d, q, v, unliteral(True), ip[E.H_WANTJ] != 0)
    quality, rel, ascale = recursion(m, d, ip, fw, tau, qdd, lam, unliteral(True))
    if quality < 0.0:
        d.diag[DIAG_QUALITY] = 0.0
        return quality
    # iterative refinement where the recursion may have lost digits: articulated pivots
    # spread over many decades (mass ratios ~1e5: errors up to ~1e-7, as embedding), or
    # a loop whose best dependent coordinates still leave Y1 ill-conditioned (X carries
    # cond(Y1)² into the reduced inertia D)
    d.diag[DIAG_REFINED] = 0.0
    pr = E.pivot_ratio(m, d, ip, fw)
    if rel <= RESIDUAL_TOL and (
        quality < RESELECT
        or pr < E.REFINE_PIVOT_RATIO
        or (
            pr < E.CHECK_PIVOT_RATIO
            and eom_residual(m, d, ip, fw, tau, qdd, lam, d.phi) > E.REFINE_EOM_TOL
        )
    ):
        ascale = E.acceleration_scale(m, d, ascale, qdd)
        if refine(m, d, ip, fw, tau, qdd, lam, ascale) < 0:
            d.diag[DIAG_QUALITY] = quality
            d.diag[DIAG_RESIDUAL] = d.diag[DIAG_EOM]
            d.diag[DIAG_ASCALE] = ascale
            return INACCURATE
    return E.verdict(m, d, quality, rel, ascale, qdd, lam)


@kernel
def recursion(m, d, ip, fw, tau, qdd, lam, bias):
    """RCR's three sweeps on the kinematics in ``d``: tips to base (ordinary joints,
    eqs. 14–19; per loop group at its head the loops reduced, eqs. 33–55, 72–80, and the
    virtual terminal bodies triangularized into the base body, eqs. 56–66), base to tips
    (forward substitution, eqs. 67–71), then the multipliers.  ``bias``: start from
    p^A = v ×* I v and reduce the loops (X, ζ); else a correction solve (``refine``):
    p^A = 0, X and the Y1 factors of the last reduction kept, ζ = 0 (J δθ̈ = 0), the
    velocity products ``d.C`` and gravity whatever ``d`` and ``m`` hold (zero then).
    Returns (quality, rel, ascale): the smallest Y1 pivot ratio (or a status < 0), the
    largest relative residual of J_i θ̈_i = γ_i and the acceleration scale."""
    nb = m.nb
    agg = ip[ip[E.H_AGG] : ip[E.H_AGG] + ip[E.H_NA] * E.NAGG]
    aggof = ip[ip[E.H_AGGOF] : ip[E.H_AGGOF] + nb]
    E.articulated_start(m, d, bias)
    if not bias:
        for s in range(ip[E.H_NA]):
            a = agg[s * E.NAGG : (s + 1) * E.NAGG]
            zeta = block(fw, a[E.A_ZETA], a[E.A_NS])
            for col in range(a[E.A_NS]):
                zeta[col] = 0.0
    # tips to base
    quality = 1.0
    for i in range(nb - 1, -1, -1):
        s = aggof[i]
        if s < 0:
            if not E.joint_inward(m, d, i, tau):
                return SINGULAR, 0.0, 0.0
        elif agg[s * E.NAGG + E.A_HEAD] == i:
            if bias:
                st = reduce_loops(m, d, ip, fw, s)
                if st < 0.0:
                    return st, 0.0, 0.0
                quality = min(quality, st)
            if E.aggregate_inward(m, d, ip, fw, s, tau) < 0.0:
                return SINGULAR, 0.0, 0.0
    # base to tips
    for i in range(nb):
        s = aggof[i]
        if s < 0:
            E.joint_outward(m, d, i, qdd)
        elif agg[s * E.NAGG + E.A_HEAD] == i:
            E.aggregate_outward(m, d, ip, fw, s, qdd)
    # multipliers and the acceptance check, loop group by loop group
    rel = 0.0
    ascale = 0.0
    for s in range(ip[E.H_NA]):
        rel = max(rel, loop_multipliers(m, d, ip, fw, s, tau, qdd, lam))
        ascale = max(ascale, fw[agg[s * E.NAGG + E.A_SC]])
    return quality, rel, ascale


@kernel
def eom_residual(m, d, ip, fw, tau, qdd, lam, r1):
    """r1 = τ + Jᵀλ − M q̈ − h on the kinematics in ``d``, as ``embedding.eom_residual``
    but with Jᵀλ from RCR's own loop blocks J_i (``loop_jacobian``), the J its solve
    uses: λ's closure loads carried through the tree are its transpose only to rounding
    (they cancel in the cut bodies' common ancestors to eps·|λ|; when they were placed
    from world positions, a ball closure 2.2e-13 m off a universal joint's centre left a
    refinement measuring with them converged to another system, q̈ 1.2e-5 off).
    Returns |r1|∞ relative to the forces that cancel in it.  Overwrites ``A``, ``F`` and
    ``tauc``."""
    E.open_residual(m, d, qdd, r1)
    jt = d.tauc
    aggb = ip[ip[R_AGGB] : ip[R_AGGB] + ip[E.H_NA] + 1]
    for s in range(ip[E.H_NA]):
        a = ip[ip[E.H_AGG] + s * E.NAGG : ip[E.H_AGG] + (s + 1) * E.NAGG]
        cols = ip[ip[E.H_COLS] + a[E.A_COL] : ip[E.H_COLS] + a[E.A_COL] + a[E.A_NS]]
        for b in range(aggb[s], aggb[s + 1]):
            bt = ip[ip[R_BLK] + b * NBLK : ip[R_BLK] + (b + 1) * NBLK]
            mb, npth = bt[B_M], bt[B_NP]
            if mb == 0:
                continue
            J = block(fw, bt[B_J], (mb, npth))
            path = ip[ip[R_PATH] + bt[B_PATH] : ip[R_PATH] + bt[B_PATH] + npth]
            lpos = ip[ip[R_LPOS] + bt[B_ROW] : ip[R_LPOS] + bt[B_ROW] + mb]
            for i in range(mb):
                li = lam[lpos[i]]
                for p in range(npth):
                    jt[cols[path[p]]] += J[i, p] * li
    return E.close_residual(m, d, tau, r1)


@njit(cache=True, inline="always")  # one call site (its entry / kernel): no library of its own
def refine(m, d, ip, fw, tau, qdd, lam, scale):
    """Iterative refinement of (q̈, λ), as ``embedding.refine``: for the residual of the
    equations of motion r1 = τ + Jᵀλ − M q̈ − h (``eom_residual``, Jᵀ from RCR's J), the
    correction (δq̈, δλ) with M δq̈ = r1 + Jᵀ δλ, J δq̈ = 0 is ``recursion`` with r1 as
    joint forces on the same loop reduction (ζ = 0) without velocity products or
    gravity (held aside meanwhile: C in ``d.fext``, g in registers; restored after).
    Up to ``MAX_REFINE`` steps until the correction is at rounding level
    (``refinement_verdict``); then the residual is checked: above ``EOM_TOL`` (into
    ``d.diag[DIAG_EOM]``) or diverging corrections return -1 (the runner falls back, or
    raises with the residual).  Returns the steps taken.  Workspace: ``d.phi`` (r1),
    ``d.x`` (δq̈), ``d.lam`` (δλ)."""
    r1, dq, dl = d.phi, d.x, d.lam[: d.nrows]
    code, prev = REFINE_GO_ON, 0.0
    for step in range(MAX_REFINE):
        eom_residual(m, d, ip, fw, tau, qdd, lam, r1)
        g0, g1, g2 = E.hold_bias(m, d)
        # r1 typed as the entry's τ (as_input): one compiled recursion, not two
        st, _, _ = recursion(m, d, ip, fw, as_input(r1), dq, dl, unliteral(False))
        E.restore_bias(m, d, g0, g1, g2)
        code, prev = E.take_step(d, st, step, prev, scale, dq, dl, qdd, lam)
        if code != REFINE_GO_ON:
            break
    return -1 if code < 0 else E.eom_verdict(d, eom_residual(m, d, ip, fw, tau, qdd, lam, r1), code)


def rcr_entry(ctx, pbuf, q, v, tau, qdd, lam):
    """``rcr_kernel`` on a Data's buffer and the plan's buffer, inputs checked."""
    m, d, ip, fw, st = checked_plan(ctx, pbuf, q, v, tau)
    return st if st < 0.0 else rcr_kernel(m, d, ip, fw, q, v, tau, qdd, lam)


ENTRY = method_entry(rcr_entry, planned=True)


def replan(model, d, q, v, tau):
    """After a call that failed with the paper's choice of coordinates (``SINGULAR``, or
    ``INACCURATE`` with a poorly conditioned loop; the runner's hook, rows re-detected):
    while a loop block fails because the loops solved before it fixed coordinates it
    needs (no well-conditioned Y1 is left among its undetermined coordinates, though the
    rows are independent), merge it with the earlier blocks that share coordinates with
    it, schedule again and retry.  A plan that then succeeds replaces ``d``'s cached
    one; otherwise the cached plan is kept.  Beyond the paper (Sec. 3 chains loops that
    share a base body one after the other; coupled loops without that structure are
    left open, Sec. 5): the merged block is solved as one, with the same Y1, X, ζ
    algebra (eqs. 47–55).  A block with no earlier block sharing its coordinates is a
    singular configuration of its loop (``explain``).  Returns True if the plan
    changed."""
    rows = d.rows[: d.nrows]
    key = ("rcr", rows.tobytes(), None)
    first = plan_for(model, d)
    if d.nrows < model.m:
        d.ensure_dense()
    qdd, lam = np.empty(model.nv), np.empty(max(d.nrows, 1))
    plan = first
    for _ in range(model.m + 1):
        st = ENTRY.compile()(d.ctx, plan.buf, q, v, tau, qdd, lam)
        if st > 0.0:
            break
        b = _worst_block(plan) if st == INACCURATE else int(plan.ip[R_FAIL])
        if st not in (SINGULAR, INACCURATE) or b < 0:
            break
        s, path = plan.blocks[b][0], set(plan.blocks[b][2])
        group = set(plan.block_closures[b])
        for b2 in range(b):
            if (
                plan.blocks[b2][0] == s
                and plan.block_closures[b2]
                and path & set(plan.blocks[b2][2])
            ):
                group |= plan.block_closures[b2]
        if len(group) == len(plan.block_closures[b]):
            break  # nothing earlier to merge with: the loop itself is singular here
        merges = [set(group)]
        for g in plan.merges:  # overlapping merges become one
            if g & merges[0]:
                merges[0] |= g
            else:
                merges.append(set(g))
        plan = RcrPlan(model, np.array(rows), None, [frozenset(g) for g in merges])
    if plan is not first and st > 0.0:
        d.plans[key] = plan
        return True
    return False


def _worst_block(plan):
    """The block whose Y1 (as the last call factored it) has the largest condition
    number, if that is above 1 / ``RESELECT`` (a loop the re-selection could not make
    well conditioned); else -1."""
    worst, b = 1.0 / RESELECT, -1
    ip, fw = plan.ip, plan.fw
    for k, bt in enumerate(plan.table):
        mb, npth, nind = int(bt[B_M]), int(bt[B_NP]), int(bt[B_NIND])
        if mb == 0:
            continue
        J = fw[bt[B_J] : bt[B_J] + mb * npth].reshape(mb, npth)
        cand = ip[ip[R_CAND] + bt[B_CAND] : ip[R_CAND] + bt[B_CAND] + bt[B_NU]]
        c = np.linalg.cond(J[:, cand[nind:]])
        if not c <= worst:
            worst, b = c, k
    return b


def bind(model, d, independent=None):
    """The ``ld.forward_dynamics`` call of RCR on ``d`` for its current independent rows:
    ``(q, v, tau, qdd, lam) -> quality > 0 or a status < 0``.  ``independent``: the
    chosen independent coordinates (``RcrPlan``; None for the paper's choice).

    Raises :class:`loopdyn.ModelError` for loops that cannot be treated (none in the
    catalog: loops that cannot be solved one by one are merged), ``DependentRows`` when
    a choice of ``independent`` is to be checked before the rank was detected, and
    ``RcrPlan``'s errors for a choice that does not fit.  The dense J is only read when
    rows were dropped as redundant."""
    if independent is not None and d.rank_info is None:
        raise DependentRows(f"{model.name}: independent= is checked against the closure rank")
    plan = plan_for(model, d, independent)
    if d.nrows < model.m:
        d.ensure_dense()
    return partial(ENTRY.compile(), d.ctx, plan.buf)


def explain(model, d, q=None, v=None, tau=None, independent=None, also=""):
    """Raise the :class:`SingularityError` of a loop that RCR could not solve: the loop,
    its undetermined joints and the condition number of its Y1 (Sec. 4.4); nothing if
    no loop failed.  Without ``q``: the last call on ``d``'s current plan; with ``q``,
    ``v``, ``tau``: RCR run again there on every row (the runner's hook, after a failed
    call).  ``also`` is appended to the message."""
    if q is not None:
        try:
            plan = plan_for(model, d, independent)
        except (DependentRows, ModelError, SingularityError):
            return
        if d.nrows < model.m:
            d.ensure_dense()
        qdd, lam = np.empty(model.nv), np.empty(d.nrows)
        if ENTRY.compile()(d.ctx, plan.buf, q, v, tau, qdd, lam) != SINGULAR:
            return
    plan = plan_for(model, d, independent)
    b = int(plan.ip[R_FAIL])
    if b < 0:
        return
    names, path = plan.blocks[b][1:3]
    bt = plan.table[b]
    mb, npth = int(bt[B_M]), int(bt[B_NP])
    J = plan.fw[bt[B_J] : bt[B_J] + mb * npth].reshape(mb, npth)
    cand = plan.ip[plan.ip[R_CAND] + bt[B_CAND] : plan.ip[R_CAND] + bt[B_CAND] + bt[B_NU]]
    Y1 = J[:, cand[int(bt[B_NIND]) :]]
    cond = np.linalg.cond(Y1) if Y1.size else np.inf
    coords = coordinate_names(model)
    raise SingularityError(
        f"{model.name}: RCR loop {', '.join(names)}: no well-conditioned choice of its "
        f"{mb} dependent coordinates among {', '.join(coords[path[p]] for p in cand)} "
        f"(condition number of Y1 {cond:.3g}): a singular configuration of the loop"
        + (f"; {also}" if also else "; use method='augmented' or move away from it")
    )


__all__ = ["ENTRY", "RcrPlan", "bind", "explain", "independent_columns", "plan_for", "replan"]
