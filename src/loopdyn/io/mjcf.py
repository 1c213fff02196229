"""MJCF reader through MuJoCo's own compiler (the compiled ``MjModel`` is the truth).

MuJoCo is an optional dependency: ``pip install 'loopdyn[mjcf]'`` (without it,
``ld.load`` of an MJCF file raises a one-line ``ModelError`` saying so; writing MJCF
with ``ld.save`` needs nothing).

The file is first read with ``defusedxml`` (size limit, no entities) and every file
it names (``<include>``, meshes, textures, ...) must lie under the roots; then
``mujoco.MjModel.from_xml_path`` compiles it (defaults, angle units, ``childclass``,
inertias from geoms, ... all as MuJoCo means them) and the compiled arrays become
the model:

- each MuJoCo body is a link (mass, ``body_ipos``, principal inertia rotated by
  ``body_iquat``); its joints: none → welded to its parent; one hinge / slide /
  ball / free → that joint, at its anchor ``jnt_pos`` with axis ``jnt_axis``; two
  hinges with one anchor → a universal joint (MuJoCo applies them in order, as
  loopdyn does); any other combination is an error naming the body;
- coordinates: hinge and slide q = qpos − qpos0 (MuJoCo measures from ``ref``);
  ball: the same quaternion; free: position and quaternion of the body in the
  world, but loopdyn's free velocity is [ω; v] in body axes where MuJoCo's is
  [v (world); ω (body)];
- ``q0``: the keyframe named ``q0`` if the file has one (``ld.save`` writes it),
  read with the same map; else the file's reference pose (qpos0);
- equality ``connect`` (bodies or sites) → ball closure (planar model: revolute);
  ``weld`` (bodies: ``relpose`` and ``anchor``; sites: the two site frames) → weld;
  ``joint`` with a linear polynomial → coupling q₁ = a₀ + a₁ q₂; inactive
  equalities are skipped; tendon and flex equalities are errors;
- actuators on joints mark those joints actuated; armature, damping, stiffness and
  friction loss are not part of the rigid-body model (noted in ``metadata``).
"""

import re
from pathlib import Path

import numpy as np

from loopdyn.errors import ModelError
from loopdyn.io import _xml
from loopdyn.io._description import WORLD, Coupling, Description, Inertial, Joint, Link, Loop
from loopdyn.io._geometry import quat_matrix, transform

_FILE_ATTRS = {
    "include": "file",
    "mesh": "file",
    "texture": "file",
    "hfield": "file",
    "skin": "file",
    "model": "file",
}
_MAX_INCLUDE_DEPTH = 8


def _check_files(doc, base_dir, roots, max_bytes, depth=0, seen=None):
    """Every file the document names must resolve under ``roots``; returns the lines of
    named elements (for error messages) gathered over the included files too."""
    seen = set() if seen is None else seen
    compiler = next((e for e in doc.root.iter() if _xml.local(e.tag) == "compiler"), None)
    dirs = {}
    if compiler is not None:
        for key in ("meshdir", "texturedir", "assetdir"):
            if compiler.get(key):
                dirs[key] = compiler.get(key)
    for el in doc.root.iter():
        tag = _xml.local(el.tag)
        attr = _FILE_ATTRS.get(tag)
        if attr is None or el.get(attr) is None:
            continue
        rel = el.get(attr)
        if tag == "include" or base_dir is None:
            sub = ""
        elif tag == "mesh" or tag == "skin" or tag == "hfield":
            sub = dirs.get("meshdir", dirs.get("assetdir", ""))
        else:
            sub = dirs.get("texturedir", dirs.get("assetdir", ""))
        if base_dir is None:
            raise doc.error(
                el,
                f"<{tag}>",
                f"names the file {rel!r}, but the model was given "
                "as a string: load it from its file so that the path can be checked",
            )
        full = Path(base_dir) / sub / rel
        found = _xml.resolve_uri(str(full), None, roots)
        if found is None:
            if tag == "include" or not full.exists():
                msg = (
                    f"file {rel!r} not found under the roots {[str(r) for r in roots]}"
                    if not full.exists()
                    else f"file {rel!r} lies outside the roots {[str(r) for r in roots]}"
                )
                raise doc.error(el, f"<{tag}>", msg + " (pass package_dirs=)")
            raise doc.error(
                el,
                f"<{tag}>",
                f"file {rel!r} lies outside the roots "
                f"{[str(r) for r in roots]} (pass package_dirs=)",
            )
        if tag == "include":
            if depth >= _MAX_INCLUDE_DEPTH or found in seen:
                raise doc.error(
                    el,
                    "<include>",
                    f"includes nested deeper than "
                    f"{_MAX_INCLUDE_DEPTH} levels or in a cycle ({rel!r})",
                )
            seen.add(found)
            sub_doc = _xml.parse(_xml.read_bytes(found, max_bytes), Path(found).name, max_bytes)
            _check_files(sub_doc, base_dir, roots, max_bytes, depth + 1, seen)


#: what a user without MuJoCo is told (MuJoCo is an optional dependency)
INSTALL_HINT = "pip install 'loopdyn[mjcf]'"


def _mujoco(name):
    """The ``mujoco`` module, or a one-line ModelError naming the extra that installs it."""
    try:
        import mujoco
    except ImportError:
        raise ModelError(
            f"{name}: reading MJCF needs MuJoCo's compiler, which is not installed: {INSTALL_HINT}"
        ) from None
    return mujoco


def _compile(data, name, path):
    mujoco = _mujoco(name)

    try:
        if path is not None:
            return mujoco.MjModel.from_xml_path(str(path))
        return mujoco.MjModel.from_xml_string(data.decode("utf-8"))
    except (ValueError, RuntimeError, UnicodeError) as e:
        msg = " ".join(str(e).split())
        m = re.search(r"line (\d+)", msg)
        line = m.group(1) if m else "1"
        raise ModelError(f"{name} line {line}: MuJoCo cannot compile the model: {msg}") from None


def _lines(doc):
    """name -> line of the named bodies, joints, sites, equalities in the main file."""
    out = {}
    for el in doc.root.iter():
        n = el.get("name")
        if n is not None:
            out.setdefault((_xml.local(el.tag), n), doc.line(el))
    return out


def read(data, name, path=None, package_dirs=None, max_bytes=_xml.MAX_BYTES, opts=None):
    """A ``Description`` (``loopdyn.io._graph``) of MJCF text ``data`` (file ``name``)."""
    doc = _xml.parse(data, name, max_bytes)
    if _xml.local(doc.root.tag) != "mujoco":
        raise doc.error(
            doc.root, "", f"the root element is <{_xml.local(doc.root.tag)}>, not <mujoco>"
        )
    mujoco = _mujoco(name)
    base_dir = None if path is None else str(Path(path).resolve().parent)
    roots = list(package_dirs) if package_dirs is not None else _xml.default_roots(path)
    _check_files(doc, base_dir, roots, max_bytes)
    mj = _compile(data, name, path)
    lines = _lines(doc)
    obj = mujoco.mjtObj

    def nm(kind, i):
        n = mujoco.mj_id2name(mj, kind, i)
        return n if n else None

    def line_of(tag, n):
        return lines.get((tag, n), doc.line(doc.root))

    desc = Description(
        name=doc.root.get("model") or "mjcf",
        fmt="mjcf",
        file=name,
        line=doc.line(doc.root),
        gravity=tuple(float(x) for x in mj.opt.gravity),
    )
    body_name = ["world"]
    for b in range(1, mj.nbody):
        body_name.append(nm(obj.mjOBJ_BODY, b) or f"body{b}")
    joint_name = [nm(obj.mjOBJ_JOINT, j) or f"joint{j}" for j in range(mj.njnt)]
    ref = {}
    q0 = {}
    # qpos addresses of each loopdyn joint (a universal joint: its two hinges)
    adr = {}
    for b in range(1, mj.nbody):
        bname = body_name[b]
        line = line_of("body", bname)
        iR = quat_matrix(mj.body_iquat[b])
        inertial = Inertial(
            float(mj.body_mass[b]),
            np.array(mj.body_ipos[b], dtype=float),
            iR @ np.diag(mj.body_inertia[b]) @ iR.T,
        )
        desc.links.append(Link(bname, inertial, line))
        parent = body_name[mj.body_parentid[b]]
        parent = WORLD if mj.body_parentid[b] == 0 else parent
        X_pb = transform(quat_matrix(mj.body_quat[b]), mj.body_pos[b])
        jids = [j for j in range(mj.njnt) if mj.jnt_bodyid[j] == b]
        types = [int(mj.jnt_type[j]) for j in jids]
        jt = mujoco.mjtJoint
        if not jids:
            desc.joints.append(
                Joint(f"{bname}_weld", "fixed", parent, bname, X_pb, np.eye(4), line)
            )
            continue
        what = f"body {bname!r}"
        anchor = np.array(mj.jnt_pos[jids[0]], dtype=float)
        A = transform(p=anchor)
        j0 = jids[0]
        jn = joint_name[j0]
        jline = line_of("joint", jn)
        if len(jids) == 1 and types[0] == jt.mjJNT_FREE:
            if parent != WORLD:
                raise desc.error(line, what, "a free joint must belong to a child of the world")
            desc.joints.append(Joint(jn, "floating", WORLD, bname, np.eye(4), np.eye(4), jline))
            qa = int(mj.jnt_qposadr[j0])
            q0[jn] = np.array(mj.qpos0[qa : qa + 7], dtype=float)
            adr[jn] = ("free", [qa])
        elif len(jids) == 1:
            kind = {jt.mjJNT_HINGE: "revolute", jt.mjJNT_SLIDE: "prismatic", jt.mjJNT_BALL: "ball"}[
                types[0]
            ]
            axis = np.array(mj.jnt_axis[j0], dtype=float) if kind != "ball" else None
            desc.joints.append(Joint(jn, kind, parent, bname, X_pb @ A, A, jline, axis))
            if kind != "ball":
                ref[jn] = float(mj.qpos0[mj.jnt_qposadr[j0]])
            adr[jn] = (kind, [int(mj.jnt_qposadr[j0])])
        elif (
            len(jids) == 2
            and types == [jt.mjJNT_HINGE, jt.mjJNT_HINGE]
            and np.allclose(mj.jnt_pos[jids[1]], anchor, atol=1e-12)
        ):
            a1, a2 = (np.array(mj.jnt_axis[j], dtype=float) for j in jids)
            jn2 = joint_name[jids[1]]
            un = jn
            # ld.save writes loopdyn's universal joint U as the hinges U_1, U_2
            if jn.endswith("_1") and jn2 == jn[:-2] + "_2" and jn[:-2] not in joint_name:
                un = jn[:-2]
            desc.joints.append(Joint(un, "universal", parent, bname, X_pb @ A, A, jline, a1, a2))
            desc.notes.append(f"{what}: hinges {jn!r} and {jn2!r} form the universal joint {un!r}")
            for j in jids:
                ref[joint_name[j]] = float(mj.qpos0[mj.jnt_qposadr[j]])
            adr[un] = ("universal", [int(mj.jnt_qposadr[j]) for j in jids])
        else:
            raise desc.error(
                line,
                what,
                f"{len(jids)} joints of types {types} in one body; loopdyn reads one hinge, "
                "slide, ball or free joint per body, or two hinges sharing an anchor (a "
                "universal joint)",
            )
    # equalities
    eq = mujoco.mjtEq
    for k in range(mj.neq):
        ename = nm(obj.mjOBJ_EQUALITY, k) or f"equality{k}"
        et = int(mj.eq_type[k])
        tagname = {eq.mjEQ_CONNECT: "connect", eq.mjEQ_WELD: "weld", eq.mjEQ_JOINT: "joint"}.get(
            et, "equality"
        )
        line = line_of(tagname, ename)
        what = f"equality {tagname} {ename!r}"
        if not mj.eq_active0[k]:
            desc.notes.append(f"{what} is inactive; skipped")
            continue
        o1, o2 = int(mj.eq_obj1id[k]), int(mj.eq_obj2id[k])
        data_k = np.array(mj.eq_data[k], dtype=float)
        site = int(mj.eq_objtype[k]) == obj.mjOBJ_SITE
        if et in (eq.mjEQ_CONNECT, eq.mjEQ_WELD):
            if site:
                ends = []
                for s in (o1, o2):
                    b = int(mj.site_bodyid[s])
                    X = transform(quat_matrix(mj.site_quat[s]), mj.site_pos[s])
                    ends.append((WORLD if b == 0 else body_name[b], X))
                (la, Xa), (lb, Xb) = ends
            else:
                la = WORLD if o1 == 0 else body_name[o1]
                lb = WORLD if o2 == 0 else body_name[o2]
                if et == eq.mjEQ_CONNECT:
                    Xa, Xb = transform(p=data_k[0:3]), transform(p=data_k[3:6])
                else:  # frame B at the anchor on body 2, frame A at relpose on body 1
                    Xb = transform(p=data_k[0:3])
                    Xa = transform(quat_matrix(data_k[6:10]), data_k[3:6])
            kind = "ball" if et == eq.mjEQ_CONNECT else "fixed"
            if et == eq.mjEQ_CONNECT and site:
                Xa, Xb = transform(p=Xa[:3, 3]), transform(p=Xb[:3, 3])
            desc.loops.append(Loop(ename, kind, la, Xa, lb, Xb, line))
        elif et == eq.mjEQ_JOINT:
            if o2 < 0:
                raise desc.error(
                    line,
                    what,
                    "locks a joint to a constant; loopdyn has no "
                    "such constraint (make the joint fixed instead)",
                )
            coef = data_k[0:5]
            if np.any(np.abs(coef[2:]) > 0):
                raise desc.error(
                    line,
                    what,
                    f"polynomial {coef.tolist()} is not linear; loopdyn couples joints linearly",
                )
            # MuJoCo: q1 - q1ref = a0 + a1 (q2 - q2ref); loopdyn q = qpos - qpos0
            desc.couplings.append(
                Coupling(
                    ename,
                    joint_name[o2],
                    joint_name[o1],
                    float(coef[1]),
                    float(coef[0]),
                    line,
                    "joint equality",
                )
            )
        else:
            raise desc.error(
                line,
                what,
                f"equality type {tagname} is not supported (connect, weld and joint are)",
            )
    # actuators on joints
    for a in range(mj.nu):
        if int(mj.actuator_trntype[a]) == mujoco.mjtTrn.mjTRN_JOINT:
            desc.actuated.append(joint_name[int(mj.actuator_trnid[a, 0])])
    ignored = {}
    for key, arr in (
        ("armature", mj.dof_armature),
        ("damping", mj.dof_damping),
        ("frictionloss", mj.dof_frictionloss),
        ("stiffness", mj.jnt_stiffness),
    ):
        if np.any(np.asarray(arr) != 0):
            ignored[key] = True
    if ignored:
        desc.notes.append(f"not part of the rigid-body model, ignored: {sorted(ignored)}")
    desc.extra["mujoco"] = {
        "qpos0_offset": ref,
        "free_qpos0": {k: v.tolist() for k, v in q0.items()},
    }
    key = mujoco.mj_name2id(mj, obj.mjOBJ_KEY, "q0") if mj.nkey else -1
    if key >= 0:
        # the keyframe ld.save writes: q0 in MuJoCo's qpos, read with the map above
        qpos = np.array(mj.key_qpos[key], dtype=float)
        for jn, (kind, qas) in adr.items():
            if kind == "free":
                q0[jn] = qpos[qas[0] : qas[0] + 7]
            elif kind == "ball":
                q0[jn] = qpos[qas[0] : qas[0] + 4]
            else:
                q0[jn] = np.array([qpos[a] - mj.qpos0[a] for a in qas])
        desc.extra["mujoco"]["keyframe"] = "q0"
    desc.q_init = q0
    return desc
