"""Typed errors of the sim bridge. Libraries raise these; nodes turn them into log lines."""


class SimBridgeError(Exception):
    """Base class of every error the sim bridge raises on purpose."""


class UnknownEnvironmentError(SimBridgeError):
    """The configured environment id names no built-in adapter, plugin or registered gymnasium env."""


class RenderingUnavailableError(SimBridgeError):
    """No OpenGL context could be created for the configured cameras (MUJOCO_GL unset, wrong or broken)."""


class InvalidConfigError(SimBridgeError, ValueError):
    """A bridge, camera or expert setting is out of range or inconsistent with another one."""


class InvalidCommandError(SimBridgeError, ValueError):
    """A joint command or trajectory cannot be applied (unknown joint names, wrong lengths, NaN or inf)."""


class RenderAssetsError(SimBridgeError):
    """The simplified render meshes could not be derived from the installed simulation package."""
