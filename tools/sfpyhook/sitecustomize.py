# SPDX-License-Identifier: MIT
"""Put on PYTHONPATH for the ranks `simfabric launch` / `simfabric run` start: with
SIMFABRIC_FAULTHANDLER=1, a Python rank writes every thread's stack to its stderr (its rank log)
on SIGUSR1, which the launcher sends when a job times out. Then the next sitecustomize on the
path (the system's, a virtualenv's) is imported as if this one were not there."""
import os
import sys

if os.environ.get("SIMFABRIC_FAULTHANDLER") == "1":
    try:
        import faulthandler
        import signal
        faulthandler.register(signal.SIGUSR1, all_threads=True)
    except (ImportError, AttributeError, ValueError, RuntimeError):
        pass


def _chain():
    here = os.path.dirname(os.path.abspath(__file__))
    mod = sys.modules.pop("sitecustomize", None)
    saved = sys.path[:]
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
    try:
        import importlib
        importlib.import_module("sitecustomize")
    except ImportError:
        if mod is not None:
            sys.modules["sitecustomize"] = mod
    except Exception:  # noqa: BLE001 (the other sitecustomize's own failure: as site.py would)
        pass
    finally:
        sys.path[:] = saved


_chain()
