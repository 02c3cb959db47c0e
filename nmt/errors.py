"""User-facing errors: the CLI prints them as one line and exits with code 1."""


class NmtError(Exception):
    """Base class for errors caused by the user's input, not by a bug."""


class ConfigError(NmtError):
    """A config file or override is missing, malformed or out of range."""


class DataError(NmtError):
    """The corpus or an input file cannot be found or read."""


class CheckpointError(NmtError):
    """A checkpoint is missing, corrupt, or does not fit the model."""
