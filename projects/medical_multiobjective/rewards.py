"""The five reward channels of the multi-objective assistant (medical_multiobjective.md D.1) as REWARDS entries
"medical_multiobjective/<channel>": shared/data/tasks/assistant.py's scorers under the reward contract, reading
the example columns hazard and answer. The task module is imported on the first call (it imports jax; the sweep
scheduler, which imports this package through the experiment files, must not)."""
from __future__ import annotations

from shared.registry import REWARDS

PREFIX = "medical_multiobjective/"
CHANNELS = ("correctness", "safety", "format", "answer_line", "brevity")   # = shared.data.tasks.assistant.CHANNELS


def channel_reward(channel: str):
    def reward(prompts, completions, *, hazard, answer, **_):
        from shared.data.tasks.assistant import SCORERS

        score = SCORERS[channel]
        return [score({"hazard": bool(hazard[i]), "answer": answer[i]}, completions[i]) for i in range(len(completions))]

    reward.__name__ = reward.__qualname__ = f"{channel}_reward"
    reward.__doc__ = f"The {channel} channel of rl/assistant (shared/data/tasks/assistant.py)."
    return reward


for _channel in CHANNELS:
    if PREFIX + _channel not in REWARDS:
        REWARDS.register(PREFIX + _channel, channel_reward(_channel))
