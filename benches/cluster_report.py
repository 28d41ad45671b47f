"""The cluster benchmark's printed report (``benches/cluster_bench.py``): the controller
part's per-step times, the create part and the leader moves, from the results dict the
bench also writes as JSON."""

from __future__ import annotations

from collections import Counter


def ms(s) -> str:
    return (
        "-" if s is None or s != s else f"{s * 1000:,.0f} ms" if s >= 0.1 else f"{s * 1000:.2f} ms"
    )


def print_report(results: dict) -> None:
    print("\n==== cluster benchmark ====")
    ctl = results.get("controller", {})
    if ctl:
        print(
            "\nController against a real ZooKeeper "
            "(channel counts only; medians over the failover rounds)"
        )
        head = (
            f"{'partitions':>10} {'topics':>6} {'populate':>9} {'create states':>13} "
            f"{'failover':>9} {'raw floor':>9} {'x floor':>7} {'+to_wire':>9} "
            f"{'broker dead too':>15}  requests per failover"
        )
        print(head)
        for n, r in ctl.items():
            if "failover_median_s" not in r:
                print(f"{n:>10} incomplete: {r}")
                continue
            req = r["failover_rounds"][0]
            reqs = ", ".join(
                f"{k} {req['requests'][k]} ({req['states_sent'][k]:,} states)"
                for k in sorted(req["requests"])
            )
            dead = r.get("failover_broker_dead", {})
            print(
                f"{r['partitions']:>10,} {r['topics']:>6} {r['populate_s']:>8.1f}s "
                f"{ms(r['create_states_s']):>13} "
                f"{ms(r['failover_median_s']):>9} {ms(r['floor_median_s']):>9} "
                f"{r['ratio_median']:>7.2f} "
                f"{ms(r['to_wire_median_s']):>9} {ms(dead.get('failover_s')):>15}  {reqs}"
            )
        for r in ctl.values():
            if "median_round_steps_s" not in r:
                continue
            total = r["median_round_failover_s"]
            print(
                f"\nFailover at {r['partitions']:,} partitions, "
                f"the median round ({ms(total)}) by step:"
            )
            steps = sorted(r["median_round_steps_s"].items(), key=lambda kv: -kv[1])
            for name, s in steps:
                print(f"  {name:<45} {ms(s):>9} {s / total:6.1%}")
            rest = total - sum(s for _, s in steps)
            print(f"  {'controller bookkeeping (the rest)':<45} {ms(rest):>9} {rest / total:6.1%}")
            create = r["create_steps"]
            print(
                f"First creation of the {r['partitions']:,} states, {ms(r['create_states_s'])}: "
                + ", ".join(
                    f"{k} {ms(v)}" for k, v in sorted(create.items(), key=lambda kv: -kv[1])[:5]
                )
            )
            dead = r.get("failover_broker_dead")
            if dead:
                print(
                    f"Failover with the controller's broker dead: {ms(dead['failover_s'])}, "
                    f"{dead['writes']:,} partition "
                    "state writes; top steps: "
                    + ", ".join(
                        f"{k} {ms(v)}"
                        for k, v in sorted(dead["steps"].items(), key=lambda kv: -kv[1])[:4]
                    )
                )
            prof = r.get("profile")
            if prof:
                print(
                    f"cProfile of one failover ({ms(prof['elapsed_s'])} under the profiler, "
                    "controller thread only), top by tottime:"
                )
                for row in prof["top_tottime"][:15]:
                    print(
                        f"  {row['tottime']:8.3f} s self {row['cumtime']:8.3f} s cum "
                        f"{row['ncalls']:>9,}  {row['function']}"
                    )
                print("  top by cumulative time:")
                for row in prof["top_cumtime"][:20]:
                    print(
                        f"  {row['cumtime']:8.3f} s cum {row['tottime']:8.3f} s self "
                        f"{row['ncalls']:>9,}  {row['function']}"
                    )
    ct = results.get("create_topics")
    if ct and "p1" in ct:
        p1 = ct["p1"]
        print(
            f"\nCreateTopics end to end (3 brokers): 1 partition median {ms(p1['median_s'])}, max "
            f"{ms(p1['max_s'])} over "
            f"{len(p1['rounds'])} rounds; Metadata round trip {ms(p1['metadata_median_s'])}; ratio "
            f"{p1['ratio_median']:.0f}"
        )
        big = ct.get("big")
        if big and big["rounds_s"]:
            print(
                f"CreateTopics {big['partitions']} partitions: "
                + ", ".join(ms(s) for s in big["rounds_s"])
            )
    mv = results.get("leadership_move")
    if mv and mv.get("rounds"):
        print(
            "\nLeadership move under controlled shutdown (producer every 2 ms, acks=1, linger.ms=0)"
        )
        print(
            f"{'round':>5} {'leader':>6} {'ctrl':>4} {'new':>4} {'longest ack gap':>15} "
            f"{'from (after SIGTERM)':>20} {'median gap before':>17} "
            f"{'in ZK':>9} {'in metadata':>11} {'SIGTERM->exit':>13} {'acked/sent':>11}  errors"
        )
        for i, x in enumerate(mv["rounds"]):
            errs = x["delivery_errors"] or ["none"]
            client = Counter(e.split(":")[0] for e in x["client_errors"])
            print(
                f"{i + 1:>5} {x['leader']:>6} {'yes' if x['leader_was_controller'] else 'no':>4} "
                f"{x['new_leader']!s:>4} "
                f"{ms(x['max_gap_s']):>15} {ms(x['max_gap_starts_after_sigterm_s']):>20} "
                f"{ms(x['median_gap_before_s']):>17} "
                f"{ms(x['zk_moved_after_sigterm_s']):>9} "
                f"{ms(x['metadata_moved_after_sigterm_s']):>11} "
                f"{x['sigterm_to_exit_s']:>12.2f}s {x['acked']:>5}/{x['sent']:<5}  delivery: "
                f"{'; '.join(errs)}; client: {dict(client) or 'none'}"
            )
