"""Models in and out of files: URDF, SDFormat, MJCF and loopdyn's native TOML.

>>> model = ld.load("robot.urdf", floating_base=True)
>>> ld.save(model, "robot.toml")
>>> ld.io.describe(model)["dof"]

``ld.load(path, **options)`` picks the reader by the suffix (``.urdf``, ``.sdf``,
``.xml`` = MJCF, ``.toml`` = native); ``ld.save(model, path)`` writes ``.toml``
(native, exact) or ``.xml`` (MJCF, through ``loopdyn.interop.mujoco``).  Every
loaded model carries ``model.metadata`` (a dict: the file, what became of each link
and joint, limits, meshes, notes).  See docs/io.md for what each format reads.
"""

from pathlib import Path

from loopdyn.errors import ModelError

#: default largest file read (bytes); ``max_bytes=`` in ``ld.load`` changes it
MAX_BYTES = 64 * 1024 * 1024


def as_bytes(data, name, max_bytes, what="document"):
    """``data`` (bytes, or str as UTF-8) as bytes; a ModelError naming ``name`` and the
    limit where it is longer than ``max_bytes`` (``what``: "file" or "document")."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    check_size(name, len(data), max_bytes, what)
    return data


def check_size(name, size, max_bytes, what="file"):
    """A ModelError where ``size`` bytes of ``name`` are over the limit ``max_bytes``."""
    if size > max_bytes:
        raise ModelError(
            f"{name}: the {what} is {size} bytes, over the limit of {max_bytes} bytes; "
            "pass max_bytes= to ld.load to read larger files"
        )


#: suffix -> format name
FORMATS = {
    ".urdf": "urdf",
    ".sdf": "sdf",
    ".xml": "mjcf",
    ".mjcf": "mjcf",
    ".toml": "native",
    ".yaml": "loops",
    ".yml": "loops",
}

_XML_OPTIONS = (
    "floating_base",
    "tree_joints",
    "cut_joints",
    "planar",
    "massless",
    "nonphysical_inertia",
    "couplings",
    "assemble",
    "actuated",
    "gravity",
    "name",
    "closures",
)


def _format(path, fmt):
    if fmt is not None:
        if fmt not in set(FORMATS.values()):
            raise ModelError(f"unknown format {fmt!r}; use one of {sorted(set(FORMATS.values()))}")
        return fmt
    suffix = Path(path).suffix.lower()
    try:
        return FORMATS[suffix]
    except KeyError:
        raise ModelError(
            f"{path}: unknown file type {suffix!r}; use .urdf, .sdf, .xml (MJCF), .toml or "
            ".yaml (a URDF's loop closures, the URDF beside it), or pass format="
        ) from None


def _options(kwargs, allowed, fmt):
    from loopdyn.io._graph import Options

    bad = sorted(set(kwargs) - set(allowed))
    if bad:
        raise TypeError(f"ld.load: option(s) {', '.join(bad)} do not apply to {fmt} files")
    o = {k: v for k, v in kwargs.items() if k in _XML_OPTIONS}
    for k in ("tree_joints", "cut_joints"):
        if k in o:
            o[k] = tuple(o[k])
    if o.get("actuated") is not None:
        o["actuated"] = tuple(o["actuated"])
    return Options(**o)


def load(path, format=None, **options):
    """Read a model from ``path`` (str or Path); the reader is chosen by the suffix.

    Options of the URDF / SDFormat / MJCF readers (all keyword-only):

    - ``floating_base``: a free joint under the root (URDF default False, SDFormat:
      True unless the model is attached to the world or static);
    - ``tree_joints`` / ``cut_joints``: joint names forced into / out of the
      spanning tree (the other joints of a loop become closures);
    - ``planar``: build a planar model (x–y plane, closures with planar rows);
    - ``massless``: ``"error"`` (default) or a mass in kg given to moving bodies
      without mass or with a singular inertia (see docs/io.md);
    - ``nonphysical_inertia``: ``"error"`` (default) or ``"accept"``: positive
      definite inertias that violate the triangle inequality (reflected rotor
      inertias) are accepted and listed in ``metadata["nonphysical_inertia"]``;
    - ``couplings``: ``"couple"`` (mimic / gearbox / joint equality as coupling
      closures; an error if this loopdyn has none) or ``"ignore"``;
    - ``assemble``: solve the closures from the file's reference pose for ``q0``;
    - ``actuated``: joint names (default: the file's transmissions / actuators);
    - ``gravity``, ``name``; ``package_dirs``: roots for ``package://`` /
      ``model://`` URIs; ``max_bytes``: the largest file read;
    - ``loops``: loop closures given beside the tree file: the parallel-robot community's
      YAML file (``closed_loop``, ``type``, ``name_mot``, ``joint_name``/``joint_type``),
      a list of ``(frame_a, frame_b, kind)`` or a dict of the YAML's content (see
      :mod:`loopdyn.io.loops`).  ``ld.load("robot.yaml")`` reads the URDF beside it
      (same stem, else the folder's only ``.urdf``) with those loops.

    SDFormat also takes ``model`` (the name of the model to read in a world).
    The native format takes ``parameters`` (overrides of its named parameters).
    Errors: :class:`loopdyn.ModelError` naming the file, the line and the element.
    """
    from loopdyn.io import _xml

    fmt = _format(path, format)
    if fmt == "loops":
        from loopdyn.io.loops import urdf_beside

        if options.get("loops") is not None:
            raise ModelError(f"{path}: a YAML file carries the loops itself; drop loops=")
        options = {**options, "loops": Path(path)}
        path, fmt = urdf_beside(path), "urdf"
    data = _xml.read_bytes(path, options.get("max_bytes", MAX_BYTES))
    return _load(data, Path(path).name, path, fmt, options)


def loads(text, format, name=None, **options):
    """Like :func:`load`, from the text of a file of the given ``format``."""
    fmt = _format(name or "<string>", format)
    if fmt == "loops":
        raise ModelError("ld.loads reads a tree file (URDF, ...); pass the YAML as loops=")
    data = text.encode("utf-8") if isinstance(text, str) else bytes(text)
    return _load(data, name or f"<{fmt} string>", None, fmt, options)


def _load(data, name, path, fmt, options):
    import numpy as np

    with np.errstate(all="ignore"):  # absurd file values: the readers check what matters
        return _load_checked(data, name, path, fmt, options)


def _load_checked(data, name, path, fmt, options):
    options = dict(options)
    max_bytes = options.pop("max_bytes", MAX_BYTES)
    loops = options.pop("loops", None)
    if loops is not None and fmt == "native":
        raise ModelError(
            f"{name}: loops= applies to URDF, SDFormat and MJCF files; a .toml file lists its "
            "closures itself ([[closures]])"
        )
    if fmt == "native":
        from loopdyn.io import native

        bad = sorted(set(options) - {"parameters"})
        if bad:
            raise TypeError(f"ld.load: option(s) {', '.join(bad)} do not apply to .toml files")
        model = native.read(data, name, max_bytes=max_bytes, **options)
    else:
        package_dirs = options.pop("package_dirs", None)
        if fmt == "urdf":
            from loopdyn.io import urdf

            opts = _options(options, _XML_OPTIONS, fmt)
            desc = urdf.read(data, name, path, package_dirs, max_bytes, opts.floating_base)
        elif fmt == "sdf":
            from loopdyn.io import sdf

            model_name = options.pop("model", None)
            opts = _options(options, _XML_OPTIONS, fmt)
            desc = sdf.read(data, name, path, package_dirs, max_bytes, model_name)
        else:
            from loopdyn.io import mjcf

            opts = _options(options, _XML_OPTIONS, fmt)
            desc = mjcf.read(data, name, path, package_dirs, max_bytes, opts)
        if loops is not None:
            from loopdyn.io import loops as loops_io

            loops_io.apply(desc, loops_io.spec_of(loops, max_bytes), name)
        from loopdyn.io._graph import build_model

        model = build_model(desc, opts)
    if path is not None:
        model.metadata["file"] = str(path)
    return model


def save(model, path, format=None):
    """Write ``model`` to ``path``: ``.toml`` native (exact round trip), ``.xml`` MJCF or
    ``.urdf`` (closures as URDF+ ``<loop>``; see :func:`loopdyn.io.urdf.dumps` for what
    URDF can hold)."""
    from loopdyn.validation import model_arg

    model_arg(model)
    fmt = _format(path, format)
    if fmt == "native":
        from loopdyn.io import native

        return native.save(model, path)
    if fmt == "mjcf":
        from loopdyn.interop.mujoco import to_mjcf

        try:
            text = to_mjcf(model)
        except ValueError as e:
            raise ModelError(f"{path}: {e}") from None
        Path(path).write_text(text + "\n", encoding="utf-8")
        return Path(path)
    if fmt == "urdf":
        from loopdyn.io import urdf

        Path(path).write_text(urdf.dumps(model), encoding="utf-8")
        return Path(path)
    raise ModelError(f"{path}: loopdyn writes .toml (native), .xml (MJCF) and .urdf, not {fmt}")


from loopdyn.io.tools import convert, describe  # noqa: E402

__all__ = ["FORMATS", "convert", "describe", "load", "loads", "save"]
