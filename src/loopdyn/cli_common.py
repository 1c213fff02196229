"""What the ``loopdyn`` commands share (``cli.py``, ``cli_view.py``, ``cli_sweep.py``):
the consoles, the one-line errors, parsing of ``KEY=VALUE`` parameters and load
options, loading a catalog model or a model file, checking output paths.  A module of
its own so that the commands' modules import it and not each other (no import cycle).
"""

import os
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

import numpy as np
import typer


def _console(stderr=False):
    from rich.console import Console

    return Console(stderr=stderr, highlight=False)


def _esc(obj):
    """str(obj) with rich markup escaped (messages hold [..] lists)."""
    from rich.markup import escape

    return escape(str(obj))


class _Usage(Exception):
    """A command-line mistake: one line on stderr, exit code 2."""


@contextmanager
def _errors():
    """Every loopdyn, value, type or file error becomes one line on stderr and exit 2."""
    import loopdyn as ld

    try:
        yield
    except (_Usage, ld.LoopdynError, ValueError, TypeError, OSError, KeyError) as e:
        text = " ".join(str(e).split()) or type(e).__name__
        _console(stderr=True).print(f"[red]error:[/] {_esc(text)}", soft_wrap=True)
        raise typer.Exit(2) from None


def _parse_value(text, unit=None, name="value"):
    """The value of ``KEY=VALUE`` for a parameter of ``unit`` (``loopdyn.examples.params``).

    Angles (unit ``rad``) need a unit: ``90deg`` or ``1.571rad`` (a bare number is
    refused: degrees or radians would be a guess).  Counts and seeds are integers;
    other numbers are floats (SI units); a comma-separated list gives an array.
    """
    t = text.strip()
    if unit == "text":
        return t
    if unit == "flag":
        if t.lower() in ("true", "yes", "1", "on"):
            return True
        if t.lower() in ("false", "no", "0", "off"):
            return False
        raise _Usage(f"parameter {name} is a flag: give true or false, got {text!r}")
    if "," in t:
        return [_parse_value(x, unit, name) for x in t.split(",") if x.strip()]
    low = t.lower()
    try:
        if low.endswith("deg"):
            value = float(np.deg2rad(float(t[:-3])))
        elif low.endswith("rad"):
            value = float(t[:-3])
        elif unit == "rad":
            raise _Usage(
                f"parameter {name} is an angle: give its unit, e.g. {name}={t}deg or {name}={t}rad"
            )
        elif unit in ("count", "seed"):
            value = int(t)
        else:
            value = float(t)
    except ValueError:
        kind = "an integer" if unit in ("count", "seed") else "a number"
        raise _Usage(f"parameter {name} must be {kind}, got {text!r}") from None
    if unit != "rad" and (low.endswith("deg") or low.endswith("rad")):
        raise _Usage(f"parameter {name} is not an angle ({unit}); got {text!r}")
    return value


def _parse_params(model, params):
    """``-p KEY=VALUE`` options as keyword arguments of catalog model ``model``."""
    import loopdyn as ld

    spec = {p.name: p.unit for p in ld.examples.parameters(model)}
    out = {}
    for p in params or []:
        if "=" not in p:
            raise _Usage(f"--param: expected KEY=VALUE, got {p!r}")
        k, v = (x.strip() for x in p.split("=", 1))
        if k not in spec:
            known = ", ".join(spec) or "none"
            raise _Usage(f"{model} has no parameter {k!r}; its parameters are {known}")
        out[k] = _parse_value(v, spec[k], k)
    return out


_FILE_SUFFIXES = (".urdf", ".sdf", ".xml", ".mjcf", ".toml")
# ld.simulate's arguments as the command line names them in messages (check_arguments)
SIMULATE_OPTIONS = {
    "t_end": "--t-end", "t_eval": "--points", "rtol": "--rtol", "atol": "--atol", "dt": "--dt",
    "max_outputs": None,
}  # fmt: skip

# ld.load's options as ``--load-option KEY=VALUE`` reads them: KEY -> the value's kind
LOAD_OPTIONS = {
    "floating_base": "bool", "planar": "bool", "assemble": "bool",
    "tree_joints": "names", "cut_joints": "names", "actuated": "names", "package_dirs": "names",
    "massless": "mass", "nonphysical_inertia": "text", "couplings": "text", "closures": "text",
    "gravity": "vector", "name": "text", "model": "text", "max_bytes": "int",
}  # fmt: skip
#: the model argument's help: every suffix ``ld.load`` reads
MODEL_FILES = ".urdf .sdf .xml .mjcf .toml .yaml"
MODEL_HELP = f"catalog name (loopdyn models) or model file ({MODEL_FILES})"
LoopsOption = Annotated[
    Path | None,
    typer.Option(
        "--loops",
        help="loop closures beside a URDF: the parallel-robot YAML file "
        "(closed_loop, type, name_mot, joint_name/joint_type)",
    ),
]
LoadOption = Annotated[
    list[str] | None,
    typer.Option(
        "--load-option",
        "-L",
        help="an ld.load option KEY=VALUE for a model file, e.g. nonphysical_inertia=accept, "
        "massless=0.01, floating_base=true, cut_joints=a,b, couplings=ignore "
        f"(keys: {', '.join(LOAD_OPTIONS)})",
    ),
]


def _parse_load_options(items):
    """``--load-option KEY=VALUE`` items as ``ld.load`` keywords."""
    out = {}
    for item in items or []:
        if "=" not in item:
            raise _Usage(f"--load-option: expected KEY=VALUE, got {item!r}")
        k, v = (x.strip() for x in item.split("=", 1))
        kind = LOAD_OPTIONS.get(k)
        if kind is None:
            raise _Usage(f"--load-option: unknown key {k!r}; use one of {', '.join(LOAD_OPTIONS)}")
        if kind == "bool":
            if v.lower() not in ("true", "false", "1", "0", "yes", "no"):
                raise _Usage(f"--load-option {k}: expected true or false, got {v!r}")
            out[k] = v.lower() in ("true", "1", "yes")
        elif kind == "names":
            out[k] = [x.strip() for x in v.split(",") if x.strip()]
        elif kind == "vector":
            out[k] = _parse_vector(v, f"--load-option {k}")
        elif kind == "int":
            try:
                out[k] = int(v)
            except ValueError:
                raise _Usage(f"--load-option {k}: expected an integer, got {v!r}") from None
        elif kind == "mass":  # "error" or a mass in kg
            try:
                out[k] = float(v)
            except ValueError:
                out[k] = v
        else:
            out[k] = v
    return out


def _is_model_file(spec):
    """Whether the model argument ``spec`` names a model file (else a catalog model)."""
    path = Path(spec)
    return path.suffix.lower() in (*_FILE_SUFFIXES, ".yaml", ".yml") or path.exists()


def _load_model(spec, params, loops=None, load_options=None):
    """A catalog model (name and ``-p`` parameters) or a model file (``ld.load`` with
    ``--loops`` and ``--load-option`` options)."""
    import loopdyn as ld

    path = Path(spec)
    if _is_model_file(spec):
        if params:
            raise _Usage("--param sets catalog parameters; a model file takes none")
        options = _parse_load_options(load_options)
        if loops is not None:
            options["loops"] = loops
        return ld.load(path, **options)
    if loops is not None or load_options:
        raise _Usage(f"--loops and --load-option apply to a model file, not to catalog {spec!r}")
    return ld.examples.get(spec, **_parse_params(spec, params))


def _parse_vector(text, what):
    if text is None:
        return None
    try:
        return np.array([float(x) for x in text.replace(" ", ",").split(",") if x], float)
    except ValueError:
        raise typer.BadParameter(
            f"{what}: expected comma-separated numbers, got {text!r}"
        ) from None


def _check_output(path, suffixes, what):
    """Refuse, before any work, an output of an unknown type or in an unwritable folder;
    make its folder if missing."""
    if path is None:
        return
    if path.suffix.lower() not in suffixes:
        raise _Usage(f"{what} {str(path)!r}: unknown file type; use {', '.join(suffixes)}")
    folder = path.parent if str(path.parent) else Path(".")
    existing = folder
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise _Usage(f"{what} {str(path)!r}: {str(existing)!r} is a file, not a folder")
    if not os.access(existing, os.W_OK):
        raise _Usage(f"{what} {str(path)!r}: the folder {str(existing)!r} is not writable")
    folder.mkdir(parents=True, exist_ok=True)  # a missing folder is made, as for any output
