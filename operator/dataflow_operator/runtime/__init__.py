"""The replica runtime: the PySpark program that runs in a replica's driver.

It maintains every dataflow of its cluster as Spark Structured Streaming queries, each
under its own cancellation scope, and reports frontiers, expiration and hydration.
"""
