# Shared by scripts/test.sh (source it): make sure Debian's Chromium and its ChromeDriver are
# installed, for the console's real-browser test. Installs only when one is missing, and
# only as root (CI is); otherwise it says what to install and the browser test will fail.
# shellcheck shell=bash

if ! command -v chromium >/dev/null 2>&1 || ! command -v chromedriver >/dev/null 2>&1; then
    if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
        echo "scripts: installing chromium and chromium-driver (Debian) for the browser test" >&2
        DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null
    else
        echo "scripts: chromium and chromedriver are missing; install Debian's chromium and chromium-driver" >&2
    fi
fi
