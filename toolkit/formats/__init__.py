"""Pure formats: bytes <-> plain objects or DataFrames, with no graph logic."""
