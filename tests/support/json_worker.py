"""A process of another venv that answers each JSON line it reads with one JSON line: how the
writers' and trainers' own code runs beside the tests (tests/conformance/writers.py `Oracle`,
tests/reconcile/oracle.py `Oracle`). Its first line names the versions it imported."""

from __future__ import annotations

import json
import os
import subprocess
from typing import Any


class JsonWorker:
    """``run(case)`` sends a JSON case and returns the JSON answer; ``close()`` ends the process."""

    def __init__(self, argv: list[str], name: str, hint: str = "") -> None:
        self.name = name
        env = {**os.environ, "TRL_EXPERIMENTAL_SILENCE": "1", "PYTHONWARNINGS": "ignore"}
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env=env,
        )
        ready = self.proc.stdout.readline() if self.proc.stdout else ""
        if not ready:
            raise RuntimeError(f"the {name} oracle did not start with {argv[0]}{hint}")
        self.versions: dict[str, str] = json.loads(ready)["versions"]

    def run(self, case: dict[str, Any]) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(case) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the {self.name} oracle exited")
        return json.loads(line)

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
