"""Generated protobuf/gRPC modules for the ClusterD wire contract (see ``mindcluster/wire/protos``).

Committed to the repository; regenerated at import time if any module is missing.
"""

from mindcluster.wire.protos import generate as _generate, generated_files as _generated_files

if not all(path.exists() for path in _generated_files()):
    _generate()
