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

The submission writer (``baselines.submission``), the evaluator (upload checks, worker, API) and
the leaderboard (ranking, pages, exports) iterate over [TRACKS][]. A new track is one more
[Track][] in [TRACKS][]. A figure only it has is one more
[Figure][benchmark.result_figures.Figure] in its ``figures`` (stored by name, so no migration;
the worker computes it as the figure says; the API, the ranking rows, the tables and the exports
show it as declared); it ranks on any figure that declares a direction (``better``), or with a
function of its own in ``leaderboard.ranking.RANKINGS``. A part only it needs
(``benchmark.submission_contract``) has a scoring step in the evaluator's worker, a plot of its
own an entry in ``leaderboard.plots.PLOTS`` and a page section of its own a partial in
``leaderboard/templates/tracks/``.
"""

from __future__ import annotations

from dataclasses import dataclass

from benchmark.result_figures import PUBLIC_DECIMALS, SHARED_FIGURES, Figure, Shown, figures_by_name
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
        description: the track in one or two sentences for a reader of the leaderboard (the
            opening of its page section, before the link to how a submission is scored).
        result_columns: the shared figures (``benchmark.result_figures.SHARED_FIGURES``) only
            this track fills, shown and exported beside the scores every track has.
        figures: the figures only this track has ([Figure][benchmark.result_figures.Figure]),
            stored by name; those shown on the board are shown and exported after
            ``result_columns``.
        plot: the name of its plot in ``leaderboard.plots.PLOTS`` (``None``: no plot).
        section: its page section, a template partial under ``leaderboard/templates/``
            (``tracks/table.html`` shows one table of the ranking figure and the board figures).
        detail: its section of a submission's page, a template partial under
            ``leaderboard/templates/`` (``tracks/figures_detail.html`` lists its own figures).
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
    description: str = ""
    result_columns: tuple[str, ...] = ()
    figures: tuple[Figure, ...] = ()
    plot: str | None = None
    section: str = "tracks/table.html"
    detail: str = "tracks/figures_detail.html"

    def __post_init__(self) -> None:
        unknown = [part for part in self.parts if part not in PARTS]
        if unknown:
            raise ValueError(
                f"track {self.number}: unknown parts {unknown}; the upload parts are those of "
                "benchmark.submission_contract.PARTS"
            )
        shared = figures_by_name(SHARED_FIGURES)
        own = figures_by_name(self.figures)
        clashing = sorted(set(own) & set(shared))
        if clashing:
            raise ValueError(f"track {self.number}: figures {clashing} are shared figures already")
        if self.ranking not in own and self.ranking not in shared:
            raise ValueError(
                f"track {self.number} ranks on {self.ranking!r}, which is neither one of its "
                "figures nor a shared one (benchmark.result_figures.SHARED_FIGURES)"
            )
        unknown = [name for name in self.result_columns if name not in shared]
        if unknown:
            raise ValueError(f"track {self.number}: result columns {unknown} are no shared figure")

    def ranking_figure(self) -> Figure:
        """The figure the track ranks on (its own, or a shared one)."""
        return figures_by_name((*self.figures, *SHARED_FIGURES))[self.ranking]

    def board_figures(self) -> list[Figure]:
        """The figures its leaderboard table and exports show beside the shared scores: its
        ``result_columns``, then its own scalar figures shown on the board."""
        shared = figures_by_name(SHARED_FIGURES)
        own = [f for f in self.figures if f.shown is Shown.BOARD and f.scalar]
        return [shared[name] for name in self.result_columns] + own


COMMUNICATION = Track(
    number=1,
    name="communication",
    ranking="total_bytes",
    parts=("model", "communication_log", "communication_details", "metadata"),
    threshold=0.8242,  # 95% of the organisers' FedAvg test ANLS (0.8676)
    threshold_key="track1_threshold",
    threshold_setting="PFLKIT_LEADERBOARD_THRESHOLD",
    title="communication efficiency",
    description="Federated training that spends the fewest bytes: submissions that reach the "
    "ANLS threshold (95% of the organisers' FedAvg baseline) rank by the bytes their clients "
    "and server exchanged, as the evaluator counts them from the communication log.",
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
    description="The best answers under a provider-level differential-privacy guarantee: "
    "claims the evaluator verified rank by test ANLS within each budget of epsilon (1, 4 and 8), "
    "and a claim counts in every budget at or above its epsilon.",
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
    description="One model per client: each client's personalised model answers that client's "
    "own test questions, and submissions rank by the mean ANLS over all those questions.",
    figures=(
        Figure("personal_anls", label="mean personalised ANLS", short="pers.",
               decimals=PUBLIC_DECIMALS, better="higher", compute="personal.personal_anls",
               description="track 3: mean personalised ANLS, weighted by questions"),
        Figure("personal_anls_std", label="\N{PLUS-MINUS SIGN} std", short="std",
               decimals=PUBLIC_DECIMALS, compute="personal.personal_anls_std",
               description="track 3: the per-client personalised ANLS's standard deviation"),
        Figure("personal_worst_client", "int", label="worst client's number", shown=Shown.PAGE,
               compute="personal.worst_client"),
        Figure("personal_worst_anls", label="worst client", short="worst",
               decimals=PUBLIC_DECIMALS, compute="personal.worst_anls",
               description="track 3: the worst client's personalised ANLS"),
        Figure("global_personal_anls", label="global model, personal questions",
               decimals=PUBLIC_DECIMALS, shown=Shown.PAGE, compute="personal.global_personal_anls"),
        Figure("global_unseen_anls", label="global unseen ANLS", short="unseen",
               decimals=PUBLIC_DECIMALS, compute="personal.unseen_anls",
               description="track 3: the global model's ANLS on the providers no client holds"),
        Figure("n_personal", "int", label="personal questions", shown=Shown.PAGE,
               compute="personal.n"),
        Figure("personal_clients", "json", label="per client", decimals=PUBLIC_DECIMALS,
               rounded_keys=("personal_anls", "global_anls"), compute="personal.clients",
               description="track 3: per client n, personal_anls, global_anls"),
        Figure("personal_report", "json", label="personalisation report", shown=Shown.TEAM,
               description="track 3: the personalisations' files, bytes and declared-frozen "
               "replacements (the personal part's scoring step)"),
    ),
    plot="personal",
    section="tracks/personalisation.html",
    detail="tracks/personalisation_detail.html",
)  # fmt: skip

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


def track_figures() -> dict[str, Figure]:
    """Every track's own figures by name, read when called (a track added later counts).

    Raises:
        ValueError: two tracks declare different figures of the same name.
    """
    return figures_by_name(figure for _, track in sorted(TRACKS.items()) for figure in track.figures)


def figure_named(name: str) -> Figure:
    """The shared figure or track figure of this name.

    Raises:
        KeyError: no figure has this name.
    """
    named = {**figures_by_name(SHARED_FIGURES), **track_figures()}
    if name not in named:
        raise KeyError(f"no figure is named {name!r}")
    return named[name]


def thresholded_tracks() -> list[Track]:
    """The tracks that rank only the submissions reaching an ANLS threshold, by number."""
    return [track for _, track in sorted(TRACKS.items())
            if track.threshold is not None or track.threshold_key is not None]  # fmt: skip


def tracks_needing(part: str) -> list[int]:
    """The numbers of the tracks whose submissions need ``part``."""
    return sorted(number for number, track in TRACKS.items() if part in track.parts)
