"""How the tests' JVMs run: compiled by C1 only.

A test's JVMs live seconds to minutes, and on a 2-core machine the C2 compiler's threads
took more than they won back: the in-process Spark tests ran 20–25 % faster with C1
alone. Replicas and runs outside the tests keep the JVM's default (a replica runs for
weeks). The tests that run the console scripts exactly as a user would leave it out.
"""

from __future__ import annotations

TEST_JVM_OPTIONS = "-XX:TieredStopAtLevel=1"

TEST_SPARK_CONF = {
    "spark.driver.extraJavaOptions": TEST_JVM_OPTIONS,
    "spark.executor.extraJavaOptions": TEST_JVM_OPTIONS,
}
"""The Spark settings that apply :data:`TEST_JVM_OPTIONS` to the driver and executors."""
