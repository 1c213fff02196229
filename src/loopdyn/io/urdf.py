"""URDF reader (with the URDF+ ``<loop>`` and Drake ``<drake:ball_constraint>`` loops).

Read: ``<link>`` inertials (origin xyz/rpy, mass, full inertia tensor), visual and
collision geometry (kept as metadata; mesh files are resolved but never required),
``<joint>`` of type revolute, continuous, prismatic, fixed, floating and planar
(origin, axis, limits, ``<mimic>``), ``<transmission>`` joints (actuated), the
URDF+ ``independent`` attribute (metadata).  Loops:

- URDF+ (Chignoli et al., 2024)::

    <loop name="knee_loop" type="revolute">
      <predecessor link="coupler"><origin xyz="1 0 0" rpy="0 0 0"/></predecessor>
      <successor link="rocker"><origin xyz="0.6 0 0"/></successor>
      <axis xyz="0 0 1"/>
    </loop>

  the loop joint's frame sits at ``origin`` on each link (the predecessor's is
  frame A, axes in it); types revolute, continuous, prismatic, fixed, ball
  (or spherical) and universal (``<axis>`` and ``<axis2>``).
- Drake: ``<drake:ball_constraint>`` with ``<drake:ball_constraint_body_A name=..>``,
  ``..._body_B``, ``..._p_AP value="x y z"`` and ``..._p_BQ`` (points in the bodies'
  frames) — a ball closure.

A planar joint becomes a chain prismatic–prismatic–revolute (in-plane axes u, w
with u × w = the joint's axis, then the axis); the two intermediate bodies carry a
regularising mass 1e-9 times the moving link's (loopdyn bodies need mass).
"""

from pathlib import Path

import numpy as np

from loopdyn.io import _xml
from loopdyn.io._geometry import pose, transform
from loopdyn.io._graph import WORLD, Coupling, Description, Inertial, Joint, Link, Loop

_TYPES = ("revolute", "continuous", "prismatic", "fixed", "floating", "planar")


def _origin(doc, elem, what):
    """4×4 transform of the ``<origin>`` child of ``elem`` (identity if absent)."""
    o = _xml.child(elem, "origin")
    if o is None:
        return np.eye(4)
    xyz = _xml.floats(doc, o, o.get("xyz"), 3, f"{what} origin xyz", [0, 0, 0])
    rpy = _xml.floats(doc, o, o.get("rpy"), 3, f"{what} origin rpy", [0, 0, 0])
    return pose(xyz, rpy)


def _inertial(doc, link, what):
    el = _xml.child(link, "inertial")
    if el is None:
        return None
    T = _origin(doc, el, f"{what} inertial")
    m = _xml.child(el, "mass")
    if m is None:
        raise doc.error(el, what, "<inertial> without <mass>")
    mass = _xml.number(doc, m, m.get("value"), f"{what} mass", nonnegative=True)
    i = _xml.child(el, "inertia")
    if i is None:
        raise doc.error(el, what, "<inertial> without <inertia>")
    v = {}
    for k in ("ixx", "ixy", "ixz", "iyy", "iyz", "izz"):
        v[k] = _xml.number(doc, i, i.get(k), f"{what} inertia {k}")
    I = np.array(
        [
            [v["ixx"], v["ixy"], v["ixz"]],
            [v["ixy"], v["iyy"], v["iyz"]],
            [v["ixz"], v["iyz"], v["izz"]],
        ]
    )
    R = T[:3, :3]
    return Inertial(mass, T[:3, 3].copy(), R @ I @ R.T)


def _geometry(doc, link, what, base_dir, roots):
    out = []
    for kind in ("visual", "collision"):
        for el in _xml.children(link, kind):
            g = _xml.child(el, "geometry")
            entry = {"kind": kind, "name": el.get("name"), "X": _origin(doc, el, f"{what} {kind}")}
            shape = None if g is None else next(iter(g), None)
            if shape is None:
                continue
            t = _xml.local(shape.tag)
            entry["type"] = t
            if t == "mesh":
                uri = shape.get("filename", "")
                entry["uri"] = uri
                entry["path"] = _xml.resolve_uri(uri, base_dir, roots)
                s = shape.get("scale")
                entry["scale"] = (
                    _xml.floats(doc, shape, s, 3, f"{what} mesh scale").tolist()
                    if s
                    else [1.0, 1.0, 1.0]
                )
            elif t == "box":
                entry["size"] = _xml.floats(
                    doc, shape, shape.get("size"), 3, f"{what} box size"
                ).tolist()
            elif t in ("cylinder", "capsule"):
                entry["radius"] = _xml.number(doc, shape, shape.get("radius"), f"{what} {t} radius")
                entry["length"] = _xml.number(doc, shape, shape.get("length"), f"{what} {t} length")
            elif t == "sphere":
                entry["radius"] = _xml.number(
                    doc, shape, shape.get("radius"), f"{what} sphere radius"
                )
            out.append(entry)
    return out


def _joint(doc, el):
    name = el.get("name")
    what = f"joint {name!r}"
    if not name:
        raise doc.error(el, "joint", "a joint needs a name attribute")
    jtype = el.get("type")
    if jtype not in _TYPES:
        raise doc.error(el, what, f"unknown type {jtype!r}; URDF types are {', '.join(_TYPES)}")
    links = {}
    for role in ("parent", "child"):
        c = _xml.child(el, role)
        if c is None or not c.get("link"):
            raise doc.error(el, what, f"missing <{role} link=...>")
        links[role] = c.get("link")
    ax = _xml.child(el, "axis")
    axis = None
    if jtype not in ("fixed", "floating"):
        axis = (
            np.array([1.0, 0.0, 0.0])
            if ax is None
            else _xml.floats(doc, ax, ax.get("xyz"), 3, f"{what} axis", [1, 0, 0])
        )
    limits = {}
    lim = _xml.child(el, "limit")
    if lim is not None:
        for k in ("lower", "upper", "effort", "velocity"):
            if lim.get(k) is not None:
                limits[k] = _xml.number(doc, lim, lim.get(k), f"{what} limit {k}")
    dyn = _xml.child(el, "dynamics")
    if dyn is not None:
        for k in ("damping", "friction"):
            if dyn.get(k) is not None:
                limits[k] = _xml.number(doc, dyn, dyn.get(k), f"{what} dynamics {k}")
    kind = {"continuous": "continuous", "floating": "floating"}.get(jtype, jtype)
    j = Joint(
        name=name,
        kind=kind,
        parent=links["parent"],
        child=links["child"],
        X_pj=_origin(doc, el, what),
        X_cj=np.eye(4),
        line=doc.line(el),
        axis=axis,
        limits=limits or None,
    )
    mimic = None
    mi = _xml.child(el, "mimic")
    if mi is not None:
        ref = mi.get("joint")
        if not ref:
            raise doc.error(mi, what, "<mimic> needs a joint attribute")
        mult = _xml.number(doc, mi, mi.get("multiplier"), f"{what} mimic multiplier", 1.0)
        off = _xml.number(doc, mi, mi.get("offset"), f"{what} mimic offset", 0.0)
        mimic = Coupling(f"{name}", ref, name, mult, off, doc.line(mi), "mimic joint")
    return j, mimic


def _loop(doc, el):
    name = el.get("name")
    what = f"loop {name!r}"
    if not name:
        raise doc.error(el, "loop", "a loop needs a name attribute")
    kind = el.get("type", "")
    kind = {"spherical": "ball", "continuous": "revolute"}.get(kind, kind)
    if kind not in ("revolute", "prismatic", "fixed", "ball", "universal"):
        raise doc.error(
            el,
            what,
            f"unsupported loop type {el.get('type')!r}; use revolute, "
            "continuous, prismatic, fixed, ball (spherical) or universal",
        )
    ends = []
    for role in ("predecessor", "successor"):
        c = _xml.child(el, role)
        if c is None or not c.get("link"):
            raise doc.error(el, what, f"missing <{role} link=...>")
        ends.append((c.get("link"), _origin(doc, c, f"{what} {role}")))
    axes = []
    for tag in ("axis", "axis2"):
        a = _xml.child(el, tag)
        axes.append(None if a is None else _xml.floats(doc, a, a.get("xyz"), 3, f"{what} {tag}"))
    if kind in ("revolute", "prismatic", "universal") and axes[0] is None:
        axes[0] = np.array([1.0, 0.0, 0.0])
    return Loop(
        name, kind, ends[0][0], ends[0][1], ends[1][0], ends[1][1], doc.line(el), axes[0], axes[1]
    )


def _drake_ball(doc, el, k):
    what = f"drake:ball_constraint #{k + 1}"
    vals = {}
    for tag, attr in (("body_A", "name"), ("body_B", "name"), ("p_AP", "value"), ("p_BQ", "value")):
        c = _xml.child(el, f"drake:ball_constraint_{tag}")
        if c is None or c.get(attr) is None:
            raise doc.error(el, what, f"missing <drake:ball_constraint_{tag} {attr}=...>")
        vals[tag] = c.get(attr)
    pA = _xml.floats(doc, el, vals["p_AP"], 3, f"{what} p_AP")
    pB = _xml.floats(doc, el, vals["p_BQ"], 3, f"{what} p_BQ")
    return Loop(
        f"ball_constraint_{k + 1}",
        "ball",
        vals["body_A"],
        transform(p=pA),
        vals["body_B"],
        transform(p=pB),
        doc.line(el),
    )


def read(data, name, path=None, package_dirs=None, max_bytes=_xml.MAX_BYTES, floating_base=None):
    """A :class:`~loopdyn.io._graph.Description` of URDF text ``data`` (file ``name``).

    A link named ``world`` is the ground, unless ``floating_base`` is True: then, as
    in Pinocchio, it is an ordinary (massless) root link under the free joint.
    """
    doc = _xml.parse(data, name, max_bytes)
    root = doc.root
    if _xml.local(root.tag) != "robot":
        raise doc.error(root, "", f"the root element is <{_xml.local(root.tag)}>, not <robot>")
    base_dir = None if path is None else str(Path(path).resolve().parent)
    roots = list(package_dirs) if package_dirs is not None else _xml.default_roots(path)
    desc = Description(name=root.get("name") or "robot", fmt="urdf", file=name, line=doc.line(root))
    for el in _xml.children(root, "link"):
        lname = el.get("name")
        what = f"link {lname!r}"
        if not lname:
            raise doc.error(el, "link", "a link needs a name attribute")
        desc.links.append(
            Link(
                lname,
                _inertial(doc, el, what),
                doc.line(el),
                geometry=_geometry(doc, el, what, base_dir, roots),
            )
        )
    for el in _xml.children(root, "joint"):
        j, mimic = _joint(doc, el)
        desc.joints.append(j)
        if mimic is not None:
            desc.couplings.append(mimic)
        if el.get("independent") is not None:
            desc.extra.setdefault("independent", {})[j.name] = (
                el.get("independent").strip().lower() == "true"
            )
    # a link named "world" (common in URDF) is the ground
    if any(L.name == WORLD for L in desc.links):
        if floating_base:
            rename = "world_link"
            for L in desc.links:
                if L.name == WORLD:
                    L.name = rename
            for j in desc.joints:
                j.parent = rename if j.parent == WORLD else j.parent
                j.child = rename if j.child == WORLD else j.child
            desc.notes.append(
                "link 'world' is an ordinary root link named 'world_link' (floating_base=True)"
            )
        else:
            desc.links = [L for L in desc.links if L.name != WORLD]
            desc.notes.append("link 'world' is the ground")
    for el in _xml.children(root, "loop"):
        desc.loops.append(_loop(doc, el))
    for k, el in enumerate(_xml.children(root, "drake:ball_constraint")):
        desc.loops.append(_drake_ball(doc, el, k))
    for el in _xml.children(root, "transmission"):
        for j in _xml.children(el, "joint"):
            if j.get("name"):
                desc.actuated.append(j.get("name"))
    _refuse_rootless_cycle(desc)
    _refuse_mimic_cycle(desc)
    # the root: the link that is nobody's child
    children = {j.child for j in desc.joints}
    tops = [L.name for L in desc.links if L.name not in children]
    if tops:
        desc.root_hint = tops[0]
    return desc


def _refuse_rootless_cycle(desc):
    """ModelError naming the joints and links of a cycle of parent -> child joints that
    no root leads into: every link of it is a joint's child, so nothing in the file says
    where the part hangs from.  (A link that is the child of two joints, one of them
    from a root, closes a loop: that is not refused here.)"""
    parents, children = {}, {}
    for j in desc.joints:
        parents.setdefault(j.child, []).append(j)
        children.setdefault(j.parent, []).append(j)
    reached = {WORLD} | {L.name for L in desc.links if L.name not in parents}
    stack = list(reached)
    while stack:
        for j in children.get(stack.pop(), ()):
            if j.child not in reached:
                reached.add(j.child)
                stack.append(j.child)
    for L in desc.links:
        if L.name in reached:
            continue
        # every parent of a link no root reaches is itself unreached: walk up to a cycle
        at, path, x = {}, [], L.name
        while x in parents and x not in at:
            at[x] = len(path)
            path.append(parents[x][0])
            x = path[-1].parent
        if x not in at:  # an undeclared parent link: the graph checks name it
            continue
        cycle = path[at[x] :][::-1]  # parent -> child order
        k = min(range(len(cycle)), key=lambda i: cycle[i].line)
        cycle = cycle[k:] + cycle[:k]
        links = " -> ".join([j.parent for j in cycle] + [cycle[0].parent])
        joints = ", ".join(repr(j.name) for j in cycle)
        raise desc.error(
            cycle[0].line,
            f"joints {joints}",
            f"links {links} form a cycle that no root link leads to (each is a joint's "
            "child); a URDF hangs from a root link, one that is no joint's child: make a "
            "link of the cycle the root (remove or reverse one of these joints; a loop "
            "can be closed with <loop>)",
        )


def _refuse_mimic_cycle(desc):
    """ModelError naming URDF mimic joints that mimic each other in a cycle (itself
    included): none of them follows a driven joint."""
    mimics = {c.joint_b: c for c in desc.couplings if c.source == "mimic joint"}
    for start in mimics:
        at, x = {}, start
        while x in mimics and x not in at:
            at[x] = len(at)
            x = mimics[x].joint_a
        if x not in at:
            continue
        cycle = list(at)[at[x] :]
        chain = " mimics ".join(repr(j) for j in [*cycle, cycle[0]])
        raise desc.error(
            mimics[cycle[0]].line,
            f"mimic joint {cycle[0]!r}",
            f"mimic joints form a cycle ({chain}): none of them follows a joint that "
            "moves on its own; remove the <mimic> of one of them",
        )
