# Shared by .ci/run (the tests) and quickstart.sh (the quickstart): finding a Java 17 and
# installing missing Debian packages. Sourced, not run.

log() { printf '==> %s\n' "$*"; }

have_bin() {
    command -v "$1" >/dev/null 2>&1 || [ -x "/usr/sbin/$1" ] || [ -x "/usr/bin/$1" ]
}

# A Java 17 home ($JAVA_HOME if it is one, else /usr/lib/jvm/*17*): Spark 3.5
# runs on Java 8/11/17 only, and a later JDK may be the default java.
java17_home() {
    local h
    for h in ${JAVA_HOME:+"$JAVA_HOME"} /usr/lib/jvm/*17*; do
        [ -x "$h/bin/java" ] || continue
        if grep -Eq '^JAVA_VERSION="17([."]|$)' "$h/release" 2>/dev/null \
            || "$h/bin/java" -version 2>&1 | grep -Eq 'version "17([."]|$)'; then
            printf '%s\n' "$h"
            return 0
        fi
    done
    return 1
}

# install_debian_packages PKG...: apt-get install the given packages (deduplicated), with
# package scripts kept from starting services; nothing when none is given.
install_debian_packages() {
    (($#)) || return 0
    local pkgs policy made_policy=0
    mapfile -t pkgs < <(printf '%s\n' "$@" | sort -u)
    log "installing Debian packages: ${pkgs[*]}"
    local SUDO=()
    if [ "$(id -u)" -ne 0 ]; then SUDO=(sudo -n); fi
    policy=/usr/sbin/policy-rc.d
    if [ ! -e "$policy" ] && [ "$(id -u)" -eq 0 ]; then
        printf '#!/bin/sh\nexit 101\n' >"$policy"
        chmod +x "$policy"
        made_policy=1
    fi
    # The JRE's postinst links man pages there; slim images lack the directory.
    "${SUDO[@]}" mkdir -p /usr/share/man/man1
    local rc=0
    { "${SUDO[@]}" apt-get update -o Acquire::Retries=3 \
        && "${SUDO[@]}" apt-get install -y --no-install-recommends -o Acquire::Retries=3 "${pkgs[@]}"; } || rc=$?
    if [ "$made_policy" = 1 ]; then rm -f "$policy"; fi
    return "$rc"
}
