"""Hidden Markov model pieces shared by the sequence algorithms, vectorized with numpy.

Xu's thesis (2007, University of Waterloo), section 2.3: an HMM over
states ``0..k-1`` and symbols ``0..V-1`` scores a labeling ``y`` of a sequence ``x`` linearly,
``w . phi(x, y) = sum_t E[y_t, x_t] + sum_{t>=2} T[y_{t-1}, y_t]`` (2.42)-(2.45), with ``E`` the
emission weights (``k x V``) and ``T`` the transition weights (``k x k``). A probabilistic HMM is
the case ``E = log B``, ``T = log A`` plus the initial scores ``log pi``.

Sequences are held in a :class:`SequenceBatch`: the concatenation of all positions (``flat``) and,
for the recursions, buckets of sequences of similar length padded to a rectangle, so that Viterbi
and forward-backward run one numpy step per time index for a whole bucket at once. Lengths in a
bucket differ by less than a factor of two, which bounds the padding at half the work.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

# ---------------------------------------------------------------------------------------------
# Input: lists of integer sequences
# ---------------------------------------------------------------------------------------------

# Largest symbol: the vocabulary is max symbol + 1, and the emission weights and their work
# arrays hold states x vocabulary entries, so a huge symbol id would allocate gigabytes.
MAX_SYMBOL = 999_999


def as_symbol_sequences(sequences, *, name: str = "sequences") -> list[np.ndarray]:
    """Validate a list of 1-D non-negative integer sequences; errors say what to fix."""
    if isinstance(sequences, np.ndarray) and sequences.dtype != object:
        if sequences.ndim != 2:
            raise ValueError(f"{name} must be a list of 1-D integer sequences")
        sequences = list(sequences)
    if isinstance(sequences, str | bytes) or not isinstance(sequences, Sequence | np.ndarray):
        raise ValueError(f"{name} must be a list of 1-D integer sequences")
    if len(sequences) == 0:
        raise ValueError(f"{name} is empty: give at least one sequence")
    result = []
    for i, seq in enumerate(sequences):
        if isinstance(seq, str | bytes):
            raise ValueError(f"{name}[{i}] is a string; each sequence must be a list of integers")
        try:
            array = np.asarray(seq)
        except ValueError:
            raise ValueError(f"{name}[{i}] is not a flat list of integers") from None
        if array.ndim != 1:
            raise ValueError(f"{name}[{i}] must be 1-D (a list of integer symbols)")
        if array.size == 0:
            raise ValueError(f"{name}[{i}] is empty; every sequence needs at least one symbol")
        if array.dtype == bool or array.dtype.kind not in "iuf":
            raise ValueError(f"{name}[{i}] must contain integer symbols (found {array.dtype})")
        if array.dtype.kind == "f" and (
            not np.all(np.isfinite(array)) or np.any(array != np.round(array))
        ):
            raise ValueError(f"{name}[{i}] must contain integer symbols (found non-integers)")
        if array.min() < 0:
            raise ValueError(f"{name}[{i}] contains negative symbols; symbols are 0, 1, ..., V-1")
        if array.max() > MAX_SYMBOL:
            raise ValueError(
                f"{name}[{i}] contains symbol {int(array.max())}, above {MAX_SYMBOL:,}: the "
                "vocabulary 0..V-1 sizes the emission weights; re-index the symbols to 0, 1, ..."
            )
        result.append(array.astype(np.int64))
    return result


# ---------------------------------------------------------------------------------------------
# Batches of sequences
# ---------------------------------------------------------------------------------------------


@dataclass
class _Bucket:
    index: np.ndarray  # which sequences
    lengths: np.ndarray  # their lengths
    positions: np.ndarray  # (b, L) flat positions, padded with the sentinel p1


class SequenceBatch:
    """All positions of a list of sequences, flat, plus length buckets for the recursions.

    Attributes
    ----------
    flat : ndarray (p1,)
        Symbols of all sequences, concatenated.
    offsets : ndarray (n + 1,)
        Sequence ``i`` occupies ``flat[offsets[i]:offsets[i + 1]]``.
    prev, cur : ndarray (p2,)
        Flat indices of the two positions of every adjacent pair ``(t - 1, t)``.
    """

    def __init__(self, sequences: list[np.ndarray]):
        self.lengths = np.array([len(s) for s in sequences], dtype=np.int64)
        self.offsets = np.concatenate(([0], np.cumsum(self.lengths)))
        self.flat = np.concatenate(sequences).astype(np.int64)
        self.n_positions = int(self.flat.size)
        starts = np.zeros(self.n_positions, dtype=bool)
        starts[self.offsets[:-1]] = True
        self.cur = np.flatnonzero(~starts)
        self.prev = self.cur - 1
        self.first = self.offsets[:-1]
        self.last = self.offsets[1:] - 1
        self.sequence_of = np.repeat(np.arange(self.lengths.size), self.lengths)
        self.buckets = []
        octave = np.floor(np.log2(self.lengths)).astype(np.int64)
        for level in np.unique(octave):
            index = np.flatnonzero(octave == level)
            lengths = self.lengths[index]
            width = int(lengths.max())
            steps = np.arange(width)
            positions = self.offsets[index][:, None] + steps[None, :]
            positions = np.where(steps[None, :] < lengths[:, None], positions, self.n_positions)
            self.buckets.append(_Bucket(index, lengths, positions))

    @property
    def n_sequences(self) -> int:
        return int(self.lengths.size)

    def split(self, flat_values: np.ndarray) -> list[np.ndarray]:
        """Per-sequence pieces of a flat per-position array."""
        return [flat_values[a:b] for a, b in zip(self.offsets[:-1], self.offsets[1:], strict=True)]


def emission_scores(batch: SequenceBatch, emission: np.ndarray) -> np.ndarray:
    """``(p1, k)`` node scores ``E[:, x_t]`` of every position."""
    return np.ascontiguousarray(emission[:, batch.flat].T)


# ---------------------------------------------------------------------------------------------
# Viterbi (max-sum) decoding
# ---------------------------------------------------------------------------------------------


def viterbi(
    batch: SequenceBatch,
    node: np.ndarray,
    transition: np.ndarray,
    start: np.ndarray | None = None,
) -> np.ndarray:
    """Best labeling ``argmax_y sum_t node[t, y_t] + sum_t T[y_{t-1}, y_t] (+ start[y_1])``.

    ``node`` is ``(p1, k)``: emission scores plus whatever the caller adds (Hamming loss for
    loss-augmented decoding, class-balance offsets). Returns the flat ``(p1,)`` state path.
    """
    k = node.shape[1]
    padded_node = np.vstack((node, np.zeros((1, k))))
    path = np.empty(batch.n_positions, dtype=np.int64)
    for bucket in batch.buckets:
        scores = padded_node[bucket.positions]  # (b, L, k)
        b, width, _ = scores.shape
        delta = scores[:, 0, :] + (0.0 if start is None else start[None, :])
        back = np.zeros((b, width, k), dtype=np.int64)
        for t in range(1, width):
            candidates = delta[:, :, None] + transition[None, :, :]  # (b, prev, next)
            arg = candidates.argmax(axis=1)
            best = np.take_along_axis(candidates, arg[:, None, :], axis=1)[:, 0, :]
            active = (t < bucket.lengths)[:, None]
            delta = np.where(active, best + scores[:, t, :], delta)
            back[:, t, :] = arg
        rows = np.arange(b)
        local = np.zeros((b, width), dtype=np.int64)
        local[rows, bucket.lengths - 1] = delta.argmax(axis=1)
        for t in range(width - 1, 0, -1):
            active = t < bucket.lengths
            local[active, t - 1] = back[rows[active], t, local[active, t]]
        valid = bucket.positions < batch.n_positions
        path[bucket.positions[valid]] = local[valid]
    return path


def hamming_node_loss(labels: np.ndarray, n_states: int) -> np.ndarray:
    """``(p1, k)`` per-position Hamming loss ``1[u != y_t]`` of relabeling to ``u``."""
    loss = np.ones((labels.size, n_states))
    loss[np.arange(labels.size), labels] = 0.0
    return loss


def loss_augmented_viterbi(
    batch: SequenceBatch,
    emission: np.ndarray,
    transition: np.ndarray,
    labels: np.ndarray,
    loss_weight: np.ndarray | float = 1.0,
) -> np.ndarray:
    """``argmax_u Delta(u, y) + w . phi(x, u)`` per sequence, with the Hamming loss ``Delta``.

    This is the separation oracle of the structured hinge loss (5.1): the most violated
    relabeling of every sequence.
    """
    node = emission_scores(batch, emission) + loss_weight * hamming_node_loss(
        labels, emission.shape[0]
    )
    return viterbi(batch, node, transition)


def feature_counts(batch: SequenceBatch, labels: np.ndarray, n_states: int, n_symbols: int):
    """``phi(x, y)`` summed over all sequences (2.45): emission ``(k, V)`` and transition
    ``(k, k)`` counts."""
    emission = np.bincount(
        labels * n_symbols + batch.flat, minlength=n_states * n_symbols
    ).reshape(n_states, n_symbols)
    transition = np.bincount(
        labels[batch.prev] * n_states + labels[batch.cur], minlength=n_states * n_states
    ).reshape(n_states, n_states)
    return emission.astype(np.float64), transition.astype(np.float64)


def sequence_scores(
    batch: SequenceBatch, emission: np.ndarray, transition: np.ndarray, labels: np.ndarray
) -> np.ndarray:
    """``w . phi(x_i, y_i)`` of every sequence, ``(n,)``."""
    per_position = emission[labels, batch.flat]
    pair = np.zeros(batch.n_positions)
    pair[batch.cur] = transition[labels[batch.prev], labels[batch.cur]]
    return np.bincount(batch.sequence_of, weights=per_position + pair,
                       minlength=batch.n_sequences)


# ---------------------------------------------------------------------------------------------
# Forward-backward and Baum-Welch (section 2.3.3, (2.50)-(2.55))
# ---------------------------------------------------------------------------------------------


def forward_backward(
    batch: SequenceBatch, start: np.ndarray, A: np.ndarray, B: np.ndarray
) -> tuple[np.ndarray, np.ndarray, float]:
    """Posteriors of a probabilistic HMM with scaled recursions.

    Returns ``gamma`` ``(p1, k)`` (2.50), the expected transition counts ``sum_t xi_t``
    ``(k, k)`` (2.51), and the log-likelihood ``sum_i log p(x_i)``.
    """
    k = A.shape[0]
    likelihood = np.vstack((B[:, batch.flat].T, np.ones((1, k))))
    gamma = np.zeros((batch.n_positions + 1, k))
    xi_sum = np.zeros((k, k))
    loglik = 0.0
    for bucket in batch.buckets:
        obs = likelihood[bucket.positions]  # (b, L, k)
        b, width, _ = obs.shape
        active = np.arange(width)[None, :] < bucket.lengths[:, None]  # (b, L)
        alpha = np.zeros((b, width, k))
        scale = np.ones((b, width))
        a = start[None, :] * obs[:, 0, :]
        scale[:, 0] = a.sum(axis=1)
        alpha[:, 0] = a / scale[:, 0, None]
        for t in range(1, width):
            a = (alpha[:, t - 1] @ A) * obs[:, t, :]
            s = np.where(active[:, t], a.sum(axis=1), 1.0)
            scale[:, t] = s
            alpha[:, t] = np.where(active[:, t, None], a / s[:, None], alpha[:, t - 1])
        loglik += float(np.log(scale).sum())
        beta = np.ones((b, width, k))
        for t in range(width - 2, -1, -1):
            step = t + 1 < bucket.lengths  # position t + 1 exists
            nxt = (obs[:, t + 1, :] * beta[:, t + 1]) @ A.T / scale[:, t + 1, None]
            beta[:, t] = np.where(step[:, None], nxt, 1.0)
            contrib = (
                alpha[:, t, :, None] * A[None] * (obs[:, t + 1, :] * beta[:, t + 1])[:, None, :]
                / scale[:, t + 1, None, None]
            )
            xi_sum += contrib[step].sum(axis=0)
        post = alpha * beta
        post /= post.sum(axis=2, keepdims=True)
        gamma[bucket.positions[active]] = post[active]
    return gamma[:-1], xi_sum, loglik


@dataclass
class HMMParameters:
    """A probabilistic HMM ``theta = (pi, A, B)`` (section 2.3.1) and its log-likelihood."""

    start: np.ndarray
    transition: np.ndarray
    emission: np.ndarray
    loglik: float

    def decode(self, batch: SequenceBatch) -> np.ndarray:
        with np.errstate(divide="ignore"):
            node = np.log(self.emission[:, batch.flat].T)
            return viterbi(batch, node, np.log(self.transition), np.log(self.start))


def baum_welch(
    batch: SequenceBatch,
    n_states: int,
    n_symbols: int,
    *,
    rng: np.random.RandomState,
    max_iter: int = 100,
    tol: float = 1e-4,
    smoothing: float = 1e-6,
) -> HMMParameters:
    """One EM run from random parameters: E-step (2.50)-(2.52), M-step (2.53)-(2.55)."""
    start = rng.dirichlet(np.ones(n_states))
    A = rng.dirichlet(np.ones(n_states), size=n_states)
    B = rng.dirichlet(np.ones(n_symbols), size=n_states)
    previous = -np.inf
    loglik = -np.inf
    for _ in range(max_iter):
        gamma, xi_sum, loglik = forward_backward(batch, start, A, B)
        start = gamma[batch.first].sum(axis=0) + smoothing
        start /= start.sum()
        A = xi_sum + smoothing
        A /= A.sum(axis=1, keepdims=True)
        B = np.zeros((n_states, n_symbols))
        for state in range(n_states):
            B[state] = np.bincount(batch.flat, weights=gamma[:, state], minlength=n_symbols)
        B += smoothing
        B /= B.sum(axis=1, keepdims=True)
        if loglik - previous < tol * max(1.0, abs(loglik)):
            break
        previous = loglik
    return HMMParameters(start, A, B, loglik)
