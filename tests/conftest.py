"""Shared test setup."""

import os

# torch's OpenMP threads spin while waiting unless told otherwise, which makes the trainer's
# tests 10-100x slower when another process holds a core. It must be set before torch loads.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
