"""Target-only decoding: y[0] from the prefill, then one single-token forward per token."""

from __future__ import annotations

from specbench.core.methods.base import Decoded, Model, Op, TargetOracle


def decode_target(oracle: TargetOracle, n_prompt: int) -> Decoded:
    ops = []
    while not oracle.done:
        depth = n_prompt + oracle.committed - 1
        _, committed = oracle.verify(())
        ops.append(Op(Model.TARGET, 1, depth, committed=committed))
    return Decoded(oracle.tokens(), tuple(ops))
