"""Signals and full streams leave nothing behind (issue 37), checked on the real `gpuwise` process.

A standard output that cannot take the answer -- Linux's /dev/full (every write is ENOSPC) or a pipe whose reader has
gone (EPIPE) -- ends the command with its own code and one line, never a traceback; SIGINT and SIGTERM during a
file write remove the temporary file and exit 130 or 143. The signal is sent by the process to itself from inside
the write (os.fsync is wrapped), so it lands while the temporary file exists, every time.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"
NO_SPACE = "error: could not write the answer to standard output: No space left on device"
ANSWERS = [["estimate", "llama-3.1-8b", "--gpu", "h100-sxm-80gb", "--json"], ["recommend", "llama-3.1-8b", "--json"],
           ["tco", "h100-sxm-80gb", "--json"], ["estimate", "llama-3.1-8b", "--gpu", "h100-sxm-80gb"],
           ["catalog", "list"], ["--help"], ["--version"]]
ERRORS = [["estimate", "llama-3.1-8b", "--gpu", "nosuch", "--json"], ["recommend", "nosuch-model", "--json"],
          ["tco", "nosuch", "--json"], ["estimate", "llama-3.1-8b", "--gpu", "h100-sxm-80gb", "--bogus", "--json"]]
needs_dev_full = pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs Linux's /dev/full")


def gpuwise(args: list[str], *, stdout: int, prelude: str = "", cwd: Path | None = None
            ) -> subprocess.CompletedProcess[str]:
    """The `gpuwise` entry point in a fresh interpreter (``prelude`` runs first), stdout on ``stdout``."""
    script = f"{prelude}\nfrom gpuwise.cli.main import run\nrun()\n"
    return subprocess.run([sys.executable, "-c", script, *args], stdout=stdout, stderr=subprocess.PIPE, text=True,
                          timeout=120, cwd=cwd, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})


def assert_one_clean_line(stderr: str) -> None:
    assert "Traceback" not in stderr and "Exception ignored" not in stderr, stderr
    assert stderr.count("\n") == 1 and stderr.startswith("error: "), stderr


@needs_dev_full
@pytest.mark.parametrize("args", ANSWERS, ids=" ".join)
def test_an_answer_that_cannot_be_written_is_exit_1_and_one_line(args: list[str]) -> None:
    with open("/dev/full", "w") as full:
        done = gpuwise(args, stdout=full.fileno())
    assert_one_clean_line(done.stderr)
    assert done.returncode == 1 and done.stderr.strip() == NO_SPACE


@needs_dev_full
@pytest.mark.parametrize("args", ERRORS, ids=" ".join)
def test_an_error_that_cannot_be_written_to_stdout_keeps_its_code_and_its_line(args: list[str]) -> None:
    with open("/dev/full", "w") as full:
        done = gpuwise(args, stdout=full.fileno())
    assert_one_clean_line(done.stderr)
    assert done.returncode == 2 and NO_SPACE not in done.stderr


@pytest.mark.parametrize("args", [ANSWERS[0], ANSWERS[4], ERRORS[0]], ids=" ".join)
def test_a_closed_pipe_ends_quietly_with_the_commands_code(args: list[str]) -> None:
    read, write = os.pipe()
    os.close(read)  # the reader has gone before the first byte: every write is EPIPE
    try:
        done = gpuwise(args, stdout=write)
    finally:
        os.close(write)
    assert "Traceback" not in done.stderr and "Exception ignored" not in done.stderr, done.stderr
    if args is ERRORS[0]:
        assert done.returncode == 2 and done.stderr.startswith("error: unknown GPU 'nosuch'"), done.stderr
    else:  # the reader chose to stop: exit 1, as click does, and nothing on stderr
        assert done.returncode == 1 and done.stderr == ""


def _without_stdout() -> None:
    os.close(1)


@pytest.mark.parametrize(("args", "code", "line"), [
    (ANSWERS[2], 1, "error: could not write the answer to standard output: Bad file descriptor"),
    (ERRORS[2], 2, "error: unknown GPU 'nosuch'; run `gpuwise catalog list` to see the known ids")],
    ids=["answer", "error"])
def test_a_process_started_without_stdout_says_so_once(args: list[str], code: int, line: str) -> None:
    # `gpuwise ... >&-`: Python starts with sys.stdout None, and every write was an AttributeError, twice
    done = subprocess.run([sys.executable, "-c", "from gpuwise.cli.main import run\nrun()\n", *args],
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, timeout=120,
                          preexec_fn=_without_stdout, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert_one_clean_line(done.stderr)
    assert done.returncode == code and done.stderr.strip() == line


def signal_in_fsync(signum: int) -> str:
    """Python run before the CLI: the first fsync (inside safe_io's atomic write, the temporary file open and
    written) sends the process ``signum``."""
    return ("import os, signal\n"
            "_fsync = os.fsync\n"
            "def _interrupted(fd):\n"
            f"    os.kill(os.getpid(), {int(signum)})\n"
            "    _fsync(fd)\n"
            "os.fsync = _interrupted\n")


def test_sigterm_while_the_report_is_written_leaves_the_old_report_and_no_temporary(tmp_path: Path) -> None:
    report = tmp_path / "report.md"
    report.write_text("the old report")
    done = gpuwise(["recommend", "llama-3.1-8b", "--task", "train", "--top", "1", "--report", str(report)],
                   stdout=subprocess.DEVNULL, prelude=signal_in_fsync(signal.SIGTERM))
    assert done.returncode == 143, done.stderr
    assert "Traceback" not in done.stderr
    assert [p.name for p in tmp_path.iterdir()] == ["report.md"] and report.read_text() == "the old report"


def test_sigint_while_catalog_sync_writes_exits_130_and_leaves_nothing(tmp_path: Path) -> None:
    target = tmp_path / "offers.json"
    done = gpuwise(["catalog", "sync", "--from", str(FIXTURES / "skypilot-v8" / "lambda" / "vms.csv"), "--to",
                    str(target)], stdout=subprocess.DEVNULL, prelude=signal_in_fsync(signal.SIGINT))
    assert done.returncode == 130 and done.stderr == "stopped\n", done.stderr
    assert list(tmp_path.iterdir()) == []


def test_without_a_signal_the_same_writes_succeed(tmp_path: Path) -> None:
    # the two tests above fail for the signal, not for the command: unsignalled, both files are written
    report, target = tmp_path / "report.md", tmp_path / "offers.json"
    written = gpuwise(["recommend", "llama-3.1-8b", "--task", "train", "--top", "1", "--report", str(report)],
                      stdout=subprocess.DEVNULL)
    synced = gpuwise(["catalog", "sync", "--from", str(FIXTURES / "skypilot-v8" / "lambda" / "vms.csv"), "--to",
                      str(target)], stdout=subprocess.DEVNULL)
    assert written.returncode == 0 and synced.returncode == 0, written.stderr + synced.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["offers.json", "report.md"]
