"""The windowed rate quotas and replication throttles measure with (Kafka's Rate over a
SampledStat)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker_py.utils.sampled_rate import RateConfig, SampledRate, throttle_time_ms


def test_a_first_burst_is_spread_over_samples_minus_one_windows() -> None:
    rate = SampledRate(RateConfig(samples=11, window_ms=1000))
    rate.record(10_000, now_ms=0)
    assert rate.span_ms(0) == 10_000
    assert rate.rate(0) == 1000.0


def test_the_span_grows_past_the_floor_with_the_oldest_window() -> None:
    rate = SampledRate(RateConfig(samples=3, window_ms=1000))
    for t in range(0, 2500, 100):
        rate.record(100, now_ms=t)
    # Windows opened at 0, 1000 and 2000: the oldest is 2,400 ms old at 2,400.
    assert rate.span_ms(2400) == 2400
    assert rate.rate(2400) == pytest.approx(2500 / 2.4)


def test_windows_older_than_the_whole_span_count_as_empty() -> None:
    rate = SampledRate(RateConfig(samples=2, window_ms=1000))
    rate.record(5000, now_ms=0)
    assert rate.total(1999) == 5000
    assert rate.total(2000) == 0


def test_throttle_time_is_the_silence_that_brings_the_rate_to_its_bound() -> None:
    assert throttle_time_ms(rate=150.0, bound=100.0, span_ms=10_000) == 5000
    assert throttle_time_ms(rate=100.0, bound=100.0, span_ms=10_000) == 0
    assert throttle_time_ms(rate=1.0, bound=0.0, span_ms=10_000) == 10_000


def test_a_bad_config_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="samples"):
        RateConfig(samples=0)
    with pytest.raises(ValueError, match="window_ms"):
        RateConfig(window_ms=0)


@given(
    samples=st.integers(1, 12),
    window_ms=st.integers(1, 2000),
    events=st.lists(
        st.tuples(st.integers(0, 3000), st.floats(0, 1e6, allow_nan=False)), max_size=60
    ),
    bound=st.floats(1, 1e6, allow_nan=False),
)
def test_after_the_throttle_time_of_silence_the_rate_is_within_its_bound(
    samples: int, window_ms: int, events: list[tuple[int, float]], bound: float
) -> None:
    rate = SampledRate(RateConfig(samples, window_ms))
    now = 0
    for gap, value in events:
        now += gap
        rate.record(value, now)
        assert rate.total(now) >= 0
        assert rate.span_ms(now) >= (samples - 1) * window_ms
    if not events:
        return
    wait = rate.throttle_time_ms(bound, now)
    total, span = rate.total(now), rate.span_ms(now)
    # Silence for the throttle time (rounded to the millisecond) brings the same total over
    # the longer span to the bound.
    assert total * 1000 / (span + wait + 1) <= bound
    if wait == 0:
        assert rate.rate(now) <= bound
