#!/usr/bin/env python3
"""A CI/CD pipeline talking to the control plane's REST API, with nothing but the standard library.

Three steps a pipeline typically runs (each prints JSON on stdout; errors go to stderr):

    export CONTROLPLANE_URL=https://controlplane.example.com CONTROLPLANE_TOKEN=<key>

    # 1. CI gate: fail the build when the policy is invalid for the job's manifest
    python pipeline.py validate policy.json --manifest job.yaml

    # 2. Before `kubectl apply`: merge the policy into the manifest (YAML in, YAML out)
    python pipeline.py render --manifest job.yaml --policy policy.json --out job.rendered.yaml

    # 3. Change the policy of a running job and queue its push (lost-update safe via If-Match)
    python pipeline.py apply --job team-a/llama-7b policy.json --comment "from pipeline #42"

Exit codes: 0 success, 1 the API said no (invalid policy, conflict, ...), 2 usage or connection errors.
Create a token with ``python manage.py issue_token USERNAME --name ci`` or on the dashboard's token page.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

TIMEOUT_SECONDS = 30


class ApiError(Exception):
    """A non-2xx answer: status, the API's ``errors`` list, and the rest of the body."""

    def __init__(self, status: int, body: dict[str, Any]) -> None:
        self.status = status
        self.body = body
        errors = body.get("errors") or [{"message": str(body)}]
        super().__init__("; ".join(f"{e.get('field') or '-'}: {e.get('message')}" for e in errors))


class Client:
    """Minimal JSON client: ``Authorization: Token <key>``, JSON in and out, errors as ``ApiError``."""

    def __init__(self, base_url: str, token: str) -> None:
        self.base_url = base_url.rstrip("/") + "/api/v1/"
        self.token = token

    def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        headers: dict[str, str] | None = None,
    ) -> tuple[int, dict[str, Any], dict[str, str]]:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(urllib.parse.urljoin(self.base_url, path), data=data, method=method)
        request.add_header("Authorization", f"Token {self.token}")
        request.add_header("Accept", "application/json")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        for name, value in (headers or {}).items():
            request.add_header(name, value)
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT_SECONDS) as response:
                payload = response.read()
                return response.status, json.loads(payload) if payload else {}, dict(response.headers)
        except urllib.error.HTTPError as exc:
            payload = exc.read()
            try:
                parsed = json.loads(payload) if payload else {}
            except ValueError:
                parsed = {"errors": [{"message": payload[:200].decode(errors="replace")}]}
            raise ApiError(exc.code, parsed) from None


def read_json(path: str) -> Any:
    return json.loads(Path(path).read_text(encoding="utf-8"))


def find_job(client: Client, ref: str) -> int:
    """A job id from ``ID`` or ``NAMESPACE/NAME`` (optionally ``CLUSTER/NAMESPACE/NAME``)."""
    if ref.isdigit():
        return int(ref)
    parts = ref.split("/")
    if len(parts) not in (2, 3):
        raise SystemExit(f"--job must be an id, NAMESPACE/NAME or CLUSTER/NAMESPACE/NAME, not {ref!r}")
    query = {"namespace": parts[-2], "q": parts[-1]}
    if len(parts) == 3:
        query["cluster"] = parts[0]
    _, page, _ = client.call("GET", "jobs/?" + urllib.parse.urlencode(query))
    matches = [job for job in page["results"] if job["name"] == parts[-1]]
    if len(matches) != 1:
        raise SystemExit(f"{len(matches)} jobs match {ref!r}; give the id or the cluster")
    return int(matches[0]["id"])


def cmd_validate(client: Client, args: argparse.Namespace) -> int:
    body: dict[str, Any] = {"spec": read_json(args.policy)}
    if args.manifest:
        body["manifest"] = Path(args.manifest).read_text(encoding="utf-8")
    _, result, _ = client.call("POST", "policies/validate/", body)
    print(json.dumps(result, indent=2, ensure_ascii=False))
    return 0 if result["valid"] else 1


def cmd_render(client: Client, args: argparse.Namespace) -> int:
    body: dict[str, Any] = {"manifest": Path(args.manifest).read_text(encoding="utf-8")}
    if args.preset:
        body["preset"] = args.preset
    else:
        body["policy"] = read_json(args.policy)
    _, result, _ = client.call("POST", "render/", body)
    if args.out:
        # The ConfigMap with manager.py travels with the job, so one `kubectl apply -f` creates both.
        documents = result["manifest"] + (f"---\n{result['configmap']}" if result["configmap"] else "")
        Path(args.out).write_text(documents, encoding="utf-8")
    print(json.dumps(result, indent=2, ensure_ascii=False))
    return 0


def cmd_apply(client: Client, args: argparse.Namespace) -> int:
    job_id = find_job(client, args.job)
    _, current, headers = client.call("GET", f"jobs/{job_id}/policy/")
    etag = headers.get("ETag") or f'"{current["revision"] or 0}"'
    # If-Match: if someone changed the policy since we read it, the API answers 409 instead of overwriting.
    _, saved, _ = client.call(
        "PUT",
        f"jobs/{job_id}/policy/",
        {"spec": read_json(args.policy), "comment": args.comment},
        {"If-Match": etag},
    )
    status, sync, _ = client.call("POST", f"jobs/{job_id}/policy/apply/")
    print(
        json.dumps(
            {
                "job": job_id,
                "revision": saved["revision"],
                "warnings": saved["warnings"],
                "status": status,
                "sync": sync,
            },
            indent=2,
            ensure_ascii=False,
        )
    )
    return 0 if status == 202 else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default=os.environ.get("CONTROLPLANE_URL", "http://127.0.0.1:8000"))
    parser.add_argument("--token", default=os.environ.get("CONTROLPLANE_TOKEN"))
    commands = parser.add_subparsers(dest="command", required=True)
    validate = commands.add_parser("validate", help="validate a policy (exit 1 when invalid)")
    validate.add_argument("policy", metavar="POLICY.json")
    validate.add_argument("--manifest", metavar="JOB.yaml")
    render = commands.add_parser("render", help="merge a policy or preset into an AscendJob manifest")
    render.add_argument("--manifest", required=True, metavar="JOB.yaml")
    source = render.add_mutually_exclusive_group(required=True)
    source.add_argument("--policy", metavar="POLICY.json")
    source.add_argument("--preset")
    render.add_argument("--out", metavar="FILE", help="write the merged YAML (job + ConfigMap) here")
    apply = commands.add_parser("apply", help="set a running job's policy and queue its push")
    apply.add_argument("--job", required=True, help="job id, NAMESPACE/NAME or CLUSTER/NAMESPACE/NAME")
    apply.add_argument("policy", metavar="POLICY.json")
    apply.add_argument("--comment", default="set by pipeline")
    args = parser.parse_args(argv)
    if not args.token:
        parser.error("give --token or set CONTROLPLANE_TOKEN")
    client = Client(args.url, args.token)
    handlers = {"validate": cmd_validate, "render": cmd_render, "apply": cmd_apply}
    try:
        return handlers[args.command](client, args)
    except ApiError as exc:
        print(f"error: HTTP {exc.status}: {exc}", file=sys.stderr)
        print(json.dumps(exc.body, indent=2, ensure_ascii=False))
        return 1
    except (urllib.error.URLError, OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
