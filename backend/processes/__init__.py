"""The life of the group's processes: a rank's start-up and worker loop (`rank.py`), the
entry point of the ranks `serve` starts (`child.py`), ranks forked from a warm rank 0
(`forked.py`), and their supervision (`group.py`). Runs on every rank; `serving/` is rank 0's.
"""
