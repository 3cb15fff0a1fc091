#!/usr/bin/env bash
# Install what the quickstart needs (only what is missing) and run it; the test suite is not
# run (that is `bash .ci/run`). On a fresh Debian machine: a private MariaDB's packages, a
# Java 17 for the embedded Spark, and a virtualenv in .venv with the project, its spark and
# arrow-snapshots extras and PyIceberg, at the exact versions of constraints.txt.
# Usage, from anywhere: bash quickstart.sh [quickstart arguments: --workdir DIR --rows N ...]
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")"
export DEBIAN_FRONTEND=noninteractive
export PIP_DISABLE_PIP_VERSION_CHECK=1

# shellcheck source=.ci/lib.sh
. .ci/lib.sh

# The quickstart starts its own mariadbd on a free port with a private data directory; the
# system MariaDB service (if any) is neither needed nor touched.
pkgs=()
have_bin mariadbd || pkgs+=(mariadb-server)
have_bin mariadb-install-db || pkgs+=(mariadb-server)
python3 -c 'import venv, ensurepip' >/dev/null 2>&1 || pkgs+=(python3-venv)
java17_home >/dev/null || pkgs+=(openjdk-17-jre-headless)
install_debian_packages ${pkgs[@]+"${pkgs[@]}"}

if ! .venv/bin/python -c 'import sys' >/dev/null 2>&1; then
    log "creating .venv"
    rm -rf .venv
    python3 -m venv .venv
fi
if ! .venv/bin/python -c 'import airflow_provider_binlog, pyspark, airflow, pyiceberg' >/dev/null 2>&1; then
    log "installing the project with its spark and arrow-snapshots extras into .venv"
    .venv/bin/python -m pip install -q -c constraints.txt -e '.[spark,arrow-snapshots]' pyiceberg
fi

JAVA_HOME="$(java17_home)" || { log "no Java 17 found"; exit 1; }
export JAVA_HOME
log "running the quickstart"
exec .venv/bin/python -m airflow_provider_binlog quickstart "$@"
