"""Object names: DNS-1123 subdomains, and Replica names that leave room for their Service."""

from __future__ import annotations

from dataflow_operator.api.naming import driver_service_name
from dataflow_operator.controller.naming import label_value
from dataflow_operator.core.names import MAX_REPLICA_NAME, replica_name_problem, subdomain_problem


def test_subdomains() -> None:
    assert subdomain_problem("r1") is None
    assert subdomain_problem("a.b-c") is None
    assert "'!', 'D', '_' not allowed" in (subdomain_problem("D_1!") or "")
    assert "starting and ending" in (subdomain_problem("-a") or "")
    assert "at most 253" in (subdomain_problem("a" * 254) or "")


def test_the_longest_replica_name_keeps_its_service_name_and_labels_readable() -> None:
    longest = "r" * MAX_REPLICA_NAME
    assert replica_name_problem(longest) is None
    assert driver_service_name(longest) == f"{longest}-driver"
    assert len(driver_service_name(longest)) == 63
    assert label_value(longest) == longest
    assert "at most 56 characters (got 57)" in (replica_name_problem(longest + "r") or "")
