"""Broker loggers: the log levels a client reads and changes at runtime through the
BROKER_LOGGER config resource (``kafka-configs.sh --entity-type broker-loggers``), as
Kafka's Log4jController offers them.

Each logger of the broker (``broker_py.*``, and ``kafka.request.logger``: the request
log, ``broker_py/network/request_logger.py``) and ``root`` is a config key whose value
is a log4j level name. Python has no TRACE or FATAL: they map to levels 5 and 50.
Unsetting a logger gives it the root's level back. A level is set only by one of Kafka's
six names, exactly (``FATAL``, ``ERROR``, ``WARN``, ``INFO``, ``DEBUG``, ``TRACE``); errors
carry Kafka's RuntimeLoggerManager texts.
"""

from __future__ import annotations

import logging

from logstore.protocol.errors import InvalidConfigError, InvalidRequestError

ROOT = "root"
_LEVELS = {
    "ALL": 1,
    "TRACE": 5,
    "DEBUG": 10,
    "INFO": 20,
    "WARN": 30,
    "ERROR": 40,
    "FATAL": 50,
    "OFF": logging.CRITICAL + 10,
}
_PREFIXES = ("broker_py", "kafka.")
# Kafka's LogLevelConfig.VALID_LOG_LEVELS, in the order its messages list them (sorted).
VALID_LOG_LEVELS = ("DEBUG", "ERROR", "FATAL", "INFO", "TRACE", "WARN")


def _name_of(level: int) -> str:
    """The log4j name of the highest level at or below ``level``."""
    return max(((v, k) for k, v in _LEVELS.items() if v <= level), default=(1, "ALL"))[1]


def _logger(name: str) -> logging.Logger:
    if name == ROOT:
        return logging.getLogger()
    if not name.startswith(_PREFIXES) or name not in logging.root.manager.loggerDict:
        raise InvalidConfigError(f"Logger {name} does not exist!")
    return logging.getLogger(name)


def levels() -> dict[str, str]:
    """Every broker logger with its effective level, by name."""
    names = [
        n
        for n, v in logging.root.manager.loggerDict.items()
        if n.startswith(_PREFIXES) and isinstance(v, logging.Logger)
    ]
    out = {ROOT: _name_of(logging.getLogger().getEffectiveLevel())}
    out.update({n: _name_of(logging.getLogger(n).getEffectiveLevel()) for n in sorted(names)})
    return out


def set_level(name: str, level: str | None, validate_only: bool = False) -> None:
    """Sets a logger's level, or with ``None`` gives it the root's (not for root)."""
    logger = _logger(name)
    if level is None:
        if name == ROOT:
            raise InvalidRequestError(f"Removing the log level of the {ROOT} logger is not allowed")
        if not validate_only:
            logger.setLevel(logging.NOTSET)
        return
    if level not in VALID_LOG_LEVELS:
        raise InvalidConfigError(
            f"Cannot set the log level of {name} to {level} as it is not a supported log "
            f"level. Valid log levels are {', '.join(VALID_LOG_LEVELS)}"
        )
    value = _LEVELS[level]
    if not validate_only:
        logger.setLevel(value)
