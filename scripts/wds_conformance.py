#!/usr/bin/env python3
"""WebDataset conformance data for streamload (tests/webdataset.rs).

Writes small tar shards under tests/data/wds/ with the `webdataset` package's TarWriter (ustar,
PAX and GNU formats, plain and .tar.gz) and with GNU tar's command line (GNU and PAX formats,
long names, directories, a symbolic link, `__...__` metadata members, names the key rule
skips, a .tgz), then reads every shard there with `webdataset.WebDataset` and writes what it
read, sample for sample, to tests/data/wds/expected.json. Shards written by streamload's
ShardWriter (rust-*.tar, made by `WDS_REGENERATE=1 cargo test --test webdataset`) are read the
same way: the test checks that the Python package reads them as the samples written.

Run with the venv that has webdataset: /work/venv/bin/python scripts/wds_conformance.py
"""

import base64
import json
import os
import subprocess
import sys
import tempfile

import webdataset as wds

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "wds")
MTIME = 1_700_000_000


def samples(prefix, n):
    """Deterministic samples with a class, a caption, JSON and binary data."""
    out = []
    for i in range(n):
        out.append(
            {
                "__key__": f"{prefix}{i:04d}",
                "cls": str(i % 7).encode(),
                "txt": f"caption {i}: h\u00e9llo".encode(),
                "json": json.dumps({"i": i, "tags": ["a", "b"][: i % 3]}).encode(),
                "bin": bytes((i * 31 + j) % 256 for j in range(i * 97 % 700)),
            }
        )
    return out


def python_shards():
    # ustar (TarWriter's default): a long key goes into the ustar prefix.
    with wds.TarWriter(os.path.join(OUT, "py-ustar.tar"), encoder=False, mtime=MTIME) as w:
        for s in samples("train/", 5):
            w.write(s)
        long_dir = "d" * 90 + "/" + "e" * 40
        w.write({"__key__": f"{long_dir}/long", "txt": b"prefix split", "cls": b"9"})
        w.write({"__key__": "empty", "txt": b"", "cls": b" 12\n"})
    # PAX: long and non-ASCII names in PAX headers.
    with wds.TarWriter(
        os.path.join(OUT, "py-pax.tar"), encoder=False, mtime=MTIME, format="PAX_FORMAT"
    ) as w:
        for s in samples("p/", 4):
            w.write(s)
        w.write({"__key__": "k" * 150, "txt": b"long key", "seg.png": b"\x89PNG..."})
        w.write({"__key__": "caf\u00e9/\u00fcber", "txt": "unicode".encode()})
    # GNU: long names as ././@LongLink members.
    with wds.TarWriter(
        os.path.join(OUT, "py-gnu.tar"), encoder=False, mtime=MTIME, format="GNU_FORMAT"
    ) as w:
        for s in samples("g/", 3):
            w.write(s)
        w.write({"__key__": "x" * 120 + "/y" * 20, "txt": b"gnu long name"})
    # Compressed.
    with wds.TarWriter(os.path.join(OUT, "py-gz.tar.gz"), encoder=False, mtime=MTIME) as w:
        for s in samples("z", 6):
            w.write(s)


def gnu_tar_shards():
    with tempfile.TemporaryDirectory() as tmp:
        files = {
            "README": b"no extension: skipped",
            "__meta__/info.json": b"{}",
            "__key__": b"metadata member",
            "s/000.jpg": b"\xff\xd8 not really a jpeg",
            "s/000.cls": b"1",
            "s/000.Seg.PNG": b"upper-case extension",
            "s/001.txt": b"one",
            "s/001.json": b'{"a": 1}',
            "s/.hidden": b"no key before the dot: key is s/",
            "s/.other": b"same key s/",
            "w.x/y/.z": b"key w.x/y/",
            "v.x/.y": b"skipped (no key)",
            "n" * 80 + "/" + "m" * 60 + ".txt": b"a name over 100 bytes",
            "n" * 80 + "/" + "m" * 60 + ".cls": b"4",
            "last.a.b.c": b"multi-dot extension",
        }
        order = list(files)
        for name, data in files.items():
            path = os.path.join(tmp, name)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb") as f:
                f.write(data)
        os.symlink("000.cls", os.path.join(tmp, "s", "002.cls"))
        # A directory and a symbolic link among the members: both skipped.
        order.insert(3, "s")
        order.insert(10, "s/002.cls")
        listing = os.path.join(tmp, ".list")
        with open(listing, "w") as f:
            f.write("\n".join(order) + "\n")
        common = ["--owner=0", "--group=0", f"--mtime=@{MTIME}", "--no-recursion", "-C", tmp]
        for fmt, name, extra in [
            ("gnu", "gnu.tar", []),
            ("pax", "gnu-pax.tar", ["--pax-option=delete=atime,delete=ctime"]),
            ("gnu", "gnu.tgz", ["-z"]),
        ]:
            subprocess.run(
                ["tar", f"--format={fmt}", *extra, "-cf", os.path.join(OUT, name), *common,
                 "-T", listing],
                check=True,
            )


def read_all():
    expected = {}
    for name in sorted(os.listdir(OUT)):
        if not (name.endswith(".tar") or name.endswith(".tar.gz") or name.endswith(".tgz")):
            continue
        url = os.path.join(OUT, name)
        read = []
        for sample in wds.WebDataset(url, shardshuffle=False):
            fields = {
                k: base64.b64encode(v).decode()
                for k, v in sample.items()
                if not k.startswith("__")
            }
            read.append({"__key__": sample["__key__"], "fields": fields})
        expected[name] = read
    with open(os.path.join(OUT, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1, sort_keys=True)
        f.write("\n")
    return expected


def main():
    os.makedirs(OUT, exist_ok=True)
    if "--read-only" not in sys.argv:
        python_shards()
        gnu_tar_shards()
    expected = read_all()
    for name, read in expected.items():
        print(f"{name}: {len(read)} samples")


if __name__ == "__main__":
    main()
