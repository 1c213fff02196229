"""Exporters to peer libraries, and maps to their coordinates (imported lazily: the
peers are optional extras).

``ld.interop.pinocchio`` (``to_pinocchio``, ``PinocchioExport``, ``CoordinateMap``:
loopdyn q, v ↔ those of a ``pin.Model`` of the same URDF) and ``ld.interop.mujoco``
(``to_mjcf``, ``MujocoExport``) are imported on first use.
"""

import importlib


def to_pinocchio(model):
    """``(pin.Model, StdVec constraint models, StdVec datas)``; see ``interop.pinocchio``."""
    from loopdyn.interop.pinocchio import to_pinocchio as _to_pinocchio

    return _to_pinocchio(model)


def __getattr__(name):
    # the submodules import their peer (pinocchio, mujoco) only when asked for
    if name in ("pinocchio", "mujoco"):
        return importlib.import_module(f"loopdyn.interop.{name}")
    raise AttributeError(f"module 'loopdyn.interop' has no attribute {name!r}")


__all__ = ["to_pinocchio"]
