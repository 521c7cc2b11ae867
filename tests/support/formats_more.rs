//! Reading `tests/data/tensorflow/formats_more.json` (written by scripts/tf_formats_more.py
//! from TensorFlow 2.21's own outputs): its cases, its input files, its string encoding.
#![allow(dead_code)]

use std::path::PathBuf;

use base64::Engine;
use bytes::Bytes;
use serde_json::Value;
use streamload::format::Compression;

/// The directory of the cases' input files.
pub(crate) fn dir() -> PathBuf {
    PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/tensorflow/formats_more"
    ))
}

/// The cases of one section (`text_line`, `fixed_length`, `csv`, `list_files`, `parse`).
pub(crate) fn cases(section: &str) -> Vec<Value> {
    let path = dir().with_extension("json");
    let json: Value =
        serde_json::from_str(&std::fs::read_to_string(path).expect("formats_more.json"))
            .expect("JSON");
    json[section].as_array().expect("section").clone()
}

/// A case's input files, as paths.
pub(crate) fn files(case: &Value) -> Vec<PathBuf> {
    case["files"]
        .as_array()
        .expect("files")
        .iter()
        .map(|f| dir().join(f.as_str().expect("file")))
        .collect()
}

/// TensorFlow's `compression_type`.
pub(crate) fn compression(case: &Value) -> Compression {
    match case["compression_type"].as_str().unwrap_or("") {
        "" => Compression::None,
        "GZIP" => Compression::Gzip,
        "ZLIB" => Compression::Zlib,
        other => panic!("compression {other}"),
    }
}

/// A string as the JSON encodes it: UTF-8 text, or `{"b64": ...}`.
pub(crate) fn bytes(v: &Value) -> Bytes {
    match v {
        Value::String(s) => Bytes::copy_from_slice(s.as_bytes()),
        Value::Object(o) => Bytes::from(
            base64::engine::general_purpose::STANDARD
                .decode(o["b64"].as_str().expect("b64"))
                .expect("base64"),
        ),
        other => panic!("not a string: {other}"),
    }
}

/// Checks that `got` opens with exactly the elements TensorFlow yielded for `case`, and
/// returns how many that is (where TensorFlow raised, `got`'s error should come next).
pub(crate) fn assert_output_prefix(case: &Value, got: &[anyhow::Result<Bytes>]) -> usize {
    let name = case["name"].as_str().expect("name");
    let want: Vec<Bytes> = case["output"]
        .as_array()
        .expect("output")
        .iter()
        .map(bytes)
        .collect();
    let ok: Vec<Bytes> = got.iter().map_while(|r| r.as_ref().ok().cloned()).collect();
    assert_eq!(ok, want, "{name}");
    want.len()
}

/// The error TensorFlow raised, with the data directory put back into its message.
pub(crate) fn error_message(case: &Value) -> Option<String> {
    let core = case["error"]["core_message"].as_str()?;
    Some(core.replace("{dir}", &dir().display().to_string()))
}
