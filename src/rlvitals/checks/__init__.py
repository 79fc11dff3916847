"""The ordered health checks: each reads the canonical RunData and returns Findings."""

from .base import SEVERITIES, VERDICTS, Finding, Report, severity_rank

__all__ = ["SEVERITIES", "VERDICTS", "Finding", "Report", "severity_rank"]
