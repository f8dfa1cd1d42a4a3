"""Metrics: JSONL + TensorBoard writer (process 0), console progress bar, FLOPs per token and MFU (MaxText formula)."""
from shared.metrics.flops import (mfu, mfu_on_devices, peak_flops_per_device, training_flops_per_token,
                                  training_flops_per_token_palm)
from shared.metrics.progress import ProgressBar
from shared.metrics.writer import METRICS_FILE, MetricsWriter, latest_values, read_metrics

__all__ = ["MetricsWriter", "ProgressBar", "latest_values", "read_metrics", "METRICS_FILE", "training_flops_per_token",
           "training_flops_per_token_palm", "peak_flops_per_device", "mfu", "mfu_on_devices"]
