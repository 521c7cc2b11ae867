"""Text to ids, run in Rust without the GIL.

:class:`Vocabulary` is ``tf.lookup.StaticVocabularyTable``: tokens (a list, or a file or URL
of one token per line) to ids in order, unknown tokens to one of ``num_oov_buckets`` ids
after them (TensorFlow's hash, so the same ids), id 0 kept for padding with
``reserve_padding_id=True``. Its :meth:`Vocabulary.tokenize` transform splits a text at
whitespace (``tf.strings.split``) and looks each word up::

    vocab = sl.text.Vocabulary(vocabulary_file="vocab.txt", reserve_padding_id=True)
    ds = (sl.TextLineDataset("train.txt")
            .map(vocab.tokenize(), num_parallel_calls=sl.AUTOTUNE)   # int64 ids
            .padded_batch(64))
"""

from ._native import Transform, Vocabulary

__all__ = ["Vocabulary", "Transform"]
