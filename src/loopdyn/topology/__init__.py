"""Structural analysis of a model's graph: subsystems and loops (SSLM), cut choice.

``ld.topology.topology(model)`` and the functions of ``loopdyn.topology.mechanism``
are re-exported here.
"""

from loopdyn.topology import mechanism as _mechanism
from loopdyn.topology.mechanism import *  # noqa: F403 - its __all__, re-exported

__all__ = list(_mechanism.__all__)
