"""loopdyn: exact, fast dynamics of closed-loop multibody systems.

>>> import loopdyn as ld
>>> model = ld.examples.serial_arm()
>>> qdd = ld.aba(model, model.q0, np.zeros(model.nv), np.zeros(model.nv))
"""

import os as _os

# numba formats a message for every overload it tries and rejects while typing a
# kernel; with colorama installed each one initialises and resets the terminal, ~13 % of
# a cold compile (four-bar: 30.9 -> 26.7 s).  numba's documented switch, read when numba
# is first imported (no effect if it already was); it only drops the colours of numba's
# own error messages.
_os.environ.setdefault("NUMBA_DISABLE_ERROR_MESSAGE_HIGHLIGHTING", "1")

from loopdyn.kernels import numba_internals as _numba_internals

_numba_internals.install_cache_locator()  # before any kernel is defined: see that module
_numba_internals.install_call_type_memo()  # compile time (same types): idem

from loopdyn import examples, interop, io, methods, topology, viz
from loopdyn.analysis.actuation import ActuationMap, actuation_map
from loopdyn.analysis.assembly import assemble, complete_velocity, partition
from loopdyn.analysis.energy import kinetic_energy, potential_energy, total_energy
from loopdyn.analysis.inverse import inverse_dynamics
from loopdyn.analysis.regressor import (
    base_parameters,
    closed_loop_regressor,
    inertial_parameters,
    joint_torque_regressor,
    with_inertial_parameters,
)
from loopdyn.batch import (
    BatchResult,
    aba_batch,
    forward_dynamics_batch,
    forward_dynamics_derivatives_batch,
    inverse_dynamics_batch,
    rnea_batch,
)
from loopdyn.derivatives import (
    aba_derivatives,
    forward_dynamics_derivatives,
    inverse_dynamics_derivatives,
    rnea_derivatives,
    step_derivatives,
)
from loopdyn.errors import (
    ActuationError,
    AssemblyError,
    BatchInterrupted,
    FallbackWarning,
    LoopdynError,
    ModelError,
    NonUniqueWarning,
    SimulationError,
    SimulationInterrupted,
    SimulationSingularityError,
    SingularityError,
)
from loopdyn.io import load, save
from loopdyn.kernels import tiers as _tiers  # noqa: F401 - which tier runs a kernel
from loopdyn.kinematics.closures import (
    closure_residual,
    constraint_bias,
    constraint_jacobian,
    constraint_rank,
    constraints,
    degrees_of_freedom,
)
from loopdyn.kinematics.configuration import difference, integrate
from loopdyn.kinematics.frames import forward_kinematics, frame_jacobian, frame_placement
from loopdyn.methods.dynamics import (
    closure_forces,
    closure_loads_at,
    closure_wrenches,
    forward_dynamics,
)
from loopdyn.methods.embedding import aggregation
from loopdyn.methods.sslm import GICM, gicm
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
from loopdyn.sim.batch import simulate_batch
from loopdyn.sim.simulate import simulate
from loopdyn.sim.trajectory import Trajectory
from loopdyn.sweeps import read_sweep, sweep
from loopdyn.topology.parallel import parallel_structure
from loopdyn.tree.algorithms import aba, crba, nonlinear_effects, rnea
from loopdyn.viz.html import export_html
from loopdyn.viz.sweep_plot import plot_sweep
from loopdyn.viz.viewer import view

__version__ = "0.1.0"

__all__ = [
    "GICM",
    "GROUND",
    "ActuationError",
    "ActuationMap",
    "AssemblyError",
    "BatchInterrupted",
    "BatchResult",
    "Data",
    "FallbackWarning",
    "Fixed",
    "Free",
    "LoopdynError",
    "Model",
    "ModelBuilder",
    "ModelError",
    "NonUniqueWarning",
    "Prismatic",
    "Revolute",
    "SimulationError",
    "SimulationInterrupted",
    "SimulationSingularityError",
    "SingularityError",
    "Spherical",
    "Trajectory",
    "Universal",
    "aba",
    "aba_batch",
    "aba_derivatives",
    "actuation_map",
    "aggregation",
    "assemble",
    "base_parameters",
    "closed_loop_regressor",
    "closure_forces",
    "closure_loads_at",
    "closure_residual",
    "closure_wrenches",
    "complete_velocity",
    "constraint_bias",
    "constraint_jacobian",
    "constraint_rank",
    "constraints",
    "crba",
    "degrees_of_freedom",
    "difference",
    "examples",
    "export_html",
    "forward_dynamics",
    "forward_dynamics_batch",
    "forward_dynamics_derivatives",
    "forward_dynamics_derivatives_batch",
    "forward_kinematics",
    "frame_jacobian",
    "frame_placement",
    "gicm",
    "inertial_parameters",
    "integrate",
    "interop",
    "inverse_dynamics",
    "inverse_dynamics_batch",
    "inverse_dynamics_derivatives",
    "io",
    "joint_torque_regressor",
    "kinetic_energy",
    "load",
    "methods",
    "nonlinear_effects",
    "parallel_structure",
    "partition",
    "plot_sweep",
    "potential_energy",
    "read_sweep",
    "rnea",
    "rnea_batch",
    "rnea_derivatives",
    "save",
    "simulate",
    "simulate_batch",
    "step_derivatives",
    "sweep",
    "topology",
    "total_energy",
    "view",
    "viz",
    "with_inertial_parameters",
]
