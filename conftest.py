"""Test setup for every test folder (tests/ and projects/<p>/tests/): 8 fake CPU devices, set before jax is
imported anywhere, and the repo root on sys.path."""
import os
import sys

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
os.environ.setdefault("JAX_PLATFORMS", "cpu")
# launches in tests compile afresh and never write into the user's persistent compilation cache (shared.launch
# --compile_cache; tests/test_launch_compile_cache.py turns it on in a temporary folder)
os.environ.setdefault("SHARED_COMPILE_CACHE", "off")
REPO_ROOT = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, REPO_ROOT)

REFERENCE_DATA = os.path.join(REPO_ROOT, "..", "shared", "data")


def launch_fresh(*args: str, timeout: float = 1500):
    """`python -m shared.launch ARGS` in a new process as on a fresh machine: without this process's fake-device and
    platform flags (the launcher sets what the config's mesh needs). Returns the CompletedProcess (text output)."""
    import subprocess

    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "JAX_PLATFORMS")}
    env["PYTHONPATH"] = REPO_ROOT
    return subprocess.run([sys.executable, "-m", "shared.launch", *args], cwd=REPO_ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)
