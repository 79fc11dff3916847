"""Hooks for training frameworks: a TRL callback (``trl``), Miles/slime's rollout log function
(``miles``). Each is imported on its own, so ``import rlvitals`` stays light."""
