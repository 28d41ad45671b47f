"""PySpark data source ``logstore``: reads logstore topics into Spark.

``kafka_client`` holds the synchronous Kafka wire-protocol client that
executors use to read a cluster over the network.
"""
