"""Exporters to peer libraries (imported lazily: the peers are optional extras)."""


def to_pinocchio(model):
    """``(pin.Model, StdVec constraint models, StdVec datas)``; see ``interop.pinocchio``."""
    from loopdyn.interop.pinocchio import to_pinocchio as _to_pinocchio

    return _to_pinocchio(model)


__all__ = ["to_pinocchio"]
