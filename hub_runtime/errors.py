"""Errors the user can fix: printed as one line, exit status 2."""


class CliError(Exception):
    """Bad input on the command line (a file that is not audio, a bad option value)."""
