"""KV-cache reuse across turns vs a re-prefill of the whole history at every turn: wall time per batch of episodes
(after compilation) and context tokens run through a prefill, on a tiny random model.

    python -m shared.agent.measure_reuse [--turns 6] [--rows 16] [--d_model 64] [--layers 2]

The environment answers every policy turn with a fixed observation; both variants draw the same tokens (the same
keys), so the difference is only the prefill work: reuse feeds each observation once, re-prefill feeds the whole
history again at every turn (quadratic in the number of turns). README.md ("KV reuse vs re-prefill") has the numbers.
"""
from __future__ import annotations

import argparse
import dataclasses
import time

import jax
import numpy as np
from flax import nnx

from shared.agent.episodes import EpisodeSampler, ScriptedEnvironment, TurnParams
from shared.config.base import model_config
from shared.data import ByteTokenizer
from shared.model import build_model


def measure(turns: int = 6, rows: int = 16, d_model: int = 64, layers: int = 2, turn_tokens: int = 24,
            repeats: int = 3) -> dict:
    tok = ByteTokenizer()
    cfg = model_config()
    for key, value in dict(vocab_size=tok.vocab_size, d_model=d_model, n_layers=layers, n_heads=4, n_kv_heads=2,
                           head_dim=d_model // 4, d_ff=4 * d_model, dtype="float32", attention="xla", remat="none",
                           max_seq_len=4096).items():
        cfg[key] = value
    graphdef, params = nnx.split(build_model(cfg, seed=0))
    sampler = EpisodeSampler(graphdef, cfg, eos_id=-1, pad_id=tok.pad_id, tokenizer=tok)
    observation = "<information>Keloma had 532 buses in 2021.</information>"
    prompt = "Question: how many buses did Keloma have in 2021? Search first."
    buckets = tuple(64 * k for k in range(1, 64))
    reuse = TurnParams(max_turns=turns, max_turn_tokens=turn_tokens, temperature=1.0,
                       context_slots=turns * (64 + turn_tokens) + 64, chunk_buckets=buckets)
    out = {}
    for name, params_ in (("reuse", reuse), ("reprefill", dataclasses.replace(reuse, reuse_cache=False))):
        def run():
            envs = [ScriptedEnvironment(prompt, [observation] * turns) for _ in range(rows)]
            return sampler.run(params, envs, [None] * rows, params_, jax.random.key(0))

        episodes = run()   # compiles
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            run()
            times.append(time.perf_counter() - start)
        out[name] = {"seconds": float(np.median(times)), "episode_tokens": float(np.mean([len(e.prompt) + len(e.tokens)
                                                                                        for e in episodes]))}
    prompt_len = len(tok.encode(prompt)) + 1
    obs_len = len(tok.encode(observation))
    out["prefill_tokens_reuse"] = prompt_len + (turns - 1) * obs_len
    out["prefill_tokens_reprefill"] = sum(prompt_len + k * (turn_tokens + obs_len) for k in range(turns))
    out["speedup"] = out["reprefill"]["seconds"] / out["reuse"]["seconds"]
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=6)
    parser.add_argument("--rows", type=int, default=16)
    parser.add_argument("--d_model", type=int, default=64)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--turn_tokens", type=int, default=24)
    args = parser.parse_args()
    result = measure(args.turns, args.rows, args.d_model, args.layers, args.turn_tokens)
    print(result)


if __name__ == "__main__":
    main()
