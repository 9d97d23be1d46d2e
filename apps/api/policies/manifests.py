"""AscendJob manifests as the API receives them: a YAML/JSON string (one or more documents) or an object."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import yaml

from apps.core.api_errors import field_error
from apps.core.parsers import json_safety_problem
from mindcluster import keys as k

Format = Literal["yaml", "json"]
MAX_MANIFEST_CHARS = 1_000_000
# A real AscendJob has a few hundred values; this bound also defuses YAML alias bombs.
MAX_MANIFEST_NODES = 100_000


class _JsonSafeLoader(yaml.SafeLoader):
    """SafeLoader that yields only JSON types: timestamps stay strings, binary and sets are refused."""


def _as_string(loader: yaml.SafeLoader, node: yaml.Node) -> str:
    if not isinstance(node, yaml.ScalarNode):  # e.g. ``!!timestamp {a: 1}``
        return str(_refuse(loader, node))
    return str(loader.construct_scalar(node))


def _refuse(loader: yaml.SafeLoader, node: yaml.Node) -> Any:
    raise yaml.constructor.ConstructorError(
        None, None, f"the YAML tag {node.tag} has no JSON equivalent", node.start_mark
    )


# Drop the implicit timestamp resolver: "2024-01-01" must stay the string the user wrote.
_JsonSafeLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_JsonSafeLoader.add_constructor("tag:yaml.org,2002:timestamp", _as_string)
_JsonSafeLoader.add_constructor("tag:yaml.org,2002:binary", _refuse)
_JsonSafeLoader.add_constructor("tag:yaml.org,2002:set", _refuse)


@dataclass
class ParsedManifest:
    """The documents as given, which one is the AscendJob, and the format they came in."""

    documents: list[Any]
    job_index: int
    format: Format

    @property
    def job(self) -> Any:
        return self.documents[self.job_index]

    def with_job(self, merged: dict[str, Any]) -> list[Any]:
        """The documents with the AscendJob replaced by ``merged`` (other documents kept as they were)."""
        documents = list(self.documents)
        documents[self.job_index] = merged
        return documents


def parse_manifest(raw: Any, field: str = "manifest") -> ParsedManifest:
    """Parse the ``manifest`` of a request; a 400 naming ``field`` when it cannot be read at all.

    Structural problems of the AscendJob itself are left to ``validate_manifest``.
    """
    if isinstance(raw, dict):
        return ParsedManifest(documents=[raw], job_index=0, format="json")
    if not isinstance(raw, str):
        raise field_error(field, "The manifest must be a YAML/JSON string or a JSON object.", "invalid_type")
    if len(raw) > MAX_MANIFEST_CHARS:
        raise field_error(field, f"The manifest is longer than {MAX_MANIFEST_CHARS} characters.", "too_long")
    try:
        documents = [doc for doc in yaml.load_all(raw, Loader=_JsonSafeLoader) if doc is not None]
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f" at line {mark.line + 1} column {mark.column + 1}" if mark else ""
        raise field_error(
            field, f"The manifest is not valid YAML{where}: {exc.problem or exc}.", "invalid_yaml"
        ) from None
    except (yaml.YAMLError, RecursionError, ValueError) as exc:
        raise field_error(field, f"The manifest is not valid YAML: {exc}.", "invalid_yaml") from None
    if not documents:
        raise field_error(field, "The manifest is empty.", "invalid_yaml")
    problem = json_safety_problem(documents, max_nodes=MAX_MANIFEST_NODES)
    if problem:
        raise field_error(field, f"The manifest cannot be used: {problem}.", "invalid_yaml")
    jobs = [
        i for i, doc in enumerate(documents) if isinstance(doc, dict) and doc.get("kind") == k.ASCENDJOB_KIND
    ]
    if len(documents) > 1 and not jobs:
        kinds = ", ".join(str(d.get("kind")) for d in documents if isinstance(d, dict)) or "none"
        raise field_error(
            field,
            f"No {k.ASCENDJOB_KIND} among the {len(documents)} documents (kinds: {kinds}).",
            "no_ascendjob",
        )
    return ParsedManifest(documents=documents, job_index=jobs[0] if jobs else 0, format="yaml")


def dump(documents: list[Any], fmt: Format) -> Any:
    """YAML text (documents separated by ``---``) or, for JSON, the object (a list for several)."""
    if fmt == "json":
        return documents[0] if len(documents) == 1 else documents
    return yaml.safe_dump_all(documents, sort_keys=False, allow_unicode=True, default_flow_style=False)


def dump_one(document: Any, fmt: Format) -> Any:
    return dump([document], fmt)


def declared_release(manifest: Any) -> str | None:
    """The MindCluster release a manifest declares in our label or annotation, if any."""
    if not isinstance(manifest, dict) or not isinstance(manifest.get("metadata"), dict):
        return None
    meta = manifest["metadata"]
    for section, key in (("labels", k.LABEL_RELEASE), ("annotations", k.ANNOTATION_RELEASE)):
        values = meta.get(section)
        if isinstance(values, dict) and isinstance(values.get(key), str):
            return str(values[key])
    return None
