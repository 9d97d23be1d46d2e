"""Pure MindCluster knowledge: no Django, no I/O, no product concepts.

What the real cluster spells and decides, read from the MindCluster source: the names it reads and
writes (``keys``), its releases (``releases``), its recovery strategies and their order
(``strategies``), the env the ascend-operator injects for them (``operator_env``) and ClusterD's
strategy choice as a pure function (``clusterd``). Everything in the
product and in the simulator may import this package; it imports nothing from either.
"""
