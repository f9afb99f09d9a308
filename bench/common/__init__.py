"""What several benchmarks share: statistics, the evaluation files and their held-out part,
the shipped pipeline's stores and switches, the stand-in servers, and where things are.
A measurement folder imports from here, never from another measurement folder."""
