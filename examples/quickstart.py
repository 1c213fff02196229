"""Quick start: forward and inverse dynamics of the 6-DOF arm, checked both ways."""

import numpy as np

import loopdyn as ld

model = ld.examples.serial_arm()
rng = np.random.default_rng(0)
q = model.random_configuration(rng)
v = rng.normal(size=model.nv)
tau = rng.normal(size=model.nv)
qdd = ld.aba(model, q, v, tau)
print(model)
print("qdd            =", np.round(qdd, 4))
print("rnea(aba) - tau =", np.abs(ld.rnea(model, q, v, qdd) - tau).max())
