"""The latency representation shared by the live windows and the per-minute rollups.

A gateway reports one p95 per sample, not its distribution, so the p95 of merged samples
cannot be known exactly. We keep, per second (live) and per minute (history), a small
sparse histogram of the reported p95s weighted by the requests they cover, and read the
merged p95 as the 95th percentile of that weighted histogram. Unlike the max of the p95s,
it is not dragged up by one gateway that saw three slow requests, and unlike a mean it
still follows a version whose tail really grows. Histograms add, so seconds, minutes and
steps all merge the same way, in Redis (HINCRBY), in SQL rows and in Python.

Buckets are geometric: bucket k holds p95s in (2^((k-1)/4), 2^(k/4)] ms, so a reported
value is at most 19 % above the true one. They reach below a millisecond (negative k), since
a gateway on loopback answers in tenths of one; the first is everything up to 2^-10 ms
(about 1 µs), the last everything above 2^16 ms (65.5 s). Bucket 0 is (0.84, 1] ms, and
held everything up to 1 ms before the sub-millisecond buckets existed: stored figures of
then still read as 1 ms.
"""

import math

STEPS_PER_DOUBLING = 4
FIRST_BUCKET = -10 * STEPS_PER_DOUBLING
LAST_BUCKET = 16 * STEPS_PER_DOUBLING + 1
PERCENTILE = 0.95

Histogram = dict[int, int]


def bucket_of(latency_ms: float) -> int:
    if latency_ms <= 2.0 ** (FIRST_BUCKET / STEPS_PER_DOUBLING):
        return FIRST_BUCKET
    return min(LAST_BUCKET, math.ceil(math.log2(latency_ms) * STEPS_PER_DOUBLING - 1e-9))


def upper_edge(bucket: int) -> float:
    edge = 2 ** (bucket / STEPS_PER_DOUBLING)
    # Below a millisecond, three significant digits (0.000977, not 0.001).
    return round(edge, 3) if edge >= 1 else float(f"{edge:.3g}")


def merge(into: Histogram, other: Histogram) -> Histogram:
    for bucket, weight in other.items():
        into[bucket] = into.get(bucket, 0) + weight
    return into


def p95(histogram: Histogram) -> float | None:
    """The upper edge of the bucket holding the 95th percentile, None without weight."""
    total = sum(histogram.values())
    if total <= 0:
        return None
    threshold = PERCENTILE * total
    seen = 0
    for bucket in sorted(histogram):
        seen += histogram[bucket]
        if seen >= threshold:
            return upper_edge(bucket)
    return upper_edge(max(histogram))
