"""The Spark settings a dataflow's streaming query starts with.

A query clones the session's settings when it starts, so the engine sets these for the
start only: the query's state partitions (fixed by the checkpoint once created),
RocksDB's changelog checkpointing (a commit writes a small changelog instead of syncing
snapshot files every batch), no batches without new input (the engine asks for the one
a step needs: :meth:`~.running.RunningDataflow.settle`), how many batches of logs and
state versions it keeps, and, on a local file system, the checkpoint file manager on
Hadoop's ``FileSystem``.
"""

from __future__ import annotations

from dataflow_operator.runtime.storage import Location

__all__ = ["RETAINED_BATCHES", "SHUFFLE_PARTITIONS", "query_conf"]

SHUFFLE_PARTITIONS = "spark.sql.shuffle.partitions"
CHANGELOG_CHECKPOINTING = "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled"
NO_DATA_BATCHES = "spark.sql.streaming.noDataMicroBatches.enabled"
MIN_BATCHES_TO_RETAIN = "spark.sql.streaming.minBatchesToRetain"
RETAINED_BATCHES = 20
"""Batches of Spark's offset and commit logs and of state store versions a query keeps:
a restart needs only the last; the rest bound what a long run keeps (design 3)."""
CHECKPOINT_FILE_MANAGER = "spark.sql.streaming.checkpointFileManagerClass"
LOCAL_CHECKPOINT_FILE_MANAGER = (
    "org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager"
)
"""Spark's default manager goes through Hadoop's ``FileContext``, whose renames are atomic
on HDFS. On a local file system a rename is atomic either way, and a state commit
(Spark's ``commitTimeMs``) is much shorter through ``FileSystem`` than through
``FileContext`` (``bench/RESULTS.md``)."""


def query_conf(checkpoint: Location, state_partitions: int) -> dict[str, str]:
    """The settings a query whose checkpoint is at ``checkpoint`` starts with."""
    conf = {
        CHANGELOG_CHECKPOINTING: "true",
        NO_DATA_BATCHES: "false",
        MIN_BATCHES_TO_RETAIN: str(RETAINED_BATCHES),
        SHUFFLE_PARTITIONS: str(state_partitions),
    }
    if checkpoint.local_path is not None:
        conf[CHECKPOINT_FILE_MANAGER] = LOCAL_CHECKPOINT_FILE_MANAGER
    return conf
