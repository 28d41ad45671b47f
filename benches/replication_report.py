"""The replication benchmark's cases and its report: the throughput and latency cases
``benches/replication_bench.py`` runs, the medians over rounds with each case's ratio to
RF 1 acks=1 paired per round (``summarize``), and the printed tables (``print_report``)."""

from __future__ import annotations

import statistics

LATENCY_RATE = 5_000  # 1 KB messages a second, paced
GOAL_RATIO = 0.5  # RF 3 acks=all >= half of RF 1 acks=1's throughput

THROUGHPUT_CASES = [
    ("rf1-acks1", 1, "1"),
    ("rf1-acksall", 1, "all"),
    ("rf3-acks1", 3, "1"),
    ("rf3-acksall", 3, "all"),
]
SINGLE = ("single-acks1", 0, "1")  # the single broker, no ZooKeeper
# The last latency case is RF 3 acks=all from a producer that keeps at most 5 requests in
# flight per connection (the Java client's default; librdkafka's is 1,000,000): the broker
# handles a connection's requests one at a time, so with a deep window and linger.ms=0
# every message becomes its own request, each waiting out the followers' round trip.
LATENCY_CASES = [(name, rf, acks, {}) for name, rf, acks in THROUGHPUT_CASES] + [
    ("rf3-acksall-inflight5", 3, "all", {"max.in.flight.requests.per.connection": 5}),
]
LABELS = {
    "rf1-acks1": "RF 1, acks=1",
    "rf1-acksall": "RF 1, acks=all",
    "rf3-acks1": "RF 3, acks=1",
    "rf3-acksall": "RF 3, acks=all",
    "single-acks1": "single broker, no ZK, acks=1",
    "rf3-acksall-inflight5": "RF 3, acks=all, max.in.flight 5",
}


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else float("nan")


def summarize(results: dict) -> None:
    """Medians over rounds, and each case's ratio to RF 1 acks=1 paired per round."""
    rounds = results.get("rounds_throughput") or []
    summary: dict = {"produce": {}, "consume": {}, "produce_1k": {}}
    for kind, base in (
        ("produce", "rf1-acks1"),
        ("consume", "rf1-acks1"),
        ("produce_1k", "rf1-acks1"),
    ):
        names = [
            n
            for n in (*[c[0] for c in THROUGHPUT_CASES], SINGLE[0])
            if any(n in r.get(kind, {}) for r in rounds)
        ]
        for name in names:
            rs = [r[kind][name] for r in rounds if name in r.get(kind, {})]
            ratios = [
                r[kind][name]["msgs_per_s"] / r[kind][base]["msgs_per_s"]
                for r in rounds
                if name in r.get(kind, {}) and base in r[kind]
            ]
            summary[kind][name] = {
                "msgs_per_s": median([x["msgs_per_s"] for x in rs]),
                "msgs_per_s_range": (
                    min(x["msgs_per_s"] for x in rs),
                    max(x["msgs_per_s"] for x in rs),
                ),
                "mb_per_s": median([x["mb_per_s"] for x in rs]),
                "brokers_s_per_M": median([x["brokers_s_per_M"] for x in rs]),
                "brokers_s_per_M_range": (
                    min(x["brokers_s_per_M"] for x in rs),
                    max(x["brokers_s_per_M"] for x in rs),
                ),
                "leader_s_per_M": median([x["leader_s_per_M"] for x in rs]),
                "followers_s_per_M": median([x["followers_s_per_M"] for x in rs]),
                "client_s_per_M": median([x["client_s_per_M"] for x in rs]),
                "brokers_cores": median([x["brokers_cores"] for x in rs]),
                "steal_s": median([x["steal_s"] for x in rs]),
                "vs_rf1_acks1": median(ratios),
                "vs_rf1_acks1_per_round": ratios,
                "vs_pump": median([x.get("vs_pump") for x in rs]),
                "pump_mb_per_s": median([x.get("pump_mb_per_s") for x in rs]),
                "cut_at_limit": any(x.get("cut_at_limit") for x in rs),
                "replicated_msgs_per_s": median([x.get("replicated_msgs_per_s") for x in rs]),
                "brokers_cpu_wait_s": median([x.get("brokers_cpu_wait_s") for x in rs]),
                "brokers_cpu_wait_share": median([x.get("brokers_cpu_wait_share") for x in rs]),
                "records_per_batch": median([x.get("records_per_batch") for x in rs]),
            }
    results["summary"] = summary


def print_report(results: dict) -> None:
    s = results.get("summary", {})
    n_rounds = len(results.get("rounds_throughput") or [])
    print(
        f"\n==== replication benchmark: {results['date']}, commit {results['commit']}, "
        f"{results['cpus']} CPUs, "
        f"{'through the harness proxies' if results['via_proxies'] else 'direct connections'}"
        f"{', brokers in network namespaces (veth)' if results.get('netns') else ''} ===="
    )
    print(
        f"100 B messages, {results['messages']:,} per produce case "
        f"(linger.ms {results['linger_ms']}, batch.size 1 MB, produce_batch); "
        f"{n_rounds} round(s): median (min-max) over rounds; "
        "ratio: to RF 1 acks=1, paired per round; "
        "replicated: msg/s until the high watermark reached the end; "
        "CPU s/M: the brokers' user+system seconds per million messages (leader / followers); "
        "CPU wait: share of the case the brokers' threads were runnable "
        "but waited for a CPU (per broker); pump: payload MB/s over a raw loopback socket pump's"
    )
    head = (
        f"{'case':<30} {'msg/s':>10} {'(range)':>23} {'MB/s':>6} {'ratio':>5} {'replicated':>10} "
        f"{'CPU s/M':>7} "
        f"{'leader':>6} {'follow':>6} {'client':>6} {'CPU wait':>8} {'rec/batch':>9} {'vs pump':>7}"
    )
    print("\nproduce\n" + head)
    for name, x in s.get("produce", {}).items():
        lo, hi = x["msgs_per_s_range"]
        rep = x.get("replicated_msgs_per_s")
        rep = "-" if rep is None or rep != rep or name == SINGLE[0] else f"{rep:,.0f}"
        print(
            f"{LABELS[name]:<30} {x['msgs_per_s']:>10,.0f} {f'({lo:,.0f}-{hi:,.0f})':>23} "
            f"{x['mb_per_s']:>6.1f} "
            f"{x['vs_rf1_acks1']:>5.2f} {rep:>10} {x['brokers_s_per_M']:>7.2f} "
            f"{x['leader_s_per_M']:>6.2f} {x['followers_s_per_M']:>6.2f} "
            f"{x['client_s_per_M']:>6.2f} {x['brokers_cpu_wait_share']:>8.0%} "
            f"{x['records_per_batch']:>9,.0f} {x['vs_pump']:>7.3f}"
            f"{'  (cut at the time limit)' if x['cut_at_limit'] else ''}"
        )
    print(
        "\nconsume (assign, 500 per consume())\n"
        + head[: head.index(" replicated")]
        + head[head.index(" replicated") + 11 : head.index(" rec/batch")]
    )
    for name, x in s.get("consume", {}).items():
        lo, hi = x["msgs_per_s_range"]
        print(
            f"{LABELS[name]:<30} {x['msgs_per_s']:>10,.0f} {f'({lo:,.0f}-{hi:,.0f})':>23} "
            f"{x['mb_per_s']:>6.1f} "
            f"{x['vs_rf1_acks1']:>5.2f} {x['brokers_s_per_M']:>7.2f} {x['leader_s_per_M']:>6.2f} "
            f"{x['followers_s_per_M']:>6.2f} "
            f"{x['client_s_per_M']:>6.2f} {x['brokers_cpu_wait_share']:>8.0%}"
        )
    pr = s.get("produce", {})
    if "rf3-acksall" in pr and "rf1-acks1" in pr:
        ratio = pr["rf3-acksall"]["vs_rf1_acks1"]
        print(
            f"\nGoal: RF 3 acks=all >= {GOAL_RATIO:.2f} x RF 1 acks=1: {ratio:.2f} "
            "(per round "
            f"{', '.join(f'{v:.2f}' for v in pr['rf3-acksall']['vs_rf1_acks1_per_round'])}): "
            f"{'met' if ratio >= GOAL_RATIO else 'NOT met'}"
        )
        base = pr["rf1-acks1"]["brokers_s_per_M"]
        print(
            "Brokers' CPU per message over RF 1 acks=1's: "
            + ", ".join(
                f"{LABELS[n]} {x['brokers_s_per_M'] / base:.1f}x"
                for n, x in pr.items()
                if n != "rf1-acks1"
            )
        )
    kb = s.get("produce_1k", {})
    if kb:
        print(
            f"\nproduce, 1 KB messages ({results.get('kb_messages', 0):,} per case): "
            "the brokers' CPU s per million messages, median (min-max) over rounds"
        )
        print(f"{'case':<30} {'msg/s':>10} {'MB/s':>6} {'CPU s/M':>15} {'leader':>6} {'follow':>6}")
        for name, x in kb.items():
            lo, hi = x["brokers_s_per_M_range"]
            cpu = f"{x['brokers_s_per_M']:.2f} ({lo:.2f}-{hi:.2f})"
            print(
                f"{LABELS[name]:<30} {x['msgs_per_s']:>10,.0f} {x['mb_per_s']:>6.1f} "
                f"{cpu:>15} "
                f"{x['leader_s_per_M']:>6.2f} {x['followers_s_per_M']:>6.2f}"
            )
        if "rf3-acksall" in kb and "rf1-acks1" in kb:
            b1, b3 = kb["rf1-acks1"], kb["rf3-acksall"]
            print(
                f"1 KB, RF 3 acks=all over RF 1 acks=1: brokers "
                f"{b3['brokers_s_per_M'] / b1['brokers_s_per_M']:.1f}x, leader "
                f"{b3['leader_s_per_M'] / b1['brokers_s_per_M']:.1f}x, each follower "
                f"{b3['followers_s_per_M'] / 2 / b1['brokers_s_per_M']:.2f}x"
            )
    checks = results.get("replica_checks") or {}
    if checks:
        bad = [t for t, x in checks.items() if not x["identical"]]
        print(
            f"Replicas of the {len(checks)} RF 3 topics byte-identical below the high watermark: "
            f"{'yes' if not bad else 'NO: ' + ', '.join(bad)}"
        )
    lat = results.get("latency") or {}
    if lat:
        print(
            f"\nack latency, 1 KB at {results.get('rate', LATENCY_RATE):,} msg/s, linger.ms=0, "
            "produce() to delivery (passes pooled)"
        )
        print(
            f"{'case':<31} {'rate':>7} {'p50 ms':>8} {'p99 ms':>8} {'p99.9 ms':>8} {'max ms':>8} "
            f"{'p99 per pass':>18} "
            f"{'broker cores':>12} {'CPU wait s':>10} {'steal s':>7}"
        )
        for name, x in lat.items():
            per = ", ".join(f"{p['p99_ms']:.2f}" for p in x["passes"])
            wait = sum(p["brokers_cpu_wait_s"] for p in x["passes"])
            print(
                f"{LABELS[name]:<31} {x['rate']:>7,.0f} {x['p50_ms']:>8.2f} {x['p99_ms']:>8.2f} "
                f"{x['p999_ms']:>8.2f} {x['max_ms']:>8.1f} "
                f"{per:>18} {x['brokers_cores']:>12.2f} {wait:>10.2f} {x['steal_s']:>7.2f}"
            )
    serial = results.get("serial") or {}
    if serial:
        print("\none-record requests (1 KB) on one connection, one at a time (two runs each)")
        print(
            f"{'case':<31} {'req/s':>14} {'p50 ms':>14} {'p99 ms':>12} "
            f"{'brokers CPU ms/req':>20} {'leader':>14}"
        )
        for name, x in serial.items():
            runs = x["runs"]

            def both(key, fmt, runs=runs):
                return " / ".join(format(r[key], fmt) for r in runs)

            print(
                f"{LABELS[name]:<31} {both('requests_per_s', ',.0f'):>14} "
                f"{both('p50_ms', '.3f'):>14} {both('p99_ms', '.2f'):>12} "
                f"{both('brokers_cpu_ms_per_request', '.3f'):>20} "
                f"{both('leader_cpu_ms_per_request', '.3f'):>14}"
            )
    prof = results.get("profile")
    if prof:
        if "error" in prof:
            print(f"\nprofile: {prof['error']}")
        else:
            t = prof["throughput_under_py_spy"]
            print(
                "\npy-spy --native (200 Hz) during one more RF 3 acks=all case: "
                f"{t['msgs_per_s']:,.0f} msg/s under the profiler"
            )
            for role in ("leader", "follower"):
                x = prof.get(role, {})
                if "error" in x:
                    print(f"  {role}: {x['error']}")
                    continue
                print(
                    f"  {role}: event-loop thread {x['loop_samples']:,} samples, "
                    f"{x['idle_share']:.0%} of them in epoll; "
                    f"of the {x['busy_samples']:,} busy ones, self:"
                )
                for f, share in x["self"][:15]:
                    print(f"    {share:6.1%}  {f}")
                print("   inclusive:")
                for f, share in x["inclusive"]:
                    print(f"    {share:6.1%}  {f}")
    la0, la1 = results["loadavg_start"][0], results["loadavg_end"][0]
    print(f"\nload average at start {la0:.2f}, at end {la1:.2f} ({results['cpus']} CPUs)")
