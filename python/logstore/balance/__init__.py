"""Partition placement: :mod:`logstore.balance.planner`, the pure planner behind
``logstore cluster partitions balance`` and ``logstore cluster decommission``."""
