"""torch-rnn's (and its char-rnn forks') checkpoint load.

Read from jcjohnson/torch-rnn master train.lua: `print('Initializing from ', opt.init_from)`
(Lua's print puts a tab between its arguments); with `-reset_iterations 0` the counter `i`
goes on from `checkpoint.i`, else it starts again at 1: either way an event, no relaunch.
"""

from postmortem.run.dialects import register
from postmortem.run.dialects.entries import entry

register(
    entry("torch_rnn.init_from", "torch-rnn", "resume",
          "jcjohnson/torch-rnn master (2016-2017) train.lua",
          "print('Initializing from ', opt.init_from)",
          r"\bInitializing from\s+(?P<path>[^\s/.]*[/.]\S*)\s*$",     # one split: linear on a long path
          ("Initializing from \tcv/checkpoint_7000.t7",),
          ("Initializing from",)),
)
