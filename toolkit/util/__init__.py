"""Small helpers every layer may use: atomic file writes and a paused garbage collector."""
