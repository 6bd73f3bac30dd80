"""Darknet's console (YOLO's trainers), as each release prints it: the lines are built here from
the format strings of the sources (pjreddie/darknet, AlexeyAB/darknet, hank-ai/darknet; the
catalogue's dialects/progress/darknet.py names each), with what sits between them (the yolo
layers' `Region 82 Avg IOU: -nan ...` lines, `Loaded:`, `Resizing`, `Wrong annotation`, the
`-map` evaluation's lines), and read: the iteration is the step, the batch's loss the loss, a
NaN run is a NaN incident at its iteration, a spike a spike, a relaunch into the same log a
segment, a clean log quiet."""

import json
import math
import re
import subprocess
import sys

import pytest

from postmortem.diagnose.analyze import analyze
from postmortem.errors import RunReadError
from postmortem.run import read_run

NAN = float("nan")


def c(fmt: str, *args: object) -> str:
    """C's printf of `fmt` as glibc writes it: `%ld`, `%lf`, `PRIu64` as `%d` / `%f`, and a NaN
    as `-nan` (a NaN loss comes out of Darknet's arithmetic with its sign bit set)."""
    fmt = fmt.replace("%ld", "%d").replace("%lf", "%f").replace('%" PRIu64 "', "%d")
    text = fmt % args
    return re.sub(r"(?<![\w-])nan\b", "-nan", text)


# ---- the per-iteration lines, verbatim from each release's source ---------------------------
# pjreddie/darknet 1ef829e5 (2017-05-31) examples/detector.c train_detector
PJ_2017 = "%d: %f, %f avg, %f rate, %lf seconds, %d images\n"
# pjreddie/darknet f6afaabc (master) examples/detector.c train_detector
PJ_MASTER = "%ld: %f, %f avg, %f rate, %lf seconds, %d images\n"
# AlexeyAB/darknet 3fc3fd0f (2018-03-29) src/detector.c
AB_2018_03 = "\n %d: %f, %f avg, %f rate, %lf seconds, %d images\n"
# AlexeyAB/darknet 160edddd (2018-05-27) .. c814d56e (2020-03-02) src/detector.c
AB_2018_05 = "\n %d: %f, %f avg loss, %f rate, %lf seconds, %d images\n"
# AlexeyAB/darknet 8800212f (2020-03-22) src/detector.c
AB_2020_03_22 = "\n %d: %f, %f avg loss, %f rate, %lf seconds, %d images, %f time left\n"
# AlexeyAB/darknet 4cd21785 (2020-03-31) .. yolov4 tag .. 59596d78 (master) src/detector.c
AB_MASTER = "\n %d: %f, %f avg loss, %f rate, %lf seconds, %d images, %f hours left\n"
# pjreddie/darknet f6afaabc examples/classifier.c train_classifier (batch, then the epoch)
PJ_CLASSIFIER = "%ld, %.3f: %f, %f avg, %f rate, %lf seconds, %ld images\n"
# AlexeyAB/darknet 59596d78 src/classifier.c train_classifier
AB_CLASSIFIER = '%d, %.3f: %f, %f avg, %f rate, %lf seconds, %" PRIu64 " images, %f hours left\n'
# pjreddie/darknet f6afaabc examples/rnn.c train_char_rnn (to stderr)
PJ_RNN = "%d: %f, %f avg, %f rate, %lf seconds, %f epochs\n"
# hank-ai/darknet v2.0 src/darknet_utils.cpp display_iteration_summary
HANK_V2 = "%s: loss=%s, avg loss=%s, rate=%f, %s, %d images, time remaining=%s\n"

BOLD, CYAN, RESET = "\033[1;37m", "\033[1;36m", "\033[0m"   # hank-ai's in_colour (kBrightWhite, ...)


def _hank(release: str, it: int, loss: float, avg: float, rate: float) -> str:
    """hank-ai/darknet's iostream line of `release` (src-lib/detector.cpp train_detector), with its
    colours (`in_colour`), `format_loss` (`std::fixed << setprecision(3)`) and the window title
    (`\\033]2;N/M: loss=.. time=..\\007`, no newline) in front."""
    def fl(x: float) -> str:
        return CYAN + ("-nan" if math.isnan(x) else f"{x:.3f}") + RESET
    title = f"\033]2;{it}/6000: loss={loss:.1g} time=3.2 hours\007"
    head = f"{title}{BOLD}{it}{RESET}: loss={fl(loss)}, avg loss={fl(avg)}"
    images = f"{it * 64} images"
    if release == "v2.0":
        return c(HANK_V2, BOLD + str(it) + RESET, fl(loss), fl(avg), rate, "64.424 milliseconds", it * 64,
                 "3 hours").rstrip("\n")
    if release == "v3.0":       # v2.1 .. v4.0
        return f"{head}, rate={rate:.8g}, 64.424 milliseconds, {images}, time remaining=3 hours"
    if release == "v4.1":       # v4.1, v5.0
        return (f"{head}, last={BOLD}45.23%{RESET}, best={BOLD}46.00%{RESET}, next=1000, rate={rate:.8g}, "
                f"64.424 milliseconds, {images}, time remaining=3 hours")
    if release == "v5.1":
        return (f"{head}, last=none, best=none, next=1000, rate={rate:.8g}, load 64=12.312 milliseconds, "
                f"train=64.4 milliseconds, {images}, time remaining=3.2 hours")
    assert release == "v6.0"
    return (f"{head}, last=none, best=none, mAP=disabled, rate={rate:.8g}, load 64=12.3 milliseconds, "
            f"train=64.4 milliseconds, {images}, time remaining=3.2 hours")


def _header(weights: str = "darknet53.conv.74") -> list[str]:
    """A launch's first lines: pjreddie's parser.c layer table, the weights load, train_detector's
    `Learning Rate: %g, Momentum: %g, Decay: %g`."""
    return ["yolov3-voc",
            "layer     filters    size              input                output",
            c("    %d conv  %5d %2d x%2d /%2d  %4d x%4d x%4d   ->  %4d x%4d x%4d  %5.3f BFLOPs",
              0, 32, 3, 3, 1, 416, 416, 3, 416, 416, 32, 0.299),
            c("  %d yolo", 106),
            c("Loading weights from %s...", weights) + "Done!",
            c("Learning Rate: %g, Momentum: %g, Decay: %g", 0.001, 0.9, 0.0005)]


def _between(it: int, iou_nan: bool = False) -> list[str]:
    """What an iteration prints before its line: `Loaded: %lf seconds`, the yolo layers' Region
    lines (pjreddie src/yolo_layer.c, one per layer and subdivision; `-nan` where no box was
    matched) and AlexeyAB's v3 line (src/yolo_layer.c, yolov4 tag), now and then `Resizing`."""
    out = [c("Loaded: %lf seconds", 0.000046)]
    for _sub in range(2):
        for layer in (82, 94, 106):
            iou = NAN if iou_nan and layer == 106 else 0.31
            out.append(c("Region %d Avg IOU: %f, Class: %f, Obj: %f, No Obj: %f, .5R: %f, .75R: %f,  count: %d",
                         layer, iou, 0.52, 0.41, 0.0041, 0.25, 0.05, 0 if iou != iou else 8))
    out.append(c("v3 (%s loss, Normalizer: (iou: %.2f, obj: %.2f, cls: %.2f) Region %d Avg (IOU: %f), count: %d, "
                 "class_loss = %f, iou_loss = %f, total_loss = %f ", "mse", 0.75, 1.0, 1.0, 139, NAN, 0, 0.0, NAN, NAN))
    # AlexeyAB src/network.c, after each forward pass of the yolo layers (stderr)
    out.append(c(" total_bbox = %d, rewritten_bbox = %f %% ", it * 113, 3.99))
    if it % 10 == 0:
        out += ["Resizing", "608"]
    if it == 7:
        out.append(c("\n Wrong annotation: x = 0, y = 0, < 0 or > 1, file: %s \n", "data/labels/img7.txt").strip("\n"))
    return out


def _loss(it: int) -> float:
    return 4.0 * math.exp(-it / 60) + 0.6 + 0.05 * math.sin(it * 1.7)


def _console(fmt: str, steps, loss=_loss, first_avg: float = -1, header: bool = True, between=True) -> list[str]:
    """A training console of `fmt`: each iteration's line with avg_loss kept as train_detector
    keeps it (`if(avg_loss < 0) avg_loss = loss; avg_loss = avg_loss*.9 + loss*.1;`)."""
    lines = _header() if header else []
    avg = first_avg
    for it in steps:
        x = loss(it)
        if avg < 0 or avg != avg:
            avg = x
        avg = avg * 0.9 + x * 0.1
        if between:
            lines += _between(it, iou_nan=it % 3 == 0)
        args: tuple = (it, x, avg, 0.001, 3.21)
        if "epochs" in fmt:
            args += (it * 0.01,)
        elif ", %.3f:" in fmt:
            args = (it, it * 64 / 5011, x, avg, 0.1, 0.51, it * 64)
        else:
            args += (it * 64,)
        if "left" in fmt:
            args += (5.6,)
        lines += c(fmt, *args).strip("\n").split("\n")
    return lines


def _write(tmp_path, lines, name="train.log"):
    p = tmp_path / name
    p.write_text("\n".join(lines) + "\n")
    return p


RELEASES = {"pjreddie 2017": PJ_2017, "pjreddie master": PJ_MASTER, "AlexeyAB 2018-03": AB_2018_03,
            "AlexeyAB 2018-05": AB_2018_05, "AlexeyAB 2020-03-22": AB_2020_03_22, "AlexeyAB master": AB_MASTER,
            "pjreddie classifier": PJ_CLASSIFIER, "AlexeyAB classifier": AB_CLASSIFIER, "pjreddie char-rnn": PJ_RNN}


@pytest.mark.parametrize("release", sorted(RELEASES))
def test_each_releases_line_is_read_with_its_iteration_loss_and_lr(release, tmp_path):
    fmt = RELEASES[release]
    run = read_run(_write(tmp_path, _console(fmt, range(1, 121))))
    f = run.frame
    assert run.source.format == "darknet"
    assert list(f.step) == list(range(1, 121)) and run.segments()[0]["rows"] == 120
    assert f.loss.to_numpy() == pytest.approx([round(_loss(i), 6) for i in range(1, 121)], abs=1e-6)
    assert (f.lr == (0.1 if "%.3f:" in fmt else 0.001)).all()
    assert f.avg_loss.iloc[-1] == pytest.approx(f.avg_loss.iloc[-1]) and f.avg_loss.notna().all()
    if "%.3f:" in fmt or "epochs" in fmt:
        assert "epoch" in f and f.epoch.iloc[-1] > 0
    # the Region lines' numbers (`count: 8`, `IOU: -nan`) make no column and no NaN
    assert not [c for c in f.columns if "iou" in c.lower() or "count" in c.lower() or "region" in c.lower()]
    assert not run.logged_nan


@pytest.mark.parametrize("release", ["v2.0", "v3.0", "v4.1", "v5.1", "v6.0"])
def test_hank_ai_darknet_lines_with_colours_and_the_window_title(release, tmp_path):
    lines, avg = _header(), -1.0
    for it in range(1, 101):
        x = _loss(it)
        avg = x if avg < 0 else avg * 0.9 + x * 0.1
        lines.append(_hank(release, it, x, avg, 0.00026))
    run = read_run(_write(tmp_path, lines))
    assert run.source.format == "darknet" and list(run.frame.step) == list(range(1, 101))
    assert run.frame.loss.to_numpy() == pytest.approx([round(_loss(i), 3) for i in range(1, 101)], abs=1e-3)
    assert (run.frame.lr == 0.00026).all()


def _nan_from(k: int):
    return lambda it: NAN if it >= k else _loss(it)


@pytest.mark.parametrize("fmt", [PJ_MASTER, AB_MASTER], ids=["pjreddie", "AlexeyAB"])
def test_a_nan_run_is_a_nan_incident_at_its_iteration(fmt, tmp_path):
    lines = _console(fmt, range(1, 301), loss=_nan_from(217))
    assert any(" -nan, -nan avg" in x for x in lines)          # as glibc prints it
    run = read_run(_write(tmp_path, lines))
    assert len(run.logged_nan["loss"]) == 300 - 217 + 1
    [nan] = [i for i in analyze(run).incidents if i.kind == "nan"]
    assert nan.step == 217 and nan.metric == "loss"


def test_a_spike_is_found_at_its_iteration(tmp_path):
    spiked = lambda it: _loss(it) * (9.0 if it == 180 else 1.0)   # noqa: E731
    run = read_run(_write(tmp_path, _console(AB_MASTER, range(1, 301), loss=spiked)))
    incidents = analyze(run).incidents
    assert incidents and incidents[0].kind == "spike" and incidents[0].step == 180


def test_a_clean_darknet_log_is_quiet(tmp_path):
    lines = _console(AB_MASTER, range(1, 401))
    run = read_run(_write(tmp_path, lines))
    assert analyze(run).incidents == [] and len(run.segments()) == 1


def test_a_relaunch_from_the_backup_weights_is_a_segment_though_the_iteration_goes_on(tmp_path):
    # `darknet detector train voc.data yolov3-voc.cfg backup/yolov3-voc.backup` appended to the log:
    # `seen` is loaded with the weights, so get_current_batch goes on from the saved iteration
    lines = _console(PJ_MASTER, range(1, 201)) + _header("backup/yolov3-voc.backup")
    lines += _console(PJ_MASTER, range(201, 321), header=False)
    run = read_run(_write(tmp_path, lines))
    assert [(s["first_step"], s["last_step"]) for s in run.segments()] == [(1, 200), (201, 320)]
    assert "launch line again" in run.source.extras["segments_from"]
    restarts = [c for c in analyze(run).checks if c.id == "B0"]
    assert restarts and restarts[0].status == "fail" and "a relaunch into the same log" in restarts[0].detail


def test_a_relaunch_with_clear_starts_the_iteration_again(tmp_path):
    # `-clear`: `*net.seen = 0` (AlexeyAB detector.c): the iteration counter starts again
    lines = _console(AB_MASTER, range(1, 151)) + _header("backup/yolo-obj_last.weights")
    lines += _console(AB_MASTER, range(1, 101), header=False)
    run = read_run(_write(tmp_path, lines))
    assert [s["rows"] for s in run.segments()] == [150, 100]
    # one launch's own header, before its first step, is no relaunch
    one = read_run(_write(tmp_path, _console(AB_MASTER, range(1, 151)), "one.log"))
    assert len(one.segments()) == 1 and one.source.resumes == []


def test_the_map_evaluation_is_an_eval_metric_on_its_step_not_the_loss(tmp_path):
    lines = _header()
    avg = -1.0
    for it in range(1, 301):
        x = _loss(it)
        avg = x if avg < 0 else avg * 0.9 + x * 0.1
        lines += _between(it)
        # AlexeyAB src/detector.c train_detector with -map: before the step's line
        lines += c("\n (next mAP calculation at %d iterations) ", (it // 100 + 1) * 100).split("\n")
        if it > 100:
            lines += c("\n Last accuracy mAP@%0.2f = %2.2f %%, best = %2.2f %% ", 0.5, 45.23, 45.23).split("\n")
        lines += c(AB_MASTER, it, x, avg, 0.001, 3.2, it * 64, 5.6).strip("\n").split("\n")
        if it % 100 == 0:      # validate_detector_map, then train_detector's own line
            lines += [c("class_id = %d, name = %s, ap = %2.2f%%   \t (TP = %d, FP = %d) ", 0, "dog", 45.23, 120, 30),
                      c(" for conf_thresh = %1.2f, precision = %1.2f, recall = %1.2f, F1-score = %1.2f ",
                        0.25, 0.8, 0.7, 0.75),
                      c(" mean average precision (mAP@%0.2f) = %f, or %2.2f %% ", 0.5, it / 1000, it / 10),
                      c(" mean_average_precision (mAP@%0.2f) = %f ", 0.5, it / 1000), "New best mAP!"]
    run = read_run(_write(tmp_path, lines))
    f = run.frame.set_index("step")
    m = f["val_mAP@0.50"].dropna()
    assert list(m.index) == [100, 200, 300] and list(m) == pytest.approx([0.1, 0.2, 0.3])
    assert f.loss.notna().all() and len(f) == 300
    assert analyze(run).incidents == []


def test_info_says_where_the_step_and_the_loss_came_from(tmp_path):
    p = _write(tmp_path, _console(AB_MASTER, range(1, 51)))
    out = subprocess.run([sys.executable, "-m", "postmortem", "info", str(p), "--json"],
                         capture_output=True, text=True, check=True)
    data = json.loads(out.stdout)
    assert data["run"]["format"] == "darknet"
    assert "iteration" in data["read"]["step"] and "optimizer step" in data["read"]["step"]
    loss = next(m for m in data["metrics"] if m["name"] == "loss")
    assert loss["dialect"] == ["darknet.alexeyab"] and data["read"]["loss"] == "loss"
    assert data["read"]["checkpoints"] == [{"step": 1, "dialect": "darknet.load_weights"}]


def test_a_torchrun_rank_label_is_still_taken_off_other_lines(tmp_path):
    # `torchrun --tee 3`'s `0: ` label: only Darknet's own `N: X, Y avg` keeps its number
    from postmortem.run.textlogs import clean
    assert clean("0: step 10 loss 2.5") == "step 10 loss 2.5"
    assert clean(" 812: 1.234000, 1.456000 avg loss, 0.001000 rate, 3.2 seconds, 51968 images").lstrip().startswith("812:")
    assert clean("5989: loss=0.444, avg loss=0.329, rate=0.000026").startswith("5989:")


def test_a_relaunch_resumed_into_a_new_file_is_one_run_of_two_segments(tmp_path):
    # `./darknet detector train ... backup/yolo-obj_last.weights | tee train_resume.log`
    _write(tmp_path, _console(AB_MASTER, range(1, 201)), "train.log")
    _write(tmp_path, _console(AB_MASTER, range(201, 401)), "train_resume.log")
    run = read_run(tmp_path)
    assert [(s["first_step"], s["last_step"]) for s in run.segments()] == [(1, 200), (201, 400)]
    assert len(run.source.files) == 2 and run.frame.loss.notna().all()


def test_two_darknet_runs_from_the_first_iteration_are_two_runs(tmp_path):
    _write(tmp_path, _console(AB_MASTER, range(1, 201)), "seed1.log")
    _write(tmp_path, _console(AB_MASTER, range(1, 201)), "seed2.log")
    with pytest.raises(RunReadError, match="2 different runs"):
        read_run(tmp_path)
    for name in ("seed1.log", "seed2.log"):       # each its own run of 200 iterations
        run = read_run(tmp_path / name)
        assert run.source.format == "darknet" and len(run.frame) == 200 and len(run.segments()) == 1


def test_a_run_that_died_in_its_first_iterations_is_still_darknets(tmp_path):
    # two step lines, both NaN, after the launch's own lines: not the Region lines' numbers
    run = read_run(_write(tmp_path, _console(AB_MASTER, range(1, 3), loss=lambda it: NAN)))
    assert run.source.format == "darknet" and list(run.frame.step) == [1, 2]
    assert list(run.frame.columns) == ["segment", "step", "loss", "lr", "avg_loss"]
    assert len(run.logged_nan["loss"]) == 2
