"""LiveKit-facing tools of the memory module."""
