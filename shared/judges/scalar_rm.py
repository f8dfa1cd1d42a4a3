"""A scalar-head reward model from one of our runs, called like a reward function.

    model/scalar_rm   ("model/scalar_rm", 1.0, {"path": "runs/rm"}): the RM's score of prompt + completion

`ScalarRewardModel` gets the run's model from a loader (default `shared.train.load.load_run`: the run's
config.json decides the model, model.heads must include "scalar"; params from its latest checkpoint or a
params-only export), tokenizes `[bos] + prompt + completion` and returns the scalar head at the last real token
(last-token pooling). Batches are padded to `batch_size` rows and a power-of-two length, so only a few shapes
compile.
"""
from __future__ import annotations

import functools
from typing import Callable, Sequence

import numpy as np

from shared.rewards.core import register_reward_factory


def _bucket(length: int, cap: int, smallest: int = 16) -> int:
    size = smallest
    while size < length:
        size *= 2
    return min(size, cap)


def _require_scalar_head(path: str):
    def check(config):
        if "scalar" not in list(config.model.heads):
            raise ValueError(f"{path}: model.heads={list(config.model.heads)} has no 'scalar' head; a reward "
                             f"model needs heads including 'scalar'")
    return check


class ScalarRewardModel:
    """A scalar-head reward model; call it like a reward function or use `score`.

    loader(path, *, config, mesh, rules, mesh_preset, check) -> shared.train.load.LoadedRun (default load_run)."""

    def __init__(self, path: str, tokenizer=None, batch_size: int = 8, *, config=None, mesh=None, rules=None,
                 mesh_preset: str | None = None, max_length: int | None = None, add_bos: bool = True,
                 append_eos: bool = False, loader: Callable | None = None):
        from shared.data import build_tokenizer

        if loader is None:
            from shared.train.load import load_run as loader
        run = loader(path, config=config, mesh=mesh, rules=rules, mesh_preset=mesh_preset,
                     check=_require_scalar_head(path))
        self.path, self.config, self.batch_size = path, run.config, int(batch_size)
        self.params, self.graphdef, self.step = run.params, run.graphdef, run.step
        self.mesh, self.rules, self.attention = run.mesh, run.rules, run.attention
        self.max_length = int(max_length or run.config.model.max_seq_len)
        self.add_bos, self.append_eos = add_bos, append_eos
        # A model-only config carries the base schema's data section: the byte tokenizer unless tokenizer= is given.
        self.tokenizer = tokenizer or build_tokenizer(run.config.data, run.folder, run.config.model.vocab_size)

    def tokenize(self, prompt: str, completion: str) -> list[int]:
        tok = self.tokenizer
        bos = [tok.bos_id] if self.add_bos and tok.bos_id is not None else []
        ids = bos + list(tok.encode(prompt)) + list(tok.encode(completion))
        if self.append_eos:
            ids.append(tok.eos_id)
        if not ids:
            raise ValueError("ScalarRewardModel: empty prompt + completion and add_bos=False: nothing to score")
        if len(ids) > self.max_length:  # keep the end (the completion); keep bos in front
            ids = bos + ids[len(ids) - (self.max_length - len(bos)):]
        return ids

    def score(self, prompts: Sequence[str], completions: Sequence[str]) -> np.ndarray:
        """float32 [N]: the scalar head at each sequence's last real token."""
        if len(prompts) != len(completions):
            raise ValueError(f"ScalarRewardModel: {len(prompts)} prompts but {len(completions)} completions")
        from shared import sharding as sh

        sequences = [self.tokenize(p, c) for p, c in zip(prompts, completions)]
        pad = self.tokenizer.pad_id
        scores = []
        with sh.use_mesh(self.mesh, self.rules):
            for start in range(0, len(sequences), self.batch_size):
                chunk = sequences[start:start + self.batch_size]
                width = _bucket(max(len(s) for s in chunk), self.max_length)
                tokens = np.full((self.batch_size, width), pad, np.int32)
                last = np.zeros((self.batch_size,), np.int32)
                for row, ids in enumerate(chunk):
                    tokens[row, :len(ids)] = ids
                    last[row] = len(ids) - 1
                out = np.asarray(_scores_fn()(self.params, tokens, last, graphdef=self.graphdef,
                                              attention=self.attention))
                scores.append(out[:len(chunk)])
        return np.concatenate(scores) if scores else np.zeros((0,), np.float32)

    def __call__(self, prompts: Sequence[str], completions: Sequence[str], **columns) -> list[float]:
        return self.score(prompts, completions).tolist()


@functools.lru_cache(maxsize=1)
def _scores_fn():
    """The jitted scorer, built on first use so importing shared.judges does not import jax. graphdef is
    static, so equal models (every ScalarRewardModel of one run) share compiles."""
    import jax
    import jax.numpy as jnp
    from flax import nnx

    @functools.partial(jax.jit, static_argnames=("graphdef", "attention"))
    def last_token_scores(params, tokens, last_index, *, graphdef, attention):
        out = nnx.merge(graphdef, params)(tokens, attention=attention)
        return jnp.take_along_axis(out["scalar"], last_index[:, None], axis=1)[:, 0].astype(jnp.float32)

    return last_token_scores


@register_reward_factory("model/scalar_rm")
def make_scalar_rm(path: str, batch_size: int = 8, **options) -> ScalarRewardModel:
    """kwargs: path (training workdir or params export), batch_size, and ScalarRewardModel's options."""
    return ScalarRewardModel(path, batch_size=batch_size, **options)
