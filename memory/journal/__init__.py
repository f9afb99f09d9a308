"""The durable write journal: a turn is on disk before its write starts, and written exactly once."""
