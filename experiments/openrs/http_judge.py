"""The OpenRS judge (shared/judges/rubric.py RubricJudge) on an OpenAI-compatible endpoint, over a pair set
(projects/openrs/judge_eval.py): E4 of ../shared/papers/openrs.md section 4 once an endpoint exists.

    JUDGE_BASE_URL=http://127.0.0.1:8000/v1 JUDGE_MODEL=Qwen/Qwen3-30B-A3B-Instruct-2507 \
        python -m shared.launch --config=experiments/openrs/http_judge.py --workdir=runs/openrs/hh_judge
    python -m shared.launch --config=experiments/openrs/http_judge.py:gsm8k --workdir=runs/openrs/gsm8k_judge \
        --config.openrs.base_url=http://127.0.0.1:8000/v1 --config.openrs.model=MODEL

Call settings are the reference's (spec 1.5): temperature 0, top_p 1, seed 1024, 8192 tokens, up to 5
regenerations of a reply whose JSON does not parse; transport retries with backoff (shared.judges.http.ChatClient).
The prompt folder (openrs.prompt_dir) holds meta_rubric.md and domains/<query_type>.md; the default is our own
short English meta-rubric (projects/openrs/prompts/). To use the released prompts, put them (their text, as
files) in a folder with that layout and pass --config.openrs.prompt_dir=FOLDER. No GPU here: the cost is the
endpoint's (2 judge calls per pair; about 2-4k prompt tokens each with the released meta-rubric).
The :smoke variant judges the embedded pairs; tests/test_rubric_http.py runs it against a local stub server.
"""
import os

import ml_collections

from shared.config.base import base_config

PROMPTS_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                           "projects", "openrs", "prompts")
VARIANTS = ("hh", "gsm8k", "smoke")


def get_config(arg=None):
    if arg not in (None, *VARIANTS):
        raise ValueError(f"experiments/openrs/http_judge.py: unknown variant {arg!r} (known: {', '.join(VARIANTS)})")
    c = base_config()
    c.project = "openrs"
    c.task = "openrs/judge_eval"
    c.mesh.preset = "cpu_1"
    c.openrs = ml_collections.ConfigDict({
        "pairs": "hh_harmless", "n_pairs": 200, "data_path": "", "query_type": "",
        "base_url": "", "model": "", "api_key_env": "OPENAI_API_KEY",   # "" -> $JUDGE_BASE_URL / $JUDGE_MODEL
        "timeout": 300.0, "retries": 10, "concurrency": 10,
        "temperature": 0.0, "top_p": 1.0, "judge_seed": 1024, "max_tokens": 8192, "json_retries": 5,
        "prompt_dir": PROMPTS_DIR, "weights": {"core": 5.0, "important": 2.0, "highlight": 1.0},
        "veto": True, "min_score": 0.0, "bidirectional": True, "gt_gate": False})
    if arg == "gsm8k":
        c.openrs.pairs, c.openrs.gt_gate = "gsm8k", True
    if arg == "smoke":
        c.openrs.pairs, c.openrs.n_pairs, c.openrs.gt_gate = "embedded", 0, True
        c.openrs.retries, c.openrs.timeout, c.openrs.max_tokens = 0, 10.0, 2048
    return c
