"""Every track's data names things that exist: its parts in the submission contract, its
result columns in the database, the API and the ranking rows, its ranking, plot and page
section in the leaderboard; every part's size limit is a setting."""

from __future__ import annotations

import dataclasses

import pytest

from benchmark.submission_contract import PARTS
from benchmark.tracks import TRACKS, Track
from evaluator.core.config import Settings
from evaluator.schemas import ResultsPublic
from evaluator.tables import Submission
from leaderboard.plots import PLOTS
from leaderboard.ranking import RANKINGS, Row
from leaderboard.routes.templating import PACKAGE_DIR


@pytest.mark.parametrize("track", TRACKS.values(), ids=lambda t: t.name)
def test_a_tracks_data_names_what_exists(track: Track) -> None:
    rows = {f.name for f in dataclasses.fields(Row)}
    for column in track.result_columns:
        assert column in Submission.__table__.c, column
        assert column in ResultsPublic.model_fields, column
        assert column in rows, column
    assert track.ranking in RANKINGS
    assert track.plot is None or track.plot in PLOTS
    assert (PACKAGE_DIR / "templates" / track.section).is_file()
    assert set(track.parts) <= set(PARTS)


def test_every_part_has_a_size_limit_setting() -> None:
    for part in PARTS.values():
        assert part.limit_setting in Settings.model_fields, part.name


def test_a_track_with_a_part_the_contract_lacks_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown parts"):
        Track(number=9, name="x", ranking="anls", parts=("model", "notes"))


def test_every_figure_is_where_its_declaration_says() -> None:
    from benchmark.result_figures import SHARED_FIGURES, Shown
    from benchmark.tracks import track_figures

    rows = {f.name for f in dataclasses.fields(Row)}
    for figure in SHARED_FIGURES:  # a column of every submission, in the API
        assert figure.name in Submission.__table__.c, figure.name
        assert figure.name in ResultsPublic.model_fields, figure.name
        assert (figure.name in rows) == (figure.shown is Shown.BOARD), figure.name
    for figure in track_figures().values():  # stored by name, in the API, never a column
        assert figure.name not in Submission.__table__.c, figure.name
        assert figure.name in ResultsPublic.model_fields, figure.name
        assert figure.name not in rows, figure.name


def test_a_figure_declares_only_what_its_kind_allows() -> None:
    from benchmark.result_figures import Figure

    for bad, message in [({"name": "two words"}, "Python identifier"),
                         ({"name": "x", "kind": "list"}, "not one of"),
                         ({"name": "x", "kind": "int", "decimals": 4}, "only float and json"),
                         ({"name": "x", "rounded_keys": ("a",)}, "for json figures"),
                         ({"name": "x", "kind": "json", "better": "higher"}, "only a number")]:
        with pytest.raises(ValueError, match=message):
            Figure(**bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="are shared figures already"):
        Track(number=9, name="x", ranking="anls", parts=("model",), figures=(Figure("anls"),))
