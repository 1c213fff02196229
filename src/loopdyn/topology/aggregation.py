"""Constraint embedding's graph layer: cut-edges, aggregation sub-graphs, the aggregated tree.

Jain (``jain-constraint-embedding-aggregation.txt``, Sec. 4.2) turns a closed-chain
system into a tree in four steps:

1. the **system digraph** (the ground and the bodies as nodes; an edge per tree joint,
   parent → child, plus one *cut-edge* per closure) is split into the **spanning
   tree** (the model's tree) and its **cut-edges** (the model's closures);
2. for each cut-edge, its **aggregation sub-graph**: the smallest sub-tree containing
   both of its nodes, minus that sub-tree's root (Sec. 4.2, step 3);
3. sub-graphs that share a node are merged (Fig. 4, example 3); disjoint ones are
   kept apart (example 1: smaller aggregated bodies are cheaper);
4. each merged sub-graph becomes one **aggregated body** 𝒮 of the **aggregated tree**;
   its parent is the sub-tree's root p (a body, or the ground: a cut-edge across
   trees that hang from the ground, example 2, or a closure to the ground, Sec. 9).

Each aggregated body satisfies the aggregation condition (Assumption 1: it is
path-induced and has exactly one parent), so the aggregated digraph is a tree
(Lemma 1), and every cut-edge inside 𝒮 constrains only the coordinates θ_𝒮 of 𝒮's
own joints: the relative motion of the two closure frames depends on the joints
between them only.

Joint-level constraints (couplings, ``ModelBuilder.add_coupling``: a gear, a belt,
``q_b = ratio · q_a + offset``, Sec. 5.1) involve the *hinges* of bodies a and b, so
their sub-graph must contain both bodies: it is the smallest sub-tree containing a, b
and their parents, minus its root.

The generic functions (:func:`aggregation_subgraph`, :func:`merge_subgraphs`,
:func:`aggregated_tree`) work on any ``networkx.DiGraph`` tree; :func:`aggregation`
applies them to a model (``structure``: the aggregated bodies, which the embedding and
RCR plans are built on); ``build_aggregation`` adds the coordinates that
``ld.aggregation`` (``loopdyn.methods.embedding.aggregation``) finds at a configuration
by pivoting on the loop Jacobian: θ_𝒮 (every velocity coordinate of 𝒮's joints), the
independent θ_R and the dependent ones.  This module imports no method.
"""

from dataclasses import dataclass

import numpy as np

from loopdyn.errors import ModelError
from loopdyn.validation import model_arg

GROUND = "ground"


# --------------------------------------------------------------------------- generic graphs
def _root_of(tree):
    roots = [n for n in tree.nodes if tree.in_degree(n) == 0]
    if len(roots) != 1:
        raise ModelError(f"a spanning tree has exactly one root, found {roots}")
    return roots[0]


def _ancestors_path(tree, node, root):
    """[node, parent, ..., root]."""
    path = [node]
    while node != root:
        preds = list(tree.predecessors(node))
        if len(preds) != 1:
            raise ModelError(f"node {node!r} has {len(preds)} parents; a tree has one")
        node = preds[0]
        path.append(node)
    return path


def aggregation_subgraph(tree, nodes, root=None):
    """(sub-tree root, aggregation sub-graph) of the cut-edge between ``nodes`` (Sec. 4.2).

    ``tree``: a ``networkx.DiGraph`` tree (edges parent → child) rooted at ``root``
    (default: its unique node without a parent).  ``nodes``: the cut-edge's nodes (two,
    or more for a joint-level constraint given with its hinges' parents).  The smallest
    sub-tree containing every node is rooted at their lowest common ancestor r; the
    aggregation sub-graph is that sub-tree minus r: the nodes on the paths from r
    (excluded) to each node.  Returns ``(r, frozenset(sub-graph))``.
    """
    root = _root_of(tree) if root is None else root
    paths = [_ancestors_path(tree, n, root) for n in nodes]
    common = set(paths[0]).intersection(*map(set, paths[1:]))
    lca = next(x for x in paths[0] if x in common)  # the deepest common ancestor
    sub = set()
    for p in paths:
        for x in p:
            if x == lca:
                break
            sub.add(x)
    return lca, frozenset(sub)


def merge_subgraphs(subgraphs):
    """Merge sub-graphs that share a node (Fig. 4, example 3); keep disjoint ones apart.

    ``subgraphs``: iterable of node sets.  Returns a list of ``(merged set, [indices of
    the input sub-graphs in it])``, in the order of each group's first member.
    """
    groups = []  # [set, [indices]]
    for k, s in enumerate(subgraphs):
        s = set(s)
        hit = [g for g in groups if g[0] & s]
        if not hit:
            groups.append([s, [k]])
            continue
        first = hit[0]
        first[0] |= s
        first[1].append(k)
        for g in hit[1:]:
            first[0] |= g[0]
            first[1].extend(g[1])
            groups.remove(g)
    return [(frozenset(s), sorted(ix)) for s, ix in groups]


def _contract(tree, node_of):
    """The digraph of ``tree`` with each node n renamed ``node_of.get(n, n)``: the nodes
    sharing a name merged, the edges inside a merged node dropped."""
    import networkx as nx  # lazily: networkx costs ~0.1 s at import

    out = nx.DiGraph()
    for n in tree.nodes:
        out.add_node(node_of.get(n, n))
    for a, b in tree.edges:
        na, nb = node_of.get(a, a), node_of.get(b, b)
        if na != nb:
            out.add_edge(na, nb)
    return out


def aggregated_tree(tree, groups, root=None):
    """The aggregated digraph: each node set of ``groups`` contracted into one node.

    An aggregated node is named by the ``frozenset`` of its members; the other nodes
    keep their names.  Raises :class:`ModelError` if a group violates the aggregation
    condition (Assumption 1: path-induced, exactly one parent outside it), in which case
    the contraction would not be a tree (Lemma 1).
    """
    import networkx as nx  # lazily: networkx costs ~0.1 s at import

    root = _root_of(tree) if root is None else root
    node_of = {}
    for g in groups:
        g = frozenset(g)
        parents = {p for n in g for p in tree.predecessors(n) if p not in g}
        if len(parents) != 1 or root in g:
            raise ModelError(
                f"sub-graph {sorted(map(str, g))} violates the aggregation condition: its "
                f"parents outside it are {sorted(map(str, parents))} (exactly one is needed)"
            )
        for n in g:
            node_of[n] = g
    out = _contract(tree, node_of)
    if not nx.is_arborescence(out):
        raise ModelError("the aggregated digraph is not a tree; a sub-graph is not path-induced")
    return out


# --------------------------------------------------------------------------- models
def system_digraph(model):
    """The system digraph of ``model`` (a ``networkx.MultiDiGraph``).

    Nodes: ``"ground"`` and the body names.  Edges: one per tree joint (parent → child,
    ``kind="joint"``, key the joint name) and one per cut-edge (``kind="closure"`` from
    frame A's body to frame B's, or ``kind="coupling"`` from joint a's body to joint
    b's), keyed by the closure or coupling name.
    """
    import networkx as nx  # lazily: networkx costs ~0.1 s at import

    g = nx.MultiDiGraph()
    g.add_node(GROUND)
    names = model.body_names
    for i, name in enumerate(names):
        p = model.parent[i]
        g.add_edge(names[p] if p >= 0 else GROUND, name, key=model.joint_names[i], kind="joint")
    for k, cname in enumerate(model.closures):
        a, b = (int(x) for x in model.cl_body[k])
        na = names[a] if a >= 0 else GROUND
        nb = names[b] if b >= 0 else GROUND
        g.add_edge(na, nb, key=cname, kind=_kind(model, k))
    return g


def _kind(model, k):
    """The kind of cut-edge closure k is: "coupling" (``ModelBuilder.add_coupling``) or
    "closure"."""
    return "coupling" if model.closure_kinds[k] == "coupling" else "closure"


def spanning_tree(model):
    """The spanning tree of ``model`` (``networkx.DiGraph``, ground → bodies, edge attribute
    ``joint``): the system digraph without its cut-edges."""
    import networkx as nx  # lazily: networkx costs ~0.1 s at import

    t = nx.DiGraph()
    t.add_node(GROUND)
    names = model.body_names
    for i, name in enumerate(names):
        p = model.parent[i]
        t.add_edge(names[p] if p >= 0 else GROUND, name, joint=model.joint_names[i])
    return t


@dataclass(frozen=True)
class CutEdge:
    """A closure or a coupling and its aggregation sub-graph.

    ``kind`` ("closure" or "coupling"), ``index`` (into ``model.closures``, which lists
    both), ``nodes`` (the two body indices, -1 for the ground; a coupling's: the bodies
    moved by its joints a and b), ``root`` (the
    sub-tree root: a body index or -1) and ``subgraph`` (sorted body indices).
    """

    name: str
    kind: str
    index: int
    nodes: tuple
    root: int
    subgraph: tuple


@dataclass(frozen=True)
class AggregatedBody:
    """One aggregated body 𝒮 of the aggregated tree.

    ``bodies`` (sorted indices; ``head`` = the first, which precedes every other member
    and every descendant in the model's order), ``body_names``, ``parent`` (the body p
    it hangs from, -1 for the ground), ``base_bodies`` (members whose parent is p),
    ``closures`` / ``couplings`` (indices into ``model.closures`` of the cut-edges
    embedded in it), ``coordinates`` (θ_𝒮: indices into v of its joints' velocity
    coordinates, in body order), ``rows`` (its constraint rows: indices of the model's
    rows, couplings included), and, from the partition at a configuration, ``rank``
    (independent rows),
    ``independent`` (θ_R) and ``dependent`` (indices into v), ``condition`` (of the
    dependent block, 2-norm).
    """

    index: int
    bodies: tuple
    body_names: tuple
    parent: int
    base_bodies: tuple
    closures: tuple
    couplings: tuple
    coordinates: tuple
    rows: tuple
    rank: int
    independent: tuple
    dependent: tuple
    condition: float

    @property
    def head(self):
        return self.bodies[0]

    @property
    def dof(self):
        """k: the number of independent coordinates θ_R."""
        return len(self.independent)


class Aggregation:
    """The aggregated tree of a model (``ld.aggregation(model)``).

    Attributes: ``model_name``; ``cut_edges`` (tuple of :class:`CutEdge`);
    ``bodies`` (tuple of :class:`AggregatedBody`, ordered parents first);
    ``aggregate_of`` (nb,) index of each body's aggregated body or -1;
    ``graph`` (the system digraph), ``tree`` (the spanning tree) and ``aggregated``
    (the aggregated tree, ``networkx.DiGraph``: aggregated nodes are named
    ``"𝒮k"``, other nodes keep their body names); ``dof`` (ordinary joints' coordinates
    plus the aggregated bodies' independent ones).  ``str()`` prints a summary.
    """

    def __init__(self, model, cut_edges, bodies, aggregate_of, graph, tree, aggregated, dof):
        self.model_name = model.name
        self._coord_names = coordinate_names(model)
        self._body_names = model.body_names
        self.cut_edges = cut_edges
        self.bodies = bodies
        self.aggregate_of = aggregate_of
        self.graph = graph
        self.tree = tree
        self.aggregated = aggregated
        self.dof = dof

    def __len__(self):
        return len(self.bodies)

    def __str__(self):
        lines = [
            f"{self.model_name}: {len(self.cut_edges)} cut-edges, {len(self.bodies)} aggregated "
            f"bodies, {self.dof} DOF"
        ]
        names = self._body_names
        for s in self.bodies:
            parent = names[s.parent] if s.parent >= 0 else GROUND
            cuts = [c.name for c in self.cut_edges if c.subgraph[0] in s.bodies]
            lines.append(
                f"  𝒮{s.index} = {{{', '.join(s.body_names)}}} on {parent}; "
                f"cut-edges {', '.join(cuts)}"
            )
            cn = self._coord_names
            lines.append(f"    θ_S = [{', '.join(cn[i] for i in s.coordinates)}]")
            lines.append(
                f"    θ_R = [{', '.join(cn[i] for i in s.independent)}] (k = {s.dof}); "
                f"dependent [{', '.join(cn[i] for i in s.dependent)}]; rank {s.rank} of "
                f"{len(s.rows)} rows; cond {s.condition:.3g}"
            )
        return "\n".join(lines)

    __repr__ = __str__


def coordinate_names(model):
    """Names of the v coordinates: the joint name, with [c] for multi-coordinate joints."""
    out = []
    for i, j in enumerate(model.joint_names):
        n = int(model.topo[i, 5])
        out.extend([j] if n == 1 else [f"{j}[{c}]" for c in range(n)])
    return out


def _cut_edges(model):
    """Every closure and coupling as a :class:`CutEdge` with its aggregation sub-graph."""
    tree = spanning_tree(model)
    names = model.body_names
    index = {n: i for i, n in enumerate(names)}
    index[GROUND] = -1

    def node(i):
        return names[i] if i >= 0 else GROUND

    out = []
    for k, cname in enumerate(model.closures):
        a, b = (int(x) for x in model.cl_body[k])
        kind = _kind(model, k)
        nodes = (node(a), node(b))
        if kind == "coupling":
            # the hinges of a and b: the sub-tree must contain both bodies and their parents
            nodes += (node(model.parent[a]), node(model.parent[b]))
        root, sub = aggregation_subgraph(tree, nodes, GROUND)
        out.append(
            CutEdge(cname, kind, k, (a, b), index[root], tuple(sorted(index[x] for x in sub)))
        )
    return tree, tuple(out)


def structure(model):
    """The model-level aggregation, independent of any configuration (cached on the model).

    Returns ``(cut_edges, groups, aggregate_of)``: ``groups`` is a tuple of
    ``(sorted bodies, parent, [cut-edge indices])`` ordered by head body (parents before
    children in the aggregated tree).
    """
    cached = getattr(model, "_embedding_structure", None)
    if cached is not None:
        return cached
    _, cuts = _cut_edges(model)
    merged = merge_subgraphs([c.subgraph for c in cuts])
    groups = []
    aggregate_of = np.full(model.nbodies, -1, dtype=np.int64)
    for sub, ix in sorted(merged, key=lambda g: min(g[0])):
        bodies = tuple(sorted(sub))
        parents = {model.parent[i] for i in bodies} - set(bodies)
        if len(parents) != 1:  # pragma: no cover - guaranteed by the construction
            raise ModelError(f"{model.name}: aggregated bodies {bodies} have parents {parents}")
        aggregate_of[list(bodies)] = len(groups)
        groups.append((bodies, int(parents.pop()), ix))
    aggregate_of.setflags(write=False)
    result = (cuts, tuple(groups), aggregate_of)
    model._embedding_structure = result
    return result


def build_aggregation(model, parts):
    """The :class:`Aggregation` of ``model`` from ``parts``: per aggregated body (in the
    order of ``structure``) its partition at a configuration, an object with
    ``coordinates``, ``rows``, ``rank``, ``independent``, ``dependent`` and
    ``condition`` (``loopdyn.methods.embedding.partition_at``, which ``ld.aggregation``
    calls: the numbers come from the method's kernel, this layer only assembles the
    graphs, so that it imports no method).
    """

    cuts, groups, aggregate_of = structure(model_arg(model))
    bodies = []
    for s, (members, parent, ix) in enumerate(groups):
        part = parts[s]
        bodies.append(
            AggregatedBody(
                index=s,
                bodies=members,
                body_names=tuple(model.body_names[i] for i in members),
                parent=parent,
                base_bodies=tuple(i for i in members if model.parent[i] == parent),
                closures=tuple(cuts[c].index for c in ix if cuts[c].kind == "closure"),
                couplings=tuple(cuts[c].index for c in ix if cuts[c].kind == "coupling"),
                coordinates=part.coordinates,
                rows=part.rows,
                rank=part.rank,
                independent=part.independent,
                dependent=part.dependent,
                condition=part.condition,
            )
        )
    names = model.body_names
    tree = spanning_tree(model)
    label = {}
    for s in bodies:
        for i in s.bodies:
            label[names[i]] = f"𝒮{s.index}"
    agg = _contract(tree, label)
    for s in bodies:
        agg.nodes[f"𝒮{s.index}"]["bodies"] = s.body_names
    dof = sum(int(model.topo[i, 5]) for i in range(model.nbodies) if aggregate_of[i] < 0) + sum(
        s.dof for s in bodies
    )
    return Aggregation(
        model, cuts, tuple(bodies), aggregate_of, system_digraph(model), tree, agg, dof
    )


__all__ = [
    "AggregatedBody",
    "Aggregation",
    "CutEdge",
    "aggregated_tree",
    "aggregation_subgraph",
    "build_aggregation",
    "merge_subgraphs",
    "spanning_tree",
    "structure",
    "system_digraph",
]
