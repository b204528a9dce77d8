"""Issue 26: a revision and a generation look alike and drift apart. The gateways page and
the Revisions page say what each is, and every generation shown comes with the revision it
holds (the API's desired_revision and acked_revision too)."""

import re

import pytest
from django.test import Client

from gateways import generation
from policy.publishing import load_state
from policy.services import update_policy

pytestmark = pytest.mark.django_db


def text(html: str) -> str:
    """What a reader sees of `html`: no tags, no space before a comma or closing bracket."""
    shown = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html)).strip()
    return re.sub(r"\( ", "(", re.sub(r" ([,)])", r"\1", shown))


@pytest.fixture
def drifted(make_gateway):
    """Revision 2 published, then two instance changes: generations run ahead of it. The
    gateway acked the generation of revision 1."""
    load_state()
    first = generation.bump("first use")
    update_policy({"users": ["1001"]}, partial=True, actor="bob", source="api",
                  expected_revision=None)  # fmt: skip
    for _ in range(2):
        generation.bump("instances of user-app")
    make_gateway("edge", acked_generation=first)
    return first, generation.newest_number(), load_state().revision


def test_the_gateways_page_shows_each_generation_with_its_revision(
    client: Client, make_user, drifted
):
    first, current, revision = drifted
    # Two instance changes made two generations of the one revision.
    assert (current - first, generation.revision_of(current - 1)) == (2, revision)
    client.force_login(make_user("vera", "viewer"))
    page = client.get("/gateways/").content.decode()
    shown = text(page)
    assert f"Current generation {current}, holding revision {revision}" in shown
    assert "A revision is a published change of the policy document" in shown
    assert "without a new revision, for every change of the routable instances" in shown
    assert f"{current} (revision {revision})" in shown
    assert f"{first} (revision {generation.revision_of(first)})" in shown
    assert generation.revision_of(first) == revision - 1


def test_the_api_says_which_revision_each_generation_holds(api, drifted):
    first, current, revision = drifted
    row = api("viewer").get("/api/v1/gateways/edge/").json()
    assert (row["desired_generation"], row["desired_revision"]) == (current, revision)
    assert (row["acked_generation"], row["acked_revision"]) == (first, revision - 1)


def test_a_gateway_without_an_ack_has_no_revision(api, make_gateway, db):
    make_gateway("fresh")
    row = api("viewer").get("/api/v1/gateways/fresh/").json()
    assert (row["acked_generation"], row["acked_revision"]) == (0, None)


def test_the_revisions_page_explains_generations(client: Client, make_user, drifted):
    _, current, revision = drifted
    client.force_login(make_user("vera", "viewer"))
    shown = text(client.get("/revisions/").content.decode())
    assert f"the gateways' current generation {current} holds revision {revision}" in shown
    assert "A generation is the configuration document a gateway holds" in shown
