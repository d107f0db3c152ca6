"""%px / %%px for a starling.interactive cluster: ipyparallel's magics, plus
- before each cell, a check that every rank's engine is still there (a dead engine is an
  error naming its rank, not a cell that silently runs on the survivors);
- the notebook's interrupt (Ctrl-C, the stop button) reaches the engines: SIGINT to each
  target through its nanny (which runs beside the engine on the engine's own host), then
  the engines' KeyboardInterrupt tracebacks. ipyparallel >= 8.1 relays interrupts
  itself; this does the same on Debian's 7.1."""

import signal

from ipyparallel.client.magics import ParallelMagics

from . import _cluster

INTERRUPT_WAIT = 10.0  # seconds the engines get to stop after SIGINT


class StarlingMagics(ParallelMagics):
    def __init__(self, shell, view, profile: str):
        super().__init__(shell, view)
        self._profile = profile

    def parallel_execute(self, cell, block=None, *args, **kwargs):
        _cluster.check(self.view.client, self._profile)
        try:
            return super().parallel_execute(cell, block, *args, **kwargs)
        except KeyboardInterrupt:
            result = self.last_result
            if result is None or result.ready():
                raise
            self.view.client.send_signal(signal.SIGINT, targets=result._targets, block=True)
            try:
                result.get(timeout=INTERRUPT_WAIT)  # raises the engines' KeyboardInterrupt
            except TimeoutError:
                raise KeyboardInterrupt(f"engines {result._targets} got SIGINT but are still running after "
                                        f"{INTERRUPT_WAIT:g} s (blocked in a call that does not return "
                                        "to Python?)") from None
            raise


def activate(client, profile: str) -> None:
    """Registers %px, %%px, %autopx, %pxresult, %pxconfig for all of client's engines
    (blocking, as ipyparallel's own), if inside IPython."""
    view = client[:]
    view.block = True
    try:
        from IPython import get_ipython
    except ImportError:
        return
    shell = get_ipython()
    if shell is not None:
        shell.magics_manager.register(StarlingMagics(shell, view, profile))
