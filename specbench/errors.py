"""One error family for the whole core; the CLI turns it into one clean line and exit 1."""

from __future__ import annotations


class SpecbenchError(Exception):
    """A problem the user can fix: bad input, missing data, an unsupported request."""

    def __init__(self, message: str, hint: str | None = None):
        super().__init__(message)
        self.hint = hint

    def __str__(self) -> str:
        text = super().__str__()
        return f"{text} (hint: {self.hint})" if self.hint else text


class SchemaError(SpecbenchError):
    """A file does not match its schema; names the file, the key and what was expected."""

    def __init__(self, path: object, key: str, expected: str, got: object = None, hint: str | None = None):
        got_text = "" if got is None else f", got {_short(got)}"
        super().__init__(f"{path}: key '{key}': expected {expected}{got_text}", hint)
        self.path, self.key, self.expected = path, key, expected


class WriteError(SpecbenchError):
    """A file could not be written (a full or read-only disk): names the file and the system's reason."""


class MissingCostError(SpecbenchError):
    """The profile lacks a cost the replay needs; costs are never guessed."""


def os_error_line(exc: OSError) -> str:
    """An OSError as one line naming the file: `results/r/rows.jsonl: No space left on device (errno 28)`."""
    name = exc.filename if exc.filename is not None else "?"
    return f"{name}: {exc.strerror or exc} (errno {exc.errno})"


def stderr_tail(text: str, limit: int = 400) -> str:
    """The last lines of a process's stderr as a suffix for an error message ("" when empty)."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return f" [stderr: {' | '.join(lines[-4:])[-limit:]}]" if lines else ""


def _short(value: object, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
