"""What every job process of a worker loads, loaded once: imported in LiveKit's forkserver.

`agent.py` lists this module in `AgentServer(preload_modules=...)`. livekit-agents 1.8
imports it in the forkserver, before its own `_preload_freeze` freezes every object made
so far out of the garbage collector's sight (a collection writes to each object it scans,
which would copy its page into the job process). Each job process is forked from there
and shares these pages copy-on-write: Mem0 and its dependencies (about 60 MB a process),
jieba's dictionary, wordfreq's word lists and the Chinese character tables (about 190 MB),
the local embedder's weights and vocabulary (about 20 MB). Prewarm, in each job process,
then finds them loaded and opens only what is per process: the store's connections,
Mem0's instance, the VAD (`python -m bench.fleet.job_memory` measures the difference).

Fork-safe: imports and data only, no thread, connection or event loop is started here
(the embedder's OpenMP threads start at its first encoding, in the job process). A failure
is logged and left to prewarm, which loads the same things and reports properly.
"""

from __future__ import annotations

import logging
import time

logger = logging.getLogger(__name__)


def preload() -> float:
    """Load what the job processes share; returns the seconds it took."""
    started = time.perf_counter()
    from memory.settings import EmbedderKind, load_settings, tell_libraries

    tell_libraries()  # Mem0's telemetry switch and libgomp's spin count, read at import
    settings = load_settings(dotenv=False)  # agent.py loaded the .env before LiveKit started this process
    import mem0.memory.main  # noqa: F401 - the import is the point
    import mem0.vector_stores.pgvector  # noqa: F401 - the import is the point
    import psycopg_pool  # noqa: F401 - the import is the point

    import memory.archive.retention  # noqa: F401 - everything a job process imports
    import memory.livekit.archive  # noqa: F401 - everything a job process imports
    import memory.livekit.session  # noqa: F401 - everything a job process imports
    import memory.working  # noqa: F401 - the first agent and its tools
    from memory.language import lexical
    from memory.storage import embedder

    if settings.embedder is EmbedderKind.LOCAL:
        embedder.local_model()
        embedder.write_model()
    lexical.warm_up()  # jieba's dictionary, the word frequencies, the character tables
    return time.perf_counter() - started


try:
    _SECONDS = preload()
    logger.debug("memory preloaded in the forkserver", extra={"elapsed": round(_SECONDS, 3)})
except Exception as exc:  # noqa: BLE001 - prewarm loads it again in each job process and reports
    logger.warning("memory preload failed (each job process loads its own): %r", exc)
