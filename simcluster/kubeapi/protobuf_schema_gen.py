"""Regenerate ``simcluster/data/k8s-protobuf-schema.json`` from the Go API types (not imported at runtime).

The field facts of every built-in Kubernetes message are in the struct tags of ``k8s.io/api`` and
``k8s.io/apimachinery``: ``json:"name,omitempty" protobuf:"bytes,3,opt,name=name"``. The Go field type
adds what the wire cannot say but JSON needs: whether a scalar is a pointer (a zero that was set is
still written to JSON) and whether a slice or map is dropped when empty (``omitempty``). This reads
those tags and writes one table of facts; ``protobuf.py`` builds protobuf descriptors from it.

    python -m simcluster.kubeapi.protobuf_schema_gen /path/to/kubernetes/api /path/to/kubernetes/apimachinery

Each path is a git directory (bare or not); the newest commit (``HEAD``) is read.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

OUT = Path(__file__).parent.parent / "data" / "k8s-protobuf-schema.json"

# k8s.io/api packages whose types kubectl, client-go and the product's manifests send.
API_PACKAGES = (
    "core/v1",
    "apps/v1",
    "batch/v1",
    "rbac/v1",
    "networking/v1",
    "policy/v1",
    "admissionregistration/v1",
    "authentication/v1",
    "authorization/v1",
    "autoscaling/v1",
    "autoscaling/v2",
    "scheduling/v1",
    "coordination/v1",
    "storage/v1",
    "certificates/v1",
    "discovery/v1",
    "events/v1",
    "node/v1",
)
META = "meta/v1"
# Types whose wire form is hand-described in protobuf.py (apimachinery's own marshallers).
SPECIAL = {
    "k8s.io/apimachinery/pkg/apis/meta/v1.Time": "Time",
    "k8s.io/apimachinery/pkg/apis/meta/v1.MicroTime": "MicroTime",
    "k8s.io/apimachinery/pkg/apis/meta/v1.Duration": "Duration",
    "k8s.io/apimachinery/pkg/apis/meta/v1.FieldsV1": "FieldsV1",
    "k8s.io/apimachinery/pkg/util/intstr.IntOrString": "IntOrString",
    "k8s.io/apimachinery/pkg/api/resource.Quantity": "Quantity",
    "k8s.io/apimachinery/pkg/runtime.RawExtension": "RawExtension",
}
SCALARS = {
    "string": "string",
    "bool": "bool",
    "int32": "int32",
    "int64": "int64",
    "int": "int64",
    "uint32": "uint32",
    "uint64": "uint64",
    "float64": "double",
    "float32": "float",
}
_STRUCT = re.compile(r"^type (\w+) struct \{\n(.*?)^\}", re.S | re.M)
_NAMED = re.compile(r"^type (\w+) (\S[^\n{]*)$", re.M)
_FIELD = re.compile(r"^\s+(?:(\w+)\s+)?([^\s`]+)\s+`([^`]*)`", re.M)
_IMPORT = re.compile(r'^\s*(?:(\w+)\s+)?"([^"]+)"\s*$', re.M)


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout


def _package_files(repo: Path, pkg: str) -> list[str]:
    names = _git(repo, "ls-tree", "--name-only", "HEAD", f"{pkg}/").split()
    out = []
    for name in names:
        if name.endswith(".go") and not name.endswith("_test.go") and "zz_generated" not in name:
            text = _git(repo, "show", f"HEAD:{name}")
            if 'protobuf:"' in text or re.search(r"^type \w+ ", text, re.M):
                out.append(text)
    return out


def _tag(tags: str, key: str) -> str | None:
    found = re.search(rf'(?:^|\s){key}:"([^"]*)"', tags)
    return found.group(1) if found else None


class Package:
    def __init__(self, import_path: str, texts: list[str]) -> None:
        self.path = import_path
        self.texts = texts
        self.named: dict[str, str] = {}
        self.structs: dict[str, str] = {}
        self.imports: dict[str, str] = {}
        for text in texts:
            for alias, path in _IMPORT.findall(text):
                self.imports[alias or path.rsplit("/", 1)[-1]] = path
            for name, body in _STRUCT.findall(text):
                self.structs[name] = body
            for name, underlying in _NAMED.findall(text):
                if not underlying.startswith(("struct", "interface", "=")):
                    self.named[name] = underlying.split("//")[0].strip()


class Generator:
    def __init__(self, packages: dict[str, Package]) -> None:
        self.packages = packages
        self.messages: dict[str, list[list[Any]]] = {}
        self.skipped: list[str] = []

    def _resolve(self, pkg: Package, go_type: str) -> tuple[str, str]:
        """(package import path, bare type name) of a possibly qualified type name."""
        if "." in go_type:
            alias, name = go_type.split(".", 1)
            return pkg.imports.get(alias, alias), name
        return pkg.path, go_type

    def type_of(self, pkg: Package, go_type: str, label: str) -> tuple[str, str]:
        """(proto type, shape) where shape is '' | 'rep' | 'map' | 'wrap' (a named list in a message)."""
        if go_type == "[]byte":
            return "bytes", ""
        if go_type.startswith("[]"):
            inner, _ = self.type_of(pkg, go_type[2:].lstrip("*"), "opt")
            return inner, "rep"
        if go_type.startswith("map["):
            value = go_type[go_type.index("]") + 1 :]
            inner, shape = self.type_of(pkg, value, "opt")
            if shape == "rep":  # map[string][]string: the value is a wrapper message {items=1}
                inner = self._wrapper(inner)
            return inner, "map"
        if go_type in SCALARS:
            return SCALARS[go_type], ""
        path, name = self._resolve(pkg, go_type)
        qualified = f"{path}.{name}"
        if qualified in SPECIAL:
            return "@" + SPECIAL[qualified], ""
        if path == "k8s.io/apimachinery/pkg/types":
            return "string", ""
        owner = self.packages.get(path)
        if owner is None:
            raise KeyError(f"{qualified}: package not read")
        if name in owner.structs:
            self.message(owner, name)
            return self.key(owner, name), ""
        if name in owner.named:
            inner, shape = self.type_of(owner, owner.named[name], label)
            if shape == "rep" and label == "opt":  # a named list as a single field: {items=1}
                return self._wrapper(inner), ""
            return inner, shape
        raise KeyError(f"{qualified}: unknown type")

    def _wrapper(self, item: str) -> str:
        key = f"@List[{item}]"
        self.messages.setdefault(key, [[1, "items", item, "r"]])
        return key

    @staticmethod
    def key(pkg: Package, name: str) -> str:
        short = pkg.path.removeprefix("k8s.io/api/").removeprefix("k8s.io/apimachinery/pkg/apis/")
        return f"{short}.{name}"

    def message(self, pkg: Package, name: str) -> None:
        key = self.key(pkg, name)
        if key in self.messages:
            return
        self.messages[key] = fields = []
        for _name, go_type, tags in _FIELD.findall(pkg.structs[name]):
            proto = _tag(tags, "protobuf")
            if proto is None or proto.startswith("-"):
                continue
            parts = proto.split(",")
            number, label = int(parts[1]), parts[2]
            json_tag = (_tag(tags, "json") or "").split(",")
            flags = ""
            if json_tag[0] == "":  # embedded with no JSON name: its fields are the parent's in JSON
                flags += "i"
            if go_type.startswith("*"):
                flags += "p"
            if "omitempty" in json_tag[1:]:
                flags += "o"
            try:
                ptype, shape = self.type_of(pkg, go_type.lstrip("*"), label)
            except KeyError as exc:  # a type of a package not read (alpha APIs): the field is not decoded
                self.skipped.append(f"{key}.{json_tag[0]}: {exc.args[0]}")
                continue
            flags += {"rep": "r", "map": "m"}.get(shape, "")
            fields.append([number, json_tag[0], ptype, flags])
        fields.sort()


def _group_versions(api: Path) -> dict[str, str]:
    out = {}
    for pkg in API_PACKAGES:
        register = _git(api, "show", f"HEAD:{pkg}/register.go")
        group = re.search(r'GroupName\s*=\s*"([^"]*)"', register)
        version = pkg.split("/")[1]
        assert group is not None
        out[f"{group.group(1)}/{version}" if group.group(1) else version] = pkg
    return out


def _kinds(packages: dict[str, Package], gv: dict[str, str]) -> dict[str, str]:
    """apiVersion/Kind -> message key, for every top-level object (a struct that embeds TypeMeta)."""
    out = {}
    for api_version, pkg in gv.items():
        package = packages[f"k8s.io/api/{pkg}"]
        for name, body in package.structs.items():
            if re.search(r"^\s+metav1\.TypeMeta\s", body, re.M):
                out[f"{api_version}/{name}"] = f"{pkg}.{name}"
    for name in ("DeleteOptions", "Status", "CreateOptions", "PatchOptions", "UpdateOptions"):
        out[f"meta.k8s.io/v1/{name}"] = f"{META}.{name}"
        out[f"v1/{name}"] = f"{META}.{name}"
    return out


def main(api: Path, machinery: Path) -> None:
    packages: dict[str, Package] = {}
    for pkg in API_PACKAGES:
        packages[f"k8s.io/api/{pkg}"] = Package(f"k8s.io/api/{pkg}", _package_files(api, pkg))
    meta_path = "k8s.io/apimachinery/pkg/apis/meta/v1"
    packages[meta_path] = Package(meta_path, _package_files(machinery, "pkg/apis/meta/v1"))
    gen = Generator(packages)
    gv = _group_versions(api)
    kinds = _kinds(packages, gv)
    for key in sorted(set(kinds.values())):
        path, name = key.rsplit(".", 1)
        full = meta_path if path == META else f"k8s.io/api/{path}"
        gen.message(packages[full], name)
    doc = {
        "source": {
            "k8s.io/api": _git(api, "rev-parse", "HEAD").strip(),
            "k8s.io/apimachinery": _git(machinery, "rev-parse", "HEAD").strip(),
        },
        "fields": "[number, json name, type ('@X' special, else a message key or a scalar), flags]",
        "flags": "i inline (embedded), p Go pointer, o omitempty, r repeated, m map<string, type>",
        "kinds": dict(sorted(kinds.items())),
        "messages": dict(sorted(gen.messages.items())),
    }
    OUT.write_text(json.dumps(doc, indent=0, separators=(",", ":")) + "\n")
    print(f"{OUT}: {len(kinds)} kinds, {len(gen.messages)} messages")
    print("not decoded:", *gen.skipped, sep="\n  ")


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
