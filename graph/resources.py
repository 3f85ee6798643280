"""Files that ship inside the package: the bundled sample traces and the app's entry script.

Found with :mod:`importlib.resources`, so they resolve the same from a checkout, an editable
install and a wheel, whatever the working folder.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path


def samples_dir() -> Path:
    """The bundled ``sample_traces`` folder (traces and the tokenizer they need)."""
    return Path(str(files("sample_traces")))


def app_script() -> Path:
    """The Streamlit script that ``rollout-graph view`` runs."""
    return Path(str(files("views") / "app.py"))


SAMPLES = samples_dir()
