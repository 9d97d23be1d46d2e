"""The event ingester: cluster objects and ClusterD signals in, typed job events out.

One pure module per source turns what it sees into ``Observation``s (``podgroups``, ``reset_config``,
``reschedule_reason``, ``ascendjobs``, ``k8s_events``, ``clusterd_faults``); ``store`` writes them
(diffing level-triggered sources against the last state it stored, so replays and relists never
repeat an event); ``runner`` watches the cluster and the ClusterD stream and feeds ``store``.
"""
