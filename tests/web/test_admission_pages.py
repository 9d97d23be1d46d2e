"""The issue-15 pages render: the namespace-defaults page and the recreate block on the job page."""

from __future__ import annotations

import pytest
from django.test import Client

from tests.support.world import World

pytestmark = pytest.mark.django_db


def signed_in(world: World, persona: str) -> Client:
    client = Client()
    client.force_login(world.users[persona])
    return client


def test_namespace_defaults_page_is_in_the_navigation(world: World) -> None:
    page = signed_in(world, "admin").get("/namespaces/")
    assert page.status_code == 200
    html = page.content.decode()
    assert 'id="ns-pick"' in html and "namespace_defaults.js" in html and 'aria-current="page"' in html


def test_job_page_has_the_recreate_block_hidden_until_keys_wait(world: World) -> None:
    html = signed_in(world, "owner").get(f"/jobs/{world.job.pk}/").content.decode()
    assert '<section id="recreate"' in html and "hidden" in html.split('<section id="recreate"')[1][:120]
    assert "recreate.js" in html and "last checkpoint" in html
