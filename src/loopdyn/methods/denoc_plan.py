"""DeNOC's plan: the numbers and tables its kernels share, beside the algorithm.

``loopdyn.methods.denoc`` holds the algorithm (Saha & Schiehlen's steps, in the paper's
order); this module its plumbing: the tolerances and status codes of the kernels, the
plan buffer ``pb`` (the leg and column tables and the float workspace, one float64
buffer: its layout, the views the kernels carve from it), the few small dense helpers
the kernels share (Φ_i applied in product form, 6×6 symmetric sums), the Python
``DenocLayout`` / ``DenocPlan`` built from ``parallel_structure`` and ``_explain``, which
turns a kernel's status into the error a user reads.
"""

import numpy as np
from numba import njit

from loopdyn.errors import ModelError, SingularityError
from loopdyn.kernels.numba_internals import (
    block,
    block_int,
)
from loopdyn.methods.common import (
    DIAG_RESIDUAL,
    INACCURATE,
    NONFINITE_INPUT,
    SINGULAR,
)
from loopdyn.topology.parallel import OTHER_METHODS, parallel_structure

# relative size of δ_i (sin² of the angle between s_i and the later unactuated twists)
# below which a leg's unactuated joints count as dependent (a singularity of the leg):
# the leg's rates amplify the rounding of its twists by up to 1/δ_i, so far below this
# DeNOC's q̈ is off where the dense solve is still exact (the census of
# ``tests/parallel_mechanisms.py``: 2e-4 relative at δ_i = 2e-12)
DELTA_TOL = 1e-10
# the multiplier fits' Cholesky pivot ratio below which they are singular
PIVOT_TOL = 1e-13
# DeNOC's accuracy limits (``docs/denoc.md``, "Exact or error"): the actuated joints are a
# poor chart of the motion where Φ of (14a) or the GIM of (25) is ill-conditioned, even
# where the mechanism itself is regular (a parallel singularity of the actuators, or
# nearly dependent joints on a leg); the solves and the rate maps there lose up to
# eps · cond, which the acceptance check J q̈ = γ cannot see (the error lies along the
# motion).  Measured on random parallel mechanisms: q̈ off by up to 7 eps cond(Φ)
# (2.2e-8 at cond 1.4e7) and 2.5 eps / ρ_I (1/ρ_I 1.3e7: 5.5e-9; 8e9: 3.6e-7), ρ_I the
# smallest ratio of a GIM Cholesky pivot to its diagonal entry (the conditioning of I
# up to the scaling of its coordinates, i.e. up to mass ratios, which cost nothing)
PHI_TOL = 1e-6  # 1 / (tr Φ · tr Φ⁻¹) (cond₂(Φ) <= tr Φ · tr Φ⁻¹ <= 36 cond₂(Φ))
GIM_TOL = 1e-6  # ρ_I
# below this quality (the smallest of the ratios above, the multiplier fits' ρ and the
# smallest δ_i/|s_i|²) or this conditioning of the multipliers' recovery (``info[_LCOND]``:
# a direct fit not kept, a nearly serial-singular leg) the equations of motion with λ are
# checked too, by two RNEA passes (``force_residual``)
CHECK_TOL = 1e-6
# ... to this relative residual |M q̈ + h - τ - Jᵀλ|∞ / (|M q̈ + h|∞ + |Jᵀλ|∞ + |τ|∞): an
# exact answer leaves rounding (~1e-15); a multiplier fit through a nearly serial-singular
# leg (|g|²/|s_k|² = 2e-10) left 2.9e-8 of λ at a residual of 1e-9
FORCE_TOL = 1e-9
# ... and the velocity: DeNOC reads only the actuated rates of v and completes the others
# by (11b)/(12b); where they differ from the given ones by dv, q̈ differs by up to
# ~2 |r|₁ dv / |v| of the acceleration scale (|r|₁ the largest 1-norm of a rate map:
# the velocity products move with the rates), which must stay below this
VELOCITY_TOL = 1e-8
# pivots of Σ_l P_l (a sum of orthogonal projectors: eigenvalues 0 or ≥ ~1) below
# this, relative to its largest diagonal entry, are its null space
NULL_TOL = 1e-9
# why a kernel returned SINGULAR or INACCURATE (``info[_WHY]``; 0: the loop check)
WHY_LEG, WHY_PHI, WHY_GIM, WHY_LAMBDA, WHY_VELOCITY, WHY_FORCES = 1, 2, 3, 4, 5, 6
# the world position of frame B's origin in the closure workspace ``d.cw[k]``
# (``loopdyn.kinematics.closures``)
_CW_PB = 7

# columns of the leg table (L, 10): first and end column, actuated column (-1: none),
# closes on the ground, the leg's closure (-1: none) with its first and last column
# and the sign of its columns, the position of its first independent row in ``d.rows``
# and their number
_C0, _C1, _K, _CLOSED, _CL, _G0L, _G1L, _SIG, _A0, _P = range(10)
# columns of the column table (C, 11)
_TYPE, _OBJ, _SUB, _SIGN, _IV, _AFTER, _G0, _G1, _SLOT, _SIDE, _ROT = range(11)
# rows of the small-vector scratch ``vec`` (8, 6)
_TE, _AE, _WBAR, _Y, _Z, _T1, _T2, _E = range(8)
# entries of ``info``: the failing column, why, the inverse dynamics' diagnostics, the
# smallest δ_i/|s_i|² of the legs, the forward kernel's velocity estimate and the
# conditioning of the multipliers' recovery (``multipliers``)
_BADCOL, _WHY, _RES2, _B2, _CERR, _RESINF, _DMIN, _VEST, _LCOND = range(9)

# ------------------------------------------------------------------ the plan buffer
# pb = [header (int64) | section offsets (int64) | int sections | float sections]
# header: L, C, NS, n, platform body, the leg the platform hangs from (-1), r, and 1 if
# every cut leg has at least as many tree columns as rows (``cut_multipliers``)
_HEAD = 8
_INT_SECTIONS = ("leg", "col", "bslot", "slotcol")
_FLOAT_SECTIONS = (
    "cax", "s", "pt", "dinv", "rate", "arate", "tw", "ac", "b", "Phi", "Lc", "JT", "xi",
    "vec", "Ms", "ws", "R7", "l7", "P", "rm", "Ig", "Lg", "XJ", "X", "th", "thdd",
    "ua", "info", "g", "T", "Wc", "bk", "zr", "jx", "jr", "dc", "dg", "dz", "ig", "a0", "sw",
)  # fmt: skip
_SECTIONS = _INT_SECTIONS + _FLOAT_SECTIONS
(
    _LEG, _COL, _BSLOT, _SLOTCOL, _CAX, _S, _PT, _DINV, _RATE, _ARATE, _TW, _AC, _B, _PHI, _LC,
    _JT, _XI, _VEC, _MS, _WS, _R7, _L7, _PP, _RM, _IG, _LG, _XJ, _XX, _TH, _THDD, _UA,
    _INFO, _GG, _TT, _WC, _BK, _ZR, _JX, _JR, _DC, _DG, _DZ, _IGG, _A0S, _SW,
) = range(len(_SECTIONS))  # fmt: skip


def _float_shapes(L, C, NS, n, r):
    return {
        "cax": (C, 3), "s": (C, 6), "pt": (C, 6), "dinv": (C,), "rate": (C,), "arate": (C,),
        "tw": (C, 6), "ac": (C, 6), "b": (C, 6), "Phi": (6, 6), "Lc": (6, 6), "JT": (n, 6),
        "xi": (L, 6), "vec": (8, 6), "Ms": (NS + 1, 6, 6), "ws": (NS + 1, 6), "R7": (L, 7, 7),
        "l7": (L, 7), "P": (6, 6), "rm": (C, 7), "Ig": (n, n), "Lg": (n, n),
        "XJ": (n, 6), "X": (6, 6), "th": (n,), "thdd": (n,), "ua": (n,), "info": (9,),
        "g": (L, 6), "T": (L, 6), "Wc": (L, 6), "bk": (L,), "zr": (r, 6), "jx": (r,),
        "jr": (r,), "dc": (6,), "dg": (n,), "dz": (6,), "ig": (L,), "a0": (NS + 1, 6), "sw": (C,),
    }  # fmt: skip


@njit(cache=True, inline="always")
def _head(pb):
    """The plan's header: L, C, NS, n, platform body, hanger leg, r, direct-λ flag."""
    return block_int(pb, 0, _HEAD)


@njit(cache=True, inline="always")
def _bounds(pb, s):
    o = block_int(pb, _HEAD + s, 2)
    return o[0], o[1]


@njit(cache=True, inline="always")
def _i1(pb, s):
    o0, o1 = _bounds(pb, s)
    return block_int(pb, o0, o1 - o0)


@njit(cache=True, inline="always")
def _i2(pb, s, w):
    o0, o1 = _bounds(pb, s)
    return block_int(pb, o0, ((o1 - o0) // w, w))


@njit(cache=True, inline="always")
def _f1(pb, s):
    o0, o1 = _bounds(pb, s)
    return block(pb, o0, o1 - o0)


@njit(cache=True, inline="always")
def _f2(pb, s, w):
    o0, o1 = _bounds(pb, s)
    return block(pb, o0, ((o1 - o0) // w, w))


@njit(cache=True, inline="always")
def _f3(pb, s, a, w):
    o0, o1 = _bounds(pb, s)
    return block(pb, o0, ((o1 - o0) // (a * w), a, w))


# ------------------------------------------------------------------ small solves
@njit(cache=True, inline="always")
def _trace6(A):
    return A[0, 0] + A[1, 1] + A[2, 2] + A[3, 3] + A[4, 4] + A[5, 5]


@njit(cache=True, inline="always")
def _sym_add(P, a, x0, x1, x2, x3, x4, x5):
    """P + a x xᵀ for a symmetric 6×6 P held as the 21-tuple of its upper triangle (row
    by row): kept in registers, where the same update on a section of the plan buffer
    would reload and store every entry (the sections may alias)."""
    return (
        P[0] + a * x0 * x0,
        P[1] + a * x0 * x1,
        P[2] + a * x0 * x2,
        P[3] + a * x0 * x3,
        P[4] + a * x0 * x4,
        P[5] + a * x0 * x5,
        P[6] + a * x1 * x1,
        P[7] + a * x1 * x2,
        P[8] + a * x1 * x3,
        P[9] + a * x1 * x4,
        P[10] + a * x1 * x5,
        P[11] + a * x2 * x2,
        P[12] + a * x2 * x3,
        P[13] + a * x2 * x4,
        P[14] + a * x2 * x5,
        P[15] + a * x3 * x3,
        P[16] + a * x3 * x4,
        P[17] + a * x3 * x5,
        P[18] + a * x4 * x4,
        P[19] + a * x4 * x5,
        P[20] + a * x5 * x5,
    )


@njit(cache=True, inline="always")
def _sym_store(A, P):
    """A (6×6) ← the symmetric matrix of the 21-tuple P (``_sym_add``), static indices."""
    A[0, 0] = P[0]
    A[0, 1] = P[1]
    A[1, 0] = P[1]
    A[0, 2] = P[2]
    A[2, 0] = P[2]
    A[0, 3] = P[3]
    A[3, 0] = P[3]
    A[0, 4] = P[4]
    A[4, 0] = P[4]
    A[0, 5] = P[5]
    A[5, 0] = P[5]
    A[1, 1] = P[6]
    A[1, 2] = P[7]
    A[2, 1] = P[7]
    A[1, 3] = P[8]
    A[3, 1] = P[8]
    A[1, 4] = P[9]
    A[4, 1] = P[9]
    A[1, 5] = P[10]
    A[5, 1] = P[10]
    A[2, 2] = P[11]
    A[2, 3] = P[12]
    A[3, 2] = P[12]
    A[2, 4] = P[13]
    A[4, 2] = P[13]
    A[2, 5] = P[14]
    A[5, 2] = P[14]
    A[3, 3] = P[15]
    A[3, 4] = P[16]
    A[4, 3] = P[16]
    A[3, 5] = P[17]
    A[5, 3] = P[17]
    A[4, 4] = P[18]
    A[4, 5] = P[19]
    A[5, 4] = P[19]
    A[5, 5] = P[20]


@njit(cache=True, inline="always")
def apply_phi(c0, c1, k, i0, pt, dinv, x):
    """x ← Φ_{i0} x, Φ_{i0} the projector of eq. (11d)/(12d) removing the unactuated twists of
    columns i0 … c1-1: the product Π_j (1 - p̃_j p̃_jᵀ/δ_j) of the leg's orthogonal p̃_j
    (j = c1-1 … i0, j ≠ k), applied factor by factor (modified Gram–Schmidt)."""
    # x in registers during the product (x may be a row of pt's own buffer)
    x0, x1, x2, x3, x4, x5 = x[0], x[1], x[2], x[3], x[4], x[5]
    for j in range(c1 - 1, i0 - 1, -1):
        if j == k:
            continue
        p0, p1, p2, p3, p4, p5 = pt[j, 0], pt[j, 1], pt[j, 2], pt[j, 3], pt[j, 4], pt[j, 5]
        c = (p0 * x0 + p1 * x1 + p2 * x2 + p3 * x3 + p4 * x4 + p5 * x5) * dinv[j]
        x0 -= c * p0
        x1 -= c * p1
        x2 -= c * p2
        x3 -= c * p3
        x4 -= c * p4
        x5 -= c * p5
    x[0], x[1], x[2], x[3], x[4], x[5] = x0, x1, x2, x3, x4, x5


@njit(cache=True)
def leg_wrench_sweep(pb):
    """Every leg swept from the platform end as in IDA-1 (eq. 21): ``sw[i]`` = s_iᵀ W_{≥i}
    for every column i, W_{≥i} the sum of the wrenches ``ws`` (18a) of the leg's bodies
    beyond joint i (about E, world axes), and ``Wc[l]`` = W_{≥g} at the leg's last cut
    column g (``_G1L``; legs without a cut joint leave ``Wc[l]`` as it was).  Shared by
    ``backward_pass`` and the multipliers' ``transmitted_wrenches``, ``cut_multipliers``."""
    leg, col, s = _i2(pb, _LEG, 10), _i2(pb, _COL, 11), _f2(pb, _S, 6)
    ws, Wc, sw = _f2(pb, _WS, 6), _f2(pb, _WC, 6), _f1(pb, _SW)
    for l in range(leg.shape[0]):
        c0, c1, g1 = leg[l, _C0], leg[l, _C1], leg[l, _G1L]
        w0 = w1 = w2 = w3 = w4 = w5 = 0.0  # W_{≥i}
        for i in range(c1 - 1, c0 - 1, -1):
            sl = col[i, _SLOT]
            if sl >= 0:
                w0 += ws[sl, 0]
                w1 += ws[sl, 1]
                w2 += ws[sl, 2]
                w3 += ws[sl, 3]
                w4 += ws[sl, 4]
                w5 += ws[sl, 5]
            if i == g1:
                Wc[l, 0], Wc[l, 1], Wc[l, 2] = w0, w1, w2
                Wc[l, 3], Wc[l, 4], Wc[l, 5] = w3, w4, w5
            sw[i] = (
                s[i, 0] * w0 + s[i, 1] * w1 + s[i, 2] * w2 + s[i, 3] * w3 + s[i, 4] * w4
                + s[i, 5] * w5
            )  # fmt: skip


# ------------------------------------------------------------------ the plan (Python)
class DenocLayout:
    """The DeNOC tables of a model (built once from its ``ParallelStructure``, cached on
    the model as ``model._denoc_layout``).

    ``ps``: the structure; ``legs`` (L, 10) and ``col`` (C, 11): the leg and column
    tables (see ``_C0`` … and ``_TYPE`` …; the leg table's row columns are filled per
    plan); ``columns``: every column in order, as ``(leg, Column)``; ``slot_after``
    (C): the leg body after each column (``ps.slots`` index; -1 on the ground, -2 the
    platform, -3 none: the massless link between two axes of one joint); ``hanger``:
    the leg without cut joint that carries the platform in the tree (-1: none).
    Raises ``ModelError`` for the models in the class whose multipliers DeNOC cannot
    recover (weld closures; a platform leg without cut joint other than the hanger).
    """

    def __init__(self, model, ps):
        self.ps = ps
        for k, kind in enumerate(model.closure_kinds):
            if kind == "weld":
                raise ModelError(
                    f"{model.name}: closure {model.closures[k]!r} is a weld: DeNOC recovers the "
                    "closure multipliers from the wrench each leg transmits through its one cut "
                    f"joint, which a weld between rigidly joined bodies is not; {OTHER_METHODS}"
                )
        cols, legrows = [], []
        for leg in ps.legs:
            c0 = len(cols)
            cols.extend((leg.index, c) for c in leg.columns)
            k = c0 + leg.k_column if leg.k_column is not None else -1
            cuts = sorted({c.index for c in leg.columns if c.closure})
            first = [i for i, c in enumerate(leg.columns) if c.closure]
            g0 = c0 + first[0] if first else -1
            g1 = c0 + first[-1] if first else -1
            sign = leg.columns[first[0]].sign if first else 0
            cl = cuts[0] if cuts else -1
            legrows.append((c0, len(cols), k, int(leg.closes_on_base), cl, g0, g1, sign, 0, 0))
            if len(cuts) > 1:  # pragma: no cover - a leg hanging from the tree has one cut
                raise ModelError(f"{model.name}: leg {leg.index + 1} crosses several cut joints")
        hangers = [g.index for g in ps.legs if not g.closes_on_base and legrows[g.index][4] < 0]
        if ps.platform is not None and len(hangers) != 1:  # pragma: no cover - needs welds
            raise ModelError(
                f"{model.name}: the platform must hang from exactly one leg in the tree "
                f"(found {len(hangers)}); {OTHER_METHODS}"
            )
        self.hanger = hangers[0] if ps.platform is not None else -1
        C, L, NS, n = len(cols), len(ps.legs), len(ps.slots), ps.n
        table = np.zeros((C, 11), dtype=np.int64)
        cax = np.zeros((C, 3))
        slotcol = np.zeros(NS, dtype=np.int64)
        c = 0
        for leg in ps.legs:
            for j, name in enumerate(leg.joints):
                g0 = c
                while c < C and cols[c][0] == leg.index and cols[c][1].joint == name:
                    c += 1
                g1 = c - 1
                for i in range(g0, c):
                    col = cols[i][1]
                    table[i] = (
                        1 if col.closure else 0, col.index, col.axis, col.sign, col.v,
                        1 if col.fixed_after else 0, g0, g1, -3, col.side,
                        1 if col.rotation else 0,
                    )  # fmt: skip
                    cax[i] = col.local_axis
                table[g1, _SLOT] = leg.after[j]
                if leg.after[j] >= 0:
                    slotcol[leg.after[j]] = g1
        self.columns = tuple(cols)
        self.slot_after = table[:, _SLOT].copy()
        self.legs = np.array(legrows, dtype=np.int64).reshape(L, 10)
        self.col = table
        self.cax = cax
        self.slotcol = slotcol
        self.bslot = np.asarray(ps.body_slot, dtype=np.int64)
        self.L, self.C, self.NS, self.n = L, C, NS, n


def layout(model):
    """The :class:`DenocLayout` of ``model`` (``ModelError`` if DeNOC does not apply)."""
    lay = getattr(model, "_denoc_layout", None)
    if lay is None:
        lay = model._denoc_layout = DenocLayout(model, parallel_structure(model))
    return lay


class DenocPlan:
    """DeNOC's plan for one model and one set of independent closure rows: the tables and
    the float workspace in one float64 buffer ``buf`` (the kernels' ``pb``), and numpy
    views ``views[name]`` of its sections (``_SECTIONS``)."""

    def __init__(self, model, rows):
        lay = layout(model)
        rows = np.asarray(rows, dtype=np.int64)
        legs = lay.legs.copy()
        for l in range(lay.L):
            k = legs[l, _CL]
            if k >= 0:
                sl = model.closure_rows[k]
                pos = np.flatnonzero((rows >= sl.start) & (rows < sl.stop))
                legs[l, _A0] = pos[0] if pos.size else 0
                legs[l, _P] = pos.size
        r = len(rows)
        ints = {"leg": legs, "col": lay.col, "bslot": lay.bslot, "slotcol": lay.slotcol}
        shapes = _float_shapes(lay.L, lay.C, lay.NS, lay.n, r)
        sizes = [ints[s].size for s in _INT_SECTIONS]
        sizes += [int(np.prod(shapes[s], dtype=np.int64)) for s in _FLOAT_SECTIONS]
        start = _HEAD + len(_SECTIONS) + 1
        offsets = start + np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        self.buf = np.zeros(int(offsets[-1]))
        head = self.buf[:start].view(np.int64)
        # λ from the cut legs' tree columns (``cut_multipliers``) when each has as many
        # tree columns as independent rows
        ntree = [int(np.sum(lay.col[a:b, _IV] >= 0)) for a, b in legs[:, :2]]
        direct = int(all(nt >= p for nt, p in zip(ntree, legs[:, _P], strict=True)))
        head[:_HEAD] = (lay.L, lay.C, lay.NS, lay.n, lay.ps.platform_index, lay.hanger, r, direct)
        head[_HEAD:] = offsets
        self.views = {}
        for k, name in enumerate(_SECTIONS):
            part = self.buf[offsets[k] : offsets[k + 1]]
            if name in ints:
                part = part.view(np.int64)
                part[:] = ints[name].reshape(-1)
                self.views[name] = part.reshape(ints[name].shape)
            else:
                self.views[name] = part.reshape(shapes[name])
        self.views["cax"][...] = lay.cax
        self.layout = lay
        self.rows = rows


def plan_for(model, d):
    """The :class:`DenocPlan` of ``d``'s current independent rows, cached in ``d.plans``."""
    rows = d.rows[: d.nrows]
    key = ("denoc", rows.tobytes())
    p = d.plans.get(key)
    if p is None:
        p = d.plans[key] = DenocPlan(model, np.array(rows))
    return p


def _explain(model, plan, status, what="q, v or tau"):
    """Raise the error of a failed DeNOC call."""
    info = plan.views["info"]
    if status == NONFINITE_INPUT:
        raise ValueError(f"{model.name}: {what} holds NaN or inf")
    if status == SINGULAR:
        why = int(info[_WHY])
        if why == WHY_LEG:
            leg, col = plan.layout.columns[int(info[_BADCOL])]
            raise SingularityError(
                f"{model.name}: leg {leg + 1}: the axis {col.axis} of joint {col.joint!r} is "
                "dependent on the leg's other unactuated joints at this configuration (δ_i of "
                f"eq. 11c is {info[_DMIN]:.2g} of |s_i|², below {DELTA_TOL:g}): a singularity "
                "of the leg"
            )
        if why == WHY_PHI:
            Phi = plan.views["Phi"]
            cond = np.linalg.cond(Phi)
            with np.errstate(all="ignore"):
                try:
                    est = float(np.trace(Phi) * np.trace(np.linalg.inv(Phi)))
                except np.linalg.LinAlgError:
                    est = np.inf
            raise SingularityError(
                f"{model.name}: Φ = Σ Φ_2 of eq. (14a) is singular or ill-conditioned at this "
                f"configuration (condition number {cond:.3g}; its bound tr Φ · tr Φ⁻¹ = "
                f"{est:.3g}, DeNOC answers below {1 / PHI_TOL:.0e}): the platform can (nearly) "
                "move with every actuator locked (a parallel singularity)"
            )
        if why == WHY_GIM:
            Ig = plan.views["Ig"]
            dg = np.sqrt(np.abs(np.diag(Ig)))
            dg[dg == 0.0] = 1.0
            cond = np.linalg.cond(Ig / np.outer(dg, dg))
            raise SingularityError(
                f"{model.name}: the generalized inertia matrix I of eq. (25) is not positive "
                f"definite or ill-conditioned (condition number {cond:.3g} with its "
                f"coordinates scaled to a unit diagonal; DeNOC answers below "
                f"{1 / GIM_TOL:.0e}): the actuated joints are a poor chart of the motion here "
                "(nearly dependent joints on a leg, or near a parallel singularity)"
            )
        raise SingularityError(
            f"{model.name}: the closure multipliers cannot be fitted to the legs' transmitted "
            "wrenches (dependent row wrenches)"
        )
    if status == INACCURATE and int(info[_WHY]) == WHY_VELOCITY:
        raise SingularityError(
            f"{model.name}: v is not the velocity its actuated rates determine (eqs. 11b, "
            f"12b) to the accuracy DeNOC needs here (q̈ could move by {info[_VEST]:.2g} of "
            f"its scale, above {VELOCITY_TOL:g}); denoc.complete_rates gives that velocity"
        )
    if status == INACCURATE:
        raise SingularityError(
            f"{model.name}: the DeNOC result does not satisfy J q̈ = γ (relative residual "
            f"{model.data.diag[DIAG_RESIDUAL]:.3g}) or the equations of motion with λ"
        )
    raise SingularityError(f"{model.name}: the DeNOC solve produced non-finite values")
