"""Files that ship inside the package, and the names the command line and the app share.

Found with :mod:`importlib.resources` and the package's entry points, so they resolve the same
from a checkout, an editable install and a wheel, whatever the working folder. The library never
names its UI package: ``rollout-graph view`` finds the app through the ``rollout_graph.apps``
entry point the distribution declares (pyproject.toml).
"""

from __future__ import annotations

from importlib.util import find_spec
from pathlib import Path

SIGNALS_ENV = "ROLLOUT_GRAPH_SIGNALS"  # the signals files `view --signals` passes to the app (os.pathsep-separated)
APPS_GROUP = "rollout_graph.apps"


def samples_dir() -> Path:
    """The bundled ``sample_traces`` folder (traces and the tokenizer they need).

    The package's folder from its import spec, as :mod:`importlib.resources` finds it for a
    package on disk, without importing that module and what it imports (zipfile, tempfile: a
    few milliseconds of every command's start-up); ``importlib.resources`` for anything else."""
    spec = find_spec("rollout_graph.samples")
    locations = list(spec.submodule_search_locations or ()) if spec is not None else []
    if len(locations) == 1 and Path(locations[0]).is_dir():
        return Path(locations[0])
    from importlib.resources import files

    return Path(str(files("rollout_graph.samples")))


def app_script(name: str = "explorer") -> Path:
    """The Streamlit script that ``rollout-graph view`` runs (the ``rollout_graph.apps`` entry point).

    Raises:
        LookupError: the app is not installed (no such entry point, or its module is missing).
    """
    from importlib.metadata import entry_points  # only here: it costs a start-up a tenth of a second

    found = [ep for ep in entry_points(group=APPS_GROUP) if ep.name == name]
    spec = find_spec(found[0].value) if found else None
    if spec is None or spec.origin is None:
        raise LookupError(f"the {name!r} app is not installed (entry point group {APPS_GROUP!r})")
    return Path(spec.origin)


SAMPLES = samples_dir()
