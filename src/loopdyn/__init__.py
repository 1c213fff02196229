"""loopdyn: exact, fast dynamics of closed-loop multibody systems.

>>> import loopdyn as ld
>>> model = ld.examples.serial_arm()
>>> qdd = ld.aba(model, model.q0, np.zeros(model.nv), np.zeros(model.nv))
"""

from loopdyn import examples, interop
from loopdyn.configuration import difference, integrate
from loopdyn.errors import AssemblyError, LoopdynError, ModelError, SingularityError
from loopdyn.kinematics import forward_kinematics, frame_jacobian, frame_placement
from loopdyn.model import (
    GROUND,
    Data,
    Fixed,
    Free,
    Model,
    ModelBuilder,
    Prismatic,
    Revolute,
    Spherical,
    Universal,
)
from loopdyn.tree import aba, crba, nonlinear_effects, rnea

__version__ = "0.1.0"

__all__ = [
    "GROUND",
    "AssemblyError",
    "Data",
    "Fixed",
    "Free",
    "LoopdynError",
    "Model",
    "ModelBuilder",
    "ModelError",
    "Prismatic",
    "Revolute",
    "SingularityError",
    "Spherical",
    "Universal",
    "aba",
    "crba",
    "difference",
    "examples",
    "forward_kinematics",
    "frame_jacobian",
    "frame_placement",
    "integrate",
    "interop",
    "nonlinear_effects",
    "rnea",
]
