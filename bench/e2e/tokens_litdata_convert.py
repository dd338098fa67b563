"""litdata's conversion of a flat uint16 token file (tokens_bench.py's
set-up), run in the litdata venv as a script: litdata's worker processes
are spawned and import `piece` from this file. The file is cut into
`pieces` runs of consecutive tokens, each one item in TokensLoader's
format; prints the wall time as JSON.

    python tokens_litdata_convert.py FLAT OUT_DIR PIECES BLOCK_SIZE
"""
import functools
import json
import sys
import time

import numpy as np
from litdata import TokensLoader, optimize


def piece(path, n, i):
    tokens = np.memmap(path, dtype=np.uint16, mode="r")
    step = -(-len(tokens) // n)
    yield np.array(tokens[i * step:(i + 1) * step])


if __name__ == "__main__":
    path, out, pieces, block = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    t = time.perf_counter()
    # ~64 MB chunk files, litgpt's usual size (block_size * 16384 uint16 tokens).
    optimize(fn=functools.partial(piece, path, pieces), inputs=list(range(pieces)), output_dir=out,
             chunk_size=block * 16384, item_loader=TokensLoader(), num_workers=2, reorder_files=False,
             verbose=False)
    print(json.dumps({"seconds": time.perf_counter() - t}))
