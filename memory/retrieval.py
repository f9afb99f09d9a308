"""Finding the memories that matter for a user message.

The dense stage is Mem0's vector search over the user's memories (optionally
limited to categories). Later stages (lexical recall and fusion) plug in here,
behind the same `retrieve` call that both modes and the benchmark use.
"""

from __future__ import annotations

from collections.abc import Sequence

from .settings import MemorySettings
from .store import MemoryRecord, MemoryStore


class Retriever:
    """One user's query in, the top memories out, best first."""

    def __init__(self, store: MemoryStore, settings: MemorySettings) -> None:
        self.store = store
        self.settings = settings

    def retrieve(
        self,
        user_id: str,
        query: str,
        *,
        top_k: int | None = None,
        categories: Sequence[str] | None = None,
    ) -> list[MemoryRecord]:
        if not query.strip():
            return []
        return self.store.search(
            user_id,
            query,
            top_k=top_k or self.settings.recall_top_k,
            categories=categories,
            threshold=self.settings.recall_threshold,
        )
