"""The package as users install it: ``python -m build`` makes a wheel and an sdist; the wheel,
installed (not editable) into a new virtualenv with only runtime extras, registers the provider
and the UI plugin with Airflow and runs the quickstart with its packaged DAG, from a directory
outside the source tree."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from airflow_provider_binlog import __version__
from tests.conftest import _require_mariadb, _require_spark

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.slow, pytest.mark.long, pytest.mark.mariadb, pytest.mark.spark]


def _run(args: list, **kwargs) -> subprocess.CompletedProcess:
    done = subprocess.run([str(a) for a in args], capture_output=True, text=True, **kwargs)
    assert done.returncode == 0, f"{args}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> dict:
    """The built wheel and sdist, and a new virtualenv with the wheel and the runtime extras the
    quickstart needs (spark, arrow-snapshots) plus PyIceberg, at the versions CI pins."""
    out = tmp_path_factory.mktemp("wheel")
    _run([sys.executable, "-m", "build", "--outdir", out / "dist", ROOT], timeout=900)
    (wheel,) = (out / "dist").glob("*.whl")
    (sdist,) = (out / "dist").glob("*.tar.gz")
    _run([sys.executable, "-m", "venv", out / "venv"], timeout=300)
    python = out / "venv" / "bin" / "python"
    _run([python, "-m", "pip", "install", "-q", "--no-compile", "-c", ROOT / "constraints.txt",
          f"{wheel}[spark,arrow-snapshots]", "pyiceberg"], timeout=1800)
    home = out / "airflow-home"
    home.mkdir()
    path = os.pathsep.join([str(python.parent), "/usr/local/bin", "/usr/bin", "/bin", "/usr/sbin", "/sbin"])
    env = {"PATH": path, "HOME": os.environ.get("HOME", str(out)),
           "AIRFLOW_HOME": str(home), "LANG": "C.UTF-8"}
    if os.environ.get("JAVA_HOME"):
        env["JAVA_HOME"] = os.environ["JAVA_HOME"]
    return {"dir": out, "wheel": wheel, "sdist": sdist, "python": python, "env": env}


def test_the_wheel_installs_into_a_new_virtualenv_with_its_metadata_provider_and_plugin(installed):
    python, env = installed["python"], installed["env"]
    assert installed["wheel"].name == f"airflow_provider_binlog-{__version__}-py3-none-any.whl"
    where = _run([python, "-c", "import airflow_provider_binlog as p; print(p.__file__)"], env=env,
                 cwd=installed["dir"]).stdout.strip()
    assert where.startswith(str(installed["dir"] / "venv")), where          # the wheel's copy, not the checkout
    metadata = json.loads(_run([python, "-c", (
        "import importlib.metadata as m, json; md = m.metadata('airflow-provider-binlog'); "
        "print(json.dumps({'license': md['License-Expression'], 'files': md.get_all('License-File'), "
        "'classifiers': md.get_all('Classifier'), 'requires': md.get_all('Requires-Dist')}))")], env=env).stdout)
    assert metadata["license"] == "Apache-2.0" and sorted(metadata["files"]) == ["LICENSE", "NOTICE"]
    assert "Framework :: Apache Airflow :: Provider" in metadata["classifiers"]
    core = {r.name: r for r in map(Requirement, metadata["requires"]) if r.marker is None}
    airflow_range = core["apache-airflow"].specifier
    assert airflow_range.contains("3.3.2") and not airflow_range.contains("2.10.5")
    assert "apache-airflow-providers-apache-spark" in core
    assert not {"connectorx", "pyspark", "snowpark-connect-deps-iceberg", "pandas"} & set(core)   # extras only
    airflow = installed["dir"] / "venv" / "bin" / "airflow"
    providers = json.loads(_run([airflow, "providers", "get", "airflow-provider-binlog", "-o", "json"],
                                env=env).stdout)
    assert providers == [{"Provider": "airflow-provider-binlog", "Version": __version__}]
    full = json.loads(_run([airflow, "providers", "get", "airflow-provider-binlog", "--full", "-o", "json"],
                           env=env).stdout)
    full = full[0] if isinstance(full, list) else full
    assert "ui_stall_seconds" in full["config"]["binlog"]["options"]
    stall = _run([airflow, "config", "get-value", "binlog", "ui_stall_seconds"], env=env).stdout.strip()
    assert stall == "3600"                                   # the [binlog] section's default, from the provider
    plugins = _run([airflow, "plugins", "-o", "json"], env=env).stdout
    assert "airflow_provider_binlog.plugins.cdc_view:BinlogCdcPlugin" in plugins and "Binlog CDC" in plugins


def test_the_sdist_carries_the_license_notice_changelog_and_docs(installed):
    with tarfile.open(installed["sdist"]) as sdist:
        names = {n.split("/", 1)[1] for n in sdist.getnames() if "/" in n}
    assert {"LICENSE", "NOTICE", "CHANGELOG.md", "README.md", "docs/configuration.md", "dags/binlog_cdc.py",
            "airflow_provider_binlog/local/quickstart_dag.py"} <= names


def test_the_quickstart_runs_from_the_wheel_with_its_packaged_dag(installed):
    _require_mariadb()
    _require_spark()
    workdir = installed["dir"] / "quickstart"
    done = subprocess.run([installed["python"], "-m", "airflow_provider_binlog", "quickstart", "--workdir",
                           str(workdir), "--rows", "50", "--rounds", "1"], cwd=installed["dir"],
                          env=installed["env"], capture_output=True, text=True, timeout=1200)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    assert "OK: Iceberg tables equal the MariaDB tables" in done.stdout
    packaged = installed["dir"] / "venv" / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / \
        "site-packages" / "airflow_provider_binlog" / "local" / "quickstart_dag.py"
    assert (workdir / "airflow" / "dags" / "binlog_cdc.py").read_text() == packaged.read_text()
    read = [line for line in done.stdout.split("read by PyIceberg")[1].splitlines() if line.strip().endswith("equal")]
    assert len(read) == 2


def test_the_wheel_installs_and_registers_on_python_3_13(installed, tmp_path):
    """Python 3.13, where the spark extra leaves out the embedded Iceberg jar (its wheel needs
    < 3.13): the provider installs with Airflow and registers; the merge then takes Iceberg's
    runtime from Maven or the cluster. About 1.5 minutes more: run with BINLOG_WHEEL_PY313=1
    (CONTRIBUTING.md)."""
    import glob
    import shutil

    if os.environ.get("BINLOG_WHEEL_PY313", "").strip().lower() not in ("1", "true", "yes"):
        pytest.skip("the Python 3.13 install: set BINLOG_WHEEL_PY313=1 to run it")

    candidates = sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.13*/bin/python3.13"))) + \
        [shutil.which("python3.13")]
    python313 = next((c for c in candidates if c and subprocess.run([c, "-c", "pass"], capture_output=True)
                      .returncode == 0), None)
    if python313 is None:
        pytest.skip("no Python 3.13 on this machine")
    _run([python313, "-m", "venv", tmp_path / "venv"], timeout=300)
    python = tmp_path / "venv" / "bin" / "python"
    _run([python, "-m", "pip", "install", "-q", "--no-compile", installed["wheel"]], timeout=1800)
    env = {**installed["env"], "AIRFLOW_HOME": str(tmp_path / "home")}
    (tmp_path / "home").mkdir()
    providers = json.loads(_run([tmp_path / "venv" / "bin" / "airflow", "providers", "get", "airflow-provider-binlog",
                                 "-o", "json"], env=env).stdout)
    assert providers == [{"Provider": "airflow-provider-binlog", "Version": __version__}]
    _run([python, "-c", "import airflow_provider_binlog.dags, airflow_provider_binlog.operators.merge, "
                        "airflow_provider_binlog.hooks.binlog, airflow_provider_binlog.spark.runtime as r; "
                        "assert r.choose_iceberg_runtime(local=True) == 'maven'"], env=env, cwd=tmp_path)
