//! `tf.train.Example` decoding against what TensorFlow wrote and read: every record of
//! `tests/data/tensorflow/examples.tfrecord`, with the feature maps TensorFlow decoded.

use std::path::PathBuf;

use base64::Engine;
use serde_json::Value;
use streamload::format::{Example, Kind, TFRecordDataset};

fn data(name: &str) -> PathBuf {
    PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/tensorflow"
    ))
    .join(name)
}

fn expected() -> Value {
    let text =
        std::fs::read_to_string(data("examples.expected.json")).expect("examples.expected.json");
    serde_json::from_str(&text).expect("valid JSON")
}

fn b64(s: &str) -> Vec<u8> {
    base64::engine::general_purpose::STANDARD
        .decode(s)
        .expect("base64")
}

/// TensorFlow's float encoding: numbers (float32 widened exactly), or "NaN"/"Infinity"/"-Infinity".
fn same_float(json: &Value, x: f32) -> bool {
    match json {
        Value::String(s) if s == "NaN" => x.is_nan(),
        Value::String(s) if s == "Infinity" => x == f32::INFINITY,
        Value::String(s) if s == "-Infinity" => x == f32::NEG_INFINITY,
        // Bit-exact, including -0.0 and subnormals.
        Value::Number(n) => n
            .as_f64()
            .is_some_and(|v| (v as f32).to_bits() == x.to_bits()),
        _ => false,
    }
}

fn check_feature(name: &str, want: &Value, got: Option<&Kind>) -> Result<(), String> {
    let values = want["values"].as_array().cloned().unwrap_or_default();
    match (want["kind"].as_str(), got) {
        (None, None) => Ok(()),
        (Some("int64_list"), Some(Kind::Int64List(l))) => {
            let want: Vec<i64> = values
                .iter()
                .map(|v| v.as_i64().ok_or("int64"))
                .collect::<Result<_, _>>()?;
            if want == l.value {
                Ok(())
            } else {
                Err(format!("{name}: {want:?} != {:?}", l.value))
            }
        }
        (Some("float_list"), Some(Kind::FloatList(l))) => {
            let ok = values.len() == l.value.len()
                && values.iter().zip(&l.value).all(|(j, x)| same_float(j, *x));
            if ok {
                Ok(())
            } else {
                Err(format!("{name}: {values:?} != {:?}", l.value))
            }
        }
        (Some("bytes_list"), Some(Kind::BytesList(l))) => {
            let want: Vec<Vec<u8>> = values
                .iter()
                .map(|v| b64(v.as_str().unwrap_or_default()))
                .collect();
            let got: Vec<Vec<u8>> = l.value.iter().map(|b| b.to_vec()).collect();
            if want == got {
                Ok(())
            } else {
                Err(format!("{name}: bytes differ"))
            }
        }
        (kind, got) => Err(format!("{name}: kind {kind:?} vs {got:?}")),
    }
}

#[test]
fn every_record_decodes_to_the_features_tensorflow_read() {
    let json = expected();
    let records = json["records"].as_array().expect("records");
    assert_eq!(records.len(), 20);
    let mut failures = Vec::new();
    for record in records {
        let index = record["index"].as_u64().unwrap_or_default();
        let serialized = b64(record["serialized_b64"].as_str().expect("serialized"));
        let example = match Example::decode_bytes(&serialized) {
            Ok(e) => e,
            Err(e) => {
                failures.push(format!("record {index}: {e}"));
                continue;
            }
        };
        let want = record["features"].as_object().expect("features");
        // The decoded example, and the same after encoding and decoding it again (the bytes
        // may differ: Python's serializer orders "ids" before "id" and writes an empty value
        // for a feature with no list set, which prost leaves out; both decode the same).
        let again = Example::decode_bytes(&example.encode_to_bytes());
        for (label, example) in [("decoded", Ok(example)), ("re-encoded", again)] {
            let example = match example {
                Ok(e) => e,
                Err(e) => {
                    failures.push(format!("record {index} {label}: {e}"));
                    continue;
                }
            };
            let count = example.features.as_ref().map_or(0, |f| f.feature.len());
            if count != want.len() {
                failures.push(format!(
                    "record {index} {label}: {count} features, TensorFlow read {}",
                    want.len()
                ));
            }
            for (name, feature) in want {
                match example.feature(name) {
                    None => failures.push(format!("record {index} {label}: {name} missing")),
                    Some(f) => {
                        if let Err(e) = check_feature(name, feature, f.kind.as_ref()) {
                            failures.push(format!("record {index} {label}: {e}"));
                        }
                    }
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tfrecord_file_holds_the_same_examples() {
    let json = expected();
    let payloads = TFRecordDataset::new([data("examples.tfrecord")])
        .build()
        .collect()
        .await
        .expect("a clean file");
    let records = json["records"].as_array().expect("records");
    assert_eq!(payloads.len(), records.len());
    for (payload, record) in payloads.iter().zip(records) {
        assert_eq!(
            payload[..],
            b64(record["serialized_b64"].as_str().expect("serialized"))[..]
        );
    }
}

#[test]
fn garbage_is_an_error_not_a_panic() {
    for bytes in [
        &b"\xff\xff\xff"[..],
        b"\x0a\xff\xff\xff\xff\x0f",
        b"\x0a\x05\x0a\x03\x0a",
    ] {
        assert!(Example::decode_bytes(bytes).is_err(), "{bytes:?}");
    }
}
