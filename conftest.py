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
