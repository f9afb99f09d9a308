"""The one bound the test harness puts on a wait that only guards against a hang.

Every wait in the harness and the tests is on an event, a count or a process; a bound is
there so that a hang fails with what was seen rather than never ending. It is never
waited out on a working machine, however busy: a loaded 2-core machine (load 10-18)
slows one step of a call, or a subprocess's start, past a minute, so a bound of seconds
there fails by chance.
"""

HANG_GUARD_S = 300.0
