"""Where the repository and the benchmarks' committed data are, for every bench module."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "bench" / "data"
