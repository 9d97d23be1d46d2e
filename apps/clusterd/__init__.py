"""The ClusterD adapter: the only product package that speaks gRPC to ClusterD."""
