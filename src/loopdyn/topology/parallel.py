"""Parallel structure of a closed-loop model: base, platform and legs (Saha & Schiehlen, Sec. III).

The DeNOC method (``loopdyn.methods.denoc``) applies to the class of Fig. 3(a) of
the paper, which :func:`parallel_structure` detects from the model's graph:

- a **fixed base** (the ground, with every body welded to it);
- at most one moving **platform** (end-effector): the one body where three or
  more joints meet, or, when every body has two joints (a single chain of loops
  through the ground, like the five-bar), the body picked between the two
  actuated joints of a loop (the cut joint's first body, as the paper picks link
  2 of leg 1 in Sec. VI.B), or the body named by ``platform=``;
- **legs**: serial chains of bodies from the base to the platform, one joint
  between consecutive bodies.  A leg may also return to the base instead (a loop
  closing on the ground, the four-bar of Sec. VI.A, whose "end-effector" is the
  fixed ground);
- joints of one degree of freedom: revolute and prismatic tree joints and
  closures; universal and spherical joints (and universal and ball closures) are
  taken as chains of two and three revolute joints about their axes (the paper's
  "kinematically equivalent combination of revolute joints");
- at most **one actuated joint per leg** (the paper: exactly one; a leg without
  actuator is allowed: its motion follows from the other legs);
- **DOF = number of actuated joints** (no actuation redundancy, no unactuated
  mobility), and the unactuated joints of each leg independent (no idle motion
  such as a rod spinning between two ball joints).

Fixed tree joints and weld closures join bodies into one rigid body.  Free joints
(a floating base) and generic closures are outside the class.  Anything else
raises :class:`loopdyn.ModelError` naming the assumption that fails and the
methods that apply (``augmented``, ``slm``, ``sslm``, ``recursive_lambda``).
"""

from dataclasses import dataclass

import numpy as np

from loopdyn.errors import ModelError
from loopdyn.model.joints import FIXED, FREE, PRISMATIC, REVOLUTE, SPHERICAL, UNIVERSAL, _axis
from loopdyn.topology.disjoint_sets import DisjointSets
from loopdyn.validation import model_arg

OTHER_METHODS = (
    "use method='augmented' (or 'slm', 'sslm', 'recursive_lambda', 'embedding'), which "
    "handle any closed-loop model"
)
_TREE_KINDS = {
    REVOLUTE: "revolute",
    PRISMATIC: "prismatic",
    UNIVERSAL: "universal",
    SPHERICAL: "spherical",
}
# body slot codes (``ParallelStructure.body_slot``) of bodies on no leg
ON_BASE, ON_PLATFORM = -1, -2


@dataclass(frozen=True)
class Column:
    """One 1-DOF joint of a leg (a revolute or prismatic axis of a tree joint or closure).

    ``joint``: the tree joint or closure name; ``axis``: which of its axes (0 for
    1-DOF joints; 0, 1 for universal; 0, 1, 2 for spherical / ball, the body or
    frame A axes x, y, z).  ``closure``: a cut joint (no coordinate in q); ``index``:
    the body index of a tree joint or the closure index.  ``sign``: +1 if the leg
    runs across the joint from parent to child (closure: frame A to frame B), -1
    the other way.  ``v``: the coordinate (index into v), -1 for a closure.
    ``fixed_after``: the axis is fixed in the body that follows the joint along
    the leg (else in the one before; both for revolute and prismatic).
    Closures only: ``side`` (0: the axis is fixed in frame A, 1: in frame B),
    ``local_axis`` (unit vector in that frame) and ``rotation`` (False: prismatic).
    """

    joint: str
    axis: int
    closure: bool
    index: int
    sign: int
    v: int
    fixed_after: bool
    rotation: bool = True
    side: int = 0
    local_axis: tuple = (0.0, 0.0, 0.0)


@dataclass(frozen=True)
class Leg:
    """A leg: base → (bodies, joints) → platform, or back to the base.

    ``bodies``: the leg's moving bodies in order (welded groups as tuples of names);
    ``joints``: the joints between them (tree joint or closure names), base side
    first; ``kinds``: their kinds (``"revolute"``, ``"universal"``,
    ``"closure:ball"``, …); ``directions``: +1 parent → child (closure A → B), -1
    reversed.  ``k``: position in ``joints`` of the actuated joint (None: no
    actuator) and ``actuated`` its coordinate (index into v, None).  ``columns``:
    the leg as 1-DOF joints (:class:`Column`), ``k_column`` the actuated one's
    position.  ``closes_on_base``: the leg ends on the base (its "platform" is the
    fixed ground).  ``after[j]``: slot of the rigid body after joint j
    (``ParallelStructure.slots``), or ``ON_BASE`` / ``ON_PLATFORM``.
    """

    index: int
    bodies: tuple
    joints: tuple
    kinds: tuple
    directions: tuple
    k: int | None
    actuated: int | None
    columns: tuple
    k_column: int | None
    closes_on_base: bool
    after: tuple


@dataclass(frozen=True)
class ParallelStructure:
    """Result of :func:`parallel_structure`.

    ``base``: ``"ground"``; ``platform``: the platform body's name (None when every
    leg closes on the base) and ``platform_bodies`` the bodies welded to it;
    ``legs`` (:class:`Leg`, the actuated legs first, in the order of their
    coordinates, then those without actuator); ``actuated``: the actuated
    coordinates (indices into v) in leg order, which is ``model.actuated``'s
    order; ``n``: their number (the DOF); ``slots``: the rigid bodies on legs
    (tuples of body names) and ``body_slot`` (nb,) each body's slot (``ON_BASE``,
    ``ON_PLATFORM``).
    """

    model_name: str
    base: str
    platform: str | None
    platform_index: int
    platform_bodies: tuple
    legs: tuple
    actuated: np.ndarray
    n: int
    dof: int
    slots: tuple
    body_slot: np.ndarray

    def __str__(self):
        platform = self.platform or "(none: the ground)"
        lines = [
            f"{self.model_name}: base = ground, platform = {platform}, {len(self.legs)} legs, "
            f"DOF {self.dof}"
        ]
        for leg in self.legs:
            joints = []
            for j, (name, kind, d) in enumerate(
                zip(leg.joints, leg.kinds, leg.directions, strict=True)
            ):
                mark = "*" if j == leg.k else ""
                joints.append(f"{name}{mark} ({kind}{'' if d > 0 else ', reversed'})")
            end = "ground" if leg.closes_on_base else self.platform
            lines.append(f"  leg {leg.index + 1}: ground - " + " - ".join(joints) + f" - {end}")
        lines.append("  (* actuated)")
        return "\n".join(lines)


def _fail(model, assumption, detail):
    raise ModelError(
        f"{model.name} is not a parallel mechanism of the DeNOC class (Saha & Schiehlen, "
        f"Sec. III): assumption '{assumption}' fails: {detail}; {OTHER_METHODS}"
    )


def _closure_axes(model, k):
    """(kind, [(side, local axis, rotation), ...]) of closure k's 1-DOF axes."""
    spec = model._closure_specs[k]
    what = f"closure {spec.name!r}"
    if spec.kind == "revolute":
        return "revolute", [(0, _axis(spec.axis if spec.axis is not None else "z", what), True)]
    if spec.kind == "prismatic":
        return "prismatic", [(0, _axis(spec.axis if spec.axis is not None else "x", what), False)]
    if spec.kind == "ball":
        return "ball", [(0, e, True) for e in np.eye(3)]
    if spec.kind == "universal":
        a1 = _axis(spec.axis if spec.axis is not None else "x", what)
        a2 = _axis(spec.axis2 if spec.axis2 is not None else "y", what)
        return "universal", [(0, a1, True), (1, a2, True)]
    _fail(
        model,
        "legs of 1-DOF joints",
        f"closure {spec.name!r} is {spec.kind!r}, which is no chain of revolute or prismatic "
        "joints",
    )
    return None  # pragma: no cover


def _edge_columns(model, edge, sign):
    """The :class:`Column` list of a graph edge ('tree', body) or ('cut', closure)."""
    typ, i = edge
    cols = []
    if typ == "tree":
        jt = int(model.topo[i, 1])
        iv, nvj = int(model.topo[i, 3]), int(model.topo[i, 5])
        name = model.joint_names[i]
        for a in range(nvj):
            # the axis is fixed in the parent (revolute, prismatic: in both; universal: axis 0)
            # or in the child (universal axis 1, spherical: the child's own axes)
            in_child = jt == SPHERICAL or (jt == UNIVERSAL and a == 1)
            after = in_child if sign > 0 else not in_child
            cols.append(Column(name, a, False, i, sign, iv + a, after))
        return cols if sign > 0 else cols[::-1]
    kind, axes = _closure_axes(model, i)
    name = model.closures[i]
    for a, (side, u, rot) in enumerate(axes):
        # axis fixed in frame A (side 0) or B; A comes before B when sign > 0
        after = (side == 1) if sign > 0 else (side == 0)
        if kind in ("revolute", "prismatic"):
            after = False  # fixed in both bodies
        cols.append(
            Column(name, a, True, i, sign, -1, after, rot, side, tuple(float(x) for x in u))
        )
    return cols if sign > 0 else cols[::-1]


def parallel_structure(model, platform=None, q=None):
    """Base, platform and legs of a parallel mechanism, or a ModelError saying why not.

    ``platform``: a body name to use as the platform (default: detected, see the
    module docstring).  ``q``: the configuration at which the rank conditions (DOF,
    independent unactuated joints, non-singular Φ of eq. (14a)) are checked
    (default ``model.q0``).  Returns a :class:`ParallelStructure` (cached on the
    model for ``platform=None`` and ``q=None``).
    """
    model_arg(model)
    cacheable = platform is None and q is None
    if cacheable and getattr(model, "_parallel_structure", None) is not None:
        return model._parallel_structure
    ps = _structure(model, platform, model.q0 if q is None else q)
    if cacheable:
        model._parallel_structure = ps
    return ps


def _structure(model, platform, q):
    nb = model.nbodies
    G = nb  # the ground's node
    if model.m == 0:
        _fail(model, "closed loops", "the model is a tree (no closures; ld.aba is its dynamics)")
    cl = DisjointSets(range(nb + 1))  # bodies welded together; node nb is the ground
    for i in range(nb):
        jt = int(model.topo[i, 1])
        lam = model.parent[i]
        if jt == FREE:
            _fail(
                model,
                "fixed base",
                f"joint {model.joint_names[i]!r} is a free joint (a floating body)",
            )
        if jt == FIXED:
            cl.union(i, lam if lam >= 0 else G)
    for k, kind in enumerate(model.closure_kinds):
        if kind == "weld":
            a, b = (int(x) if x >= 0 else G for x in model.cl_body[k])
            cl.union(a, b)
        elif kind == "generic":
            _closure_axes(model, k)  # raises
    base = cl.find(G)
    # graph of rigid bodies (clusters) and moving joints
    edges = []
    for i in range(nb):
        if int(model.topo[i, 5]) > 0:
            lam = model.parent[i]
            edges.append((("tree", i), cl.find(lam if lam >= 0 else G), cl.find(i)))
    for k, kind in enumerate(model.closure_kinds):
        if kind != "weld":
            a, b = (int(x) if x >= 0 else G for x in model.cl_body[k])
            edges.append((("cut", k), cl.find(a), cl.find(b)))
    adj = {}
    for e, (_, u, w) in enumerate(edges):
        if u == w:
            _fail(
                model, "legs", f"joint {_edge_name(model, edges[e][0])!r} joins two welded bodies"
            )
        adj.setdefault(u, []).append((e, w))
        adj.setdefault(w, []).append((e, u))
    members = {}
    for i in range(nb):
        members.setdefault(cl.find(i), []).append(i)

    def label(node):
        return "ground" if node == base else model.body_names[min(members[node])]

    for node, lst in adj.items():
        if node != base and len(lst) == 1:
            _fail(
                model,
                "legs",
                f"body {label(node)!r} ends an open branch (one joint); every body must lie on a "
                "leg from the base to the platform",
            )
    P = None
    if platform is not None:
        pi = model.body_index(platform)
        if pi < 0 or cl.find(pi) == base:
            _fail(model, "one moving platform", f"platform {platform!r} is fixed to the ground")
        P = cl.find(pi)
    else:
        junctions = [n for n, lst in adj.items() if n != base and len(lst) >= 3]
        if len(junctions) > 1:
            names = ", ".join(repr(label(n)) for n in sorted(junctions, key=label))
            _fail(
                model,
                "one moving platform",
                f"bodies {names} each join three or more joints; the legs must meet at one "
                "platform",
            )
        if junctions:
            P = junctions[0]
    act = set(int(i) for i in model.actuated)

    def walk(start, e0, first):
        """Edges and nodes from ``start`` along edge e0 until the base or the platform."""
        path, nodes = [e0], []
        cur, prev = first, e0
        while cur != base and cur != P:
            nxt = [(e, w) for e, w in adj[cur] if e != prev]
            if len(nxt) != 1:
                _fail(
                    model,
                    "one moving platform",
                    f"body {label(cur)!r} joins {len(adj[cur])} joints but is not the platform "
                    f"({label(P) if P is not None else 'none'})",
                )
            nodes.append(cur)
            prev, cur = nxt[0]
            path.append(prev)
        return path, nodes, cur

    used = set()
    chains = []  # (edges base→end, nodes, closes_on_base)
    if P is not None:
        for e, w in adj[P]:
            if e in used:
                continue
            path, nodes, end = walk(P, e, w)
            used.update(path)
            if end == P:
                _fail(
                    model,
                    "legs",
                    f"a loop through {label(P)!r} does not reach the base (joints "
                    f"{', '.join(_edge_name(model, edges[x][0]) for x in path)})",
                )
            chains.append((path[::-1], nodes[::-1], False))
    for e, w in sorted(adj.get(base, []), key=lambda t: t[0]):
        if e in used:
            continue
        path, nodes, end = walk(base, e, w)
        used.update(path)
        if end == P:  # pragma: no cover - found from the platform side
            continue
        chains.append((path, nodes, True))
    if len(used) != len(edges):
        rest = [_edge_name(model, edges[e][0]) for e in range(len(edges)) if e not in used]
        _fail(model, "legs", f"joints {', '.join(rest)} lie on no leg between base and platform")

    def n_act(path):
        return sum(
            1
            for e in path
            if edges[e][0][0] == "tree"
            for x in range(*_vrange(model, edges[e][0][1]))
            if x in act
        )

    # a loop through the ground with two actuated joints holds the platform (the five-bar)
    doubles = [c for c in chains if c[2] and n_act(c[0]) == 2]
    if doubles:
        if P is not None or len(doubles) > 1:
            c = doubles[0]
            _fail(
                model,
                "one actuated joint per leg",
                "the loop through joints "
                f"{', '.join(_edge_name(model, edges[e][0]) for e in c[0])} has two actuated "
                "joints",
            )
        chains.remove(doubles[0])
        chains.extend(_split(model, edges, doubles[0], act))
        P = chains[-1][1][-1] if chains[-1][1] else None
        # the split legs end on the new platform: drop it from their body lists
        chains = [
            (path, nodes[:-1] if not closed else nodes, closed) for path, nodes, closed in chains
        ]
    for path, _, _ in chains:
        if n_act(path) > 1:
            _fail(
                model,
                "one actuated joint per leg",
                f"the leg through joints {', '.join(_edge_name(model, edges[e][0]) for e in path)} "
                f"has {n_act(path)} actuated coordinates",
            )
    return _assemble(model, edges, chains, P, base, members, act, label, q)


def _vrange(model, i):
    iv = int(model.topo[i, 3])
    return iv, iv + int(model.topo[i, 5])


def _edge_name(model, edge):
    typ, i = edge
    return model.joint_names[i] if typ == "tree" else model.closures[i]


def _split(model, edges, chain, act):
    """Two legs base → P from a loop through the base with two actuated joints.

    P: the first body after the first actuated joint that touches a closure (the
    paper's choice for the five-bar), else the body right after it.
    """
    path, nodes, _ = chain
    acts = [
        j
        for j, e in enumerate(path)
        if edges[e][0][0] == "tree"
        and any(x in act for x in range(*_vrange(model, edges[e][0][1])))
    ]
    a0, a1 = acts
    # nodes[j] lies between path[j] and path[j + 1]; candidates between the actuated joints
    cands = list(range(a0, a1))
    pick = cands[0]
    for j in cands:
        if edges[path[j + 1]][0][0] == "cut" or edges[path[j]][0][0] == "cut":
            pick = j
            break
    first = (path[: pick + 1], nodes[: pick + 1], False)
    second = (path[pick + 1 :][::-1], nodes[pick:][::-1], False)
    return [first, second]


def _assemble(model, edges, chains, P, base, members, act, label, q):
    """Legs with their columns and slots, ordered by actuated coordinate; rank checks at q."""
    slots = []
    body_slot = np.full(model.nbodies, ON_BASE, dtype=np.int64)
    if P is not None:
        body_slot[members[P]] = ON_PLATFORM
    legs = []
    for path, _, closed in chains:
        # orientation of each edge along the leg: from node `prev` to node `next`
        cur = base
        joints, kinds, dirs, cols, after, bodies = [], [], [], [], [], []
        k = actuated = k_col = None
        for j, e in enumerate(path):
            edge, u, w = edges[e]
            sign = 1 if u == cur else -1
            nxt = w if sign > 0 else u
            typ, i = edge
            if typ == "tree" and any(x in act for x in range(*_vrange(model, i))):
                k = j
                actuated = _vrange(model, i)[0]
                k_col = len(cols)
            if typ == "tree":
                kind = _TREE_KINDS[int(model.topo[i, 1])]
            else:
                kind = "closure:" + model.closure_kinds[i]
            joints.append(_edge_name(model, edge))
            kinds.append(kind)
            dirs.append(sign)
            cols.extend(_edge_columns(model, edge, sign))
            if nxt == base:
                after.append(ON_BASE)
            elif nxt == P:
                after.append(ON_PLATFORM)
            else:
                body_slot[members[nxt]] = len(slots)
                after.append(len(slots))
                slots.append(tuple(model.body_names[b] for b in sorted(members[nxt])))
                bodies.append(slots[-1] if len(slots[-1]) > 1 else slots[-1][0])
            cur = nxt
        legs.append(
            dict(
                bodies=tuple(bodies), joints=tuple(joints), kinds=tuple(kinds),
                directions=tuple(dirs), k=k, actuated=actuated, columns=tuple(cols),
                k_column=k_col, closes_on_base=closed, after=tuple(after),
            )
        )  # fmt: skip
    # actuated legs in the order of their coordinates, then the others
    legs.sort(key=lambda g: (g["actuated"] is None, g["actuated"] or 0))
    legs = tuple(Leg(index=i, **g) for i, g in enumerate(legs))
    actuated = np.array([g.actuated for g in legs if g.actuated is not None], dtype=np.int64)
    platform_index = min(members[P]) if P is not None else -1
    ps = ParallelStructure(
        model_name=model.name,
        base="ground",
        platform=model.body_names[platform_index] if P is not None else None,
        platform_index=platform_index,
        platform_bodies=(
            tuple(model.body_names[b] for b in sorted(members[P])) if P is not None else ()
        ),
        legs=legs,
        actuated=actuated,
        n=int(actuated.size),
        dof=-1,
        slots=tuple(slots),
        body_slot=body_slot,
    )
    dof = _check_ranks(model, ps, q)
    return ParallelStructure(**{**ps.__dict__, "dof": dof})


def _check_ranks(model, ps, q):
    """DOF = number of actuated joints; independent unactuated joints; Φ of (14a) non-singular."""
    from loopdyn.kinematics.closures import constraint_rank

    q = np.asarray(q, dtype=float)
    dof = model.nv - constraint_rank(model, q).rank
    na = len(model.actuated)
    if na > dof:
        _fail(
            model,
            "no actuation redundancy",
            f"{na} actuated coordinates drive a mechanism of {dof} DOF",
        )
    if dof == 0:
        _fail(
            model,
            "DOF = number of actuated joints",
            "the mechanism is rigid at this configuration (DOF 0: its closures lock every "
            "joint), so DeNOC has no minimal coordinates (the actuated joint rates) to "
            "work in",
        )
    if na < dof:
        _fail(
            model,
            "DOF = number of actuated joints",
            f"the mechanism has {dof} DOF but {na} actuated coordinates (a leg with an internal "
            "mobility, or too few actuators)",
        )
    s, _ = leg_twists(model, ps, q)
    Phi = np.zeros((6, 6))
    for leg, S in zip(ps.legs, s, strict=True):
        U = np.array([S[c] for c in range(len(leg.columns)) if c != leg.k_column]).reshape(-1, 6).T
        sv = np.linalg.svd(U, compute_uv=False) if U.size else np.zeros(0)
        if sv.size and sv[-1] < 1e-9 * max(1.0, sv[0]):
            _fail(
                model,
                "independent unactuated joints in each leg",
                f"the unactuated joints of leg {leg.index + 1} ({', '.join(leg.joints)}) are "
                f"dependent at this configuration (singular value {sv[-1]:.2g}): an idle "
                "mobility (e.g. a rod spinning between two ball joints) or a singular q",
            )
        if not leg.closes_on_base:
            Q = np.linalg.qr(U)[0] if U.size else np.zeros((6, 0))
            Phi += np.eye(6) - Q @ Q.T
    if ps.platform is not None:
        cond = np.linalg.cond(Phi)
        if not cond < 1e12:
            _fail(
                model,
                "non-singular platform constraint",
                f"Φ of eq. (14a) is singular at this configuration (condition number {cond:.3g}): "
                "the platform moves with every actuator locked",
            )
    return int(dof)


def platform_point(model, ps, Xw):
    """E: the world position of the platform's centre of mass (the origin without platform)."""
    if ps.platform is None:
        return np.zeros(3)
    b = ps.platform_index
    I6 = model.inertia[b]
    c = np.array([I6[2, 4], I6[0, 5], I6[1, 3]]) / I6[3, 3]
    return Xw[b, 3] + Xw[b, :3] @ c


def leg_twists(model, ps, q, data=None):
    """Unit joint twists of every leg's columns (numpy, for checks and teaching).

    Returns ``(s, E)``: ``s[l]`` (m_l, 6) the twists ``[ω; v_E]`` of leg l's 1-DOF
    joints in world axes about the platform point E (``platform_point``), signed
    along the leg (``Column.sign``), i.e. the paper's ``A_{e,i} p_i`` of eq. (9b).
    """
    from loopdyn.kinematics.frames import forward_kinematics

    d = forward_kinematics(model, q, data=model.create_data() if data is None else data)
    Xw = d.Xw
    E = platform_point(model, ps, Xw)
    out = []
    for leg in ps.legs:
        S = np.zeros((len(leg.columns), 6))
        for c, col in enumerate(leg.columns):
            if not col.closure:
                b = col.index
                R, o = Xw[b, :3], Xw[b, 3]
                w = R @ d.S[b, :3, col.axis]
                u = R @ d.S[b, 3:, col.axis]
                S[c] = np.r_[w, u + np.cross(w, E - o)]
            else:
                bb = int(model.cl_body[col.index, col.side])
                X = model.cl_X[col.index, col.side]
                R = Xw[bb, :3] @ X[:3] if bb >= 0 else X[:3]
                p = Xw[bb, 3] + Xw[bb, :3] @ X[3] if bb >= 0 else X[3]
                a = R @ np.asarray(col.local_axis)
                S[c] = np.r_[a, np.cross(a, E - p)] if col.rotation else np.r_[np.zeros(3), a]
            S[c] *= col.sign
        out.append(S)
    return out, E


__all__ = ["Column", "Leg", "ParallelStructure", "leg_twists", "parallel_structure"]
