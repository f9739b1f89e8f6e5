"""Decision networks (DESIGN §9): a classifier with a final group max over its logits.

The argmax of the logits is the predicted class; as the last op of the program it is one
:class:`GroupMax` over all outputs, so its argmax digit (the last code entry of the readout token) is the
class, decided exactly by every engine like any other maxout unit. A single logit ``z`` is read as a
binary classifier: the group max runs over ``(0, z)``, so class 1 is ``z > 0``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from ._ops import Affine, GroupMax, Program, as_f64, walk_widths


@dataclasses.dataclass(frozen=True, eq=False)
class DecisionNet:
    """``base`` followed by the argmax of its logits; the output is the winning logit (width 1)."""

    base: Any

    @property
    def input_dim(self) -> int:
        return int(self.base.input_dim)

    @property
    def valid_box(self):
        return getattr(self.base, "valid_box", None)

    @property
    def classes(self) -> int:
        """Number of classes (2 for a single logit)."""
        n = _logits(self.base)
        return 2 if n == 1 else n

    def lower(self) -> Program:
        program = self.base if isinstance(self.base, Program) else self.base.lower()
        n = _logits(self.base)
        ops = list(program.ops)
        if n == 1:
            ops.append(Affine(as_f64(np.array([[0.0], [1.0]])), as_f64(np.zeros(2))))
        ops.append(GroupMax(max(n, 2)))
        return Program(tokens=program.tokens, input_dim=program.input_dim, ops=tuple(ops), out_token=program.out_token)


def _logits(net) -> int:
    program = net if isinstance(net, Program) else net.lower()
    w = walk_widths(program)
    return w[-1][2] if w else program.input_dim


def class_position(net: DecisionNet) -> int:
    """Index in the activation code of the predicted class: the final group max writes one digit per
    token, the last ``tokens`` entries of the code, and the class is the readout token's."""
    from ._ops import code_length

    program = net.lower()
    return code_length(program) - program.tokens + program.out_token
