"""Kinematics of the spanning tree and of the loop closures, and the configuration manifold."""
