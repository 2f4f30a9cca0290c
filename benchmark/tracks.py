"""The benchmark's tracks: what each ranks on, its thresholds and budgets, what it needs.

PFL-DocVQA (Tito et al., https://arxiv.org/abs/2312.10108; competition rules) has two tracks:
track 1 ranks submissions that reach an ANLS threshold by the bytes they communicated, track 2
ranks verified provider-level DP submissions by ANLS within each privacy budget. The kit adds
track 3, personalisation (no public DocVQA benchmark scores it): a submission is the global
checkpoint plus one personalisation per client (``personal/client_{k}.safetensors``,
`benchmark.model.personalisation`); client k's personalised model is scored on client k's
personal test questions (`benchmark.data.personal`) and the ranking is the mean
personalised ANLS weighted by questions (`benchmark.evaluation.personal`), with the global
model's unseen-provider ANLS and the total bytes shown beside it.

Track 1's bytes are every message of the communication log, federated pre-training rounds
included: pre-training on the clients' documents (``pflkit train --fsp-rounds``) is federated
training, its messages are logged before the fine-tuning rounds and count in the total; a run
that pre-trains on client data without logging it breaks the rules like any unlogged training.
Track 2 takes no pre-training phase (its privacy declaration would not cover it).

The submission writer (``baselines.submission``), the evaluator (upload checks, worker) and the
leaderboard (ranking, pages, exports) iterate over [TRACKS][]. A new track is one more
[Track][] in [TRACKS][], plus its ranking function in
``leaderboard.ranking.RANKINGS``; a part only it needs (``benchmark.submission_contract``) has a
scoring step in the evaluator's worker, a figure only it has a column in ``evaluator.models``
(and a migration), a plot of its own an entry in ``leaderboard.plots.PLOTS`` and a page section
of its own a partial in ``leaderboard/templates/tracks/``.
"""

from __future__ import annotations

from dataclasses import dataclass

from benchmark.submission_contract import PARTS


@dataclass(frozen=True)
class Track:
    """One track of the benchmark.

    Attributes:
        number: the track's number in submissions (``submission.json`` ``track``).
        name: short name (``communication``, ``privacy``, ``personalisation``).
        ranking: the figure a track ranks on (``total_bytes``: fewer first; ``anls`` and
            ``personal_anls``, the mean personalised ANLS: higher first).
        parts: the upload parts a submission of this track needs (keys of
            ``benchmark.submission_contract.PARTS``).
        threshold: the ANLS a submission must reach to be ranked on the real PFL-DocVQA data
            (``None``: no threshold); a benchmark directory may state its own.
        threshold_key: the key of ``benchmark.json`` that states a benchmark's own threshold.
        threshold_setting: the environment variable that sets the threshold when the benchmark
            states none (else ``threshold`` holds), ``benchmark.threshold.threshold_in_force``.
        budgets: the epsilon budgets, one ranking each (empty: one ranking).
        delta: the largest delta a privacy claim may have (``None``: no privacy claim).
        title: what the track measures, the heading of its page section.
        result_columns: the result columns only this track fills (the evaluator's
            ``Submission`` columns, the leaderboard's ``Row`` fields), shown and exported beside
            the scores every track has.
        plot: the name of its plot in ``leaderboard.plots.PLOTS`` (``None``: no plot).
        section: its page section, a template partial under ``leaderboard/templates/``
            (``tracks/table.html`` shows one table of the result columns).
    """

    number: int
    name: str
    ranking: str
    parts: tuple[str, ...]
    threshold: float | None = None
    threshold_key: str | None = None
    threshold_setting: str | None = None
    budgets: tuple[float, ...] = ()
    delta: float | None = None
    title: str = ""
    result_columns: tuple[str, ...] = ()
    plot: str | None = None
    section: str = "tracks/table.html"

    def __post_init__(self) -> None:
        unknown = [part for part in self.parts if part not in PARTS]
        if unknown:
            raise ValueError(
                f"track {self.number}: unknown parts {unknown}; the upload parts are those of "
                "benchmark.submission_contract.PARTS"
            )


COMMUNICATION = Track(
    number=1,
    name="communication",
    ranking="total_bytes",
    parts=("model", "communication_log", "communication_details", "metadata"),
    threshold=0.8242,  # 95% of the organisers' FedAvg test ANLS (0.8676)
    threshold_key="track1_threshold",
    threshold_setting="PFLKIT_LEADERBOARD_THRESHOLD",
    title="communication efficiency",
    plot="bytes",
    section="tracks/communication.html",
)
PRIVACY = Track(
    number=2,
    name="privacy",
    ranking="anls",
    parts=("model", "communication_log", "communication_details", "metadata", "privacy"),
    budgets=(1.0, 4.0, 8.0),
    delta=1e-5,
    title="differential privacy per provider",
    result_columns=("epsilon", "delta", "privacy_verified"),
    plot="epsilon",
    section="tracks/privacy.html",
)
PERSONALISATION = Track(
    number=3,
    name="personalisation",
    ranking="personal_anls",
    parts=("model", "communication_log", "communication_details", "metadata", "personal"),
    title="personalisation",
    result_columns=(
        "personal_anls",
        "personal_anls_std",
        "personal_worst_anls",
        "global_unseen_anls",
    ),
    plot="personal",
    section="tracks/personalisation.html",
)

TRACKS: dict[int, Track] = {
    track.number: track for track in (COMMUNICATION, PRIVACY, PERSONALISATION)
}
"""The tracks by number."""


def get_track(number: int) -> Track:
    """The track with this number.

    Args:
        number: a key of [TRACKS][].

    Returns:
        The track.

    Raises:
        ValueError: for an unknown number.
    """
    if number not in TRACKS:
        raise ValueError(f"unknown track {number!r}; the benchmark has tracks {sorted(TRACKS)}")
    return TRACKS[number]


def track_numbers() -> str:
    """The tracks' numbers for messages: ``1 or 2``."""
    numbers = [str(number) for number in sorted(TRACKS)]
    return " or ".join([", ".join(numbers[:-1]), numbers[-1]] if len(numbers) > 1 else numbers)


def common_parts() -> tuple[str, ...]:
    """The upload parts every track needs, in ``benchmark.submission_contract.PARTS`` order."""
    return tuple(part for part in PARTS if all(part in t.parts for t in TRACKS.values()))


def thresholded_tracks() -> list[Track]:
    """The tracks that rank only the submissions reaching an ANLS threshold, by number."""
    return [track for _, track in sorted(TRACKS.items())
            if track.threshold is not None or track.threshold_key is not None]  # fmt: skip


def tracks_needing(part: str) -> list[int]:
    """The numbers of the tracks whose submissions need ``part``."""
    return sorted(number for number, track in TRACKS.items() if part in track.parts)
