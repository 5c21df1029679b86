"""The agent server: your agents over HTTP, mountable in your DBOS web app.

    from helix_dbos.server import create_app

    app = create_app(executor, authenticate=authenticate)     # or allow_unauthenticated=True
    app = create_app(executor, authenticate=authenticate, authorize=authorize)  # who may do what
    # uvicorn.run(app) or app.mount("/agents", ...) in FastAPI / Starlette

Needs the ``server`` extra (``pip install 'helix-dbos[server]'``).
"""

from helix_dbos.server.access import Action, Authorize, owns
from helix_dbos.server.app import create_app
from helix_dbos.server.auth import Authenticate, Forbidden

__all__ = ["Action", "Authenticate", "Authorize", "Forbidden", "create_app", "owns"]
