"""The driver JVM's SPARK_HOME: Python workers import the installed pyspark, not the
archive Spark puts first on their path (which they would compile at every start)."""

from __future__ import annotations

import sys
from pathlib import Path

import pyspark
import pytest
from pyspark.sql import SparkSession

from dataflow_operator.runtime.spark_home import ARCHIVE, driver_spark_home, shadow_home


def _real_home(tmp_path: Path) -> Path:
    real = tmp_path / "real"
    (real / "bin").mkdir(parents=True)
    (real / "bin" / "spark-submit").write_text("#!/bin/sh\n")
    (real / "jars").mkdir()
    (real / "python" / "pyspark").mkdir(parents=True)
    (real / "python" / "lib").mkdir()
    (real / ARCHIVE).write_bytes(b"")
    (real / "python" / "lib" / "py4j-src.zip").write_bytes(b"")
    return real


def test_the_shadow_links_everything_but_the_archive(tmp_path: Path) -> None:
    real = _real_home(tmp_path)
    shadow = shadow_home(real, tmp_path)
    assert (shadow / "bin").resolve() == real / "bin"
    assert (shadow / "jars").resolve() == real / "jars"
    assert (shadow / "python" / "pyspark").resolve() == real / "python" / "pyspark"
    assert (shadow / "python" / "lib" / "py4j-src.zip").resolve().parent == real / "python" / "lib"
    assert not (shadow / ARCHIVE).exists()
    assert shadow_home(real, tmp_path) == shadow  # made once, then reused
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["real", shadow.name])


def test_a_folder_of_that_name_that_is_a_link_is_never_used(tmp_path: Path) -> None:
    real = _real_home(tmp_path)
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    made = shadow_home(real, first)
    (second / made.name).symlink_to(made)  # another user's link to a folder
    with pytest.raises(FileExistsError):
        shadow_home(real, second)


def test_the_real_home_is_kept_for_another_interpreter_or_spark(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)
    monkeypatch.delenv("SPARK_HOME", raising=False)
    shadow = driver_spark_home()
    assert shadow is not None and Path(shadow).parent == tmp_path / "cache" / "dataflow-operator"
    assert (Path(shadow) / "jars").resolve() == Path(pyspark.__file__).resolve().parent / "jars"
    monkeypatch.setenv("PYSPARK_PYTHON", "/usr/bin/python3")  # may lack pyspark
    assert driver_spark_home() is None
    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)
    monkeypatch.setenv("SPARK_HOME", str(_real_home(tmp_path)))  # a Spark distribution
    assert driver_spark_home() is None


def test_python_workers_import_the_installed_pyspark(spark: SparkSession) -> None:
    files = (
        spark.sparkContext.parallelize([0], 1)
        .map(lambda _: __import__("pyspark").__file__)
        .collect()
    )
    assert files == [pyspark.__file__]
