"""The job records on disk (SQLite, in the output folder): a restarted backend lists what it
finished and runs what was queued.

One row per job: its id, when it was made, its state and its document (the request with its
image while queued, then the outputs' files and timings). Rows are written when a job changes
state, never per step. One backend per output folder.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

FILE_NAME = "jobs.sqlite"


class JobStore:
    """A small table of job documents; safe to call from several threads."""

    def __init__(self, folder: str | Path):
        path = Path(folder) / FILE_NAME
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._lock = threading.Lock()
        self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS jobs ("
            " id TEXT PRIMARY KEY, created REAL NOT NULL, status TEXT NOT NULL, doc TEXT NOT NULL)"
        )

    def save(self, job_id: str, created: float, status: str, doc: dict[str, Any]) -> None:
        with self._lock:
            self._db.execute(
                "INSERT INTO jobs (id, created, status, doc) VALUES (?, ?, ?, ?) "
                "ON CONFLICT(id) DO UPDATE SET status = excluded.status, doc = excluded.doc",
                (job_id, created, status, json.dumps(doc)),
            )

    def delete(self, job_ids: list[str]) -> None:
        if job_ids:
            with self._lock:
                self._db.executemany("DELETE FROM jobs WHERE id = ?", [(i,) for i in job_ids])

    def load(self) -> list[dict[str, Any]]:
        """Every stored job document, oldest first."""
        with self._lock:
            rows = self._db.execute("SELECT doc FROM jobs ORDER BY created, id").fetchall()
        docs = []
        for (doc,) in rows:
            try:
                docs.append(json.loads(doc))
            except ValueError:
                log.warning("skipping an unreadable job record in %s", self.path)
        return docs

    def close(self) -> None:
        with self._lock:
            self._db.close()
