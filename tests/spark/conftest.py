"""One local SparkSession (local[2]) per test module, workers on this interpreter."""

from __future__ import annotations

import os
import sys

import pytest

from tests.support.processes import REPO_ROOT


@pytest.fixture(scope="module")
def spark():
    # Python workers run PYSPARK_PYTHON (else `python3` from PATH), and must find
    # broker_py (in the wheel; an editable install of the native module lacks it).
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYTHONPATH"] = os.pathsep.join(
        filter(None, [REPO_ROOT, os.environ.get("PYTHONPATH")])
    )
    from pyspark.sql import SparkSession

    import logstore.spark

    session = (
        SparkSession.builder.master("local[2]")
        .appName("logstore-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.memory", "1g")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    logstore.spark.register(session)
    yield session
    session.stop()
