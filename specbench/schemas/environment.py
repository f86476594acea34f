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

from specbench.schemas.fileio import Where, need, reject_unknown

KEY = "environment"
"""The block's key in every manifest."""


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
    flags: tuple[str, ...]
    """CMake flags of the build (<runners>/<abi>/manifest.json; empty when it has none)."""
    system_info: str
    """llama.cpp's `llama_print_system_info()` as the runner printed it (CPU features, backends)."""


@dataclass(frozen=True)
class LoadedModel:
    """One model file as the runner loaded it (its `loaded` event) and as specbench hashed it."""

    role: str
    """'target' or 'drafter'."""
    name: str
    """The model's name (a drafter's --drafter NAME, the target's file stem)."""
    sha256: str
    """sha256 of the GGUF file on this host (the bytes that were pushed or opened)."""
    desc: str
    """`llama_model_desc`: architecture, size class and file type, e.g. 'llama 135M F16'."""
    n_params: int
    """`llama_model_n_params`: parameters of the loaded model."""
    size_bytes: int
    """`llama_model_size`: bytes of its tensors."""
    threads: int | None = None
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
    cores: int | None
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
    argv: tuple[str, ...]
    started: str


@dataclass(frozen=True)
class Environment:
    specbench_version: str
    argv: tuple[str, ...]
    """The command line of the session that started the file, as run (sys.argv)."""
    started: str | None
    """UTC ISO-8601 start of the first session; None: a file without the block, resumed (`continued`)."""
    finished: str | None = None
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


def _timestamp(doc: dict, key: str, where: Where, required: bool = False) -> str | None:
    value = need(doc, key, str, where) if required else need(doc, key, (str, type(None)), where, None)
    if value is not None:
        try:
            parsed = datetime.fromisoformat(value.removesuffix("Z") + "+00:00" if value.endswith("Z") else value)
        except ValueError:
            parsed = None
        offset = parsed.utcoffset() if parsed is not None else None
        if offset is None or offset.total_seconds() != 0:
            raise where.at(key).fail("a UTC ISO-8601 timestamp such as 2026-12-01T13:02:11.482Z", value)
    return value


def _argv(doc: dict, where: Where) -> tuple[str, ...]:
    argv = need(doc, "argv", list, where)
    if not all(isinstance(a, str) for a in argv):
        raise where.at("argv").fail("a list of strings (the command line)", argv)
    return tuple(argv)


def _opt_int(doc: dict, key: str, where: Where) -> int | None:
    value = need(doc, key, (int, type(None)), where)
    if value is not None and value < 0:
        raise where.at(key).fail("an integer >= 0, or null", value)
    return value


def _runner(doc: dict, where: Where) -> RunnerBuild:
    reject_unknown(doc, {"version", "protocol", "sha256", "llama_cpp_commit", "flags", "system_info"}, where)
    flags = need(doc, "flags", list, where)
    if not all(isinstance(f, str) for f in flags):
        raise where.at("flags").fail("a list of CMake flags (strings)", flags)
    return RunnerBuild(need(doc, "version", str, where), need(doc, "protocol", int, where),
                       need(doc, "sha256", str, where), need(doc, "llama_cpp_commit", str, where),
                       tuple(flags), need(doc, "system_info", str, where))


def _model(doc: dict, where: Where) -> LoadedModel:
    reject_unknown(doc, {"role", "name", "sha256", "desc", "n_params", "size_bytes", "threads"}, where)
    role = need(doc, "role", str, where)
    if role not in ("target", "drafter"):
        raise where.at("role").fail("'target' or 'drafter'", role)
    counts = {}
    for key in ("n_params", "size_bytes"):
        counts[key] = need(doc, key, int, where)
        if counts[key] <= 0:
            raise where.at(key).fail("an integer > 0 (as llama.cpp reports it)", counts[key])
    threads = need(doc, "threads", int, where, None)
    if threads is not None and threads < 1:
        raise where.at("threads").fail("an integer >= 1", threads)
    return LoadedModel(role, need(doc, "name", str, where), need(doc, "sha256", str, where),
                       need(doc, "desc", str, where), counts["n_params"], counts["size_bytes"], threads)


def _device(doc: dict, where: Where) -> DeviceEnvironment:
    reject_unknown(doc, {"name", "kind", "model", "soc", "cores", "governor", "snapshot", "details"}, where)
    return DeviceEnvironment(need(doc, "name", str, where), need(doc, "kind", str, where),
                             need(doc, "model", str, where), need(doc, "soc", (str, type(None)), where),
                             _opt_int(doc, "cores", where), need(doc, "governor", (str, type(None)), where),
                             need(doc, "snapshot", dict, where), need(doc, "details", dict, where, {}))


def environment_from_dict(doc: object, where: Where) -> Environment:
    """A manifest's `environment` mapping, validated (`where` names it in errors)."""
    if not isinstance(doc, dict):
        raise where.fail("a mapping (the environment block)", doc)
    reject_unknown(doc, {"specbench_version", "argv", "started", "finished", "resumes", "runner", "models", "device"},
                   where)
    resumes = []
    for i, entry in enumerate(need(doc, "resumes", list, where, [])):
        r_where = where.at("resumes").at(i)
        reject_unknown(entry if isinstance(entry, dict) else {}, {"specbench_version", "argv", "started"}, r_where)
        resumes.append(Resume(need(entry, "specbench_version", str, r_where), _argv(entry, r_where),
                              str(_timestamp(entry, "started", r_where, required=True))))
    runner = need(doc, "runner", (dict, type(None)), where, None)
    device = need(doc, "device", (dict, type(None)), where, None)
    env = Environment(
        need(doc, "specbench_version", str, where), _argv(doc, where), _timestamp(doc, "started", where),
        _timestamp(doc, "finished", where), tuple(resumes),
        None if runner is None else _runner(runner, where.at("runner")),
        tuple(_model(m, where.at("models").at(i)) for i, m in enumerate(need(doc, "models", list, where, []))),
        None if device is None else _device(device, where.at("device")))
    moments = [env.started, *(r.started for r in env.resumes), env.finished]
    known = [m for m in moments if m]
    if known != sorted(known, key=lambda m: datetime.fromisoformat(m.replace("Z", "+00:00"))):
        raise where.fail(f"started <= each resume's start <= finished (got {', '.join(known)})")
    return env


def environment_to_dict(env: Environment) -> dict:
    """The block as written to a manifest (JSON/YAML-ready)."""
    doc: dict = {"specbench_version": env.specbench_version, "argv": list(env.argv), "started": env.started,
                 "finished": env.finished,
                 "resumes": [{"specbench_version": r.specbench_version, "argv": list(r.argv), "started": r.started}
                             for r in env.resumes],
                 "runner": None, "models": [{k: v for k, v in vars(m).items() if v is not None} for m in env.models],
                 "device": None}
    if env.runner is not None:
        doc["runner"] = runner_dict(env.runner)
    if env.device is not None:
        doc["device"] = vars(env.device) | {"snapshot": dict(env.device.snapshot), "details": dict(env.device.details)}
    return doc


def runner_dict(build: RunnerBuild) -> dict:
    """The build as the block's `runner` mapping (sha256, llama_cpp_commit, flags, ...)."""
    return vars(build) | {"flags": list(build.flags)}


def manifest_environment(manifest: Mapping, where: Where) -> Environment | None:
    """The environment of a document (results manifest, trace header or profile); None when it has none."""
    doc = manifest.get(KEY)
    return None if doc is None else environment_from_dict(doc, where.at(KEY))
