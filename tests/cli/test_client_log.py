"""ClientLog.cause on librdkafka's own texts (as librdkafka 2.x words them), without a
broker: the error_cb codes first, the FAIL log lines when no error came; the real
clients against real processes are in test_errors.py."""

from __future__ import annotations

import logging

from confluent_kafka import KafkaError

from logstore.cli.client_log import ClientLog


def client_log(*errors: tuple[int, str], lines: tuple[str, ...] = ()) -> ClientLog:
    log = ClientLog()
    log.brokers, log.timeout = "b1:9092,b2:9092", 2.0
    log.mechanism, log.user = "SCRAM-SHA-512", "alice"
    for code, text in errors:
        log.error(KafkaError(code, text))
    for line in lines:
        log.logger.log(logging.ERROR, "%s", line)
    return log


def test_an_authentication_error_wins_over_the_transport_errors() -> None:
    log = client_log(
        (
            KafkaError._TRANSPORT,
            "b1:9092/bootstrap: Connect to ipv4#10.0.0.1:9092 failed: "
            "Connection refused (after 0ms in state CONNECT)",
        ),
        (
            KafkaError._AUTHENTICATION,
            "sasl_plaintext://b2:9092/bootstrap: SASL authentication "
            "error: Authentication failed during authentication due to invalid credentials with "
            "SASL mechanism SCRAM-SHA-512 (after 101ms in state AUTH_REQ)",
        ),
    )
    assert log.unreachable()
    assert log.cause() == (
        "authentication failed: SASL SCRAM-SHA-512 for user 'alice' (wrong user name or password?)"
    )


def test_a_mechanism_the_listener_does_not_enable() -> None:
    log = client_log(
        (
            KafkaError._AUTHENTICATION,
            "sasl_plaintext://b1:9092/bootstrap: SASL SCRAM-SHA-512 "
            "mechanism handshake failed: Broker: Unsupported SASL mechanism: broker's supported "
            "mechanisms: PLAIN,SCRAM-SHA-256 (after 1ms in state AUTH_HANDSHAKE)",
        ),
    )
    assert log.cause() == (
        "authentication failed: SASL SCRAM-SHA-512 for user 'alice': the listener enables "
        "PLAIN,SCRAM-SHA-256"
    )


def test_each_broker_gets_its_first_cause() -> None:
    log = client_log(
        (
            KafkaError._RESOLVE,
            "b1:9092/bootstrap: Failed to resolve 'b1:9092': Name or service "
            "not known (after 0ms in state CONNECT)",
        ),
        (KafkaError._ALL_BROKERS_DOWN, "2/2 brokers are down"),
        (
            KafkaError._TRANSPORT,
            "ssl://b2:9092/bootstrap: SSL handshake failed: certificate "
            "verify failed (after 3ms in state SSL_HANDSHAKE)",
        ),
        (KafkaError._TRANSPORT, "b2:9092/bootstrap: Disconnected: connection reset by peer"),
        (KafkaError._RESOLVE, "b1:9092/bootstrap: Failed to resolve 'b1:9092': again"),
    )
    assert log.cause() == (
        "cannot resolve host 'b1'; b2:9092: SSL handshake failed: certificate verify failed"
    )


def test_a_timeout_and_silence_are_no_answer() -> None:
    timed_out = client_log(
        (
            KafkaError._TIMED_OUT,
            "b1:9092/bootstrap: ApiVersionRequest failed: Local: Timed out: "
            "probably due to broker version < 0.10 (after 10001ms in state APIVERSION_QUERY)",
        ),
    )
    assert timed_out.cause() == "no answer from b1:9092,b2:9092 within 2s (--timeout)"
    silent = client_log((KafkaError._ALL_BROKERS_DOWN, "2/2 brokers are down"))
    assert not client_log().unreachable()
    assert silent.cause() == "no answer from b1:9092,b2:9092 within 2s (--timeout)"


def test_the_log_lines_when_no_error_came() -> None:
    log = client_log(
        lines=(
            "CONNECT [rdkafka#producer-1] [thrd:app]: b1:9092/bootstrap: Selected for cluster "
            "connection",
            "FAIL [rdkafka#producer-1] [thrd:b1:9092/bootstrap]: b1:9092/bootstrap: Connect to "
            "ipv4#127.0.0.1:9092 failed: Connection refused (after 0ms in state CONNECT)",
        )
    )
    assert log.cause() == ("connection refused by 127.0.0.1:9092: is a broker listening there?")
    assert len(log.lines) == 2
