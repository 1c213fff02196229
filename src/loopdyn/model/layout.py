"""The packed context of a ``Data``: one float64 buffer for everything a kernel reads.

A numba entry pays ~40 ns per array argument at every call, and a compiled call
passes every array as ~9 machine words, so each ``Data`` keeps the model's kernel
arrays and all its workspaces in one buffer ``ctx``:

    ctx = [ header (HEADER int64) | topo | jgeom | ... | Xrel | Xw | ... ]

The header holds the sizes and, for every field of ``FIELDS`` in order, its offset
in ``ctx``.  Integer fields store int64 in the same 8-byte slots.  Python reads the
fields as numpy views (``Data.<name>``); compiled kernels read them through the
``m`` / ``d`` handles of ``loopdyn.kernels.views`` (``m.topo``, ``d.J``), which
build the same views from this table.
"""

import itertools
import math

import numpy as np

HEADER = 64
# header slots (int64): the sizes, then the offsets of FIELDS in order
SIZES = ("nq", "nv", "nb", "nc", "nr", "nrows", "nd", "nrd")
H_NQ, H_NV, H_NB, H_NC, H_NR, H_NROWS, H_ND, H_NRD = range(8)
H_OFF = 8

# (name, owner, integer?, dims): owner "m" (model, copied in at creation) or "d"
# (workspace); a dim is an int or the name of a size.  nd and nrd size the dense
# blocks, O(nv²) and O(nv·nr): nd = nv and nrd = nr once a dense method or the dense
# Jacobian is needed (``Data.ensure_dense``), 0 before that and for a tree, so the
# O(n) methods run in O(n) memory
FIELDS = (
    # ---- the model (see loopdyn.model.model for the meaning)
    ("topo", "m", True, ("nb", 6)),  # parent, joint type, first q, first v, nq_j, nv_j
    ("jgeom", "m", False, ("nb", 6, 3)),  # joint frame in the parent: R (3 rows), p, axes
    ("inertia", "m", False, ("nb", 6, 6)),  # spatial inertia about the body origin, body frame
    ("gravity", "m", False, (3,)),  # world frame
    ("cl_body", "m", True, ("nc", 2)),  # bodies a, b of each closure (-1: ground)
    ("cl_X", "m", False, ("nc", 2, 4, 3)),  # frames A, B on them
    ("row_int", "m", True, ("nr", 6)),  # closure, kind, coupling: v_a, v_b, q_a, q_b
    ("row_vec", "m", False, ("nr", 2, 3)),  # u (frame A), w (frame B); coupling: ratio, offset
    # ---- tree workspaces, body frames
    ("Xrel", "d", False, ("nb", 4, 3)),  # pose in the parent body: R (3 rows), p
    ("Xw", "d", False, ("nb", 4, 3)),  # pose in the world
    ("S", "d", False, ("nb", 6, 6)),  # motion subspace (first nv_j columns)
    ("V", "d", False, ("nb", 6)),  # velocity [ω; v]
    ("A", "d", False, ("nb", 6)),  # acceleration
    ("C", "d", False, ("nb", 6)),  # velocity-product acceleration V ×m (S q̇) + Ṡ q̇
    ("F", "d", False, ("nb", 6)),  # RNEA: force transmitted by the joint
    ("pA", "d", False, ("nb", 6)),  # ABA: articulated bias force
    ("u", "d", False, ("nb", 6)),  # ABA: u = τ - Sᵀ pA (first nv_j entries)
    ("T1", "d", False, ("nb", 6)),  # scratch
    ("IA", "d", False, ("nb", 6, 6)),  # ABA: articulated inertia; CRBA: composite inertia
    ("U", "d", False, ("nb", 6, 6)),  # ABA: U = IA S
    ("Dinv", "d", False, ("nb", 6, 6)),  # ABA: (Sᵀ IA S)⁻¹
    ("TM", "d", False, ("nb", 6, 6)),  # scratch
    # ---- closure kinematics (loopdyn.kinematics.closures)
    ("cw", "d", False, ("nc", 16, 3)),  # frame poses and point motions of each closure
    ("rw", "d", False, ("nr", 3, 3)),  # per row: world u, w, n
    ("lev", "d", False, ("nc", "nb", 3)),  # p_B - o_j (world axes) for the bodies j on the paths
    ("Vr", "d", False, ("nb", 6)),  # velocity relative to a loop's root (body frame)
    ("Cr", "d", False, ("nb", 6)),  # ... its velocity-product acceleration
    ("Ar", "d", False, ("nb", 6)),  # ... and its acceleration at q̈ = 0
    ("path", "d", True, ("nb",)),  # scratch: the bodies of a path
    ("Phi", "d", False, ("nr",)),
    ("J", "d", False, ("nrd", "nv")),
    ("gamma", "d", False, ("nr",)),
    # ---- the multiplier methods (loopdyn.methods)
    ("M", "d", False, ("nd", "nd")),
    ("phi", "d", False, ("nv",)),  # τ - h
    ("zeros", "d", False, ("nv",)),  # stays zero
    ("K", "d", False, ("nd+nrd", "nd+nrd")),  # KKT matrix
    ("rhs", "d", False, ("nd+nrd",)),
    ("Y", "d", False, ("nd", "nrd")),  # SLM: L⁻¹ Jᵀ; recursive_lambda: ζ
    ("Sm", "d", False, ("nrd", "nrd")),  # J M⁻¹ Jᵀ
    ("x", "d", False, ("nv",)),
    ("fext", "d", False, ("nb", 6)),  # closure loads as body wrenches
    ("tauc", "d", False, ("nv",)),  # closure loads as joint forces (couplings)
    ("lam", "d", False, ("nr",)),
    ("piv", "d", True, ("nd+nrd",)),
    ("rows", "d", True, ("nrows",)),  # the independent closure rows (H_NROWS of them)
    ("diag", "d", False, (8,)),  # diagnostics of the last call (pivot ratio, residual)
)
assert len(FIELDS) + H_OFF <= HEADER


# FIELDS' dims parsed once: an int, or the names of the sizes they add ("nrows" -> "nr")
_DIMS = tuple(
    tuple(d if isinstance(d, int) else tuple(d.replace("nrows", "nr").split("+")) for d in dims)
    for _, _, _, dims in FIELDS
)


def allocate(model, dense=False):
    """``(ctx, views)`` for a new Data of ``model``: the buffer and a dict of its fields,
    with the dense blocks (J, M, K, Y, Sm, ...) if ``dense`` and the model has closures."""
    nv, nr = model.nv, model.m
    sizes = dict(nq=model.nq, nv=nv, nb=model.nbodies, nc=model.nc, nr=nr, nrows=nr)
    dense = bool(dense and nr > 0)
    sizes["nd"] = nv if dense else 0
    sizes["nrd"] = nr if dense else 0
    # rows is allocated for every row; H_NROWS says how many are in use
    shapes = [
        tuple(
            d if isinstance(d, int) else sizes[d[0]] if len(d) == 1 else sum(sizes[p] for p in d)
            for d in dims
        )
        for dims in _DIMS
    ]
    ends = itertools.accumulate(math.prod(sh) for sh in shapes)
    offsets = [HEADER, *(HEADER + e for e in ends)]
    ctx = np.zeros(offsets[-1])
    head = ctx[:HEADER].view(np.int64)
    head[: len(SIZES)] = [sizes[s] for s in SIZES]
    head[H_OFF : H_OFF + len(FIELDS)] = offsets[:-1]
    views = {}
    for k, (name, _, integer, _) in enumerate(FIELDS):
        part = ctx[offsets[k] : offsets[k + 1]]
        views[name] = (part.view(np.int64) if integer else part).reshape(shapes[k])
    for name, owner, _, _ in FIELDS:
        if owner == "m":
            views[name][...] = getattr(model, name)
    views["rows"][:] = np.arange(nr)
    return ctx, views
