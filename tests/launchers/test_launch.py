"""Launchers: which rank a launcher's variables make a process. The same `paradit serve` under
each launcher: torchrun in tests/serving/test_replicas.py
(`test_two_replicas_on_two_torchrun_nodes`: two torchrun nodes whose jobs equal world size 1,
one launch for the launcher and the replicas), mpirun in tests/launchers/test_mpirun.py,
srun, sbatch and mpirun inside an allocation in tests/launchers/test_slurm.py.

Cost: about 1 s (the suite's two-worker run on 2 cores, 2026-11-29).
"""

from __future__ import annotations

import pytest

from paradit.backend.runtime.launch_env import LaunchEnv, first_host


@pytest.mark.fast
def test_launch_env_from_each_launcher():
    assert LaunchEnv.from_environ({}) is None
    torchrun = LaunchEnv.from_environ(
        {
            "RANK": "3",
            "WORLD_SIZE": "4",
            "LOCAL_RANK": "1",
            "LOCAL_WORLD_SIZE": "2",
            "MASTER_ADDR": "node0",
            "MASTER_PORT": "29400",
            "TORCHELASTIC_RUN_ID": "x",
            "TORCHELASTIC_USE_AGENT_STORE": "True",
            "TORCHELASTIC_RESTART_COUNT": "2",
        }
    )
    assert (torchrun.rank, torchrun.world_size, torchrun.local_rank) == (3, 4, 1)
    assert torchrun.launcher == "torchrun" and torchrun.agent_store
    assert torchrun.prefix == "paradit/2"  # an elastic restart reads fresh keys
    slurm_task = {
        "SLURM_PROCID": "5",
        "SLURM_NTASKS": "8",
        "SLURM_LOCALID": "1",
        "SLURM_STEP_TASKS_PER_NODE": "4(x2)",
        "MASTER_ADDR": "node0",
    }
    # a batch script's own shell has SLURM_PROCID too, but it is no task of an srun step
    assert LaunchEnv.from_environ(slurm_task) is None
    slurm = LaunchEnv.from_environ({**slurm_task, "SLURM_STEP_ID": "0"})
    assert (slurm.rank, slurm.world_size, slurm.local_rank, slurm.local_world_size) == (5, 8, 1, 4)
    assert slurm.master_port == 29500 and not slurm.agent_store
    mpi = LaunchEnv.from_environ(
        {
            "OMPI_COMM_WORLD_RANK": "1",
            "OMPI_COMM_WORLD_SIZE": "2",
            "OMPI_COMM_WORLD_LOCAL_RANK": "1",
            "OMPI_COMM_WORLD_LOCAL_SIZE": "2",
            "MASTER_ADDR": "10.0.0.1",
            "MASTER_PORT": "1234",
        }
    )
    assert (mpi.rank, mpi.launcher, mpi.master_addr, mpi.master_port) == (
        1,
        "mpi",
        "10.0.0.1",
        1234,
    )
    with pytest.raises(ValueError, match="MASTER_ADDR"):
        LaunchEnv.from_environ({"SLURM_PROCID": "0", "SLURM_NTASKS": "2", "SLURM_STEP_ID": "3"})
    with pytest.raises(ValueError, match="rank"):
        LaunchEnv.from_environ({"RANK": "2", "WORLD_SIZE": "2", "MASTER_ADDR": "a"})


@pytest.mark.fast
def test_launch_env_mpich_pmi_and_which_launcher_wins():
    mpich = LaunchEnv.from_environ(
        {
            "PMI_RANK": "6",
            "PMI_SIZE": "8",
            "MPI_LOCALRANKID": "2",
            "MPI_LOCALNRANKS": "4",
            "MASTER_ADDR": "node1",
        }
    )
    assert (mpich.rank, mpich.world_size, mpich.local_rank, mpich.local_world_size) == (6, 8, 2, 4)
    assert mpich.launcher == "mpi" and mpich.master_port == 29500
    # torchrun inside a SLURM allocation: torchrun's variables name this process
    inside = LaunchEnv.from_environ(
        {
            "RANK": "1",
            "WORLD_SIZE": "2",
            "TORCHELASTIC_RUN_ID": "x",
            "MASTER_ADDR": "a",
            "SLURM_PROCID": "0",
            "SLURM_NTASKS": "1",
            "SLURM_STEP_ID": "0",
        }
    )
    assert (inside.launcher, inside.rank, inside.world_size) == ("torchrun", 1, 2)
    # RANK/WORLD_SIZE by hand, or from paradit's own launch
    by_hand = {"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "a", "MASTER_PORT": "7"}
    assert LaunchEnv.from_environ(by_hand).launcher == "env"
    own = LaunchEnv.from_environ(
        {**by_hand, "PARADIT_LAUNCHER": "paradit", "PARADIT_GENERATION": "3"}
    )
    assert own.launcher == "paradit" and own.prefix == "paradit/3"


@pytest.mark.fast
def test_mpirun_inside_slurm_is_named_by_mpi_and_srun_by_its_own_pmi():
    """The innermost launcher names the process. mpirun inside an allocation starts its
    processes through srun, so they inherit that step's SLURM_PROCID (0 on every rank of a
    node): their MPI variables win. srun --mpi=pmi2 sets PMI_RANK equal to SLURM_PROCID:
    srun launched the process, and its node list gives rank 0's address."""
    # MPICH's mpirun under `salloc -n 2` on one node, as tests/launchers/test_slurm.py's cluster
    # shows it: Hydra's proxy ran as the one task of an srun step (SLURM_NTASKS is the allocation's)
    step = {
        "SLURM_PROCID": "0",
        "SLURM_NTASKS": "2",
        "SLURM_LOCALID": "0",
        "SLURM_STEP_ID": "0",
        "SLURM_STEP_NUM_NODES": "1",
        "SLURM_STEP_NUM_TASKS": "1",
        "SLURM_STEP_TASKS_PER_NODE": "1",
    }
    for rank in (0, 1):
        hydra = {"PMI_RANK": str(rank), "PMI_SIZE": "2", "MPI_LOCALRANKID": str(rank)}
        mpich = LaunchEnv.from_environ({**step, **hydra, "MPI_LOCALNRANKS": "2"})
        assert (mpich.launcher, mpich.rank, mpich.world_size) == ("mpi", rank, 2)
        assert (mpich.local_rank, mpich.local_world_size, mpich.master_addr) == (
            rank,
            2,
            "127.0.0.1",
        )
        # Open MPI's daemon on another node was started by srun: its ranks carry the step's
        # variables, and the step's tasks per node is no rank count
        daemon = {**step, "SLURM_NTASKS": "1", "MASTER_ADDR": "node0"}
        ompi = {"OMPI_COMM_WORLD_RANK": str(2 + rank), "OMPI_COMM_WORLD_SIZE": "4"}
        open_mpi = LaunchEnv.from_environ({**daemon, **ompi, "OMPI_COMM_WORLD_LOCAL_RANK": "0"})
        assert (open_mpi.launcher, open_mpi.rank, open_mpi.world_size) == ("mpi", 2 + rank, 4)
        assert open_mpi.local_world_size == 4  # no local size given: not the step's "1"
    # srun --mpi=pmi2: PMI_RANK/PMI_SIZE are srun's own, so srun is the launcher
    pmi2 = {
        **step,
        "SLURM_PROCID": "1",
        "SLURM_STEP_NUM_TASKS": "2",
        "SLURM_STEP_NUM_NODES": "2",
        "SLURM_STEP_NODELIST": "gpu[07-08]",
        "PMI_RANK": "1",
        "PMI_SIZE": "2",
    }
    srun = LaunchEnv.from_environ(pmi2)
    assert (srun.launcher, srun.rank, srun.world_size, srun.master_addr) == (
        "slurm",
        1,
        2,
        "gpu07",
    )
    # an sbatch script's mpirun: the batch shell is no srun step, so MPI names the ranks
    batch = {"SLURM_PROCID": "0", "SLURM_NTASKS": "2", "MASTER_ADDR": "a"}
    assert LaunchEnv.from_environ({**batch, "PMI_RANK": "1", "PMI_SIZE": "2"}).rank == 1


@pytest.mark.fast
def test_rank0_address_without_master_addr():
    """One host: 127.0.0.1; srun on several nodes: the step's first node; anything else
    across hosts: an error that says to set MASTER_ADDR."""
    srun = {"SLURM_PROCID": "1", "SLURM_NTASKS": "4", "SLURM_STEP_ID": "0"}
    one_node = LaunchEnv.from_environ({**srun, "SLURM_STEP_NUM_NODES": "1"})
    assert (one_node.launcher, one_node.master_addr, one_node.master_port) == (
        "slurm",
        "127.0.0.1",
        29500,
    )
    nodes = {**srun, "SLURM_STEP_NUM_NODES": "2", "SLURM_STEP_NODELIST": "gpu[07-08]"}
    assert LaunchEnv.from_environ(nodes).master_addr == "gpu07"
    assert LaunchEnv.from_environ({**nodes, "SLURM_PROCID": "0", "SLURMD_NODENAME": "gpu07"})
    with pytest.raises(ValueError, match="task 0 runs on gpu08, not on the step's first node"):
        LaunchEnv.from_environ({**nodes, "SLURM_PROCID": "0", "SLURMD_NODENAME": "gpu08"})
    assert LaunchEnv.from_environ({**nodes, "MASTER_ADDR": "10.0.0.7"}).master_addr == "10.0.0.7"
    open_mpi = {"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "2"}
    mpich = {"PMI_RANK": "1", "PMI_SIZE": "2", "MPI_LOCALRANKID": "0"}
    for env, local_size in ((open_mpi, "OMPI_COMM_WORLD_LOCAL_SIZE"), (mpich, "MPI_LOCALNRANKS")):
        one_host = LaunchEnv.from_environ({**env, local_size: "2", "MASTER_PORT": "4321"})
        assert (one_host.master_addr, one_host.master_port) == ("127.0.0.1", 4321)
        with pytest.raises(ValueError, match="mpi started ranks on several hosts: set MASTER_ADDR"):
            LaunchEnv.from_environ({**env, local_size: "1"})
    with pytest.raises(ValueError, match="MASTER_ADDR"):  # no local size: no guess
        LaunchEnv.from_environ(open_mpi)
    with pytest.raises(ValueError, match="env launch needs MASTER_ADDR"):  # by hand: say where
        LaunchEnv.from_environ({"RANK": "0", "WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "2"})
    for nodelist, first in (("n1", "n1"), ("a,b", "a"), ("gpu[03-05,9],cpu1", "gpu03")):
        assert first_host(nodelist) == first
