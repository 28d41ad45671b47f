"""``logstore mirror``: mirror one Kafka-compatible cluster into another with
MirrorMaker 2's semantics (see docs/mirror.md).

- ``logstore mirror [run] --config mm2.properties`` or ``--source H:P --target H:P
  --topics 'orders.*'``: runs until SIGTERM/SIGINT (exit 0), or until a flow fails (1).
- ``logstore mirror translate-offsets --group G``: the offsets G should start from on the
  target, from the checkpoints there.
- ``logstore mirror status``: lag per replicated topic.
"""

from __future__ import annotations

import json
import signal
import sys
import threading
from typing import Any

import click

from logstore.cli.common import EXIT_FAILED, EXIT_OK, CliError


def _flows(
    config_file: str | None,
    source: str | None,
    target: str | None,
    source_alias: str,
    target_alias: str,
    topics: str | None,
    exactly_once: bool,
    sets: tuple[str, ...],
    instance_id: str | None = None,
) -> list[Any]:
    from logstore.mirror import config

    settings: dict[str, str] = {}
    for item in sets:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise CliError(f"--set {item!r}: expected KEY=VALUE")
        settings[key.strip()] = value.strip()
    if topics is not None:
        settings["topics"] = topics
    if exactly_once:
        settings["exactly.once.source.support"] = "enabled"
    if instance_id is not None:
        settings["mirror.instance.id"] = instance_id
    if config_file is not None:
        if source or target:
            raise CliError("--config and --source/--target exclude each other")
        try:
            with open(config_file, encoding="utf-8") as f:
                props = config.parse_properties(f.read())
        except OSError as exc:
            raise CliError(f"cannot read {config_file}: {exc.strerror}") from None
        props.update(settings)
    else:
        if not source or not target:
            raise CliError("give --config FILE, or --source and --target")
        props = config.from_flags(
            source,
            target,
            source_alias=source_alias,
            target_alias=target_alias,
            settings=settings,
        )
    try:
        return config.flows(props)
    except config.ConfigError as exc:
        raise CliError(f"configuration: {exc}") from None


def _options(f: Any) -> Any:
    for opt in reversed(
        [
            click.option(
                "--config",
                "config_file",
                metavar="FILE",
                help="MirrorMaker 2 properties file (mm2.properties)",
            ),
            click.option("--source", metavar="HOST:PORT", help="source bootstrap servers"),
            click.option("--target", metavar="HOST:PORT", help="target bootstrap servers"),
            click.option(
                "--source-alias",
                default="source",
                show_default=True,
                help="source cluster alias (with --source)",
            ),
            click.option(
                "--target-alias",
                default="target",
                show_default=True,
                help="target cluster alias (with --target)",
            ),
            click.option(
                "--topics",
                metavar="REGEXES",
                help="topics to mirror: comma-separated regexes (MM2's topics)",
            ),
            click.option(
                "--instance-id",
                metavar="ID",
                help="this process's id among the flow's processes (mirror.instance.id)",
            ),
            click.option(
                "--exactly-once", is_flag=True, help="exactly.once.source.support = enabled"
            ),
            click.option(
                "--set",
                "sets",
                multiple=True,
                metavar="KEY=VALUE",
                help="any MM2 setting (repeatable)",
            ),
        ]
    ):
        f = opt(f)
    return f


def _run(metrics_port: int | None, **kw: Any) -> int:
    from logstore.mirror import runner

    flows = _flows(**kw)
    port = metrics_port if metrics_port is not None else int(flows[0].get("metrics.port"))
    stop = threading.Event()

    def _stop(_sig: int, _frame: Any) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)

    def say(line: str) -> None:
        click.echo(line)
        sys.stdout.flush()

    runners = runner.run(flows, say, stop, port)
    failed = [r for r in runners if r.error is not None]
    for r in failed:
        click.echo(
            f"logstore mirror: error: {r.flow.source}->{r.flow.target}: "
            f"{type(r.error).__name__}: {r.error}",
            err=True,
        )
    return EXIT_FAILED if failed else EXIT_OK


@click.group(
    "mirror",
    invoke_without_command=True,
    context_settings={"help_option_names": ["-h", "--help"]},
)
@_options
@click.option(
    "--metrics-port",
    type=int,
    default=None,
    help="serve Prometheus metrics on this port (metrics.port)",
)
@click.pass_context
def group(ctx: click.Context, metrics_port: int | None, **kw: Any) -> int | None:
    """Mirror one cluster into another (MirrorMaker 2's naming, formats and config keys).

    Without a subcommand: run (as `logstore mirror run`).
    """
    if ctx.invoked_subcommand is None:
        ctx.exit(_run(metrics_port, **kw))
    return None


@group.command("run")
@_options
@click.option(
    "--metrics-port",
    type=int,
    default=None,
    help="serve Prometheus metrics on this port (metrics.port)",
)
def run_command(metrics_port: int | None, **kw: Any) -> None:
    """Copy topics, configs and group offsets until stopped (SIGTERM, Ctrl-C)."""
    click.get_current_context().exit(_run(metrics_port, **kw))


@group.command("translate-offsets")
@_options
@click.option("--group", "group_id", required=True, help="consumer group")
@click.option("--json", "as_json", is_flag=True, help="print JSON")
def translate_command(group_id: str, as_json: bool, **kw: Any) -> None:
    """Print the offsets GROUP should start from on the target (its checkpoints)."""
    from logstore.mirror.remote_cluster import translate_offsets

    for flow in _flows(**kw):
        topic = flow.policy().checkpoints_topic(flow.source)
        got = translate_offsets(flow.target_client, topic, group_id)
        if as_json:
            rows = [
                {
                    "topic": t,
                    "partition": p,
                    "offset": cp.downstream_offset,
                    "upstream_offset": cp.upstream_offset,
                    "metadata": cp.metadata,
                }
                for (t, p), cp in sorted(got.items())
            ]
            click.echo(
                json.dumps(
                    {
                        "source": flow.source,
                        "target": flow.target,
                        "group": group_id,
                        "offsets": rows,
                    }
                )
            )
            continue
        click.echo(f"# {group_id}: {flow.source} -> {flow.target}")
        click.echo(f"{'TOPIC':30} {'PARTITION':>9} {'OFFSET':>12} {'SOURCE OFFSET':>14}")
        for (t, p), cp in sorted(got.items()):
            click.echo(f"{t:30} {p:>9} {cp.downstream_offset:>12} {cp.upstream_offset:>14}")


@group.command("status")
@_options
@click.option("--json", "as_json", is_flag=True, help="print JSON")
def status_command(as_json: bool, **kw: Any) -> None:
    """Print per replicated topic how far the mirror has copied (lag)."""
    from logstore.mirror.status import flow_status

    for flow in _flows(**kw):
        st = flow_status(flow)
        if as_json:
            click.echo(
                json.dumps(
                    {
                        "source": st.source,
                        "target": st.target,
                        "group": st.group,
                        "members": st.members,
                        "topics": [
                            {
                                "topic": t.topic,
                                "remote": t.remote,
                                "partitions": t.partitions,
                                "source_end": t.source_end,
                                "copied": t.copied,
                                "target_end": t.target_end,
                                "lag": t.lag,
                            }
                            for t in st.topics
                        ],
                    }
                )
            )
            continue
        click.echo(f"# {st.source} -> {st.target}: group {st.group}, {st.members} process(es)")
        click.echo(
            f"{'TOPIC':24} {'REMOTE TOPIC':30} {'PARTS':>5} {'SOURCE END':>11} "
            f"{'COPIED':>11} {'TARGET END':>11} {'LAG':>9}"
        )
        for t in st.topics:
            click.echo(
                f"{t.topic:24} {t.remote:30} {t.partitions:>5} {t.source_end:>11} "
                f"{t.copied:>11} {t.target_end:>11} {t.lag:>9}"
            )
