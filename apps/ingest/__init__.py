"""The event ingester: cluster objects and ClusterD signals in, typed job events out.

One pure module per source turns what it sees into ``Observation``s (``podgroups``, ``reset_config``,
``reschedule_reason``, ``ascendjobs``, ``k8s_events``, ``clusterd_faults``); ``store`` writes them
(diffing level-triggered sources against the last state it stored, so replays and relists never
repeat an event, and adopting AscendJobs: the ingester is their one observer). Around it, one module
per job: ``runner`` (terms of leadership), ``lease`` (one active ingester per cluster), ``watchers``
(the cluster's streams through ``apps.cluster.watch``, and ClusterD's), ``feed`` (their queue to the
applier), ``reorder`` (the buffer that puts the streams back in the server's order), ``applier``
(stores in that order, then advances ``cursors``).
"""
