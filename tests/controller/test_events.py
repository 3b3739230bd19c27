"""Events the status writer posts itself: the same form as kopf's, from the same component."""

from __future__ import annotations

import datetime

import kopf

from dataflow_operator.controller.events import MAX_MESSAGE_LENGTH, REPORTING_COMPONENT, event_body
from dataflow_operator.controller.handlers import configure_settings


def test_an_event_posted_outside_kopf_names_its_object_like_kopfs_own() -> None:
    involved = {
        "apiVersion": "dataflow.dev/v1alpha1",
        "kind": "Dataflow",
        "metadata": {"name": "df1", "namespace": "ns", "uid": "u-1", "labels": {"a": "b"}},
    }
    now = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
    body = event_body(
        involved, type="Normal", reason="Hydrated", message="x" * 2000, now=now, instance="pod-1"
    )
    assert body["involvedObject"] == {
        "apiVersion": "dataflow.dev/v1alpha1",
        "kind": "Dataflow",
        "name": "df1",
        "namespace": "ns",
        "uid": "u-1",
    }
    assert body["metadata"]["namespace"] == "ns"
    assert (body["type"], body["reason"]) == ("Normal", "Hydrated")
    assert len(body["message"]) == MAX_MESSAGE_LENGTH
    assert body["source"] == {"component": REPORTING_COMPONENT}
    assert body["reportingInstance"] == "pod-1"
    assert body["firstTimestamp"] == body["lastTimestamp"] == now.isoformat()


def test_kopfs_own_events_come_from_the_same_component() -> None:
    settings = kopf.OperatorSettings()
    configure_settings(settings)
    assert settings.posting.reporting_component == REPORTING_COMPONENT
