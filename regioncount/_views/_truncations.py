"""The networks cut after each layer or block, whose partitions a layered picture shows."""

from __future__ import annotations

import numpy as np

from ..networks import MLP, Maxout, Transformer, truncate

# ----------------------------------------------------------------------------------------------------
# truncations: the partition after each layer or block


def truncations(net) -> list[tuple[str, object]]:
    """``(label, network)`` for the network cut after each hidden layer (MLP, Maxout) or block
    (Transformer); the last entry is ``net`` itself.

    An MLP or Maxout network cut after layer ``l`` reads out layer ``l`` unchanged (identity readout), so
    its output 0 is unit 1 of that layer; a Transformer keeps its readout (:func:`networks.truncate`)."""
    out: list[tuple[str, object]]
    if isinstance(net, MLP):
        L = len(net.widths)
        out = []
        for l in range(1, L):
            n = net.widths[l - 1]
            out.append((f"layer {l}", MLP(net.weights[:l] + (np.eye(n),), net.biases[:l] + (np.zeros(n),))))
        out.append((f"layer {L}" if L else "affine", net))
        return out
    if isinstance(net, Maxout):
        L = len(net.widths)
        out = []
        for l in range(1, L):
            n = net.widths[l - 1]
            out.append((f"layer {l}", Maxout(net.weights[:l], net.biases[:l], np.eye(n), np.zeros(n))))
        out.append((f"layer {L}", net))
        return out
    if isinstance(net, Transformer):
        out = [(f"block {d}", truncate(net, d)) for d in range(1, net.depth)]
        out.append((f"block {net.depth}", net))
        return out
    return [("network", net)]
