#!/usr/bin/env python3
"""Megatron-LM indexed datasets (`.bin` + `.idx`) written by Megatron's own code, for
streamload's conformance test (tests/megatron.rs): tests/data/megatron/*.{bin,idx} and
expected.json (each file's dtype, its sequences' tokens, and which sequences make each document).

The writer is `megatron/core/datasets/indexed_dataset.py` of megatron-core 0.16.1, run as it
is: `IndexedDatasetBuilder` (add_item, add_document, end_document, add_index, finalize). That
module imports torch only to take tensors in `add_item`; torch is stubbed here with an object
that has `.numpy()` (and `torch.utils.data.Dataset`, the reader's base class, with
`object`), and the object-storage helpers it imports are stubbed as absent, so the
script needs only numpy:

    pip download megatron-core==0.16.1 --no-deps -d /tmp/mc
    python scripts/make_megatron.py /tmp/mc/megatron_core-0.16.1-*.whl tests/data/megatron
"""

import importlib.util
import json
import sys
import types
import zipfile

import numpy as np


class Tensor:
    """What the builder takes: anything with `.numpy()` (`add_item`) or `__array__`."""

    def __init__(self, values):
        self.values = np.asarray(values)

    def numpy(self):
        return self.values

    def __array__(self, dtype=None, copy=None):
        return self.values if dtype is None else self.values.astype(dtype)


def load_indexed_dataset(wheel):
    stubs = {
        "torch": {
            "Tensor": Tensor,
            "utils": types.SimpleNamespace(data=types.SimpleNamespace(Dataset=object)),
        },
        "megatron": {},
        "megatron.core": {},
        "megatron.core.datasets": {},
        "megatron.core.datasets.object_storage_utils": {
            name: None for name in [
                "S3Config", "ObjectStorageConfig", "cache_index_file", "dataset_exists",
                "get_index_cache_path", "get_object_storage_access", "parse_s3_path"]
        } | {"is_object_storage_path": lambda path: False},
        "megatron.core.msc_utils": {
            "MultiStorageClientFeature": type("F", (), {"is_enabled": staticmethod(lambda: False)})
        },
        "megatron.core.utils": {"log_single_rank": lambda *args, **kwargs: None},
    }
    for name, attrs in stubs.items():
        module = types.ModuleType(name)
        module.__dict__.update(attrs)
        sys.modules[name] = module
    source = zipfile.ZipFile(wheel).read("megatron/core/datasets/indexed_dataset.py")
    spec = importlib.util.spec_from_loader("indexed_dataset", loader=None)
    module = importlib.util.module_from_spec(spec)
    exec(compile(source, "megatron/core/datasets/indexed_dataset.py", "exec"), module.__dict__)
    return module


def main():
    wheel, out = sys.argv[1], sys.argv[2]
    idx = load_indexed_dataset(wheel)
    rng = np.random.default_rng(32)
    expected = {}

    def write(name, dtype, build, multimodal=False):
        prefix = f"{out}/{name}"
        builder = idx.IndexedDatasetBuilder(prefix + ".bin", dtype=dtype, multimodal=multimodal)
        build(builder)
        builder.finalize(prefix + ".idx")
        # What Megatron's own reader reads back.
        ds = idx.IndexedDataset(prefix, multimodal=multimodal, mmap=True)
        expected[name] = {
            "dtype": np.dtype(dtype).name,
            "sequences": [ds[i].tolist() if not multimodal else ds[i][0].tolist()
                          for i in range(len(ds))],
            "document_indices": ds.document_indices.tolist(),
            # (`ds.sequence_modes` asserts on the array itself, which fails: read the index.)
            "modes": ds.index.sequence_modes.tolist() if multimodal else None,
        }

    # The usual shape (preprocess_data.py without sentence splitting): one sequence per
    # document, uint16 tokens (a vocabulary under 65,500), an empty document among them.
    def documents(b):
        for n in [5, 0, 17, 1, 300, 64]:
            b.add_item(Tensor(rng.integers(0, 65_000, n)))
            b.end_document()
    write("docs_uint16", np.uint16, documents)

    # int32 tokens (a large vocabulary), documents of several sequences (sentence splitting).
    def sentences(b):
        for sizes in [[3, 4], [10], [1, 1, 1], [200, 2]]:
            tokens = rng.integers(0, 200_000, sum(sizes))
            b.add_document(Tensor(tokens), sizes)
    write("sentences_int32", np.int32, sentences)

    # A multimodal dataset: a mode per sequence.
    def modal(b):
        for n, mode in [(4, 0), (6, 1), (2, 0)]:
            b.add_item(Tensor(rng.integers(0, 1000, n)), mode=mode)
            b.end_document()
    write("multimodal_uint16", np.uint16, modal, multimodal=True)

    # Two datasets merged with add_index (how Megatron concatenates shards).
    def merged(b):
        b.add_index(f"{out}/docs_uint16")
        b.add_item(Tensor([1, 2, 3]))
        b.end_document()
    write("merged_uint16", np.uint16, merged)

    with open(f"{out}/expected.json", "w") as f:
        json.dump(expected, f, indent=None, separators=(",", ":"))
        f.write("\n")


if __name__ == "__main__":
    main()
