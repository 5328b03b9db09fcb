"""Grading many students at once: on this machine's cores, or over a Dask distributed cluster.

Every :class:`~kvcourse_grader.jobs.GradingJob` is independent (its own nbgrader run, its own
sandboxed kernel, its own folders); only the gradebook is shared. :func:`run_local` runs jobs
on a pool of threads, each driving one long-lived nbgrader process that grades its students in
turn, so ``workers`` students are graded at a time. :func:`run_dask` hands the same jobs to the
workers of a Dask ``distributed`` cluster (the well-kept engine for fanning Python work out over
machines): each worker grades one student at a time, in an nbgrader process of its own, and
writes to the one gradebook, which must then be a server database (PostgreSQL) that every worker
reaches. Both yield outcomes as they finish and never raise for a
student; :func:`default_workers` is how many students this machine can take at once.
"""

from __future__ import annotations

import os
import queue
import uuid
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed

from kvcourse_grader import runner
from kvcourse_grader.jobs import GradingJob, JobOutcome, grade_job
from kvcourse_grader.nbgrader_worker import NbgraderWorker

__all__ = ["MEMORY_PER_WORKER", "cluster_size", "default_workers", "run_dask", "run_local"]

#: Memory one grader takes at its peak (nbgrader ≈ 0.3 GiB resident plus a kernel with numpy,
#: torch and matplotlib ≈ 0.6 GiB); the default worker count leaves that much per worker.
MEMORY_PER_WORKER = 1.5 * 2**30


def default_workers() -> int:
    """Students graded at once by default: the CPUs this process may use, fewer when the
    available memory would not hold :data:`MEMORY_PER_WORKER` for each."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cpus = os.cpu_count() or 1
    try:
        import psutil

        by_memory = int(psutil.virtual_memory().available // MEMORY_PER_WORKER)
    except ImportError:  # pragma: no cover -- psutil comes with ipykernel
        by_memory = cpus
    return max(1, min(cpus, by_memory))


def _failed(job: GradingJob, why: str) -> JobOutcome:
    return JobOutcome(job.assignment, job.student, None, why, 0.0)


def run_local(jobs: Iterable[GradingJob], workers: int) -> Iterator[JobOutcome]:
    """Grade ``jobs`` here, ``workers`` at a time; yield each outcome as it finishes.

    Each thread grades its students in one long-lived nbgrader process
    (:class:`~kvcourse_grader.nbgrader_worker.NbgraderWorker`), so nbgrader starts once per
    thread rather than once per student; every student still gets a kernel of its own."""
    if not isinstance(workers, int) or isinstance(workers, bool) or workers < 1:
        raise ValueError(f"workers must be a positive whole number, got {workers!r}")
    jobs = list(jobs)
    idle: queue.SimpleQueue[NbgraderWorker] = queue.SimpleQueue()
    started: list[NbgraderWorker] = []

    def grade(job: GradingJob) -> JobOutcome:
        try:
            worker = idle.get_nowait()
        except queue.Empty:
            worker = NbgraderWorker(job.course.root, memory_limit=job.memory_limit)
            started.append(worker)
        try:
            return grade_job(job, worker)
        finally:
            idle.put(worker)

    if len({(job.course.root, job.memory_limit) for job in jobs}) > 1:
        raise ValueError("run_local grades one course with one memory limit at a time")
    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="grader")
    futures: dict = {}
    try:
        for job in jobs:
            futures[pool.submit(grade, job)] = job
        for future in as_completed(futures):
            try:
                yield future.result()
            except Exception as err:  # grade_job catches its own; this is a last guard
                yield _failed(futures[future], f"{type(err).__name__}: {err}")
    except (KeyboardInterrupt, GeneratorExit):
        # Ctrl-C, wherever it landed: nothing more starts, and the running graders (each in a
        # session of its own, so the signal missed them) are stopped with their kernels before
        # the pool waits for its threads.
        for future in futures:
            future.cancel()
        runner.stop_all_runs()
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        for worker in started:
            worker.close()


def _connect(address: str):
    try:
        from distributed import Client
    except ImportError:
        raise RuntimeError(
            "--dask needs Dask's distributed package: pip install 'distributed>=2024.1'"
        ) from None
    try:
        return Client(address, timeout=30)
    except OSError as err:
        raise RuntimeError(
            f"cannot reach the Dask scheduler at {address} ({err}); start one with "
            "`dask scheduler` and workers with `dask worker ADDRESS --nthreads 1`"
        ) from None


def cluster_size(address: str) -> int:
    """How many worker threads the Dask cluster at ``address`` has (each grades one student)."""
    with _connect(address) as client:
        info = client.scheduler_info()
    return sum(w.get("nthreads", 1) for w in info.get("workers", {}).values())


def run_dask(jobs: Iterable[GradingJob], address: str) -> Iterator[JobOutcome]:
    """Grade ``jobs`` on the Dask cluster whose scheduler is at ``address``; yield each outcome
    as it finishes. A job whose worker is lost comes back ungraded, saying so."""
    from distributed import as_completed as dask_completed

    jobs = list(jobs)
    run = uuid.uuid4().hex[:8]
    with _connect(address) as client:
        futures = {
            client.submit(
                grade_job,
                job,
                key=f"grade-{job.assignment}-{job.student}-{run}",
                pure=False,
                retries=0,
            ): job
            for job in jobs
        }
        try:
            finished = dask_completed(list(futures))
            for future in finished:
                try:
                    yield future.result()
                except Exception as err:  # a worker died, or the task could not be unpickled
                    why = f"the Dask worker failed: {type(err).__name__}: {err}"
                    yield _failed(futures[future], why)
        except KeyboardInterrupt:
            client.cancel(list(futures))  # queued tasks are dropped; running ones finish there
            raise
