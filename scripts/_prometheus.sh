# Shared by scripts/test.sh (source it): make sure Debian's prometheus is installed, for the
# metrics test that scrapes a worker and a server with it. Installs only when missing, and
# only as root (CI is); otherwise it says what to install and the metrics test will fail.
# shellcheck shell=bash

if ! command -v prometheus >/dev/null 2>&1; then
    if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
        echo "scripts: installing prometheus (Debian) for the metrics test" >&2
        DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null
    else
        echo "scripts: prometheus is missing; install Debian's prometheus" >&2
    fi
fi
