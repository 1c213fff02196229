"""loopdyn's native model file: TOML, everything ``ModelBuilder`` can say.

Layout (JSON Schema: ``loopdyn/io/model.schema.json``; units SI — m, kg, kg·m²,
rad, m/s² — unless a named parameter says otherwise)::

    format = "loopdyn-model"
    version = 1
    name = "four_bar"
    description = "four-bar linkage"
    planar = true
    gravity = [0.0, -9.81, 0.0]
    q0 = [0.5235987755982988, 1.1, 0.9]         # optional: the reference configuration

    [parameters]                                 # optional: named values with units
    crank = { value = 300, unit = "mm" }         # 0.3 m
    g = 9.81

    [[bodies]]                                   # parents before children
    name = "crank"
    parent = "ground"
    joint = "crank"                              # joint name (default: the body's)
    type = "revolute"                            # revolute prismatic fixed universal spherical free
    axis = [0.0, 0.0, 1.0]                       # or "x", "-y", ...; universal: axis and axis2
    xyz = [0.0, 0.0, 0.0]                        # joint placement in the parent frame
    rotation = [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]   # or rpy = [r, p, y]
    mass = 1.5
    com = ["crank / 2", 0.0, 0.0]                # numbers or expressions of parameters
    inertia = [1.35e-05, 0.01125, 0.01125]       # principal moments or a 3×3 matrix
    actuated = true
    physical = true                              # false: moments may break I1 + I2 >= I3

    [[frames]]
    name = "coupler_tip"
    body = "coupler"
    xyz = [1.0, 0.0, 0.0]

    [[closures]]
    name = "coupler_rocker"
    frame_a = "coupler_tip"
    frame_b = "rocker_tip"
    kind = "revolute"                            # ball revolute universal prismatic weld generic
    # axis, axis2, rotation_axes, translation_axes as in ModelBuilder.add_closure

    [[couplings]]                                # q_b = ratio q_a + offset (if loopdyn has them)
    joint_a = "motor"
    joint_b = "link"
    ratio = 0.1
    offset = 0.0

Reading uses the standard library's ``tomllib``; writing uses the small writer
below (the format is a fixed, restricted subset of TOML: strings, floats, booleans,
arrays and arrays of tables, floats written with ``repr`` so that every value reads
back bit for bit).  ``save`` then ``load`` rebuilds the same packed arrays, names
and ``q0`` exactly.  Errors name the file, the line and the element:
``model.toml line 42, closure 'knee_loop': frame 'shin_tip' does not exist``.
"""

import ast
import json
import math
import re
import tomllib
from pathlib import Path
from types import MappingProxyType

import numpy as np

from loopdyn.errors import ModelError
from loopdyn.io import MAX_BYTES, as_bytes
from loopdyn.model import (
    GROUND,
    Fixed,
    Free,
    ModelBuilder,
    Prismatic,
    Revolute,
    Spherical,
    Universal,
)
from loopdyn.model.closures import CouplingSpec
from loopdyn.model.joints import FIXED, FREE, PRISMATIC, REVOLUTE, SPHERICAL, UNIVERSAL
from loopdyn.model.model import triangle_inequality

FORMAT = "loopdyn-model"
VERSION = 1
SCHEMA = Path(__file__).with_name("model.schema.json")

#: unit -> factor to SI
UNITS = {
    "": 1.0, "1": 1.0,
    "m": 1.0, "cm": 1e-2, "mm": 1e-3, "km": 1e3, "in": 0.0254, "ft": 0.3048,
    "kg": 1.0, "g": 1e-3,
    "rad": 1.0, "deg": math.pi / 180.0,
    "s": 1.0, "ms": 1e-3,
    "N": 1.0, "N*m": 1.0, "N·m": 1.0,
    "kg*m^2": 1.0, "kg·m²": 1.0, "kg*mm^2": 1e-6, "g*cm^2": 1e-7,
    "m/s^2": 1.0, "m/s²": 1.0,
}  # fmt: skip

_TYPES = {
    "revolute": REVOLUTE,
    "prismatic": PRISMATIC,
    "fixed": FIXED,
    "universal": UNIVERSAL,
    "spherical": SPHERICAL,
    "free": FREE,
}
_TOP = {"format", "version", "name", "description", "planar", "gravity", "q0", "parameters",
        "bodies", "frames", "closures", "couplings"}  # fmt: skip
_BODY = {"name", "parent", "joint", "type", "axis", "axis2", "xyz", "rotation", "rpy", "mass",
         "com", "inertia", "actuated", "physical"}  # fmt: skip
_FRAME = {"name", "body", "xyz", "rotation", "rpy"}
_CLOSURE = {"name", "frame_a", "frame_b", "kind", "axis", "axis2", "rotation_axes",
            "translation_axes"}  # fmt: skip
_COUPLING = {"joint_a", "joint_b", "ratio", "offset", "name"}
_SECTIONS = {
    "bodies": ("body", _BODY),
    "frames": ("frame", _FRAME),
    "closures": ("closure", _CLOSURE),
    "couplings": ("coupling", _COUPLING),
}


# ============================================================================ writing
def _s(x):
    """A TOML basic string (JSON's escapes are TOML's; DEL must be escaped too)."""
    return json.dumps(str(x), ensure_ascii=False).replace("\x7f", "\\u007f")


def _f(x):
    """A float that reads back bit for bit (``repr``; TOML spells inf and nan alike)."""
    x = float(x)
    if math.isnan(x):
        return "nan"
    return repr(x)


def _vec(v):
    return "[" + ", ".join(_f(x) for x in np.asarray(v, dtype=float).reshape(-1)) + "]"


def _mat(M):
    return "[" + ", ".join(_vec(r) for r in np.asarray(M, dtype=float)) + "]"


def _axis_value(a):
    if isinstance(a, str):
        return _s(a)
    return _vec(a)


def _exact_body_inertia(I6):
    """(mass, com, inertia about com) that ``spatial_inertia`` maps to ``I6`` bit for bit.

    m = I6[3, 3]; every com with m·c rounding to the stored m[c]× entries is tried (a
    few neighbouring floats), and for each the inertia about the com is corrected
    entry by entry until Ic + m C Cᵀ rounds to the stored block; the first exact
    candidate wins (else the nearest one is returned).
    """
    import itertools

    from loopdyn.kernels.spatial import spatial_inertia

    m = float(I6[3, 3])
    mc = np.array([I6[2, 4], I6[0, 5], I6[1, 3]])
    options = []
    for k in range(3):
        x0 = mc[k] / m
        cands, x = [], x0
        for _ in range(4):
            x = np.nextafter(x, -np.inf)
        for _ in range(9):
            if m * x == mc[k]:
                cands.append(x)
            x = np.nextafter(x, np.inf)
        options.append(cands or [x0])
    target = I6[:3, :3]
    best = None
    for combo in itertools.product(*options):
        c = np.array(combo)
        C = np.array([[0.0, -c[2], c[1]], [c[2], 0.0, -c[0]], [-c[1], c[0], 0.0]])
        Ic = target - m * C @ C.T
        for it in range(48):  # Ic + m C Cᵀ must round to the stored block
            got = spatial_inertia(m, c, Ic)[:3, :3]
            diff = got != target
            if not diff.any():
                return m, c, Ic
            if it < 4:  # step by the residual (an ulp of the sum), then by ulps of Ic
                Ic[diff] += target[diff] - got[diff]
            else:
                Ic[diff] = np.where(got[diff] < target[diff], np.nextafter(Ic[diff], np.inf),
                                    np.nextafter(Ic[diff], -np.inf))  # fmt: skip
        if best is None:
            best = (m, c, Ic)
    return best


def _exact_axis(a):
    """A vector whose normalisation (``a / |a|``, as ModelBuilder does) gives ``a`` exactly."""
    a = np.asarray(a, dtype=float)
    for name, e in (("x", (1, 0, 0)), ("y", (0, 1, 0)), ("z", (0, 0, 1))):
        if np.array_equal(a, e):
            return name
        if np.array_equal(a, -np.asarray(e, dtype=float)):
            return f"-{name}"
    candidates = [a] + [a * (1.0 + k * 2.0**-52) for k in range(-16, 17) if k]
    for w in candidates:
        if np.array_equal(w / np.linalg.norm(w), a):
            return w
    return a


def dumps(model):
    """The native TOML text of ``model`` (see the module docstring)."""
    out = [
        "# loopdyn model file (native format); units: m, kg, kg·m², rad, m/s²",
        f"format = {_s(FORMAT)}",
        f"version = {VERSION}",
        f"name = {_s(model.name)}",
        f"description = {_s(getattr(model, 'description', model.name))}",
        f"planar = {'true' if model.planar else 'false'}",
        f"gravity = {_vec(model.gravity)}",
        f"q0 = {_vec(model.q0)}",
    ]
    act = {int(i) for i in model.actuated}
    specs = model._specs[0]  # the builder's bodies, in the model's order
    covered = set()
    for i in range(model.nbodies):
        t = model.topo[i]
        jt, iv, nv = int(t[1]), int(t[3]), int(t[5])
        vs = set(range(iv, iv + nv))
        actuated = bool(vs) and vs <= act
        if actuated:
            covered |= vs
        p = model.parent[i]
        out += ["", "[[bodies]]", f"name = {_s(model.body_names[i])}",
                f"parent = {_s(GROUND if p < 0 else model.body_names[p])}"]  # fmt: skip
        if model.joint_names[i] != model.body_names[i]:
            out.append(f"joint = {_s(model.joint_names[i])}")
        out.append(f"type = {_s(next(k for k, v in _TYPES.items() if v == jt))}")
        if jt in (REVOLUTE, PRISMATIC, UNIVERSAL):
            out.append(f"axis = {_axis_value(_exact_axis(model.jgeom[i, 4]))}")
        if jt == UNIVERSAL:
            out.append(f"axis2 = {_axis_value(_exact_axis(model.jgeom[i, 5]))}")
        R, xyz = model.jgeom[i, :3], model.jgeom[i, 3]
        if np.any(xyz != 0.0):
            out.append(f"xyz = {_vec(xyz)}")
        if not np.array_equal(R, np.eye(3)):
            out.append(f"rotation = {_mat(R)}")
        if specs is not None:
            s = specs[i]
            m, c, I = s.mass, s.com, s.inertia
        else:
            m, c, I = _exact_body_inertia(model.inertia[i])
        out.append(f"mass = {_f(m)}")
        out.append(f"com = {_vec(c)}")
        I = np.asarray(I, dtype=float)
        if np.array_equal(I, np.diag(np.diag(I))):
            out.append(f"inertia = {_vec(np.diag(I))}")
        else:
            out.append(f"inertia = {_mat(I)}")
        if actuated:
            out.append("actuated = true")
        if not triangle_inequality(np.linalg.eigvalsh(I)):
            out.append("physical = false")
    if covered != act:
        raise ModelError(
            f"{model.name}: actuated coordinates {sorted(act - covered)} do not cover whole "
            "joints; the native format marks joints as actuated"
        )
    for k, fname in enumerate(model.frames):
        b = int(model.frame_body[k])
        X = model.frame_X[k]
        out += ["", "[[frames]]", f"name = {_s(fname)}",
                f"body = {_s(GROUND if b < 0 else model.body_names[b])}"]  # fmt: skip
        if np.any(X[3] != 0.0):
            out.append(f"xyz = {_vec(X[3])}")
        if not np.array_equal(X[:3], np.eye(3)):
            out.append(f"rotation = {_mat(X[:3])}")
    couplings = [c for c in model._closure_specs if isinstance(c, CouplingSpec)]
    for spec in model._closure_specs:
        if isinstance(spec, CouplingSpec):
            continue
        out += ["", "[[closures]]", f"name = {_s(spec.name)}", f"frame_a = {_s(spec.frame_a)}",
                f"frame_b = {_s(spec.frame_b)}", f"kind = {_s(spec.kind)}"]  # fmt: skip
        for key in ("axis", "axis2"):
            v = getattr(spec, key)
            if v is not None:
                out.append(f"{key} = {_axis_value(v)}")
        for key in ("rotation_axes", "translation_axes"):
            v = getattr(spec, key)
            if v:
                out.append(f"{key} = [" + ", ".join(_axis_value(a) for a in v) + "]")
    for c in couplings:
        out += ["", "[[couplings]]"]
        if getattr(c, "name", None):
            out.append(f"name = {_s(c.name)}")
        out += [f"joint_a = {_s(c.joint_a)}", f"joint_b = {_s(c.joint_b)}",
                f"ratio = {_f(c.ratio)}", f"offset = {_f(getattr(c, 'offset', 0.0))}"]  # fmt: skip
    return "\n".join(out) + "\n"


def save(model, path):
    """Write ``model`` to ``path`` in the native format; returns the Path."""
    path = Path(path)
    path.write_text(dumps(model), encoding="utf-8")
    return path


# ============================================================================ reading
class _Lines:
    """Line of each table, array element and key of a TOML text (for error messages)."""

    _HEADER = re.compile(r"^\s*\[\[\s*([A-Za-z0-9_\-]+)\s*\]\]")
    _TABLE = re.compile(r"^\s*\[\s*([A-Za-z0-9_\-.]+)\s*\]")
    _KEY = re.compile(r"^\s*([A-Za-z0-9_\-]+)\s*=")

    def __init__(self, text):
        self.at = {}
        count = {}
        section = ("", None)
        for n, line in enumerate(text.splitlines(), start=1):
            m = self._HEADER.match(line)
            if m:
                name = m.group(1)
                count[name] = count.get(name, -1) + 1
                section = (name, count[name])
                self.at.setdefault(section, n)
                continue
            m = self._TABLE.match(line)
            if m:
                section = (m.group(1), None)
                self.at.setdefault(section, n)
                continue
            m = self._KEY.match(line)
            if m:
                self.at.setdefault((*section, m.group(1)), n)

    def line(self, section, index=None, key=None):
        if key is not None and (section, index, key) in self.at:
            return self.at[(section, index, key)]
        return self.at.get((section, index), 1)


class _Reader:
    def __init__(self, text, name, overrides):
        self.name = name
        self.lines = _Lines(text)
        self.overrides = dict(overrides or {})
        self.params = {}
        self.units = {}

    def error(self, section, index, key, what, message):
        line = self.lines.line(section, index, key)
        where = f"{self.name} line {line}"
        return ModelError(f"{where}, {what}: {message}" if what else f"{where}: {message}")

    # ------------------------------------------------------------------ values
    def number(self, v, ctx):
        """A float from a number or an expression string of parameters."""
        if isinstance(v, bool):
            raise self.error(*ctx, f"expected a number, got {v!r}")
        if isinstance(v, (int, float)):
            return float(v)
        if isinstance(v, str):
            return self._expression(v, ctx)
        raise self.error(*ctx, f"expected a number or an expression, got {v!r}")

    def vector(self, v, n, ctx):
        if not isinstance(v, list) or len(v) != n:
            raise self.error(*ctx, f"expected {n} numbers, got {v!r}")
        return np.array([self.number(x, ctx) for x in v])

    def matrix(self, v, ctx):
        if not isinstance(v, list) or len(v) != 3:
            raise self.error(*ctx, f"expected a 3×3 matrix (3 rows of 3), got {v!r}")
        return np.array([self.vector(r, 3, ctx) for r in v])

    def axis(self, v, ctx):
        if isinstance(v, str) and re.fullmatch(r"[+-]?[xyzXYZ]", v.strip()):
            return v.strip()
        return self.vector(v, 3, ctx)

    _FUNCS = MappingProxyType({"sin": math.sin, "cos": math.cos, "tan": math.tan, "asin": math.asin,
              "acos": math.acos, "atan": math.atan, "atan2": math.atan2, "sqrt": math.sqrt,
              "exp": math.exp, "log": math.log, "radians": math.radians,
              "degrees": math.degrees, "hypot": math.hypot})  # fmt: skip
    _CONST = MappingProxyType({"pi": math.pi, "tau": math.tau, "e": math.e})

    def _expression(self, text, ctx):
        if len(text) > 500:
            raise self.error(*ctx, "expression longer than 500 characters")
        try:
            tree = ast.parse(text.strip(), mode="eval")
        except SyntaxError:
            raise self.error(*ctx, f"cannot read {text!r} as a number or an expression") from None
        try:
            value = self._eval(tree.body, ctx)
        except (OverflowError, ZeroDivisionError, ValueError, TypeError) as e:
            raise self.error(*ctx, f"cannot evaluate {text!r}: {e}") from None
        if not math.isfinite(value):
            raise self.error(*ctx, f"{text!r} is not finite")
        return value

    def _eval(self, node, ctx):
        if isinstance(node, ast.Constant) and type(node.value) in (int, float):
            return float(node.value)
        if isinstance(node, ast.Name):
            if node.id in self.params:
                return self.params[node.id]
            if node.id in self._CONST:
                return self._CONST[node.id]
            raise self.error(*ctx, f"unknown parameter {node.id!r}")
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.UAdd, ast.USub)):
            v = self._eval(node.operand, ctx)
            return -v if isinstance(node.op, ast.USub) else v
        if isinstance(node, ast.BinOp):
            a, b = self._eval(node.left, ctx), self._eval(node.right, ctx)
            op = node.op
            if isinstance(op, ast.Add):
                return a + b
            if isinstance(op, ast.Sub):
                return a - b
            if isinstance(op, ast.Mult):
                return a * b
            if isinstance(op, ast.Div):
                return a / b
            if isinstance(op, ast.Pow):
                return math.pow(a, b)
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id in self._FUNCS and not node.keywords):  # fmt: skip
            return float(self._FUNCS[node.func.id](*(self._eval(a, ctx) for a in node.args)))
        raise self.error(*ctx, f"unsupported expression element {ast.dump(node)[:60]}")

    def parameters(self, table):
        ctx = ("parameters", None, None, "parameters")
        if not isinstance(table, dict):
            raise self.error(*ctx[:3], "parameters", "must be a table")
        for key in self.overrides:
            if key not in table:
                raise ModelError(
                    f"{self.name}: parameter {key!r} given to ld.load is not in the "
                    f"file; parameters are {sorted(table)}"
                )
        for key, spec in table.items():
            c = ("parameters", None, key, f"parameter {key!r}")
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key) or key in self._CONST:
                raise self.error(*c, "a parameter name must be an identifier (not pi, tau, e)")
            unit = ""
            if isinstance(spec, dict):
                bad = set(spec) - {"value", "unit"}
                if bad or "value" not in spec:
                    raise self.error(*c, 'write {value = ..., unit = "..."}')
                unit = spec.get("unit", "")
                spec = spec["value"]
            if not isinstance(unit, str) or unit not in UNITS:
                raise self.error(*c, f"unknown unit {unit!r}; known: {sorted(UNITS)}")
            if key in self.overrides:
                value = float(self.overrides[key])
            else:
                value = self.number(spec, c) * UNITS[unit]
            self.params[key] = value
            self.units[key] = unit


def _check_keys(r, table, allowed, section, index, what):
    if not isinstance(table, dict):
        raise r.error(section, index, None, what, "must be a table")
    for key in table:
        if key not in allowed:
            raise r.error(
                section,
                index,
                key,
                what,
                f"unknown key {key!r}; allowed: {', '.join(sorted(allowed))}",
            )


def _str(r, t, key, default, section, index, what):
    v = t.get(key, default)
    if not isinstance(v, str):
        raise r.error(section, index, key, what, f"{key} must be a string, got {v!r}")
    return v


def _name(r, t, section, index, kind):
    n = t.get("name")
    if not isinstance(n, str) or not n:
        raise r.error(section, index, "name", f"{kind} #{index + 1}", "needs a non-empty name")
    return n


#: deepest nesting of arrays and inline tables read: a model file nests 2 deep (a 3×3
#: matrix), and ``tomllib`` recurses per level (50,000 levels: a RecursionError)
MAX_NESTING = 32
_TOO_DEEP = (
    f"arrays or inline tables nested deeper than {MAX_NESTING} levels, the limit of "
    "loopdyn's TOML reader (a loopdyn model nests 2: a 3×3 matrix)"
)
# TOML strings and comments: their brackets do not nest
_NOT_CODE = re.compile(
    r'"""[\s\S]*?"""(?!")|\'\'\'[\s\S]*?\'\'\'(?!\')|"(?:[^"\\\n]|\\.)*"|\'[^\'\n]*\'|#[^\n]*'
)


def _check_nesting(text, name):
    """ModelError naming the file and the line where arrays or inline tables nest deeper
    than ``MAX_NESTING``, before ``tomllib`` recurses into them."""
    if text.count("[") + text.count("{") <= MAX_NESTING:
        return
    code = _NOT_CODE.sub(lambda m: "\n" * m.group().count("\n"), text).encode()
    b = np.frombuffer(code, dtype=np.uint8)
    depth, step = 0, 1 << 22
    for k in range(0, b.size, step):  # in chunks: a file of 64 MiB of brackets
        c = b[k : k + step]
        d = depth + np.cumsum(
            ((c == 91) | (c == 123)).astype(np.int8) - ((c == 93) | (c == 125)), dtype=np.int64
        )
        deep = np.flatnonzero(d > MAX_NESTING)
        if deep.size:
            line = code.count(b"\n", 0, k + int(deep[0])) + 1
            raise ModelError(f"{name} line {line}: {_TOO_DEEP}")
        depth = int(d[-1]) if d.size else depth


def read(data, name, max_bytes=MAX_BYTES, parameters=None):
    """A Model from native TOML ``data`` (bytes or str) of file ``name``."""
    from loopdyn.io._graph import check_finite

    with np.errstate(all="ignore"):  # overflow from absurd values is checked below
        model = _read(data, name, max_bytes, parameters)
    check_finite(model, name, 1)
    return model


def _read(data, name, max_bytes, parameters):
    data = as_bytes(data, name, max_bytes, "file")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        raise ModelError(f"{name} line {line}: not UTF-8 text ({e.reason})") from None
    _check_nesting(text, name)
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        msg = str(e)
        m = re.search(r"line (\d+)", msg)
        raise ModelError(f"{name} line {m.group(1) if m else 1}: not valid TOML ({msg})") from None
    except RecursionError:  # not reached after _check_nesting, unless called very deep
        raise ModelError(f"{name}: {_TOO_DEEP}") from None
    r = _Reader(text, name, parameters)
    for key in doc:
        if key not in _TOP:
            raise r.error(
                "", None, key, "", f"unknown key {key!r}; allowed: {', '.join(sorted(_TOP))}"
            )
    if doc.get("format") != FORMAT:
        raise r.error("", None, "format", "", f"format must be {FORMAT!r} (a loopdyn model file)")
    if doc.get("version") != VERSION:
        raise r.error(
            "",
            None,
            "version",
            "",
            f"version {doc.get('version')!r} is not "
            f"supported (this loopdyn reads version {VERSION})",
        )
    for key, typ in (("name", str), ("description", str), ("planar", bool)):
        if key in doc and not isinstance(doc[key], typ):
            raise r.error("", None, key, "", f"{key} must be a {typ.__name__}")
    for key in ("bodies", "frames", "closures", "couplings"):
        if key in doc and not (isinstance(doc[key], list)
                               and all(isinstance(x, dict) for x in doc[key])):  # fmt: skip
            raise r.error(key, 0, None, "", f"{key} must be an array of tables [[{key}]]")
    if "parameters" in doc:
        r.parameters(doc["parameters"])
    elif parameters:
        raise ModelError(f"{name}: the file has no [parameters]; cannot set {sorted(parameters)}")
    model_name = doc.get("name", Path(name).stem)
    gravity = (r.vector(doc["gravity"], 3, ("", None, "gravity", "gravity")) if "gravity" in doc
               else np.array([0.0, 0.0, -9.81]))  # fmt: skip
    try:
        b = ModelBuilder(model_name, gravity=gravity, planar=doc.get("planar", False))
    except ModelError as e:
        raise r.error("", None, "gravity", "", str(e)) from None
    bodies = doc.get("bodies", [])
    if not bodies:
        raise r.error("", None, None, "", "the file has no [[bodies]]")
    names = {GROUND}
    for i, t in enumerate(bodies):
        _add_body(r, b, t, i, names)
    frame_body = {}
    for i, t in enumerate(doc.get("frames", [])):
        what = f"frame {t.get('name')!r}"
        _check_keys(r, t, _FRAME, "frames", i, what)
        fname = _name(r, t, "frames", i, "frame")
        body = _str(r, t, "body", GROUND, "frames", i, what)
        if body not in names:
            raise r.error("frames", i, "body", what, f"body {body!r} does not exist")
        xyz, R = _placement(r, t, "frames", i, what)
        try:
            b.add_frame(fname, body, xyz=xyz, rotation=R)
        except ModelError as e:
            raise r.error("frames", i, None, what, str(e)) from None
        frame_body[fname] = body
    for i, t in enumerate(doc.get("closures", [])):
        _add_closure(r, b, t, i, frame_body)
    for i, t in enumerate(doc.get("couplings", [])):
        _add_coupling(r, b, t, i)
    try:
        model = b.build()
    except ModelError as e:
        raise r.error("", None, None, "", str(e)) from None
    if "q0" in doc:
        q0 = r.vector(doc["q0"], model.nq, ("", None, "q0", "q0")) if isinstance(
            doc["q0"], list) and len(doc["q0"]) == model.nq else None  # fmt: skip
        if q0 is None:
            raise r.error("", None, "q0", "q0", f"expected {model.nq} numbers (nq)")
        q0.setflags(write=False)
        model.q0 = q0
    if "description" in doc:
        model.description = doc["description"]
    model.metadata = {
        "format": "native",
        "file": name,
        "parameters": {k: {"value": v, "unit": r.units[k]} for k, v in r.params.items()},
    }
    return model


def _placement(r, t, section, i, what):
    xyz = r.vector(t.get("xyz", [0, 0, 0]), 3, (section, i, "xyz", what))
    if "rotation" in t and "rpy" in t:
        raise r.error(section, i, "rpy", what, "give either rotation or rpy, not both")
    if "rotation" in t:
        return xyz, r.matrix(t["rotation"], (section, i, "rotation", what))
    if "rpy" in t:
        from loopdyn.model.model import rotation_from

        rpy = r.vector(t["rpy"], 3, (section, i, "rpy", what))
        return xyz, rotation_from(rpy=rpy)
    return xyz, None


def _add_body(r, b, t, i, names):
    what = f"body {t.get('name')!r}"
    _check_keys(r, t, _BODY, "bodies", i, what)
    name = _name(r, t, "bodies", i, "body")
    parent = t.get("parent", GROUND)
    if not isinstance(parent, str) or parent not in names:
        raise r.error(
            "bodies",
            i,
            "parent",
            what,
            f"parent {parent!r} does not exist (bodies "
            "are listed parents first; use 'ground' for the ground)",
        )
    jtype = _str(r, t, "type", "revolute", "bodies", i, what)
    if jtype not in _TYPES:
        raise r.error(
            "bodies",
            i,
            "type",
            what,
            f"unknown joint type {jtype!r}; use one of {', '.join(_TYPES)}",
        )
    ax = t.get("axis")
    ctx = ("bodies", i, "axis", what)
    if jtype == "revolute":
        joint = Revolute(r.axis(ax, ctx) if ax is not None else "z")
    elif jtype == "prismatic":
        joint = Prismatic(r.axis(ax, ctx) if ax is not None else "x")
    elif jtype == "universal":
        ax2 = t.get("axis2")
        joint = Universal(
            r.axis(ax, ctx) if ax is not None else "x",
            r.axis(ax2, ("bodies", i, "axis2", what)) if ax2 is not None else "y",
        )
    else:
        for key in ("axis", "axis2"):
            if key in t:
                raise r.error("bodies", i, key, what, f"a {jtype} joint has no {key}")
        joint = {"fixed": Fixed, "spherical": Spherical, "free": Free}[jtype]()
    if jtype != "universal" and "axis2" in t:
        raise r.error("bodies", i, "axis2", what, "only a universal joint has axis2")
    xyz, R = _placement(r, t, "bodies", i, what)
    mass = r.number(t.get("mass", 1.0), ("bodies", i, "mass", what))
    com = r.vector(t.get("com", [0, 0, 0]), 3, ("bodies", i, "com", what))
    I = t.get("inertia", [1.0, 1.0, 1.0])
    ictx = ("bodies", i, "inertia", what)
    I = r.vector(I, 3, ictx) if isinstance(I, list) and len(I) == 3 and not any(
        isinstance(x, list) for x in I) else r.matrix(I, ictx)  # fmt: skip
    actuated = t.get("actuated", False)
    if not isinstance(actuated, bool):
        raise r.error("bodies", i, "actuated", what, "actuated must be true or false")
    physical = t.get("physical", True)
    if not isinstance(physical, bool):
        raise r.error("bodies", i, "physical", what, "physical must be true or false")
    jname = t.get("joint", name)
    if not isinstance(jname, str) or not jname:
        raise r.error("bodies", i, "joint", what, "joint must be a non-empty name")
    try:
        b.add_body(
            name,
            parent,
            joint,
            xyz=xyz,
            rotation=R,
            mass=mass,
            com=com,
            inertia=I,
            actuated=actuated,
            joint_name=jname,
            physical=physical,
        )
    except ModelError as e:
        raise r.error("bodies", i, None, what, str(e)) from None
    names.add(name)


def _add_closure(r, b, t, i, frame_body):
    what = f"closure {t.get('name')!r}"
    _check_keys(r, t, _CLOSURE, "closures", i, what)
    name = _name(r, t, "closures", i, "closure")
    for key in ("frame_a", "frame_b"):
        f = t.get(key)
        if not isinstance(f, str) or f not in frame_body:
            raise r.error("closures", i, key, what, f"frame {f!r} does not exist")
    kw = {}
    for key in ("axis", "axis2"):
        if key in t:
            kw[key] = r.axis(t[key], ("closures", i, key, what))
    for key in ("rotation_axes", "translation_axes"):
        if key in t:
            v = t[key]
            if not isinstance(v, list):
                raise r.error("closures", i, key, what, f"{key} must be a list of axes")
            kw[key] = tuple(r.axis(a, ("closures", i, key, what)) for a in v)
    kind = _str(r, t, "kind", "ball", "closures", i, what)
    try:
        b.add_closure(name, t["frame_a"], t["frame_b"], kind, **kw)
    except ModelError as e:
        raise r.error("closures", i, None, what, str(e)) from None


def _add_coupling(r, b, t, i):
    what = f"coupling {t.get('name', i + 1)!r}"
    _check_keys(r, t, _COUPLING, "couplings", i, what)
    if not hasattr(b, "add_coupling"):
        raise r.error(
            "couplings",
            i,
            None,
            what,
            "this loopdyn has no coupling closure (ModelBuilder.add_coupling)",
        )
    for key in ("joint_a", "joint_b"):
        if not isinstance(t.get(key), str):
            raise r.error("couplings", i, key, what, f"{key} must be a joint name")
    ratio = r.number(t.get("ratio", 1.0), ("couplings", i, "ratio", what))
    offset = r.number(t.get("offset", 0.0), ("couplings", i, "offset", what))
    name = t.get("name")
    if name is not None and not isinstance(name, str):
        raise r.error("couplings", i, "name", what, "name must be a string")
    try:
        b.add_coupling(t["joint_a"], t["joint_b"], ratio, offset=offset, name=name)
    except (ModelError, ValueError, TypeError) as e:
        raise r.error("couplings", i, None, what, str(e)) from None
