"""``python manage.py sim_fault NAMESPACE/JOB --rank R --type uce``: inject a fault into a running sim."""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import yaml
from django.core.management.base import BaseCommand, CommandError

from simcluster.endpoints import DEFAULT_KUBECONFIG, FAULT_ENDPOINT_EXTENSION
from simcluster.injector import FAULT_KINDS, KNOWN_LEVELS, FaultSpecError, parse_job_ref

EXIT_UNKNOWN_JOB = 1
EXIT_BAD_INPUT = 2


def control_url_from_kubeconfig(path: str) -> str:
    """The control endpoint of a simulated cluster: the URL ``manage.py simcluster`` records in the
    kubeconfig's cluster extension, else (older kubeconfigs) the API server URL with the port plus one."""
    try:
        config = yaml.safe_load(Path(path).read_text())
        cluster = config["clusters"][0]["cluster"]
        server = cluster["server"]
    except (OSError, yaml.YAMLError, KeyError, IndexError, TypeError) as exc:
        raise CommandError(f"cannot read the API server URL from kubeconfig {path}: {exc}") from exc
    for extension in cluster.get("extensions") or []:
        if isinstance(extension, dict) and extension.get("name") == FAULT_ENDPOINT_EXTENSION:
            url = (extension.get("extension") or {}).get("url")
            if url:
                return str(url)
    parts = urlsplit(server)
    if parts.port is None or parts.hostname is None:
        raise CommandError(f"kubeconfig {path} has no server port in {server!r}")
    return urlunsplit(("http", f"{parts.hostname}:{parts.port + 1}", "", "", ""))


class Command(BaseCommand):
    help = "Inject a fault into a running simulated MindCluster cluster (see `manage.py simcluster`)."
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("job", help="NAMESPACE/JOB (or JOB in namespace default)")
        parser.add_argument(
            "--rank", type=int, default=0, help="pod rank (hccl/rankIndex) to hit (default 0)"
        )
        parser.add_argument(
            "--type",
            dest="fault_type",
            choices=FAULT_KINDS,
            default="normal",
            help="fault type (default normal)",
        )
        parser.add_argument("--code", default=None, help="fault code, e.g. 80E01801")
        parser.add_argument("--level", default=None, choices=KNOWN_LEVELS, help="fault handling level")
        parser.add_argument("--fails", action="store_true", help="every recovery attempt fails")
        parser.add_argument("--control-url", default=None, help="the simulator's control endpoint URL")
        parser.add_argument(
            "--kubeconfig",
            default=None,
            help=f"kubeconfig of the simulator (default $KUBECONFIG or ./{DEFAULT_KUBECONFIG}); "
            "its server port + 1 is the control endpoint",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            namespace, name = parse_job_ref(options["job"])
        except FaultSpecError as exc:
            raise CommandError(str(exc), returncode=EXIT_BAD_INPUT) from exc
        if options["rank"] < 0:
            raise CommandError("--rank must be >= 0", returncode=EXIT_BAD_INPUT)
        kubeconfig = options["kubeconfig"] or os.environ.get("KUBECONFIG") or str(DEFAULT_KUBECONFIG)
        url = options["control_url"] or control_url_from_kubeconfig(kubeconfig)
        # With only --control-url given, the default kubeconfig may name another (or a stopped)
        # cluster: check the rank range only against the cluster the user pointed at.
        if not options["control_url"] or options["kubeconfig"] or os.environ.get("KUBECONFIG"):
            _check_rank(kubeconfig, namespace, name, options["rank"])
        body = {
            "namespace": namespace,
            "job": name,
            "rank": options["rank"],
            "type": options["fault_type"],
            "code": options["code"],
            "level": options["level"],
            "recovers": not options["fails"],
        }
        request = urllib.request.Request(
            f"{url.rstrip('/')}/faults",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                answer = json.loads(response.read() or b"{}")
        except urllib.error.HTTPError as exc:
            message = _error_message(exc)
            if exc.code == 404:
                raise CommandError(
                    f"unknown job {namespace}/{name}: {message}", returncode=EXIT_UNKNOWN_JOB
                ) from exc
            if exc.code == 400:
                raise CommandError(f"bad fault: {message}", returncode=EXIT_BAD_INPUT) from exc
            raise CommandError(f"the simulator answered {exc.code}: {message}") from exc
        except (urllib.error.URLError, OSError) as exc:
            raise CommandError(f"cannot reach the simulator's control endpoint at {url}: {exc}") from exc
        self.stdout.write(
            f"injected {answer.get('id')} into {namespace}/{name} rank {options['rank']} "
            f"({options['fault_type']})"
        )


def _check_rank(kubeconfig: str, namespace: str, name: str, rank: int) -> None:
    """Say which ranks the job has before asking the simulator (best effort: skipped when the API
    server cannot be read through ``kubeconfig``)."""
    from kubernetes.client.exceptions import ApiException
    from urllib3.exceptions import HTTPError as Urllib3Error

    from simcluster.kube import Kube
    from simcluster.operator import pod_slots

    if not Path(kubeconfig).is_file():
        return
    try:
        kube = Kube(kubeconfig)
    except Exception:  # not a kubeconfig we can use: the control endpoint still answers
        return
    try:
        job = kube.get_job(namespace, name)
    except (ApiException, Urllib3Error, OSError, ValueError):  # unreachable: the endpoint decides
        return
    finally:
        kube.close()
    if job is None:
        raise CommandError(f"unknown job {namespace}/{name}: no such AscendJob", returncode=EXIT_UNKNOWN_JOB)
    count = len(pod_slots(job))
    if not 0 <= rank < count:
        ranks = f"ranks 0-{count - 1}" if count else "no pods"
        raise CommandError(
            f"--rank {rank} is out of range: job {namespace}/{name} has {ranks} ({count} pods)",
            returncode=EXIT_BAD_INPUT,
        )


def _error_message(exc: urllib.error.HTTPError) -> str:
    try:
        return str(json.loads(exc.read()).get("error"))
    except (ValueError, AttributeError):
        return exc.reason or ""
