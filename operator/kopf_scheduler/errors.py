"""Errors that reach a user of the command line: printed as one line, exit code 2, no traceback."""


class UsageError(Exception):
    """Bad input from the user (a file, a flag, a field); the message names what and where."""
