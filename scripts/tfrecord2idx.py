#!/usr/bin/env python3
# Ground truth for streamload's TFRecord indexes: the index files NVIDIA DALI's own tool
# (tools/tfrecord2idx in github.com/NVIDIA/DALI) writes for the TensorFlow-written files of
# tests/data/tensorflow, under tests/data/tfrecord_index/<file>.idx. `create_index` is DALI's
# tool, line for line (one "offset size" line per record, size the whole framed record: 8-byte
# length, 4-byte length CRC, payload, 4-byte data CRC); it checks no CRC, and a file cut inside
# a record gets an entry for the partial record (DALI's behaviour, kept on purpose: the tests
# read such an index and expect an error naming the record).
#   python3 scripts/tfrecord2idx.py              (no dependency beyond the standard library)
#   python3 scripts/tfrecord2idx.py IN.tfrecord OUT.idx   (DALI's command line)
import os
import struct
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data"))
FILES = [
    "plain.tfrecord",
    "examples.tfrecord",
    "sequence_examples.tfrecord",
    "empty.tfrecord",
    "trailing_garbage.tfrecord",
    "truncated_header.tfrecord",
    "truncated.tfrecord",
    "corrupt_data_crc.tfrecord",
]


def create_index(tfrecord_path, index_path):
    # DALI's tools/tfrecord2idx, unchanged but for being a function.
    f = open(tfrecord_path, 'rb')
    idx = open(index_path, 'w')

    while True:
        current = f.tell()
        try:
            # length
            byte_len = f.read(8)
            if len(byte_len) == 0:
                break
            # crc
            f.read(4)
            proto_len = struct.unpack('q', byte_len)[0]
            # proto
            f.read(proto_len)
            # crc
            f.read(4)
            idx.write(str(current) + ' ' + str(f.tell() - current) + '\n')
        except Exception:
            print("Not a valid TFRecord file")
            break

    f.close()
    idx.close()


def main():
    if len(sys.argv) == 3:
        create_index(sys.argv[1], sys.argv[2])
        return
    out_dir = os.path.join(ROOT, "tfrecord_index")
    os.makedirs(out_dir, exist_ok=True)
    for name in FILES:
        create_index(os.path.join(ROOT, "tensorflow", name), os.path.join(out_dir, name + ".idx"))
        print("wrote", os.path.join("tests", "data", "tfrecord_index", name + ".idx"))


if __name__ == "__main__":
    main()
