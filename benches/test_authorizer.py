"""ACL decisions against the number of bindings.

An authorizer holding N bindings for 64 principals (N/2 literal ones on topics
``topic-<i>``, N/2 prefixed ones on ``team<i>-``) decides LOOKUPS (principal, host,
WRITE, TOPIC, name) questions, half about ``topic-<j>`` and half about
``team<j>-events``. Timed two ways: every question new (the decision
cache cleared before each round, so each is worked out from the indexes), and the
same questions again (answered from the cache, as a producer's requests are). The
ceiling, in the same round, is a plain ``dict.get`` of the same 5-tuple keys: what
a decision could cost if it were free. Reported per decision.

Goal: a new decision costs a few dict lookups (one per distinct prefix length in use,
here 1 to 5), not a scan of the bindings: near flat from 1,000 to 10,000 bindings; a
cached decision within a small factor of the ``dict.get`` ceiling.
"""

from __future__ import annotations

import random
import time
from pathlib import Path

import pytest
from logstore_bench import BenchReport, median_seconds

from broker_py.security.authorizer.acl_binding import AclBinding, AclOperation, ResourceType
from broker_py.security.authorizer.standard_authorizer import StandardAuthorizer

BINDING_COUNTS = [10, 1_000, 10_000]
LOOKUPS = 2_000
ROUNDS = 10
TOPIC, LITERAL, PREFIXED, WRITE, ALLOW = 2, 3, 4, 4, 3


def build(directory: Path, count: int) -> tuple[StandardAuthorizer, list[tuple]]:
    rng = random.Random(count)
    authorizer = StandardAuthorizer(str(directory))
    principals = [f"User:u{i}" for i in range(64)]
    bindings = []
    for i in range(count):
        principal = rng.choice(principals)
        if i % 2:
            bindings.append(
                AclBinding.create(TOPIC, f"topic-{i}", LITERAL, principal, "*", WRITE, ALLOW)
            )
        else:
            bindings.append(
                AclBinding.create(TOPIC, f"team{i}-", PREFIXED, principal, "*", WRITE, ALLOW)
            )
    authorizer.create(bindings)
    questions = [
        (rng.choice(principals), "127.0.0.1", AclOperation.WRITE, ResourceType.TOPIC, name)
        for name in (
            f"topic-{rng.randrange(count)}" if k % 2 else f"team{rng.randrange(count)}-events"
            for k in range(LOOKUPS)
        )
    ]
    return authorizer, questions


@pytest.fixture(scope="module", autouse=True)
def _section(report: BenchReport) -> None:
    report.section(
        "authorizer",
        f"ACL decisions: microseconds per decision, median of {ROUNDS} rounds of {LOOKUPS}; "
        "vs dict = decision / plain dict.get of the same keys in the same round",
        [("us", "us/decision"), ("vs_dict", "vs dict.get")],
    )


@pytest.mark.parametrize("cached", [False, True], ids=["new", "cached"])
@pytest.mark.parametrize("count", BINDING_COUNTS)
def test_authorize(
    benchmark, report: BenchReport, bench_dir: Path, count: int, cached: bool
) -> None:
    directory = bench_dir / f"acl-{count}-{cached}"
    directory.mkdir()
    authorizer, questions = build(directory, count)
    # What is timed decides: a question is allowed only when the one binding covering
    # its topic is for its principal.
    expected = [authorizer._decide(*q) for q in questions]
    assert any(expected) and not all(expected)
    plain = {q: d for q, d in zip(questions, expected, strict=True)}
    ceiling: list[float] = []

    def setup():
        start = time.perf_counter()
        get = plain.get
        for q in questions:
            get(q)
        ceiling.append(time.perf_counter() - start)
        if not cached:
            authorizer._decisions.clear()
        return (), {}

    def decide() -> None:
        authorize = authorizer.authorize
        for q in questions:
            authorize(*q)

    benchmark.group = "authorizer"
    benchmark.pedantic(decide, setup=setup, rounds=ROUNDS, warmup_rounds=1)
    assert [authorizer.authorize(*q) for q in questions] == expected
    seconds = median_seconds(benchmark)
    if seconds is None:
        return
    us = seconds / LOOKUPS * 1e6
    ceiling_us = sorted(ceiling)[len(ceiling) // 2] / LOOKUPS * 1e6
    report.add(
        "authorizer",
        f"{count:,} bindings",
        "cached" if cached else "new",
        us=us,
        vs_dict=us / ceiling_us,
    )
    benchmark.extra_info.update(
        {"us_per_decision": round(us, 3), "us_per_dict_get": round(ceiling_us, 4)}
    )
