"""bench/decode.py on CPU: its floors against perf_anchors section 4's own table, and the whole tool (workers,
JSON, markdown) on the tiny shape, so the GPU benchmark stays runnable between GPU sessions."""
import json
import subprocess
import sys

import pytest

from bench.decode import decode_floor, decode_step_floor, model_fields

from conftest import REPO_ROOT as ROOT  # noqa: E402


@pytest.mark.parametrize("shape,batch,step_us,tokens_per_s", [
    ("qwen0.5b", 1, 331, 3.0e3), ("125m", 1, 89, 11.3e3), ("qwen0.5b", 256, None, 296e3), ("125m", 256, None, 151e3)])
def test_step_floor_matches_perf_anchors_table(shape, batch, step_us, tokens_per_s):
    """perf_anchors section 4, "Bytes per step and tokens/s floors (H100, 3.0 TB/s)", context S = 512."""
    floor = decode_step_floor(model_fields(shape), batch, 512, 3.0e12, 790e12)
    assert floor["bound"] == "memory"
    if step_us is not None:
        assert floor["step_s"] * 1e6 == pytest.approx(step_us, abs=1)
    assert floor["tokens_per_s"] == pytest.approx(tokens_per_s, rel=0.01)


def test_end_to_end_floor_adds_the_prompt_pass_to_the_growing_steps():
    floor = decode_floor("qwen0.5b", 256, 128, 256, 3.0e12, 790e12)
    m = model_fields("qwen0.5b")
    steps = sum(decode_step_floor(m, 256, 128 + t + 1, 3.0e12, 790e12)["step_s"] for t in range(256))
    assert floor["growing_step_s"] == pytest.approx(steps / 256)
    assert 256 * 256 / floor["end_to_end_tokens_per_s"] == pytest.approx(floor["prefill_s"] + steps)
    # the prompt pass is compute-bound: 2 * tokens * layer params FLOPs (+ head, attention) at 790 TFLOP/s
    assert floor["prefill_s"] > 2 * 256 * 128 * 358e6 / 790e12
    assert floor["tokens_per_s"] < floor["growing_context_tokens_per_s"]   # S_max slots read > S_t slots


def test_tiny_run_writes_json_and_tables(tmp_path):
    out = tmp_path / "decode.json"
    subprocess.run([sys.executable, "-m", "bench.decode", "--shapes=tiny", "--batches=2", "--peers=",
                    "--param_dtypes=bfloat16", "--calls=1", f"--out={out}", "--compile_cache="],
                   cwd=ROOT, check=True, capture_output=True, timeout=300)
    payload = json.loads(out.read_text())
    ours = payload["decode"][0]["results"]["ours"]
    assert ours["status"] == "ok", ours
    run = ours["runs"]["bfloat16"]
    assert run["tokens_per_s"] == pytest.approx(2 * payload["args"]["new_tokens"] / run["call_s"])
    assert payload["device_limits"]["status"] == "ok" and payload["floor_limits"]["source"] == "constants"
    markdown = (tmp_path / "decode.md").read_text()
    assert "| tiny | 2 |" in markdown and "against floors at this device's own measured rates" in markdown


def test_grpo_prompts_are_padded_to_the_asked_length():
    from bench.decode import grpo_examples, prompt_bucket

    examples = grpo_examples(8, 0, 256)
    plain = grpo_examples(8, 0)
    assert all(len(e["prompt"].encode()) == 255 for e in examples)        # + BOS = 256 tokens
    assert [e["answer"] for e in examples] == [e["answer"] for e in plain]
    assert all(e["prompt"].endswith(p["prompt"]) for e, p in zip(examples, plain))
    assert prompt_bucket(256) == 256 and prompt_bucket(200) == 256
    with pytest.raises(ValueError, match="shorter than"):
        grpo_examples(2, 0, 4)


def test_tiny_grpo_row_times_every_phase(tmp_path):
    out = tmp_path / "grpo.json"
    subprocess.run([sys.executable, "-m", "bench.decode", "--shapes=tiny", "--grpo", "--skip_decode",
                    "--grpo_prompt_len=64", "--grpo_warmup=1", "--grpo_steps=1", "--grpo_micro_batch_tokens=128",
                    f"--out={out}", "--compile_cache="], cwd=ROOT, check=True, capture_output=True, timeout=300)
    row = json.loads(out.read_text())["grpo"][0]
    assert row["status"] == "ok", row
    assert row["prompt_bucket"] == 64 and row["prompt_lengths"] == [64, 64]
    assert row["micro_batch_tokens"] == 128 and row["rl_keys"]["micro_batch_tokens"] == 128
    step = row["steps"][-1]
    assert step["perf/step_s"] >= step["perf/rollout_and_reward_s"] + step["perf/update_s"]
    assert len(row["peak_mem_bytes_per_device"]) == row["local_device_count"]
