"""Pure MindCluster knowledge: no Django, no I/O, no product concepts.

What the real cluster spells and decides, read from the MindCluster source: the names it reads and
writes (``keys``), its releases (``releases``), its recovery strategies and their order
(``strategies``), its fault types, handling levels and well-known codes (``faults``), the
``reset.json`` format (``reset_json``), the env the ascend-operator injects (``operator_env``) and
its AscendJob validation (``operator_validation``), ClusterD's strategy choice as a pure function
(``clusterd``) and ClusterD's gRPC wire contract (``wire``, the one part that needs protobuf/grpc).
Everything in the product and in the simulator may import this package; it imports nothing from either.
"""
