# Shared by scripts/*.sh (source it, don't run it): go to the repository root and make
# sure .venv exists with helix-dbos installed editable with its dev, embedded, server and docs extras.
#
# The install runs only when pyproject.toml changed since the last one (the stamp file
# records its hash), so a second run starts in well under a second. Set PYTHON to pick
# the interpreter that creates the venv (default: python3).
# shellcheck shell=bash

cd "$(dirname "${BASH_SOURCE[0]}")/.."

_helix_venv_stamp=.venv/.helix-install-stamp
_helix_venv_extras="dev,embedded,server,docs"

_helix_venv_wanted() {
    .venv/bin/python - "$_helix_venv_extras" <<'PY'
import hashlib, sys
digest = hashlib.sha256(open("pyproject.toml", "rb").read()).hexdigest()
print(f"{digest} {sys.version_info[0]}.{sys.version_info[1]} [{sys.argv[1]}]")
PY
}

_helix_venv_setup() {
    if ! .venv/bin/python -c "" 2>/dev/null; then
        echo "scripts: creating .venv with ${PYTHON:-python3}" >&2
        "${PYTHON:-python3}" -m venv --clear .venv
    fi
    local wanted
    wanted="$(_helix_venv_wanted)"
    if [ "$(cat "$_helix_venv_stamp" 2>/dev/null)" = "$wanted" ]; then
        return 0
    fi
    echo "scripts: installing helix-dbos[$_helix_venv_extras] into .venv (pyproject.toml changed)" >&2
    local pip=(env PIP_ROOT_USER_ACTION=ignore .venv/bin/python -m pip --quiet --disable-pip-version-check)
    "${pip[@]}" install --upgrade pip
    "${pip[@]}" install --progress-bar off -e ".[$_helix_venv_extras]"
    echo "$wanted" >"$_helix_venv_stamp"
}

# Two scripts started at once must not both run pip in the same venv: serialize on a
# lock when flock(1) exists (Linux); the stamp is read only while holding it.
if command -v flock >/dev/null 2>&1; then
    mkdir -p .helix
    (
        flock 9
        _helix_venv_setup
    ) 9>.helix/venv.lock
else
    _helix_venv_setup
fi
