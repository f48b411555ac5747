"""Speed side by side: the same items, model server, latency and concurrency through

  (a) our local mode    ``run_experiment`` (``--model openai:<name> --base-url <loopback>``,
                        local SQLite store, default scoring incl. 10,000 bootstrap resamples,
                        ``--workers`` W: the script's ``--workers``, default the machine's
                        cores): the model call through our OpenAI provider (``--transport``,
                        default the SDK's aiohttp transport, and ``client.post`` without the
                        SDK's request transform), then parsing, scoring, storing, the summary;
                        CPU includes the worker processes;
  (a1)                  the same with ``--workers 1`` (one process, one event loop);
  (b) our LangFuse mode ``run_experiment`` against a fake LangFuse server started afresh for
                        this one measurement (dataset uploaded first, not timed), with the
                        read-back check (the figure without it is printed too), ``--workers``
                        W as (a): each worker process runs its share through the SDK's
                        ``run_experiment``; CPU includes the worker processes;
  (b1)                  the same with ``--workers 1`` (one process: the SDK's one loop);
  (c) the LangFuse SDK's own ``Langfuse.run_experiment`` on the same LangFuse dataset (also a
                        fresh fake server per measurement), an async task calling the model
                        through ``AsyncOpenAI`` (httpx, ``chat.completions.create``) and a
                        trivial evaluator (``get_dataset`` + the run + its flush);
  (d) bare floor, SDK defaults: ``asyncio`` + ``AsyncOpenAI`` over httpx calling
                        ``chat.completions.create`` (semaphore of C), then ``json.loads`` of
                        the answer: the floor of a plain SDK user;
  (e) bare floor, our transport: the same loop over the transport our provider uses
                        (``--transport``) sending the very body our provider sends through
                        the same ``client.post`` call: **the fair floor for (a)**, which adds to
                        it only our own work (parse, score, store). a/e is the overhead figure.
  (z) a bound, not a product: (a) with each item's scoring and storing cut out (the first
                        item is scored and stored for real; every later answer is parsed, then
                        recorded as a copy of that result, not scored and not stored). What
                        (z) costs beyond (e) is our call path alone (cache key and lookup,
                        timeout, answer validation, pricing, the driver); z/e is the lowest
                        a/e any design that takes scoring and storing off the event loop (a
                        thread, a second process) could reach on this machine. Not in the
                        default --modes.

Every model call sends the same request (our prompt, the strict JSON schema, temperature 0,
``max_retries=0``, 60 s timeout; the model is named after the run, so our response cache never
answers from an earlier run) to the loopback OpenAI-compatible server
(tests/support/openai_server.py), which answers after ``--latency`` seconds with one fixed,
realistic extraction (5 entities with evidence, 3 relationships; against each item's gold of 5
entities and 3 relationships it has matches, a wrong type, a spurious entity and a spurious
relationship, so scoring and storing do real work). The servers run in their own processes,
and every measurement runs in a fresh interpreter of its own (import time excluded; no
leftover SDK threads from an earlier mode), one at a time. Wall and CPU time (user + system
of the measuring process, all threads) are printed; on a shared machine read the CPU figures.
The temporary store folder is removed at the end. Only 127.0.0.1 is used. The script prints
figures; it is not a pass/fail test.

    .venv/bin/python benchmarks/bench_vs_peers.py            # 2,000 items, C = 16 and 64
    .venv/bin/python benchmarks/bench_vs_peers.py --quick    # 400 items
    .venv/bin/python benchmarks/bench_vs_peers.py --modes e,a --concurrency 64 --repeat 3
    .venv/bin/python benchmarks/bench_vs_peers.py --fast 0.001  # the issue-30 figures in one run
    .venv/bin/python benchmarks/bench_vs_peers.py --latency 0 --items 50 --modes e,a1  # smoke
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # tests.support (the fake servers) lives in the repo
    sys.path.insert(0, str(REPO))

DATASET = "bench-peers"
TIMEOUT_S = 60.0  # our default --timeout, used by every mode
MODES = {
    "a": "ours, local, --workers W",
    "a1": "ours, local, --workers 1",
    "b": "ours, LangFuse, --workers W",
    "b1": "ours, LangFuse, --workers 1",
    "c": "LangFuse SDK run_experiment",
    "d": "bare, SDK defaults (httpx)",
    "e": "bare, our transport (fair)",
    "z": "bound: ours, no score/store",
}

_OPENAI_SERVER = """
import json, sys, threading
from tests.support.openai_server import LoopbackServer
answer = json.loads(sys.argv[2])
server = LoopbackServer(latency_s=float(sys.argv[1]), answer=lambda body: answer).start()
print(server.url, flush=True)
threading.Event().wait()
"""

TEXT = (
    "Item {i}: Ada Lovelace worked with Charles Babbage at the University of London in 1843."
    " Babbage designed the Analytical Engine, and Lovelace wrote its first program."
)
GOLD = {
    "entities": [
        {"name": "Ada Lovelace", "type": "person"},
        {"name": "Charles Babbage", "type": "person"},
        {"name": "University of London", "type": "organization"},
        {"name": "Analytical Engine", "type": "product"},
        {"name": "1843", "type": "date"},
    ],
    "relationships": [
        {"source": "Ada Lovelace", "type": "colleague_of", "target": "Charles Babbage"},
        {"source": "Charles Babbage", "type": "created", "target": "Analytical Engine"},
        {"source": "Ada Lovelace", "type": "member_of", "target": "University of London"},
    ],
}
# what the fake model answers to every item: 3 right, a wrong type, a spurious entity; 2 right
# relationships (one gold missed), a spurious one; every object with its evidence
ANSWER = {
    "entities": [
        {"name": "Ada Lovelace", "type": "person", "evidence": "Ada Lovelace worked with"},
        {"name": "Charles Babbage", "type": "person", "evidence": "with Charles Babbage at"},
        {"name": "University of London", "type": "organization", "evidence": "the University"
         " of London in 1843"},
        {"name": "Analytical Engine", "type": "organization", "evidence": "designed the"
         " Analytical Engine"},
        {"name": "first program", "type": "product", "evidence": "wrote its first program"},
    ],
    "relationships": [
        {"source": "Ada Lovelace", "type": "colleague_of", "target": "Charles Babbage",
         "evidence": "Ada Lovelace worked with Charles Babbage"},
        {"source": "Charles Babbage", "type": "created", "target": "Analytical Engine",
         "evidence": "Babbage designed the Analytical Engine"},
        {"source": "Ada Lovelace", "type": "created", "target": "first program",
         "evidence": "Lovelace wrote its first program"},
    ],
}  # fmt: skip

_LANGFUSE_SERVER = """
import json, sys
from tests.support.langfuse_server import FakeLangfuse
server = FakeLangfuse(keys=json.loads(sys.argv[1])).start()
print(server.base_url, flush=True)
sys.stdin.read()  # serve until the benchmark closes stdin
server.stop()
"""


def make_items(n: int) -> list[Any]:
    from extraction_eval.types import DatasetItem, Extraction

    gold = Extraction.model_validate(GOLD)
    return [DatasetItem(id=f"p{i:05d}", text=TEXT.format(i=i), expected=gold) for i in range(n)]


def request_kwargs(
    text: str, prompt: Any, json_schema: dict[str, Any], model: str
) -> dict[str, Any]:
    """The body our OpenAI provider sends for ``text`` (so every mode asks the same)."""
    return {
        "model": model,
        "messages": [{"role": m.role, "content": m.content} for m in prompt.compile(text, None)],
        "temperature": 0.0,
        "timeout": TIMEOUT_S,
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": "extraction", "schema": json_schema, "strict": True},
        },
    }


def openai_client(url: str, transport: str = "httpx") -> Any:
    from openai import AsyncOpenAI, DefaultAioHttpClient

    http_client = DefaultAioHttpClient() if transport == "aiohttp" else None
    return AsyncOpenAI(api_key="bench", base_url=url, max_retries=0, http_client=http_client)


# --- the four modes (each runs in its own worker process) ------------------------------------


def time_calls(module: Any, name: str) -> list[float]:
    """Wrap ``module.name`` so every call adds its wall time to the returned list's first
    item, and this process's CPU time (all threads) to its second."""
    spent = [0.0, 0.0]
    original = getattr(module, name)

    def timed(*a: Any, **k: Any) -> Any:
        t, c = time.perf_counter(), time.process_time()
        try:
            return original(*a, **k)
        finally:
            spent[0] += time.perf_counter() - t
            spent[1] += time.process_time() - c

    setattr(module, name, timed)
    return spent


def _our_config(args: argparse.Namespace, backend: str, workers: int = 1) -> Any:
    from extraction_eval.experiments.config import RunConfig
    from extraction_eval.pipeline.base import PipelineConfig

    return RunConfig(
        dataset=DATASET,
        name=args.run_name,
        pipeline=PipelineConfig(
            model=f"openai:{args.run_name}",
            base_url=args.openai_url,
            extra={"http_transport": args.transport},
        ),
        concurrency=args.concurrency,
        backend=backend,  # type: ignore[arg-type]
        workers=workers,
    )


def mode_a(args: argparse.Namespace, workers: int | None = None) -> dict[str, Any]:
    """(a): local mode with ``--workers`` (the script's, default the machine's cores); (a1)
    the same with one process. CPU includes the worker processes (reaped at the run's end)."""
    from extraction_eval.backends.local import LocalStore
    from extraction_eval.experiments import (
        driver,  # where finalize is called
        local_mode,
    )
    from extraction_eval.experiments.run import run_experiment

    store = LocalStore(sample=False)
    config = _our_config(args, "local", args.workers if workers is None else workers)
    finalize = time_calls(driver, "finalize")
    started: list[float] = []
    schedule = local_mode.run_bounded

    def first_item(*a: Any, **k: Any) -> Any:  # when the setup is over and items start
        started.append(time.perf_counter())
        return schedule(*a, **k)

    local_mode.run_bounded = first_item  # type: ignore[assignment]
    own = time.process_time()
    with Timed() as t:
        outcome = run_experiment(config, store=store)
    own = time.process_time() - own
    return {
        "wall": t.wall,
        "cpu": t.cpu,
        "workers_cpu": t.cpu - own,
        "finalize": finalize[0],
        "setup": started[0] - t.wall0 if started else None,
        "results": len(outcome.results),
        "cache_hits": sum(r.cache_hit for r in outcome.results),
        "errors": outcome.summary.errors,
    }


def mode_z(args: argparse.Namespace) -> dict[str, Any]:
    """(a) with every item after the first recorded as a copy of the first's result: the
    call (and the answer's parse) as (a) makes it, no scoring, no storing."""
    from extraction_eval.experiments import driver, runner

    real_run, real_record = runner.ItemRunner.run_scored, driver.Driver.record
    first: list[Any] = []

    async def call_only(self: Any, item: Any) -> Any:
        if not first:
            first.append(await real_run(self, item))
            return first[0]
        await self.pipeline.extract(runner.asked_item(self.view.item(item)))
        result, scored = first[0]
        return result.model_copy(update={"item_id": item.id}), scored

    def record_only_the_first(self: Any, result: Any) -> None:
        if result.item_id == first[0][0].item_id:
            return real_record(self, result)
        self.recorded[result.item_id] = driver.Recorded(None, ())
        self.progress.advance(result)

    runner.ItemRunner.run_scored = call_only  # type: ignore[method-assign]
    driver.Driver.record = record_only_the_first  # type: ignore[method-assign]
    return mode_a(args, workers=1)


def mode_b(args: argparse.Namespace, workers: int | None = None) -> dict[str, Any]:
    """(b): LangFuse mode with ``--workers`` (the script's); (b1) with one process. CPU
    includes the worker processes (reaped at the run's end)."""
    from extraction_eval.backends.local import LocalStore
    from extraction_eval.experiments import langfuse_mode, langfuse_workers
    from extraction_eval.experiments.run import run_experiment

    config = _our_config(args, "langfuse", args.workers if workers is None else workers)
    verify = time_calls(langfuse_mode, "verify_in_langfuse")  # the read-back, with any re-post
    started: list[float] = []  # when the items start: the first share sent, or the SDK called
    for module, name in ((langfuse_workers, "Share"), (langfuse_mode, "_schedule")):
        real = getattr(module, name)

        def first(*a: Any, _real: Any = real, **k: Any) -> Any:
            started.append(time.perf_counter())
            return _real(*a, **k)

        setattr(module, name, first)
    own = time.process_time()
    with Timed() as t:
        outcome = run_experiment(config, store=LocalStore(sample=False))
    own = time.process_time() - own
    return {
        "wall": t.wall,
        "cpu": t.cpu,
        "workers_cpu": t.cpu - own,
        "setup": started[0] - t.wall0 if started else None,
        "wall_no_readback": t.wall - verify[0],
        "readback": verify[0],
        "readback_cpu": verify[1],
        "results": len(outcome.results),
        "cache_hits": sum(r.cache_hit for r in outcome.results),
        "errors": outcome.summary.errors,
    }


def mode_c(args: argparse.Namespace) -> dict[str, Any]:
    from langfuse import Evaluation, Langfuse

    from extraction_eval.prompts.contract import extraction_json_schema
    from extraction_eval.prompts.template import load_local_prompt

    prompt, json_schema = load_local_prompt(), extraction_json_schema(None)
    clients: dict[int, Any] = {}  # one AsyncOpenAI per event loop (the SDK makes the loop)

    async def task(*, item: Any, **_: Any) -> Any:
        loop_id = id(asyncio.get_running_loop())
        client = clients.get(loop_id) or clients.setdefault(loop_id, openai_client(args.openai_url))
        response = await client.chat.completions.create(
            **request_kwargs(item.input["text"], prompt, json_schema, args.run_name)
        )
        return json.loads(response.choices[0].message.content or "null")

    def nonempty(*, output: Any, **_: Any) -> Evaluation:
        return Evaluation(name="nonempty", value=float(output is not None), data_type="NUMERIC")

    lf = Langfuse(
        public_key=args.public_key, secret_key=args.secret_key, base_url=args.langfuse_url
    )
    with Timed() as t:
        dataset = lf.get_dataset(DATASET, fetch_items_page_size=100)
        result = lf.run_experiment(
            name=args.run_name,
            run_name=args.run_name,
            data=dataset.items,
            task=task,
            evaluators=[nonempty],
            max_concurrency=args.concurrency,
        )
        lf.flush()
    return {"wall": t.wall, "cpu": t.cpu, "results": len(result.item_results), "errors": None}


def mode_d(args: argparse.Namespace, floor: str = "d") -> dict[str, Any]:
    """(d): ``create`` over httpx; (e): our provider's ``client.post`` over our transport."""
    from openai.types.chat import ChatCompletion

    from extraction_eval.prompts.contract import extraction_json_schema
    from extraction_eval.prompts.template import load_local_prompt

    prompt, json_schema = load_local_prompt(), extraction_json_schema(None)
    texts = [item.text for item in make_items(args.items)]

    async def main() -> tuple[int, int]:
        client = openai_client(args.openai_url, "httpx" if floor == "d" else args.transport)
        semaphore = asyncio.Semaphore(args.concurrency)

        async def one(text: str) -> Any:
            kwargs = request_kwargs(text, prompt, json_schema, args.run_name)
            async with semaphore:
                if floor == "d":
                    response = await client.chat.completions.create(**kwargs)
                else:  # the body and call of OpenAIProvider.complete, byte for byte
                    timeout = kwargs.pop("timeout")
                    body = {k: kwargs[k] for k in ("model", "messages", "response_format")}
                    body["temperature"] = kwargs["temperature"]
                    response = await client.post(
                        "/chat/completions",
                        cast_to=ChatCompletion,
                        body=body,
                        options={"timeout": timeout, "security": {"bearer_auth": True}},
                    )
                return json.loads(response.choices[0].message.content or "null")

        try:
            outs = await asyncio.gather(*(one(t) for t in texts), return_exceptions=True)
        finally:
            await client.close()
        errors = sum(isinstance(o, BaseException) for o in outs)
        return len(outs), errors

    with Timed() as t:
        results, errors = asyncio.run(main())
    return {"wall": t.wall, "cpu": t.cpu, "results": results, "errors": errors}


def worker(args: argparse.Namespace) -> None:
    """One measurement in this (fresh) process; prints a JSON line with the figures."""
    import openai  # noqa: F401  (imported before timing in every mode: import time is not compared)

    logging_quiet()
    if args.no_gc_freeze:  # our modes as before the run froze the objects alive before it
        from contextlib import nullcontext

        from extraction_eval.experiments import driver

        driver.gc_frozen = nullcontext  # type: ignore[assignment]
    run = {
        "a": mode_a,
        "a1": lambda a: mode_a(a, workers=1),
        "b": mode_b,
        "b1": lambda a: mode_b(a, workers=1),
        "c": mode_c,
        "d": mode_d,
        "e": lambda a: mode_d(a, floor="e"),
        "z": mode_z,
    }[args.worker]
    if args.profile:  # cProfile of the main thread (the event loop), one .pstats per run
        import cProfile

        profiler = cProfile.Profile()
        figures = profiler.runcall(run, args)
        Path(args.profile).mkdir(parents=True, exist_ok=True)
        profiler.dump_stats(Path(args.profile) / f"{args.run_name}.pstats")
    else:
        figures = run(args)
    figures["threads"] = _thread_cpu()
    print("RESULT " + json.dumps(figures), flush=True)


def _thread_cpu() -> dict[str, float]:
    """CPU seconds per live thread (Linux /proc), by thread name: where the work went."""
    import threading

    out: dict[str, float] = {}
    for thread in threading.enumerate():
        tid = thread.native_id
        if tid is None:
            continue
        try:
            fields = Path(f"/proc/self/task/{tid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        name = "main" if thread is threading.main_thread() else thread.name.split("-")[0]
        cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        out[name] = round(out.get(name, 0.0) + cpu, 2)
    return out


def _cpu_now() -> float:
    """CPU seconds of this process (all threads) and of its reaped children (our workers)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


class Timed:
    """Wall and CPU time (this process, all threads, and the worker processes it started and
    reaped) of the measured section."""

    def __enter__(self) -> Timed:
        self.wall0, self.cpu0 = time.perf_counter(), _cpu_now()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall = time.perf_counter() - self.wall0
        self.cpu = _cpu_now() - self.cpu0


def logging_quiet() -> None:
    import logging

    logging.basicConfig(level=logging.ERROR)


# --- the orchestrator ------------------------------------------------------------------------


def spawn_server(argv: list[str], stdin: bool = False) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        argv,
        cwd=REPO,
        stdin=subprocess.PIPE if stdin else None,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    return proc, proc.stdout.readline().strip()


def _langfuse_server(ctx: dict[str, Any], keys: tuple[str, str]) -> subprocess.Popen[str]:
    """A fresh fake LangFuse server holding only the benchmark dataset (uploaded, not timed):
    a LangFuse mode's read-back is timed against this run's traces alone."""
    from extraction_eval.backends.langfuse import LangfuseDatasetBackend, close_client, connect

    proc, url = spawn_server(
        [sys.executable, "-c", _LANGFUSE_SERVER, json.dumps(dict([keys]))], stdin=True
    )
    ctx["langfuse_url"] = url
    lf = connect(public_key=keys[0], secret_key=keys[1], base_url=url)
    LangfuseDatasetBackend(lf).upload_items(DATASET, make_items(ctx["items"]))
    close_client(lf)
    return proc


def _stop(proc: subprocess.Popen[str]) -> None:
    if proc.stdin is not None:
        proc.stdin.close()
    proc.terminate()
    proc.wait()


def _measure(
    mode: str, concurrency: int, run: int, ctx: dict[str, Any], latency: float
) -> dict[str, Any]:
    run_name = f"peers-{mode}-c{concurrency}-{run}-{latency}"
    public, secret = f"pk-lf-{run_name}", f"sk-lf-{run_name}"  # a fresh pair: a fresh client
    langfuse = _langfuse_server(ctx, (public, secret)) if mode in ("b", "b1", "c") else None
    argv = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--worker",
        mode,
        "--items",
        str(ctx["items"]),
        "--concurrency",
        str(concurrency),
        "--run-name",
        run_name,
        "--openai-url",
        ctx["openai_url"],
        "--langfuse-url",
        ctx["langfuse_url"] or "http://127.0.0.1:9",
        "--public-key",
        public,
        "--secret-key",
        secret,
        *(["--profile", ctx["profile"]] if ctx["profile"] else []),
        "--transport",
        ctx["transport"],
        "--workers",
        str(ctx["workers"]),
        *(["--no-gc-freeze"] if ctx["no_gc_freeze"] else []),
    ]
    env = {**os.environ, "EXTRACTION_EVAL_HOME": ctx["home"], "OPENAI_API_KEY": "bench"}
    env["LANGFUSE_PUBLIC_KEY"], env["LANGFUSE_SECRET_KEY"] = public, secret
    env["LANGFUSE_BASE_URL"] = ctx["langfuse_url"] or "http://127.0.0.1:9"
    pids = {"openai": ctx["openai_pid"], "langfuse": langfuse.pid if langfuse else None}
    servers0 = {name: _proc_cpu(pid) for name, pid in pids.items()}
    try:
        done = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True)
        servers1 = {name: _proc_cpu(pid) for name, pid in pids.items()}
    finally:
        if langfuse is not None:
            _stop(langfuse)
            ctx["langfuse_url"] = None
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("RESULT ")]
    if done.returncode != 0 or not lines:
        raise SystemExit(f"mode {mode} failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
    figures: dict[str, Any] = json.loads(lines[-1][len("RESULT ") :])
    figures["server_cpu"] = {name: servers1[name] - servers0[name] for name in pids}
    figures["load"] = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    return figures


def _proc_cpu(pid: int | None) -> float:
    """CPU seconds used so far by process ``pid`` (Linux /proc; 0 elsewhere or no process)."""
    if pid is None:
        return 0.0
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _loadavg() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "n/a"


def orchestrate(args: argparse.Namespace) -> None:
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    unknown = set(modes) - set(MODES)
    if unknown:
        known = ",".join(MODES)
        raise SystemExit(f"unknown modes: {', '.join(sorted(unknown))} (choose from {known})")
    concurrencies = [int(c) for c in args.concurrency.split(",")]
    n = 400 if args.quick and args.items is None else (args.items or 2000)

    phases = [(args.latency, concurrencies)]
    if args.fast is not None:  # then items/s against a model that answers at once
        phases.append((args.fast, [max(concurrencies)]))
    home = tempfile.mkdtemp(prefix="bench-peers-")
    os.environ["EXTRACTION_EVAL_HOME"] = home
    try:
        from extraction_eval.backends.local import LocalStore

        with LocalStore(sample=False) as store:
            store.upload_items(DATASET, make_items(n))
        print(
            f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC  {platform.platform()}  "
            f"python {platform.python_version()}  cpus={os.cpu_count()}  "
            f"load before={_loadavg()}"
        )
        for latency, cs in phases:
            _phase(args, modes, n, home, latency, cs)
        print(f"load after={_loadavg()}")
    finally:
        shutil.rmtree(home, ignore_errors=True)


def _phase(
    args: argparse.Namespace,
    modes: list[str],
    n: int,
    home: str,
    latency: float,
    concurrencies: list[int],
) -> None:
    """Every mode at every concurrency against one model server answering after ``latency``."""
    openai_proc, openai_url = spawn_server(
        [
            sys.executable,
            "-c",
            _OPENAI_SERVER,
            str(latency),
            json.dumps(ANSWER, separators=(",", ":")),
        ]
    )
    try:
        ctx = {
            "items": n,
            "home": home,
            "openai_url": openai_url,
            "openai_pid": openai_proc.pid,
            "langfuse_url": None,  # a fresh server per LangFuse-mode measurement
            "profile": args.profile,
            "transport": args.transport,
            "no_gc_freeze": args.no_gc_freeze,
            "workers": args.workers,
        }
        print(
            f"items={n} latency={latency}s concurrency={','.join(map(str, concurrencies))}"
            f" repeat={args.repeat} our transport={args.transport} (a): --workers"
            f" {args.workers}{' gc freeze OFF' if args.no_gc_freeze else ''};"
            " servers in their own processes, one fresh process per run"
        )
        table: dict[tuple[int, str], list[dict[str, Any]]] = {}
        for run in range(args.repeat):
            for c in concurrencies:
                for mode in modes:
                    figures = _measure(mode, c, run, ctx, latency)
                    table.setdefault((c, mode), []).append(figures)
                    _print_row(mode, c, n, latency, figures)
        _print_ratios(table, concurrencies, modes)
        if latency < 0.01:
            rates = [f"({m}) {n / min(f['wall'] for f in table[(c, m)]):.0f}" for c in
                     concurrencies for m in modes]  # fmt: skip
            print(f"items/s at latency {latency}s, C={max(concurrencies)}: " + ", ".join(rates))
    finally:
        _stop(openai_proc)


def _versus_ideal(wall: float, ideal: float) -> str:
    """``wall`` against the ideal time; with no latency (ideal 0) there is no ratio."""
    return f"{wall / ideal:.2f}x" if ideal > 0 else "-"


def _print_row(mode: str, c: int, n: int, latency: float, f: dict[str, Any]) -> None:
    ideal = n * latency / c
    extra = ""
    if "finalize" in f:
        extra = f"  of which finalize (bootstrap CIs, summary) {f['finalize']:.2f}s"
        if f.get("setup") is not None:
            extra += f", setup (store, items, prompt, estimate) {f['setup']:.2f}s"
        if f.get("workers_cpu"):
            extra += f"; cpu of the worker processes {f['workers_cpu']:.2f}s"
    if "wall_no_readback" in f:
        extra = (
            f"  without read-back {f['wall_no_readback']:.2f}s"
            f" ({_versus_ideal(f['wall_no_readback'], ideal)}); read-back {f['readback']:.2f}s"
            f" (cpu {f.get('readback_cpu', 0.0):.2f}s)"
        )
        if f.get("setup") is not None:
            extra += f", setup (to the first item) {f['setup']:.2f}s"
        if f.get("workers_cpu"):
            extra += f"; cpu of the worker processes {f['workers_cpu']:.2f}s"
    errors = "" if f.get("errors") is None else f" errors={f['errors']}"
    if f.get("cache_hits"):
        errors += f" cache_hits={f['cache_hits']} (not a fair run)"
    servers = f["server_cpu"]
    print(
        f"C={c:<3} ({mode}) {MODES[mode]:<28} wall {f['wall']:6.2f}s"
        f"  ideal {ideal:5.2f}s  {_versus_ideal(f['wall'], ideal):>5} of ideal"
        f"  {n / f['wall']:6.0f} items/s"
        f"  cpu {f['cpu']:5.2f}s = {f['cpu'] / n * 1000:.1f} ms/item"
        f" (servers: openai {servers['openai']:.1f}s, langfuse {servers['langfuse']:.1f}s)"
        f"  load {f['load']:.1f}  results={f['results']}{errors}{extra}"
    )
    others = {k: v for k, v in f.get("threads", {}).items() if k != "main" and v >= 0.05}
    if others:  # CPU of the SDKs' background threads (whole process life, not just the run)
        print("        threads cpu: " + ", ".join(f"{k} {v:.1f}s" for k, v in others.items()))


def _print_ratios(
    table: dict[tuple[int, str], list[dict[str, Any]]], concurrencies: list[int], modes: list[str]
) -> None:
    pairs = [
        ("a", "e", "<= 1.10; e is the fair floor"),
        ("a1", "e", None),
        ("a", "d", None),
        ("b", "e", "1.35 at 16, 1.6 at 64"),
        ("b1", "e", None),
        ("b", "b1", None),
        ("b", "c", None),
        ("a", "c", "< 1"),
        ("z", "e", None),
    ]
    for c in concurrencies:
        parts = []
        for x, y, target in pairs:
            if x in modes and y in modes:
                xs = [f["wall"] for f in table[(c, x)]]
                ys = [f["wall"] for f in table[(c, y)]]
                ratio = min(xs) / min(ys)
                parts.append(f"{x}/{y}={ratio:.2f}" + (f" (target {target})" if target else ""))
        for b in ("b", "b1"):
            if b in modes and "e" in modes:
                bs = [f["wall_no_readback"] for f in table[(c, b)]]
                es = [f["wall"] for f in table[(c, "e")]]
                parts.append(f"{b}/e without read-back={min(bs) / min(es):.2f}")
        for x in ("b", "b1", "c"):  # LangFuse's own run_experiment is the CPU target
            if x in modes:
                cpu = min(f["cpu"] for f in table[(c, x)]) / ctx_items(table[(c, x)])
                parts.append(f"cpu/item {x} {cpu * 1000:.1f} ms")
        if parts:
            best = " (best of each)" if any(len(v) > 1 for v in table.values()) else ""
            print(f"C={c}: " + "  ".join(parts) + best)
    if any(len(v) > 1 for v in table.values()):
        _print_medians(table, concurrencies, modes)


MEDIAN_PAIRS = (
    *(("a", "e"), ("a1", "e"), ("a", "d"), ("b", "e"), ("b1", "e"), ("b", "b1")),
    *(("a", "c"), ("z", "e")),
)


def ctx_items(figures: list[dict[str, Any]]) -> int:
    """The items a mode ran (for CPU per item), at least 1."""
    return max(1, max(int(f.get("results") or 0) for f in figures))


def _print_medians(
    table: dict[tuple[int, str], list[dict[str, Any]]], concurrencies: list[int], modes: list[str]
) -> None:
    """Medians over the repeats: on a shared machine the figure to quote (best-of flatters)."""
    from statistics import median

    for c in concurrencies:
        wall = {m: median(f["wall"] for f in table[(c, m)]) for m in modes}
        cpu = {m: median(f["cpu"] for f in table[(c, m)]) for m in modes}
        cells = [f"{m} {wall[m]:.2f}s cpu {cpu[m]:.2f}s" for m in modes]
        if "b" in modes:
            no_rb = median(f["wall_no_readback"] for f in table[(c, "b")])
            cells.append(f"b without read-back {no_rb:.2f}s")
        ratios = [
            f"{x}/{y}={wall[x] / wall[y]:.2f}" for x, y in MEDIAN_PAIRS if x in modes and y in modes
        ]
        ratios += [
            f"cpu {x}/{y}={cpu[x] / cpu[y]:.2f}"
            for x, y in (("a", "e"), ("a", "d"), ("b", "c"), ("b1", "c"))
            if x in modes and y in modes
        ]
        if "b" in modes and "e" in modes:
            ratios.append(f"b/e without read-back={no_rb / wall['e']:.2f}")
        print(f"C={c} medians: " + ", ".join(cells) + "; " + "  ".join(ratios))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--items", type=int, default=None, help="default 2000 (400 with --quick)")
    parser.add_argument("--quick", action="store_true", help="400 items: a fast check")
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument(
        "--fast",
        type=float,
        default=None,
        metavar="LATENCY",
        help="then every mode again against a model answering after LATENCY s (e.g. 0.001)"
        " at the highest concurrency: items/s",
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=os.cpu_count() or 1,
        help="(a)'s and (b)'s --workers (default: cores)",
    )
    parser.add_argument("--concurrency", default="16,64", help="comma-separated")
    parser.add_argument("--modes", default="d,e,a,a1,c,b,b1", help="run order, comma-separated")
    parser.add_argument("--repeat", type=int, default=1, help="measure every mode this often")
    parser.add_argument(
        "--profile", metavar="DIR", help="cProfile every run into DIR/<run>.pstats (slower)"
    )
    parser.add_argument(
        "--transport",
        choices=["aiohttp", "httpx"],
        default="aiohttp",
        help="our modes' OpenAI client transport (http_transport; default aiohttp)",
    )
    parser.add_argument(
        "--no-gc-freeze",
        action="store_true",
        help="our modes without freezing the objects alive before the run (to show its effect)",
    )
    # worker-only arguments (the orchestrator passes them)
    parser.add_argument("--worker", choices=sorted(MODES), help=argparse.SUPPRESS)
    parser.add_argument("--run-name", help=argparse.SUPPRESS)
    parser.add_argument("--openai-url", help=argparse.SUPPRESS)
    parser.add_argument("--langfuse-url", help=argparse.SUPPRESS)
    parser.add_argument("--public-key", help=argparse.SUPPRESS)
    parser.add_argument("--secret-key", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        args.concurrency = int(args.concurrency)
        worker(args)
    else:
        orchestrate(args)


if __name__ == "__main__":
    main()
