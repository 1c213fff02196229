"""The mechanism catalog: ``ld.examples.names()`` and ``ld.examples.get(name, **kw)``."""

from loopdyn.examples.chains import closed_knee_leg, four_bar_chain, four_bar_cut, geared_chain
from loopdyn.examples.fig9_ladders import fig9_pendulum, hooke_ladder, pendulum_ladder
from loopdyn.examples.ladders import spatial_ladder, spatial_ladder_tree
from loopdyn.examples.legs import cassie_leg, digit_leg, five_bar_leg, kangaroo_leg, wl16_leg
from loopdyn.examples.paper_mechanisms import carpet_scraper, excavator, three_rrr
from loopdyn.examples.parallel import delta, stewart
from loopdyn.examples.planar import five_bar, four_bar, planar_ladder, slider_crank
from loopdyn.examples.shapes import box, rod
from loopdyn.examples.trees import random_tree, serial_arm

_CATALOG = {
    "four_bar": four_bar,
    "five_bar": five_bar,
    "slider_crank": slider_crank,
    "planar_ladder": planar_ladder,
    "spatial_ladder": spatial_ladder,
    "serial_arm": serial_arm,
    "random_tree": random_tree,
    "spatial_ladder_tree": spatial_ladder_tree,
    "hooke_ladder": hooke_ladder,
    "pendulum_ladder": pendulum_ladder,
    "fig9_pendulum": fig9_pendulum,
    "carpet_scraper": carpet_scraper,
    "three_rrr": three_rrr,
    "excavator": excavator,
    "four_bar_chain": four_bar_chain,
    "four_bar_cut": four_bar_cut,
    "closed_knee_leg": closed_knee_leg,
    "geared_chain": geared_chain,
    "stewart": stewart,
    "delta": delta,
    "cassie_leg": cassie_leg,
    "digit_leg": digit_leg,
    "five_bar_leg": five_bar_leg,
    "kangaroo_leg": kangaroo_leg,
    "wl16_leg": wl16_leg,
}


def names():
    """Names of the catalog models."""
    return sorted(_CATALOG)


def parameters(name):
    """The parameters of catalog model ``name``: a tuple of ``Parameter`` (name, unit,
    meaning, default); see ``loopdyn.examples.params``."""
    return getattr(_factory(name), "parameters", ())


def _factory(name):
    from loopdyn.errors import ModelError

    try:
        return _CATALOG[name]
    except KeyError:
        raise ModelError(
            f"unknown catalog model {name!r}; available: {', '.join(names())}"
        ) from None


def get(name, **kwargs):
    """Build catalog model ``name`` with its keyword parameters (``parameters(name)``)."""
    return _factory(name)(**kwargs)


__all__ = [
    "box",
    "carpet_scraper",
    "cassie_leg",
    "closed_knee_leg",
    "delta",
    "digit_leg",
    "excavator",
    "fig9_pendulum",
    "five_bar",
    "five_bar_leg",
    "four_bar",
    "four_bar_chain",
    "four_bar_cut",
    "geared_chain",
    "get",
    "hooke_ladder",
    "kangaroo_leg",
    "names",
    "parameters",
    "pendulum_ladder",
    "planar_ladder",
    "random_tree",
    "rod",
    "serial_arm",
    "slider_crank",
    "spatial_ladder",
    "spatial_ladder_tree",
    "stewart",
    "three_rrr",
    "wl16_leg",
]
