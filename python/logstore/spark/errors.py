"""Errors of the ``logstore`` Spark data source, under ``logstore.LogStoreError``."""

from __future__ import annotations

from logstore import LogStoreError


class SparkSourceError(LogStoreError):
    """Base of every error the Spark data source raises itself."""


class InvalidOptionError(SparkSourceError):
    """A data source option is missing, unknown in its value, or inconsistent; the message
    names it."""


class DataLossError(SparkSourceError):
    """Records the query planned to read are gone (retention, DeleteRecords) and
    failOnDataLoss is true."""


class OffsetForTimestampNotFound(SparkSourceError):
    """No record has a timestamp at or after the one asked
    (startingOffsetsByTimestampStrategy=error)."""


class UnknownPartitionError(SparkSourceError):
    """The ``assign`` option names a topic-partition the log does not have."""
