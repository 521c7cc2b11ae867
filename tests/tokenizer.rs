//! `text::Tokenizer` (feature `tokenizers`): the ids Hugging Face's `tokenizers` Python
//! package gives the same texts (tests/data/tokenizer, written by
//! scripts/make_tokenizer_cases.py), the end id, bounds, errors, and tokenizing in a pipeline.

#![cfg(feature = "tokenizers")]

#[path = "support/s3.rs"]
mod s3;

use futures::StreamExt;
use streamload::Dataset;
use streamload::text::Tokenizer;

const DIR: &str = "tests/data/tokenizer";

/// The texts and the ids the `tokenizers` package gave them, for tokenizer `name`.
fn cases(name: &str) -> Vec<(String, Vec<u32>)> {
    let text = std::fs::read_to_string(format!("{DIR}/cases.json")).expect("cases.json");
    let all: serde_json::Value = serde_json::from_str(&text).expect("JSON");
    all[name]
        .as_array()
        .expect("a list of cases")
        .iter()
        .map(|case| {
            let ids = case["ids"].as_array().expect("ids");
            (
                case["text"].as_str().expect("text").to_string(),
                ids.iter()
                    .map(|i| i.as_u64().expect("an id") as u32)
                    .collect(),
            )
        })
        .collect()
}

#[test]
fn ids_are_the_tokenizers_package_s_for_byte_level_bpe_and_wordpiece() {
    for (name, file) in [
        ("byte_level", "byte_level.json"),
        ("wordpiece", "wordpiece.json"),
    ] {
        let tokenizer = Tokenizer::from_file(format!("{DIR}/{file}")).expect("a tokenizer");
        let cases = cases(name);
        assert!(cases.len() > 40);
        for (text, want) in cases {
            let ids = tokenizer.encode(&text).expect("encodes");
            assert_eq!(ids, want, "{name}: {text:?}");
        }
    }
}

#[test]
fn the_end_id_is_appended_and_bounds_cut_or_refuse() {
    let plain = Tokenizer::from_file(format!("{DIR}/byte_level.json")).expect("a tokenizer");
    assert_eq!(plain.token_to_id("<|endoftext|>"), Some(0));
    assert_eq!(plain.vocab_size(), 600);
    let with_end = plain.clone().end_token("<|endoftext|>").expect("known");
    let text = "some words of the corpus and a few more";
    let ids = plain.encode(text).expect("encodes");
    assert!(ids.len() > 6, "{ids:?}");
    let mut ended = ids.clone();
    ended.push(0);
    assert_eq!(with_end.encode(text).expect("encodes"), ended);
    assert_eq!(with_end.encode("").expect("encodes"), [0]);
    assert_eq!(plain.decode(&ids).expect("decodes"), text);

    // Truncation keeps the first ids, the end id last and counted.
    let cut = with_end.clone().truncate(5).encode(text).expect("encodes");
    assert_eq!(cut, [&ids[..4], &[0]].concat());
    let cut = plain.clone().truncate(5).encode(text).expect("encodes");
    assert_eq!(cut, &ids[..5]);
    assert_eq!(
        with_end
            .clone()
            .truncate(1000)
            .encode(text)
            .expect("encodes"),
        ended
    );

    // A bound that refuses: exactly at the bound passes, one more is an error saying so.
    let fits = with_end.clone().max_ids(ended.len());
    assert_eq!(fits.encode(text).expect("fits"), ended);
    let refuses = with_end.max_ids(ended.len() - 1);
    let e = refuses.encode(text).expect_err("too long");
    let message = format!("{e:#}");
    assert!(
        message.contains(&format!("{} ids", ended.len()))
            && message.contains("max_ids")
            && message.contains("byte_level.json"),
        "{message}"
    );
}

#[test]
fn a_tokenizer_that_does_not_parse_and_a_missing_token_are_errors_naming_the_file() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let bad = dir.path().join("tokenizer.json");
    std::fs::write(&bad, br#"{"model": {"type": "BPE", "vocab": 3}}"#).expect("written");
    let e = Tokenizer::from_file(&bad).expect_err("not a tokenizer");
    assert!(format!("{e:#}").contains("tokenizer.json"), "{e:#}");
    let e = Tokenizer::from_file(dir.path().join("missing.json")).expect_err("no file");
    assert!(format!("{e:#}").contains("missing.json"), "{e:#}");
    let e = Tokenizer::from_bytes(b"not json").expect_err("not JSON");
    assert!(format!("{e:#}").contains("tokenizer"), "{e:#}");
    let tokenizer = Tokenizer::from_file(format!("{DIR}/wordpiece.json")).expect("a tokenizer");
    let e = tokenizer.end_token("</s>").expect_err("no such token");
    let message = format!("{e:#}");
    assert!(
        message.contains("</s>") && message.contains("wordpiece.json"),
        "{message}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn documents_tokenized_in_parallel_keep_their_order_and_a_long_one_is_an_error() {
    let tokenizer = Tokenizer::from_file(format!("{DIR}/byte_level.json"))
        .expect("a tokenizer")
        .end_token("<|endoftext|>")
        .expect("known");
    let cases = cases("byte_level");
    let texts: Vec<String> = cases.iter().map(|(t, _)| t.clone()).collect();
    let t = tokenizer.clone();
    let ids: Vec<Vec<u32>> = Dataset::from_vec(texts.clone())
        .try_map_parallel(4, move |text| t.encode(text))
        .collect()
        .await
        .expect("every document encodes");
    for ((_, want), got) in cases.iter().zip(&ids) {
        assert_eq!(&got[..got.len() - 1], &want[..]);
        assert_eq!(got.last(), Some(&0));
    }
    // With a bound, the long document's error is the pipeline's, naming the bound.
    let t = tokenizer.max_ids(64);
    let all: Vec<anyhow::Result<Vec<u32>>> = Dataset::from_vec(texts)
        .try_map_parallel(2, move |text| t.encode(text))
        .iter()
        .collect()
        .await;
    let long = cases
        .iter()
        .position(|(_, ids)| ids.len() + 1 > 64)
        .expect("a long case");
    let e = all[long].as_ref().expect_err("too long");
    assert!(format!("{e:#}").contains("max_ids 64"), "{e:#}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tokenizer_is_read_from_object_storage() -> anyhow::Result<()> {
    let server = s3::MemoryS3::default();
    let bytes = std::fs::read(format!("{DIR}/byte_level.json"))?;
    server.insert("tok-bucket", "tok/tokenizer.json", bytes.into());
    let addr = s3::memory_s3_server(server.clone(), "AKIDTK", "tk-secret").await;
    streamload::storage::register(
        "s3://tok-bucket",
        s3::s3_store(addr, "tok-bucket", "AKIDTK", "tk-secret"),
    )?;
    let tokenizer = Tokenizer::open("s3://tok-bucket/tok/tokenizer.json").await?;
    let (text, want) = &cases("byte_level")[3];
    assert_eq!(&tokenizer.encode(text)?, want);
    let e = Tokenizer::open("s3://tok-bucket/tok/missing.json")
        .await
        .expect_err("no such object");
    assert!(format!("{e:#}").contains("missing.json"), "{e:#}");
    Ok(())
}
