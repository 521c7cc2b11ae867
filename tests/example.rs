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

/// `tests/data/tensorflow/sequence_examples.tfrecord`: `tf.train.SequenceExample`s TensorFlow
/// serialized and wrote (`scripts/tf_sequence_example.py`), decoded as TensorFlow's own
/// protobuf parser read them back (`sequence_examples.expected.json`), and re-encoded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sequence_examples_decode_as_tensorflow_read_them() {
    use streamload::format::SequenceExample;
    let text = std::fs::read_to_string(data("sequence_examples.expected.json"))
        .expect("sequence_examples.expected.json");
    let json: Value = serde_json::from_str(&text).expect("valid JSON");
    let want = json["records"].as_array().expect("records");
    let records = TFRecordDataset::new([data("sequence_examples.tfrecord")])
        .build()
        .collect()
        .await
        .expect("TensorFlow's file reads");
    assert_eq!(records.len(), want.len());
    assert_eq!(records.len(), 5);
    let mut failures = Vec::new();
    for (i, (record, want)) in records.into_iter().zip(want).enumerate() {
        let got = SequenceExample::decode_record(record).expect("decodes");
        assert_eq!(
            got.context.is_some(),
            want["has_context"] == true,
            "record {i}"
        );
        assert_eq!(
            got.feature_lists.is_some(),
            want["has_feature_lists"] == true,
            "record {i}"
        );
        let context = want["context"].as_object().expect("context");
        let got_context = got.context.as_ref().map(|c| c.feature.len()).unwrap_or(0);
        assert_eq!(got_context, context.len(), "record {i}: context features");
        for (name, feature) in context {
            let kind = got.context_feature(name).and_then(|f| f.kind.as_ref());
            if let Err(e) = check_feature(name, feature, kind) {
                failures.push(format!("record {i} context {e}"));
            }
        }
        let lists = want["feature_lists"].as_object().expect("feature_lists");
        let got_lists = got.feature_lists.as_ref();
        assert_eq!(
            got_lists.map(|l| l.feature_list.len()).unwrap_or(0),
            lists.len(),
            "record {i}: feature lists"
        );
        for (name, steps) in lists {
            let steps = steps.as_array().expect("steps");
            let got_steps = got.feature_list(name).unwrap_or_default();
            assert_eq!(got_steps.len(), steps.len(), "record {i}: {name} steps");
            for (t, (want, got)) in steps.iter().zip(got_steps).enumerate() {
                if let Err(e) = check_feature(name, want, got.kind.as_ref()) {
                    failures.push(format!("record {i} list {name} step {t}: {e}"));
                }
            }
        }
        // Encoding and decoding again gives the same message.
        let again = SequenceExample::decode_bytes(&got.encode_to_bytes()).expect("round trip");
        assert_eq!(again, got, "record {i}");
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

#[test]
fn a_sequence_example_from_garbage_is_an_error_not_a_panic() {
    use streamload::format::SequenceExample;
    let err = SequenceExample::decode_bytes(&[0x12, 0x05, 0x0a]).expect_err("truncated");
    assert!(
        err.to_string().contains("not a tf.train.SequenceExample"),
        "{err}"
    );
}

#[test]
fn scalar_reads_one_value_in_one_call() -> anyhow::Result<()> {
    use streamload::format::{Feature, Features};
    let mut example = Example::new()
        .with_int64("label", [4])
        .with_bytes("id", ["a"])
        .with_bytes("ids", Vec::<&str>::new());
    if let Some(Features { feature }) = &mut example.features {
        feature.insert("unset".into(), Feature { kind: None });
    }
    let example = Example::decode_record(example.encode_to_bytes())?;
    assert_eq!(example.scalar::<i64>("label")?, 4);
    assert_eq!(
        example.scalar::<bytes::Bytes>("id")?,
        bytes::Bytes::from_static(b"a")
    );
    let message = |e: anyhow::Error| {
        assert!(matches!(
            e.downcast_ref::<streamload::Error>(),
            Some(streamload::Error::InvalidArgument(_))
        ));
        e.to_string()
    };
    let err = example.scalar::<i64>("weight").expect_err("absent");
    assert_eq!(message(err), "no feature weight in the example");
    let err = example.scalar::<bytes::Bytes>("ids").expect_err("empty");
    assert_eq!(message(err), "feature ids holds 0 values, not one");
    let err = example.scalar::<f32>("unset").expect_err("no list");
    assert_eq!(message(err), "feature unset holds no list");
    Ok(())
}
