"""A one-machine SLURM cluster for the tests: munged, slurmctld and slurmd started as local
daemons (in the foreground, children of the test) with their key, configuration, state, spool
and logs in one temporary folder. One node, named after this host or as the
caller says, its CPUs as configured; processes tracked by /proc (no cgroups), no task plugin,
no accounting. A node named unlike this host is, to mpirun inside an allocation, another
machine: it starts its processes there through srun, as across machines.

Debian's packages (`slurm-wlm`, `munge`) provide the daemons; `.ci/run` installs them.
"""

from __future__ import annotations

import contextlib
import getpass
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

PROGRAMS = ("munged", "slurmctld", "slurmd", "srun", "sbatch", "scancel", "sinfo", "squeue")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def program(name: str) -> str | None:
    """A program's path (daemons live in /usr/sbin, which a user's PATH may lack)."""
    return shutil.which(name, path=f"{os.environ.get('PATH', '')}{os.pathsep}/usr/sbin:/sbin")


class SlurmCluster:
    """`start()` brings the cluster up (its one node idle), `stop()` ends every daemon;
    `env` is what a client (srun, sbatch, scontrol) needs to reach it."""

    def __init__(self, root: Path, cpus: int = 2, node: str | None = None):
        self.root = root
        self.cpus = cpus
        self.node = node or socket.gethostname()
        self.daemons: list[subprocess.Popen] = []
        self.env = {**os.environ, "SLURM_CONF": str(root / "slurm.conf")}

    def start(self, timeout_s: float = 30.0) -> SlurmCluster:
        missing = [name for name in PROGRAMS if program(name) is None]
        if missing:
            raise RuntimeError(
                f"SLURM is not installed ({', '.join(missing)} missing): "
                "apt-get install slurm-wlm munge (as .ci/run does)"
            )
        try:
            self._start_munge()
            self._write_config()
            self._daemon([program("slurmctld"), "-D", "-c", "-i"], "slurmctld")
            self._daemon([program("slurmd"), "-D", "-N", self.node], "slurmd")
            self._wait_idle(timeout_s)
        except BaseException:
            self.stop()
            raise
        return self

    def _daemon(self, cmd: list[str], name: str) -> None:
        log = open(self.root / f"{name}.out", "wb")  # noqa: SIM115 (the daemon holds it)
        self.daemons.append(
            subprocess.Popen(
                cmd, env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        )
        log.close()

    def _start_munge(self) -> None:
        munge = self.root / "munge"
        munge.mkdir(mode=0o700)
        key = munge / "munge.key"
        key.write_bytes(os.urandom(128))
        key.chmod(0o600)
        self.socket = munge / "socket"
        self._daemon(
            [
                program("munged"),
                "--foreground",
                "--force",  # root, and a socket folder only its owner may enter
                f"--socket={self.socket}",
                f"--key-file={key}",
                f"--pid-file={munge / 'pid'}",
                f"--log-file={munge / 'log'}",
                f"--seed-file={munge / 'seed'}",
            ],
            "munged",
        )
        self._wait(lambda: self.socket.exists(), 10.0, "munged's socket")

    def _write_config(self) -> None:
        root = self.root
        for folder in ("state", "spool"):
            (root / folder).mkdir()
        user = getpass.getuser()
        lines = [
            "ClusterName=paradit-test",
            "SlurmctldHost=localhost(127.0.0.1)",
            f"SlurmctldPort={free_port()}",
            f"SlurmdPort={free_port()}",
            f"SlurmUser={user}",
            f"SlurmdUser={user}",
            "AuthType=auth/munge",
            "CredType=cred/munge",
            f"AuthInfo=socket={self.socket}",
            f"StateSaveLocation={root / 'state'}",
            f"SlurmdSpoolDir={root / 'spool'}",
            f"SlurmctldPidFile={root / 'slurmctld.pid'}",
            f"SlurmdPidFile={root / 'slurmd.pid'}",
            f"SlurmctldLogFile={root / 'slurmctld.log'}",
            f"SlurmdLogFile={root / 'slurmd.log'}",
            # no cgroups in a container: track tasks through /proc, bind nothing
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/none",
            "JobCompType=jobcomp/none",
            "MpiDefault=none",
            "SwitchType=switch/none",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_CPU",
            "SlurmdParameters=config_overrides",  # the node has these CPUs, whatever the host
            "ReturnToService=2",
            "KillWait=5",
            f"NodeName={self.node} NodeAddr=127.0.0.1 CPUs={self.cpus} State=UNKNOWN",
            f"PartitionName=debug Nodes={self.node} Default=YES MaxTime=INFINITE State=UP",
        ]
        (root / "slurm.conf").write_text("\n".join(lines) + "\n")

    def _wait_idle(self, timeout_s: float) -> None:
        def idle() -> bool:
            for proc in self.daemons:
                if proc.poll() is not None:
                    raise RuntimeError(f"{proc.args[0]} exited: {self.logs()}")
            state = subprocess.run(
                ["sinfo", "-h", "-o", "%T"], env=self.env, capture_output=True, text=True
            )
            return state.stdout.strip() == "idle"

        self._wait(idle, timeout_s, "the node to be idle")

    @staticmethod
    def _wait(check, timeout_s: float, what: str) -> None:
        deadline = time.monotonic() + timeout_s
        while not check():
            if time.monotonic() > deadline:
                raise RuntimeError(f"SLURM test cluster: timed out waiting for {what}")
            time.sleep(0.1)

    def logs(self) -> str:
        """The daemons' logs, for a failure message."""
        parts = []
        for name in ("slurmctld.log", "slurmd.log", "slurmctld.out", "slurmd.out", "munged.out"):
            path = self.root / name
            if path.exists():
                parts.append(f"--- {name}\n{path.read_text(errors='replace')[-3000:]}")
        return "\n".join(parts)

    def jobs(self) -> list[str]:
        """The ids of the jobs the cluster still holds (pending, running or ending)."""
        listed = subprocess.run(
            ["squeue", "-h", "-o", "%i"], env=self.env, capture_output=True, text=True
        )
        return listed.stdout.split()

    def stop(self) -> None:
        """Cancel every job, end the daemons, then kill whatever still carries this cluster's
        configuration in its environment (a job step's slurmstepd outlives slurmd)."""
        jobs = self.jobs() if self.daemons and all(p.poll() is None for p in self.daemons) else []
        if jobs:
            subprocess.run(["scancel", "--full", *jobs], env=self.env, check=False)
            with contextlib.suppress(RuntimeError):
                self._wait(lambda: not self.jobs(), 30.0, "the jobs to end")
        for proc in reversed(self.daemons):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in reversed(self.daemons):
            try:
                proc.wait(timeout=2)  # a throw-away cluster: its state need not be saved
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        self.daemons.clear()
        for pid in self.stray_processes():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    def stray_processes(self) -> list[int]:
        """Processes (other than this one) whose environment names this cluster's config."""
        needle = f"SLURM_CONF={self.env['SLURM_CONF']}\0".encode()
        found = []
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit() and int(entry.name) != os.getpid():
                with contextlib.suppress(OSError):
                    if needle in (entry / "environ").read_bytes():
                        found.append(int(entry.name))
        return found
