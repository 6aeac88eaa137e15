"""User-facing errors: one line, exit code 2, no traceback (unless --debug)."""


class SemisegError(Exception):
    """An error caused by the user's input (a file, a line, an argument).

    The message is printed as one line and the process exits with code 2.
    """

    exit_code = 2
