"""The errors of BROKER and BROKER_LOGGER config resources, code and text as Kafka 3.9's
ConfigHelper and RuntimeLoggerManager give them, on a real broker (id 0)."""

from __future__ import annotations

import pytest

from logstore.protocol.error_codes import ErrorCode
from tests.integration.clients import describe_configs, incremental_alter_configs
from tests.integration.conftest import BrokerProcess

BROKER, BROKER_LOGGER = 4, 8
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
E = ErrorCode


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = BrokerProcess(str(tmp_path_factory.mktemp("config-errors")))
    b.start()
    yield b
    b.kill()


def describe(broker, resource_type, name):
    result = describe_configs(broker.bootstrap, resource_type, name)
    return result.error_code, result.error_message


def alter_loggers(broker, name, *ops):
    return incremental_alter_configs(broker.bootstrap, BROKER_LOGGER, name, *ops)


LOGGER = "broker_py.network.socket_server"


@pytest.mark.parametrize(
    ("resource_type", "name", "expected"),
    [
        (BROKER, "0", (E.NONE, None)),
        (BROKER, "", (E.NONE, None)),
        (BROKER, "x", (E.INVALID_REQUEST, "Broker id must be an integer, but it is: x")),
        (
            BROKER,
            "7",
            (E.INVALID_REQUEST, "Unexpected broker id, expected 0 or empty string, but received 7"),
        ),
        (BROKER_LOGGER, "", (E.INVALID_REQUEST, "Broker id must not be empty")),
        (
            BROKER_LOGGER,
            "7",
            (E.INVALID_REQUEST, "Unexpected broker id, expected 0 but received 7"),
        ),
        (BROKER_LOGGER, "0", (E.NONE, None)),
        (99, "0", (E.INVALID_REQUEST, "Unsupported resource type: UNKNOWN")),
    ],
)
def test_describe_names_its_resource_as_kafka(broker, resource_type, name, expected):
    assert describe(broker, resource_type, name) == expected


@pytest.mark.parametrize(
    ("name", "op", "expected"),
    [
        ("0", (LOGGER, SET, "DEBUG"), (E.NONE, None)),
        ("0", (LOGGER, DELETE, None), (E.NONE, None)),
        (
            "x",
            (LOGGER, SET, "DEBUG"),
            (E.INVALID_REQUEST, "Node id must be an integer, but it is: x"),
        ),
        (
            "3",
            (LOGGER, SET, "DEBUG"),
            (E.INVALID_REQUEST, "Unexpected node id. Expected 0, but received 0"),
        ),
        ("0", ("no.such", SET, "DEBUG"), (E.INVALID_CONFIG, "Logger no.such does not exist!")),
        (
            "0",
            (LOGGER, SET, "debug"),
            (
                E.INVALID_CONFIG,
                f"Cannot set the log level of {LOGGER} to debug as it is not a supported log "
                "level. Valid log levels are DEBUG, ERROR, FATAL, INFO, TRACE, WARN",
            ),
        ),
        (
            "0",
            ("root", DELETE, None),
            (E.INVALID_REQUEST, "Removing the log level of the root logger is not allowed"),
        ),
        (
            "0",
            (LOGGER, APPEND, "DEBUG"),
            (E.INVALID_REQUEST, "APPEND operation is not allowed for the BROKER_LOGGER resource"),
        ),
        (
            "0",
            (LOGGER, SUBTRACT, "DEBUG"),
            (E.INVALID_REQUEST, "SUBTRACT operation is not allowed for the BROKER_LOGGER resource"),
        ),
    ],
)
def test_logger_changes_refused_as_kafka(broker, name, op, expected):
    assert alter_loggers(broker, name, op) == expected
