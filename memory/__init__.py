"""Long-term memory for a LiveKit voice agent, on Mem0 and Postgres.

Mem0 reads its telemetry switch when it is first imported, and with telemetry on
it opens a second store and calls the network: switch it off before anything in
this package imports mem0.
"""

import logging
import os

os.environ["MEM0_TELEMETRY"] = "False"
# Mem0 logs a warning per call when spaCy is absent; we do not use its NLP path.
logging.getLogger("mem0.utils.spacy_models").setLevel(logging.ERROR)
# Mem0 logs every memory's text at INFO ("Updating memory with data=..."), and LiveKit's
# CLI runs the root logger at INFO: users' words would sit in the worker's logs, where
# "forget me" cannot reach them. Its warnings and errors still come through.
logging.getLogger("mem0").setLevel(logging.WARNING)
