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

:class:`Tokenizer` reads a Hugging Face ``tokenizer.json`` (a path or a URL) and encodes
documents with Hugging Face's own Rust code, so the ids are the ``tokenizers`` package's
(``encode(text, add_special_tokens=False).ids``), then ``end_token``'s id; ``truncate=n``
cuts a document to ``n`` ids (the end id kept last), ``max_ids=n`` raises on a longer one::

    tok = sl.text.Tokenizer("tokenizer.json", end_token="<|endoftext|>")
    ds = (sl.JsonLinesDataset("docs.jsonl")
            .map(lambda d: d["text"])
            .map(tok.encode(), num_parallel_calls=2))                 # uint32 ids
"""

from ._native import Tokenizer, Transform, Vocabulary

__all__ = ["Tokenizer", "Vocabulary", "Transform"]
