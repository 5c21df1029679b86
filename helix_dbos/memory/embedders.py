"""What turns memory text into vectors: the :class:`Embedder` protocol, the
:class:`LiteLLMEmbedder` over ``litellm.embedding`` and the deterministic
:class:`MockEmbedder` for demos and tests::

    embedder = LiteLLMEmbedder("openai/text-embedding-3-small", dimensions=512)
    vectors = embedder.embed(["likes green tea", "lives in Lyon"])   # two lists of 512 floats

An embedder names its embedding space by ``model`` and ``dimensions``; memories embedded
by two models live in two spaces (``MemoryStore.add_space``).
"""

from __future__ import annotations

import hashlib
import math
import re
from typing import Any, Protocol, runtime_checkable

from helix_dbos._error_text import first_line
from helix_dbos.errors import EmbeddingError as EmbeddingError


@runtime_checkable
class Embedder(Protocol):
    """Embeds texts: ``embed(texts)`` returns one vector (``dimensions`` floats) per text, in order."""

    model: str
    """The model's name, part of the embedding space's name."""

    @property
    def dimensions(self) -> int: ...

    def embed(self, texts: list[str]) -> list[list[float]]:
        """Embed ``texts``.

        Args:
            texts: The texts to embed.

        Returns:
            One vector (``dimensions`` floats) per text, in order.

        Raises:
            EmbeddingError: The texts could not be embedded.
        """
        ...


def space_name(embedder: Embedder) -> str:
    """The name of the embedding space of ``embedder``: ``model@dimensions``."""
    return f"{embedder.model}@{embedder.dimensions}"


def embed_one(embedder: Embedder, text: str, dimensions: int) -> list[float]:
    """The vector of one text, checked to have ``dimensions`` floats."""
    return checked(embedder.embed([text]), 1, dimensions)[0]


def checked(vectors: Any, count: int, dimensions: int) -> list[list[float]]:
    """``vectors`` when it is ``count`` lists of ``dimensions`` finite numbers, else :class:`EmbeddingError`."""
    if not isinstance(vectors, list) or len(vectors) != count:
        raise EmbeddingError(f"the embedder returned {len(vectors) if isinstance(vectors, list) else vectors!r} vectors for {count} texts")
    out = []
    for vector in vectors:
        if not isinstance(vector, list) or len(vector) != dimensions:
            size = len(vector) if isinstance(vector, list) else type(vector).__name__
            raise EmbeddingError(f"the embedder returned a vector of {size} dimensions, the space has {dimensions}")
        floats = [float(x) for x in vector]
        if not all(math.isfinite(x) for x in floats):
            raise EmbeddingError("the embedder returned a vector with a non-finite number")
        out.append(floats)
    return out


class LiteLLMEmbedder:
    """Embeds through ``litellm.embedding`` (any provider litellm knows). ``dimensions``
    asks the model for that many (models that support it, e.g. OpenAI's v3); without it,
    the first call learns the model's own. ``kwargs`` go to every call (``api_base``,
    ``api_key``, ``timeout``, ...)::

        LiteLLMEmbedder("openai/text-embedding-3-small", dimensions=512, api_base="http://127.0.0.1:8000/v1")

    Args:
        model: The litellm model name, e.g. ``"openai/text-embedding-3-small"``; part of
            the embedding space's name.
        dimensions: How many floats each vector has (the model is asked for that many);
            None: the model's own, learnt by the first call.
        **kwargs: Passed to every ``litellm.embedding`` call.

    Raises:
        ValueError: ``dimensions`` is not a positive integer.
    """

    def __init__(self, model: str, dimensions: int | None = None, **kwargs: Any) -> None:
        if dimensions is not None and (isinstance(dimensions, bool) or not isinstance(dimensions, int) or dimensions < 1):
            raise ValueError(f"dimensions is a positive integer, not {dimensions!r}")
        self.model = model
        self._dimensions = dimensions
        self.kwargs = kwargs

    @property
    def dimensions(self) -> int:
        if self._dimensions is None:
            self._dimensions = len(self._call(["dimensions"])[0])
        return self._dimensions

    def embed(self, texts: list[str]) -> list[list[float]]:
        """One vector per text, in order (raises :class:`EmbeddingError` on any failure).

        Args:
            texts: The texts to embed.

        Returns:
            One vector (``dimensions`` floats) per text, in order.

        Raises:
            EmbeddingError: The call failed, or returned vectors of the wrong number or size.
        """
        vectors = self._call(texts)
        return checked(vectors, len(texts), self._dimensions or len(vectors[0]))

    def _call(self, texts: list[str]) -> list[list[float]]:
        from helix_dbos.llm.litellm_adapter import load_litellm

        litellm = load_litellm()
        request: dict[str, Any] = {"model": self.model, "input": texts, **self.kwargs}
        if self._dimensions is not None:
            request["dimensions"] = self._dimensions
        try:
            response = litellm.embedding(**request)
        except Exception as exc:  # litellm wraps every provider's failure in its own classes
            raise EmbeddingError(f"{self.model}: {first_line(exc)}") from None
        data = sorted(response.data, key=lambda item: _field(item, "index"))
        return [list(_field(item, "embedding")) for item in data]


def _field(item: Any, name: str) -> Any:
    return item[name] if isinstance(item, dict) else getattr(item, name)


class MockEmbedder:
    """A deterministic local embedder for demos and tests, named as such: each word of
    the text (lower-cased) adds to a few coordinates chosen by its hash, and the vector is
    normalized; texts that share words are near. No model, no network.

    Args:
        dimensions: How many floats each vector has.
        model: The name of the embedding space's model.
    """

    def __init__(self, dimensions: int = 64, model: str = "mock-embedder") -> None:
        self.model = model
        self._dimensions = dimensions

    @property
    def dimensions(self) -> int:
        return self._dimensions

    def embed(self, texts: list[str]) -> list[list[float]]:
        """Embed ``texts`` (a text without words gets a fixed unit vector).

        Args:
            texts: The texts to embed.

        Returns:
            One unit vector (``dimensions`` floats) per text, in order.
        """
        return [self._vector(text) for text in texts]

    def _vector(self, text: str) -> list[float]:
        vector = [0.0] * self._dimensions
        for word in re.findall(r"\w+", text.lower()):
            digest = hashlib.sha256(word.encode()).digest()
            for i in range(3):
                index = int.from_bytes(digest[4 * i:4 * i + 4], "big") % self._dimensions
                vector[index] += 1.0 if digest[12 + i] % 2 else -1.0
        norm = math.sqrt(sum(x * x for x in vector)) or 1.0
        if norm == 1.0 and not any(vector):
            vector[0] = 1.0  # no words: a fixed unit vector (cosine needs a non-zero one)
        return [x / norm for x in vector]
