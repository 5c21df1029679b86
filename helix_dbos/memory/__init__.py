"""Agent memory: texts in namespaces, remembered within the agent step that wrote them,
searchable by their words at once and by meaning once embedded (docs/memory.md).

    from helix_dbos.memory import MemoryStore, memory_tools, owner_namespace

    agent = define_agent("assistant", ..., tools=memory_tools(namespace=owner_namespace("user")))
    store = MemoryStore(database_url)
    store.search(("user", "u-42"), "tea")

Tools use ``ctx.memory`` (:class:`ToolMemory`); code outside runs and operators use
:class:`MemoryStore`; the embedding queue is :mod:`helix_dbos.memory.embedding`.
"""

from helix_dbos._store.memory_records import Memory, MemoryHit, MemoryWrite, Namespace, SearchMode
from helix_dbos.memory.agent_tools import memory_tools, owner_namespace
from helix_dbos.memory.context import ToolMemory
from helix_dbos.memory.embedders import Embedder, EmbeddingError, LiteLLMEmbedder, MockEmbedder
from helix_dbos.memory.store import TEXT_ONLY_NOTICE, MemoryStore

__all__ = [
    "TEXT_ONLY_NOTICE",
    "Embedder",
    "EmbeddingError",
    "LiteLLMEmbedder",
    "Memory",
    "MemoryHit",
    "MemoryStore",
    "MemoryWrite",
    "MockEmbedder",
    "Namespace",
    "SearchMode",
    "ToolMemory",
    "memory_tools",
    "owner_namespace",
]
