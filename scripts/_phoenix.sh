# Shared by scripts/test.sh (source it): make sure Arize Phoenix (the trace backend of the
# tracing test) is installed in a virtualenv of its own, .helix/phoenix-venv, so its many
# dependencies never meet helix-dbos's. Installs only when missing (about 90 s, 850 MB).
# shellcheck shell=bash

if [ ! -x .helix/phoenix-venv/bin/phoenix ]; then
    echo "scripts: installing arize-phoenix into .helix/phoenix-venv for the tracing test" >&2
    mkdir -p .helix
    "${PYTHON:-python3}" -m venv --clear .helix/phoenix-venv
    PIP_ROOT_USER_ACTION=ignore .helix/phoenix-venv/bin/python -m pip --quiet --disable-pip-version-check \
        install --progress-bar off "arize-phoenix>=12"
fi
