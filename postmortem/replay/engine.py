"""The replay engine: the faithful arm first, then one counterfactual arm per hypothesis,
each from the same checkpoint; probes around the incident; evidence rows that re-rank."""

from __future__ import annotations

import copy
import math
import threading
from pathlib import Path
from typing import Callable, Iterable, Self

import numpy as np

from postmortem.diagnose.context import scheduled_lr
from postmortem.diagnose.models import Evidence, Hypothesis, Incident, Observation
from postmortem.errors import ReplayError
from postmortem.numbers import counts as in_words
from postmortem.replay import loading, probes
from postmortem.replay.arms import BY_NAME
from postmortem.replay.arms import NAMES as ARMS
from postmortem.replay.checkpoints import before, checkpoints
from postmortem.replay.models import ArmResult, Cancelled, ReplayResult
from postmortem.run.model import RunLog
from postmortem.run.record import batch_hash, this_machine

Progress = Callable[[str, int, int, int], None]        # arm, step, done, total
Arrived = Callable[[Evidence], None]                 # one evidence row, as soon as it is known


class Replayer:
    def __init__(self, log: RunLog, incident: Incident, device: str = "cpu",
                 progress: Progress | None = None, cancel: threading.Event | None = None,
                 tail: int = 10, on_evidence: Arrived | None = None, allow_data_drift: bool = False):
        import torch
        self.torch = torch
        if device == "cpu":
            torch.set_num_threads(1)     # the same sums in the same order as a 1-thread run
        self.log, self.inc = log, incident
        self.run_dir = Path(log.source.path)
        if self.run_dir.is_file():
            self.run_dir = self.run_dir.parent
        self.device = torch.device(device)
        self.progress = progress or (lambda *a: None)
        self.on_evidence = on_evidence or (lambda e: None)
        self.cancel = cancel or threading.Event()
        self.fn = loading.entry_point(log.manifest, self.run_dir)
        self.ckpts = checkpoints(log.manifest, self.run_dir)
        # A resumed segment starts from the checkpoint it resumed from.
        seg_rows = log.frame[log.frame.segment == incident.segment]
        # Checkpoint N is the state after N steps. A resumed segment starts from the one
        # it resumed from; otherwise the last one before the incident.
        anchor = int(seg_rows.step.iloc[0]) if incident.segment else incident.step - 1
        self.ckpt = before(self.ckpts, anchor, self.run_dir)
        peak = incident.symptoms.peak_step if incident.kind == "spike" else None
        self.end = max(incident.step, peak or incident.step) + tail
        self.optimizer_as_logged = True      # False once a replay shows the resume dropped it
        hist = seg_rows if incident.segment else log.frame[log.frame.segment == 0]
        self.logged = dict(zip(hist.step.to_numpy().tolist(), hist.loss.to_numpy().tolist()))
        self.logged_hashes = (dict(zip(hist.step.to_numpy().tolist(), hist.batch_hash.tolist()))
                              if "batch_hash" in hist else {})
        self.allow_data_drift = allow_data_drift
        self.drift: list[int] = []       # steps whose batch is not the one logged
        self.clip = log.manifest.config.clip if log.manifest and log.manifest.config.clip else None

    # -- running one arm -------------------------------------------------------------

    def fresh(self, optimizer: bool | None = None):
        optimizer = self.optimizer_as_logged if optimizer is None else optimizer
        r = loading.make(self.fn, self.log.manifest, self.run_dir, self.device)
        r.load(self.ckpts[self.ckpt], optimizer=optimizer)
        return r

    def run(self, name: str, r, *, batch_for=None, lr_for=None, on_step=None) -> ArmResult:
        losses = {}
        steps = range(self.ckpt, self.end + 1)
        for i, s in enumerate(steps):
            if self.cancel.is_set():
                raise Cancelled(name)
            if lr_for is not None:
                for g in r.optimizer.param_groups:
                    g["lr"] = lr_for(s)
            if on_step is not None:
                on_step(r, s)
            row = r.forward_backward(s, batch_for(s) if batch_for else None)
            r.optimizer_step(row)
            losses[s] = float(row["loss"])
            self.progress(name, s, i + 1, len(steps))
        return ArmResult(name, losses)

    # -- the whole replay ------------------------------------------------------------

    def replay(self, arms: tuple[str, ...] = ARMS) -> ReplayResult:
        """The faithful arm, its verdict, the probes at the incident step, then each
        counterfactual arm judged as soon as it has run; the hypotheses re-ranked."""
        inc = self.inc
        evidence = _Streamed(self.on_evidence)
        found: dict = {}
        results: dict[str, ArmResult] = {}
        faithful, diff, snapshot = self._replay_faithfully(arms, evidence, results, found)
        results["faithful"] = faithful
        is_faithful = self._say_how_faithful(diff, evidence)
        base = self._baseline()
        spike = self._peak(faithful.losses)
        self._probe_incident(snapshot, found)
        evidence += self._probe_evidence(found)
        self._run_counterfactuals(arms, results, evidence, base, spike)
        return ReplayResult(run_id=self.log.run_id, incident_step=inc.step, checkpoint=self.ckpt,
                            device=str(self.device), faithful_max_diff=diff, faithful=is_faithful, arms=results,
                            probes=found, evidence=list(evidence), hypotheses=rerank(inc.hypotheses, evidence))

    def _replay_faithfully(self, arms: tuple[str, ...], evidence: _Streamed, results: dict[str, ArmResult],
                           found: dict) -> tuple[ArmResult, float, dict]:
        """The faithful arm (after a resume, the fresh optimizer's too when it matches the log
        better: the resume dropped the moments); the model and optimizer state just before the
        incident step kept, and the per-token and hash probes taken there. Returns the arm,
        its max difference from the logged losses, and the state kept."""
        inc = self.inc
        snapshot: dict = {}

        def keep_state(r, s):
            if s == inc.step:      # the state just before the incident step, for the probes
                snapshot["state"] = copy.deepcopy({"model": r.model.state_dict(),
                                                   "optimizer": r.optimizer.state_dict()})
                found["per_token"] = probes.per_token(r, s)
                found["hashes"] = probes.hashes(r, s)

        resumed = inc.segment > 0
        first = self.fresh(optimizer=True)
        self._check_batches(first, evidence)
        faithful = self.run("faithful", first, on_step=keep_state)
        diff = self._diff(faithful.losses)
        if resumed and diff > 1e-6 and "restored-moments" in arms:
            # The run's resume may have dropped the optimizer: is that what was logged?
            reset = self.run("resume-with-fresh-optimizer", self.fresh(optimizer=False), on_step=keep_state)
            if self._diff(reset.losses) < diff:
                results["restored-moments"] = ArmResult("restored-moments", faithful.losses)
                faithful = reset
                diff = self._diff(reset.losses)
                self.optimizer_as_logged = False
                evidence.append(Evidence("optimizer-moments", f"the logged losses after the resume at step "
                                         f"{self.ckpt} are those of a fresh optimizer (max difference {diff:.3g}), "
                                         f"not of the checkpoint's moments", favors=["optimizer-reset"]))
        return faithful, diff, snapshot

    def _say_how_faithful(self, diff: float, evidence: _Streamed) -> bool:
        """Whether the faithful arm is within tolerance of the log (looser where the replay
        cannot be bit for bit), said as the first loss evidence row."""
        not_exact = self._why_not_bit_for_bit()
        tolerance = 1e-2 if not_exact else 1e-5
        is_faithful = diff <= tolerance
        evidence.append(Evidence("loss", f"faithful replay from the step-{self.ckpt} checkpoint through "
                                 f"{self.end}: max |replayed - logged| loss = {diff:.3g}"
                                 + (f" (within {tolerance:g}: {not_exact})" if not_exact else "")
                                 + ("" if is_faithful else ": NOT faithful, counterfactuals are suspect")))
        return is_faithful

    def _probe_incident(self, snapshot: dict, found: dict) -> None:
        """The probes at the incident step, from the state kept just before it: per-layer
        statistics, and where a non-finite loss or grad norm first appears."""
        inc = self.inc
        r = self.fresh()
        if "state" in snapshot:
            r.model.load_state_dict(snapshot["state"]["model"])
            r.optimizer.load_state_dict(snapshot["state"]["optimizer"])
            row = r.forward_backward(inc.step)
            found["layers"] = probes.layer_stats(r)
            r.optimizer.zero_grad(set_to_none=True)
            if not math.isfinite(row["loss"]) or not math.isfinite(row["grad_norm"]):
                r2 = self.fresh()
                r2.model.load_state_dict(snapshot["state"]["model"])
                r2.optimizer.load_state_dict(snapshot["state"]["optimizer"])
                found["first_nonfinite"] = probes.first_nonfinite(r2, inc.step)

    def _run_counterfactuals(self, arms: tuple[str, ...], results: dict[str, ArmResult], evidence: _Streamed,
                             base: float, spike: float) -> None:
        """Each counterfactual arm judged as soon as it has run (one already run beside the
        faithful arm first)."""
        for arm, res in list(results.items()):
            if arm != "faithful":
                evidence += self._judge(arm, res, base, spike)
        for arm in arms:
            if arm == "faithful" or arm in results:
                continue
            results[arm] = self._arm(arm)
            evidence += self._judge(arm, results[arm], base, spike)

    def _check_batches(self, r, evidence) -> None:
        """The batches the factory gives must be those the run logged (by hash): a changed
        seed, shuffle or dataset replays another run. Refused unless allowed, then said."""
        given = {}
        for s in range(self.ckpt, self.end + 1):
            want = self.logged_hashes.get(s)
            if isinstance(want, str) and want:
                given[s] = batch_hash(r.inputs_of(r.batch_at(s)))
                if given[s] != want:
                    self.drift.append(s)
        if not self.drift:
            return
        s = self.drift[0]
        what = (f"the batch the replay factory gives for step {s} is not the one the run logged "
                f"(hash {given[s]} vs {self.logged_hashes[s]}"
                f"{f'; {len(self.drift)} steps differ' if len(self.drift) > 1 else ''})")
        if not self.allow_data_drift:
            raise ReplayError(f"{self.run_dir}: {what}: the data order changed (seed, shuffle or dataset); "
                              "--allow-data-drift replays anyway")
        evidence.append(Evidence("batch", f"{what}: replayed anyway (--allow-data-drift), so the faithful arm "
                                 "may not reproduce the logged losses"))

    def _why_not_bit_for_bit(self) -> str:
        """'' where this replay should match the log bit for bit: on CPU with the run's own
        torch build and CPU kernels (another sums in another order); else why not."""
        if self.device.type != "cpu":
            return f"replayed on {self.device.type}, whose kernels sum in another order"
        recorded = (self.log.manifest.versions if self.log.manifest else None) or {}
        if recorded.get("device", "cpu") != "cpu":
            return f"recorded on {recorded['device']}, replayed on cpu"
        here = this_machine()
        if recorded.get("torch") != here["torch"]:
            return f"recorded with torch {recorded.get('torch', '(not said)')}, replayed with {here['torch']}"
        if "cpu_capability" not in recorded:
            return "the manifest does not say which CPU kernels recorded the run"
        if recorded["cpu_capability"] != here["cpu_capability"]:
            return (f"recorded on {recorded['cpu_capability']} CPU kernels, "
                    f"replayed on {here['cpu_capability']}")
        return ""

    def _arm(self, arm: str) -> ArmResult:
        inc = self.inc
        if arm == "fp32":
            if (self.log.dtype or "fp32") == "fp32":
                return ArmResult(arm, {}, "the run is already fp32")
            r = self.fresh()
            r.set_dtype("fp32")
            return self.run(arm, r)
        if arm == "scheduled-lr":
            r = self.fresh()
            if r.scheduled_lr is not None:       # the run's own schedule, without the bug
                return self.run(arm, r, lr_for=r.scheduled_lr)
            cfg = self.log.manifest.config if self.log.manifest else None
            if scheduled_lr(cfg, inc.step) is None:
                return ArmResult(arm, {}, "neither the replay factory nor the manifest says the schedule "
                                          "(Replayable.scheduled_lr, or lr_max, warmup and total steps)")
            return self.run(arm, r, lr_for=lambda s: scheduled_lr(cfg, s))
        if arm == "restored-moments":
            return ArmResult(arm, {}, "the incident is not right after a resume")
        if arm == "swap-batch":
            r = self.fresh()
            neighbour = inc.step - 1
            return self.run(arm, r, batch_for=lambda s: r.batch_at(neighbour) if s == inc.step else None)
        if arm == "earlier-checkpoint":
            earlier = [s for s in self.ckpts if s < self.ckpt]
            if not earlier:
                return ArmResult(arm, {}, "no earlier checkpoint kept")
            r = loading.make(self.fn, self.log.manifest, self.run_dir, self.device)
            r.load(self.ckpts[max(earlier)])
            with self.torch.no_grad():
                suspect = float(r.per_token_loss(inc.step, r.batch_on_device(inc.step)).float().mean())
                previous = float(r.per_token_loss(inc.step - 1, r.batch_on_device(inc.step - 1)).float().mean())
            return ArmResult(arm, {inc.step: suspect, inc.step - 1: previous},
                             skipped=None if math.isfinite(suspect) else "non-finite")
        raise ReplayError(f"{arm}: unknown arm; known: {', '.join(ARMS)}")

    # -- judging -----------------------------------------------------------------------

    def _diff(self, losses: dict[int, float]) -> float:
        diffs = []
        for s, v in losses.items():
            want = self.logged.get(s)
            if want is None:
                continue
            if not (math.isfinite(want) and math.isfinite(v)):
                diffs.append(0.0 if (math.isnan(want) and math.isnan(v)) or want == v else math.inf)
            else:
                diffs.append(abs(v - want))
        return max(diffs) if diffs else math.inf

    def _baseline(self) -> float:
        before = [v for s, v in self.logged.items() if self.inc.step - 50 <= s < self.inc.step and math.isfinite(v)]
        return float(np.median(before)) if before else math.nan

    def _peak(self, losses: dict[int, float]) -> float:
        window = [losses[s] for s in range(self.inc.step, self.end + 1) if s in losses]
        if any(not math.isfinite(v) for v in window):
            return math.inf
        return max(window) if window else math.nan

    def _gone(self, arm_peak: float, base: float, spike: float) -> bool:
        if not math.isfinite(arm_peak):
            return False
        if not math.isfinite(spike):
            return True
        return arm_peak < base + 0.25 * (spike - base)

    def _judge(self, arm: str, res: ArmResult, base: float, spike: float) -> list[Evidence]:
        tested = BY_NAME[arm].tests if arm in BY_NAME else []
        if res.skipped:
            return [Evidence("loss", f"{arm} arm skipped: {res.skipped}")]
        if arm == "earlier-checkpoint":
            s, n = res.losses[self.inc.step], res.losses[self.inc.step - 1]
            hard = s > 1.5 * n
            return [Evidence("batch", f"on an earlier checkpoint the batch of step {self.inc.step} scores "
                             f"{s:.3g} against {n:.3g} for its neighbour: "
                             + ("the data, not the state" if hard else "not a hard batch"),
                             favors=["long-tail-token"] if hard else [],
                             rules_out=["optimizer-reset"] if hard else ["long-tail-token"])]
        peak = self._peak(res.losses)
        gone = self._gone(peak, base, spike)
        panel = {"fp32": "loss-scale", "scheduled-lr": "lr", "swap-batch": "batch",
                 "restored-moments": "optimizer-moments"}.get(arm, "loss")
        text = (f"{arm} arm: peak loss {peak:.3g} from step {self.inc.step} (faithful {spike:.3g}, "
                f"before {base:.3g}): the incident {'is gone' if gone else 'stays'}")
        if gone:
            others = [p for p in ("long-tail-token", "fp16-overflow", "lr-discontinuity", "optimizer-reset")
                      if p not in tested]
            # the same data, weights and LR without this one cause: the others did not do it
            return [Evidence(panel, text, favors=tested, rules_out=others)]
        # One swapped batch does not test a loader that repeated many batches before.
        return [Evidence(panel, text, rules_out=["long-tail-token"] if arm == "swap-batch" else tested)]

    def _probe_evidence(self, found: dict) -> list[Evidence]:
        out = []
        nf = found.get("first_nonfinite")
        if nf and nf.get("forward"):
            mod = nf["forward"]["module"]
            if mod.startswith("loss"):
                out.append(Evidence("loss", f"first non-finite tensor in the forward pass: the output of {mod} "
                                    f"({in_words(nf['forward']['output'])}) with finite inputs", favors=["numerics"],
                                    rules_out=["fp16-overflow"] if (self.log.dtype or "fp32") != "fp16" else []))
            else:
                out.append(Evidence("activations", f"first non-finite tensor in the forward pass: {mod} "
                                    f"output: {in_words(nf['forward']['output'])}",
                                    favors=["fp16-overflow"] if self.log.dtype == "fp16" else ["numerics"]))
        pt = found.get("per_token")
        if pt and pt.get("rare_share_of_tail") is not None:
            share = pt["rare_share_of_tail"]
            # which losses the percentiles are of, and the rare pieces themselves, decoded
            rare = list(dict.fromkeys(repr(t["token"]) for t in pt.get("heavy_tail", [])
                                      if t.get("train_count") is not None and t["train_count"] <= 2))[:5]
            out.append(Evidence("per-token-loss", f"{share:.0%} of the tokens behind the top 10% of the per-token "
                                f"losses of step {self.inc.step}'s batch were seen at most twice in training"
                                + (f" ({', '.join(rare)})" if rare else "")
                                + f"; that batch's per-token losses: median {pt['p50']:.3g}, p99 {pt['p99']:.3g}",
                                favors=["long-tail-token"] if share >= 0.5 else []))
        hs = found.get("hashes")
        if hs:
            before = [h for s, h in hs.items() if s <= self.inc.step]
            counts: dict[str, int] = {}
            for h in before:
                counts[h] = counts.get(h, 0) + 1
            worst = max(counts.values())
            if worst > 1:
                first = min(s for s, h in hs.items() if counts.get(h) == worst)
                out.append(Evidence("batch", f"the batch of step {first} was trained {worst} times in the "
                                    f"{len(before)} steps up to {self.inc.step}: a loader repeating a batch",
                                    favors=["bad-data"]))
            else:
                out.append(Evidence("batch", f"all {len(before)} batches up to step {self.inc.step} are "
                                    f"distinct (hashes)", rules_out=["bad-data"]))
        return out


class _Streamed(list[Evidence]):
    """A list of evidence rows that hands each row on as it is added."""

    def __init__(self, arrived: Arrived):
        super().__init__()
        self.arrived = arrived

    def append(self, row: Evidence) -> None:
        super().append(row)
        self.arrived(row)

    def __iadd__(self, rows: Iterable[Evidence]) -> Self:  # type: ignore[override,misc]
        # (list's own `+=` takes any iterable too; only the rows' type is narrower)
        for row in rows:
            self.append(row)
        return self


def rerank(hypotheses: list[Hypothesis], evidence: list[Evidence]) -> list[Hypothesis]:
    """The diagnosis' ranking moved by the replay's evidence: each row favoring a pattern
    adds, a row ruling it out sends it to the bottom. The rows join the hypothesis' own
    observations for and against it, ahead of the diagnosis' (they weigh more)."""
    out = []
    for h in hypotheses:
        favored = [Observation(panel=e.panel, observation=e.observation)
                   for e in evidence if h.pattern in e.favors]
        ruled = [Observation(panel=e.panel, observation=e.observation)
                 for e in evidence if h.pattern in e.rules_out]
        score = 0.0 if ruled else min(1.0, h.score + 0.3 * len(favored))
        out.append(h.model_copy(update={"score": round(score, 3), "supported_by": favored + h.supported_by,
                                        "contradicted_by": ruled + h.contradicted_by}))
    out.sort(key=lambda h: -h.score)
    for i, h in enumerate(out, 1):
        h.rank = i
    return out
