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

from loopdyn.errors import ModelError
from loopdyn.io import _xml
from loopdyn.io._description import WORLD, Coupling, Description, Inertial, Joint, Link, Loop
from loopdyn.io._geometry import pose, transform

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
    return Inertial.at(mass, T, v)


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
    """A :class:`~loopdyn.io._description.Description` of URDF text ``data`` (file ``name``).

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


# ============================================================================ writing
#: joint limits written when the model holds none: URDF requires <limit> on revolute
#: (written as continuous instead) and prismatic joints; loopdyn's dynamics has no limits
_NO_LIMIT = {"lower": -1e6, "upper": 1e6, "effort": 0.0, "velocity": 0.0}


def _num(x):
    return f"{float(x):.17g}"


def _nums(x):
    return " ".join(_num(t) for t in x)


def _origin_xml(R, p, pad):
    from loopdyn.io._geometry import matrix_rpy

    rpy = matrix_rpy(R) if not np.array_equal(R, np.eye(3)) else np.zeros(3)
    return f'{pad}<origin xyz="{_nums(p)}" rpy="{_nums(rpy)}"/>'


def dumps(model):
    """URDF text of ``model``, its closures as URDF+ ``<loop>`` elements.

    Each body is a link whose frame is its joint's frame (as loopdyn's and URDF's are),
    with its inertial (mass, centre of mass, inertia about it); each tree joint a
    ``<joint>`` from the parent's link (the ground is the link ``world``): revolute as
    ``continuous`` (loopdyn has no limits; a model read from a file keeps its limits in
    ``model.metadata["limits"]`` and they are written back), prismatic, fixed and free
    (``floating``); named frames that no closure uses become massless links on fixed
    joints (read back as frames of the same body); closures of kind ball, revolute,
    universal, prismatic and weld (``fixed``) become ``<loop>`` between the two
    frames' bodies at the frames' placements; couplings ``<mimic>``; actuated joints a
    ``<transmission>`` each.  What URDF cannot say raises :class:`~loopdyn.ModelError`
    naming it: universal and spherical tree joints, generic closures, couplings that are
    not between one-coordinate joints.  URDF has no gravity, no planar flag and no
    reference configuration: the file's header comment names the ``ld.load`` options
    that restore the first two (``planar=True``, ``gravity=...``); a loader assembles
    ``q0`` from the joints' zero.
    """
    from xml.sax.saxutils import quoteattr

    from loopdyn.model.closures import CouplingSpec
    from loopdyn.model.joints import FIXED, FREE, PRISMATIC, REVOLUTE, _axis

    def q(name):
        return quoteattr(str(name))

    names = set(model.body_names) | set(model.joint_names) | set(model.frames)
    if WORLD in model.body_names:
        raise ModelError(
            f"{model.name}: a body named {WORLD!r} is URDF's ground; rename it to write URDF"
        )
    limits = getattr(model, "metadata", {}).get("limits", {})
    act = {int(i) for i in model.actuated}
    out = ['<?xml version="1.0"?>', "<!-- written by loopdyn"]
    opts = []  # what URDF cannot hold, as the ld.load options that restore it
    if model.planar:
        opts.append("planar=True")
    g = np.asarray(model.gravity, dtype=float)
    if not np.array_equal(g, np.array([0.0, 0.0, -9.81])):
        opts.append(f"gravity=({_num(g[0])}, {_num(g[1])}, {_num(g[2])})")
    if opts:
        out.append(f"     read it back with ld.load(path, {', '.join(opts)})")
    out += ["-->", f"<robot name={q(model.name)}>", f"  <link name={q(WORLD)}/>"]
    for i in range(model.nbodies):
        I6 = model.inertia[i]
        m = I6[3, 3]
        c = np.array([I6[2, 4], I6[0, 5], I6[1, 3]]) / m
        Ic = I6[:3, :3] - m * (c @ c * np.eye(3) - np.outer(c, c))
        out += [
            f"  <link name={q(model.body_names[i])}>",
            "    <inertial>",
            _origin_xml(np.eye(3), c, "      "),
            f'      <mass value="{_num(m)}"/>',
            f'      <inertia ixx="{_num(Ic[0, 0])}" ixy="{_num(Ic[0, 1])}" '
            f'ixz="{_num(Ic[0, 2])}" iyy="{_num(Ic[1, 1])}" iyz="{_num(Ic[1, 2])}" '
            f'izz="{_num(Ic[2, 2])}"/>',
            "    </inertial>",
            "  </link>",
        ]
    mimic = {}
    for spec in model._closure_specs:
        if isinstance(spec, CouplingSpec):
            mimic[spec.joint_b] = spec
    transmissions = []
    for i in range(model.nbodies):
        t = model.topo[i]
        jt, iv, nv = int(t[1]), int(t[3]), int(t[5])
        jname = model.joint_names[i]
        kind = {REVOLUTE: "continuous", PRISMATIC: "prismatic", FIXED: "fixed", FREE: "floating"}
        if jt not in kind:
            raise ModelError(
                f"{model.name}: joint {jname!r} is {'universal' if nv == 2 else 'spherical'}, "
                "which URDF cannot express; save as .toml (native) or .xml (MJCF)"
            )
        typ = kind[jt]
        lim = limits.get(jname)
        if typ == "continuous" and lim and "lower" in lim and "upper" in lim:
            typ = "revolute"
        p = model.parent[i]
        out += [
            f"  <joint name={q(jname)} type={q(typ)}>",
            f"    <parent link={q(WORLD if p < 0 else model.body_names[p])}/>",
            f"    <child link={q(model.body_names[i])}/>",
            _origin_xml(model.jgeom[i, :3], model.jgeom[i, 3], "    "),
        ]
        if jt in (REVOLUTE, PRISMATIC):
            out.append(f'    <axis xyz="{_nums(model.jgeom[i, 4])}"/>')
        if typ in ("revolute", "prismatic"):
            lim = {**_NO_LIMIT, **(lim or {})}
            attrs = " ".join(
                f'{k}="{_num(lim[k])}"' for k in ("lower", "upper", "effort", "velocity")
            )
            out.append(f"    <limit {attrs}/>")
        spec = mimic.pop(jname, None)
        if spec is not None:
            out.append(
                f"    <mimic joint={q(spec.joint_a)} multiplier={q(_num(spec.ratio))} "
                f"offset={q(_num(spec.offset))}/>"
            )
        out.append("  </joint>")
        if nv and set(range(iv, iv + nv)) <= act:
            transmissions.append(jname)
    if mimic:
        c = next(iter(mimic.values()))
        raise ModelError(
            f"{model.name}: coupling {c.name!r} drives {c.joint_b!r}, which is not a tree "
            "joint URDF can <mimic>; save as .toml (native)"
        )
    used = set()
    loops = []
    for spec in model._closure_specs:
        if isinstance(spec, CouplingSpec):
            continue
        if spec.kind == "generic":
            raise ModelError(
                f"{model.name}: closure {spec.name!r} is generic, which URDF+ <loop> cannot "
                "express; save as .toml (native)"
            )
        used |= {spec.frame_a, spec.frame_b}
        typ = {"weld": "fixed", "ball": "ball"}.get(spec.kind, spec.kind)
        loops.append(f"  <loop name={q(spec.name)} type={q(typ)}>")
        for role, fname in (("predecessor", spec.frame_a), ("successor", spec.frame_b)):
            k = model.frames.index(fname)
            b = int(model.frame_body[k])
            X = model.frame_X[k]
            loops += [
                f"    <{role} link={q(WORLD if b < 0 else model.body_names[b])}>",
                _origin_xml(X[:3], X[3], "      "),
                f"    </{role}>",
            ]
        # ModelBuilder.add_closure's defaults where the spec has none (a planar revolute: z)
        default = {"revolute": ("z", None), "prismatic": ("x", None), "universal": ("x", "y")}
        dflt = default.get(spec.kind, (None, None))
        for tag, ax, d in (("axis", spec.axis, dflt[0]), ("axis2", spec.axis2, dflt[1])):
            ax = d if ax is None else ax
            if ax is not None:
                a = _axis(ax, f"closure {spec.name!r}")
                loops.append(f'    <{tag} xyz="{_nums(a)}"/>')
        loops.append("  </loop>")
    for k, fname in enumerate(model.frames):
        if fname in used or fname in names - set(model.frames):
            continue
        b = int(model.frame_body[k])
        X = model.frame_X[k]
        out += [
            f"  <link name={q(fname)}/>",
            f'  <joint name={q(fname + "_fixed")} type="fixed">',
            f"    <parent link={q(WORLD if b < 0 else model.body_names[b])}/>",
            f"    <child link={q(fname)}/>",
            _origin_xml(X[:3], X[3], "    "),
            "  </joint>",
        ]
    out += loops
    for jname in transmissions:
        out += [
            f"  <transmission name={q(jname + '_transmission')}>",
            "    <type>transmission_interface/SimpleTransmission</type>",
            f"    <joint name={q(jname)}/>",
            "  </transmission>",
        ]
    out.append("</robot>")
    return "\n".join(out) + "\n"
