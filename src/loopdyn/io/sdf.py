"""SDFormat reader: links, joints (loops allowed), frames, poses, nested models.

Read: the ``<model>`` of the file (or of its ``<world>``, ``model=`` chooses one by
name), its ``<pose>``, links with ``<inertial>`` (pose, mass, full tensor; a link
without ``<inertial>`` gets SDFormat's default: 1 kg, identity inertia, noted),
visual / collision geometry (metadata), ``<frame>`` elements, nested ``<model>``
and ``<include>`` (``model://`` URIs resolved under ``package_dirs`` only), and
joints of type revolute, continuous, prismatic, ball, universal, revolute2 (a
universal joint), fixed and gearbox (a coupling, θ₂ = −ratio · θ₁ between the two
joints that join the reference body to the parent and child links).  Poses follow
SDFormat 1.7+ (``relative_to``; a link relative to the model frame, a joint to its
child link, a frame to what it is attached to); SDFormat ≤ 1.6 files (``frame=""``,
``<use_parent_model_frame>``) read the same.  ``<drake:ball_constraint>`` adds a
ball closure.

Joints may form loops: the spanning tree prefers the file's order (a link's first
parent joint), ``tree_joints=`` / ``cut_joints=`` override it, and every joint off
the tree becomes a closure of its own kind (ball, revolute, prismatic, universal,
fixed → weld).  A part not attached to the world gets a free joint (a floating
base) unless ``floating_base=False``.
"""

from pathlib import Path

import numpy as np

from loopdyn.errors import ModelError
from loopdyn.io import _xml
from loopdyn.io._description import WORLD, Coupling, Description, Inertial, Joint, Link, Loop
from loopdyn.io._geometry import inv, quat_matrix, rpy_matrix, transform

MODEL = "__model__"
_JOINT_TYPES = (
    "revolute",
    "continuous",
    "prismatic",
    "ball",
    "universal",
    "revolute2",
    "fixed",
    "gearbox",
)
_MAX_INCLUDE_DEPTH = 8


class _Model:
    """Everything of one (possibly nested) model, names scoped with ``::``."""

    def __init__(self):
        self.links = []  # (scoped name, elem, doc)
        self.joints = []
        self.frames = []
        self.balls = []
        self.poses = {}  # scoped frame -> (relative_to scoped, 4x4, doc, elem)
        self.attached = {}  # scoped frame -> scoped frame it moves with
        self.canonical = {}  # scoped model frame -> scoped canonical link


def _pose(doc, elem, what):
    """(4×4, relative_to or None) of the ``<pose>`` child of ``elem``."""
    p = _xml.child(elem, "pose")
    if p is None:
        return np.eye(4), None
    rel = p.get("relative_to") or p.get("frame") or None
    text = p.text or "0 0 0 0 0 0"
    fmt = p.get("rotation_format", "euler_rpy")
    if fmt == "quat_xyzw":
        v = _xml.floats(doc, p, text, 7, f"{what} pose")
        x, y, z, w = v[3:]
        if np.linalg.norm(v[3:]) < 1e-12:
            raise doc.error(p, what, "zero quaternion in <pose>")
        R = quat_matrix([w, x, y, z])
    elif fmt == "euler_rpy":
        v = _xml.floats(doc, p, text, 6, f"{what} pose")
        ang = v[3:]
        if (p.get("degrees") or "").strip().lower() in ("true", "1"):
            ang = np.radians(ang)
        R = rpy_matrix(ang)
    else:
        raise doc.error(p, what, f"unknown rotation_format {fmt!r}")
    return transform(R, v[:3]), rel


def _scoped(scope, name):
    if name is None:
        return None
    if name == WORLD:
        return WORLD
    return f"{scope}{name}"


class _Reader:
    def __init__(self, name, path, package_dirs, max_bytes):
        self.name = name
        self.path = path
        self.base_dir = None if path is None else str(Path(path).resolve().parent)
        self.roots = list(package_dirs) if package_dirs is not None else _xml.default_roots(path)
        self.max_bytes = max_bytes
        self.m = _Model()
        self.notes = []

    # ------------------------------------------------------------------ collect
    def collect(self, doc, elem, scope, depth=0):
        """Gather the links, joints and frames of model ``elem`` under ``scope``."""
        m = self.m
        model_frame = f"{scope}{MODEL}"
        first_link = None
        for c in elem:
            tag = _xml.local(c.tag)
            cname = c.get("name")
            if tag in ("link", "joint", "frame", "model") and not cname:
                raise doc.error(c, tag, "needs a name attribute")
            if tag in ("link", "joint", "frame") and _scoped(scope, cname) in m.poses:
                raise doc.error(
                    c,
                    f"{tag} {cname!r}",
                    "another link, joint or frame of the "
                    "model has this name (SDFormat frame names are unique)",
                )
            if tag == "link":
                sname = _scoped(scope, cname)
                T, rel = _pose(doc, c, f"link {cname!r}")
                m.poses[sname] = (_scoped(scope, rel) if rel else model_frame, T, doc, c)
                m.attached[sname] = sname
                m.links.append((sname, c, doc, scope))
                first_link = first_link or sname
            elif tag == "joint":
                sname = _scoped(scope, cname)
                child = _xml.child(c, "child")
                if child is None or not (child.text or "").strip():
                    raise doc.error(c, f"joint {cname!r}", "missing <child>")
                child_name = _scoped(scope, child.text.strip())
                T, rel = _pose(doc, c, f"joint {cname!r}")
                m.poses[sname] = (_scoped(scope, rel) if rel else child_name, T, doc, c)
                m.attached[sname] = child_name
                m.joints.append((sname, c, doc, scope))
            elif tag == "frame":
                sname = _scoped(scope, cname)
                att = c.get("attached_to")
                att = _scoped(scope, att) if att else model_frame
                T, rel = _pose(doc, c, f"frame {cname!r}")
                m.poses[sname] = (_scoped(scope, rel) if rel else att, T, doc, c)
                m.attached[sname] = att
                m.frames.append((sname, c, doc))
            elif tag in ("model", "include"):
                self._nested(doc, c, scope, model_frame, depth)
            elif tag == "drake:ball_constraint":
                m.balls.append((c, doc, scope))
            elif tag == "plugin":
                self.notes.append(f"plugin {c.get('name')!r} ignored")
        canonical = elem.get("canonical_link")
        m.canonical[model_frame] = _scoped(scope, canonical) if canonical else first_link
        if model_frame not in m.poses:
            m.poses[model_frame] = (None, np.eye(4), doc, elem)
        m.attached[model_frame] = m.canonical[model_frame]

    def _nested(self, doc, c, scope, parent_frame, depth):
        tag = _xml.local(c.tag)
        if depth >= _MAX_INCLUDE_DEPTH:
            raise doc.error(c, tag, f"models nested deeper than {_MAX_INCLUDE_DEPTH} levels")
        if tag == "model":
            inner, idoc, name = c, doc, c.get("name")
        else:
            uri_el = _xml.child(c, "uri")
            uri = (uri_el.text or "").strip() if uri_el is not None else ""
            idoc, inner = self._include(doc, c, uri)
            n = _xml.child(c, "name")
            name = (n.text or "").strip() if n is not None and n.text else inner.get("name")
            if not name:
                raise doc.error(c, "include", "the included model has no name")
        sub = f"{scope}{name}::"
        T, rel = _pose(doc, c, f"{tag} {name!r}")
        if tag == "include" and _xml.child(c, "pose") is None:
            T, rel = _pose(idoc, inner, f"model {name!r}")
            rel = None
        elif tag == "model" and rel is None:
            rel = None
        self.m.poses[f"{sub}{MODEL}"] = (_scoped(scope, rel) if rel else parent_frame, T, doc, c)
        self.collect(idoc, inner, sub, depth + 1)
        # the nested model's own <pose> was read as its placement; collect() must not reset it

    def _include(self, doc, c, uri):
        path = _xml.resolve_uri(uri, self.base_dir, self.roots)
        if path is not None and Path(path).is_file():
            target = Path(path)
        else:
            target = None
            base = uri.split("://", 1)[-1]
            for r in self.roots:
                d = Path(r) / base
                cfg = d / "model.config"
                if cfg.is_file() and _xml.resolve_uri(str(cfg), None, self.roots):
                    cdoc = _xml.parse(
                        _xml.read_bytes(cfg, self.max_bytes), cfg.name, self.max_bytes
                    )
                    s = _xml.child(cdoc.root, "sdf")
                    if s is not None and s.text:
                        cand = _xml.resolve_uri(str(d / s.text.strip()), None, self.roots)
                        if cand:
                            target = Path(cand)
                            break
        if target is None:
            raise doc.error(
                c,
                "include",
                f"cannot resolve {uri!r} under the roots "
                f"{[str(r) for r in self.roots]} (pass package_dirs=)",
            )
        idoc = _xml.parse(_xml.read_bytes(target, self.max_bytes), target.name, self.max_bytes)
        inner = _find_model(idoc, None)
        return idoc, inner

    # ------------------------------------------------------------------ poses
    def resolve(self, frame, stack=()):
        """Pose of scoped ``frame`` in the top model frame (4×4)."""
        if frame == WORLD:
            return self.world_in_model
        cache = self._cache
        if frame in cache:
            return cache[frame]
        if frame not in self.m.poses and f"{frame}::{MODEL}" in self.m.poses:
            frame = f"{frame}::{MODEL}"
        if frame not in self.m.poses:
            raise ModelError(f"unknown frame {frame!r}")
        if frame in stack:
            raise ModelError(f"the poses of frames {' -> '.join((*stack, frame))} form a cycle")
        rel, T, _, _ = self.m.poses[frame]
        out = T if rel is None else self.resolve(rel, (*stack, frame)) @ T
        cache[frame] = out
        return out

    def link_of(self, frame, stack=()):
        """The link a scoped frame moves with."""
        if frame == WORLD:
            return WORLD
        if frame not in self.m.attached and f"{frame}::{MODEL}" in self.m.attached:
            frame = f"{frame}::{MODEL}"
        if frame in stack or frame not in self.m.attached:
            raise ModelError(f"frame {frame!r} is not attached to a link")
        a = self.m.attached[frame]
        if a == frame:
            return a
        if a is None:
            raise ModelError(f"model frame {frame!r} has no link")
        return self.link_of(a, (*stack, frame))

    def pose_of(self, doc, elem, what, frame):
        try:
            return self.resolve(frame)
        except ModelError as e:
            raise doc.error(elem, what, str(e)) from None


def _find_model(doc, model_name):
    root = doc.root
    tag = _xml.local(root.tag)
    if tag == "model":
        return root
    if tag != "sdf":
        raise doc.error(root, "", f"the root element is <{tag}>, not <sdf>")
    models = _xml.children(root, "model")
    for w in _xml.children(root, "world"):
        models += _xml.children(w, "model")
    if not models:
        raise doc.error(root, "", "no <model> in the file")
    if model_name is None:
        return models[0]
    for m in models:
        if m.get("name") == model_name:
            return m
    raise doc.error(
        root, "", f"no model named {model_name!r}; models are {[m.get('name') for m in models]}"
    )


def _inertial(doc, link, what):
    el = _xml.child(link, "inertial")
    if el is None:
        return None
    T, _ = _pose(doc, el, f"{what} inertial")
    mass = _xml.child_number(doc, el, "mass", f"{what} mass", 1.0, nonnegative=True)
    i = _xml.child(el, "inertia")
    v = {"ixx": 1.0, "iyy": 1.0, "izz": 1.0, "ixy": 0.0, "ixz": 0.0, "iyz": 0.0}
    if i is not None:
        for k in v:
            c = _xml.child(i, k)
            if c is not None:
                v[k] = _xml.number(doc, c, c.text, f"{what} inertia {k}")
    return Inertial.at(mass, T, v)


def _geometry(doc, link, what, reader):
    out = []
    for kind in ("visual", "collision"):
        for el in _xml.children(link, kind):
            X, _ = _pose(doc, el, f"{what} {kind}")
            g = _xml.child(el, "geometry")
            shape = None if g is None else next(iter(g), None)
            if shape is None:
                continue
            t = _xml.local(shape.tag)
            entry = {"kind": kind, "name": el.get("name"), "type": t, "X": X}
            if t == "mesh":
                u = _xml.child(shape, "uri")
                uri = (u.text or "").strip() if u is not None else ""
                entry["uri"] = uri
                entry["path"] = _xml.resolve_uri(uri, reader.base_dir, reader.roots)
                s = _xml.child(shape, "scale")
                entry["scale"] = (
                    _xml.floats(doc, s, s.text, 3, f"{what} mesh scale").tolist()
                    if s is not None
                    else [1.0, 1.0, 1.0]
                )
            else:
                for key in ("size", "radius", "length"):
                    c = _xml.child(shape, key)
                    if c is not None and c.text:
                        n = 3 if key == "size" else 1
                        vals = _xml.floats(doc, c, c.text, n, f"{what} {t} {key}")
                        entry[key] = vals.tolist() if n == 3 else float(vals[0])
            out.append(entry)
    return out


def _axis(reader, doc, j_el, tag, what, R_J):
    """Unit axis of ``<axis>`` / ``<axis2>`` in the joint frame (or None)."""
    a = _xml.child(j_el, tag)
    if a is None:
        return None, {}
    x = _xml.child(a, "xyz")
    xyz = _xml.floats(
        doc,
        x if x is not None else a,
        x.text if x is not None else None,
        3,
        f"{what} {tag} xyz",
        [0, 0, 1],
    )
    upmf = _xml.child(a, "use_parent_model_frame")
    expressed = x.get("expressed_in") if x is not None else None
    if upmf is not None and (upmf.text or "").strip().lower() in ("1", "true"):
        xyz = R_J.T @ xyz  # model frame -> joint frame
    elif expressed:
        scope = reader._scope_of.get(id(j_el), "")
        F = reader.pose_of(doc, x, what, _scoped(scope, expressed))
        xyz = R_J.T @ F[:3, :3] @ xyz
    limits = {}
    for group, keys, label in (
        ("limit", ("lower", "upper", "effort", "velocity"), "limit "),
        ("dynamics", ("damping", "friction", "spring_reference", "spring_stiffness"), ""),
    ):
        g = _xml.child(a, group)
        for k in keys if g is not None else ():
            c = _xml.child(g, k)
            if c is not None and c.text:
                limits[k] = _xml.number(doc, c, c.text, f"{what} {tag} {label}{k}")
    return xyz, limits


def read(data, name, path=None, package_dirs=None, max_bytes=_xml.MAX_BYTES, model_name=None):
    """A :class:`~loopdyn.io._description.Description` of SDFormat text ``data`` (file ``name``)."""
    doc = _xml.parse(data, name, max_bytes)
    melem = _find_model(doc, model_name)
    r = _Reader(name, path, package_dirs, max_bytes)
    r._cache = {}
    r._scope_of = {}
    # the model's placement in the world and the world's gravity
    T_wm, _ = _pose(doc, melem, f"model {melem.get('name')!r}")
    gravity = (0.0, 0.0, -9.81)
    parent = next(
        (w for w in doc.root.iter() if _xml.local(w.tag) == "world" and melem in list(w)), None
    )
    if parent is not None:
        g = _xml.child(parent, "gravity")
        if g is not None and g.text:
            gravity = tuple(_xml.floats(doc, g, g.text, 3, "world gravity"))
    r.world_in_model = inv(T_wm)
    r.collect(doc, melem, "")
    m = r.m
    m.poses[MODEL] = (None, np.eye(4), doc, melem)
    for _, el, _, scope in m.joints:
        r._scope_of[id(el)] = scope
    desc = Description(
        name=melem.get("name") or "model",
        fmt="sdf",
        file=name,
        line=doc.line(melem),
        gravity=gravity,
        floating_default=True,
    )
    static = _xml.child(melem, "static")
    if static is not None and (static.text or "").strip().lower() in ("1", "true"):
        desc.floating_default = False
        desc.notes.append("static model: its root is welded to the world")
    link_pose = {}
    for sname, el, ldoc, _ in m.links:
        what = f"link {sname!r}"
        P = r.pose_of(ldoc, el, what, sname)
        link_pose[sname] = P
        inertial = _inertial(ldoc, el, what)
        if inertial is None:
            inertial = Inertial(1.0, np.zeros(3), np.eye(3))
            desc.notes.append(
                f"link {sname!r} has no <inertial>: SDFormat's default (1 kg, "
                "identity inertia) is used"
            )
        desc.links.append(
            Link(
                sname, inertial, ldoc.line(el), pose=T_wm @ P, geometry=_geometry(ldoc, el, what, r)
            )
        )
    known = set(link_pose)
    gearboxes = []
    for sname, el, jdoc, scope in m.joints:
        what = f"joint {sname!r}"
        jtype = el.get("type")
        if jtype not in _JOINT_TYPES:
            raise jdoc.error(
                el, what, f"unsupported joint type {jtype!r}; read are {', '.join(_JOINT_TYPES)}"
            )
        p_el = _xml.child(el, "parent")
        if p_el is None or not (p_el.text or "").strip():
            raise jdoc.error(el, what, "missing <parent>")
        try:
            parent_link = r.link_of(_scoped(scope, p_el.text.strip()))
            child_link = r.link_of(_scoped(scope, _xml.child(el, "child").text.strip()))
        except ModelError as e:
            raise jdoc.error(el, what, str(e)) from None
        for role, lk in (("parent", parent_link), ("child", child_link)):
            if lk != WORLD and lk not in known:
                raise jdoc.error(el, what, f"{role} {lk!r} is not a link of the model")
        PJ = r.pose_of(jdoc, el, what, sname)
        axis, lim1 = _axis(r, jdoc, el, "axis", what, PJ[:3, :3])
        axis2, lim2 = _axis(r, jdoc, el, "axis2", what, PJ[:3, :3])
        if jtype == "gearbox":
            gearboxes.append((sname, el, jdoc, scope, parent_link, child_link, PJ, axis, axis2))
            continue
        P_parent = r.world_in_model if parent_link == WORLD else link_pose[parent_link]
        X_pj = inv(P_parent) @ PJ
        X_cj = inv(link_pose[child_link]) @ PJ
        if parent_link == WORLD:
            X_pj = T_wm @ PJ
        kind = {"revolute2": "universal", "continuous": "revolute"}.get(jtype, jtype)
        if kind in ("revolute", "prismatic", "universal") and axis is None:
            axis = np.array([0.0, 0.0, 1.0])
        if kind == "universal" and axis2 is None:
            axis2 = np.array([0.0, 1.0, 0.0])
        limits = {**lim1, **{f"axis2_{k}": v for k, v in lim2.items()}}
        desc.joints.append(
            Joint(
                sname,
                kind,
                parent_link,
                child_link,
                X_pj,
                X_cj,
                jdoc.line(el),
                axis if kind in ("revolute", "prismatic", "universal") else None,
                axis2 if kind == "universal" else None,
                limits or None,
            )
        )
    for g in gearboxes:
        desc.couplings.append(_gearbox(r, desc, link_pose, *g))
    for sname, el, fdoc in m.frames:
        try:
            lk = r.link_of(sname)
        except ModelError as e:
            raise fdoc.error(el, f"frame {sname!r}", str(e)) from None
        P = r.pose_of(fdoc, el, f"frame {sname!r}", sname)
        base = r.world_in_model if lk == WORLD else link_pose[lk]
        desc.frames.append((sname, lk, inv(base) @ P, fdoc.line(el)))
    for k, (el, bdoc, scope) in enumerate(m.balls):
        desc.loops.append(_drake_ball(r, bdoc, el, scope, k, link_pose))
    desc.root_hint = m.canonical.get(MODEL)
    desc.notes += r.notes
    return desc


def _gearbox(r, desc, link_pose, sname, el, doc, scope, parent_link, child_link, PJ, axis, axis2):
    """θ₂ = −ratio θ₁: θ₁ = angle of the parent link, θ₂ of the child link, both measured
    from the reference body about ``axis`` / ``axis2``; each must be one revolute joint
    between the reference body and that link."""
    what = f"gearbox joint {sname!r}"
    ref_el = _xml.child(el, "gearbox_reference_body")
    if ref_el is None or not (ref_el.text or "").strip():
        raise doc.error(el, what, "missing <gearbox_reference_body>")
    ref = _scoped(scope, ref_el.text.strip())
    ratio = _xml.child_number(doc, el, "gearbox_ratio", f"{what} ratio", 1.0)
    if axis is None or axis2 is None:
        raise doc.error(el, what, "a gearbox joint needs <axis> and <axis2>")
    R_J = PJ[:3, :3]
    out = []
    for link, a in ((parent_link, axis), (child_link, axis2)):
        a_model = R_J @ a
        found = None
        for j in desc.joints:
            if {j.parent, j.child} == {ref, link} and j.kind == "revolute":
                P_child = link_pose[j.child]
                j_axis_model = (P_child @ j.X_cj)[:3, :3] @ j.axis
                c = float(a_model @ j_axis_model) / (
                    np.linalg.norm(a_model) * np.linalg.norm(j_axis_model)
                )
                if abs(abs(c) - 1.0) > 1e-6:
                    raise doc.error(el, what, f"axis is not parallel to joint {j.name!r}'s")
                s = np.sign(c) * (1.0 if j.child == link else -1.0)
                found = (j.name, s)
                break
        if found is None:
            raise doc.error(
                el,
                what,
                f"no revolute joint joins the reference body {ref!r} and "
                f"link {link!r}; loopdyn needs one to express the gearbox",
            )
        out.append(found)
    (j1, s1), (j2, s2) = out
    # s2 q2 = -ratio s1 q1  =>  q2 = (-ratio s1 s2) q1
    return Coupling(sname, j1, j2, -ratio * s1 * s2, 0.0, doc.line(el), "gearbox joint")


def _drake_ball(r, doc, el, scope, k, link_pose):
    what = f"drake:ball_constraint #{k + 1}"
    vals = {}
    for tag in ("body_A", "body_B", "p_AP", "p_BQ"):
        c = _xml.child(el, f"drake:ball_constraint_{tag}")
        if c is None or not (c.text or "").strip():
            raise doc.error(el, what, f"missing <drake:ball_constraint_{tag}>")
        vals[tag] = c.text.strip()
    pA = _xml.floats(doc, el, vals["p_AP"], 3, f"{what} p_AP")
    pB = _xml.floats(doc, el, vals["p_BQ"], 3, f"{what} p_BQ")
    return Loop(
        f"ball_constraint_{k + 1}",
        "ball",
        _scoped(scope, vals["body_A"]),
        transform(p=pA),
        _scoped(scope, vals["body_B"]),
        transform(p=pB),
        doc.line(el),
    )
