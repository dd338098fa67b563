"""Parquet, Arrow IPC and in-memory Arrow tables as loader sources
(docs/columnar.md): what a field's kind is from its column's Arrow type, and
a pyarrow Table or a datasets.Dataset handed to the engine through the Arrow
C stream interface (zero-copy: the engine holds the table's own buffers)."""
from __future__ import annotations

import os
from typing import Any, Dict, List, Optional, Tuple

from . import _C

# ColumnKindName -> the field kind a column of it feeds.
KIND_OF_COLUMN = {"encoded": "image", "text": "text", "integer": "label", "array": "ndarray"}


def table_of(obj: Any) -> Optional[Tuple[str, Any]]:
    """(name, an object with __arrow_c_stream__) for an in-memory source: a
    datasets.Dataset (its Arrow table, memory-mapped from the cache or in
    memory; an indices mapping from select/shuffle/filter is applied with
    Table.take, which copies the rows it keeps), a pyarrow Table or
    RecordBatchReader, or any object exporting an Arrow C stream. None for
    a path."""
    if isinstance(obj, (str, bytes, os.PathLike)):
        return None
    cls = type(obj)
    if cls.__module__.split(".")[0] == "datasets":
        if cls.__name__ in ("DatasetDict", "IterableDatasetDict"):
            raise TypeError(f"pass one split of the {cls.__name__} (e.g. ds['train']), not the dict of "
                            f"splits {sorted(obj.keys())}")
        if cls.__name__ == "IterableDataset":
            raise TypeError("a streaming datasets.IterableDataset has no table to read in place: pass the Parquet "
                            "files it streams (their paths or s3:// URLs), or a Dataset")
        table = obj.data.table
        indices = getattr(obj, "_indices", None)
        if indices is not None:
            table = table.take(indices.column(0))
        return f"datasets:{getattr(obj, '_fingerprint', 'dataset')}", table
    if hasattr(obj, "__arrow_c_stream__"):
        return f"arrow:{cls.__name__}", obj
    raise TypeError(f"source must be a path, a datasets.Dataset or an Arrow table (with __arrow_c_stream__), "
                    f"got {cls.__name__}")


def from_table(name: str, table: Any, options: Any) -> Any:
    """The engine's ColumnarDataset over `table`'s record batches."""
    return _C.columnar_from_stream(table.__arrow_c_stream__(), name, options)


def column_kinds(path: str, http: Any, table: Optional[Any]) -> Dict[str, Tuple[str, str, str]]:
    """{lower-cased column name: (name, Arrow type, field kind or "")} of a
    columnar source (its first file's schema)."""
    opts = _C.ColumnarOptions()
    opts.parts = True
    opts.http = http
    if table is not None:
        ds = from_table(path, table, opts)
    else:
        files: List[str] = _C.columnar_files(path, http)
        ds = _C.columnar_open(files[:1], opts)
    return {name.lower(): (name, typ, KIND_OF_COLUMN.get(kind, "")) for name, typ, kind in ds.schema}
