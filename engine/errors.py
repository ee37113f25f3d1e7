"""Errors Sinew raises for bad input. Each message names the file, bone or parameter at fault."""
from __future__ import annotations


class SinewError(Exception):
    """Base class: anything Sinew reports to a user as a one-line reason."""


class InputFileError(SinewError):
    """A file is missing, malformed, or of another format version."""

    def __init__(self, path, problem: str, line: int | None = None):
        self.path = str(path)
        self.problem = problem
        self.line = line
        where = f"{self.path}:{line}" if line is not None else self.path
        super().__init__(f"{where}: {problem}")


class ParameterError(SinewError, ValueError):
    """A parameter is NaN, out of range, or of the wrong shape."""

    def __init__(self, name: str, problem: str):
        self.name = name
        super().__init__(f"parameter '{name}': {problem}")


class OutputPathError(SinewError):
    """An output path that cannot be written (a file where a folder is needed, no permission)."""

    def __init__(self, path, problem: str):
        self.path = str(path)
        super().__init__(f"{self.path}: {problem}")
