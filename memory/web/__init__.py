"""The operator's web page and LiveKit's standard token endpoint: `python -m memory.web`.

One aiohttp server over the worker's own settings and store: users, a user's facts with
their history, turns by call, the archive, shared contexts and the journal; "what would
it recall" with the scores that ranked each memory; export, forget, dead letters; a chart
of the store over time; and `POST /api/token` for LiveKit's starter frontends. Every page
and action needs `MEMORY_WEB_SECRET` (`security.py`); it listens on localhost unless
`MEMORY_WEB_LISTEN` says otherwise. Nothing imports this package.
"""
