"""A Replica's reconciliation: one kopf daemon per Replica, observe → decide → act.

:mod:`.daemon` runs the loop; :mod:`.logic`'s ``decide`` is a pure state machine
(tested as data) over :mod:`.view` (what was observed, what is decided), with
:mod:`.attempts` (starting, failing and backing off driver attempts), :mod:`.expiry`
(the expiration restart), :mod:`.handover` (make-before-break) and :mod:`.storage`
(the state claim); :mod:`.resources` makes the decided objects exist and
:mod:`.control` talks to each driver attempt's control API. Pods and claims read into
small values (:mod:`~dataflow_operator.controller.shared.observation`) and the registry
of what each daemon knows are shared with the Dataflow room.
"""
