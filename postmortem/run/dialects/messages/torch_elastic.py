"""torch.distributed.elastic (torchrun) restarting the worker group: a relaunch.

Read from pytorch/pytorch torch/distributed/elastic/agent/server/api.py
(`SimpleElasticAgent._invoke_run`: with restarts left after a worker fails, "[{role}] Worker
group {state.name}. {remaining}/{max_restarts} attempts left; will restart worker group",
an f-string in older releases, %-style in newer ones; the same words in forks such as dlrover). The workers
start again from the script's top: whatever the steps do next is a new segment. The
multi-line `Rendezvous complete for workers. Result:` / `restart_count=N` block that
follows is not needed to say it.
"""

from postmortem.run.dialects import register
from postmortem.run.dialects.entries import entry

register(
    entry("torch_elastic.restart", "torch.distributed.elastic", "resume",
          "pytorch/pytorch (f-string and %-style releases) torch/distributed/elastic/agent/server/api.py "
          "(SimpleElasticAgent._invoke_run)",
          'logger.info("[%s] Worker group %s. %s/%s attempts left; will restart worker group", role, '
          'state.name, self._remaining_restarts, spec.max_restarts)',
          r"Worker group (?P<state>[A-Z]+)\. (?P<left>\d+)/(?P<max>\d+) attempts left; ?will restart "
          r"worker group",
          ("[default] Worker group FAILED. 3/3 attempts left; will restart worker group",
           "WARNING:torch.distributed.elastic.agent.server.api:[default] Worker group UNHEALTHY. 1/2 "
           "attempts left; will restart worker group"),
          ("will restart worker group",)),
)
