"""`python -m memory.admin`: the operator's command line (see `cli`)."""
