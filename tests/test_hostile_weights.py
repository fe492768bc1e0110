"""--weights on hostile checkpoint headers: every one is refused in one line that names the file (escaped) and the
field, never an internal error or a hang; valid files written by the formats' own libraries are still read, and
their bytes agree with what those libraries report.

Independent truths: the safetensors library (its Rust reader, ``safe_open``) refuses every hostile safetensors file
below that its format forbids; gguf-py's ``GGUFReader`` reads the GGUF files built here by hand, and its tensor sizes
are the expected bytes. The remaining rules are gpuwise's own bounds (dimensions, array items, no tensors) or ggml's
(``gguf_init_from_reader``), each cited in ``workload/weights_gguf.py``."""

from __future__ import annotations

import contextlib
import json
import re
import struct
import threading
from collections.abc import Callable, Iterator, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from gpuwise.cli.main import app
from gpuwise.errors import ConfigError
from gpuwise.workload.weights_file import read_weights
from ranges import send_range

np = pytest.importorskip("numpy")
gguf = pytest.importorskip("gguf")
safetensors = pytest.importorskip("safetensors")
safetensors_numpy = pytest.importorskip("safetensors.numpy")
runner = CliRunner()


def refused(path: Path | str, field: str) -> str:
    """read_weights refuses ``path`` with a ConfigError of one line naming the file and matching ``field``."""
    with pytest.raises(ConfigError) as info:
        read_weights(str(path))
    message = str(info.value)
    assert "\n" not in message and repr(str(path)) in message, message
    assert re.search(field, message), message
    return message


# ---- safetensors ------------------------------------------------------------------------------------------------
def safetensors_file(path: Path, header: dict[str, Any] | str, data: bytes = b"") -> Path:
    text = (header if isinstance(header, str) else json.dumps(header)).encode()
    path.write_bytes(struct.pack("<Q", len(text)) + text + data)
    return path


def library_refuses(path: Path) -> bool:
    try:
        with safetensors.safe_open(str(path), framework="numpy") as handle:
            list(handle.keys())
    except safetensors.SafetensorError:
        return True
    return False


def test_files_the_library_writes_are_read_to_the_byte(tmp_path: Path) -> None:
    arrays = {"embed": np.ones((300, 17), dtype=np.float16), "norm": np.ones((17,), dtype=np.float32),
              "mask": np.ones((5, 3), dtype=np.bool_), "ids": np.ones((9,), dtype=np.int64),
              "q": np.ones((4, 4), dtype=np.int8), "x": np.ones((2,), dtype=np.float64)}
    path = tmp_path / "real.safetensors"
    safetensors_numpy.save_file(arrays, str(path), metadata={"format": "np"})
    got = read_weights(str(path))
    with safetensors.safe_open(str(path), framework="numpy") as handle:
        library = {name: handle.get_tensor(name).nbytes for name in handle.keys()}  # noqa: SIM118 (safe_open is no dict)
    assert got.total_bytes == sum(library.values()) == sum(a.nbytes for a in arrays.values())
    assert got.tensors == len(library) == 6
    assert got.by_dtype["F16"] == 300 * 17 * 2 and got.by_dtype["BOOL"] == 15


ENTRY = {"dtype": "F16", "shape": [4], "data_offsets": [0, 8]}
# (case, header, data, what the one line must name, whether the safetensors library refuses the file as well)
SAFETENSORS_CASES: list[tuple[str, dict[str, Any] | str, bytes, str, bool]] = [
    ("deep", '{"w": ' + "[" * 100_000 + "]" * 100_000 + "}", b"", r"header \(an object of tensors.*\): nested more "
     "than 3", True),
    ("entry-not-object", {"w": 5}, b"", r"tensor 'w' is int, not an object", True),
    ("entry-a-list", {"w": [1, 2]}, b"", r"tensor 'w' is list", True),
    ("no-tensors", {"__metadata__": {"a": "b"}}, b"", r"lists no tensors", False),
    ("empty-tensors-only", {"w": {"dtype": "F16", "shape": [0], "data_offsets": [0, 0]}}, b"", r"every tensor .* empty",
     False),
    ("200k-dims", {"w": {"dtype": "F16", "shape": [1] * 200_000, "data_offsets": [0, 2]}}, b"xx",
     r"tensor 'w': shape is 200,000 items; a list of 0 to 64", False),
    ("beyond-the-end", {"w": ENTRY}, b"", r"tensors end at byte .* but the file has", True),
    ("short-by-one", {"w": ENTRY}, b"x" * 7, r"tensors end at byte", True),
    ("trailing-bytes", {"w": ENTRY}, b"x" * 9, r"tensors end at byte", True),
    ("gap", {"w": {**ENTRY, "data_offsets": [8, 16]}}, b"x" * 16, r"tensor 'w' data_offsets start at 8, not at 0",
     True),
    ("overlap", {"a": ENTRY, "b": ENTRY}, b"x" * 16, r"start at 0, not at 8", True),
    ("metadata-not-strings", {"__metadata__": {"a": 1}, "w": ENTRY}, b"x" * 8, r"__metadata__ is not a map of strings",
     True),
    ("float-dim", {"w": {**ENTRY, "shape": [4.0]}}, b"x" * 8, r"tensor 'w': shape \[4.0\] holds something other", True),
    ("negative-dim", {"w": {**ENTRY, "shape": [-4]}}, b"x" * 8, r"tensor 'w': shape \[-4\]", True),
    ("bool-dim", {"w": {**ENTRY, "shape": [True]}}, b"x" * 8, r"tensor 'w': shape \[True\]", True),
    ("huge-dim", {"w": {**ENTRY, "shape": [10**50]}}, b"x" * 8, r"a number of 51 digits", True),
    ("overflowing-shape", {"w": {**ENTRY, "shape": [2**40, 2**40]}}, b"x" * 8, r"tensor 'w': shape .* beyond", True),
    ("unknown-dtype", {"w": {**ENTRY, "dtype": "Q4"}}, b"x" * 8, r"tensor 'w': dtype 'Q4' is not a safetensors", True),
    ("unhashable-dtype", {"w": {**ENTRY, "dtype": ["F16"]}}, b"x" * 8, r"tensor 'w': dtype \['F16'\]", True),
    ("three-offsets", {"w": {**ENTRY, "data_offsets": [0, 8, 9]}}, b"x" * 8, r"data_offsets is 3 items", True),
    ("no-offsets", {"w": {"dtype": "F16", "shape": [4]}}, b"x" * 8, r"data_offsets is NoneType", True),
    ("lying-size", {"w": {**ENTRY, "data_offsets": [0, 6]}}, b"x" * 6, r"spans 6 bytes, not its 4 elements x 16", True),
    ("not-json", "{'w': 1}", b"", r"header \(.*\): not valid JSON", True),
    ("nan", '{"w": NaN}', b"", r"header \(.*\): .*NaN", True),
    ("a-list", "[1, 2]", b"", r"header is list, not an object", True),
]


@pytest.mark.parametrize(("case", "header", "data", "field", "library"), SAFETENSORS_CASES,
                         ids=[c[0] for c in SAFETENSORS_CASES])
def test_hostile_safetensors_headers_are_one_line(tmp_path: Path, case: str, header: dict[str, Any] | str, data: bytes,
                                                   field: str, library: bool) -> None:
    path = safetensors_file(tmp_path / f"{case}.safetensors", header, data)
    refused(path, field)
    assert library_refuses(path) == library  # where the format forbids it, its own reader agrees


def test_the_header_length_bound_is_the_librarys(tmp_path: Path) -> None:
    """100,000,000 bytes (MAX_HEADER_SIZE in tensor.rs): one byte more is refused before anything is read."""
    path = tmp_path / "long.safetensors"
    path.write_bytes(struct.pack("<Q", 100_000_001) + b"{}")
    refused(path, r"claims 100,000,001 bytes, more than the 100,000,000")
    assert library_refuses(path)


def test_a_file_name_with_control_characters_is_escaped(tmp_path: Path) -> None:
    path = safetensors_file(tmp_path / "evil\x1b]8;;x\x07\nname.safetensors", {"w": 5})
    message = refused(path, r"is int")
    assert not any(ord(c) < 32 or ord(c) == 127 for c in message)
    assert "\\x1b" in message and "\\n" in message  # escaped, so the name is still recognisable


def test_the_cli_answers_exit_2_in_one_line(tmp_path: Path) -> None:
    for case, header, data, _field, _library in SAFETENSORS_CASES[:4]:
        path = safetensors_file(tmp_path / f"{case}.safetensors", header, data)
        result = runner.invoke(app, ["estimate", "llama-3.2-1b", "--gpu", "rtx-4090", "--task", "infer",
                                     "--weights", str(path)])
        assert result.exit_code == 2, (case, result.output)
        lines = result.output.strip().splitlines()
        assert len(lines) == 1 and "internal error" not in lines[0] and "Traceback" not in result.output, lines


# ---- GGUF -----------------------------------------------------------------------------------------------------
def text(value: str | bytes) -> bytes:
    raw = value.encode() if isinstance(value, str) else value
    return struct.pack("<Q", len(raw)) + raw


def info(name: str, dims: list[int], kind: int = 0, offset: int = 0) -> bytes:
    """A GGUF tensor info (gguf.md): name, n_dims (u32), dims (i64 each, as ggml reads them), type (i32), offset."""
    return text(name) + struct.pack("<I", len(dims)) + struct.pack(f"<{len(dims)}q", *dims) + struct.pack(
        "<iQ", kind, offset)


def gguf_bytes(*, keys: Sequence[bytes] = (), infos: Sequence[bytes] = (), data: bytes = b"", version: int = 3,
               counts: tuple[int, int] | None = None) -> bytes:
    """A GGUF file by hand: header, key/value pairs, tensor infos, padding to 32 bytes, then ``data``."""
    n_tensors, n_kv = counts if counts is not None else (len(infos), len(keys))
    head = b"GGUF" + struct.pack("<IQQ", version, n_tensors, n_kv) + b"".join(keys) + b"".join(infos)
    return head + bytes(-len(head) % 32) + data


def test_the_hand_built_gguf_is_one_gguf_py_reads_and_the_byte_counts_agree(tmp_path: Path) -> None:
    """The builder above makes valid GGUF: gguf-py's reader opens it; each hostile case below changes one field."""
    keys = [text("general.name") + struct.pack("<I", 8) + text("tiny"),
            text("tokenizer.ggml.scores") + struct.pack("<IIQ", 9, 6, 3) + struct.pack("<3f", 0.1, 0.2, 0.3)]
    q8 = gguf.GGMLQuantizationType.Q8_0
    infos = [info("a", [4, 3], 0, 0), info("b", [64, 2], q8, 64)]  # F32 48 B padded to 64; Q8_0 2 x 2 x 34 B
    path = tmp_path / "hand.gguf"
    path.write_bytes(gguf_bytes(keys=keys, infos=infos, data=bytes(64 + 136)))
    reader = gguf.GGUFReader(str(path))
    got = read_weights(str(path))
    assert got.total_bytes == sum(int(t.n_bytes) for t in reader.tensors) == 48 + 136
    assert got.by_dtype == {"F32": 48, "Q8_0": 136}


def test_files_gguf_py_writes_are_read_to_the_byte(tmp_path: Path) -> None:
    path = tmp_path / "written.gguf"
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_custom_alignment(64)
    writer.add_array("tokenizer.ggml.tokens", [f"tok{i}" for i in range(20_000)])  # a header over 64 KiB
    writer.add_tensor("a", np.zeros((3, 5), dtype=np.float32))
    q8 = gguf.quantize(np.zeros((2, 64), dtype=np.float32), gguf.GGMLQuantizationType.Q8_0)
    writer.add_tensor("b", q8, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
    writer.add_tensor("c", np.zeros((7,), dtype=np.float16))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    reader = gguf.GGUFReader(str(path))
    got = read_weights(str(path))
    assert got.total_bytes == sum(int(t.n_bytes) for t in reader.tensors) == 60 + 136 + 14
    assert got.tensors == len(reader.tensors) == 3


F32_4 = info("w", [4])  # 16 bytes of F32
NAME = text("general.name") + struct.pack("<I", 8) + text("x")
GGUF_CASES: list[tuple[str, dict[str, Any], str]] = [
    ("20M-array", {"keys": [text("tokenizer.ggml.scores") + struct.pack("<IIQ", 9, 6, 20_000_000)]},
     r"key 'tokenizer.ggml.scores' is an array of 20,000,000 items, more than the 4,194,304"),
    ("nested-array", {"keys": [text("k") + struct.pack("<IIQ", 9, 9, 1) + struct.pack("<IQ", 6, 0)],
                      "infos": [F32_4], "data": bytes(16)}, r"key 'k' is an array of type 9"),
    ("huge-string", {"keys": [text("k") + struct.pack("<IQ", 8, 2**62)]}, r"key 'k' holds a string of 4,611"),
    ("huge-key", {"keys": [struct.pack("<Q", 2**40)]}, r"key 0 claims 1,099,511,627,776 bytes, more than 65,535"),
    ("unknown-value-type", {"keys": [text("k") + struct.pack("<I", 13)]}, r"key 'k' has unknown GGUF value type 13"),
    ("repeated-key", {"keys": [NAME, NAME], "infos": [F32_4], "data": bytes(16)}, r"key 1 'general.name' is empty or"),
    ("empty-key", {"keys": [text("") + struct.pack("<IB", 0, 1)]}, r"key 0 '' is empty"),
    ("alignment-3", {"keys": [text("general.alignment") + struct.pack("<II", 4, 3)], "infos": [F32_4],
                     "data": bytes(16)}, r"general.alignment is not a u32 power of two"),
    ("alignment-u64", {"keys": [text("general.alignment") + struct.pack("<IQ", 10, 32)]},
     r"general.alignment is not a u32"),
    ("version-1", {"version": 1}, r"GGUF version 1; ggml reads versions 2 and 3"),
    ("2^40-tensors", {"counts": (2**40, 0)}, r"claims 1,099,511,627,776 tensors"),
    ("no-tensors", {"keys": [NAME]}, r"lists no tensors"),
    ("five-dims", {"infos": [info("w", [1, 1, 1, 1, 4])], "data": bytes(16)}, r"tensor 'w' has 5 dimensions"),
    ("negative-dim", {"infos": [info("w", [-4])]}, r"tensor 'w' has dimensions \[-4\]"),
    ("overflowing-dims", {"infos": [info("w", [2**62, 2**62])]}, r"tensor 'w' has dimensions"),
    ("not-a-block", {"infos": [info("w", [33], gguf.GGMLQuantizationType.Q8_0)], "data": bytes(64)},
     r"the first a multiple of Q8_0's block of 32"),
    ("unknown-type", {"infos": [info("w", [4], 999)]}, r"tensor 'w' has unknown GGML type 999"),
    ("long-name", {"infos": [info("w" * 64, [4])], "data": bytes(16)},
     r"tensor 0's name claims 64 bytes, more than 63"),
    ("repeated-tensor", {"infos": [F32_4, info("w", [4], 0, 32)], "data": bytes(48)}, r"tensor 'w' appears twice"),
    ("beyond-the-end", {"infos": [F32_4], "data": bytes(15)}, r"tensors end at byte .* beyond the file's"),
    ("gap", {"infos": [info("w", [4], 0, 32)], "data": bytes(48)}, r"starts at data offset 32, not at 0"),
    ("unpadded", {"infos": [F32_4, info("v", [4], 0, 16)], "data": bytes(48)},
     r"'v' starts at data offset 16, not at 32"),
    ("cut-in-the-keys", {"counts": (0, 3), "keys": [NAME]}, r"the file ends inside its GGUF header"),
]


@pytest.mark.parametrize(("case", "parts", "field"), GGUF_CASES, ids=[c[0] for c in GGUF_CASES])
def test_hostile_gguf_headers_are_one_line(tmp_path: Path, case: str, parts: dict[str, Any], field: str) -> None:
    path = tmp_path / f"{case}.gguf"
    path.write_bytes(gguf_bytes(**parts))
    refused(path, field)


def test_a_gguf_of_many_short_strings_is_read_whole(tmp_path: Path) -> None:
    """The string-array bound is items, not time: 4,194,304 empty strings (the most one array may hold) are read."""
    count = 2**22
    keys = [text("tokenizer.ggml.tokens") + struct.pack("<IIQ", 9, 8, count) + bytes(8 * count)]
    path = tmp_path / "many.gguf"
    path.write_bytes(gguf_bytes(keys=keys, infos=[F32_4], data=bytes(16)))
    assert read_weights(str(path)).total_bytes == 16


# ---- over HTTP ----------------------------------------------------------------------------------------------------
Reply = Callable[[BaseHTTPRequestHandler, int, int], None]


def ranges_of(data: bytes, *, total: str | None = None) -> Reply:
    """A well-behaved server of ``data``: 206 with the range asked for and the file's size (or ``total`` in its
    place: ``*`` for a server that does not say)."""
    def reply(handler: BaseHTTPRequestHandler, first: int, last: int) -> None:
        send_range(handler, data, first=first, last=last, total=total)

    return reply


@pytest.fixture
def serve() -> Iterator[Callable[[Reply], str]]:
    """Start a local server whose GET answers with ``reply(handler, first, last)`` (the Range asked for)."""
    servers: list[ThreadingHTTPServer] = []

    def start(reply: Reply) -> str:
        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                first, last = (int(x) for x in self.headers["Range"].removeprefix("bytes=").split("-"))
                with contextlib.suppress(OSError):  # the client went away: a stopped read, seen from here
                    reply(self, first, last)

            def log_message(self, *args: object) -> None:
                """Quiet."""

        httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
        servers.append(httpd)
        return f"http://127.0.0.1:{httpd.server_address[1]}/model.safetensors"

    yield start
    for httpd in servers:
        httpd.shutdown()
        httpd.server_close()


def test_a_url_that_drips_is_stopped_at_the_overall_deadline(serve: Callable[[Reply], str]) -> None:
    """One byte a second, each within the 20 s per-read timeout: only the overall deadline (2 s here) stops it."""
    stop = threading.Event()

    def drip(handler: BaseHTTPRequestHandler, first: int, last: int) -> None:
        handler.send_response(206)
        handler.send_header("Content-Range", f"bytes {first}-{last}/1000000")
        handler.send_header("Content-Length", str(last - first + 1))
        handler.end_headers()
        for _ in range(last - first + 1):
            handler.wfile.write(b"{")
            if stop.wait(1.0):
                return

    url = serve(drip)
    outcome: list[BaseException | object] = []

    def call() -> None:
        try:
            outcome.append(read_weights(url, deadline_s=2.0))
        except ConfigError as exc:
            outcome.append(exc)

    worker = threading.Thread(target=call, daemon=True)
    worker.start()
    worker.join(60)  # generous: without an overall deadline this read would take hours
    stop.set()
    assert not worker.is_alive(), "the read of a dripping URL did not stop"
    assert isinstance(outcome[0], ConfigError), outcome
    message = str(outcome[0])
    assert "deadline" in message and "\n" not in message and "127.0.0.1" in message


def test_a_server_that_ignores_ranges_or_hides_the_size_is_refused(tmp_path: Path,
                                                                   serve: Callable[[Reply], str]) -> None:
    data = safetensors_file(tmp_path / "ok.safetensors", {"w": ENTRY}, bytes(8)).read_bytes()

    def whole(handler: BaseHTTPRequestHandler, first: int, last: int) -> None:
        handler.send_response(200)
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)

    refused(serve(whole), r"does not answer range requests \(HTTP 200 for bytes from 8\)")
    refused(serve(ranges_of(data, total="*")), r"does not give the file's size")


def test_a_url_whose_tensors_lie_beyond_its_end_is_refused(tmp_path: Path, serve: Callable[[Reply], str]) -> None:
    data = safetensors_file(tmp_path / "cut.safetensors", {"w": ENTRY}, bytes(4)).read_bytes()
    refused(serve(ranges_of(data)), rf"tensors end at byte {len(data) + 4:,}, but the file has {len(data):,} bytes")


def test_a_gguf_header_over_many_range_requests_is_read_to_the_byte(tmp_path: Path,
                                                                      serve: Callable[[Reply], str]) -> None:
    """A header of about 200 KiB, fetched in growing ranges (64 KiB first): the same bytes as gguf-py reports."""
    path = tmp_path / "tokens.gguf"
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_array("tokenizer.ggml.tokens", [f"token-{i}" for i in range(15_000)])
    writer.add_tensor("w", np.zeros((8, 32), dtype=np.float16))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    assert path.stat().st_size > 2**17
    got = read_weights(serve(ranges_of(path.read_bytes())))
    assert got.total_bytes == sum(int(t.n_bytes) for t in gguf.GGUFReader(str(path)).tensors) == 8 * 32 * 2
