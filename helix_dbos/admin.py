"""The operator API, with nothing but the database URL: ``from helix_dbos import admin``.

The same module as :mod:`helix_dbos.client.admin` (see it for every function)::

    from helix_dbos import admin

    for call in admin.list_pending(url):
        admin.approve(url, call.session_id, call.tool_call_id, approver="ana")
"""

from helix_dbos.client.admin import *  # noqa: F403
from helix_dbos.client.admin import __all__ as __all__
