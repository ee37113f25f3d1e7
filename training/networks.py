"""MuscleVAE networks (appendix B.1) in torch, laid out as the numpy evaluator reads them.

Every network is an ELU MLP with a linear last layer; weights are stored (in, out) so the
export copies them as they are (engine.control.policy.mlp / moe evaluate the same layers).
"""
from __future__ import annotations

import math

import torch
from torch import nn


def _init(W: torch.Tensor, b: torch.Tensor, fan_in: int, gain: float = 1.0) -> None:
    bound = gain / math.sqrt(fan_in)
    with torch.no_grad():
        W.uniform_(-bound, bound)
        b.uniform_(-bound, bound)


def _drop(x: torch.Tensor, p: float, training: bool) -> torch.Tensor:
    return torch.nn.functional.dropout(x, p, training) if p > 0 and training else x


class MLP(nn.Module):
    """in -> hidden... (ELU) -> out (linear). `last_gain` scales the last layer's initial weights;
    `dropout` zeroes that fraction of each hidden layer's units while training (inverted dropout:
    the evaluation, and the numpy export, use every unit as they are)."""

    def __init__(self, n_in: int, hidden: list[int], n_out: int, last_gain: float = 1.0, dropout: float = 0.0):
        super().__init__()
        self.dropout = float(dropout)
        sizes = [n_in, *hidden, n_out]
        self.W = nn.ParameterList()
        self.b = nn.ParameterList()
        for i in range(len(sizes) - 1):
            W = nn.Parameter(torch.empty(sizes[i], sizes[i + 1]))
            b = nn.Parameter(torch.empty(sizes[i + 1]))
            _init(W, b, sizes[i], last_gain if i == len(sizes) - 2 else 1.0)
            self.W.append(W)
            self.b.append(b)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n = len(self.W)
        for i in range(n):
            x = x @ self.W[i] + self.b[i]
            if i < n - 1:
                x = _drop(torch.nn.functional.elu(x), self.dropout, self.training)
        return x

    def export(self, prefix: str) -> dict:
        return {**{f"{prefix}.{i}.W": W.detach().cpu().numpy() for i, W in enumerate(self.W)},
                **{f"{prefix}.{i}.b": b.detach().cpu().numpy() for i, b in enumerate(self.b)}}


class MoEPolicy(nn.Module):
    """Mixture of experts mu_pi(s, z) (appendix B.1): a gate MLP gives softmax weights over E
    experts; each expert layer's weights are blended with them (per sample)."""

    def __init__(self, n_in: int, hidden: list[int], n_out: int, experts: int, gate_hidden: list[int],
                 last_gain: float = 0.1, dropout: float = 0.0):
        super().__init__()
        self.dropout = float(dropout)
        self.gate = MLP(n_in, gate_hidden, experts)
        sizes = [n_in, *hidden, n_out]
        self.W = nn.ParameterList()
        self.b = nn.ParameterList()
        for i in range(len(sizes) - 1):
            W = nn.Parameter(torch.empty(experts, sizes[i], sizes[i + 1]))
            b = nn.Parameter(torch.empty(experts, sizes[i + 1]))
            _init(W, b, sizes[i], last_gain if i == len(sizes) - 2 else 1.0)
            self.W.append(W)
            self.b.append(b)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        g = torch.softmax(self.gate(x), -1)  # (..., E)
        h = x
        n = len(self.W)
        for i in range(n):
            y = torch.einsum("...i,eio->...eo", h, self.W[i]) + self.b[i]
            h = torch.einsum("...e,...eo->...o", g, y)
            if i < n - 1:
                h = _drop(torch.nn.functional.elu(h), self.dropout, self.training)
        return h

    def export(self, prefix: str) -> dict:
        out = self.gate.export(f"{prefix}.gate")
        out.update({f"{prefix}.expert.{i}.W": W.detach().cpu().numpy() for i, W in enumerate(self.W)})
        out.update({f"{prefix}.expert.{i}.b": b.detach().cpu().numpy() for i, b in enumerate(self.b)})
        return out


class VAE(nn.Module):
    """Prior mu_p(s), posterior offset mu_q(s, s~') (eq. 38-40) and the MoE policy (eq. 42)."""

    def __init__(self, S: int, T: int, M: int, latent: int, hidden: list[int], policy_hidden: list[int],
                 experts: int, gate_hidden: list[int], dropout: float = 0.0):
        super().__init__()
        self.prior = MLP(S, hidden, latent, dropout=dropout)
        self.posterior = MLP(S + T, hidden, latent, last_gain=0.1, dropout=dropout)
        self.policy = MoEPolicy(S + latent, policy_hidden, M, experts, gate_hidden, dropout=dropout)

    def export(self) -> dict:
        return {**self.prior.export("prior"), **self.posterior.export("posterior"), **self.policy.export("policy")}


class WorldModel(nn.Module):
    """omega(s, a) (appendix B.1): a deterministic MLP predicting each body's change of linear
    and angular velocity over one policy step, in the root's heading frame, from the state,
    the action and the muscle wrench the torch muscle step computes for them."""

    def __init__(self, S: int, M: int, B: int, hidden: list[int]):
        super().__init__()
        self.net = MLP(S + M + 6 * B, hidden, 6 * B, last_gain=0.1)

    def forward(self, x):
        return self.net(x)
