"""``logstore registry``: the schema registry's subjects, schemas, compatibility and modes over
its REST API, like ``rpk registry``.

    logstore registry subject list|describe|delete
    logstore registry schema get|register|check
    logstore registry config [SUBJECT] [--set LEVEL]
    logstore registry mode [SUBJECT] [--set MODE]

``--registry-url`` (env LOGSTORE_REGISTRY_URL, default http://127.0.0.1:8081) names the
registry; ``--registry-user``/``--registry-password`` send HTTP basic credentials, ``--ca``
a CA bundle for https. A registry error exits 1 with Confluent's error code and message.
"""

from __future__ import annotations

import base64
import functools
import json
import ssl
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import click

from logstore.cli.base import group as cli_group
from logstore.cli.common import EXIT_OK, CliError
from logstore.cli.output import Output, format_option

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"


@dataclass
class RegistryClient:
    url: str
    user: str | None = None
    password: str | None = None
    ca: str | None = None
    timeout: float = 10.0

    def call(self, method: str, path: str, body: Any = None, **query: Any) -> Any:
        q = {k: str(v).lower() if isinstance(v, bool) else v for k, v in query.items() if v}
        url = self.url.rstrip("/") + path + ("?" + urllib.parse.urlencode(q) if q else "")
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(url, data=data, method=method)
        req.add_header("Accept", CONTENT_TYPE)
        if data is not None:
            req.add_header("Content-Type", CONTENT_TYPE)
        if self.user is not None:
            token = base64.b64encode(f"{self.user}:{self.password or ''}".encode()).decode()
            req.add_header("Authorization", f"Basic {token}")
        ctx = ssl.create_default_context(cafile=self.ca) if url.startswith("https") else None
        try:
            with urllib.request.urlopen(req, timeout=self.timeout, context=ctx) as resp:
                raw = resp.read()
        except urllib.error.HTTPError as exc:
            try:
                doc = json.loads(exc.read())
                message = f"{doc['message']} (error code {doc['error_code']})"
            except (ValueError, KeyError, TypeError):
                message = f"HTTP {exc.code}"
            raise CliError(message) from None
        except (urllib.error.URLError, OSError) as exc:
            raise CliError(f"cannot reach the schema registry at {self.url}: {exc}") from None
        try:
            return json.loads(raw) if raw else None
        except ValueError:
            return raw.decode(errors="replace")


def registry_command(f: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(f)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        client = RegistryClient(
            kwargs.pop("registry_url"),
            kwargs.pop("registry_user"),
            kwargs.pop("registry_password"),
            kwargs.pop("ca"),
        )
        return f(*args, rc=client, out=Output(kwargs.pop("fmt")), **kwargs)

    for option in reversed(
        [
            click.option(
                "--registry-url",
                envvar="LOGSTORE_REGISTRY_URL",
                default="http://127.0.0.1:8081",
                show_default=True,
                help="the schema registry (env LOGSTORE_REGISTRY_URL)",
            ),
            click.option("--registry-user", envvar="LOGSTORE_REGISTRY_USER"),
            click.option("--registry-password", envvar="LOGSTORE_REGISTRY_PASSWORD"),
            click.option("--ca", type=click.Path(dir_okay=False), help="CA bundle for https"),
            format_option,
        ]
    ):
        wrapper = option(wrapper)
    return wrapper


def _q(subject: str) -> str:
    return urllib.parse.quote(subject, safe="")


def _schema_body(path: str, schema_type: str, references: tuple[str, ...]) -> dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as exc:
        raise CliError(f"cannot read {path}: {exc}") from None
    body: dict[str, Any] = {"schema": text}
    if schema_type.upper() != "AVRO":
        body["schemaType"] = schema_type.upper()
    refs = []
    for r in references:
        name, _, rest = r.partition("=")
        subject, _, version = rest.rpartition(":")
        if not name or not subject or not version.isdigit():
            raise CliError(f"--reference {r!r}: expected NAME=SUBJECT:VERSION")
        refs.append({"name": name, "subject": subject, "version": int(version)})
    if refs:
        body["references"] = refs
    return body


@cli_group("registry")
def group() -> None:
    """The schema registry: subjects, schemas, compatibility and modes."""


@group.group("subject")
def subject() -> None:
    """List, describe and delete subjects."""


@subject.command("list")
@click.option("--deleted", is_flag=True, help="include soft-deleted subjects")
@click.option("--prefix", default="", help="only subjects starting with this")
@registry_command
def subject_list(rc: RegistryClient, out: Output, deleted: bool, prefix: str) -> int:
    names = rc.call("GET", "/subjects", deleted=deleted, subjectPrefix=prefix)
    out.emit(names, lambda o, d: o.table(["subject"], [[s] for s in d]))
    return EXIT_OK


@subject.command("describe")
@click.argument("subject_name")
@click.option("--deleted", is_flag=True, help="include soft-deleted versions")
@registry_command
def subject_describe(rc: RegistryClient, out: Output, subject_name: str, deleted: bool) -> int:
    s = _q(subject_name)
    versions = rc.call("GET", f"/subjects/{s}/versions", deleted=deleted)
    rows = [rc.call("GET", f"/subjects/{s}/versions/{v}", deleted=deleted) for v in versions]
    config = rc.call("GET", f"/config/{s}", defaultToGlobal=True)
    mode = rc.call("GET", f"/mode/{s}", defaultToGlobal=True)
    data = {
        "subject": subject_name,
        "compatibility": config.get("compatibilityLevel"),
        "mode": mode.get("mode"),
        "versions": rows,
    }

    def draw(o: Output, d: dict[str, Any]) -> None:
        o.fields(
            [("subject", d["subject"]), ("compatibility", d["compatibility"]), ("mode", d["mode"])]
        )
        o.table(
            ["version", "id", "type", "references"],
            [
                [r["version"], r["id"], r.get("schemaType", "AVRO"), len(r.get("references", []))]
                for r in d["versions"]
            ],
        )

    out.emit(data, draw)
    return EXIT_OK


@subject.command("delete")
@click.argument("subject_name")
@click.option("--version", help="one version (a number or latest) instead of the subject")
@click.option("--permanent", is_flag=True, help="hard delete (after a soft delete)")
@registry_command
def subject_delete(
    rc: RegistryClient, out: Output, subject_name: str, version: str | None, permanent: bool
) -> int:
    s = _q(subject_name)
    path = f"/subjects/{s}" + (f"/versions/{version}" if version else "")
    deleted = rc.call("DELETE", path, permanent=permanent)
    versions = deleted if isinstance(deleted, list) else [deleted]
    out.emit(
        {"subject": subject_name, "deleted_versions": versions, "permanent": permanent},
        lambda o, d: o.table(["subject", "version"], [[subject_name, v] for v in versions]),
    )
    return EXIT_OK


@group.group("schema")
def schema() -> None:
    """Get, register and check schemas."""


@schema.command("get")
@click.argument("subject_name", required=False)
@click.option("--id", "schema_id", type=int, help="the schema with this id")
@click.option("--version", default="latest", show_default=True)
@registry_command
def schema_get(
    rc: RegistryClient, out: Output, subject_name: str | None, schema_id: int | None, version: str
) -> int:
    if schema_id is not None:
        doc = rc.call("GET", f"/schemas/ids/{schema_id}")
        doc = {"id": schema_id, **doc}
    elif subject_name:
        doc = rc.call("GET", f"/subjects/{_q(subject_name)}/versions/{version}")
    else:
        raise CliError("give a SUBJECT or --id")
    out.emit(doc, lambda o, d: o.line(d["schema"]))
    return EXIT_OK


_SCHEMA_OPTIONS = [
    click.option("--schema", "schema_file", required=True, type=click.Path(dir_okay=False)),
    click.option(
        "--type",
        "schema_type",
        type=click.Choice(["AVRO", "JSON", "PROTOBUF"], case_sensitive=False),
        default="AVRO",
        show_default=True,
    ),
    click.option("--reference", "references", multiple=True, metavar="NAME=SUBJECT:VERSION"),
]


def _schema_options(f: Callable[..., Any]) -> Callable[..., Any]:
    for option in reversed(_SCHEMA_OPTIONS):
        f = option(f)
    return f


@schema.command("register")
@click.argument("subject_name")
@_schema_options
@registry_command
def schema_register(
    rc: RegistryClient,
    out: Output,
    subject_name: str,
    schema_file: str,
    schema_type: str,
    references: tuple[str, ...],
) -> int:
    body = _schema_body(schema_file, schema_type, references)
    doc = rc.call("POST", f"/subjects/{_q(subject_name)}/versions", body)
    out.emit(
        {"subject": subject_name, "id": doc["id"]},
        lambda o, d: o.table(["subject", "id"], [[d["subject"], d["id"]]]),
    )
    return EXIT_OK


@schema.command("check")
@click.argument("subject_name")
@click.option("--version", default="latest", show_default=True)
@_schema_options
@registry_command
def schema_check(
    rc: RegistryClient,
    out: Output,
    subject_name: str,
    version: str,
    schema_file: str,
    schema_type: str,
    references: tuple[str, ...],
) -> int:
    body = _schema_body(schema_file, schema_type, references)
    path = f"/compatibility/subjects/{_q(subject_name)}/versions/{version}"
    doc = rc.call("POST", path, body, verbose=True)

    def draw(o: Output, d: dict[str, Any]) -> None:
        o.line("compatible" if d["is_compatible"] else "incompatible")
        for m in d.get("messages", []):
            o.line(f"  {m}")

    out.emit(doc, draw)
    return EXIT_OK if doc["is_compatible"] else 1


@group.command("config")
@click.argument("subject_name", required=False)
@click.option("--set", "level", help="NONE, BACKWARD[_TRANSITIVE], FORWARD[...], FULL[...]")
@registry_command
def config(rc: RegistryClient, out: Output, subject_name: str | None, level: str | None) -> int:
    path = "/config" + (f"/{_q(subject_name)}" if subject_name else "")
    if level:
        rc.call("PUT", path, {"compatibility": level.upper()})
    doc = rc.call("GET", path, defaultToGlobal=True) if subject_name else rc.call("GET", path)
    out.emit(
        doc,
        lambda o, d: o.table(
            ["subject", "compatibility"], [[subject_name or "(global)", d["compatibilityLevel"]]]
        ),
    )
    return EXIT_OK


@group.command("mode")
@click.argument("subject_name", required=False)
@click.option("--set", "mode", help="READWRITE, READONLY or IMPORT")
@click.option("--force", is_flag=True, help="IMPORT even though subjects exist")
@registry_command
def mode_cmd(
    rc: RegistryClient, out: Output, subject_name: str | None, mode: str | None, force: bool
) -> int:
    path = "/mode" + (f"/{_q(subject_name)}" if subject_name else "")
    if mode:
        rc.call("PUT", path, {"mode": mode.upper()}, force=force)
    doc = rc.call("GET", path, defaultToGlobal=True) if subject_name else rc.call("GET", path)
    out.emit(
        doc, lambda o, d: o.table(["subject", "mode"], [[subject_name or "(global)", d["mode"]]])
    )
    return EXIT_OK
