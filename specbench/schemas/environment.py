"""The `environment` block of every manifest: what ran, where, when, with which build and models.

Results manifests, trace headers and device profiles carry the same block:

    environment:
      specbench_version: "0.1.0"
      argv: [".../specbench", "run", ...]     # sys.argv of the session that started the file
      started: "2026-12-01T13:02:11.482Z"     # UTC; null only in a `continued` file that had no block
      finished: "2026-12-01T13:04:55.019Z"    # end of the last session; null while running or after an interruption
      resumes: [{specbench_version, argv, started}]   # each --resume session after the first, in order
      runner: {version, protocol, sha256, llama_cpp_commit, flags, system_info}   # null: no runner ran (replay)
      models: [{role, name, sha256, desc, n_params, size_bytes}]        # as the runner loaded them
      device: {name, kind, model, soc, cores, governor, snapshot: {before, after}, details}

A resumed file keeps its first session's start, command line, runner, models and device, and
lists every later session in `resumes`; `finished` is the end of the latest session. Results
manifests always carry the block; a hand-written or imported profile, or a trace header, may
lack it (`manifest_environment` then gives None). The block is not a file kind of its own: its
shape changes bump the `schema_version` of every kind that carries it.
Values a device does not let specbench read (`soc`, `cores`, `governor`) are null, never a guess.
This module is pure: callers pass the timestamps and what the devices reported.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone

from specbench.schemas.fileio import StrEnum, Where, from_dict, rule, to_dict

KEY = "environment"
"""The block's key in every manifest."""


def _is_utc(value: str) -> bool:
    """`value` reads as an ISO-8601 time at UTC (a Z or +00:00 suffix)."""
    try:
        parsed = datetime.fromisoformat(value.removesuffix("Z") + "+00:00" if value.endswith("Z") else value)
    except ValueError:
        return False
    offset = parsed.utcoffset()
    return offset is not None and offset.total_seconds() == 0


_TIMESTAMP = rule(check=_is_utc, expected="a UTC ISO-8601 timestamp such as 2026-12-01T13:02:11.482Z")
_ARGV = rule(expected="a list of strings (the command line)")
_POSITIVE = rule(low=0, above=True, expected="an integer > 0 (as llama.cpp reports it)")


@dataclass(frozen=True)
class RunnerBuild:
    """The runner binary a file was produced with."""

    version: str
    """The runner's own version (`--version`)."""
    protocol: int
    """The job protocol it speaks."""
    sha256: str
    """sha256 of the binary file that ran."""
    llama_cpp_commit: str
    flags: tuple[str, ...] = field(metadata=rule(expected="a list of CMake flags (strings)"))
    """CMake flags of the build (<runners>/<abi>/manifest.json; empty when it has none)."""
    system_info: str
    """llama.cpp's `llama_print_system_info()` as the runner printed it (CPU features, backends)."""


class Role(StrEnum):
    """Which model of a decode a file is."""

    TARGET = "target"
    DRAFTER = "drafter"


@dataclass(frozen=True)
class LoadedModel:
    """One model file as the runner loaded it (its `loaded` event) and as specbench hashed it."""

    role: Role
    name: str
    """The model's name (a drafter's --drafter NAME, the target's file stem)."""
    sha256: str
    """sha256 of the GGUF file on this host (the bytes that were pushed or opened)."""
    desc: str
    """`llama_model_desc`: architecture, size class and file type, e.g. 'llama 135M F16'."""
    n_params: int = field(metadata=_POSITIVE)
    """`llama_model_n_params`: parameters of the loaded model."""
    size_bytes: int = field(metadata=_POSITIVE)
    """`llama_model_size`: bytes of its tensors."""
    threads: int | None = field(default=None, metadata=rule(low=1, omit=True))
    """Threads the runner ran it with (a Whisper model's greedy choices can depend on them); None: not recorded."""


@dataclass(frozen=True)
class DeviceEnvironment:
    """The device a file was measured on."""

    name: str
    kind: str
    """'local' (this host) or 'adb' (a phone)."""
    model: str
    soc: str | None
    """A phone's ro.soc.model (else ro.board.platform, ro.hardware); a host's /proc/cpuinfo model name."""
    cores: int | None = field(metadata=rule(low=0, expected="an integer >= 0, or null"))
    """CPUs the device has (not only those the runner may use: see details)."""
    governor: str | None
    """cpufreq scaling governor when the run began (a phone's clusters' governors, comma-separated)."""
    snapshot: Mapping
    """{before, after}: the device's state (snapshot) as the first session began and as the last ended."""
    details: Mapping = field(default_factory=dict)
    """The rest of what the device says about itself (serial, ABI, clusters, Android version...)."""


@dataclass(frozen=True)
class Resume:
    """A session that continued the file (`--resume`)."""

    specbench_version: str
    argv: tuple[str, ...] = field(metadata=_ARGV)
    started: str = field(metadata=_TIMESTAMP)


@dataclass(frozen=True)
class Environment:
    specbench_version: str
    argv: tuple[str, ...] = field(metadata=_ARGV)
    """The command line of the session that started the file, as run (sys.argv)."""
    started: str | None = field(default=None, metadata=_TIMESTAMP)
    """UTC ISO-8601 start of the first session; None: a file without the block, resumed (`continued`)."""
    finished: str | None = field(default=None, metadata=_TIMESTAMP)
    """UTC ISO-8601 end of the latest session; None while it runs, or when it was interrupted."""
    resumes: tuple[Resume, ...] = ()
    runner: RunnerBuild | None = None
    """None where no runner ran (a replay run: its costs come from its profiles' environments)."""
    models: tuple[LoadedModel, ...] = ()
    device: DeviceEnvironment | None = None

    def resumed_by(self, session: Environment) -> Environment:
        """This (earlier) environment continued by `session`: the first start, command line,
        runner, models and device stay; the session is appended to `resumes`; not finished."""
        again = Resume(session.specbench_version, session.argv, session.started or "")
        return replace(self, finished=None, resumes=self.resumes + (again,),
                       runner=self.runner or session.runner, models=self.models or session.models,
                       device=self.device or session.device)

    def finish(self, at: str, models: Sequence[LoadedModel] = (), after: Mapping | None = None) -> Environment:
        """Finished at `at`, with the models the runner loaded (when none were recorded yet)
        and the device's state at the end (`after`)."""
        device = self.device
        if device is not None and after is not None:
            device = replace(device, snapshot={**device.snapshot, "after": dict(after)})
        return replace(self, finished=at, models=self.models or tuple(models), device=device)


def continued(before: Environment | None, session: Environment) -> Environment:
    """The environment of a file that `session` resumes: `before` continued by it, or, for a file
    begun by a specbench that recorded no environment, this session listed as a resume of a
    first session whose command line and start are unknown."""
    if before is None:
        return replace(session, argv=(), started=None).resumed_by(session)
    return before.resumed_by(session)


def utc_text(moment: datetime) -> str:
    """A UTC ISO-8601 timestamp with milliseconds and a Z, e.g. 2026-12-01T13:02:11.482Z."""
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def environment_from_dict(doc: object, where: Where) -> Environment:
    """A manifest's `environment` mapping, validated (`where` names it in errors)."""
    env: Environment = from_dict(Environment, doc, where)
    moments = [env.started, *(r.started for r in env.resumes), env.finished]
    known = [m for m in moments if m]
    if known != sorted(known, key=lambda m: datetime.fromisoformat(m.replace("Z", "+00:00"))):
        raise where.fail(f"started <= each resume's start <= finished (got {', '.join(known)})")
    return env


def environment_to_dict(env: Environment) -> dict:
    """The block as written to a manifest (JSON/YAML-ready)."""
    return to_dict(env)


def runner_dict(build: RunnerBuild) -> dict:
    """The build as the block's `runner` mapping (sha256, llama_cpp_commit, flags, ...)."""
    return to_dict(build)


def manifest_environment(manifest: Mapping, where: Where) -> Environment | None:
    """The environment of a document (results manifest, trace header or profile); None when it has none."""
    doc = manifest.get(KEY)
    return None if doc is None else environment_from_dict(doc, where.at(KEY))
