"""The interval verdict on recorded figures, without Django."""

from releases.analysis import (
    FAILED,
    HEALTHY,
    INCONCLUSIVE,
    INSUFFICIENT_DATA,
    ROLLBACK,
    Counts,
    Settings,
    compare,
    judge,
)

SETTINGS = Settings(min_requests=100, max_error_rate_increase=1.0, failures_tolerated=1)


def verdict(gray, prod, since_gray=None, since_prod=None, failures=0, settings=SETTINGS):
    return judge(
        settings,
        window_gray=Counts(*gray),
        window_prod=Counts(*prod),
        since_start_gray=Counts(*(since_gray or gray)),
        since_start_prod=Counts(*(since_prod or prod)),
        failures=failures,
    )


def test_equal_error_rates_with_enough_traffic_advance():
    result = verdict((2000, 20), (2000, 20))
    assert result.outcome == HEALTHY and result.advances
    assert result.detail["window"]["gray"] == {
        "requests": 2000,
        "errors": 20,
        "error_rate": 1.0,
        "p95_ms": None,
    }
    assert result.detail["test"]["likelihood_ratio"] < 1


def test_an_empty_or_tiny_window_never_advances():
    for gray in ((0, 0), (1, 0), (99, 0)):
        result = verdict(gray, (5000, 10), since_gray=(100_000, 10), since_prod=(100_000, 10))
        assert result.outcome == INSUFFICIENT_DATA and not result.advances
        assert "fewer than 100" in result.detail["reason"]
    # Gray has traffic but nothing to compare it with.
    assert verdict((500, 0), (3, 0)).outcome == INSUFFICIENT_DATA


def test_a_clearly_worse_gray_fails_and_is_rolled_back_after_the_tolerated_failures():
    first = verdict((1000, 200), (1000, 10))
    assert (first.outcome, first.failures) == (FAILED, 1)
    assert first.detail["test"]["likelihood_ratio"] >= first.detail["test"]["rollback_ratio"]
    second = verdict((1000, 200), (1000, 10), failures=first.failures)
    assert (second.outcome, second.failures) == (ROLLBACK, 2)


def test_small_samples_are_not_judged_on_noise():
    # Two errors in 100 against none: a raw threshold of one point would roll this back.
    result = verdict((100, 2), (100, 0))
    assert result.outcome == INCONCLUSIVE
    assert result.failures == 0


def test_within_the_margin_is_healthy_beyond_it_is_not():
    assert verdict((20_000, 300), (20_000, 200)).outcome == HEALTHY  # +0.5 of 1.0 allowed
    assert verdict((20_000, 700), (20_000, 200)).outcome == FAILED  # +2.5 points


def test_the_test_is_one_sided():
    better = compare(Counts(1000, 0), Counts(1000, 50), margin=0.01)
    worse = compare(Counts(1000, 50), Counts(1000, 0), margin=0.01)
    assert better.likelihood_ratio < 1e-6 and worse.likelihood_ratio > 1e6


def test_the_margin_is_the_point_of_indifference():
    # 100,000 requests each: 0.8 points worse leans to staying, 1.2 points worse to rollback.
    below = compare(Counts(100_000, 1800), Counts(100_000, 1000), margin=0.01)
    above = compare(Counts(100_000, 2200), Counts(100_000, 1000), margin=0.01)
    assert below.likelihood_ratio < 1 < above.likelihood_ratio


def test_a_slow_gray_fails_on_p95():
    settings = Settings(min_requests=100, max_p95_ms=200.0)
    result = judge(
        settings,
        window_gray=Counts(500, 0, 450.0),
        window_prod=Counts(500, 0, 20.0),
        since_start_gray=Counts(500, 0),
        since_start_prod=Counts(500, 0),
        failures=0,
    )
    assert result.outcome == FAILED and "p95 450.0 ms" in result.detail["reason"]
