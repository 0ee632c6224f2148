"""Engines behind small interfaces: one file each (a new engine is one file)."""
