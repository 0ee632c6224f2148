"""Duplex Hub runtime: an on-device, full-duplex smart-home voice loop."""

__version__ = "0.1.0"
