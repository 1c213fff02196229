"""Compiled building blocks shared by every algorithm: the packed layout and its views,
spatial algebra, small dense linear algebra, joint kinematics, closure rows."""
