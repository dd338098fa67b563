# Type stubs for the feedline._C extension (python/bindings/).
import builtins
from typing import Any, ClassVar, Dict, List, Optional, Tuple, Union, overload

# Every error the extension raises is an Error; most are also the builtin
# their cause maps to (python/bindings/errors.h).
class Error(RuntimeError): ...
class ResourceError(Error): ...
class CancelledError(Error): ...
class InvalidArgumentError(Error, ValueError): ...
class OutOfRangeError(Error, ValueError): ...
class NotFoundError(Error, FileNotFoundError): ...
class TimeoutError(Error, builtins.TimeoutError): ...

class DType:
    uint8: DType
    float32: DType
    float16: DType
    bfloat16: DType

class Layout:
    CHW: Layout
    HWC: Layout

class Interpolation:
    BILINEAR: Interpolation
    BICUBIC: Interpolation

class CropMode:
    RANDOM_RESIZED: CropMode
    RESIZE_CENTER: CropMode
    RESIZE_FULL: CropMode
    RANDOM_CROP: CropMode
    RESIZE_RANDOM: CropMode
    CENTER_CROP: CropMode

class PaddingMode:
    CONSTANT: PaddingMode
    EDGE: PaddingMode
    REFLECT: PaddingMode
    SYMMETRIC: PaddingMode

class ErrorPolicy:
    RAISE: ErrorPolicy
    SKIP: ErrorPolicy

class PixelOpKind:
    COLOR_JITTER: PixelOpKind
    GRAYSCALE: PixelOpKind
    INVERT: PixelOpKind
    POSTERIZE: PixelOpKind
    SOLARIZE: PixelOpKind
    AUTOCONTRAST: PixelOpKind
    EQUALIZE: PixelOpKind
    ADJUST_SHARPNESS: PixelOpKind
    GAUSSIAN_BLUR: PixelOpKind
    ROTATION: PixelOpKind
    AFFINE: PixelOpKind
    TRIVIAL_AUGMENT_WIDE: PixelOpKind
    RAND_AUGMENT: PixelOpKind
    AUTO_AUGMENT: PixelOpKind
    AUG_MIX: PixelOpKind
    VERTICAL_FLIP: PixelOpKind

class WarpInterpolation:
    NEAREST: WarpInterpolation
    BILINEAR: WarpInterpolation

class AffineTranslate:
    PIXELS: AffineTranslate
    ROUND_FRACTION: AffineTranslate
    RAND_AUGMENT: AffineTranslate
    AUG_MIX: AffineTranslate

class PixelOp:
    """A colour or pixel op as written (random parameters still to draw)."""
    kind: PixelOpKind
    p: float
    has_brightness: bool
    has_contrast: bool
    has_saturation: bool
    has_hue: bool
    brightness: List[float]
    contrast: List[float]
    saturation: List[float]
    hue: List[float]
    bits: int
    threshold: float
    factor: float
    kernel_width: int
    kernel_height: int
    sigma: List[float]
    degrees: List[float]
    has_translate: bool
    has_scale: bool
    has_shear: bool
    has_shear_y: bool
    translate: List[float]
    scale_range: List[float]
    shear: List[float]
    interpolation: WarpInterpolation
    has_fill: bool
    fill: List[float]
    num_ops: int
    magnitude: int
    num_magnitude_bins: int
    severity: int
    mixture_width: int
    chain_depth: int
    alpha: float
    all_ops: bool
    def __init__(self) -> None: ...

class PixelStepKind:
    BRIGHTNESS: PixelStepKind
    CONTRAST: PixelStepKind
    SATURATION: PixelStepKind
    HUE: PixelStepKind
    GRAYSCALE: PixelStepKind
    INVERT: PixelStepKind
    POSTERIZE: PixelStepKind
    SOLARIZE: PixelStepKind
    AUTOCONTRAST: PixelStepKind
    EQUALIZE: PixelStepKind
    SHARPNESS: PixelStepKind
    GAUSSIAN_BLUR: PixelStepKind
    AFFINE: PixelStepKind
    MIX_BEGIN: PixelStepKind
    MIX_CHAIN: PixelStepKind
    MIX_END: PixelStepKind
    VERTICAL_FLIP: PixelStepKind

class PixelStep:
    """One concrete step with its drawn parameter."""
    kind: PixelStepKind
    value: float
    kernel_width: int
    kernel_height: int
    angle: float
    scale: float
    shear_x: float
    shear_y: float
    translate_x: float
    translate_y: float
    translate_unit: AffineTranslate
    magnitude_bins: int
    rotate: bool
    corner_center: bool
    interpolation: WarpInterpolation
    has_fill: bool
    fill: List[float]
    @overload
    def __init__(self) -> None: ...
    @overload
    def __init__(self, kind: PixelStepKind, value: float = ..., kernel_width: int = ...,
                 kernel_height: int = ...) -> None: ...

def check_pixel_ops(ops: List[PixelOp]) -> None: ...
def draw_pixel_steps(ops: List[PixelOp], seed: int, epoch: int = ..., sample_id: int = ...) -> List[PixelStep]: ...
def apply_pixel_steps(steps: List[PixelStep], image: Any) -> Any:
    """A new (3, H, W) uint8 numpy array: `image` through the steps."""
def apply_pixel_ops(ops: List[PixelOp], image: Any, seed: int) -> Any:
    """`ops` with parameters drawn from `seed`, on one (3, H, W) uint8 image."""

def pad_crop(image: Any, transform: ImageTransform, seed: int) -> Tuple[Any, int, int]:
    """RandomCrop or CenterCrop (a RANDOM_CROP or CENTER_CROP transform) on one (3, H, W) uint8 image:
    (image, top, left)."""

def resized_crop(image: Any, box: Tuple[int, int, int, int], out_height: int, out_width: int,
                 interpolation: Interpolation) -> Any:
    """torchvision's resized_crop with Pillow's antialiased filters on one (3, H, W) uint8 image."""

def choose_crop(transform: ImageTransform, width: int, height: int, seed: int) -> Tuple[int, int, int, int]:
    """The (x, y, w, h) box ChooseCrop draws for a width x height image from `seed`."""

class EraseOp:
    """RandomErasing as written (its rectangle still to draw)."""
    p: float
    scale: List[float]
    ratio: List[float]
    random_value: bool
    value: List[float]
    def __init__(self) -> None: ...

class EraseRect:
    """A drawn erase: rows [top, top + height), columns [left, left + width)."""
    @property
    def erase(self) -> bool: ...
    @property
    def top(self) -> int: ...
    @property
    def left(self) -> int: ...
    @property
    def height(self) -> int: ...
    @property
    def width(self) -> int: ...

def check_erase_ops(ops: List[EraseOp], dtype: DType, channels: int = ...) -> None: ...
def draw_erase(op: EraseOp, height: int, width: int, seed: int, epoch: int = ...,
               sample_id: int = ...) -> EraseRect: ...
def apply_erase(op: EraseOp, images: Any, dtype: DType, layout: Layout, seed: int) -> EraseRect:
    """Erases a writable array of images in place, one draw for all of them."""
def erase_rect(images: Any, dtype: DType, layout: Layout, top: int, left: int, height: int, width: int,
               values: List[float], per_pixel: bool = ...) -> None: ...

class BatchMixKind:
    MIXUP: BatchMixKind
    CUTMIX: BatchMixKind

class BatchMixOp:
    """MixUp or CutMix as written; weight is RandomChoice's p."""
    kind: BatchMixKind
    alpha: float
    num_classes: int
    weight: float
    def __init__(self) -> None: ...

class BatchMixParams:
    """What one batch drew: the op, lam, the label lam and the CutMix box."""
    kind: BatchMixKind
    lam: float
    label_lam: float
    x1: int
    y1: int
    x2: int
    y2: int
    def __init__(self) -> None: ...

def check_batch_mix(choices: List[BatchMixOp]) -> None: ...
def draw_batch_mix(choices: List[BatchMixOp], height: int, width: int, seed: int, epoch: int = ...,
                   stream_id: int = ...) -> BatchMixParams: ...
def sample_beta(a: float, b: float, seed: int, count: int) -> Any:
    """`count` Beta(a, b) draws (float64 numpy array) from one stream."""
def apply_batch_mix(params: BatchMixParams, images: Any, dtype: DType, layout: Layout, labels: Any,
                    num_classes: int, sample_ids: List[int] = ...) -> Any:
    """Mixes a writable (N, C, H, W) or (N, H, W, C) array in place; the (N, num_classes) soft labels."""

class ImageTransform:
    crop: CropMode
    height: int
    width: int
    scale: List[float]
    ratio: List[float]
    resize_size: int
    padding: List[int]
    pad_if_needed: bool
    padding_mode: PaddingMode
    pad_fill: List[int]
    hflip_prob: float
    interpolation: Interpolation
    pixel_ops: List[PixelOp]
    erase_ops: List[EraseOp]
    normalize: bool
    mean: List[float]
    std: List[float]
    dtype: DType
    layout: Layout
    dct_scaling: bool
    def __init__(self) -> None: ...

def imagenet_train(size: int = ...) -> ImageTransform: ...
def imagenet_eval(resize: int = ..., size: int = ...) -> ImageTransform: ...
def transform_image(data: bytes, transform: ImageTransform, crop: Optional[Tuple[int, int, int, int]] = ...,
                    flip: bool = ..., seed: int = ...) -> bytes:
    """One image through the fused path: the output tensor's raw bytes."""

class S3Options:
    class Addressing:
        AUTO: "S3Options.Addressing"
        PATH: "S3Options.Addressing"
        VIRTUAL: "S3Options.Addressing"
    endpoint_url: str
    region: str
    profile: str
    addressing: "S3Options.Addressing"
    anonymous: bool
    part_bytes: int
    max_concurrency: int
    def __init__(self) -> None: ...

class HttpOptions:
    connect_timeout_ms: int
    stall_timeout_ms: int
    request_timeout_ms: int
    max_attempts: int
    initial_backoff_ms: int
    s3: S3Options
    def __init__(self) -> None: ...

def read_file(name: str, offset: int = ..., n: int = ..., http: HttpOptions = ...) -> bytes: ...
def object_store_stats() -> Dict[str, Any]:
    """requests, retries, gets, bytes, first_byte_s, busy_s (summed), in_flight, peak_in_flight."""
def list_objects(url: str, http: HttpOptions = ...) -> List[Tuple[str, int, str]]: ...
def upload_directory(dir: str, url: str, last: str = ..., http: HttpOptions = ...) -> None: ...
def read_object(url: str, max_bytes: int = ..., http: HttpOptions = ...) -> bytes: ...

class SourceOptions:
    http: HttpOptions
    read_ahead_bytes: int
    read_ahead_threads: int
    skip_hidden_dirs: bool
    parts: bool
    list_file_columns: List[str]
    columns: List[str]
    shuffle_window: int
    columnar_threads: int
    columnar: Optional[ColumnarDataset]
    def __init__(self) -> None: ...

# Parquet / Arrow IPC sources (docs/columnar.md).
class ColumnarOptions:
    columns: List[str]
    parts: bool
    http: HttpOptions
    cache_bytes: int
    read_ahead_threads: int
    shuffle_window: int
    def __init__(self) -> None: ...

class ColumnarDataset:
    @property
    def files(self) -> List[str]: ...
    @property
    def num_rows(self) -> int: ...
    @property
    def schema(self) -> List[Tuple[str, str, str]]: ...
    @property
    def columns(self) -> List[Tuple[str, str, str]]: ...
    @property
    def group_sizes(self) -> List[int]: ...
    @property
    def shuffle_window(self) -> int: ...
    @property
    def classes(self) -> List[str]: ...

class OpenedFile:
    def __init__(self, name: str, http: HttpOptions = ...) -> None: ...
    @property
    def size(self) -> int: ...
    @property
    def name(self) -> str: ...
    def pread(self, offset: int, n: int) -> bytes: ...

def columnar_supported() -> bool: ...
def columnar_library() -> str: ...
def columnar_files(path: str, http: HttpOptions = ...) -> List[str]: ...
def columnar_open(files: List[str], options: ColumnarOptions = ...) -> ColumnarDataset: ...
def columnar_from_stream(capsule: Any, name: str, options: ColumnarOptions = ...) -> ColumnarDataset: ...

class LoaderOptions:
    batch_size: int
    shuffle: bool
    seed: int
    rank: int
    world_size: int
    drop_last: bool
    start_epoch: int
    num_threads: int  # 0: auto (the tuner)
    cpu_budget: int  # 0: auto, every core; the loop keeps, while it steps, the cores it is measured using
    ring_depth: int  # 0: auto
    auto_ring_start: int
    max_bytes: int  # the RAM budget; 0: a quarter of available memory
    tune_interval_ms: int
    error_policy: ErrorPolicy
    max_errors: int
    stall_timeout_ms: int
    elastic: bool
    def __init__(self) -> None: ...

class FieldRequest:  # one named, typed field (pipeline_builder.h)
    class Kind:
        IMAGE: ClassVar["FieldRequest.Kind"]
        LABEL: ClassVar["FieldRequest.Kind"]
        TEXT: ClassVar["FieldRequest.Kind"]
        JSON: ClassVar["FieldRequest.Kind"]
        NDARRAY: ClassVar["FieldRequest.Kind"]
        BYTES: ClassVar["FieldRequest.Kind"]
        OP: ClassVar["FieldRequest.Kind"]
    name: str
    kind: "FieldRequest.Kind"
    parts: List[str]
    transform: ImageTransform
    op: str  # OP: the registered op's name (op_registry.h)
    params: Dict[str, str]  # OP: its parameters
    def __init__(self) -> None: ...

def kind_of_part(part: str) -> FieldRequest.Kind: ...
def default_parts(kind: FieldRequest.Kind) -> List[str]: ...
def registered_ops() -> List[str]: ...
def load_ops(path: str) -> List[str]: ...

class SampleSpec:  # what each sample becomes (pipeline_builder.h)
    class Output:
        IMAGE: ClassVar["SampleSpec.Output"]
        RAW_BYTES: ClassVar["SampleSpec.Output"]
        FIELDS: ClassVar["SampleSpec.Output"]
    output: "SampleSpec.Output"
    transform: ImageTransform
    max_record_bytes: int
    fields: List[FieldRequest]
    def __init__(self) -> None: ...

class Pipeline:  # a recipe's output (sample.h), handed to Loader
    @property
    def num_samples(self) -> int: ...
    @property
    def fields(self) -> List[str]: ...

class SuffixStep:  # a native member after a Compose's Python middle (python_op.h)
    class Kind:
        TO_TENSOR: ClassVar["SuffixStep.Kind"]
        PIL_TO_TENSOR: ClassVar["SuffixStep.Kind"]
        TO_IMAGE: ClassVar["SuffixStep.Kind"]
        TO_DTYPE: ClassVar["SuffixStep.Kind"]
        NORMALIZE: ClassVar["SuffixStep.Kind"]
    kind: "SuffixStep.Kind"
    dtype: DType
    scale: bool
    mean: List[float]
    std: List[float]
    def __init__(self) -> None: ...

class ImageChain:  # a Compose split into native prefix, Python middle, native suffix (docs/python_ops.md)
    class Prefix:
        DECODE: ClassVar["ImageChain.Prefix"]
        TRANSFORM: ClassVar["ImageChain.Prefix"]
        RESIZE_SHORT: ClassVar["ImageChain.Prefix"]
    prefix: "ImageChain.Prefix"
    transform: ImageTransform
    name: str  # "python:MyOp+RandomRotation"
    members: str
    suffix: List[SuffixStep]
    run: Any  # callable(pixels, seed) -> (array, is_pil, dtype name)
    def __init__(self) -> None: ...

class WorkerPool:  # python_workers=N: the C++ end of the worker processes (python_workers.h)
    def __init__(self, workers: List[Tuple[int, int, int, int]]) -> None: ...  # (pid, socket, in memfd, out memfd)
    def shutdown(self) -> None: ...
    def close(self) -> None: ...
    @property
    def broken(self) -> Optional[str]: ...
    @property
    def pids(self) -> List[int]: ...

class PyRecipe:  # the Python ops of a loader: a chain for the image, a map= function
    chain: Optional[ImageChain]
    field_chains: List[Tuple[str, ImageChain]]  # fields=: (image field, its chain)
    map: Any  # callable(values, seed) -> [(value, dtype name)], or None
    workers: Optional[WorkerPool]  # python_workers=N: the chain's middle runs there
    def __init__(self) -> None: ...

class Loader:  # one engine loader over any source OpenSource knows, or a recipe's pipeline
    @overload
    def __init__(self, root: Union[str, bytes], spec: SampleSpec, options: LoaderOptions,
                 source: SourceOptions = ..., recipe: PyRecipe = ...) -> None: ...
    @overload
    def __init__(self, pipeline: Pipeline, options: LoaderOptions) -> None: ...
    def next(self, poll_s: float = ..., cu_seqlens: bool = ...) -> Optional[Dict[str, Any]]: ...
    def next_arrays(self, poll_s: float = ...) -> Optional[Tuple[Tuple[str, ...], Tuple[Any, ...], int]]: ...
    def state(self) -> bytes: ...
    def restore(self, state: bytes) -> None: ...
    def set_epoch(self, epoch: int) -> None: ...
    def metrics(self) -> Dict[str, Any]: ...
    def cancel(self) -> None: ...
    def close(self) -> None: ...
    @property
    def closed(self) -> bool: ...
    @property
    def num_batches(self) -> int: ...
    @property
    def epoch(self) -> int: ...
    @property
    def position(self) -> Tuple[int, int]: ...
    @property
    def num_threads(self) -> int: ...
    @property
    def classes(self) -> List[str]: ...  # os.fsdecode()'d names
    @property
    def source_kind(self) -> str: ...  # "shards", "tar", "folder", "list", "columnar" as opened; "" for a pipeline
    @property
    def samples(self) -> Optional[List[Tuple[str, int]]]: ...  # None unless an image folder

def available_cores() -> int:
    """Cores this process may use (affinity mask and cgroup quota), as the engine counts them."""

def source_kind(path: bytes | str, http: HttpOptions = ...) -> str:
    """'shards', 'tar', 'folder', 'list' or 'columnar': the engine's one rule for a path."""

class TokenCorpus:  # token sources concatenated in order (tokens.h)
    @property
    def num_tokens(self) -> int: ...
    @property
    # path, kind ("flat"/"megatron"/"token_shards"), dtype, num_tokens, offset
    def sources(self) -> List[Dict[str, Any]]: ...
    @property
    def fingerprint(self) -> int: ...
    def count_documents(self) -> int: ...

def open_token_corpus(paths: List[bytes], dtype: str, eos_token: Optional[int] = ...,
                      http: HttpOptions = ...) -> TokenCorpus: ...
class TokenShardWriter:  # writes feedline token shards, crash-safe (tokens.h, docs/token_shards.md)
    def __init__(self, dir: bytes | str, vocab_size: int, shard_tokens: int, tokenizer_json: str,
                 source_json: str) -> None: ...
    def add_documents(self, ids: Any, lengths: Any) -> None: ...  # int64 1-d arrays: flat ids, per-document lengths
    def finish(self) -> None: ...
    @property
    def num_tokens(self) -> int: ...
    @property
    def num_documents(self) -> int: ...
    @property
    def dtype(self) -> str: ...

def token_window_pipeline(corpus: TokenCorpus, seq_len: int, position_ids: bool = ..., document_ids: bool = ...,
                          document_starts: bool = ..., mask_cross_document_labels: bool = ...) -> Pipeline: ...
def token_cu_seqlens(document_starts: Any, num_documents: Any) -> Any: ...  # int32 ndarrays in, out
class BestFitPlan:  # documents into sequences, best fit (tokens.h)
    @property
    def num_sequences(self) -> int: ...
    @property
    def num_pieces(self) -> int: ...
    @property
    def num_documents(self) -> int: ...
    @property
    def num_tokens(self) -> int: ...
    @property
    def padding_tokens(self) -> int: ...
    @property
    def padding_share(self) -> float: ...
    def sequence(self, i: int) -> List[Tuple[int, int, bool]]: ...  # (begin, length, ends_document)
def best_fit_plan(corpus: TokenCorpus, seq_len: int) -> BestFitPlan: ...
def token_best_fit_pipeline(corpus: TokenCorpus, plan: BestFitPlan, pad_token: int, position_ids: bool = ...,
                            document_ids: bool = ..., document_starts: bool = ...) -> Pipeline: ...
def token_mixture_pipeline(sources: List[Pipeline], weights: List[float], window: int, num_samples: int,
                           shuffle: bool, seed: int, start: int = ..., counts: List[int] = ...) -> Pipeline: ...
def token_mixture_counts(source_samples: List[int], weights: List[float], window: int, num_samples: int,
                         start: int, counts: List[int], position: int) -> List[int]: ...
def num_token_windows(num_tokens: int, seq_len: int) -> int: ...
def token_window_tail_tokens(num_tokens: int, seq_len: int) -> int: ...
