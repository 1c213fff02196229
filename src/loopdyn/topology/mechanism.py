"""Subsystems, loops and their incidence (Sec. 2 and 3 of the reduced-order paper).

A closed-loop model in loopdyn is a spanning tree plus closures (cut joints):

- **subsystems** are the trees hanging from the ground: each body whose parent is
  the ground starts one, and its descendants belong to it.  Bodies are numbered
  depth-first, so a subsystem is a contiguous range of bodies and of coordinates
  (``q_j``, ``q̇_j`` of eq. 13).  They are labelled I, II, III, … in body order.
- **loops** are the closures, in ``model.closures`` order: loop i is closed by
  cut joint i; its multipliers λ_i are the closure's rows (eq. 18).
- **incidence**: J_{i,j} (eq. 16) is O exactly when loop i shares no link with
  subsystem j.  The fundamental loop of a cut joint runs from its two bodies down
  to the ground (or to their common ancestor); it enters subsystem j iff one of
  the cut joint's bodies belongs to it, so each loop meets at most two subsystems.
- the **loop graph** joins loops that share a subsystem; it is the block pattern
  of the GICM (eqs. 24–25) and is factorised in a fill-limiting elimination order
  (``elimination_order``: minimum degree, which eliminates block-tridiagonal chains
  end to end as in eqs. 34–36).

The modeller chooses the cut joints by how the tree is built.  ``choose_cuts`` /
``recut`` offer an automatic choice on the joint graph of a mechanism
(``mechanism_graph``), following the paper's Sec. 2.2 guidance: see
``choose_cuts``.
"""

from dataclasses import dataclass
from itertools import combinations
from math import comb

import numpy as np

from loopdyn.errors import ModelError
from loopdyn.model.joints import FIXED, FREE, PRISMATIC, REVOLUTE, SPHERICAL, UNIVERSAL

_ROMAN = ((1000, "M"), (900, "CM"), (500, "D"), (400, "CD"), (100, "C"), (90, "XC"), (50, "L"),
          (40, "XL"), (10, "X"), (9, "IX"), (5, "V"), (4, "IV"), (1, "I"))  # fmt: skip


def roman(n):
    """Roman numeral of a positive integer (subsystem labels, as in the paper)."""
    out = []
    for v, s in _ROMAN:
        while n >= v:
            out.append(s)
            n -= v
    return "".join(out)


@dataclass(frozen=True)
class Subsystem:
    """A tree hanging from the ground (serial when no body has two children).

    ``index`` (0-based), ``label`` (I, II, …), ``root`` (body index), ``bodies``
    (contiguous body indices), ``body_names``, coordinate ranges ``q_slice`` and
    ``v_slice`` (``nv`` = n_j of the paper), ``kind`` ("serial" or "tree") and
    ``loops`` (indices of the loops with a link in it).
    """

    index: int
    label: str
    root: int
    bodies: tuple
    body_names: tuple
    q_slice: slice
    v_slice: slice
    kind: str
    loops: tuple

    @property
    def nv(self):
        return self.v_slice.stop - self.v_slice.start


@dataclass(frozen=True)
class Loop:
    """A loop closed by one cut joint (closure).

    ``index``, ``name`` (the closure's), ``rows`` (its slice of the m constraint
    rows), ``body_a`` / ``body_b`` (indices, -1 for the ground), ``subsystems``
    (indices of the subsystems it meets, sorted) and ``links`` (the bodies of its
    fundamental loop in the spanning tree).
    """

    index: int
    name: str
    rows: slice
    body_a: int
    body_b: int
    subsystems: tuple
    links: tuple

    @property
    def nrows(self):
        return self.rows.stop - self.rows.start


@dataclass(frozen=True, eq=False)
class Topology:
    """Subsystems, loops and the loop–subsystem incidence of a model (``topology(model)``).

    ``incidence`` (nloops × nsubsystems, bool): True iff J_{i,j} ≠ O.
    ``subsystem_of_body`` (nb,): subsystem index of each body.
    """

    model_name: str
    subsystems: tuple
    loops: tuple
    incidence: np.ndarray
    subsystem_of_body: np.ndarray

    def loop_graph(self):
        """``networkx.Graph`` of the loops; an edge joins two loops sharing a subsystem.

        Node attribute ``rows`` (block size); edge attribute ``subsystems`` (the shared
        ones: the subsystems j whose terms J_{r,j} I_j⁻¹ J_{s,j}ᵀ make up GICM block (r, s)).
        """
        import networkx as nx  # lazily: networkx costs ~0.1 s at import

        g = nx.Graph()
        for lp in self.loops:
            g.add_node(lp.index, rows=lp.nrows, name=lp.name)
        for r, s in combinations(range(len(self.loops)), 2):
            shared = tuple(sorted(set(self.loops[r].subsystems) & set(self.loops[s].subsystems)))
            if shared:
                g.add_edge(r, s, subsystems=shared)
        return g

    def block_pattern(self):
        """J's block pattern as text, e.g. ``[J1,1 J1,2 O; O J2,2 J2,3; O O J3,3]`` (eq. 26)."""
        rows = []
        for i in range(len(self.loops)):
            cells = [
                f"J{i + 1},{j + 1}" if self.incidence[i, j] else "O"
                for j in range(len(self.subsystems))
            ]
            rows.append(" ".join(f"{c:<6}" for c in cells).rstrip())
        return "\n".join(rows)

    def __str__(self):
        lines = [f"{self.model_name}: {len(self.subsystems)} subsystems, {len(self.loops)} loops"]
        for s in self.subsystems:
            bodies = ", ".join(s.body_names)
            lines.append(f"  subsystem {s.label:<4} {s.kind:<6} n = {s.nv:<3} bodies {bodies}")
        for lp in self.loops:
            subs = ", ".join(self.subsystems[j].label for j in lp.subsystems)
            lines.append(
                f"  loop {lp.index + 1} (cut {lp.name}, {lp.nrows} rows): subsystems {subs}"
            )
        lines.append("J block pattern (eq. 16):")
        lines.extend("  " + r for r in self.block_pattern().splitlines())
        return "\n".join(lines)


def _path_to_root(model, b):
    out = []
    while b >= 0:
        out.append(b)
        b = model.parent[b]
    return out


def topology(model):
    """The :class:`Topology` of ``model`` (computed once and cached on the model)."""
    cached = getattr(model, "_sslm_topology", None)
    if cached is not None:
        return cached
    nb = model.nbodies
    sub = np.full(nb, -1, dtype=np.int64)
    roots = [i for i in range(nb) if model.parent[i] < 0]
    for j, r in enumerate(roots):
        sub[r] = j
    for i in range(nb):
        if sub[i] < 0:
            sub[i] = sub[model.parent[i]]
    loops = []
    for k, name in enumerate(model.closures):
        a, b = (int(x) for x in model.cl_body[k])
        pa = _path_to_root(model, a)
        pb = _path_to_root(model, b)
        common = set(pa) & set(pb)
        if common:  # both in one subsystem: the loop closes at the common ancestor
            lca = next(x for x in pa if x in common)
            links = [x for x in pa if x not in common] + [lca] + [x for x in pb if x not in common]
        else:
            links = pa + pb
        subs = tuple(sorted({int(sub[x]) for x in (a, b) if x >= 0}))
        loops.append(Loop(k, name, model.closure_rows[k], a, b, subs, tuple(sorted(links))))
    inc = np.zeros((len(loops), len(roots)), dtype=bool)
    for lp in loops:
        inc[lp.index, list(lp.subsystems)] = True
    subsystems = []
    for j, r in enumerate(roots):
        bodies = tuple(int(i) for i in np.flatnonzero(sub == j))
        nchild = [sum(1 for i in bodies if model.parent[i] == x) for x in bodies]
        t0, t1 = model.topo[bodies[0]], model.topo[bodies[-1]]
        subsystems.append(
            Subsystem(
                j,
                roman(j + 1),
                r,
                bodies,
                tuple(model.body_names[i] for i in bodies),
                slice(int(t0[2]), int(t1[2] + t1[4])),
                slice(int(t0[3]), int(t1[3] + t1[5])),
                "tree" if max(nchild) > 1 else "serial",
                tuple(int(i) for i in np.flatnonzero(inc[:, j])),
            )
        )
    topo = Topology(model.name, tuple(subsystems), tuple(loops), inc, sub)
    inc.setflags(write=False)
    sub.setflags(write=False)
    model._sslm_topology = topo
    return topo


def subsystems(model):
    """The subsystems (trees hanging from the ground) of ``model``, see :class:`Subsystem`."""
    return topology(model).subsystems


def loops(model):
    """The loops (one per closure) of ``model``, see :class:`Loop`."""
    return topology(model).loops


def incidence(model):
    """Loop–subsystem incidence (nloops × nsubsystems bool): True iff J_{i,j} ≠ O (eq. 16)."""
    return topology(model).incidence


def elimination_order(graph, sizes=None):
    """Minimum-degree elimination order of a loop graph, and the fill it creates.

    ``graph``: a ``networkx.Graph`` (nodes 0..u-1); ``sizes``: block size of each
    node (default: node attribute ``rows``, else 1).  The degree of a node is the
    number of scalar rows of its current neighbours; ties go to the lowest index,
    so a chain 0-1-…-(u-1) is eliminated from its first loop on, as in eqs.
    (34)–(36), with no fill.  Returns ``(order, fill)``: the nodes in elimination
    order and the edges added by the elimination (empty for chains and trees).
    """
    G = graph.copy()
    if sizes is None:
        sizes = {n: G.nodes[n].get("rows", 1) for n in G.nodes}
    order, fill = [], []
    while G.number_of_nodes():
        k = min(G.nodes, key=lambda n: (sum(sizes[x] for x in G[n]), n))
        nbrs = sorted(G[k])
        for a, b in combinations(nbrs, 2):
            if not G.has_edge(a, b):
                G.add_edge(a, b)
                fill.append((a, b))
        G.remove_node(k)
        order.append(k)
    return order, fill


# ----------------------------------------------------------------- choosing cuts
@dataclass(frozen=True, eq=False)
class GraphBody:
    """A body of a :class:`MechanismGraph`: mass, centre of mass and inertia about it,
    both in world coordinates in the reference pose; ``frames``: (name, R, p) world poses."""

    name: str
    mass: float
    com: np.ndarray
    inertia: np.ndarray
    frames: tuple = ()


@dataclass(frozen=True, eq=False)
class GraphJoint:
    """A joint of a :class:`MechanismGraph` between ``body_a`` and ``body_b`` ("ground" allowed).

    ``kind``: revolute, prismatic, spherical or universal; ``point`` (world) and
    ``axis`` (world; for universal: the axis fixed in body a, ``axis2`` the one
    fixed in body b), in the reference pose.  ``actuated`` joints are never cut.
    """

    name: str
    body_a: str
    body_b: str
    kind: str
    point: np.ndarray
    axis: np.ndarray = None
    axis2: np.ndarray = None
    actuated: bool = False

    @property
    def dof(self):
        return {"revolute": 1, "prismatic": 1, "universal": 2, "spherical": 3}[self.kind]

    def cut_rows(self, planar):
        """Multipliers introduced when this joint is cut (closure rows)."""
        if planar:
            return 2
        return {"revolute": 5, "prismatic": 5, "universal": 4, "spherical": 3}[self.kind]


@dataclass(frozen=True, eq=False)
class MechanismGraph:
    """Bodies and joints of a mechanism in one assembled reference pose (no tree chosen).

    Build one from a model with :func:`mechanism_graph`; turn it into a model with a
    chosen (or automatic) set of cut joints with :func:`build_mechanism`.
    """

    name: str
    bodies: tuple
    joints: tuple
    gravity: np.ndarray
    planar: bool
    ground_frames: tuple = ()

    def to_networkx(self):
        """``networkx.MultiGraph``: nodes "ground" and the bodies, one edge per joint."""
        import networkx as nx  # lazily: networkx costs ~0.1 s at import

        g = nx.MultiGraph()
        g.add_node("ground")
        g.add_nodes_from(b.name for b in self.bodies)
        for j in self.joints:
            g.add_edge(j.body_a, j.body_b, key=j.name, kind=j.kind)
        return g


def _rot_to_world(model, d, b):
    return np.eye(3) if b < 0 else d.Xw[b, :3]


def mechanism_graph(model, q=None):
    """The :class:`MechanismGraph` of ``model`` in the assembled configuration ``q`` (default q0).

    Tree joints and closures both become joints (closure kinds revolute, prismatic,
    ball → spherical, universal).  Raises :class:`ModelError` for fixed or free
    joints and weld or generic closures, which have no joint counterpart here.
    """
    from loopdyn.kinematics.frames import forward_kinematics

    q = model.q0 if q is None else np.asarray(q, float)
    d = forward_kinematics(model, q, data=model.create_data())
    act = set(int(i) for i in model.actuated)
    bodies = []
    for i, name in enumerate(model.body_names):
        I6 = model.inertia[i]
        m = float(I6[3, 3])
        C = I6[:3, 3:] / m
        c = np.array([C[2, 1], C[0, 2], C[1, 0]])
        Ic = I6[:3, :3] - m * C @ C.T
        R, p = d.Xw[i, :3], d.Xw[i, 3]
        frames = []
        for k, fname in enumerate(model.frames):
            if model.frame_body[k] == i:
                X = model.frame_X[k]
                frames.append((fname, R @ X[:3], p + R @ X[3]))
        bodies.append(GraphBody(name, m, p + R @ c, R @ Ic @ R.T, tuple(frames)))
    ground_frames = tuple(
        (f, model.frame_X[k][:3].copy(), model.frame_X[k][3].copy())
        for k, f in enumerate(model.frames)
        if model.frame_body[k] < 0
    )

    def bname(b):
        return "ground" if b < 0 else model.body_names[b]

    joints = []
    for i in range(model.nbodies):
        jt = int(model.topo[i, 1])
        lam = model.parent[i]
        R, p = d.Xw[i, :3], d.Xw[i, 3]
        a1, a2 = model.jgeom[i, 4], model.jgeom[i, 5]
        iv = int(model.topo[i, 3])
        actuated = any(x in act for x in range(iv, iv + int(model.topo[i, 5])))
        kw = dict(point=p.copy(), actuated=actuated)
        if jt in (REVOLUTE, PRISMATIC):
            kind = "revolute" if jt == REVOLUTE else "prismatic"
            kw["axis"] = R @ a1
        elif jt == UNIVERSAL:
            kind = "universal"
            Rjf = _rot_to_world(model, d, lam) @ model.jgeom[i, :3]
            kw["axis"], kw["axis2"] = Rjf @ a1, R @ a2
        elif jt == SPHERICAL:
            kind = "spherical"
        else:
            what = {FIXED: "fixed", FREE: "free"}.get(jt, str(jt))
            raise ModelError(
                f"{model.name}: joint {model.joint_names[i]!r} is {what}; mechanism_graph handles "
                "revolute, prismatic, universal and spherical joints only"
            )
        joints.append(GraphJoint(model.joint_names[i], bname(lam), model.body_names[i], kind, **kw))
    for k, spec in enumerate(model._closure_specs):
        a, b = (int(x) for x in model.cl_body[k])
        RA = _rot_to_world(model, d, a) @ model.cl_X[k, 0, :3]
        RB = _rot_to_world(model, d, b) @ model.cl_X[k, 1, :3]
        pB = (d.Xw[b, 3] + d.Xw[b, :3] @ model.cl_X[k, 1, 3]) if b >= 0 else model.cl_X[k, 1, 3]
        kw = dict(point=np.array(pB))
        if spec.kind in ("revolute", "prismatic"):
            from loopdyn.model.joints import _axis

            dflt = "z" if spec.kind == "revolute" else "x"
            kw["axis"] = RA @ _axis(spec.axis if spec.axis is not None else dflt, spec.name)
            kind = spec.kind
        elif spec.kind == "ball":
            kind = "spherical"
        elif spec.kind == "universal":
            from loopdyn.model.joints import _axis

            kind = "universal"
            kw["axis"] = RA @ _axis(spec.axis if spec.axis is not None else "x", spec.name)
            kw["axis2"] = RB @ _axis(spec.axis2 if spec.axis2 is not None else "y", spec.name)
        else:
            raise ModelError(
                f"{model.name}: closure {spec.name!r} is a {spec.kind} closure; mechanism_graph "
                "handles revolute, prismatic, ball and universal closures only"
            )
        joints.append(GraphJoint(spec.name, bname(a), bname(b), kind, **kw))
    return MechanismGraph(
        model.name, tuple(bodies), tuple(joints), np.array(model.gravity), model.planar,
        ground_frames,
    )  # fmt: skip


@dataclass(frozen=True)
class CutChoice:
    """The result of :func:`choose_cuts`.

    ``cuts``: names of the cut joints (closures); ``tree``: the kept joints;
    ``subsystems``: (root body, bodies, n_j) per subsystem; ``determinate``:
    whether the subsystems can be solved one after the other for inverse dynamics
    ([27], Sec. 2.2), ``solve_order`` that order (subsystem indices);
    ``score``: the lexicographic key that was minimised; ``method``: "exhaustive" or
    "greedy"; ``candidates``: the number of spanning forests examined.
    """

    cuts: tuple
    tree: tuple
    subsystems: tuple
    determinate: bool
    solve_order: tuple
    score: tuple
    method: str
    candidates: int


def _forest(graph, kept):
    """Subsystems of the spanning forest made of joints ``kept`` (indices), or None if not one."""
    names = [b.name for b in graph.bodies]
    idx = {n: k for k, n in enumerate(names)}
    adj = {n: [] for n in names}
    adj["ground"] = []
    for e in kept:
        j = graph.joints[e]
        adj[j.body_a].append((j.body_b, e))
        adj[j.body_b].append((j.body_a, e))
    seen = {"ground"}
    subs = []
    for nbr, e in adj["ground"]:
        if nbr in seen:
            return None  # a body with two kept ground joints: a cycle through the ground
        stack = [nbr]
        seen.add(nbr)
        bodies, dof = [], graph.joints[e].dof
        while stack:
            x = stack.pop()
            bodies.append(x)
            for y, e2 in adj[x]:
                if y == "ground":
                    continue
                if y in seen:
                    continue
                seen.add(y)
                dof += graph.joints[e2].dof
                stack.append(y)
        subs.append((nbr, tuple(sorted(bodies, key=idx.get)), dof))
    if len(seen) != len(names) + 1:
        return None
    return subs


def _evaluate(graph, kept, cuts):
    subs = _forest(graph, kept)
    if subs is None:
        return None
    where = {}
    for s, (_, bodies, _) in enumerate(subs):
        for b in bodies:
            where[b] = s
    # the loops each subsystem meets and the GICM blocks (loop pairs sharing a subsystem)
    meets = [set() for _ in subs]
    for c in cuts:
        j = graph.joints[c]
        for b in (j.body_a, j.body_b):
            if b != "ground":
                meets[where[b]].add(c)
    pairs = set()
    for m in meets:
        pairs.update(combinations(sorted(m), 2))
    # sequential determinacy for inverse dynamics ([27]): a subsystem is solvable when its
    # unknowns (actuated DOF + multipliers of the cuts on it still unknown) <= n_j
    act = [0] * len(subs)
    for e in kept:
        j = graph.joints[e]
        if j.actuated:
            b = j.body_b if j.body_b != "ground" else j.body_a
            act[where[b]] += j.dof
    known, order, left = set(), [], set(range(len(subs)))
    progress = True
    while left and progress:
        progress = False
        for s in sorted(left):
            unknown = act[s] + sum(
                graph.joints[c].cut_rows(graph.planar) for c in meets[s] if c not in known
            )
            if unknown <= subs[s][2]:
                order.append(s)
                known |= meets[s]
                left.discard(s)
                progress = True
                break
    determinate = not left
    sizes = [s[2] for s in subs]
    score = (
        0 if determinate else 1,
        max(sizes),
        sum(n**3 for n in sizes),
        len(pairs),
        tuple(-c for c in sorted(cuts, reverse=True)),
    )
    return score, subs, determinate, tuple(order)


def choose_cuts(graph, max_candidates=200_000):
    """Choose the cut joints of a mechanism automatically (Sec. 2.2 guidance).

    Every spanning forest of the joint graph that keeps each body attached to the
    ground, keeps one ground joint of every body that has one (so each roots its
    own subsystem: the paper never cuts at the ground) and never cuts an actuated
    joint is a candidate; the one minimising, in this order,

    1. indeterminacy: prefer a cut for which the subsystems can be solved one
       after the other for inverse dynamics ([27], Sec. 2.2: a subsystem is
       determinate when its unknowns — its actuator forces plus the multipliers of
       the cut joints acting on it not yet known — do not exceed its n_j equations
       (6); solving it makes its multipliers known to its neighbours),
    2. the size n_j of the largest subsystem (small subsystems: small I_j),
    3. Σ n_j³ (the cost of factorising the I_j),
    4. the number of off-diagonal GICM blocks (loop pairs sharing a subsystem),
    5. cutting the joints declared last (the paper numbers cut joints last),

    is returned.  Candidates are enumerated exhaustively when there are at most
    ``max_candidates`` subsets of joints of the right size; otherwise a greedy
    balanced forest is built instead: every ground joint is kept (each ground-attached
    body roots a subsystem) and the smallest subsystem repeatedly adopts a
    neighbouring unattached body; the remaining joints are cut.
    """
    nj = len(graph.joints)
    ncut = nj - len(graph.bodies)
    if ncut < 0:
        raise ModelError(f"{graph.name}: fewer joints than bodies; the mechanism is not connected")
    actuated = {e for e, j in enumerate(graph.joints) if j.actuated}
    # keep one ground joint per ground-attached body: each roots its own subsystem
    grounded, keep = set(), set(actuated)
    for e, j in enumerate(graph.joints):
        if "ground" in (j.body_a, j.body_b):
            b = j.body_b if j.body_a == "ground" else j.body_a
            if b not in grounded:
                grounded.add(b)
                keep.add(e)
    free = [e for e in range(nj) if e not in keep]
    best = None
    count = 0
    if comb(len(free), ncut) <= max_candidates:
        method = "exhaustive"
        for cuts in combinations(free, ncut):
            kept = [e for e in range(nj) if e not in cuts]
            ev = _evaluate(graph, kept, cuts)
            if ev is None:
                continue
            count += 1
            if best is None or ev[0] < best[0][0]:
                best = (ev, cuts, kept)
    else:
        method = "greedy"
        kept = _greedy_forest(graph, actuated)
        cuts = tuple(e for e in range(nj) if e not in kept)
        ev = _evaluate(graph, kept, cuts)
        if ev is not None:
            best, count = (ev, cuts, kept), 1
    if best is None:
        raise ModelError(
            f"{graph.name}: no spanning forest keeps every body attached to the ground without "
            "cutting an actuated joint"
        )
    (score, subs, det, order), cuts, kept = best
    return CutChoice(
        tuple(graph.joints[e].name for e in cuts), tuple(graph.joints[e].name for e in kept),
        tuple(subs), det, order, score, method, count,
    )  # fmt: skip


def _greedy_forest(graph, actuated):
    """Balanced multi-source growth from the ground (see ``choose_cuts``)."""
    kept, attached = [], {}
    roots = []
    for e, j in enumerate(graph.joints):
        if "ground" in (j.body_a, j.body_b) and j.body_a != j.body_b:
            b = j.body_b if j.body_a == "ground" else j.body_a
            if b not in attached:
                attached[b] = len(roots)
                roots.append(j.dof)
                kept.append(e)
    while len(attached) < len(graph.bodies):
        cands = []
        for e, j in enumerate(graph.joints):
            ins = [x for x in (j.body_a, j.body_b) if x in attached]
            outs = [x for x in (j.body_a, j.body_b) if x != "ground" and x not in attached]
            if len(ins) == 1 and len(outs) == 1:
                s = attached[ins[0]]
                cands.append((e not in actuated, roots[s], e, outs[0], s))
        if not cands:
            raise ModelError(f"{graph.name}: some bodies are not connected to the ground")
        _, _, e, b, s = min(cands)
        attached[b] = s
        roots[s] += graph.joints[e].dof
        kept.append(e)
    return kept


def build_mechanism(graph, cuts="auto", name=None):
    """A :class:`loopdyn.Model` of ``graph`` with the given cut joints (names) or ``"auto"``.

    Each body's frame is world-aligned in the reference pose with its origin on its
    tree joint, so ``q0`` = the neutral configuration = the reference pose, and
    every coordinate is measured from it (a joint traversed from body b to body a
    in the tree has the opposite sign; a universal joint swaps its axes).  Cut
    joints become closures of the same kind (spherical → ball) between frames
    ``"<joint>@<body>"``.  Returns the model; ``model.cut_choice`` holds the
    :class:`CutChoice` when ``cuts="auto"``.
    """
    from loopdyn.model import ModelBuilder, Prismatic, Revolute, Spherical, Universal

    choice = None
    if isinstance(cuts, str) and cuts == "auto":
        choice = choose_cuts(graph)
        cut_names = set(choice.cuts)
    else:
        cut_names = set(cuts)
        unknown = cut_names - {j.name for j in graph.joints}
        if unknown:
            raise ModelError(f"{graph.name}: unknown cut joints {sorted(unknown)}")
    bodies = {b.name: b for b in graph.bodies}
    kept = [j for j in graph.joints if j.name not in cut_names]
    cut = [j for j in graph.joints if j.name in cut_names]
    for j in cut:
        if j.actuated:
            raise ModelError(f"{graph.name}: actuated joint {j.name!r} cannot be cut")
    b = ModelBuilder(name or f"{graph.name}_recut", gravity=graph.gravity, planar=graph.planar)
    origin = {"ground": np.zeros(3)}
    queue = ["ground"]
    used = set()
    while queue:
        parent = queue.pop(0)
        for j in kept:
            if j.name in used or parent not in (j.body_a, j.body_b):
                continue
            child = j.body_b if j.body_a == parent else j.body_a
            if child in origin:
                raise ModelError(f"{graph.name}: kept joints form a loop at {child!r}; cut more")
            used.add(j.name)
            forward = j.body_a == parent
            P = np.asarray(j.point, float)
            if j.kind == "revolute":
                jt = Revolute(j.axis)
            elif j.kind == "prismatic":
                jt = Prismatic(j.axis)
            elif j.kind == "spherical":
                jt = Spherical()
            else:
                jt = Universal(j.axis, j.axis2) if forward else Universal(j.axis2, j.axis)
            body = bodies[child]
            b.add_body(
                child, parent, jt, xyz=P - origin[parent], mass=body.mass, com=body.com - P,
                inertia=body.inertia, actuated=j.actuated, joint_name=j.name,
            )  # fmt: skip
            origin[child] = P
            queue.append(child)
    missing = set(bodies) - set(origin)
    if missing:
        raise ModelError(f"{graph.name}: bodies {sorted(missing)} are not attached by kept joints")
    for body in graph.bodies:
        for fname, R, p in body.frames:
            b.add_frame(fname, body.name, xyz=p - origin[body.name], rotation=R)
    for fname, R, p in graph.ground_frames:
        b.add_frame(fname, "ground", xyz=p, rotation=R)
    kinds = {"revolute": "revolute", "prismatic": "prismatic", "spherical": "ball",
             "universal": "universal"}  # fmt: skip
    for j in cut:
        fa, fb = f"{j.name}@{j.body_a}", f"{j.name}@{j.body_b}"
        b.add_frame(fa, j.body_a, xyz=np.asarray(j.point) - origin[j.body_a])
        b.add_frame(fb, j.body_b, xyz=np.asarray(j.point) - origin[j.body_b])
        kw = {}
        if j.kind in ("revolute", "prismatic", "universal"):
            kw["axis"] = j.axis
        if j.kind == "universal":
            kw["axis2"] = j.axis2
        if graph.planar and j.kind == "revolute":
            kw = {}
        b.add_closure(j.name, fa, fb, kinds[j.kind], **kw)
    model = b.build()
    model.cut_choice = choice
    model.description = f"{graph.name} re-cut at {', '.join(sorted(cut_names)) or 'no joint'}"
    return model


def recut(model, cuts="auto", q=None):
    """``model`` rebuilt with other cut joints (names, or ``"auto"``: :func:`choose_cuts`).

    The reference pose is ``q`` (default ``model.q0``, which must be assembled); the
    new model's ``q0`` is that pose (all coordinates zero, quaternions identity).
    """
    return build_mechanism(mechanism_graph(model, q), cuts, name=f"{model.name}_recut")


__all__ = [
    "CutChoice",
    "GraphBody",
    "GraphJoint",
    "Loop",
    "MechanismGraph",
    "Subsystem",
    "Topology",
    "build_mechanism",
    "choose_cuts",
    "elimination_order",
    "incidence",
    "loops",
    "mechanism_graph",
    "recut",
    "roman",
    "subsystems",
    "topology",
]
