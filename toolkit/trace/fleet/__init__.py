"""Fleets: many device sessions joined partition by partition and merged exactly."""
