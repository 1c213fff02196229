"""Loop closures given beside a tree file: the parallel-robot community's YAML convention,
or a Python list.

The convention (Pinocchio users' parallel-robot and legged-robot models, e.g. the
example-parallel-robots collection): a plain URDF of the spanning tree, whose loops end in
pairs of frames, and a YAML file beside it::

    closed_loop: [['closedloop1_A', 'closedloop1_B'], ['rod_end', 'heel']]   # frame pairs
    type: ['6d', '3d']          # 6d: the two frames coincide (weld); 3d: their origins (ball)
    name_mot: ['motor_knee', 'motor_ankle']          # the actuated joints
    joint_name: ['free_knee', 'ankle_u']             # optional: tree joints whose kind ...
    joint_type: ['SPHERICAL', 'UJOINT_XY']           # ... is overridden

- A name in a pair is a joint name (the closure frame is that joint's frame on its child
  link: in URDF, the child link's frame; Pinocchio's joint frame), else a link name (its
  frame), else a named frame of the file.  Frame A is the first of the pair.
- ``type``: ``6d`` (weld, the six rows of Pinocchio's ``CONTACT_6D``) or ``3d`` (ball,
  ``CONTACT_3D``), either case; when ``type`` is absent every closure is ``6d`` (the
  convention's default).
- ``joint_type``: ``SPHERICAL`` (ball), ``UJOINT_XY``, ``UJOINT_YZ``, ``UJOINT_ZX``,
  ``UJOINT_ZY`` (and the other two pairs, ``UJOINT_XZ``, ``UJOINT_YX``): a universal joint
  whose first axis is the joint frame's first letter and whose second axis is the second
  letter (in the frame turned by the first; ``CARDAN`` is the convention's older name of
  ``UJOINT_XY``), ``FIXED`` (the joint is locked at its zero, the links merge).  The joint
  keeps its frame; its URDF axis no longer applies.  An override naming a joint the file
  lacks is skipped with a warning (the convention's loader does the same: one YAML file
  often serves several variants of a robot).
- ``name_mot``: the actuated joints (they replace the URDF's transmissions; ``actuated=``
  of ``ld.load`` still wins).

``ld.load("robot.urdf", loops="robot.yaml")`` reads them; ``ld.load("robot.yaml")`` finds
the URDF beside the YAML file: the file of the same stem (``robot.urdf``, the convention's
``name_urdf``/``name_yaml`` defaults), else the only ``.urdf`` file of the folder.  The
convention has no key naming the URDF.

``loops=`` also takes a list of ``(frame_a, frame_b, kind)`` (or ``(frame_a, frame_b,
kind, options)``, ``options`` a dict of ``axis``, ``axis2``, ``rotation_axes``,
``translation_axes``, ``name``), ``kind`` any loopdyn closure kind (``ball``, ``revolute``
(axis default z of frame A), ``universal`` (x, y), ``prismatic`` (x), ``weld``,
``generic``) or the convention's ``3d``/``6d``; or a dict of the YAML's content.

Every error is a :class:`loopdyn.ModelError` naming the file, the line and the entry.
"""

import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from loopdyn.errors import ModelError
from loopdyn.io._description import WORLD, Loop

#: the convention's closure types -> loopdyn reader kinds
TYPES = {"6d": "fixed", "3d": "ball"}
#: joint_type overrides -> (reader kind, first axis, second axis)
_E = {"X": (1.0, 0.0, 0.0), "Y": (0.0, 1.0, 0.0), "Z": (0.0, 0.0, 1.0)}
OVERRIDES = {"SPHERICAL": ("ball", None, None), "FIXED": ("fixed", None, None)}
for _a in "XYZ":
    for _b in "XYZ":
        if _a != _b:
            OVERRIDES[f"UJOINT_{_a}{_b}"] = ("universal", _E[_a], _E[_b])
OVERRIDES["CARDAN"] = OVERRIDES["UJOINT_XY"]
#: keys of the convention's YAML file
KEYS = ("closed_loop", "type", "name_mot", "joint_name", "joint_type")
#: loopdyn closure kinds accepted in a Python list, -> reader kinds
LIST_KINDS = {
    "ball": "ball",
    "revolute": "revolute",
    "universal": "universal",
    "prismatic": "prismatic",
    "weld": "fixed",
    "fixed": "fixed",
    "generic": "generic",
    **TYPES,
}
_DEFAULT_AXES = {"revolute": ((0.0, 0.0, 1.0), None), "prismatic": ((1.0, 0.0, 0.0), None),
                 "universal": ((1.0, 0.0, 0.0), (0.0, 1.0, 0.0))}  # fmt: skip


@dataclass
class Closure:
    """One requested closure: frames by name, the reader kind and where it was written."""

    frame_a: str
    frame_b: str
    kind: str
    where: str
    type: str
    name: str | None = None
    axis: object = None
    axis2: object = None
    rotation_axes: tuple = ()
    translation_axes: tuple = ()


@dataclass
class LoopSpec:
    """What a YAML file (or a list) asks of the tree file."""

    source: str
    closures: list = field(default_factory=list)
    actuated: list | None = None
    actuated_where: str = ""
    overrides: list = field(default_factory=list)  # (joint, TYPE, where)
    notes: list = field(default_factory=list)


# ---------------------------------------------------------------------------- reading
def _lines(text):
    """Line (1-based) of each top-level key's value and of each item of a list value."""
    import yaml

    out = {}
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError:  # pragma: no cover - safe_load raised first
        return out
    if not isinstance(node, yaml.MappingNode):
        return out
    for k, v in node.value:
        key = k.value if isinstance(k, yaml.ScalarNode) else None
        items = []
        if isinstance(v, yaml.SequenceNode):
            items = [item.start_mark.line + 1 for item in v.value]
        out[key] = (k.start_mark.line + 1, items)
    return out


def read_yaml(data, name):
    """A :class:`LoopSpec` of the YAML text ``data`` (bytes or str) of file ``name``."""
    import yaml

    text = data.decode("utf-8", errors="replace") if isinstance(data, bytes) else str(data)
    try:
        content = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"{name} line {mark.line + 1}" if mark is not None else name
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise ModelError(
            f"{where}: not valid YAML ({problem}); the file should hold closed_loop: "
            "[[frame_a, frame_b], ...], type: ['6d' | '3d', ...] and name_mot: [joint, ...]"
        ) from None
    if content is None:
        content = {}
    return from_mapping(content, name, _lines(text))


def _where(name, lines, key, k=None):
    line, items = lines.get(key, (None, []))
    if k is not None and k < len(items):
        line = items[k]
    loc = f"{name} line {line}" if line else name
    return f"{loc}, {key}" + (f"[{k}]" if k is not None else "")


def _names_list(content, key, name, lines, required=False):
    if key not in content or content[key] is None:
        if required:
            raise ModelError(f"{name}: no '{key}' key")
        return None
    v = content[key]
    if isinstance(v, str):
        v = [v]
    if not isinstance(v, list) or not all(isinstance(x, str) and x for x in v):
        raise ModelError(
            f"{_where(name, lines, key)}: must be a list of names (strings), got {v!r}"
        )
    return list(v)


def _one_each(values, key, kinds, n, of, per, name, lines):
    """Check that ``values`` (the YAML's ``key``) is a list of ``kinds``, one type for each
    of the ``n`` entries ``of`` names; ModelError naming the key's line otherwise."""
    where = _where(name, lines, key)
    if not isinstance(values, list):
        raise ModelError(f"{where}: must be a list of {kinds}")
    if len(values) != n:
        raise ModelError(f"{where}: {len(values)} {key}(s) for {n} {of}(s); give one type {per}")


def from_mapping(content, name="<loops>", lines=None):
    """A :class:`LoopSpec` of the YAML's content (a dict)."""
    lines = lines or {}
    if not isinstance(content, dict):
        raise ModelError(
            f"{name}: the YAML file holds a {type(content).__name__}, not a mapping of "
            f"{', '.join(KEYS)}"
        )
    spec = LoopSpec(source=name)
    unknown = sorted(str(k) for k in content if k not in KEYS)
    if unknown:
        msg = (
            f"{name}: key(s) {', '.join(unknown)} ignored (the convention's keys: "
            f"{', '.join(KEYS)})"
        )
        spec.notes.append(msg)
        warnings.warn(msg, stacklevel=4)
    pairs = content.get("closed_loop") or []
    if not isinstance(pairs, list):
        raise ModelError(
            f"{_where(name, lines, 'closed_loop')}: must be a list of frame pairs "
            f"[[frame_a, frame_b], ...], got {pairs!r}"
        )
    types = content.get("type")
    if types is None:
        types = ["6d"] * len(pairs)
        if pairs:
            spec.notes.append(f"{name}: no 'type' key: every closure is 6d (the default)")
    elif isinstance(types, str):
        types = [types]
    _one_each(
        types,
        "type",
        "'6d' / '3d'",
        len(pairs),
        "closed_loop pair",
        "('6d' or '3d') per pair",
        name,
        lines,
    )
    for k, (pair, t) in enumerate(zip(pairs, types, strict=True)):
        where = _where(name, lines, "closed_loop", k)
        if (
            not isinstance(pair, (list, tuple))
            or len(pair) != 2
            or not all(isinstance(x, str) and x for x in pair)
        ):
            raise ModelError(f"{where}: {pair!r} is not a pair of frame names [frame_a, frame_b]")
        kind = TYPES.get(str(t).lower()) if isinstance(t, str) else None
        if kind is None:
            raise ModelError(
                f"{_where(name, lines, 'type', k)}: unknown closure type {t!r} for "
                f"{list(pair)}; use '6d' (the frames coincide) or '3d' (their origins coincide)"
            )
        spec.closures.append(Closure(pair[0], pair[1], kind, where, str(t).lower()))
    spec.actuated = _names_list(content, "name_mot", name, lines)
    spec.actuated_where = _where(name, lines, "name_mot")
    jn = _names_list(content, "joint_name", name, lines) or []
    jt = content.get("joint_type")
    jt = [] if jt is None else ([jt] if isinstance(jt, str) else jt)
    _one_each(
        jt, "joint_type", "joint types", len(jn), "joint_name", "per overridden joint", name, lines
    )
    for k, (j, t) in enumerate(zip(jn, jt, strict=True)):
        key = str(t).upper() if isinstance(t, str) else None
        if key not in OVERRIDES:
            raise ModelError(
                f"{_where(name, lines, 'joint_type', k)}: unknown joint type {t!r} for joint "
                f"{j!r}; use SPHERICAL, UJOINT_XY, UJOINT_YZ, UJOINT_ZX, UJOINT_ZY (universal "
                "joints about those axes of the joint frame) or FIXED"
            )
        spec.overrides.append((j, key, _where(name, lines, "joint_name", k)))
    return spec


def _vec(value, what):
    """A unit axis of ``value`` ('x', '-y', a 3-vector); ModelError naming ``what``."""
    from loopdyn.model.joints import _axis

    try:
        return _axis(value, what)
    except (TypeError, ValueError) as e:
        if isinstance(e, ModelError):
            raise
        raise ModelError(f"{what}: an axis is 'x', 'y', 'z' or a 3-vector, got {value!r}") from None


def from_list(items, name="loops="):
    """A :class:`LoopSpec` of a list of ``(frame_a, frame_b, kind[, options])``."""
    spec = LoopSpec(source=name)
    for k, item in enumerate(items):
        where = f"{name}[{k}]"
        if not isinstance(item, (list, tuple)) or len(item) not in (3, 4):
            raise ModelError(
                f"{where}: {item!r} is not (frame_a, frame_b, kind) or "
                "(frame_a, frame_b, kind, options)"
            )
        a, b, kind = item[:3]
        opts = dict(item[3]) if len(item) == 4 else {}
        if not (isinstance(a, str) and a and isinstance(b, str) and b):
            raise ModelError(f"{where}: the frames must be non-empty names, got {a!r}, {b!r}")
        rk = LIST_KINDS.get(str(kind).lower()) if isinstance(kind, str) else None
        if rk is None:
            raise ModelError(
                f"{where}: unknown closure kind {kind!r}; use ball, revolute, universal, "
                "prismatic, weld, generic (or the convention's '3d', '6d')"
            )
        bad = sorted(set(opts) - {"axis", "axis2", "rotation_axes", "translation_axes", "name"})
        if bad:
            raise ModelError(f"{where}: unknown option(s) {', '.join(bad)}")
        ax, ax2 = _DEFAULT_AXES.get(rk, (None, None))
        ax, ax2 = opts.get("axis", ax), opts.get("axis2", ax2)
        c = Closure(
            a,
            b,
            rk,
            where,
            str(kind).lower(),
            name=opts.get("name"),
            axis=None if ax is None else _vec(ax, f"{where}, axis"),
            axis2=None if ax2 is None else _vec(ax2, f"{where}, axis2"),
            rotation_axes=tuple(
                _vec(x, f"{where}, rotation_axes") for x in opts.get("rotation_axes", ())
            ),
            translation_axes=tuple(
                _vec(x, f"{where}, translation_axes") for x in opts.get("translation_axes", ())
            ),
        )
        if rk == "generic" and not (c.rotation_axes or c.translation_axes):
            raise ModelError(f"{where}: a generic closure needs rotation_axes or translation_axes")
        spec.closures.append(c)
    return spec


def spec_of(loops, max_bytes):
    """A :class:`LoopSpec` of ``loops=``: a YAML path, a list, or a dict."""
    from loopdyn.io import _xml

    if isinstance(loops, (str, Path)):
        p = Path(loops)
        return read_yaml(_xml.read_bytes(p, max_bytes), p.name)
    if isinstance(loops, dict):
        return from_mapping(loops)
    if isinstance(loops, (list, tuple)):
        return from_list(loops)
    raise ModelError(
        f"loops= must be a YAML file path, a list of (frame_a, frame_b, kind) or a dict, "
        f"got {type(loops).__name__}"
    )


def urdf_beside(yaml_path):
    """The URDF file that a YAML file describes the loops of (see the module doc)."""
    p = Path(yaml_path)
    same = p.with_suffix(".urdf")
    if same.is_file():
        return same
    folder = p.parent
    cands = sorted(folder.glob("*.urdf")) if folder.is_dir() else []
    if len(cands) == 1:
        return cands[0]
    found = ", ".join(c.name for c in cands) or "none"
    raise ModelError(
        f"{p}: no URDF of the same stem ({same.name}) beside it, and the folder holds "
        f"{'no single' if cands else 'no'} .urdf file (found: {found}); load it as "
        f"ld.load('robot.urdf', loops='{p.name}')"
    )


# ---------------------------------------------------------------------------- applying
def _frame_of(desc, joints, links, frames, name):
    """(link, 4×4 pose in the link frame) of a pair's name, or None."""
    if name in joints:
        j = joints[name]
        return j.child, np.array(j.X_cj, dtype=float), f"joint {name!r}"
    if name in links or name == WORLD:
        return name, np.eye(4), f"link {name!r}"
    if name in frames:
        link, X = frames[name]
        return link, np.array(X, dtype=float), f"frame {name!r}"
    return None


def apply(desc, spec, tree_file):
    """Add ``spec``'s closures, overrides and actuators to the reader's ``desc``."""
    joints = {j.name: j for j in desc.joints}
    links = {L.name for L in desc.links}
    frames = {f[0]: (f[1], f[2]) for f in desc.frames}
    record = {"source": spec.source, "closures": [], "overrides": {}, "skipped_overrides": []}
    # tree-joint overrides (before the closures: they may make a link part of another)
    for jn, key, where in spec.overrides:
        j = joints.get(jn)
        if j is None:
            msg = f"{where}: joint {jn!r} is not in {tree_file}; override {key} skipped"
            warnings.warn(msg, stacklevel=4)
            record["skipped_overrides"].append(jn)
            desc.notes.append(msg)
            continue
        if j.kind in ("floating", "planar"):
            raise ModelError(
                f"{where}: joint {jn!r} is {j.kind} in {tree_file}; overrides apply to "
                "revolute, continuous, prismatic and fixed joints"
            )
        kind, a1, a2 = OVERRIDES[key]
        record["overrides"][jn] = {"type": key, "was": j.kind}
        j.kind = kind
        j.axis = None if a1 is None else np.array(a1)
        j.axis2 = None if a2 is None else np.array(a2)
    for c in spec.closures:
        ends = []
        for fname in (c.frame_a, c.frame_b):
            got = _frame_of(desc, joints, links, frames, fname)
            if got is None:
                raise ModelError(
                    f"{c.where}: {fname!r} is not a joint, link or frame of {tree_file}; "
                    "name a joint (its child link's frame), a link or a frame of the file"
                )
            ends.append(got)
        (la, Xa, wa), (lb, Xb, wb) = ends
        name = c.name or f"{c.frame_a}C{c.frame_b}"  # the convention's constraint name
        desc.loops.append(
            Loop(
                name,
                c.kind,
                la,
                Xa,
                lb,
                Xb,
                desc.line,
                None if c.axis is None else np.asarray(c.axis, dtype=float),
                None if c.axis2 is None else np.asarray(c.axis2, dtype=float),
                rotation_axes=c.rotation_axes,
                translation_axes=c.translation_axes,
                where=c.where,
            )
        )
        record["closures"].append(
            {
                "name": name,
                "frame_a": c.frame_a,
                "frame_b": c.frame_b,
                "type": c.type,
                "a": wa,
                "b": wb,
            }
        )
    if spec.actuated is not None:
        for jn in spec.actuated:
            j = joints.get(jn)
            if j is None:
                raise ModelError(
                    f"{spec.actuated_where}: actuated joint {jn!r} is not a joint of "
                    f"{tree_file}; name_mot lists joint names"
                )
            if j.kind == "fixed":
                raise ModelError(
                    f"{spec.actuated_where}: actuated joint {jn!r} is fixed (after the "
                    "overrides); a motor needs a moving joint"
                )
        desc.actuated = list(spec.actuated)
        record["name_mot"] = list(spec.actuated)
    desc.notes.extend(spec.notes)
    desc.extra["loops"] = record


__all__ = [
    "OVERRIDES",
    "TYPES",
    "Closure",
    "LoopSpec",
    "apply",
    "from_list",
    "from_mapping",
    "read_yaml",
    "spec_of",
    "urdf_beside",
]
