# Shared by scripts/test.sh (source it): install the AI SDK client the chat tests drive
# (tests/chat/node, pinned by its package-lock.json) when its node_modules is missing.
# shellcheck shell=bash

if [ ! -d tests/chat/node/node_modules ]; then
    if command -v npm >/dev/null 2>&1; then
        echo "scripts: installing the chat tests' npm packages (npm ci in tests/chat/node)" >&2
        npm ci --prefix tests/chat/node --no-audit --no-fund --loglevel=error >&2
    else
        echo "scripts: npm is missing; the chat tests need Node 20 and npm" >&2
    fi
fi
