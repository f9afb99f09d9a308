"""The conversation archive: every message of a session, embedded, with summaries of
long talks and retention (docs/archive.md).

- `schema`: the `conversation_embeddings` table and the `match_conversations` function.
- `store`: writes (batched embeddings), searches, marks, exports and deletes.
- `writer`: the journal's handler for archived messages (same journal as memory writes).
- `session`: the LiveKit side: archive both sides, summarise, swap the summary in.
- `intent`: is the user asking about earlier conversations?
- `retention`: deleting what is older than the retention period.
"""
