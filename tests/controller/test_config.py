"""The operator's settings: environment, flags over it, and errors that name the setting."""

from __future__ import annotations

import argparse

import pytest

from dataflow_operator.controller.config import (
    ENV_NAMES,
    ConfigError,
    OperatorConfig,
    add_config_arguments,
    config_from_args,
)
from dataflow_operator.core.durations import Duration


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_config_arguments(parser)
    return parser.parse_args(list(argv))


def test_every_setting_has_its_own_variable() -> None:
    assert len(set(ENV_NAMES.values())) == len(OperatorConfig.model_fields)
    assert ENV_NAMES["default_image"] == "DATAFLOW_REPLICA_IMAGE"
    assert all(name.startswith("DATAFLOW_") for name in ENV_NAMES.values())


def test_environment_then_flags(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DATAFLOW_DEFAULT_EXPIRATION_OFFSET", "21d")
    monkeypatch.setenv("DATAFLOW_CONTROL_PORT", "9999")
    monkeypatch.setenv("DATAFLOW_REPLICA_IMAGE", "")  # empty: the default
    config = config_from_args(_args("--control-port", "8000", "--replica-image", "img:1"))
    assert config.default_expiration_offset == Duration(21 * 86_400_000)
    assert config.control_port == 8000
    assert config.default_image == "img:1"
    assert config_from_args(_args()).default_image == OperatorConfig().default_image


def test_a_bad_value_names_its_variable_or_flag(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DATAFLOW_START_TIMEOUT", "soon")
    with pytest.raises(ConfigError, match=r"^DATAFLOW_START_TIMEOUT: cannot parse duration 'soon'"):
        config_from_args(_args())
    monkeypatch.delenv("DATAFLOW_START_TIMEOUT")
    with pytest.raises(ConfigError, match=r"^--metrics-port: Input should be a valid integer"):
        config_from_args(_args("--metrics-port", "ninety"))
    with pytest.raises(ConfigError, match=r"^--status-qps: Input should be greater than or"):
        config_from_args(_args("--status-qps", "-1"))
    assert config_from_args(_args("--status-qps", "2.5")).status_qps == 2.5
