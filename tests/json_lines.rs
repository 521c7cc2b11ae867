//! JSON lines (`JsonLinesDataset`): values and typed rows from local files and URLs, plain and
//! GZIP; bad lines are errors naming the file and the line, and the lines after them follow.

use std::io::Write;
use std::sync::Arc;

use serde::Deserialize;
use serde_json::{Value, json};
use streamload::format::{Compression, JsonLinesDataset};

#[derive(Debug, Deserialize, PartialEq)]
struct Row {
    text: String,
    label: i64,
    #[serde(default)]
    weights: Vec<f32>,
}

const TEXT: &str = "{\"text\": \"a\", \"label\": 1, \"weights\": [0.5, 2]}\n\
                    \n\
                    {\"text\": \"b\\u00e9\", \"label\": -2}\r\n\
                    \t \n\
                    {\"text\": \"c\", \"label\": 3, \"extra\": null}";

#[tokio::test]
async fn values_and_typed_rows_from_plain_and_gzip_files() {
    let dir = tempfile::tempdir().unwrap();
    let plain = dir.path().join("a.jsonl");
    std::fs::write(&plain, TEXT).unwrap();
    let gz = dir.path().join("b.jsonl.gz");
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    enc.write_all(TEXT.as_bytes()).unwrap();
    std::fs::write(&gz, enc.finish().unwrap()).unwrap();

    let values = JsonLinesDataset::new([&plain, &gz])
        .compression(Compression::Auto)
        .build()
        .collect()
        .await
        .unwrap();
    let one = vec![
        json!({"text": "a", "label": 1, "weights": [0.5, 2]}),
        json!({"text": "bé", "label": -2}),
        json!({"text": "c", "label": 3, "extra": null}),
    ];
    let both: Vec<Value> = one.iter().chain(&one).cloned().collect();
    assert_eq!(values, both);

    let rows = JsonLinesDataset::new([&gz])
        .compression(Compression::Auto)
        .build_as::<Row>()
        .collect()
        .await
        .unwrap();
    assert_eq!(
        rows,
        [
            Row {
                text: "a".into(),
                label: 1,
                weights: vec![0.5, 2.0]
            },
            Row {
                text: "bé".into(),
                label: -2,
                weights: vec![]
            },
            Row {
                text: "c".into(),
                label: 3,
                weights: vec![]
            },
        ]
    );
    // Several files at once: the same values, one from each in turn.
    let interleaved = JsonLinesDataset::new([&plain, &gz])
        .compression(Compression::Auto)
        .num_parallel_reads(2)
        .build()
        .collect()
        .await
        .unwrap();
    let expected: Vec<Value> = one.iter().flat_map(|v| [v.clone(), v.clone()]).collect();
    assert_eq!(interleaved, expected);
}

#[tokio::test]
async fn bad_lines_name_the_file_and_the_line_and_the_rest_follows() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.jsonl");
    std::fs::write(
        &path,
        "{\"text\": \"a\", \"label\": 1}\n\n{\"text\": \"b\", \n{\"text\": \"c\", \"label\": \"x\"}\n{\"text\": \"d\", \"label\": 4}\n",
    )
    .unwrap();
    let results: Vec<anyhow::Result<Row>> = {
        use futures::StreamExt;
        JsonLinesDataset::new([&path])
            .build_as::<Row>()
            .iter()
            .collect()
            .await
    };
    assert_eq!(results.len(), 4);
    assert_eq!(results[0].as_ref().unwrap().text, "a");
    let syntax = results[1].as_ref().unwrap_err().to_string();
    assert!(
        syntax.contains("bad.jsonl: line 3, column ")
            && syntax.contains(": not valid JSON: ")
            && syntax.contains("EOF"),
        "{syntax}"
    );
    let typed = results[2].as_ref().unwrap_err().to_string();
    assert!(
        typed.contains("bad.jsonl: line 4, column ")
            && typed.contains(": invalid type: string \"x\", expected i64")
            && !typed.contains(" at line 1"),
        "{typed}"
    );
    assert_eq!(results[3].as_ref().unwrap().label, 4);
    // As values, line 4 is fine; ignore_errors skips just line 3.
    let values = JsonLinesDataset::new([&path])
        .build()
        .ignore_errors()
        .collect()
        .await
        .unwrap();
    assert_eq!(values.len(), 3);
    assert_eq!(values[1]["label"], "x");
    // A missing file is an error naming it.
    let e = JsonLinesDataset::new([dir.path().join("none.jsonl")])
        .build()
        .collect()
        .await
        .unwrap_err();
    assert!(format!("{e:#}").contains("none.jsonl"), "{e:#}");
}

#[tokio::test]
async fn from_object_storage_urls() {
    use object_store::{ObjectStoreExt, PutPayload, memory::InMemory, path::Path};
    let store = Arc::new(InMemory::new());
    store
        .put(&Path::from("rows/a.jsonl"), PutPayload::from(TEXT))
        .await
        .unwrap();
    streamload::storage::register("memory://json-lines-test", store).unwrap();
    let rows = JsonLinesDataset::new(["memory://json-lines-test/rows/a.jsonl"])
        .build_as::<Row>()
        .collect()
        .await
        .unwrap();
    assert_eq!(rows.iter().map(|r| r.label).collect::<Vec<_>>(), [1, -2, 3]);
}
