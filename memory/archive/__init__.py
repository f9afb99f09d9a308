"""The conversation archive: every message of a session, embedded, with summaries of
long talks and retention (docs/archive.md).

- `writer`: archived messages as journal rows, and their writes (batched embeddings).
- `summarizer`: a summary of the older part of a conversation, by the memory LLM.
- `intent`: is the user asking about earlier conversations?
- `retention`: deleting what is older than the retention period.

Elsewhere: the table and `match_conversations` in `memory/storage/archive.py` and
`archive_schema.py`; the LiveKit side (archive both sides, summarise, hand the summary and
earlier conversations to the door) in `memory/livekit/archive.py`.
"""
