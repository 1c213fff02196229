"""Time integration with constraint stabilisation, and its ``Trajectory``."""
