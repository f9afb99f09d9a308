"""Finding a user's memories for a turn: the staged retriever, and the look-ups started while the user speaks."""
