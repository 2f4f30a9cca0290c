"""The one-run privacy audit of a submission with the benchmark's canary providers.

The organisers' part of the benchmark (``evaluator/canaries.json``, written by ``pflkit data
generate --canaries M``) holds each canary's secret coin, and ``evaluator/imdb_canaries.npy``
the probes of every canary invoice: ``secret`` probes, identity questions (name, VAT id, IBAN)
with the identity removed from the OCR and the secret as answer, and ``question`` probes, the
invoice's own questions as drawn for training. A canary's score under an attack is how much
more likely the submitted model finds the answers of that attack's probes than the reference
(base) model does: the mean over the canary's probes of the answer's log-likelihood,
submitted minus base. The scores and coins go to :func:`accountant.audit.one_run_audit`,
which analyses the guesses twice (Steinke, Nasr and Jagielski 2023; the f-DP test of
Mahloujifar, Melis and Chaudhuri 2025 with Gaussian curves): ``audit_epsilon`` is the larger
bound, the one a claim is compared with, and the report holds both (``epsilon_lower_bound``,
``fdp_epsilon_lower_bound``) with ``verdict_analysis`` and ``verdict_note`` (what the analysis
that decided assumes).

A third attack, ``calibrated`` (the default), scores the ``question`` probes by their gain
beyond what the base model's log-likelihood predicts (:func:`calibrated_gain`): fine-tuning
raises every invoice's likelihood, most where the base was worst, and that generic gain varies
from canary to canary more than memorisation adds. It was chosen on one benchmark draw (``mini``,
seed 0, the ``fedavg`` preset: AUC 0.835 against 0.677 for ``question``, bound 1.63 against
0.11), its probe settings on seeds 0 and 1, and then measured on eight draws never looked at
before (docs/results/audit_power.md).

The attack that decides (``attack``) is fixed by the organisers before any submission: trying
several and keeping the largest bound would need a correction for the choice. The other
attacks' AUCs are reported beside it, as information.

Reconstruction canaries (``kind: reconstruction`` in the coins file): every canary was trained
on with one of k candidate VAT id and IBAN pairs. Asking the model for the secret with the
secret hidden scores nothing (measured: a model that copies answers from the OCR has no reason
to store them), so the attack asks which version of the canary's own training records the
model fits best: each ``question`` probe whose page shows the secret is scored k times, the
secret's words in its OCR and answer replaced by each candidate's (:func:`with_candidate`).
A canary's score for a candidate is the mean of that version's log-likelihood gain
(submitted minus base) over its probes, and :func:`accountant.audit.reconstruction_audit`
analyses the guesses (the best candidate per canary) with the f-DP test for k-ary guesses.

Cost: only the probes the deciding attack reads are scored (for ``calibrated`` and ``question``
the question probes, which give both AUCs; ``secret`` reads the identity probes alone), and
only those of at most ``probe_documents`` invoices per canary (its first, in the coins file's
order: 8 for membership canaries, 2 for reconstruction ones, whose probes are scored once per
candidate), so the audit's pass is bounded whatever the canaries' invoice counts.

Like :mod:`evaluator.scoring`, only aggregates leave this module: no probe, secret, coin or
per-canary score is returned, logged or put into a message.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Mapping
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

from accountant.audit import one_run_audit, reconstruction_audit

COINS_FILE = "canaries.json"
PROBES_FILE = "imdb_canaries.npy"
ATTACKS = ("secret", "question", "calibrated")
#: the probes each attack scores
ATTACK_PROBES = {"secret": "secret", "question": "question", "calibrated": "question"}
#: the attack the evaluator decides with unless the organisers set another
DEFAULT_ATTACK = "calibrated"
#: the attack that scores reconstruction canaries, whatever the organisers set: the likelihood
#: of each candidate's version of the canary's question probes
RECONSTRUCTION_ATTACK = "question"
#: the delta tested when the submission declares none (track 1): the competition's
DEFAULT_DELTA = 1e-5
#: invoices per canary whose probes the audit scores, per canary kind (measured:
#: docs/results/audit_power.md): a membership canary's probes are one row each, a
#: reconstruction canary's one per candidate
DEFAULT_PROBE_DOCUMENTS = {"membership": 8, "reconstruction": 2}


class CanaryAudit:
    """Audits submitted models against one benchmark's canaries; cached per worker process.

    Args:
        data_dir: the benchmark directory (its ``evaluator/`` part holds coins and probes).
        reference_dir: the base model every run starts from (the scores are relative to it),
            or a function returning it (resolved on first use).
        batch_size: probes per forward pass.
        device: where the base model runs (a torch device, or a function returning one).
        attack: how a membership canary is scored (a key of :data:`ATTACKS`: ``secret``,
            ``question`` or ``calibrated``; reconstruction canaries are always scored by their
            ``question`` probes, one version per candidate).
        probe_documents: invoices per canary whose probes are scored (None: all; ``kind``:
            the canary kind's :data:`DEFAULT_PROBE_DOCUMENTS`).
    """

    def __init__(
        self,
        data_dir: Path,
        reference_dir: Path | Callable[[], Path],
        *,
        batch_size: int = 32,
        device: Any = "cpu",
        attack: str = DEFAULT_ATTACK,
        probe_documents: int | Literal["kind"] | None = "kind",
    ) -> None:
        if attack not in ATTACKS:
            raise ValueError(f"attack must be one of {', '.join(ATTACKS)}, not {attack!r}")
        if probe_documents != "kind" and probe_documents is not None and probe_documents < 1:
            raise ValueError(f"probe_documents must be >= 1, 'kind' or None, not {probe_documents}")
        self.attack = attack
        self._probe_documents = probe_documents
        self.data_dir = Path(data_dir)
        self._reference = reference_dir
        self._device = device
        self.batch_size = batch_size

    @cached_property
    def reference_dir(self) -> Path:
        """The base model's directory."""
        return Path(self._reference() if callable(self._reference) else self._reference)

    @property
    def directory(self) -> Path:
        """The organisers' part of the benchmark."""
        return self.data_dir / "evaluator"

    @cached_property
    def available(self) -> bool:
        """Whether the benchmark has canaries (both organiser files present)."""
        return (self.directory / COINS_FILE).is_file() and (self.directory / PROBES_FILE).is_file()

    @cached_property
    def _coins(self) -> dict[str, Any]:
        """The organisers' coins file."""
        return json.loads((self.directory / COINS_FILE).read_text(encoding="utf-8"))

    @property
    def kind(self) -> str:
        """``membership`` or ``reconstruction`` (files written before the kinds: membership)."""
        return str(self._coins.get("kind", "membership"))

    @property
    def probe_documents(self) -> int | None:
        """Invoices per canary whose probes are scored (None: all)."""
        if self._probe_documents == "kind":
            return DEFAULT_PROBE_DOCUMENTS[self.kind]
        return self._probe_documents

    @property
    def scored_probe(self) -> str:
        """The kind of probe scored: the attack's (reconstruction canaries: ``question``)."""
        attack = RECONSTRUCTION_ATTACK if self.kind == "reconstruction" else self.attack
        return ATTACK_PROBES[attack]

    @property
    def attacks_scored(self) -> tuple[str, ...]:
        """The attacks the scored probes give (the deciding one and the others on the same
        probes, reported as information)."""
        return tuple(a for a in ATTACKS if ATTACK_PROBES[a] == self.scored_probe)

    @property
    def coins(self) -> list[bool]:
        """Each canary's coin (True: trained on), in the canaries' order."""
        return self._canaries[1]

    @cached_property
    def _canaries(self) -> tuple[list[str], list[bool], list[dict[str, Any]]]:
        """(canary provider ids, their coins, the probes scored), from the organisers' files:
        the :attr:`scored_probe` probes of each canary's first ``probe_documents`` invoices."""
        from benchmark.data.imdb import read_imdb

        entries = self._coins["canaries"]
        providers = [entry["provider"] for entry in entries]
        included = [bool(entry["included"]) for entry in entries]
        _, probes = read_imdb(self.directory / PROBES_FILE)  # the organisers' own file
        known = set(providers)
        if not probes or any(p["provider"] not in known for p in probes):
            raise ValueError("the canary probes do not match the canaries' coins")
        if self.probe_documents is not None:
            kept = {d for entry in entries for d in entry["documents"][: self.probe_documents]}
            probes = [p for p in probes if p["document_id"] in kept]
        probes = [p for p in probes if p.get("probe") == self.scored_probe]
        if len({p["provider"] for p in probes}) != len(providers):
            raise ValueError(f"some canaries have no {self.scored_probe!r} probe")
        return providers, included, probes

    @cached_property
    def _rows(self) -> list[tuple[int, int, dict[str, Any]]]:
        """What is scored, as (probe index, candidate index, record): for membership canaries
        every probe once as it is (candidate 0); for reconstruction canaries each ``question``
        probe (a training record of the canary) whose page shows the secret, once per
        candidate, with the secret's words in its OCR and answer replaced by the candidate's
        (:func:`with_candidate`): which of the k versions of its own training records the
        model fits best."""
        providers, _, probes = self._canaries
        if self.kind != "reconstruction":
            return [(i, 0, p) for i, p in enumerate(probes)]
        entries = {entry["provider"]: entry for entry in self._coins["canaries"]}
        rows = []
        for index, probe in enumerate(probes):
            entry = entries[probe["provider"]]
            secret = entry["candidates"][entry["secret"]]
            if probe.get("probe") != "question" or not _shows(probe, secret):
                continue
            rows += [(index, j, with_candidate(probe, secret, option))
                     for j, option in enumerate(entry["candidates"])]  # fmt: skip
        if len({probes[i]["provider"] for i, _, _ in rows}) != len(providers):
            raise ValueError("some reconstruction canaries have no probe showing their secret")
        return rows

    @cached_property
    def _processor(self) -> Any:
        from benchmark.model import load_processor

        return load_processor(self.reference_dir)

    @cached_property
    def _batches(self) -> list[tuple[list[int], dict[str, Any], list[str] | None]]:
        """The rows encoded once per process, in batches of similar length (less padding):
        (row indexes, model inputs with labels, page names or None without images)."""
        rows = self._rows
        processor = self._processor
        order = sorted(range(len(rows)), key=lambda i: len(rows[i][2]["ocr_tokens"]))
        batches = []
        for start in range(0, len(order), self.batch_size):
            chosen = order[start : start + self.batch_size]
            shown = [rows[i][2] for i in chosen]
            if not processor.page_features:
                batches.append((chosen, self._whole_inputs(shown), None))
                continue
            encoded = processor.encode_batch(
                [r["question"] for r in shown], [r["ocr_tokens"] for r in shown],
                [r["ocr_normalized_boxes"] for r in shown],
            )  # fmt: skip
            features = [{"input_ids": ids, "input_boxes": boxes} for ids, boxes
                        in zip(encoded["input_ids"], encoded["input_boxes"], strict=True)]  # fmt: skip
            inputs = processor.collate(features, with_images=False)
            inputs["labels"] = processor.labels_tensor([_answer(r) for r in shown])
            names = [r["image_name"] for r in shown] if processor.use_visual else None
            batches.append((chosen, inputs, names))
        return batches

    def _whole_inputs(self, shown: list[dict[str, Any]]) -> dict[str, Any]:
        """The inputs with labels of a family that reads each question whole (no page
        features to share: the page and the question are one input, e.g. Pix2Struct)."""
        images = self.directory / "images"
        features = [{**row, "answers": [_answer(row)],
                     "image_path": str(images / f"{row['image_name']}.jpg")}
                    for row in shown]  # fmt: skip
        return self._processor.collate(features, with_labels=True,
                                       with_images=self._processor.use_visual)  # fmt: skip

    @cached_property
    def _pages(self) -> dict[str, Any]:
        """Each probed page's pixels, loaded once per process (pages are shared by probes)."""
        _, _, probes = self._canaries
        images = self.directory / "images"
        names = sorted({p["image_name"] for p in probes})
        return {n: self._processor.load_image(images / f"{n}.jpg") for n in names}

    @cached_property
    def _base_loglik(self) -> Any:
        """The reference model's log-likelihood of every probe's answer (once per process)."""
        from benchmark.model import load_model

        device = self._device() if callable(self._device) else self._device
        model = load_model(self.reference_dir, check_values=False).eval().to(device)
        return self.loglik(model)

    def loglik(self, model: Any) -> Any:
        """Log-likelihood of each row's answer tokens under ``model`` (teacher forcing).

        Args:
            model: a model of the reference's family in eval mode.

        Returns:
            A numpy array, one value per row of :attr:`_rows`, in their order.
        """
        import numpy as np
        import torch

        from benchmark.model.families import family_of

        device = next(model.parameters()).device
        values = np.zeros(len(self._rows), dtype=float)
        with torch.inference_mode():
            for chosen, encoded, names in self._batches:
                batch = {name: tensor.to(device) for name, tensor in encoded.items()}
                if names is not None:
                    batch["pixel_values"] = torch.stack([self._pages[n] for n in names]).to(device)
                logits = model(**batch).logits.float()
                labels = batch["labels"]
                if family_of(model).decoder_only:  # position t predicts token t + 1
                    logits, labels = logits[:, :-1], labels[:, 1:]
                mask = labels != -100
                picked = (
                    torch.log_softmax(logits, dim=-1)
                    .gather(-1, labels.clamp(min=0).unsqueeze(-1))
                    .squeeze(-1)
                )
                values[chosen] = (picked * mask).sum(dim=1).cpu().numpy()
        return values

    def prepare(self) -> None:
        """Load the canaries and compute the base model's log-likelihoods ahead of the first
        job (nothing when the benchmark has no canaries)."""
        if self.available:
            _ = self._base_loglik

    def scores(self, model: Any) -> dict[str, Any]:
        """Each canary's scores, in the canaries' order: for membership canaries, under each
        attack, the mean over the canary's probes of that kind of the answer's log-likelihood
        under ``model`` minus under the base; for reconstruction canaries (key
        :data:`RECONSTRUCTION_ATTACK`) an m x k table, the same mean per candidate version of
        the canary's records."""
        import numpy as np

        providers, _, probes = self._canaries
        gain = self.loglik(model) - self._base_loglik
        rows = self._rows
        owner = np.asarray([providers.index(probes[i]["provider"]) for i, _, _ in rows])
        if self.kind == "reconstruction":
            candidate = np.asarray([j for _, j, _ in rows])
            k = int(candidate.max()) + 1
            table = [[float(gain[(owner == c) & (candidate == j)].mean()) for j in range(k)]
                     for c in range(len(providers))]  # fmt: skip
            return {RECONSTRUCTION_ATTACK: table}
        scores = {}
        for attack in self.attacks_scored:
            values = gain
            if attack == "calibrated":
                values = calibrated_gain(gain, self._base_loglik, np.ones_like(gain, bool))
            scores[attack] = [float(values[owner == index].mean())
                              for index in range(len(providers))]  # fmt: skip
        return scores

    def audit(self, model: Any | None, delta: float | None) -> dict[str, Any]:
        """The audit's result columns for one submitted model.

        Args:
            model: the submission's model (built from the organisers' configuration); unused
                when the benchmark has no canaries.
            delta: the claim's delta, or None (track 1: the competition's 1e-5 is tested).

        Returns:
            ``audit_epsilon`` (the verdict's lower bound: the larger of the two analyses'),
            ``audit_auc``, ``audit_tpr``,
            ``audit_fpr``, ``audit_seconds`` and ``audit_report``; when the benchmark has no
            canaries, only ``audit_report`` saying the audit was skipped.
        """
        if not self.available:
            return {"audit_report": {"skipped": "the benchmark has no canary providers "
                                                 "(generate it with --canaries M)"}}  # fmt: skip
        from accountant.audit import roc_auc

        started = time.perf_counter()
        included = self.coins
        tested = DEFAULT_DELTA if delta is None else float(delta)
        scores = self.scores(model)
        if self.kind == "reconstruction":
            secrets = [int(entry["secret"]) for entry in self._coins["canaries"]]
            attack, auc_by_attack = RECONSTRUCTION_ATTACK, {}
            result = reconstruction_audit(scores[attack], secrets, delta=tested)
        else:
            result = one_run_audit(scores[self.attack], included, delta=tested)
            attack = self.attack
            auc_by_attack = {a: roc_auc(s, included) for a, s in scores.items()}
        seconds = time.perf_counter() - started
        report = result.as_dict()
        report["attack"] = attack
        report["auc_by_attack"] = auc_by_attack
        report["probe_documents"] = self.probe_documents
        report["delta_source"] = "declared" if delta is not None else "default (no claim)"
        return {
            "audit_epsilon": result.verdict_epsilon,
            "audit_auc": result.auc,
            "audit_tpr": result.tpr_at_fpr,
            "audit_fpr": result.fpr,
            "audit_seconds": seconds,
            "audit_report": report,
        }


def calibrated_gain(gain: Any, base: Any, fitted: Any) -> Any:
    """Each probe's log-likelihood gain beyond what its base log-likelihood predicts.

    Fine-tuning raises the likelihood of every invoice's answers, and most where the base model
    was worst: that generic gain differs from canary to canary by more than memorisation adds
    (on ``mini`` at the ``fedavg`` preset, seed 0: out-canaries gain 4.7 nats on average, with a
    spread of 2.4). A straight line of gain on base log-likelihood, fitted by least squares over
    the ``fitted`` probes (the canaries' own questions, trained on or not; no coin is used),
    predicts the generic part; the residual is the rest.

    Args:
        gain: per probe, log-likelihood under the submitted model minus under the base.
        base: per probe, the base model's log-likelihood.
        fitted: per probe, whether it takes part in the fit.

    Returns:
        The residuals, one per probe (probes outside the fit get the same line).
    """
    import numpy as np

    gain, base, fitted = np.asarray(gain), np.asarray(base), np.asarray(fitted, dtype=bool)
    if fitted.sum() < 2 or np.ptp(base[fitted]) == 0:
        return gain - gain[fitted].mean() if fitted.any() else gain
    slope, intercept = np.polyfit(base[fitted], gain[fitted], 1)
    return gain - (slope * base + intercept)


#: how the epsilon a bound is compared with was read (:func:`audited_claim`)
CLAIM_BASES = {
    "declared": "the declared epsilon",
    "mechanism": (
        "the declared mechanism (noise, sampling, rounds) through the PLD accountant: a "
        "tighter epsilon than the declared one, which the RDP accountant verified"
    ),
}


def audited_claim(
    epsilon: float | None, accountant_report: Mapping[str, Any] | None
) -> tuple[float | None, str | None]:
    """The epsilon the audit's bound is compared with, and its basis (a key of
    :data:`CLAIM_BASES`).

    A declaration states a mechanism (noise multiplier, sampling rate, rounds) as well as an
    epsilon; the RDP accountant verifies that the mechanism is within the epsilon, an upper
    bound. The same mechanism through the PLD accountant (pessimistic, so still an upper bound)
    is often tighter: that epsilon is what the mechanism actually promises, and the f-DP
    analysis's Gaussian curve through it is the claim's mu (:func:`accountant.audit_fdp.claim_mu`).
    An honest training of the declared mechanism is contradicted by either analysis with
    chance at most 5%, and a false one is caught at a lower bound.

    Args:
        epsilon: the declared epsilon, or None (no claim).
        accountant_report: the accountant's report of the declaration (``VerificationReport``
            as a dict: its ``epsilon`` maps accountants to their epsilon), or None.

    Returns:
        (epsilon tested, basis), or (None, None) without a claim.
    """
    if epsilon is None:
        return None, None
    estimates = (accountant_report or {}).get("epsilon") or {}
    pld = estimates.get("pld") if isinstance(estimates, Mapping) else None
    if isinstance(pld, int | float) and math.isfinite(pld) and 0 < pld < epsilon:
        return float(pld), "mechanism"
    return float(epsilon), "declared"


def contradicted(epsilon: float | None, audit_epsilon: float | None) -> bool:
    """Whether a privacy claim is contradicted by the audit: its epsilon is below the audit's
    lower bound (a statistical test at 95% confidence, so "contradicted", not "false")."""
    return epsilon is not None and audit_epsilon is not None and epsilon < audit_epsilon


def _answer(probe: dict[str, Any]) -> str:
    """A probe's answer (the release stores one string; older files a list)."""
    answers = probe["answers"]
    return answers if isinstance(answers, str) else answers[0]


def _shows(probe: dict[str, Any], secret: dict[str, str]) -> bool:
    """Whether the probe's OCR holds every word of at least one of the secret's values."""
    tokens = set(probe["ocr_tokens"])
    return any(set(value.split()) <= tokens for value in secret.values())


def with_candidate(
    probe: dict[str, Any], secret: dict[str, str], candidate: dict[str, str]
) -> dict[str, Any]:
    """The probe as it would read had the canary's secret been ``candidate``: each word of a
    secret value in the OCR becomes the candidate's word in the same place (the candidates
    share their locale's pattern, so their values have as many words), and an answer equal to
    a secret value becomes the candidate's; the boxes and the page are unchanged."""
    words: dict[str, str] = {}
    for field, value in secret.items():
        old, new = value.split(), candidate[field].split()
        if len(old) == len(new):
            words.update((a, b) for a, b in zip(old, new, strict=True) if a != b)
    answers = {value: candidate[field] for field, value in secret.items()}
    answer = _answer(probe)
    return {**probe, "ocr_tokens": [words.get(t, t) for t in probe["ocr_tokens"]],
            "answers": answers.get(answer, answer)}  # fmt: skip
