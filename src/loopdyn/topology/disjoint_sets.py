"""Union-find of hashable items, for the graph walks that group bodies or detect cycles
(``io._graph``: a joint closing a cycle of links; ``topology.parallel``: bodies welded
together)."""


class DisjointSets:
    """Disjoint sets of hashable, mutually comparable items (path halving).  An item
    not seen before is a set of its own; ``union`` keeps the smaller of the two roots,
    so a set of integers is named by its smallest member."""

    def __init__(self, items=()):
        self.parent = {x: x for x in items}

    def find(self, x):
        """The root of ``x``'s set."""
        parent = self.parent
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    def union(self, a, b):
        """Merge the sets of ``a`` and ``b``; False if they were one set already."""
        ra, rb = self.find(a), self.find(b)
        if ra == rb:
            return False
        if rb < ra:
            ra, rb = rb, ra
        self.parent[rb] = ra
        return True
