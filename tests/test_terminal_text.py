"""Text from files is text (issue 37): an error that quotes a file's name or contents reaches the terminal and the JSON
line without control characters (ESC, so no CSI or OSC 8 hyperlink sequence; C1 bytes; carriage returns) or
bidirectional overrides, and with rich markup shown, not obeyed. The printer is cli/output.py's, in one place."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpuwise.cli.main import app
from gpuwise.cli.output import emit_error, printable

runner = CliRunner()
HOSTILE = "a\x1b]8;;https://evil.example/\x1b\\b\x1b[2J\u202ec\x9b31m\r\n[/]d[link=x]"
CONTROLS = ("\x1b", "\u202e", "\x9b", "\r")


def test_printable_drops_controls_and_overrides_and_keeps_the_words() -> None:
    assert printable(HOSTILE) == "a]8;;https://evil.example/\\b[2Jc31m [/]d[link=x]"
    assert printable("tab\there\u2066isolated\u2069 \ud800 \u00e9t\u00e9 \u4e2d\u6587") == "tab hereisolated été 中文"


@pytest.mark.parametrize("as_json", [False, True])
def test_a_file_name_with_escapes_is_printed_as_text(tmp_path: Path, as_json: bool) -> None:
    missing = tmp_path / f"{HOSTILE.replace('/', '_')}.json"  # a config path that does not exist
    done = runner.invoke(app, ["estimate", str(missing), "--gpu", "t4", *(["--json"] if as_json else [])])
    assert done.exit_code == 2 and done.stderr.startswith("error: ") and done.stderr.count("\n") == 1, done.output
    assert not any(c in done.stdout + done.stderr for c in CONTROLS), repr(done.stdout + done.stderr)
    assert "d[link=x].json: no such file" in done.stderr  # markup in a name is shown as typed, not obeyed
    if as_json:
        error = json.loads(done.stdout)["error"]
        assert "d[link=x].json: no such file" in error and not any(c in error for c in CONTROLS)


def test_the_printer_cleans_what_any_error_says(capsys: pytest.CaptureFixture[str]) -> None:
    # an OSError's file name, or a message that quotes a file without repr(): the printer is the last door
    emit_error(f"{HOSTILE}: No such file or directory", 2, as_json=True)
    out, err = capsys.readouterr()
    assert json.loads(out) == {"error": f"{printable(HOSTILE)}: No such file or directory", "exit_code": 2}
    assert err == f"error: {printable(HOSTILE)}: No such file or directory\n"
