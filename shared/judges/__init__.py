"""Model-backed rewards and judges: a layer above the RL loop (they may build models and sample from them),
below the launcher. A judge gets what it needs (a run loader, a sampler, an HTTP endpoint) passed in.

Importing this package registers the rewards model/scalar_rm and model/pairwise_judge.
"""
from shared.judges.pairwise import (  # noqa: F401
    JudgeError, OpenAIJudge, PairwiseJudge, PairwiseJudgeReward, ScalarRMJudge, compare_batch, parse_verdict,
)
from shared.judges.scalar_rm import ScalarRewardModel  # noqa: F401
