"""shared.metrics: FLOPs/MFU against the worked numbers of perf_anchors.md §3.4, the JSONL + TensorBoard writer
(including resume truncation) and the progress bar."""
import glob
import json
import io
import logging
import os
import struct
import sys

import pytest

from shared.config.base import model_config
from shared.metrics import (MetricsWriter, ProgressBar, mfu, mfu_on_devices, peak_flops_per_device, read_metrics,
                            training_flops_per_token, training_flops_per_token_palm)
from shared.metrics import writer as writer_module


def model(**shape):
    cfg = model_config()
    cfg.update(shape)
    return cfg


# perf_anchors.md §3.4 (tied embeddings, SwiGLU, causal).
SIZES = {
    "25M": model(d_model=384, n_layers=8, n_heads=6, n_kv_heads=6, head_dim=64, d_ff=1024, vocab_size=32768),
    "125M": model(d_model=768, n_layers=12, n_heads=12, n_kv_heads=12, head_dim=64, d_ff=2048, vocab_size=50304),
    "0.5B": model(d_model=896, n_layers=24, n_heads=14, n_kv_heads=2, head_dim=64, d_ff=4864, vocab_size=151936,
                  qkv_bias=True),
}


@pytest.mark.parametrize("size,gflops_1024,gflops_2048",
                         [("25M", 0.179, 0.198), ("125M", 0.798, 0.855), ("0.5B", 3.096, 3.228)])
def test_flops_per_token_match_worked_numbers(size, gflops_1024, gflops_2048):
    assert training_flops_per_token(SIZES[size], 2048) / 1e9 == pytest.approx(gflops_2048, rel=5e-3)
    assert training_flops_per_token(SIZES[size], 1024) / 1e9 == pytest.approx(gflops_1024, rel=5e-3)


def test_flops_variants_by_hand():
    cfg = SIZES["125M"]
    L, D, F, H, Dh, S = 12, 768, 2048, 12, 64, 2048
    causal = training_flops_per_token(cfg, S)
    # PaLM: attention not halved (§3.3: 0.855 vs 0.968 GFLOP/token for this model).
    assert training_flops_per_token_palm(cfg, S) / 1e9 == pytest.approx(0.968, rel=5e-3)
    assert training_flops_per_token_palm(cfg, S) - causal == pytest.approx(3 * L * 2 * S * H * Dh)
    bidirectional = model(**{**cfg.to_dict(), "causal": False})
    assert training_flops_per_token(bidirectional, S) - causal == pytest.approx(3 * L * 2 * S * H * Dh)
    gelu = model(**{**cfg.to_dict(), "mlp": "gelu"})  # one activation matrix fewer: 3 × L × 2·D·F
    assert causal - training_flops_per_token(gelu, S) == pytest.approx(3 * L * 2 * D * F)
    assert training_flops_per_token(dict(cfg.to_dict()), S) == causal  # plain dicts work too
    with pytest.raises(ValueError, match="model.mlp='relu2'"):
        training_flops_per_token(model(mlp="relu2"), S)
    with pytest.raises(ValueError, match="model.d_ff"):
        training_flops_per_token({k: v for k, v in cfg.to_dict().items() if k != "d_ff"}, S)


def test_peak_flops_and_mfu():
    expected = {"NVIDIA H100 80GB HBM3": 989e12, "NVIDIA H200": 989e12, "NVIDIA A100-SXM4-80GB": 312e12,
                "TPU v4": 275e12, "TPU v5 lite": 197e12, "TPU v5e": 197e12, "TPU v5p": 459e12, "TPU v5": 459e12,
                "TPU v6 lite": 918e12, "TPU v6e": 918e12, "cpu": None, "TFRT_CPU_0": None}
    assert {kind: peak_flops_per_device(kind) for kind in expected} == expected
    # §0: 125M at seq 2048, 463k tok/s ≈ 40 % MFU of 989 TFLOP/s.
    flops = training_flops_per_token(SIZES["125M"], 2048)
    assert mfu(463e3, flops, 989e12) == pytest.approx(463e3 * flops / 989e12) == pytest.approx(0.40, abs=0.005)
    assert mfu(1e6, flops, None) is None


def test_mfu_on_devices_divides_by_every_devices_peak():
    flops = training_flops_per_token(SIZES["125M"], 2048)
    # 4 H100s at 4 x 463k tok/s: 40 % each, not 160 % (one device's peak under the step of four).
    assert mfu_on_devices(4 * 463e3, flops, 989e12, 4) == pytest.approx(4 * 463e3 * flops / (4 * 989e12))
    assert mfu_on_devices(4 * 463e3, flops, 989e12, 4) == pytest.approx(mfu(463e3, flops, 989e12))
    assert mfu_on_devices(463e3, flops, 989e12, 1) == mfu(463e3, flops, 989e12)
    assert mfu_on_devices(1e6, flops, None, 8) is None
    with pytest.raises(ValueError, match="num_devices"):
        mfu_on_devices(1e6, flops, 989e12, 0)


def test_trainer_logs_mfu_over_all_8_devices(tmp_path, monkeypatch):
    """A run sharded over the 8 fake CPU devices logs perf/mfu = tokens/s x FLOPs/token / (8 x peak), with a fake
    per-device peak (CPUs have none), checked against a hand computation from the logged tokens/s."""
    import jax

    import shared.builtin  # noqa: F401  (registries: the stdlib data source, byte tokenizer)
    from shared.config.base import base_config
    from shared.data import build_tokenizer, make_train_iterator
    from shared.train import trainer as trainer_module

    assert jax.device_count() == 8
    fake_peak = 2.5e9  # FLOP/s per device
    monkeypatch.setattr(trainer_module, "peak_flops_per_device", lambda kind: fake_peak)
    c = base_config()
    c.model.update(vocab_size=384, d_model=32, n_layers=2, n_heads=4, n_kv_heads=2, head_dim=8, d_ff=64,
                   dtype="float32", remat="none")
    c.data.seq_len, c.data.max_docs = 32, 20
    c.train.update(steps=3, batch_size=8, log_every=1, eval_every=1000, eval_batches=0, checkpoint_every=100,
                   progress=False, async_checkpoint=False)
    c.optim.warmup_steps = 1
    c.mesh.preset = "cpu_8"
    trainer = trainer_module.Trainer(c, str(tmp_path / "run"))
    assert trainer.mesh.size == 8 and dict(trainer.mesh.shape) == {"data": 2, "fsdp": 2, "tensor": 2}
    tokenizer = build_tokenizer(c.data, None, c.model.vocab_size)
    trainer.fit(make_train_iterator(c, tokenizer, local_batch_size=c.train.batch_size))
    trainer.close()
    rows = [r for r in read_metrics(str(tmp_path / "run")) if "perf/mfu" in r]
    assert len(rows) == 3
    flops_per_token = training_flops_per_token(c.model, 32)
    for row in rows:
        by_hand = row["perf/tokens_per_s"] * flops_per_token / (8 * fake_peak)
        assert row["perf/mfu"] == pytest.approx(by_hand, rel=1e-9)
        assert row["perf/mfu"] == pytest.approx(mfu(row["perf/tokens_per_s"] / 8, flops_per_token, fake_peak))


# -- TensorBoard event files, read back without tensorflow -------------------------------------------------
def read_events(tb_dir):
    from tensorboardX.proto.event_pb2 import Event

    events = []
    for path in sorted(glob.glob(os.path.join(tb_dir, "events.out.tfevents.*"))):
        data = open(path, "rb").read()
        offset = 0
        while offset < len(data):  # TFRecord: u64 length, u32 crc, payload, u32 crc
            (length,) = struct.unpack("<Q", data[offset:offset + 8])
            event = Event()
            event.ParseFromString(data[offset + 12:offset + 12 + length])
            events.append(event)
            offset += 12 + length + 4
    return events


def scalars(events):
    return [(e.step, v.tag, round(v.simple_value, 5)) for e in events for v in e.summary.value]


def without_time(records):
    return [{k: v for k, v in r.items() if k != "time"} for r in records]


def test_metrics_writer_jsonl_and_tensorboard(tmp_path):
    with MetricsWriter(str(tmp_path)) as writer:
        for step in (1, 2, 3):
            writer.write(step, {"train/loss": 4.0 - step, "lr": 1e-3 * step, "note": "text is jsonl-only"})
    records = read_metrics(str(tmp_path))
    assert without_time(records) == [{"step": s, "train/loss": 4.0 - s, "lr": 1e-3 * s, "note": "text is jsonl-only"}
                                     for s in (1, 2, 3)]
    assert all(isinstance(r["time"], float) for r in records)
    assert sorted(scalars(read_events(str(tmp_path / "tb")))) == sorted(
        [(s, "train/loss", 4.0 - s) for s in (1, 2, 3)] + [(s, "lr", round(1e-3 * s, 5)) for s in (1, 2, 3)])


def test_metrics_writer_resume_matches_uninterrupted_run(tmp_path):
    def log(writer, steps):
        for step in steps:
            writer.write(step, {"train/loss": 10.0 / step})

    with MetricsWriter(str(tmp_path / "straight")) as writer:
        log(writer, range(1, 11))
    # Interrupted after step 7 (and killed mid-line); the checkpoint is at step 5, so the run resumes at 6.
    with MetricsWriter(str(tmp_path / "resumed")) as writer:
        log(writer, range(1, 8))
    with open(tmp_path / "resumed" / "metrics.jsonl", "a") as f:
        f.write('{"step": 8, "train/lo')
    with MetricsWriter(str(tmp_path / "resumed")) as writer:
        assert writer.truncate_after(6) == 3  # steps 6, 7 and the partial line
        log(writer, range(6, 11))
    assert without_time(read_metrics(str(tmp_path / "resumed"))) == \
        without_time(read_metrics(str(tmp_path / "straight")))
    # TensorBoard: the resumed writer records purge step 6, which hides the stale steps 6 and 7.
    events = read_events(str(tmp_path / "resumed" / "tb"))
    assert any(e.step == 6 and e.HasField("session_log") for e in events)

    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "metrics.jsonl").write_text('{"step": 1}\nnot json\n{"step": 2}\n')
    with pytest.raises(ValueError, match="metrics.jsonl:2"):
        MetricsWriter(str(tmp_path / "bad")).truncate_after(1)


def test_resume_drops_rows_a_second_writer_repeated(tmp_path):
    """Two launches that once wrote one workdir at once left steps 2-4 twice; a resume keeps each row once (a step's
    train row and its eval row are different rows)."""
    path = tmp_path / "metrics.jsonl"
    rows = [{"step": s, "time": t, "train/loss": 1.0 / s} for t, s in enumerate([1, 2, 3, 2, 3, 4, 4])]
    rows.insert(3, {"step": 3, "time": 0.5, "eval/loss": 0.3})
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with MetricsWriter(str(tmp_path)) as writer:
        assert writer.truncate_after(5) == 3
    kept = read_metrics(str(tmp_path))
    assert [(r["step"], sorted(r)) for r in kept] == [
        (1, ["step", "time", "train/loss"]), (2, ["step", "time", "train/loss"]), (3, ["step", "time", "train/loss"]),
        (3, ["eval/loss", "step", "time"]), (4, ["step", "time", "train/loss"])]


def test_metrics_writer_disabled_and_without_tensorboard(tmp_path, monkeypatch, caplog):
    writer = MetricsWriter(str(tmp_path / "off"), enabled=False)
    writer.write(1, {"loss": 1.0})
    writer.truncate_after(0)
    writer.close()
    assert not (tmp_path / "off").exists()

    monkeypatch.setitem(sys.modules, "tensorboardX", None)  # makes `import tensorboardX` fail
    monkeypatch.setattr(writer_module, "_warned_no_tensorboard", False)
    with caplog.at_level(logging.WARNING):
        for name in ("a", "b"):
            with MetricsWriter(str(tmp_path / name)) as writer:
                writer.write(1, {"loss": 1.5})
                writer.write(2, {"loss": float("nan")})
    assert [r["loss"] for r in read_metrics(str(tmp_path / "b"))] == [1.5, "nan"]
    assert not (tmp_path / "b" / "tb").exists()
    assert sum("tensorboardX is not installed" in r.message for r in caplog.records) == 1


class FakeClock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


class TtyStream(io.StringIO):
    def isatty(self):
        return True


def test_progress_bar_plain_lines_for_logs():
    stream, clock = io.StringIO(), FakeClock()
    bar = ProgressBar(10, initial_step=0, stream=stream, every=3, clock=clock)
    for step in range(1, 6):
        bar.update(step, loss=3.0 / step, tokens_per_s=123_456.0, mfu=0.4123, lr=1e-3)
        clock.now += 5.0
    bar.close()
    lines = stream.getvalue().splitlines()
    # Updates 1 and 3 print; close prints the last state (step 5).
    assert [line.split(" [")[0] for line in lines] == ["step 1/10", "step 3/10", "step 5/10"]
    assert "\r" not in stream.getvalue()
    last = lines[-1]
    assert "loss 0.6000" in last and "123.5k tok/s" in last and "MFU 41.2%" in last and "lr 0.001" in last
    # 4 steps in 20 s since the first update: 5 steps left take 25 s.
    assert last.endswith("ETA 00:25") and "50%" in last and "[##########----------]" in last
    assert lines[0].endswith("ETA ?")


def test_progress_bar_tty_redraws_one_line():
    stream, clock = TtyStream(), FakeClock()
    bar = ProgressBar(4, initial_step=2, stream=stream, clock=clock)
    bar.update(3, loss=1.0)
    clock.now += 1.0
    bar.update(4, loss=0.5)
    bar.close()
    text = stream.getvalue()
    assert text.count("\r") == 2 and text.endswith("\n") and text.count("\n") == 1
    assert "step 4/4" in text and "ETA 00:00" in text

    # a message (an eval line) stands on a line of its own; the bar is redrawn below it
    stream = TtyStream()
    bar = ProgressBar(4, stream=stream, clock=clock)
    bar.update(1, loss=2.0)
    bar.message("[eval] step 1: loss 2")
    bar.close()
    lines = [line.split("\r")[-1].strip() for line in stream.getvalue().split("\n")]
    assert "[eval] step 1: loss 2" in lines and lines[-2].startswith("step 1/4")

    # in a log (no terminal) the message does not make close() print the bar's last line again
    log = io.StringIO()
    bar = ProgressBar(1, stream=log, clock=clock)
    bar.update(1, loss=2.0)
    bar.message("[eval] step 1: loss 2")
    bar.close()
    assert [line.split(" [")[0] for line in log.getvalue().splitlines()] == ["step 1/1", "[eval] step 1: loss 2"]

    quiet = io.StringIO()
    off = ProgressBar(4, stream=quiet, enabled=False)
    off.update(1, loss=1.0)
    off.close()
    assert quiet.getvalue() == ""


def test_progress_bar_says_it_started_before_the_first_step_compiles():
    stream = io.StringIO()
    bar = ProgressBar(300, initial_step=100, stream=stream)
    bar.start()
    assert stream.getvalue() == "step 100/300: starting (the first step compiles; progress lines follow)\n"
    done, quiet = ProgressBar(3, initial_step=3, stream=io.StringIO()), ProgressBar(3, enabled=False, stream=stream)
    done.start(), quiet.start()  # nothing left to run / progress off: no line
    assert done.stream.getvalue() == "" and stream.getvalue().count("\n") == 1
