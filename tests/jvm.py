"""How the tests' JVMs run: compiled by C1 only.

A test's JVMs live seconds to minutes, and on a 2-core machine the C2 compiler's threads
took more than they won back: two sets of in-process Spark tests, run alone, took 19 %
and 23 % less time with C1 only (the whole suite gained less: its session's JVM lives
long enough for C2 to pay off in part). Replicas and runs outside the tests keep the JVM's default (a replica runs for
weeks). The tests that run the console scripts exactly as a user would leave it out.
"""

from __future__ import annotations

TEST_JVM_OPTIONS = "-XX:TieredStopAtLevel=1"

TEST_SPARK_CONF = {
    "spark.driver.extraJavaOptions": TEST_JVM_OPTIONS,
    "spark.executor.extraJavaOptions": TEST_JVM_OPTIONS,
}
"""The Spark settings that apply :data:`TEST_JVM_OPTIONS` to the driver and executors."""
