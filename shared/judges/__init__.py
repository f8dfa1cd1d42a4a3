"""Model-backed rewards and judges: a layer above the RL loop (they may build models and sample from them),
below the launcher. A judge gets what it needs (a run loader, a sampler, an HTTP endpoint) passed in.

  verdict.py     Verdict(pref, scores, critique, raw) and the parsers (JSON, score split, A/B tags)
  generative.py  the judge interface compare(prompts, a, b) -> list[Verdict]; mock, oracle, sampler and legacy
                 backends; SwapJudge and VotingJudge
  http.py        the OpenAI-compatible backend (ChatClient, HTTPJudge)
  rubric.py      OpenRS: rubric data model, JSON parsing, veto aggregation, bidirectional rule, RubricJudge
  pairwise.py    OpenAIJudge, ScalarRMJudge and the reward model/pairwise_judge
  scalar_rm.py   the reward model/scalar_rm
  skills.py      Skill-RM skill packages (SKILL.md front matter + resources index) and the ResourceRouter that
                 enforces each resource's allowed_setting, leakage level, family and the view / run budgets
  mam.py         ATP-Bench's multi-agent judge (MAM) of interleaved tool plans: precision / missed / quality roles
                 with split or full views, the aggregator (mam_aggregate), voting, function / chat / mock back-ends
  agent.py       the tool-calling judge agent (step / resource / sandbox budgets, forced finalisation, emergency
                 direct judge, fallback) over an OpenAI-compatible endpoint, our own policy or a script; also as a
                 shared.agent Environment

Importing this package registers the rewards model/scalar_rm and model/pairwise_judge.
"""
from shared.judges.generative import (  # noqa: F401
    GENERATIVE_TEMPLATE, GenerativeJudge, MockJudge, OracleJudge, ProbabilityJudge, SamplerJudge, SwapJudge,
    VotingJudge, as_generative, combine, wrap,
)
from shared.judges.http import ChatClient, HTTPJudge  # noqa: F401
from shared.judges.pairwise import (  # noqa: F401
    OpenAIJudge, PairwiseJudge, PairwiseJudgeReward, ScalarRMJudge, compare_batch, make_pairwise_judge,
)
from shared.judges.rubric import (  # noqa: F401
    Criterion, CriterionCompare, RubricJudge, RubricJudgment, RubricPrompts, aggregate, bidirectional,
    parse_rubric_judgment,
)
from shared.judges.scalar_rm import ScalarRewardModel  # noqa: F401
from shared.judges.verdict import (  # noqa: F401
    LABEL_CONTRACTS, JudgeError, Verdict, label_pref, make_parser, parse_json_verdict, parse_judgment, parse_label,
    parse_score_split, parse_scores, parse_tags, parse_verdict, prefs,
)
from shared.judges.skills import ResourceRefused, ResourceRouter, Skill, SkillError, load_skill  # noqa: F401
from shared.judges.agent import (  # noqa: F401
    AgentLimits, AgentReply, AgentResult, ChatBackend, JudgeAgent, JudgeAgentEnvironment, JudgeCase, ScriptedBackend,
    TextPolicyBackend, ToolCall,
)
from shared.judges.mam import (  # noqa: F401
    MAM_TEMPLATES, PRECISION_LABELS, CallContext, CallVerdict, ChatRoles, FunctionRoles, MamItem, MamJudge,
    MamJudgment, MissedRole, MissedVisual, MockRoles, PrecisionRole, QualityRole, RoleView, build_view, local_text,
    numbered_response,
)
from shared.judges.mam import aggregate as mam_aggregate  # noqa: F401  (rubric's aggregate keeps the plain name)
from shared.judges import rubric_format  # noqa: F401  (the GRM output format; registers genrm/format, genrm/accuracy)
