"""The pure domain of dataflow-operator.

Nothing here performs I/O or imports kopf, kubernetes or pyspark (an import-linter
contract enforces it). Functions that depend on the current time take ``now`` as a
parameter, in epoch milliseconds.
"""
