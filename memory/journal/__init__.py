"""The durable write journal: a turn is on disk before its write starts, and written exactly once.

queue      DurableWriteQueue: enqueue, start, hold, drain, close (what the session calls)
consumer   the rows to the store, oldest first: retries, dead letters, the hold
leases     the rows a queue holds and those it takes over (the lease: storage/lease.py)
file       the journal's table, opening it, setting a damaged one aside
operator   the operator's view of it, and "forget me" in it
spill      turns the journal refuses, on a RAM disk
reserve    room kept for a forget on a full disk
codec      a turn as a row
"""
