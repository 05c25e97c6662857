"""A sentence-embedding model run with ONNX Runtime: found on disk, never fetched at search time.

A model is a directory holding an ONNX sentence-embedding model (``model.onnx`` or
``onnx/model.onnx``, else its one ``.onnx`` file) and its Hugging Face ``tokenizer.json``; a
sentence-transformers pooling config (``1_Pooling/config.json``) and
``sentence_bert_config.json`` are read when present, else mean pooling over at most
``DEFAULT_MAX_TOKENS`` tokens, as all-MiniLM-L6-v2 expects. Or it is a model name on the Hugging
Face hub, which ``embed`` downloads once through ``huggingface_hub`` into its cache; searches and
later writes only look in that cache.

Vectors are L2-normalised float32: the cosine of two is their dot product.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from platformdirs import user_cache_dir

from discovery.errors import EmbeddingUnavailable

INSTALL_HINT = "install the semantic extra: pip install -e '.[semantic]' in a clone of tool-index"

DEFAULT_MAX_TOKENS = 256
"""all-MiniLM-L6-v2's sequence length (its ``sentence_bert_config.json``)."""

HUB_FILES = (
    "onnx/model.onnx",
    "tokenizer.json",
    "1_Pooling/config.json",
    "sentence_bert_config.json",
)
"""What a hub model is downloaded with: the ONNX export and how to tokenize and pool."""

QUERY_VECTORS_CACHED = 1024
"""Query vectors kept per model: a session's searches and an ``explain`` repeat queries."""

POOLING_MODES = {
    "pooling_mode_mean_tokens": "mean",
    "pooling_mode_cls_token": "cls",
    "pooling_mode_max_tokens": "max",
}


@dataclass(frozen=True, slots=True)
class ModelFiles:
    """Where a model's parts are, and how its token vectors become one."""

    onnx: Path
    tokenizer: Path
    pooling: str
    max_tokens: int

    def digest(self) -> str:
        """A sha256 of the model and tokenizer files: vectors made by other files are not mixed
        with these."""
        digest = hashlib.sha256()
        for path in (self.onnx, self.tokenizer):
            with path.open("rb") as file:
                while chunk := file.read(1 << 20):
                    digest.update(chunk)
        digest.update(f"{self.pooling}/{self.max_tokens}".encode())
        return digest.hexdigest()


def _where(text: Path | str | BaseException) -> str:
    """A path or a library's message for an error message, on one line whatever its characters."""
    return json.dumps(str(text), ensure_ascii=False)[1:-1]


def model_files(directory: Path) -> ModelFiles:
    """The parts of the model in ``directory``; ``EmbeddingUnavailable`` names what is missing."""
    if not directory.is_dir():
        raise EmbeddingUnavailable(f"{_where(directory)}: not a directory")
    usual = [path for path in (directory / "model.onnx", directory / "onnx" / "model.onnx") if path.is_file()]
    candidates = usual[:1] or sorted(directory.glob("*.onnx")) or sorted((directory / "onnx").glob("*.onnx"))
    if len(candidates) != 1:
        found = ", ".join(_where(path.name) for path in candidates) if candidates else "none"
        raise EmbeddingUnavailable(
            f"{_where(directory)}: expected one ONNX model (model.onnx, or one .onnx file), found {found}"
        )
    tokenizer = directory / "tokenizer.json"
    if not tokenizer.is_file():
        raise EmbeddingUnavailable(
            f"{_where(directory)}: no tokenizer.json (the model's Hugging Face tokenizer)"
        )
    return ModelFiles(candidates[0], tokenizer, _pooling(directory), _max_tokens(directory))


def _json_of(path: Path) -> dict[str, Any]:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise EmbeddingUnavailable(f"{_where(path)}: not readable JSON ({_where(error)})") from None
    if not isinstance(value, dict):
        raise EmbeddingUnavailable(f"{_where(path)}: expected a JSON object")
    return value


def _pooling(directory: Path) -> str:
    config = directory / "1_Pooling" / "config.json"
    if not config.is_file():
        return "mean"
    settings = _json_of(config)
    chosen = [mode for key, mode in POOLING_MODES.items() if settings.get(key)]
    if len(chosen) != 1:
        raise EmbeddingUnavailable(f"{_where(config)}: one pooling mode of mean, cls or max expected")
    return chosen[0]


def _max_tokens(directory: Path) -> int:
    config = directory / "sentence_bert_config.json"
    if not config.is_file():
        return DEFAULT_MAX_TOKENS
    value = _json_of(config).get("max_seq_length", DEFAULT_MAX_TOKENS)
    if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= 8192:
        raise EmbeddingUnavailable(f"{_where(config)}: max_seq_length must be a whole number from 1 to 8192")
    return value


def resolve(spec: str, *, download: bool) -> Path:
    """The directory of the model ``spec`` names: a directory as given, or a hub model's files in
    the local cache, downloaded first when ``download``."""
    path = Path(spec).expanduser()
    if path.is_dir() or spec.startswith((".", "/", "~")) or path.exists():
        return path.resolve()
    repo = spec if "/" in spec else f"sentence-transformers/{spec}"
    try:
        from huggingface_hub import snapshot_download
    except ImportError:
        raise EmbeddingUnavailable(f"model {spec!r} is not a directory; {INSTALL_HINT}") from None
    try:
        found = snapshot_download(repo, allow_patterns=list(HUB_FILES), local_files_only=not download)
    except Exception as error:  # noqa: BLE001 - the hub client raises many kinds, each "not at hand"
        how = (
            "could not be downloaded"
            if download
            else "is not in the local model cache (run `tool-index embed`)"
        )
        raise EmbeddingUnavailable(f"model {repo!r} {how}: {_where(error)}") from None
    return Path(found)


class EmbeddingModel:
    """One loaded model; thread-safe (ONNX Runtime sessions may be run from several threads,
    the query cache is locked)."""

    def __init__(self, spec: str, files: ModelFiles) -> None:
        try:
            import onnxruntime
            from tokenizers import Tokenizer
        except ImportError:
            raise EmbeddingUnavailable(
                f"the semantic signal needs onnxruntime and tokenizers; {INSTALL_HINT}"
            ) from None
        self.spec = spec
        self.files = files
        try:
            tokenizer = Tokenizer.from_file(str(files.tokenizer))
            options = onnxruntime.SessionOptions()
            options.log_severity_level = 3
            # A memory arena keeps the peak of the largest batch ever run (hundreds of MB after
            # embedding a catalog), for good; without it a serving process stays at its size.
            options.enable_cpu_mem_arena = False
            # Threads that spin after a run burn a core a search at a time in a server process.
            options.add_session_config_entry("session.intra_op.allow_spinning", "0")
            # One thread a run: a query is too small to share out, and ``embed`` runs texts on
            # every core at once instead (one text per run, one run per core).
            options.intra_op_num_threads = 1
            session = onnxruntime.InferenceSession(
                str(runnable_onnx(files)), options, providers=["CPUExecutionProvider"]
            )
        except Exception as error:  # noqa: BLE001 - tokenizers raises bare Exception for a bad file
            raise EmbeddingUnavailable(
                f"{_where(files.onnx.parent)}: cannot load the model ({_where(error)})"
            ) from None
        tokenizer.enable_truncation(files.max_tokens)
        # A tokenizer.json may pad every text to a fixed length; one text per run needs none.
        tokenizer.no_padding()
        self._tokenizer = tokenizer
        self._session = session
        self._inputs = {node.name for node in session.get_inputs()}
        if not {"input_ids", "attention_mask"} <= self._inputs:
            raise EmbeddingUnavailable(
                f"{_where(files.onnx)}: not a sentence-embedding model "
                "(needs input_ids and attention_mask inputs)"
            )
        outputs = [node.name for node in session.get_outputs()]
        self._output = "sentence_embedding" if "sentence_embedding" in outputs else outputs[0]
        self._queries: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()
        self.dimensions = int(self._one("dimensions").size)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """One L2-normalised float32 row per text.

        Each text runs alone: a quantized model scales its activations by what a run holds, so in
        a batch one text's vector would depend on the others (and on their padding); alone, a
        text has one vector wherever it is embedded, and no padding is computed."""
        if not texts:
            return np.zeros((0, self.dimensions), dtype=np.float32)
        if len(texts) == 1:
            return self._one(texts[0])[None, :]
        # ONNX Runtime releases the GIL while it runs, so threads keep every core busy.
        with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
            return np.stack(list(pool.map(self._one, texts)))

    def embed_query(self, text: str) -> np.ndarray:
        with self._lock:
            found = self._queries.get(text)
            if found is not None:
                self._queries.move_to_end(text)
                return found
        vector: np.ndarray = self.embed([text])[0]
        vector.setflags(write=False)
        with self._lock:
            self._queries[text] = vector
            if len(self._queries) > QUERY_VECTORS_CACHED:
                self._queries.popitem(last=False)
        return vector

    def forget_queries(self) -> None:
        """Drop the cached query vectors (a benchmark timing what a new query costs)."""
        with self._lock:
            self._queries.clear()

    def _one(self, text: str) -> np.ndarray:
        encoded = self._tokenizer.encode(text)
        ids = np.array([encoded.ids], dtype=np.int64)
        mask = np.array([encoded.attention_mask], dtype=np.int64)
        feed = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._inputs:
            feed["token_type_ids"] = np.zeros_like(ids)
        (output,) = self._session.run([self._output], feed)
        output = np.asarray(output, dtype=np.float32)
        pooled = output if output.ndim == 2 else _pooled(output, mask, self.files.pooling)
        vector: np.ndarray = pooled[0] / max(float(np.linalg.norm(pooled[0])), 1e-12)
        return vector.astype(np.float32)


def _pooled(tokens: np.ndarray, mask: np.ndarray, mode: str) -> np.ndarray:
    """One vector per text from its tokens' (``tokens``: batch × tokens × dimensions)."""
    if mode == "cls":
        first: np.ndarray = tokens[:, 0]
        return first
    weights = mask[..., None].astype(np.float32)
    if mode == "max":
        largest: np.ndarray = np.where(weights > 0, tokens, -np.inf).max(axis=1)
        return largest
    summed: np.ndarray = (tokens * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
    return summed


CACHE_VAR = "TOOL_INDEX_CACHE"
"""Where quantized models are kept, instead of the user cache directory."""

CACHE_LAYOUT = "weights apart"
"""How a cached model is laid out, part of its key: a model cached another way is made anew."""


def runnable_onnx(files: ModelFiles) -> Path:
    """The ONNX file to run: the model with its matrix weights quantized to int8 for ONNX Runtime's
    integer kernels (``onnxruntime.quantization.quantize_dynamic``), made once per machine and model
    file in the user cache, its weights in a file beside it (``.onnx.data``); the model as given
    when that cannot be done (no ``onnx`` package, a read-only cache, or a graph the quantizer
    refuses).

    A model exported with int8 weights that are cast to float at run time, or a float32 model,
    is held in memory as float32 (ONNX Runtime folds the casts); quantized for the integer kernels
    it stays int8, smaller and faster, ranking as the original does (bench/results.md has the
    figures)."""
    stat = files.onnx.stat()
    made_from = f"{files.onnx.resolve()}|{stat.st_size}|{stat.st_mtime_ns}|{CACHE_LAYOUT}"
    key = hashlib.sha256(made_from.encode()).hexdigest()
    directory = Path(os.environ.get(CACHE_VAR) or user_cache_dir("tool-index", appauthor=False)) / "models"
    quantized = directory / f"{key[:32]}.onnx"
    weights = directory / f"{quantized.name}.data"
    if quantized.is_file() and weights.is_file():
        return quantized
    try:
        import onnx
        import onnxruntime
        from onnxruntime.quantization import QuantType, quantize_dynamic
    except ImportError:
        return files.onnx
    try:
        directory.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=directory) as scratch:
            folded = Path(scratch) / "folded.onnx"
            options = onnxruntime.SessionOptions()
            options.log_severity_level = 3
            # Basic optimizations only: standard ONNX operators, which the quantizer reads.
            options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_BASIC
            options.optimized_model_filepath = str(folded)
            onnxruntime.InferenceSession(str(files.onnx), options, providers=["CPUExecutionProvider"])
            made = Path(scratch) / "quantized.onnx"
            with _quiet_logging():
                quantize_dynamic(folded, made, weight_type=QuantType.QInt8)
            # The weights in a file of their own, which ONNX Runtime maps rather than copies:
            # the word-embedding table is then file pages, read in as queries use them, shared
            # with other processes running the model and given back under memory pressure, and
            # the matrices repacked for the integer kernels are unmapped once repacked. Weights
            # inside the model file are copied out of it, and the allocator keeps the memory of
            # those copies. The weights file is in place before the model that names it.
            apart = Path(scratch) / quantized.name
            onnx.save_model(
                onnx.load(str(made)), str(apart), save_as_external_data=True, location=weights.name
            )
            # onnx creates the weights file readable by its owner only; it is as readable as the
            # model that names it.
            (Path(scratch) / weights.name).chmod(apart.stat().st_mode & 0o777)
            os.replace(Path(scratch) / weights.name, weights)
            os.replace(apart, quantized)
    except Exception:  # noqa: BLE001 - any failure leaves the model as given, which runs too
        return files.onnx
    return quantized


@contextmanager
def _quiet_logging() -> Iterator[None]:
    """The quantizer logs advice on the root logger; a host's logs are not the place for it."""
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)
    try:
        yield
    finally:
        root.setLevel(level)


_loaded: dict[str, EmbeddingModel] = {}
_loading = threading.Lock()


def load(spec: str, *, download: bool = False) -> EmbeddingModel:
    """The model ``spec`` names, loaded once per process (a directory however it is spelled)."""
    key = stored_spec(spec)
    with _loading:
        if key not in _loaded:
            _loaded[key] = EmbeddingModel(key, model_files(resolve(spec, download=download)))
        return _loaded[key]


def stored_spec(spec: str) -> str:
    """How a model is recorded in an index: a directory by its absolute path, a hub model by name."""
    path = Path(spec).expanduser()
    return str(path.resolve()) if path.is_dir() else spec
