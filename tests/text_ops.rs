//! streamload's text ops against TensorFlow 2.21: every case of
//! `tests/data/tensorflow/text_more.json` (written by `scripts/tf_text_more.py`):
//! `tf.strings.split`, `StaticVocabularyTable` over `KeyValueTensorInitializer` and
//! `TextFileInitializer`, `to_hash_bucket_fast`, duplicates, and Keras' `StringLookup` ids.

use base64::Engine;
use bytes::Bytes;
use serde_json::Value;
use streamload::tensor::StringList;
use streamload::text::Vocabulary;

fn data() -> Value {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/tensorflow/text_more.json"
    );
    serde_json::from_str(&std::fs::read_to_string(path).expect("text_more.json")).expect("JSON")
}

fn b64(v: &Value) -> Vec<u8> {
    base64::engine::general_purpose::STANDARD
        .decode(v.as_str().expect("a base64 string"))
        .expect("base64")
}

fn b64s(v: &Value) -> Vec<Vec<u8>> {
    v.as_array().expect("a list").iter().map(b64).collect()
}

fn ints(v: &Value) -> Vec<i64> {
    v.as_array()
        .expect("a list")
        .iter()
        .map(|x| x.as_i64().expect("an integer"))
        .collect()
}

#[test]
fn split_matches_tf_strings_split() {
    let (mut run, mut multi_byte) = (0, 0);
    for case in data()["split"].as_array().expect("cases") {
        let text = b64(&case["text_b64"]);
        let expected = b64s(&case["words_b64"]);
        let words = match &case["sep_b64"] {
            Value::Null => StringList::split_whitespace(Bytes::from(text.clone())),
            sep => match b64(sep)[..] {
                [sep] => StringList::split(Bytes::from(text.clone()), sep),
                // StringList::split takes one byte; a multi-byte separator is not offered.
                _ => {
                    multi_byte += 1;
                    continue;
                }
            },
        };
        let got: Vec<&[u8]> = words.iter().collect();
        assert_eq!(got, expected, "text {text:?}, sep {}", case["sep_b64"]);
        if case["sep_b64"].is_null() {
            // tokenize splits as split_whitespace does.
            let vocab = Vocabulary::from_tokens(["a"]).expect("one token");
            assert_eq!(vocab.tokenize(&text), vocab.encode(&words), "{text:?}");
        }
        run += 1;
    }
    assert_eq!((run, multi_byte), (135, 54));
}

#[test]
fn lookups_match_static_vocabulary_table() {
    let mut run = 0;
    for case in data()["lookup"].as_array().expect("cases") {
        let tokens = b64s(&case["tokens_b64"]);
        let buckets = case["num_oov_buckets"].as_u64().expect("buckets");
        let vocab = Vocabulary::from_tokens(b64s(&case["vocab_b64"]));
        if let Some(err) = case.get("error") {
            // TensorFlow: "keys and values cannot be empty tensors".
            assert!(
                case["vocab_b64"].as_array().expect("vocab").is_empty(),
                "{err}"
            );
            let err = vocab.expect_err("an empty vocabulary").to_string();
            assert!(err.contains("at least one token"), "{err}");
        } else {
            let vocab = vocab.expect("distinct").num_oov_buckets(buckets);
            let ids: Vec<i64> = tokens.iter().map(|t| vocab.lookup(t)).collect();
            assert_eq!(ids, ints(&case["ids"]), "{case}");
            assert_eq!(
                vocab.vocabulary_size() as i64,
                case["size"].as_i64().expect("size")
            );
            let padded = vocab.clone().reserve_padding_id(true);
            let shifted: Vec<i64> = tokens.iter().map(|t| padded.lookup(t) - 1).collect();
            assert_eq!(shifted, ids);
        }
        // The OOV bucket is tf.strings.to_hash_bucket_fast, whatever the vocabulary.
        let one = Vocabulary::from_tokens(["\u{1}"])
            .expect("one token")
            .num_oov_buckets(buckets);
        let hashed: Vec<i64> = tokens.iter().map(|t| one.oov_bucket(t) as i64).collect();
        assert_eq!(hashed, ints(&case["to_hash_bucket_fast"]));
        run += 1;
    }
    assert_eq!(run, 12);
}

#[tokio::test]
async fn vocabulary_files_match_text_file_initializer() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let mut run = 0;
    for (i, case) in data()["text_file"]
        .as_array()
        .expect("cases")
        .iter()
        .enumerate()
    {
        let content = b64(&case["file_b64"]);
        let path = dir.path().join(format!("vocab{i}.txt"));
        std::fs::write(&path, &content).expect("written");
        let vocab = Vocabulary::from_file(&path).await;
        match case.get("error") {
            Some(err) => {
                let ours = vocab.expect_err("TensorFlow fails").to_string();
                let class = err["class"].as_str().expect("class");
                let why = match class {
                    "InvalidArgumentError" => "is empty",
                    "FailedPreconditionError" => "repeats the token",
                    "OutOfRangeError" => "holds no token", // an empty file
                    other => panic!("unexpected TensorFlow error {other}"),
                };
                assert!(ours.contains(why), "{content:?}: {ours} vs {err}");
            }
            None => {
                let vocab = vocab.expect("TensorFlow reads it").num_oov_buckets(3);
                let ids: Vec<i64> = b64s(&case["tokens_b64"])
                    .iter()
                    .map(|t| vocab.lookup(t))
                    .collect();
                assert_eq!(ids, ints(&case["ids"]), "{content:?}");
                assert_eq!(
                    vocab.vocabulary_size() as i64,
                    case["size"].as_i64().expect("size")
                );
            }
        }
        run += 1;
    }
    assert_eq!(run, 19);
}

#[test]
fn duplicates_are_errors_as_in_tensorflow() {
    for case in data()["duplicates"].as_array().expect("cases") {
        // Both StaticVocabularyTable and StringLookup refuse a repeated token.
        assert!(
            case["static_vocabulary_table"]["class"].is_string(),
            "{case}"
        );
        assert!(case["string_lookup"]["class"].is_string(), "{case}");
        let err = Vocabulary::from_tokens(b64s(&case["vocab_b64"])).expect_err("repeated");
        assert!(err.to_string().contains("duplicate token"), "{err}");
    }
}

#[test]
fn string_lookup_hashes_as_the_vocabulary_but_lays_ids_out_otherwise() {
    for case in data()["string_lookup"].as_array().expect("cases") {
        let k = case["num_oov_indices"].as_u64().expect("k");
        let words: Vec<String> = serde_json::from_value(case["vocab"].clone()).expect("vocab");
        let tokens: Vec<String> = serde_json::from_value(case["tokens"].clone()).expect("tokens");
        let vocab = Vocabulary::from_tokens(&words)
            .expect("distinct")
            .num_oov_buckets(k)
            .reserve_padding_id(true);
        assert_eq!(
            vocab.vocabulary_size() as i64,
            case["vocabulary_size"].as_i64().expect("size")
        );
        // StringLookup(mask_token=""): "" -> 0, unknown -> 1 + bucket, word i -> 1 + k + i.
        for (token, keras) in tokens.iter().zip(ints(&case["ids"])) {
            let t = token.as_bytes();
            let expected = if token.is_empty() {
                0
            } else if let Some(i) = words.iter().position(|w| w == token) {
                1 + k as i64 + i as i64
            } else {
                1 + vocab.oov_bucket(t) as i64
            };
            assert_eq!(keras, expected, "{token:?} with {k} OOV indices");
        }
    }
}
