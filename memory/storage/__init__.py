"""Where things are kept: the embedded or shared Postgres, the local embedder, Mem0's
table and the tables beside it (forget requests, shared contexts, the conversation archive)."""
