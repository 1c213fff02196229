"""What a file reader produces: a :class:`Description` of the file's links, joints,
explicit loops and couplings, in the file's own terms (link frames, 4×4 poses).
``loopdyn.io._graph.build_model`` turns it into a :class:`~loopdyn.Model`."""

from dataclasses import dataclass, field

import numpy as np

from loopdyn.errors import ModelError

WORLD = "world"

#: joint kinds a reader may use
KINDS = (
    "revolute",
    "continuous",
    "prismatic",
    "fixed",
    "ball",
    "universal",
    "floating",
    "planar",
)


@dataclass
class Inertial:
    """Mass (kg), centre of mass (m, link frame) and inertia about it (kg·m², link axes)."""

    mass: float
    com: np.ndarray
    inertia: np.ndarray

    @classmethod
    def at(cls, mass, T, v):
        """``mass`` at the origin of the inertial frame ``T`` (4×4, link frame), with the
        inertia entries ``v`` (``ixx`` ... ``izz``, about the centre of mass, T's axes)."""
        I = np.array(
            [
                [v["ixx"], v["ixy"], v["ixz"]],
                [v["ixy"], v["iyy"], v["iyz"]],
                [v["ixz"], v["iyz"], v["izz"]],
            ]
        )
        R = T[:3, :3]
        return cls(mass, T[:3, 3].copy(), R @ I @ R.T)


@dataclass
class Link:
    """A rigid part of the file.  ``pose``: its world pose at the reference configuration
    when the file gives it (SDFormat, MJCF), used for free and welded roots."""

    name: str
    inertial: Inertial | None
    line: int
    pose: np.ndarray | None = None
    geometry: list = field(default_factory=list)


@dataclass
class Joint:
    """A joint of the file: the frame J is fixed on the parent link at ``X_pj`` and on the
    child link at ``X_cj`` (4×4, link frames); at q = 0 the two coincide.  Axes are in J."""

    name: str
    kind: str
    parent: str
    child: str
    X_pj: np.ndarray
    X_cj: np.ndarray
    line: int
    axis: np.ndarray | None = None
    axis2: np.ndarray | None = None
    limits: dict | None = None


@dataclass
class Loop:
    """An explicit loop closure: frame A on ``link_a`` at ``X_a`` coincides with frame B on
    ``link_b`` at ``X_b`` up to the motion of a joint of ``kind`` (axes in frame A)."""

    name: str
    kind: str
    link_a: str
    X_a: np.ndarray
    link_b: str
    X_b: np.ndarray
    line: int
    axis: np.ndarray | None = None
    axis2: np.ndarray | None = None
    #: kind "generic": the constrained directions (unit vectors in frame A)
    rotation_axes: tuple = ()
    translation_axes: tuple = ()
    #: where the loop was written when not in the tree file (``loops=``: YAML file, line,
    #: entry); errors then name it instead of the tree file's line
    where: str | None = None


@dataclass
class Coupling:
    """q_b = ratio · q_a + offset between two one-coordinate joints."""

    name: str
    joint_a: str
    joint_b: str
    ratio: float
    offset: float
    line: int
    source: str


@dataclass
class Description:
    """What a reader found in a file."""

    name: str
    fmt: str
    file: str
    links: list = field(default_factory=list)
    joints: list = field(default_factory=list)
    loops: list = field(default_factory=list)
    couplings: list = field(default_factory=list)
    gravity: tuple = (0.0, 0.0, -9.81)
    actuated: list = field(default_factory=list)
    floating_default: bool = False
    root_hint: str | None = None
    line: int = 1
    notes: list = field(default_factory=list)
    extra: dict = field(default_factory=dict)
    #: named frames: (name, link, 4×4 pose in the link frame, line)
    frames: list = field(default_factory=list)
    #: reference coordinates of some joints (file joint name -> values), else neutral
    q_init: dict = field(default_factory=dict)

    def error(self, line, what, message):
        where = f"{self.file} line {line}"
        return ModelError(f"{where}, {what}: {message}" if what else f"{where}: {message}")
