"""Sampled requests behind an engine (the Python gateway's, dataplane/gateway/sampling.py):
decide.lua draws them at the sample rate and hands the engine what the decision read (the
client IP, city, user and the headers some rule names, as one JSON text); the engine
writes them with their status and duration into a second log only sampled requests reach
(nginx: `access_log ... if=$graylane_sample`, Envoy: a log filtered on the Lua filter's
dynamic metadata). The agent tails it into the gateway's Sampler, which caps them a
second and keeps them for the Reporter.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from dataplane.agent.access_log import LogTail
from dataplane.gateway.sampling import Sampler

# The sample log's fields beside `sample` (decide.lua's JSON): Envoy's start and duration in
# microseconds, nginx's time of logging and duration in seconds (to the millisecond).
ENVOY_FORMAT = {
    "sample": "%DYNAMIC_METADATA(graylane:sample)%",
    "status": "%RESPONSE_CODE%",
    "start": "%START_TIME(%s.%3f)%",
    "us": "%COMMON_DURATION(DS_RX_BEG:DS_TX_END:us)%",
}
NGINX_FORMAT = (
    '{"sample":"$graylane_sample","status":"$status","msec":"$msec","seconds":"$request_time"}'
)


def sample_of(line: bytes) -> dict[str, Any] | None:
    """The sample a log line holds (the contract's shape), None for a garbled line."""
    try:
        entry = json.loads(line)
        sample = json.loads(entry["sample"])
        if "us" in entry:
            latency_ms = float(entry["us"]) / 1000
            ts = float(entry["start"])
        else:
            latency_ms = float(entry["seconds"]) * 1000
            ts = float(entry["msec"]) - latency_ms / 1000
        sample["status"] = int(entry["status"])
    except (ValueError, KeyError, TypeError):
        return None
    if not isinstance(sample, dict):
        return None
    sample["ts"] = round(ts, 3)
    sample["latency_ms"] = round(latency_ms, 3)
    return sample


def sample_log_tail(path: Path, sampler: Sampler) -> LogTail:
    """The sample log into `sampler`: at most its cap a second, as the Python gateway's."""

    def consume(lines: list[bytes]) -> None:
        for line in lines:
            sample = sample_of(line)
            if sample is not None and sampler.wants():
                sampler.record(sample)

    return LogTail(path, consume)
