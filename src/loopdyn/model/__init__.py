"""Model layer: joints, the frozen Model, its Data workspace and the builder."""

from loopdyn.model.data import Data
from loopdyn.model.joints import Fixed, Free, Joint, Prismatic, Revolute, Spherical, Universal
from loopdyn.model.model import GROUND, Model, ModelBuilder

__all__ = [
    "GROUND",
    "Data",
    "Fixed",
    "Free",
    "Joint",
    "Model",
    "ModelBuilder",
    "Prismatic",
    "Revolute",
    "Spherical",
    "Universal",
]
