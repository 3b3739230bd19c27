"""The commands that run Spark: ``run``, ``replica``, ``insert`` and ``explain``.

Each module exposes ``configure(parser)`` and ``run(args) -> int`` for
:mod:`dataflow_operator.cli`; :mod:`.progress` is what ``run`` and ``replica`` print.
"""
