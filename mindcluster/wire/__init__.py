"""ClusterD's gRPC wire contract: the .proto files (``protos``) and the modules protoc makes of them.

The one part of ``mindcluster`` that is not stdlib-only: the generated modules import protobuf and
grpc (the purity contract in pyproject.toml allows exactly that, for this package only). It is a
MindCluster fact like the rest (names, packages and field numbers of the real ClusterD's messages),
so the product's ClusterD client and the simulated ClusterD both read it from here.
"""
