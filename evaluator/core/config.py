"""Settings of the evaluator service: the only module that reads the environment.

Every value can be given as an environment variable prefixed with ``PFLKIT_EVALUATOR_``
(``PFLKIT_EVALUATOR_DATABASE_URL``, ``PFLKIT_EVALUATOR_DAILY_QUOTA``...) or passed by the
command line. Unsafe values fail at start-up with a message that says what to change.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, PositiveInt, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from evaluator.reproduction.verdict import DEFAULT_TOLERANCE as DEFAULT_REPRODUCTION_TOLERANCE

ENV_PREFIX = "PFLKIT_EVALUATOR_"
MIB = 1024 * 1024
# Hard ceilings no configuration may exceed: a checkpoint of the real VT5-base in fp32 is ~1.3 GB.
MAX_MODEL_BYTES_CEILING = 8 * 1024 * MIB
MAX_HEADER_BYTES_CEILING = 100 * MIB
# Threads of one API process for blocking work (database, file checks), and so its connections.
DEFAULT_API_THREADS = 16
#: where the documentation site is published unless ``docs_url`` says otherwise.
DEFAULT_DOCS_URL = "/site/"
#: ``make docs``'s output in a checkout of the kit, which the service serves at ``docs_url``.
DEFAULT_SITE_DIR = Path(__file__).resolve().parents[2] / "site"
PLACEHOLDER_TOKENS = {
    "changeme",
    "change-me",
    "secret",
    "password",
    "organiser",
    "organizer",
    "token",
}


class Settings(BaseSettings):
    """Configuration of the API server and the scoring workers.

    Attributes:
        storage_dir: where uploaded submissions are stored (shared by every worker machine).
        database_url: SQLAlchemy URL; default a SQLite file in ``storage_dir``.
        queue_url: Huey queue, ``sqlite:///path`` or ``redis://host:port/db``; default a
            SQLite file in ``storage_dir``.
        data_dir: benchmark directory as ``pflkit data generate`` writes it; the workers read
            its hidden test split (``evaluator/imdb_test.npy``).
        reference_model: model whose configuration defines the expected checkpoint
            (``base`` = the kit's shipped model, or a directory); its family (VT5 for
            ``base``) is the competition's default.
        family_references: other model families the competition scores, each with its
            reference checkpoint (the base every run of that family starts from), from the
            environment as JSON: ``PFLKIT_EVALUATOR_FAMILY_REFERENCES='{"pix2struct": "/srv/p2s"}'``.
            A submission declares its family in ``submission.json`` (``vt5`` when it does not);
            one of a family not listed here is rejected, naming those that are.
        organiser_token: optional organiser token accepted besides organiser teams' tokens.
        auth_failures_allowed: failed authentications per client address and window before
            that address is answered 429 (``Retry-After``) until the window has passed.
        auth_failure_window_seconds: the window of ``auth_failures_allowed``.
        session_hours: lifetime of an organiser page session.
        session_cookie_secure: mark the session cookie ``Secure`` (sent over HTTPS only; keep
            it on unless the pages are served over plain HTTP on a private network).
        api_workers: uvicorn processes serving the API.
        api_threads: threads of one API process for blocking work (database queries, upload
            checks); its database pool holds as many connections, so no request waits for one.
            On PostgreSQL, ``api_workers x (api_threads + 4)`` plus the workers' connections
            must stay below the server's ``max_connections`` (100 by default).
        gc_freeze: leave the objects of an API process's start-up out of the garbage
            collector's full passes (``gc.freeze``; ``pflkit serve`` turns it on): with 200
            concurrent readers a full pass over them stopped the process for 0.2-0.65 s every
            second or two. Off by default, for apps built inside another program (the tests).
        daily_quota: submissions per team per UTC day (failed and rejected ones do not count).
        copy_policy: what happens to an upload whose checkpoint (SHA-256) repeats another
            team's live submission: ``refuse`` (409) or ``flag`` (accepted, marked for the
            organisers). A team's own repeat is always refused and does not use quota.
        max_personal_file_bytes: largest track-3 personalisation file (one client's
            ``personal_{k}`` part).
        max_personal_bytes: largest sum of a track-3 submission's personalisation files.
        max_log_rounds: most federated rounds a communication log may hold.
        max_details_bytes: largest detailed communication log (``communication_log.jsonl``:
            every message's tensor names, about 12 KB a message for full fine-tuning of VT5).
        max_recipe_bytes: largest training recipe (``recipe.json``: the configuration and the
            run's component files; organiser-only, re-run by ``pflkit reproduce``).
        max_messages_per_client_round: most messages per client and round in a log (a round
            holds at most ``2 * K`` times this many).
        lease_seconds: how long a worker owns a job without a heartbeat before it is re-queued.
        worker_beat_seconds: how often every scoring worker records that it is alive (the
            ``workers`` table); a worker silent for three beats is not live (``/readyz`` answers
            503 when no worker is live).
        device: where a scoring worker runs the model: ``auto`` (CUDA when torch sees a GPU,
            else the CPU), ``cpu``, ``cuda`` or ``cuda:N`` (``benchmark.model.device``).
        precision: ``fp32``, or ``bf16`` (autocast on the forward passes; not bit-compatible).
        audit_attack: the privacy audit's attack (``evaluator.canary_audit``): ``calibrated``
            (the default: the canary invoices' own questions, their gains beyond what the base
            model's likelihood predicts; the strongest, docs/organisers/audit.md), ``question``
            (the same probes' plain gains) or ``secret`` (identity questions with the identity
            removed from the OCR). Fixed before the competition opens.
        reproduction: per track, which finished submissions the workers re-run from their
            recipe (``off``: none, the default; ``all``: every one; a number k: the top k of
            each of the track's rankings, one per budget, selected again whenever the ranking
            changes, by the leaderboard of ``pflkit serve``); a submission selected and not
            reproduced is unranked (docs/organisers/reproduction.md). From the environment as
            JSON: ``PFLKIT_EVALUATOR_REPRODUCTION='{"1": 3, "2": "all"}'``.
        reproduction_cpu_seconds: the re-run sandbox's CPU-time limit (its wall clock is twice).
        reproduction_memory_bytes: the re-run sandbox's memory (address-space) limit: training
            reserves more address space than it touches (a tiny VT5 at batch size 16: 8.5 GB).
        reproduction_threads: torch threads of a re-run (``None``: the recipe's).
        reproduction_tolerance: across machine types, the largest distance between the
            submitted and the re-run model over the re-run's change from the base: one value
            for every track, or one per track (``{"2": 0.001}``; a track left out gets 0.1).
            The measured margins that choose it are in docs/organisers/reproduction.md.
        torch_threads: intra-op threads of a scoring worker (0: torch's default). On a machine
            shared with other work, 1 avoids oversubscription (twice as fast here under load).
        docs_url: where the documentation site (``make docs``'s ``site/``) is published, an
            ``http(s)://`` URL or a path on the service's host; the leaderboard's pages link
            its participants' pages under it (``participants/scoring/``). The default,
            ``/site/``, is the site on the service's own host: ``site_dir`` served by the
            service, or a reverse proxy's when ``docs_url`` is set. Where no site answers there
            (the default path and no ``site_dir``), the pages show no link rather than a
            broken one (:attr:`docs_link`).
        site_dir: a built documentation site (``make docs``'s ``site/``; the default is the
            kit checkout's) that the service serves itself at ``docs_url`` when that is a path
            and the directory holds ``index.html``.
    """

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="ignore")

    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=1, le=65535)
    storage_dir: Path = Path("evaluator-storage")
    database_url: str | None = None
    queue_url: str | None = None
    queue_name: str = "pflkit-evaluator"
    data_dir: Path | None = None
    images_dir: Path | None = None
    reference_model: str = "base"
    family_references: dict[str, str] = Field(default_factory=dict)
    organiser_token: SecretStr | None = None

    daily_quota: int = Field(default=5, ge=1, le=10_000)
    copy_policy: Literal["refuse", "flag"] = "refuse"
    auth_failures_allowed: int = Field(default=20, ge=1, le=10_000)
    auth_failure_window_seconds: float = Field(default=60.0, gt=0, le=86_400)
    session_hours: float = Field(default=8.0, gt=0, le=24 * 7)
    session_cookie_secure: bool = True
    max_model_bytes: int = Field(default=2 * 1024 * MIB, ge=1024)
    max_header_bytes: int = Field(default=16 * MIB, ge=1024)
    max_personal_file_bytes: int = Field(default=2 * 1024 * MIB, ge=1024)
    max_personal_bytes: int = Field(default=8 * 1024 * MIB, ge=1024)
    max_log_bytes: int = Field(default=32 * MIB, ge=1024)
    max_log_rows: int = Field(default=1_000_000, ge=1)
    max_log_rounds: int = Field(default=10_000, ge=1, le=1_000_000)
    max_details_bytes: int = Field(default=256 * MIB, ge=1024, le=4 * 1024 * MIB)
    max_messages_per_client_round: int = Field(default=64, ge=1, le=100_000)
    max_json_bytes: int = Field(default=256 * 1024, ge=256)
    max_recipe_bytes: int = Field(default=2 * MIB, ge=1024, le=2 * MIB)
    max_tensors: int = Field(default=20_000, ge=1)

    lease_seconds: float = Field(default=300.0, gt=0)
    reap_interval_seconds: float = Field(default=10.0, gt=0)
    worker_beat_seconds: float = Field(default=5.0, gt=0, le=3600)
    received_timeout_seconds: float = Field(default=3600.0, gt=0)
    max_attempts: int = Field(default=3, ge=1, le=100)
    retry_delay_seconds: float = Field(default=10.0, ge=0)
    worker_threads: int = Field(default=1, ge=1, le=64)
    api_workers: int = Field(default=1, ge=1, le=64)
    api_threads: int = Field(default=DEFAULT_API_THREADS, ge=1, le=256)
    gc_freeze: bool = False
    embedded_worker: bool = True
    batch_size: int = Field(default=32, ge=1, le=4096)
    torch_threads: int = Field(default=0, ge=0, le=256)
    device: str = Field(default="auto", pattern=r"^(auto|cpu|cuda(:[0-9]{1,2})?)$")
    precision: Literal["fp32", "bf16"] = "fp32"
    audit_attack: Literal["secret", "question", "calibrated"] = "calibrated"
    reproduction: dict[int, Literal["off", "all"] | PositiveInt] = Field(default_factory=dict)
    reproduction_cpu_seconds: int = Field(default=7200, ge=1)
    reproduction_memory_bytes: int = Field(default=16 * 1024 * MIB, ge=256 * MIB)
    reproduction_threads: int | None = Field(default=None, ge=1, le=1024)
    reproduction_tolerance: (Annotated[float, Field(ge=0.0, le=1.0)]
                             | dict[int, Annotated[float, Field(ge=0.0, le=1.0)]]
                             ) = DEFAULT_REPRODUCTION_TOLERANCE
    log_level: str = "INFO"
    docs_url: str = DEFAULT_DOCS_URL
    site_dir: Path | None = DEFAULT_SITE_DIR

    @field_validator("organiser_token")
    @classmethod
    def _strong_organiser_token(cls, value: SecretStr | None) -> SecretStr | None:
        if value is None or value.get_secret_value() == "":
            return None
        token = value.get_secret_value()
        if len(token) < 32 or token.lower() in PLACEHOLDER_TOKENS:
            raise ValueError(
                "the organiser token must be at least 32 random characters; generate one with "
                "`python -c 'import secrets; print(secrets.token_urlsafe(32))'`"
            )
        return value

    @field_validator("docs_url")
    @classmethod
    def _docs_url(cls, value: str) -> str:
        if not value.startswith(("http://", "https://", "/")) or any(c.isspace() for c in value):
            raise ValueError(
                "docs_url must be an http(s):// URL or a path on this host starting with /, "
                f"without spaces (got {value!r}); e.g. https://example.org/pflkit/ or /site/"
            )
        return value if value.endswith("/") else value + "/"

    @property
    def serves_site(self) -> bool:
        """Whether the service serves the documentation site itself (:attr:`site_dir` at
        :attr:`docs_url`, a path on this host)."""
        return (self.docs_url.startswith("/") and self.site_dir is not None
                and (self.site_dir / "index.html").is_file())  # fmt: skip

    @property
    def docs_link(self) -> str | None:
        """The documentation site's address for the pages' links: ``docs_url`` when it is a
        URL, was set by the organisers (a reverse proxy serves it) or is served by the service;
        ``None`` for the default path with no site behind it."""
        chosen = self.docs_url.startswith(("http://", "https://")) or (
            "docs_url" in self.model_fields_set)
        return self.docs_url if chosen or self.serves_site else None

    @field_validator("database_url")
    @classmethod
    def _persistent_database(cls, value: str | None) -> str | None:
        if value is None:
            return None
        if not value.startswith(("sqlite", "postgresql")):
            raise ValueError("database_url must be a sqlite:/// file or a postgresql:// URL")
        if value.startswith("sqlite") and (":memory:" in value or value.rstrip("/") == "sqlite:"):
            raise ValueError(
                "an in-memory SQLite database would lose every submission; give a file, "
                "e.g. sqlite:///evaluator.db"
            )
        return value

    @field_validator("family_references")
    @classmethod
    def _known_families(cls, value: dict[str, str]) -> dict[str, str]:
        from benchmark.model.families import FAMILIES

        unknown = sorted(set(value) - set(FAMILIES))
        if unknown:
            raise ValueError(f"names model families {unknown}; the kit knows {sorted(FAMILIES)}")
        return value

    @field_validator("reproduction", "reproduction_tolerance")
    @classmethod
    def _known_tracks(cls, value: Any) -> Any:
        from benchmark.tracks import TRACKS

        unknown = sorted(set(value) - set(TRACKS)) if isinstance(value, dict) else []
        if unknown:
            raise ValueError(f"names tracks {unknown}; the benchmark has tracks {sorted(TRACKS)}")
        return value

    def reference_of(self, family: str) -> str:
        """The reference checkpoint of a model family: ``family_references``' entry, else
        ``reference_model`` (the default family's)."""
        return self.family_references.get(family, self.reference_model)

    def tolerance_of(self, track: int) -> float:
        """The re-run tolerance of ``track`` (``reproduction_tolerance``)."""
        if isinstance(self.reproduction_tolerance, dict):
            return self.reproduction_tolerance.get(track, DEFAULT_REPRODUCTION_TOLERANCE)
        return self.reproduction_tolerance

    @field_validator("queue_url")
    @classmethod
    def _known_queue(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("sqlite:///", "redis://", "rediss://")):
            raise ValueError("queue_url must be sqlite:///PATH or redis://HOST:PORT/DB")
        return value

    @model_validator(mode="after")
    def _consistent_limits(self) -> Settings:
        if self.max_model_bytes > MAX_MODEL_BYTES_CEILING:
            raise ValueError(f"max_model_bytes may not exceed {MAX_MODEL_BYTES_CEILING} bytes")
        if self.max_header_bytes > MAX_HEADER_BYTES_CEILING:
            raise ValueError(f"max_header_bytes may not exceed {MAX_HEADER_BYTES_CEILING} bytes")
        if self.max_personal_file_bytes > MAX_MODEL_BYTES_CEILING:
            raise ValueError(
                f"max_personal_file_bytes may not exceed {MAX_MODEL_BYTES_CEILING} bytes"
            )
        if self.reap_interval_seconds > self.lease_seconds:
            raise ValueError("reap_interval_seconds must not exceed lease_seconds")
        return self

    @property
    def db_url(self) -> str:
        """The database URL, a SQLite file in the storage directory unless one was given."""
        if self.database_url:
            return self.database_url
        return f"sqlite:///{(self.storage_dir / 'evaluator.db').resolve()}"

    @property
    def queue(self) -> str:
        """The queue URL, a SQLite file in the storage directory unless one was given."""
        if self.queue_url:
            return self.queue_url
        return f"sqlite:///{(self.storage_dir / 'queue.db').resolve()}"

    @property
    def max_request_bytes(self) -> int:
        """Largest multipart body accepted: every part at its limit plus room for the framing
        (track 3's personalisations included)."""
        return (
            self.max_model_bytes
            + self.max_log_bytes
            + self.max_details_bytes
            + 2 * self.max_json_bytes
            + self.max_recipe_bytes
            + self.max_personal_bytes
            + 64 * 1024
        )

    @property
    def worker_stale_seconds(self) -> float:
        """How long a worker may stay silent and still count as live (three beats)."""
        return 3.0 * self.worker_beat_seconds

    @property
    def heartbeat_seconds(self) -> float:
        """How often a scoring worker renews its lease."""
        return max(self.lease_seconds / 4.0, 0.2)

    def environment(self) -> dict[str, str]:
        """These settings as environment variables, for child worker processes."""
        env: dict[str, str] = {}
        for name, value in self.model_dump().items():
            if value is None:
                continue
            if isinstance(value, SecretStr):
                value = value.get_secret_value()
            elif isinstance(value, dict | list):  # read back as JSON, as pydantic-settings does
                value = json.dumps(value)
            env[ENV_PREFIX + name.upper()] = str(value)
        env[ENV_PREFIX + "DATABASE_URL"] = self.db_url
        env[ENV_PREFIX + "QUEUE_URL"] = self.queue
        return env
