"""Test setup for every test folder (tests/ and projects/<p>/tests/): 8 fake CPU devices, set before jax is
imported anywhere, and the repo root on sys.path."""
import os
import sys

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
os.environ.setdefault("JAX_PLATFORMS", "cpu")
# Launches in tests share one persistent compilation cache for the session, in a temporary folder (never the user's
# cache): the many subprocess launches of the same tiny configs (sweeps, resume checks) then compile each program
# once; tests/test_sweep_bundle.py went from 195 s to 100 s. Every program is stored, however quickly it compiled.
# Workers of pytest-xdist inherit the folder from the controller, which removes it at the end (pytest_sessionfinish).
_OWN_COMPILE_CACHE = None
if "SHARED_COMPILE_CACHE" not in os.environ:
    import tempfile

    _OWN_COMPILE_CACHE = tempfile.mkdtemp(prefix="shared-test-compile-cache-")
    os.environ["SHARED_COMPILE_CACHE"] = _OWN_COMPILE_CACHE
    os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
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


def pytest_sessionfinish(session, exitstatus):
    if _OWN_COMPILE_CACHE and not hasattr(session.config, "workerinput"):   # the controller (or a run without xdist)
        import shutil

        shutil.rmtree(_OWN_COMPILE_CACHE, ignore_errors=True)
