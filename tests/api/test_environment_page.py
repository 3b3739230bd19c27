"""The injected-environment page lists every name :mod:`api.injection` defines."""

from __future__ import annotations

from dataflow_operator.api import injection
from dataflow_operator.api.environment_page import render_environment


def _constants(prefix: str) -> set[str]:
    return {
        value
        for name, value in vars(injection).items()
        if name.startswith(prefix) and isinstance(value, str)
    }


def test_every_injected_variable_has_a_row() -> None:
    listed = {item.variable for item in injection.INJECTED}
    # DATAFLOW_STATE_DIR is read, never injected: DATAFLOW_STATE_URI's row names it
    assert listed == _constants("ENV_") - {injection.ENV_STATE_DIR}


def test_every_name_and_conf_twin_is_on_the_page() -> None:
    page = render_environment()
    for name in _constants("ENV_") | _constants("CONF_"):
        assert f"`{name}`" in page, name


def test_every_exit_code_is_on_the_page() -> None:
    page = render_environment()
    codes = {
        value
        for name, value in vars(injection).items()
        if name.startswith("EXIT_") and isinstance(value, int)
    }
    assert {code for code, _ in injection.EXIT_CODES} == codes
    for code in codes:
        assert f"| `{code}` |" in page
