"""Darknet's console (YOLO v1-v4 and their forks): one line a training iteration.

Read from the C and C++ sources, release by release:
- pjreddie/darknet: `train_detector` (src/detector.c, 2016; examples/detector.c from 2017,
  `%ld` from 2018), `train_yolo` (examples/yolo.c), `train_classifier` (examples/classifier.c:
  `%ld, %.3f:` the batch and the epoch), `train_char_rnn` (examples/rnn.c: `%f epochs`);
- AlexeyAB/darknet: `\\n %d: ... avg, ...` (2018-03-29), `avg loss` (2018-05-27), `, %f time
  left` (2020-03-22), `, %f hours left` (2020-03-31 to master, tags darknet_yolo_v3 .. yolov4);
- hank-ai/darknet (Darknet V2 "Bluebird" .. V6): `N: loss=X, avg loss=Y, rate=Z, ...,
  time remaining=...` (v2.0 printf, v2.1-v4.0 iostream), `last=, best=, next=` (v4.1, v5.0),
  `load N=, train=` (v5.1), `mAP=` (v6.0); the iteration number is coloured (ANSI, taken off).

The first number is the iteration, `get_current_batch(net)` / `get_current_iteration(net)`
(`seen / (batch * subdivisions)`): the optimizer step, which goes on across a relaunch from
saved weights and starts again at 0 under `-clear`. Then the batch's loss, `avg_loss` (a 0.9
running mean; pjreddie keeps a NaN in it for good, AlexeyAB and hank-ai restart it from the
loss) and the LR. glibc's printf writes a negative NaN `-nan`, MSVC `-nan(ind)`: NUM reads both.

The eval lines: AlexeyAB's and hank-ai's `-map` training prints the mAP the step's validation
found (a fraction, or hank-ai V4+'s percent) after the step's line, and `Last accuracy mAP@...`
before every following step: a restatement of the last one, not read again. The yolo layers'
`Region 82 Avg IOU: ...` / `v3 (mse loss, Normalizer: ...)` lines (one per layer and
subdivision, `-nan` before the first box) are per-layer statistics, not the step's loss: not
read. A launch prints `Learning Rate: %g, Momentum: %g, Decay: %g` (`LAUNCH`) once before its
first step: seen again after steps, it is a relaunch into the same file (textlogs._darknet).
"""

import re

from postmortem.run.dialects import register
from postmortem.run.dialects.entries import NUM, entry

# not glued to a number, a word or the window title's `N/M:` in front (hank-ai writes the title
# `\x1b]2;N/M: loss=.. \x07` right before the line, with no newline between)
_AT = r"(?<![\w.,:/-])"
_AVG = r", (?P<avg>" + NUM + r") avg, "
_AVG_LOSS = r", (?P<avg>" + NUM + r") avg loss, "
_RATE = r"(?P<lr>" + NUM + r") rate, (?P<secs>" + NUM + r") seconds"

# train_detector / train_classifier / train_yolo / train_char_rnn print this once a launch
LAUNCH = re.compile(r"^\s*Learning Rate: " + NUM + r", Momentum: " + NUM + r", Decay: " + NUM)
LAUNCH_SOURCE = ("pjreddie/darknet examples/detector.c (train_detector: `printf(\"Learning Rate: %g, "
                 "Momentum: %g, Decay: %g\\n\", ...)`), AlexeyAB/darknet src/detector.c, hank-ai/darknet "
                 "v6.0 src-lib/detector.cpp (`<< \"Learning Rate: \" << net.learning_rate << \", Momentum: \"`)")


def _c(fmt: str, *args: object) -> str:
    return fmt % args


register(
    entry("darknet.detector", "Darknet", "progress",
          "pjreddie/darknet 1ef829e5 (2017-05-31) examples/detector.c train_detector; f6afaabc (master) "
          "examples/detector.c (`%ld`), examples/yolo.c train_yolo, examples/coco.c; AlexeyAB/darknet "
          "3fc3fd0f (2018-03-29) src/detector.c (`\\n %d:`)",
          'printf("%ld: %f, %f avg, %f rate, %lf seconds, %d images\\n", get_current_batch(net), loss, '
          "avg_loss, get_current_rate(net), what_time_is_it_now()-time, i*imgs)",
          _AT + r"(?P<step>\d+): (?P<loss>" + NUM + r")" + _AVG + _RATE + r", (?P<images>-?\d+) images\s*$",
          (_c("%d: %f, %f avg, %f rate, %f seconds, %d images", 1, 823.412354, 823.412354, 0.0, 3.241562, 64),
           _c("%d: %f, %f avg, %f rate, %f seconds, %d images", 4000, 0.512345, 0.498765, 0.001, 2.9, 256000),
           _c("%d: %s, %s avg, %f rate, %f seconds, %d images", 4001, "-nan", "-nan", 0.001, 2.9, 256064),
           " " + _c("%d: %f, %f avg, %f rate, %f seconds, %d images", 812, 1.234, 1.456, 0.0001, 4.1, 51968)),
          (" avg, ",)),
    entry("darknet.alexeyab", "Darknet", "progress",
          "AlexeyAB/darknet 160edddd (2018-05-27) src/detector.c (`avg loss`); 8800212f (2020-03-22) "
          "`, %f time left`; 4cd21785 (2020-03-31) .. yolov4 tag .. 59596d78 (master) `, %f hours left`",
          'printf("\\n %d: %f, %f avg loss, %f rate, %lf seconds, %d images, %f hours left\\n", iteration, '
          "loss, avg_loss, get_current_rate(net), (what_time_is_it_now() - time), iteration*imgs, avg_time)",
          _AT + r"(?P<step>\d+): (?P<loss>" + NUM + r")" + _AVG_LOSS + _RATE
          + r", (?P<images>-?\d+) images(?:, (?P<left>" + NUM + r") (?:hours|time) left)?",
          (_c(" %d: %f, %f avg loss, %f rate, %f seconds, %d images, %f hours left", 1234, 2.345678,
              2.456789, 0.001, 3.2145, 78976, 5.612345),
           _c(" %d: %f, %f avg loss, %f rate, %f seconds, %d images", 100, 12.5, 14.2, 0.00001, 2.1, 6400),
           _c(" %d: %s, %s avg loss, %f rate, %f seconds, %d images, %f hours left", 5001, "-nan", "-nan",
              0.001, 3.1, 320064, 4.9),
           _c(" %d: %f, %f avg loss, %f rate, %f seconds, %d images, %f time left", 300, 3.1, 3.3, 0.001,
              2.2, 19200, 9.1)),
          (" avg loss, ",)),
    entry("darknet.classifier", "Darknet", "progress",
          "pjreddie/darknet f6afaabc (master) examples/classifier.c train_classifier (also cifar.c, "
          "regressor.c, segmenter.c); AlexeyAB/darknet 4cd21785 (2020-03-31) src/classifier.c "
          "(`, %f hours left`)",
          'printf("%ld, %.3f: %f, %f avg, %f rate, %lf seconds, %ld images\\n", get_current_batch(net), '
          "(float)(*net->seen)/N, loss, avg_loss, get_current_rate(net), what_time_is_it_now()-time, *net->seen)",
          _AT + r"(?P<step>\d+), (?P<epoch>" + NUM + r"): (?P<loss>" + NUM + r")" + _AVG + _RATE
          + r", (?P<images>-?\d+) images",
          (_c("%d, %.3f: %f, %f avg, %f rate, %f seconds, %d images", 1200, 3.456, 2.123, 2.234, 0.1,
              0.51, 153600),
           _c("%d, %.3f: %f, %f avg, %f rate, %f seconds, %d images, %f hours left", 50, 0.026, 6.9,
              6.91, 0.1, 0.4, 6400, 2.2)),
          (" avg, ",)),
    entry("darknet.rnn", "Darknet", "progress",
          "pjreddie/darknet f6afaabc (master) examples/rnn.c train_char_rnn (rnn_vid.c without the "
          "epochs); AlexeyAB/darknet 59596d78 src/rnn.c",
          'fprintf(stderr, "%d: %f, %f avg, %f rate, %lf seconds, %f epochs\\n", i, loss, avg_loss, '
          "get_current_rate(net), sec(clock()-time), (float) chars/size)",
          _AT + r"(?P<step>\d+): (?P<loss>" + NUM + r")" + _AVG + _RATE + r"(?:, (?P<epoch>" + NUM + r") epochs)?\s*$",
          (_c("%d: %f, %f avg, %f rate, %f seconds, %f epochs", 300, 1.812, 1.9, 0.1, 0.2, 0.044),
           _c("%d: %f, %f avg, %f rate, %f seconds", 12, 0.9, 0.95, 0.01, 0.3)),
          (" avg, ",)),
    entry("darknet.hank", "Darknet", "progress",
          "hank-ai/darknet v2.0 src/darknet_utils.cpp display_iteration_summary; v2.1 .. v4.0 "
          "src-lib/detector.cpp; v4.1, v5.0 (`last=, best=, next=`); v5.1 (`load N=, train=`); v6.0 "
          "(`mAP=`) src-lib/detector.cpp train_detector",
          '<< in_colour(kBrightWhite, iteration) << ": loss=" << format_loss(loss) << ", avg loss=" << '
          'format_loss(avg_loss) << ", last=" << format_map_accuracy(mean_average_precision) << ", best=" '
          '<< ... << ", rate=" << get_current_rate(net) << ... << " images, time remaining=" << ...',
          _AT + r"(?P<step>\d+): loss=(?P<loss>" + NUM + r"), avg loss=(?P<avg>" + NUM + r"),"
          r"(?: last=(?P<last>" + NUM + r"%|none)?[^,]{0,40},(?: [^,=]{1,20}=[^,]{0,40},){0,3})?"
          r" rate=(?P<lr>" + NUM + r"),",
          ("5989: loss=0.444, avg loss=0.329, rate=0.000026, "
           "64.424 milliseconds, 383296 images, time remaining=7 seconds",
           "5989: loss=0.444, avg loss=0.329, last=45.23%, best=46.00%, next=6000, rate=0.00002600, "
           "64.424 milliseconds, 383296 images, time remaining=7 seconds",
           "5990: loss=-nan, avg loss=-nan, last=none, best=none, mAP=disabled, rate=0.00100000, load 64=12.3 "
           "milliseconds, train=64.4 milliseconds, 383360 images, time remaining=7 seconds",
           "\x1b]2;120/6000: loss=2.1 time=3.5 hours\x07120: loss=2.134, avg loss=2.456, last=none, best=none, "
           "mAP=1000, rate=0.00010000, load 64=9.1 milliseconds, train=301.2 milliseconds, 7680 images, "
           "time remaining=3.5 hours"),
          (", avg loss=",)),
    # the step's validation: AlexeyAB / hank-ai V2-V3 train_detector's own line, validate_detector_map's
    # (AlexeyAB, a fraction then a percent) and hank-ai V4+'s `-> mean average precision (mAP@0.5)=45.23%`
    entry("darknet.map", "Darknet", "eval",
          "AlexeyAB/darknet 70260cda (2019-01-12) .. 59596d78 src/detector.c train_detector and "
          "validate_detector_map; hank-ai/darknet v3.0 src-lib/detector.cpp; v6.0 src-lib/detector_map.cpp",
          'printf("\\n mean_average_precision (mAP@%0.2f) = %f \\n", iou_thresh, mean_average_precision)',
          r"mean[_ ]average[_ ]precision \(mAP@(?P<iou>[\d.]+)\) ?= ?(?P<map>" + NUM + r")(?P<pct>%)?",
          (_c(" mean_average_precision (mAP@%0.2f) = %f ", 0.5, 0.452312),
           _c(" mean average precision (mAP@%0.2f) = %f, or %2.2f %% ", 0.5, 0.452312, 45.2312),
           "-> mean average precision (mAP@0.5)=45.23%"),
          ("mAP@",)),
    entry("darknet.last_map", "Darknet", "eval",
          "AlexeyAB/darknet 70260cda (2019-01-12) .. 59596d78 src/detector.c train_detector; hank-ai/darknet "
          "v6.0 src-lib/detector.cpp (after the last step)",
          'printf("\\n Last accuracy mAP@%0.2f = %2.2f %%, best = %2.2f %% ", iou_thresh, '
          "mean_average_precision * 100, best_map * 100)",
          r"\bLast accuracy mAP@[\d.]+ ?= ?(?P<last>" + NUM + r") ?%, best ?= ?(?P<best>" + NUM + r") ?%",
          (_c(" Last accuracy mAP@%0.2f = %2.2f %%, best = %2.2f %% ", 0.5, 45.23, 46.0),
           "Last accuracy mAP@0.5=45.23%, best=46.00% at iteration #5000."),
          ("Last accuracy mAP@",)),
)
