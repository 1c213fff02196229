"""The translation of the link/joint graph that the URDF, SDFormat and MJCF readers
fill (``loopdyn.io._description``) into a loopdyn :class:`~loopdyn.Model`.

A reader describes the file as links (rigid parts with an optional inertial) and
joints (a kind, a parent and a child link, the joint frame on each of them), plus
explicit loop closures (URDF+ ``<loop>``, ``<drake:ball_constraint>``, MJCF
equalities) and joint couplings (URDF ``<mimic>``, SDFormat ``gearbox``, MJCF
``joint`` equalities).  :func:`build_model` then

1. chooses the spanning tree (``tree_joints`` first, then the file's order: a joint
   is a tree joint when its child has no parent joint yet; then any joint that still
   joins two separate parts, possibly traversed from child to parent); every other
   joint closes a loop and becomes a closure of the matching kind; the bodies (and
   coordinates) follow the order of the tree joints when it reaches each joint's
   parent first, else a breadth-first walk from the roots;
2. merges links joined by fixed tree joints into one body (their inertias summed, as
   Pinocchio does), keeping each merged link as a frame of that body;
3. places a free joint under every part that is not attached to the world when a
   floating base is asked for (else the part's root is welded to the ground);
4. adds the closures, couplings and actuated joints, and records what the model
   cannot hold (limits, meshes, ignored elements) in ``model.metadata``.

Frames: a loopdyn body frame is its tree joint's frame (it moves with the joint);
``metadata["links"][link]`` gives each file link's body and its pose in that body.
"""

from dataclasses import dataclass

import numpy as np

from loopdyn.errors import AssemblyError, LoopdynError, ModelError
from loopdyn.io._description import (
    KINDS,
    WORLD,
    Coupling,
    Description,
    Inertial,
    Joint,
    Link,
    Loop,
)
from loopdyn.io._geometry import combine_inertias, inv, perpendicular_pair, unit
from loopdyn.model import (
    GROUND,
    Free,
    ModelBuilder,
    Prismatic,
    Revolute,
    Spherical,
    Universal,
)
from loopdyn.model.model import triangle_inequality
from loopdyn.topology.disjoint_sets import DisjointSets


def _unit_axes(item, d, what):
    """Normalise ``item.axis`` and ``item.axis2`` (a joint's or a loop's, None: absent) to
    unit vectors; ``d.error`` where one is zero or not finite."""
    for ax in ("axis", "axis2"):
        a = getattr(item, ax)
        if a is not None:
            u = unit(a)
            if u is None:
                raise d.error(item.line, what, f"{ax} {a} is zero or not finite")
            setattr(item, ax, u)


class _Where:
    """Errors of a closure given in ``loops=`` name its YAML file and entry."""

    def __init__(self, where):
        self.where = where

    def error(self, line, what, message):
        where = self.where
        return ModelError(f"{where}, {what}: {message}" if what else f"{where}: {message}")


@dataclass
class Options:
    """Options of :func:`build_model` (the keyword arguments of ``ld.load``)."""

    floating_base: bool | None = None
    tree_joints: tuple = ()
    cut_joints: tuple = ()
    planar: bool = False
    massless: object = "error"
    nonphysical_inertia: str = "error"
    couplings: str = "couple"
    assemble: bool = True
    actuated: tuple | None = None
    gravity: tuple | None = None
    name: str | None = None
    closures: str = "minimal"


def _unique(name, taken):
    out, k = name, 1
    while out in taken:
        out = f"{name}_{k}"
        k += 1
    taken.add(out)
    return out


def build_model(desc, opts):
    """A loopdyn Model of ``desc`` (see the module docstring); ``model.metadata`` holds
    what the model itself cannot."""
    with np.errstate(all="ignore"):  # overflow from absurd file values is checked below
        model = _Builder(desc, opts).run()
    check_finite(model, desc.file, desc.line)
    return model


def check_finite(model, file, line):
    """ModelError if numbers of the file overflowed on their way into the model."""
    arrays = (model.jgeom, model.inertia, model.gravity, model.cl_X, model.row_vec, model.q0)
    if not all(np.all(np.isfinite(a)) for a in arrays):
        raise ModelError(
            f"{file} line {line}: numbers too large for double precision once combined "
            "(an inertia, a pose or q0 overflowed); check the file's units and magnitudes"
        )


class _Builder:
    def __init__(self, desc, opts):
        self.d = desc
        self.o = opts
        if opts.closures not in ("minimal", "as_file"):
            raise ModelError(f"closures must be 'minimal' or 'as_file', got {opts.closures!r}")
        if opts.couplings not in ("couple", "ignore"):
            raise ModelError(f"couplings must be 'couple' or 'ignore', got {opts.couplings!r}")
        m = opts.massless
        if not (m == "error" or (isinstance(m, (int, float)) and np.isfinite(m) and m > 0)):
            raise ModelError(f"massless must be 'error' or a positive mass in kg, got {m!r}")
        if opts.nonphysical_inertia not in ("error", "accept"):
            raise ModelError(
                f"nonphysical_inertia must be 'error' or 'accept', got {opts.nonphysical_inertia!r}"
            )
        self.overrides = {}

    def _fresh_meta(self):
        desc = self.d
        self.meta = {
            "format": desc.fmt,
            "file": desc.file,
            "links": {},
            "geometry": [],
            "limits": {},
            "tree_joints": [],
            "reversed_joints": [],
            "cut_joints": {},
            "couplings": [],
            "regularized": {},
            "nonphysical_inertia": [],
            "renamed": {},
            "planar_joints": {},
            "reduced_closures": {},
            "notes": list(desc.notes),
        }
        self.meta.update(desc.extra)

    # ------------------------------------------------------------------ checks
    def _check(self):
        d = self.d
        if not d.links:
            raise d.error(d.line, "", "the file describes no link (no body to simulate)")
        self.links = {}
        for L in d.links:
            if not L.name:
                raise d.error(L.line, "link", "a link needs a non-empty name")
            if L.name == WORLD:
                raise d.error(L.line, f"link {L.name!r}", "'world' is reserved for the ground")
            if L.name in self.links:
                raise d.error(L.line, f"link {L.name!r}", "duplicate link name")
            self.links[L.name] = L
        self.joints = {}
        for j in d.joints:
            what = f"joint {j.name!r}"
            if not j.name:
                raise d.error(j.line, "joint", "a joint needs a non-empty name")
            if j.name in self.joints:
                raise d.error(j.line, what, "duplicate joint name")
            if j.kind not in KINDS:
                raise d.error(j.line, what, f"unsupported joint type {j.kind!r}")
            for role, link in (("parent", j.parent), ("child", j.child)):
                if link != WORLD and link not in self.links:
                    raise d.error(j.line, what, f"{role} link {link!r} does not exist")
            if j.child == WORLD:
                raise d.error(j.line, what, "the world cannot be a child link")
            if j.parent == j.child:
                raise d.error(j.line, what, f"joins link {j.child!r} to itself")
            _unit_axes(j, d, what)
            if j.kind in ("revolute", "continuous", "prismatic", "universal", "planar"):
                if j.axis is None:
                    raise d.error(j.line, what, f"a {j.kind} joint needs an axis")
            if j.kind == "universal":
                if j.axis2 is None:
                    raise d.error(j.line, what, "a universal joint needs a second axis")
                if np.linalg.norm(np.cross(j.axis, j.axis2)) < 1e-9:
                    raise d.error(j.line, what, "the two axes of a universal joint are parallel")
            self.joints[j.name] = j
        for name in (*self.o.tree_joints, *self.o.cut_joints):
            if name not in self.joints:
                known = ", ".join(self.joints) or "(none)"
                raise d.error(
                    d.line,
                    "",
                    f"unknown joint {name!r} in tree_joints/cut_joints; joints are {known}",
                )
        both = set(self.o.tree_joints) & set(self.o.cut_joints)
        if both:
            raise d.error(
                d.line, "", f"joints {sorted(both)} are in both tree_joints and cut_joints"
            )

    # ------------------------------------------------------------------ tree
    def _spanning_tree(self):
        """Tree joints (in the order chosen) and cut joints (file order)."""
        d, o = self.d, self.o
        uf = DisjointSets()
        tree, has_parent = [], set()
        for name in o.tree_joints:
            j = self.joints[name]
            if not uf.union(j.parent, j.child):
                raise d.error(
                    j.line,
                    f"joint {name!r}",
                    "tree_joints close a loop; a spanning "
                    "tree has no loop: leave one joint of each loop out",
                )
            tree.append(j)
            has_parent.add(j.child)
        forced = set(o.tree_joints) | set(o.cut_joints)
        rest = [j for j in d.joints if j.name not in forced]
        # file order, a child's first parent joint first (the file's own tree) ...
        for j in rest:
            if j.child not in has_parent and uf.union(j.parent, j.child):
                tree.append(j)
                has_parent.add(j.child)
        # ... then any joint that still joins two separate parts
        chosen = {j.name for j in tree}
        for j in rest:
            if j.name not in chosen and uf.union(j.parent, j.child):
                tree.append(j)
                chosen.add(j.name)
        chosen = {j.name for j in tree}
        cut = [j for j in d.joints if j.name not in chosen]
        return tree, cut, has_parent

    def _orient(self, tree, has_parent):
        """Roots of the parts and, in breadth-first order, (tree joint, from, to, reversed)."""
        adj = {WORLD: []}
        for L in self.d.links:
            adj[L.name] = []
        for j in tree:
            adj[j.parent].append(j)
            adj[j.child].append(j)
        seen = set()
        order = []
        roots = []
        starts = [WORLD]
        hint = self.d.root_hint
        if hint in self.links:
            starts.append(hint)
        starts += [L.name for L in self.d.links if L.name not in has_parent]
        starts += [L.name for L in self.d.links]
        for s in starts:
            if s in seen:
                continue
            seen.add(s)
            if s != WORLD:
                roots.append(s)
            queue = [s]
            while queue:
                a = queue.pop(0)
                for j in adj[a]:
                    b = j.child if j.parent == a else j.parent
                    if b in seen:
                        continue
                    seen.add(b)
                    order.append((j, a, b, j.parent != a))
                    queue.append(b)
        return roots, self._in_file_order(tree, roots, order)

    @staticmethod
    def _in_file_order(tree, roots, order):
        """``order`` (breadth-first) in the order of ``tree`` (the chosen order: the
        file's) when that order reaches every joint's 'from' link first: the bodies and
        coordinates then follow the file, so a model saved and read back keeps its
        coordinates (``ld.save`` writes the joints in the model's order; a
        breadth-first walk reorders a depth-first model: b0 <- b1 <- b2, b3 <- b0 gave
        b0, b1, b3, b2).  Otherwise the breadth-first order."""
        rank = {j.name: k for k, j in enumerate(tree)}
        by_file = sorted(order, key=lambda e: rank[e[0].name])
        placed = {WORLD, *roots}
        for _, a, b, _ in by_file:
            if a not in placed:
                return order
            placed.add(b)
        return by_file

    # ------------------------------------------------------------------ run
    def run(self):
        self._check()
        model = self._run_once()
        if (
            self.o.closures == "minimal"
            and model.m
            and self.meta.get("assembly", {}).get("assembled")
        ):
            self.overrides = _structural_reductions(model)
            if self.overrides:
                model = self._run_once()
                self.meta["reduced_closures"] = {
                    k: {"from": v["from"], "why": v["why"]} for k, v in self.overrides.items()
                }
        return model

    def _run_once(self):
        d, o = self.d, self.o
        self._fresh_meta()
        tree, cut, has_parent = self._spanning_tree()
        roots, order = self._orient(tree, has_parent)
        name = o.name or d.name or "model"
        gravity = d.gravity if o.gravity is None else o.gravity
        try:
            b = ModelBuilder(name, gravity=gravity, planar=o.planar)
        except ModelError as e:
            raise d.error(d.line, "", str(e)) from None
        self.b = b
        floating = d.floating_default if o.floating_base is None else bool(o.floating_base)
        # names: bodies (and merged links' frames) are named after their link; joints
        # keep the file's names unless one is a link's name (then "<name>_joint")
        self.taken = set(self.links) | {WORLD}
        self.jname = {}
        self.body_of = {WORLD: GROUND}
        self.T = {WORLD: np.eye(4)}
        self.bodies = {}  # body name -> dict(parent, joint, P, line, joint_name, parts)
        self.body_order = []
        self.ground_parts = []
        for r in roots:
            L = self.links[r]
            X = np.eye(4) if L.pose is None else L.pose
            if floating:
                jname = _unique("root_joint", self.taken | set(self.joints))
                self.taken.add(jname)
                self._new_body(r, GROUND, Free(), X, L.line, jname, "floating root")
                self.T[r] = np.eye(4)
            else:
                self.body_of[r] = GROUND
                self.T[r] = X
        for j, a, c, rev in order:
            self._add_tree_joint(j, a, c, rev)
        self.meta["tree_joints"] = [j.name for j, *_ in order]
        self.meta["reversed_joints"] = [j.name for j, _, _, rev in order if rev]
        for L in d.links:
            self._place_link(L)
        self._emit_bodies()
        self._frames()
        for j in cut:
            self._closure_from_joint(j)
        for lp in d.loops:
            self._closure_from_loop(lp)
        self._couplings()
        self._actuated()
        try:
            model = b.build()
        except ModelError as e:
            raise d.error(d.line, "", str(e)) from None
        self._limits()
        model.metadata = self.meta
        if d.q_init:
            q = model.neutral()
            for jn, vals in d.q_init.items():
                q[model.q_slice(self.jname.get(jn, jn))] = vals
            q.setflags(write=False)
            model.q0 = q
        if o.assemble and model.m > 0:
            self._assemble(model)
        return model

    # ------------------------------------------------------------------ bodies
    def _new_body(self, name, parent_body, joint, P, line, joint_name, what):
        self.bodies[name] = {
            "parent": parent_body,
            "joint": joint,
            "P": P,
            "line": line,
            "joint_name": joint_name,
            "parts": [],
            "what": what,
        }
        self.body_order.append(name)
        self.body_of[name] = name
        self.taken.add(name)

    def _add_tree_joint(self, j, a, c, rev):
        d = self.d
        X_aj, X_cj = (j.X_cj, j.X_pj) if rev else (j.X_pj, j.X_cj)
        P = self.T[a] @ X_aj  # joint frame in the body of link a
        pb = self.body_of[a]
        what = f"joint {j.name!r}"
        sign = -1.0 if rev else 1.0
        kind = j.kind
        if kind not in ("fixed", "planar"):
            jn = j.name if j.name == c or j.name not in self.taken else None
            if jn is None:
                jn = _unique(f"{j.name}_joint", self.taken | set(self.joints))
                self.meta["renamed"][j.name] = jn
            self.taken.add(jn)
            self.jname[j.name] = jn
        if kind == "fixed":
            self.body_of[c] = pb
            self.T[c] = P @ inv(X_cj)
            return
        if kind in ("revolute", "continuous"):
            joint = Revolute(sign * j.axis)
        elif kind == "prismatic":
            joint = Prismatic(sign * j.axis)
        elif kind == "ball":
            joint = Spherical()
            if rev:
                self.meta["notes"].append(
                    f"joint {j.name!r} is traversed from child to parent: its quaternion is "
                    "the conjugate of the file's"
                )
        elif kind == "universal":
            if rev:  # (R(a1, q1) R(a2, q2))⁻¹ = R(-a2, q2) R(-a1, q1): axes and q swapped
                joint = Universal(-j.axis2, -j.axis)
                self.meta["notes"].append(
                    f"joint {j.name!r} is traversed from child to parent: its two "
                    "coordinates are swapped (second axis first)"
                )
            else:
                joint = Universal(j.axis, j.axis2)
        elif kind == "floating":
            if rev:
                raise d.error(
                    j.line,
                    what,
                    "a floating joint cannot be traversed from child "
                    "to parent; list it in tree_joints or reorder the file",
                )
            joint = Free()
        elif kind == "planar":
            self._planar_chain(j, c, pb, P, X_cj, sign)
            return
        else:  # pragma: no cover - kinds checked in _check
            raise d.error(j.line, what, f"unsupported joint type {kind!r}")
        if pb == GROUND and c == WORLD:  # pragma: no cover - world is never a tree child
            raise d.error(j.line, what, "the world cannot be a child")
        self._new_body(c, pb, joint, P, j.line, self.jname[j.name], what)
        self.T[c] = inv(X_cj)

    def _planar_chain(self, j, c, pb, P, X_cj, sign):
        """URDF planar joint: prismatic u, prismatic w, revolute n (n the plane normal);
        the two intermediate bodies carry a tiny regularising mass (see docs/io.md)."""
        n = sign * j.axis
        u, w = perpendicular_pair(n)
        names = []
        parent = pb
        for k, (suffix, joint) in enumerate(
            (("x", Prismatic(u)), ("y", Prismatic(w)), ("theta", Revolute(n)))
        ):
            jn = _unique(f"{j.name}_{suffix}", self.taken | set(self.joints))
            self.taken.add(jn)
            if k < 2:
                bn = _unique(f"{c}_{suffix}", self.taken | set(self.joints))
                self._new_body(
                    bn, parent, joint, P if k == 0 else np.eye(4), j.line, jn, f"joint {j.name!r}"
                )
                self.bodies[bn]["intermediate"] = c
                parent = bn
            else:
                self._new_body(c, parent, joint, np.eye(4), j.line, jn, f"joint {j.name!r}")
            names.append(jn)
        self.meta["planar_joints"][j.name] = names
        self.T[c] = inv(X_cj)

    def _place_link(self, L):
        body = self.body_of.get(L.name)
        if body is None:  # pragma: no cover - every link is reached by _orient
            raise self.d.error(L.line, f"link {L.name!r}", "not connected")
        T = self.T[L.name]
        self.meta["links"][L.name] = {"body": body, "pose": T.tolist()}
        for g in L.geometry:
            g = dict(g)
            X = T @ np.asarray(g.pop("X", np.eye(4)))
            g.update(link=L.name, body=body, pose=X.tolist())
            self.meta["geometry"].append(g)
        if L.inertial is None:
            return
        R, p = T[:3, :3], T[:3, 3]
        part = (L.inertial.mass, R @ L.inertial.com + p, R @ L.inertial.inertia @ R.T)
        if body == GROUND:
            self.ground_parts.append(L.name)
        else:
            self.bodies[body]["parts"].append(part)

    def _emit_bodies(self):
        d, b = self.d, self.b
        eps = self.o.massless
        for name in self.body_order:
            info = self.bodies[name]
            line = info["line"]
            what = info["what"]
            mass, com, I = combine_inertias(info["parts"])
            ev = np.linalg.eigvalsh(I) if np.all(np.isfinite(I)) else np.zeros(3)
            # a point (or rod) inertia, up to rounding dust: below a 1 µm radius of gyration
            regular = mass > 0 and ev[0] > max(1e-9 * ev[2], 1e-12 * mass)
            if "intermediate" in info and not info["parts"]:
                # planar joint's intermediate body: 1e-9 of the moving link's mass
                child_parts = self.bodies[info["intermediate"]]["parts"]
                m_child = combine_inertias(child_parts)[0] if child_parts else 1.0
                e = 1e-9 * (m_child if m_child > 0 else 1.0)
                mass, com, I = e, np.zeros(3), np.eye(3) * e * 1e-2
                self.meta["regularized"][name] = {"mass": e, "inertia": e * 1e-2}
            elif not regular:
                if eps == "error":
                    why = (
                        "has no mass"
                        if mass <= 0
                        else ("has a singular rotational inertia (a point or a rod)")
                    )
                    raise d.error(
                        line,
                        what,
                        f"body {name!r} {why} but moves on this joint, and loopdyn's dynamics "
                        "needs a positive mass and a positive definite inertia per moving body; "
                        "give the link an <inertial>, make the joint fixed, or load with "
                        "massless=<mass in kg> to give such bodies a small regularising mass "
                        "and inertia",
                    )
                add_m = eps if mass <= 0 else 0.0
                add_I = eps * 1e-2
                mass = mass + add_m
                I = I + add_I * np.eye(3)
                self.meta["regularized"][name] = {
                    "mass": add_m,
                    "inertia": add_I,
                    "com": com.tolist(),
                }
            P = info["P"]
            physical = self.o.nonphysical_inertia == "error"
            if not physical and not triangle_inequality(np.linalg.eigvalsh(I)):
                self.meta["nonphysical_inertia"].append(name)
            try:
                b.add_body(
                    name,
                    info["parent"],
                    info["joint"],
                    xyz=P[:3, 3],
                    rotation=P[:3, :3],
                    mass=mass,
                    com=com,
                    inertia=I,
                    joint_name=info["joint_name"],
                    physical=physical,
                )
            except ModelError as e:
                msg = str(e).replace("add the body with physical=False", "load with "
                                     "nonphysical_inertia='accept'")  # fmt: skip
                raise d.error(line, what, msg) from None
        if self.ground_parts:
            self.meta["notes"].append(
                "inertia of links fixed to the ground is not used: " + ", ".join(self.ground_parts)
            )

    def _frames(self):
        """A frame per merged link (named after the link) so that it can be located."""
        for L in self.d.links:
            body = self.body_of[L.name]
            if L.name in self.bodies:
                continue
            T = self.T[L.name]
            try:
                self.b.add_frame(L.name, body, xyz=T[:3, 3], rotation=T[:3, :3])
            except ModelError:
                self.meta["notes"].append(f"link {L.name!r}: no frame (name already used)")
        for name, link, X, line in self.d.frames:
            if link != WORLD and link not in self.links:
                raise self.d.error(line, f"frame {name!r}", f"link {link!r} does not exist")
            T = self.T[link] @ X
            fname = _unique(name, self.taken)
            try:
                self.b.add_frame(fname, self.body_of[link], xyz=T[:3, 3], rotation=T[:3, :3])
            except ModelError as e:
                raise self.d.error(line, f"frame {name!r}", str(e)) from None
            if fname != name:
                self.meta["renamed"][name] = fname

    # ------------------------------------------------------------------ closures
    def _closure(self, name, kind, link_a, X_a, link_b, X_b, axis, axis2, line, what, **extra):
        """A closure of ``kind`` between frames on two links; ``extra``: ``generic`` (the
        rotation and translation axes of a generic closure), ``where`` (a ``loops=`` entry:
        errors name it)."""
        generic, where = extra.get("generic"), extra.get("where")
        d, b = self.d, self.b
        if where is not None:  # a loop of ``loops=``: its errors name the YAML file / entry
            d = _Where(where)
        ba, bb = self.body_of[link_a], self.body_of[link_b]
        if ba == bb:
            self.meta["notes"].append(
                f"{what}: joins two links of the same rigid body {ba!r}; no closure added"
            )
            return None
        planar = self.o.planar
        kw = {}
        if kind in ("revolute", "continuous"):
            kind, kw = "revolute", {"axis": axis}
        elif kind == "prismatic":
            kw = {"axis": axis}
        elif kind == "ball":
            if planar:
                kind = "revolute"
        elif kind == "universal":
            if planar:
                raise d.error(line, what, "a universal closure has no planar counterpart")
            kw = {"axis": axis, "axis2": axis2}
        elif kind == "fixed":
            kind = "weld"
        elif kind == "planar":
            u, w = perpendicular_pair(axis)
            kind, kw = "generic", {"rotation_axes": (u, w), "translation_axes": (axis,)}
        elif kind == "generic":
            rot, trans = generic
            kw = {"rotation_axes": tuple(rot), "translation_axes": tuple(trans)}
        elif kind == "floating":
            self.meta["notes"].append(f"{what}: a floating joint constrains nothing; skipped")
            return None
        else:
            raise d.error(line, what, f"closure kind {kind!r} is not supported")
        if planar and kind == "revolute":
            kw = {}
            a = axis if axis is not None else np.array([0.0, 0.0, 1.0])
            if abs(abs(a[2]) - 1.0) > 1e-9:
                raise d.error(line, what, "a planar model's revolute closures turn about z")
        cname = _unique(name, self.taken)
        over = self.overrides.get(cname)
        if over is not None:
            if over["kind"] is None:
                self.meta["notes"].append(f"{what}: every row is redundant; no closure added")
                self.taken.discard(cname)
                return None
            kind, kw = over["kind"], over["kw"]
        fa = _unique(f"{cname}_A", self.taken)
        fb = _unique(f"{cname}_B", self.taken)
        Ta, Tb = self.T[link_a] @ X_a, self.T[link_b] @ X_b
        try:
            b.add_frame(fa, ba, xyz=Ta[:3, 3], rotation=Ta[:3, :3])
            b.add_frame(fb, bb, xyz=Tb[:3, 3], rotation=Tb[:3, :3])
            b.add_closure(cname, fa, fb, kind, **kw)
        except ModelError as e:
            raise d.error(line, what, str(e)) from None
        if cname != name:
            self.meta["renamed"][name] = cname
        return cname

    def _closure_from_joint(self, j):
        cname = self._closure(
            j.name,
            j.kind,
            j.parent,
            j.X_pj,
            j.child,
            j.X_cj,
            j.axis,
            j.axis2,
            j.line,
            f"joint {j.name!r}",
        )
        if cname is not None:
            self.meta["cut_joints"][j.name] = cname

    def _closure_from_loop(self, lp):
        d = self.d if lp.where is None else _Where(lp.where)
        what = f"loop {lp.name!r}"
        for link in (lp.link_a, lp.link_b):
            if link != WORLD and link not in self.links:
                raise d.error(lp.line, what, f"link {link!r} does not exist")
        _unit_axes(lp, d, what)
        if lp.kind in ("revolute", "continuous", "prismatic", "universal") and lp.axis is None:
            raise d.error(lp.line, what, f"a {lp.kind} loop needs an axis")
        if lp.kind == "universal" and lp.axis2 is None:
            raise d.error(lp.line, what, "a universal loop needs a second axis")
        self._closure(
            lp.name,
            lp.kind,
            lp.link_a,
            lp.X_a,
            lp.link_b,
            lp.X_b,
            lp.axis,
            lp.axis2,
            lp.line,
            what,
            generic=(lp.rotation_axes, lp.translation_axes),
            where=lp.where,
        )

    # ------------------------------------------------------------------ couplings
    def _couplings(self):
        d, b = self.d, self.b
        for c in d.couplings:
            what = f"{c.source} {c.name!r}"
            problem = None
            for jn in (c.joint_a, c.joint_b):
                j = self.joints.get(jn)
                if j is None:
                    problem = f"joint {jn!r} does not exist"
                elif j.kind == "fixed":
                    problem = f"joint {jn!r} is fixed"
                elif j.kind not in ("revolute", "continuous", "prismatic"):
                    problem = (
                        f"joint {jn!r} is {j.kind}; a coupling needs two revolute or "
                        "prismatic joints"
                    )
                elif jn in self.meta["cut_joints"]:
                    problem = (
                        f"joint {jn!r} closes a loop (it is not in the spanning tree); "
                        "list it in tree_joints"
                    )
                if problem:
                    break
            if problem and (self.o.couplings == "ignore" or "is fixed" in problem):
                self.meta["notes"].append(f"{what} ignored: {problem}")
                continue
            if problem:
                raise d.error(c.line, what, problem)
            entry = {
                "name": c.name,
                "source": c.source,
                "joint_a": c.joint_a,
                "joint_b": c.joint_b,
                "ratio": c.ratio,
                "offset": c.offset,
            }
            if not (np.isfinite(c.ratio) and np.isfinite(c.offset)):
                raise d.error(c.line, what, "ratio and offset must be finite")
            if self.o.couplings == "ignore":
                entry["status"] = "ignored: joints left independent"
            elif hasattr(b, "add_coupling"):
                try:
                    b.add_coupling(
                        self.jname[c.joint_a], self.jname[c.joint_b], c.ratio, offset=c.offset
                    )
                except (ModelError, ValueError, TypeError) as e:
                    raise d.error(c.line, what, str(e)) from None
                entry["status"] = "coupled"
            else:
                raise d.error(
                    c.line,
                    what,
                    f"couples joint {c.joint_b!r} to {c.joint_a!r} (q_b = {c.ratio:g} q_a + "
                    f"{c.offset:g}), but this loopdyn has no coupling closure "
                    "(ModelBuilder.add_coupling); load with couplings='ignore' to keep the "
                    "joints independent",
                )
            self.meta["couplings"].append(entry)

    def _actuated(self):
        names = self.d.actuated if self.o.actuated is None else list(self.o.actuated)
        done = []
        for jn in names:
            if jn in self.meta["planar_joints"]:
                self.b.set_actuated(*self.meta["planar_joints"][jn])
                done.append(jn)
            elif jn in self.jname:
                self.b.set_actuated(self.jname[jn])
                done.append(jn)
            elif self.o.actuated is not None:
                raise self.d.error(
                    self.d.line,
                    "",
                    f"actuated joint {jn!r} is not a moving joint of the spanning tree",
                )
            else:
                self.meta["notes"].append(f"actuator on {jn!r} ignored (not a tree joint)")
        self.meta["actuated"] = done

    def _limits(self):
        for j in self.d.joints:
            if j.limits:
                self.meta["limits"][j.name] = dict(j.limits)

    def _assemble(self, model):
        """q0: the closures solved from the file's reference configuration; if Newton's
        method fails there (a singular reference pose, e.g. a stretched linkage), from a
        few deterministic perturbations of it."""
        from loopdyn.analysis.assembly import assemble
        from loopdyn.kinematics.closures import closure_residual
        from loopdyn.kinematics.configuration import integrate

        q = np.array(model.q0, dtype=float)
        rng = np.random.default_rng(0)
        message = ""
        try:
            r0 = float(np.abs(closure_residual(model, q)).max())
        except (LoopdynError, ValueError) as e:
            self.meta["assembly"] = {"assembled": False, "message": str(e)}
            return
        for attempt in range(6):
            start = (
                q
                if attempt == 0
                else integrate(model, q, rng.normal(scale=0.1 * attempt, size=model.nv), 1.0)
            )
            try:
                q1 = assemble(model, start, fixed=[])
                break
            except (AssemblyError, LoopdynError, ValueError, np.linalg.LinAlgError) as e:
                message = str(e)
        else:
            self.meta["assembly"] = {
                "residual_reference": r0,
                "assembled": False,
                "message": message,
            }
            return
        q1.setflags(write=False)
        model.q0 = q1
        self.meta["assembly"] = {
            "residual_reference": r0,
            "assembled": True,
            "perturbed_start": attempt > 0,
        }


def _structural_reductions(model, seed=0):
    """Closure rows that are redundant at every configuration (e.g. the out-of-plane row
    of a ball closing a planar loop), found at q0 and two nearby assembled
    configurations; returns {closure: {"kind": "generic" | None, "kw": ..., "why": ...}}
    keeping only the independent translation / rotation directions (frame A)."""
    from loopdyn.analysis.assembly import assemble
    from loopdyn.kinematics.closures import constraint_jacobian
    from loopdyn.kinematics.configuration import integrate
    from loopdyn.model.closures import ROTATION, TRANSLATION

    rng = np.random.default_rng(seed)
    configs = [np.asarray(model.q0, dtype=float)]
    for _ in range(2):
        q = integrate(model, model.q0, rng.normal(scale=0.05, size=model.nv), 1.0)
        try:
            configs.append(assemble(model, q, fixed=[]))
        except (LoopdynError, ValueError, np.linalg.LinAlgError):
            pass
    if len(configs) < 2:  # cannot tell a structural redundancy from a singular pose
        return {}
    Js = [constraint_jacobian(model, q) for q in configs]
    out = {}
    for k, name in enumerate(model.closures):
        sl = model.closure_rows[k]
        kinds = model.row_int[sl, 1]
        vecs = model.row_vec[sl]
        kept = {}
        changed = False
        for code in (TRANSLATION, ROTATION):
            idx = np.flatnonzero(kinds == code)
            if idx.size == 0:
                kept[code] = []
                continue
            if code == TRANSLATION:
                axes = vecs[idx, 0]
            else:  # n = w_B × u_A, the rotation axis at alignment
                axes = np.cross(vecs[idx, 1], vecs[idx, 0])
            B = np.vstack([J[sl][idx].T for J in Js])
            # B is (3 nv) × (≤ 3): the thin SVD has the whole Vt (the full one also built
            # a (3 nv)² U: 0.05 s per closure kind at nv = 90, 3 s of a 73-body load)
            _, sv, Vt = np.linalg.svd(B, full_matrices=False)
            smax = sv[0] if sv.size else 0.0
            sv_full = np.zeros(idx.size)
            sv_full[: sv.size] = sv
            null = Vt[sv_full <= 1e-9 * max(smax, 1e-300)]
            if null.shape[0] == 0:
                kept[code] = list(axes)
                continue
            changed = True
            # directions n = Σ yᵢ eᵢ that constrain nothing; keep their complement
            N = null @ axes
            span = np.linalg.svd(axes, full_matrices=False)[2]
            P = span.T @ span - np.linalg.pinv(N) @ N
            w, V = np.linalg.eigh(0.5 * (P + P.T))
            kept[code] = [V[:, i] for i in range(3) if w[i] > 0.5]
        if not changed:
            continue
        t, r = kept[TRANSLATION], kept[ROTATION]
        why = (
            f"{model.closure_kinds[k]} rows redundant at every configuration; kept "
            f"{len(t)} translation and {len(r)} rotation rows"
        )
        frm = model.closure_kinds[k]
        if not t and not r:
            out[name] = {"kind": None, "kw": {}, "why": why, "from": frm}
        else:
            out[name] = {
                "kind": "generic",
                "kw": {"translation_axes": tuple(t), "rotation_axes": tuple(r)},
                "why": why,
                "from": frm,
            }
    return out


__all__ = [
    "WORLD",
    "Coupling",
    "Description",
    "Inertial",
    "Joint",
    "Link",
    "Loop",
    "Options",
    "build_model",
]
