"""Audio: formats and conversion (format.py), devices (devices.py)."""
