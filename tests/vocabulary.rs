//! Vocabulary lookups (`streamload::text`): TensorFlow's id layout and hash, files, tokenizing
//! into padded batches.

use bytes::Bytes;
use ndarray::array;
use streamload::tensor::StringList;
use streamload::text::Vocabulary;
use streamload::{BucketOptions, Dataset};

#[test]
fn unknown_tokens_hash_as_tensorflow_hashes_them() {
    // tf.strings.to_hash_bucket_fast(["Hello", "TensorFlow", "2.x"], 3) == [0, 2, 2]
    // (TensorFlow's documentation); StaticVocabularyTable gives OOV ids the same buckets.
    let vocab = Vocabulary::from_tokens(["a"])
        .expect("one token")
        .num_oov_buckets(3);
    let ids: Vec<i64> = ["Hello", "TensorFlow", "2.x"]
        .iter()
        .map(|t| vocab.lookup(t.as_bytes()))
        .collect();
    assert_eq!(ids, [1, 3, 3]);
}

#[test]
fn ids_follow_tensorflow_s_layout_and_the_padding_id_shifts_them() {
    let vocab = Vocabulary::from_tokens(["a", "b"])
        .expect("distinct")
        .num_oov_buckets(4);
    assert_eq!((vocab.lookup(b"a"), vocab.lookup(b"b")), (0, 1));
    for unknown in ["c", "d", "zebra", ""] {
        let id = vocab.lookup(unknown.as_bytes());
        assert_eq!(id, 2 + vocab.oov_bucket(unknown.as_bytes()) as i64);
        assert!((2..6).contains(&id));
    }
    assert_eq!(vocab.vocabulary_size(), 6);
    let padded = vocab.clone().reserve_padding_id(true);
    assert_eq!((padded.lookup(b"a"), padded.lookup(b"b")), (1, 2));
    assert_eq!(padded.lookup(b"zebra"), vocab.lookup(b"zebra") + 1);
    assert_eq!(padded.vocabulary_size(), 7);
    assert_eq!(
        (padded.token(1), padded.token(0), padded.token(3)),
        (Some(&b"a"[..]), None, None)
    );
}

#[test]
fn tokenize_and_encode_agree() {
    let vocab = Vocabulary::from_tokens(["x", "y"]).expect("distinct");
    let line = Bytes::from_static(b" y\tx  y q\r\n");
    let words = StringList::split_whitespace(line.clone());
    assert_eq!(vocab.tokenize(&line), vocab.encode(&words));
    assert_eq!(vocab.tokenize(&line), [1, 0, 1, 2]);
    let mut ids = vec![9];
    vocab.encode_into(
        &StringList::split(Bytes::from_static(b"x,,y"), b','),
        &mut ids,
    );
    assert_eq!(ids, [9, 0, 2, 1]); // the empty string is a token (unknown)
}

#[test]
fn duplicate_tokens_are_an_error() {
    let err = Vocabulary::from_tokens(["a", "b", "a"]).expect_err("a twice");
    assert!(
        err.to_string()
            .contains("\"a\" in the vocabulary: at positions 0 and 2"),
        "{err}"
    );
}

#[tokio::test]
async fn a_vocabulary_file_is_read_line_by_line() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("vocab.txt");
    std::fs::write(&path, "the\r\ncat\nsat\n").expect("written");
    let vocab = Vocabulary::from_file(&path).await.expect("readable");
    assert_eq!(vocab.len(), 3);
    assert_eq!(vocab.tokenize(b"sat the cat"), [2, 0, 1]);

    std::fs::write(&path, "the\ncat\nthe\n").expect("written");
    let err = Vocabulary::from_file(&path)
        .await
        .expect_err("a repeated line");
    let message = err.to_string();
    assert!(
        message.contains("vocab.txt: line 3 repeats the token \"the\" of line 1"),
        "{message}"
    );

    std::fs::write(&path, "the\n\ncat\n").expect("written");
    let err = Vocabulary::from_file(&path)
        .await
        .expect_err("an empty line");
    assert!(err.to_string().contains("line 2 is empty"), "{err}");

    let missing = dir.path().join("missing.txt");
    assert!(Vocabulary::from_file(&missing).await.is_err());
}

#[tokio::test]
async fn lines_to_padded_batches_of_ids() {
    let vocab = std::sync::Arc::new(
        Vocabulary::from_tokens(["a", "b", "c"])
            .expect("distinct")
            .reserve_padding_id(true),
    );
    let lines = Dataset::from_vec(vec![
        Bytes::from_static(b"a b"),
        Bytes::from_static(b"c"),
        Bytes::from_static(b"a a a z"),
    ]);
    let ds = lines
        .map(move |line| vocab.tokenize(&line))
        .bucket_by_sequence_length(
            |ids| ids.len(),
            vec![3],
            vec![2, 2],
            BucketOptions::default(),
        );
    let out = ds.collect().await.expect("pads");
    assert_eq!(out, [array![[1, 2], [3, 0]], array![[1, 1, 1, 4]]]);
}
