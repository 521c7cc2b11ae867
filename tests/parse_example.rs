//! `parse_single_example` / `parse_example` against TensorFlow: every record of
//! `examples.tfrecord` under the spec TensorFlow used, the batched parse of all 20, and every
//! edge case (outputs, and errors with TensorFlow's messages).

use std::path::PathBuf;

use base64::Engine;
use bytes::Bytes;
use serde_json::Value;
use streamload::format::{
    FeatureSpec, ParseSpec, Parsed, parse_example, parse_single_example, parse_single_example_view,
};
use streamload::tensor::{DType, Values};

fn expected() -> Value {
    let path = PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/tensorflow/examples.expected.json"
    ));
    serde_json::from_str(&std::fs::read_to_string(path).expect("read")).expect("JSON")
}

fn b64(s: &str) -> Bytes {
    Bytes::from(
        base64::engine::general_purpose::STANDARD
            .decode(s)
            .expect("base64"),
    )
}

fn dtype(name: &str) -> DType {
    match name {
        "int64" => DType::Int64,
        "float32" => DType::Float32,
        "string" => DType::String,
        other => panic!("dtype {other}"),
    }
}

fn flatten<'a>(v: &'a Value, out: &mut Vec<&'a Value>) {
    match v {
        Value::Array(items) => items.iter().for_each(|i| flatten(i, out)),
        other => out.push(other),
    }
}

/// The default's values; values that do not fit the feature's type keep their own type
/// (TensorFlow refuses those when the spec is built, and so must `ParseSpec::new`).
fn default_values(dtype: DType, json: &Value) -> Values {
    let mut flat = Vec::new();
    flatten(json, &mut flat);
    let floats = |flat: &[&Value]| {
        Values::Float32(
            flat.iter()
                .map(|v| v.as_f64().expect("f64") as f32)
                .collect(),
        )
    };
    let strings = |flat: &[&Value]| {
        Values::String(
            flat.iter()
                .map(|v| Bytes::from(v.as_str().expect("str").to_string()))
                .collect(),
        )
    };
    if flat.iter().any(|v| v.is_string()) {
        return strings(&flat);
    }
    match dtype {
        DType::Int64 if flat.iter().all(|v| v.is_i64()) => {
            Values::Int64(flat.iter().map(|v| v.as_i64().expect("i64")).collect())
        }
        DType::Int64 | DType::Float32 => floats(&flat),
        DType::String => strings(&flat),
    }
}

fn feature_spec(json: &Value) -> FeatureSpec {
    let dt = dtype(json["dtype"].as_str().expect("dtype"));
    let shape = || -> Vec<usize> {
        json["shape"]
            .as_array()
            .expect("shape")
            .iter()
            .map(|d| d.as_u64().expect("dim") as usize)
            .collect()
    };
    let spec = match json["class"].as_str().expect("class") {
        "FixedLenFeature" => FeatureSpec::fixed_len(shape(), dt),
        "VarLenFeature" => FeatureSpec::var_len(dt),
        "FixedLenSequenceFeature" => FeatureSpec::fixed_len_sequence(
            shape(),
            dt,
            json["allow_missing"].as_bool().unwrap_or(false),
        ),
        "RaggedFeature" => match json["value_key"].as_str() {
            Some(key) => FeatureSpec::ragged(dt).with_value_key(key),
            None => FeatureSpec::ragged(dt),
        },
        other => panic!("class {other}"),
    };
    match &json["default_value"] {
        Value::Null => spec,
        d => spec.with_default(default_values(dt, d)),
    }
}

fn parse_spec(json: &Value) -> anyhow::Result<ParseSpec> {
    let features = json
        .as_object()
        .expect("spec object")
        .iter()
        .map(|(name, f)| (name.clone(), feature_spec(f)));
    ParseSpec::new(features)
}

/// TensorFlow's encodings: floats widened exactly (bit-exact compare, -0.0 and subnormals
/// included) or "NaN"/"Infinity"/"-Infinity"; strings as UTF-8 or {"b64": ...}.
fn same_values(want: &[&Value], got: &Values) -> Result<(), String> {
    if want.len() != got.len() {
        return Err(format!("{} values expected, got {}", want.len(), got.len()));
    }
    let ok = match got {
        Values::Int64(v) => want.iter().zip(v).all(|(w, g)| w.as_i64() == Some(*g)),
        Values::Float32(v) => want.iter().zip(v).all(|(w, g)| match w {
            Value::String(s) if s == "NaN" => g.is_nan(),
            Value::String(s) if s == "Infinity" => *g == f32::INFINITY,
            Value::String(s) if s == "-Infinity" => *g == f32::NEG_INFINITY,
            Value::Number(n) => n
                .as_f64()
                .is_some_and(|x| (x as f32).to_bits() == g.to_bits()),
            _ => false,
        }),
        Values::String(v) => want.iter().zip(v).all(|(w, g)| match w {
            Value::String(s) => s.as_bytes() == &g[..],
            Value::Object(o) => o["b64"].as_str().map(b64).as_deref() == Some(&g[..]),
            _ => false,
        }),
    };
    if ok {
        Ok(())
    } else {
        Err(format!("values differ: want {want:?}, got {got:?}"))
    }
}

fn dims(json: &Value) -> Vec<usize> {
    json.as_array()
        .expect("shape")
        .iter()
        .map(|d| d.as_u64().expect("dim") as usize)
        .collect()
}

fn check(name: &str, want: &Value, got: &Parsed) -> Result<(), String> {
    let context = |e: String| format!("{name}: {e}");
    match (want["type"].as_str(), got) {
        (Some("Tensor"), Parsed::Dense(t)) => {
            if dims(&want["shape"]) != t.shape() {
                return Err(context(format!(
                    "shape {} vs {:?}",
                    want["shape"],
                    t.shape()
                )));
            }
            if want["dtype"].as_str().map(dtype) != Some(t.dtype()) {
                return Err(context(format!("dtype {}", want["dtype"])));
            }
            let mut flat = Vec::new();
            flatten(&want["values"], &mut flat);
            same_values(&flat, t.values()).map_err(context)
        }
        (Some("SparseTensor"), Parsed::Sparse(s)) => {
            if dims(&want["dense_shape"]) != s.dense_shape() {
                return Err(context(format!("dense_shape {}", want["dense_shape"])));
            }
            let mut indices = Vec::new();
            flatten(&want["indices"], &mut indices);
            let indices: Vec<i64> = indices.iter().map(|i| i.as_i64().expect("i")).collect();
            if indices != s.indices() {
                return Err(context(format!("indices {indices:?} vs {:?}", s.indices())));
            }
            let mut flat = Vec::new();
            flatten(&want["values"], &mut flat);
            same_values(&flat, s.values()).map_err(context)
        }
        (Some("RaggedTensor"), Parsed::Ragged(r)) => {
            if want["dtype"].as_str().map(dtype) != Some(r.dtype()) {
                return Err(context(format!("dtype {}", want["dtype"])));
            }
            let splits: Vec<i64> = want["row_splits"]
                .as_array()
                .expect("row_splits")
                .iter()
                .map(|s| s.as_i64().expect("split"))
                .collect();
            if splits != r.row_splits() {
                return Err(context(format!(
                    "row_splits {splits:?} vs {:?}",
                    r.row_splits()
                )));
            }
            let mut flat = Vec::new();
            flatten(&want["values"], &mut flat);
            same_values(&flat, r.values()).map_err(context)
        }
        (kind, got) => Err(context(format!("expected {kind:?}, got {got:?}"))),
    }
}

/// `parse_single_example_view` agrees with `parse_single_example` on `serialized`: both
/// refuse it with the same message, or both accept it, every feature's `parsed` output is
/// `parse_single_example`'s, and its typed values are that output's values, the count known
/// in advance. (Floats compare by their printed form, so NaN equals NaN.)
fn view_agrees(context: &str, serialized: &Bytes, spec: &ParseSpec) {
    let single = parse_single_example(serialized, spec);
    let view = parse_single_example_view(serialized, spec);
    let (single, view) = match (single, view) {
        (Err(a), Err(b)) => {
            assert_eq!(a.to_string(), b.to_string(), "{context}: the errors differ");
            return;
        }
        (Ok(single), Ok(view)) => (single, view),
        (a, b) => panic!(
            "{context}: parse_single_example {:?}, view {:?}",
            a.err(),
            b.err()
        ),
    };
    for name in spec.names() {
        let want = single
            .get(name)
            .expect("every spec'd feature is in the output");
        let got = view.parsed(name).expect("parsed");
        assert_eq!(format!("{want:?}"), format!("{got:?}"), "{context}: {name}");
        let want_values = match want {
            Parsed::Dense(t) => t.values(),
            Parsed::Sparse(s) => s.values(),
            Parsed::Ragged(r) => r.values(),
        };
        let typed = match want_values.dtype() {
            DType::Int64 => {
                let values = view.int64(name).expect("int64");
                assert_eq!(values.len(), want_values.len(), "{context}: {name}");
                Values::Int64(values.collect())
            }
            DType::Float32 => {
                let values = view.floats(name).expect("floats");
                assert_eq!(values.len(), want_values.len(), "{context}: {name}");
                Values::Float32(values.collect())
            }
            DType::String => {
                let values = view.bytes(name).expect("bytes");
                assert_eq!(values.len(), want_values.len(), "{context}: {name}");
                Values::String(values.collect())
            }
        };
        assert_eq!(
            format!("{want_values:?}"),
            format!("{typed:?}"),
            "{context}: {name}"
        );
        // The other types' accessors refuse the feature, naming it.
        let wrong = match want_values.dtype() {
            DType::Int64 => view.floats(name).err(),
            _ => view.int64(name).err(),
        };
        let wrong = wrong.unwrap_or_else(|| panic!("{context}: {name} read as another type"));
        assert!(wrong.to_string().contains(name), "{wrong}");
    }
    assert!(view.int64("no such feature").is_err());
}

#[test]
fn parse_single_example_matches_tensorflow_on_every_record() {
    let expected = expected();
    let spec = parse_spec(&expected["spec"]).expect("spec");
    let records = expected["records"].as_array().expect("records");
    assert_eq!(records.len(), 20);
    for record in records {
        let index = &record["index"];
        let serialized = b64(record["serialized_b64"].as_str().expect("b64"));
        view_agrees(&format!("record {index}"), &serialized, &spec);
        let parsed = parse_single_example(&serialized, &spec)
            .unwrap_or_else(|e| panic!("record {index}: {e}"));
        let want = record["parse_single_example"].as_object().expect("output");
        assert_eq!(want.len(), parsed.iter().count(), "record {index}");
        for (name, want) in want {
            let got = parsed.get(name).expect("feature in output");
            check(name, want, got).unwrap_or_else(|e| panic!("record {index}: {e}"));
        }
    }
}

#[test]
fn parse_example_batch_matches_tensorflow() {
    let expected = expected();
    let spec = parse_spec(&expected["spec"]).expect("spec");
    let serialized: Vec<Bytes> = expected["records"]
        .as_array()
        .expect("records")
        .iter()
        .map(|r| b64(r["serialized_b64"].as_str().expect("b64")))
        .collect();
    let parsed = parse_example(&serialized, &spec).expect("batch parse");
    let want = expected["parse_example_batch"]["output"]
        .as_object()
        .expect("output");
    assert_eq!(want.len(), parsed.iter().count());
    for (name, want) in want {
        check(name, want, parsed.get(name).expect("feature")).unwrap_or_else(|e| panic!("{e}"));
    }
}

#[test]
fn edge_cases_match_tensorflow_outputs_and_errors() {
    let expected = expected();
    let cases = expected["edge_cases"].as_array().expect("edge cases");
    assert!(cases.len() >= 10);
    for case in cases {
        let name = case["name"].as_str().expect("name");
        let serialized = b64(case["serialized_b64"].as_str().expect("b64"));
        let spec = parse_spec(&case["spec"]);
        if let Ok(spec) = &spec {
            view_agrees(name, &serialized, spec);
        }
        if case["ok"].as_bool() == Some(true) {
            let spec = spec.unwrap_or_else(|e| panic!("{name}: {e}"));
            let parsed =
                parse_single_example(&serialized, &spec).unwrap_or_else(|e| panic!("{name}: {e}"));
            for (feature, want) in case["output"].as_object().expect("output") {
                check(feature, want, parsed.get(feature).expect("feature"))
                    .unwrap_or_else(|e| panic!("{name}: {e}"));
            }
            // The batched parser agrees with the single one.
            let batched = parse_example(&[serialized.clone(), serialized], &spec)
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            assert!(batched.iter().count() > 0, "{name}");
            continue;
        }
        let error = &case["error"];
        let core = error["core_message"].as_str().expect("core message");
        let message = match (error["class"].as_str(), spec) {
            // Python-side errors are raised when the spec is built.
            (Some("ValueError"), Err(e)) => e.to_string(),
            (Some("ValueError"), Ok(_)) => panic!("{name}: the spec should be refused"),
            (_, spec) => {
                let spec = spec.unwrap_or_else(|e| panic!("{name}: spec: {e}"));
                let err = parse_single_example(&serialized, &spec)
                    .err()
                    .unwrap_or_else(|| panic!("{name}: parsed, TensorFlow refused: {core}"));
                assert!(
                    matches!(
                        err.downcast_ref::<streamload::Error>(),
                        Some(streamload::Error::InvalidArgument(_))
                    ),
                    "{name}: {err:?}"
                );
                // The batched parser refuses it too (in TensorFlow's batched words, which
                // formats_more.json checks).
                let batch_err = parse_example(&[serialized], &spec)
                    .err()
                    .unwrap_or_else(|| panic!("{name}: batch parsed"));
                assert!(
                    matches!(
                        batch_err.downcast_ref::<streamload::Error>(),
                        Some(streamload::Error::InvalidArgument(_))
                    ),
                    "{batch_err}"
                );
                err.to_string()
            }
        };
        // TensorFlow prints the serialized bytes C-escaped; compare up to the value.
        let key_phrase = core.split(", value: ").next().unwrap_or(core);
        assert!(
            message.contains(key_phrase),
            "{name}: {message:?} does not contain {key_phrase:?}"
        );
    }
}

#[test]
fn specs_that_tensorflow_refuses_are_refused() {
    let refused = [
        ParseSpec::new([(
            "x",
            FeatureSpec::fixed_len([2], DType::Int64).with_default(vec![1i64, 2, 3]),
        )]),
        ParseSpec::new([(
            "x",
            FeatureSpec::fixed_len([], DType::Int64).with_default(1.5f32),
        )]),
        ParseSpec::new([
            ("x", FeatureSpec::var_len(DType::Int64)),
            ("x", FeatureSpec::var_len(DType::Float32)),
        ]),
    ];
    for spec in refused {
        assert!(spec.is_err());
    }
}

#[test]
fn unpacked_lists_duplicate_keys_and_garbage_never_panic() {
    use prost::Message;
    use streamload::format::{Example, Feature, FloatList, Kind};
    // Unpacked floats (wire type 5), as old writers produce: Example{features{feature{
    // key:"f" value{float_list{value: 1.5 value: 2.5}}}}}.
    let list = [0x0d, 0, 0, 0xc0, 0x3f, 0x0d, 0, 0, 0x20, 0x40]; // 1.5, 2.5
    let mut feature = vec![0x12, list.len() as u8];
    feature.extend_from_slice(&list);
    let mut entry = vec![0x0a, 1, b'f', 0x12, feature.len() as u8];
    entry.extend_from_slice(&feature);
    let mut features = vec![0x0a, entry.len() as u8];
    features.extend_from_slice(&entry);
    let mut example = vec![0x0a, features.len() as u8];
    example.extend_from_slice(&features);
    let spec = ParseSpec::new([("f", FeatureSpec::fixed_len([2], DType::Float32))]).expect("spec");
    let parsed = parse_single_example(&Bytes::from(example), &spec).expect("parse");
    assert_eq!(
        parsed.dense("f").expect("f").as_slice::<f32>(),
        Some(&[1.5, 2.5][..])
    );

    // Two Examples concatenated merge; the later entry for a key wins, as protobuf decides.
    let a = Example::new()
        .with_floats("f", [1.0, 2.0])
        .encode_to_bytes();
    let mut b = Example::default();
    b.features.get_or_insert_default().feature.insert(
        "f".into(),
        Feature {
            kind: Some(Kind::FloatList(FloatList {
                value: vec![3.0, 4.0],
            })),
        },
    );
    let joined = Bytes::from([&a[..], &b.encode_to_vec()[..]].concat());
    let parsed = parse_single_example(&joined, &spec).expect("parse");
    assert_eq!(
        parsed.dense("f").expect("f").as_slice::<f32>(),
        Some(&[3.0, 4.0][..])
    );

    // Every prefix of a real record is refused or parsed, never a panic.
    let record = Example::new()
        .with_floats("f", [1.0, 2.0])
        .with_bytes("s", ["abc"])
        .encode_to_bytes();
    for end in 0..record.len() {
        let _ = parse_single_example(&record.slice(..end), &spec);
    }
}

/// A length-delimited protobuf field (`tag`, wire type 2) holding `body`.
fn field(tag: u8, body: &[u8]) -> Vec<u8> {
    assert!(body.len() < 128, "one-byte lengths only");
    let mut out = vec![tag << 3 | 2, body.len() as u8];
    out.extend_from_slice(body);
    out
}

/// An `Example` of map entries `(key, Feature message bytes)`, in this order.
fn example_of(entries: &[(&str, Vec<u8>)]) -> Bytes {
    let mut features = Vec::new();
    for (key, feature) in entries {
        let mut entry = field(1, key.as_bytes());
        entry.extend(field(2, feature));
        features.extend(field(1, &entry));
    }
    Bytes::from(field(1, &features))
}

fn floats(values: &[f32]) -> Vec<u8> {
    let packed: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    field(2, &field(1, &packed)) // Feature.float_list { value: packed }
}

/// TensorFlow's fast parser's rules (formats_more.json holds TensorFlow's own outputs for
/// each; these are the same rules on records built here).
#[test]
fn the_last_entry_wins_the_first_list_counts_and_the_last_problem_reports() {
    let spec = ParseSpec::new([("f", FeatureSpec::fixed_len([2], DType::Float32))]).expect("spec");
    let f = |record: &Bytes| -> anyhow::Result<Vec<f32>> {
        let parsed = parse_single_example(record, &spec)?;
        Ok(parsed
            .dense("f")?
            .as_slice::<f32>()
            .unwrap_or_default()
            .to_vec())
    };
    // Packed bytes that are not whole floats: the whole ones count, the rest is unread.
    let broken = field(2, &field(1, &[0, 0, 0]));
    let err = f(&example_of(&[("f", broken.clone())])).expect_err("no float");
    assert_eq!(
        err.to_string(),
        "Key: f.  Can't parse serialized Example: Some float_list slice was not parsed."
    );
    // A later map entry for the key replaces an earlier one.
    let replaced = example_of(&[("f", broken.clone()), ("f", floats(&[1.0, 2.0]))]);
    assert_eq!(f(&replaced).expect("replaced"), [1.0, 2.0]);
    // Within one Feature, the first list is the only one read.
    let mut int_then_float = field(3, &field(1, &[7])); // int64_list { value: [7] }
    int_then_float.extend(floats(&[3.0, 4.0]));
    let err = f(&example_of(&[("f", int_then_float)])).expect_err("an int64 list");
    assert!(
        err.to_string()
            .contains("Data types don't match. Data type: int64 but expected type: float"),
        "{err}"
    );
    let mut halves = floats(&[5.0]);
    halves.extend(floats(&[6.0]));
    assert!(f(&example_of(&[("f", halves)])).is_err(), "one value read");
    // Unknown features are skipped, even when they would not decode.
    let with_unknown = example_of(&[("other", broken.clone()), ("f", floats(&[8.0, 9.0]))]);
    assert_eq!(f(&with_unknown).expect("unknown skipped"), [8.0, 9.0]);

    // With several problems, the entry nearest the end reports; a missing required feature
    // only when no entry has a problem.
    let two = ParseSpec::new([
        ("b", FeatureSpec::fixed_len([2], DType::Float32)),
        ("a", FeatureSpec::fixed_len([], DType::Int64)),
        ("c", FeatureSpec::fixed_len([], DType::String)),
    ])
    .expect("spec");
    let record = example_of(&[("a", floats(&[1.0])), ("b", broken)]);
    let err = parse_single_example(&record, &two).expect_err("three problems");
    assert_eq!(
        err.to_string(),
        "Key: b.  Can't parse serialized Example: Some float_list slice was not parsed."
    );
    let batched = parse_example(&[record], &two).expect_err("three problems");
    assert_eq!(
        batched.to_string(),
        "Name: <unknown>, Key: b, Index: 0.  Number of float values != expected.  Values size: \
         0 but output shape: [2]"
    );
    let err = parse_single_example(&example_of(&[("b", floats(&[1.0, 2.0]))]), &two)
        .expect_err("missing");
    assert_eq!(
        err.to_string(),
        "Feature: a (data type: int64) is required but could not be found."
    );
}

#[test]
fn take_dense_moves_a_feature_out_once() {
    let spec = ParseSpec::new([
        ("f", FeatureSpec::fixed_len([2], DType::Float32)),
        ("s", FeatureSpec::var_len(DType::Float32)),
    ])
    .expect("spec");
    let record = example_of(&[("f", floats(&[1.0, 2.0])), ("s", floats(&[3.0]))]);
    let mut parsed = parse_single_example(&record, &spec).expect("parse");
    let f = parsed.take_dense("f").expect("dense");
    assert_eq!(
        (f.shape(), f.as_slice::<f32>()),
        (&[2][..], Some(&[1.0, 2.0][..]))
    );
    for again in [parsed.take_dense("f"), parsed.dense("f").cloned()] {
        let err = again.expect_err("taken");
        assert!(err.to_string().contains("feature f was taken out"), "{err}");
    }
    // A sparse feature is not taken, and stays.
    assert!(parsed.take_dense("s").is_err());
    assert_eq!(parsed.sparse("s").expect("still there").dense_shape(), &[1]);
    assert_eq!(
        parsed.iter().map(|(name, _)| name).collect::<Vec<_>>(),
        ["s"]
    );
    assert!(parsed.get("f").is_none());
}

#[test]
fn names_that_share_their_first_bytes_are_told_apart() {
    // Names of 0, 5, 8, 12 and 13 bytes, some with the same first 8 bytes.
    let names = ["", "label", "image/en", "image/height", "image/encoded"];
    let spec = ParseSpec::new(
        names
            .iter()
            .map(|name| (*name, FeatureSpec::fixed_len([], DType::Float32))),
    )
    .expect("spec");
    let entries: Vec<(&str, Vec<u8>)> = names
        .iter()
        .enumerate()
        .map(|(i, name)| (*name, floats(&[i as f32])))
        .collect();
    let record = example_of(&entries);
    let parsed = parse_single_example(&record, &spec).expect("parse");
    for (i, name) in names.iter().enumerate() {
        assert_eq!(
            parsed.dense(name).expect(name).as_slice::<f32>(),
            Some(&[i as f32][..]),
            "{name}"
        );
    }
    assert!(parsed.dense("image/encodeX").is_err());
    assert!(parsed.dense("image/e").is_err());
}

/// `formats_more.json` (scripts/tf_formats_more.py): `parse_single_example` and the batched
/// `parse_example` on shapes, defaults, wrong counts and types, sequences, sparse features,
/// duplicate keys, unknown fields and malformed bytes, as TensorFlow 2.21 parsed them (outputs,
/// and errors with TensorFlow's messages).
#[test]
fn formats_more_parse_cases_match_tensorflow() {
    let path = PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/tensorflow/formats_more.json"
    ));
    let json: Value =
        serde_json::from_str(&std::fs::read_to_string(path).expect("read")).expect("JSON");
    let cases = json["parse"].as_array().expect("parse cases");
    assert!(cases.len() >= 90, "{}", cases.len());
    for case in cases {
        let name = case["name"].as_str().expect("name");
        let spec = parse_spec(&case["spec"]);
        let result = spec.and_then(|spec| match case["mode"].as_str() {
            Some("batch") => {
                let records: Vec<Bytes> = case["serialized_b64"]
                    .as_array()
                    .expect("records")
                    .iter()
                    .map(|r| b64(r.as_str().expect("b64")))
                    .collect();
                parse_example(&records, &spec)
            }
            _ => {
                let serialized = b64(case["serialized_b64"].as_str().expect("b64"));
                view_agrees(name, &serialized, &spec);
                parse_single_example(&serialized, &spec)
            }
        });
        if case["ok"].as_bool() == Some(true) {
            let parsed = result.unwrap_or_else(|e| panic!("{name}: {e}"));
            let want = case["output"].as_object().expect("output");
            assert_eq!(want.len(), parsed.iter().count(), "{name}");
            for (feature, want) in want {
                let got = parsed.get(feature).expect("feature in output");
                check(feature, want, got).unwrap_or_else(|e| panic!("{name}: {e}"));
            }
            continue;
        }
        let error = &case["error"];
        let core = error["core_message"].as_str().expect("core message");
        let err = result
            .err()
            .unwrap_or_else(|| panic!("{name}: parsed, TensorFlow refused: {core}"));
        assert!(
            matches!(
                err.downcast_ref::<streamload::Error>(),
                Some(streamload::Error::InvalidArgument(_))
            ),
            "{name}: {err:?}"
        );
        // A TypeError is Python failing to convert a default to the feature's type: Rust's
        // typed defaults cannot be converted either, and the spec is refused (above).
        if error["class"] == "TypeError" {
            continue;
        }
        // TensorFlow prints the serialized bytes raw; compare up to them.
        let key_phrase = core.split(", value: ").next().unwrap_or(core);
        let message = err.to_string();
        assert!(
            message.contains(key_phrase),
            "{name}: {message:?} does not contain {key_phrase:?}"
        );
    }
}

#[test]
fn scalar_reads_one_value_and_says_what_else_a_feature_holds() -> anyhow::Result<()> {
    use streamload::format::Example;
    let spec = ParseSpec::new([
        ("label", FeatureSpec::fixed_len([], DType::Int64)),
        ("tag", FeatureSpec::var_len(DType::String)),
        ("tags", FeatureSpec::var_len(DType::String)),
        ("none", FeatureSpec::var_len(DType::Float32)),
    ])?;
    let record = Example::new()
        .with_int64("label", [3])
        .with_bytes("tag", ["cat"])
        .with_bytes("tags", ["a", "b", "c"])
        .encode_to_bytes();
    let parsed = parse_single_example(&record, &spec)?;
    assert_eq!(parsed.scalar::<i64>("label")?, 3);
    // A VarLen feature that holds one value is a scalar too.
    assert_eq!(parsed.scalar::<Bytes>("tag")?, Bytes::from_static(b"cat"));
    fn message<T: std::fmt::Debug>(r: anyhow::Result<T>) -> String {
        let e = r.expect_err("an error");
        assert!(matches!(
            e.downcast_ref::<streamload::Error>(),
            Some(streamload::Error::InvalidArgument(_))
        ));
        e.to_string()
    }
    assert_eq!(
        message(parsed.scalar::<Bytes>("tags")),
        "feature tags holds 3 values (shape [3]), not one"
    );
    assert_eq!(
        message(parsed.scalar::<f32>("none")),
        "feature none holds 0 values (shape [0]), not one"
    );
    assert_eq!(
        message(parsed.scalar::<Bytes>("label")),
        "feature label holds int64 values, not string"
    );
    assert_eq!(
        message(parsed.scalar::<i64>("weight")),
        "no feature weight in the spec"
    );
    // A batch holds a value per record.
    let batch = parse_example(&[record.clone(), record], &spec)?;
    assert_eq!(
        message(batch.scalar::<i64>("label")),
        "feature label holds 2 values (shape [2]), not one"
    );
    Ok(())
}

/// A shape of 2^40 values once aborted the process ("memory allocation of 8796093022208 bytes
/// failed") at the first parse; such shapes (past 2^28 values, or overflowing) are refused
/// when the spec is built, naming the feature.
#[test]
fn absurd_shapes_are_refused_when_the_spec_is_built() {
    use streamload::format::{FeatureSpec, ParseSpec};
    use streamload::tensor::DType;
    let absurd = [
        FeatureSpec::fixed_len([1 << 20, 1 << 20], DType::Float32),
        FeatureSpec::fixed_len([1 << 40], DType::Int64),
        FeatureSpec::fixed_len([usize::MAX, 2], DType::String),
        FeatureSpec::fixed_len_sequence([1 << 29], DType::Float32, true),
    ];
    for spec in absurd {
        let err = ParseSpec::new([("huge", spec.clone())]).expect_err("refused");
        assert!(
            matches!(
                err.downcast_ref::<streamload::Error>(),
                Some(streamload::Error::InvalidArgument(m)) if m.contains("feature huge")
            ),
            "{spec:?}: {err:#}"
        );
    }
    // The largest allowed shape builds, and a record parses without reserving its size.
    let spec = ParseSpec::new([("big", FeatureSpec::fixed_len([1 << 28], DType::Int64))])
        .expect("2^28 values are allowed");
    let record = streamload::format::Example::new()
        .with_int64("big", [1, 2, 3])
        .encode_to_bytes();
    let err = streamload::format::parse_single_example(&record, &spec).expect_err("3 values");
    assert!(format!("{err:#}").contains("big"), "{err:#}");
}

fn ragged_expected() -> Value {
    let path = PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/tensorflow/ragged_examples.expected.json"
    ));
    serde_json::from_str(&std::fs::read_to_string(path).expect("read")).expect("JSON")
}

/// The records of `ragged_examples.tfrecord`, read with streamload's TFRecord reader.
fn ragged_records() -> Vec<Bytes> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/tensorflow/ragged_examples.tfrecord"
    );
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        streamload::format::TFRecordDataset::new([path])
            .build()
            .collect()
            .await
            .expect("read the TFRecord file")
    })
}

/// `RaggedFeature`s (`ragged_examples.expected.json`, written by
/// `scripts/make_ragged_examples.py`): every record of the TFRecord file alone, and all of
/// them as one batch, exactly as TensorFlow parsed them (values and row splits).
#[test]
fn ragged_features_match_tensorflow_alone_and_batched() {
    let expected = ragged_expected();
    let spec = parse_spec(&expected["spec"]).expect("spec");
    let records = ragged_records();
    let singles = expected["records"].as_array().expect("records");
    assert_eq!(records.len(), singles.len());
    for (record, want) in records.iter().zip(singles) {
        let index = &want["index"];
        assert_eq!(
            *record,
            b64(want["serialized_b64"].as_str().expect("b64")),
            "record {index}"
        );
        view_agrees(&format!("ragged record {index}"), record, &spec);
        let parsed =
            parse_single_example(record, &spec).unwrap_or_else(|e| panic!("record {index}: {e}"));
        let want = want["parse_single_example"].as_object().expect("output");
        assert_eq!(want.len(), parsed.iter().count(), "record {index}");
        for (name, want) in want {
            check(name, want, parsed.get(name).expect("feature"))
                .unwrap_or_else(|e| panic!("record {index}: {e}"));
        }
    }
    let parsed = parse_example(&records, &spec).expect("batch parse");
    let want = expected["parse_example_batch"].as_object().expect("output");
    assert_eq!(want.len(), parsed.iter().count());
    for (name, want) in want {
        check(name, want, parsed.get(name).expect("feature")).unwrap_or_else(|e| panic!("{e}"));
    }
}

/// The edge cases: type mismatches (TensorFlow's messages, the record named in a batch),
/// map entries with no list, empty batches, `RaggedFeature` beside the other features,
/// `value_key`s shared with another feature.
#[test]
fn ragged_edge_cases_match_tensorflow() {
    let expected = ragged_expected();
    let cases = expected["cases"].as_array().expect("cases");
    assert!(cases.len() >= 10);
    for case in cases {
        let name = case["name"].as_str().expect("name");
        let records: Vec<Bytes> = case["serialized_b64"]
            .as_array()
            .expect("records")
            .iter()
            .map(|r| b64(r.as_str().expect("b64")))
            .collect();
        let batched = case["batched"].as_bool().expect("batched");
        let spec = parse_spec(&case["spec"]);
        if name == "value_key_shared_by_two_ragged" {
            // TensorFlow reads the key for both; streamload refuses the spec (documented).
            let err = spec.expect_err("a key read twice is refused");
            assert_eq!(
                err.to_string(),
                "feature b: its value_key ints is read by feature a too (streamload reads \
                 each key of a record for one feature)"
            );
            continue;
        }
        let result = spec.and_then(|spec| {
            if batched {
                parse_example(&records, &spec)
            } else {
                parse_single_example(&records[0], &spec)
            }
        });
        if case["ok"].as_bool() == Some(true) {
            let parsed = result.unwrap_or_else(|e| panic!("{name}: {e}"));
            let want = case["output"].as_object().expect("output");
            assert_eq!(want.len(), parsed.iter().count(), "{name}");
            for (feature, want) in want {
                check(feature, want, parsed.get(feature).expect("feature"))
                    .unwrap_or_else(|e| panic!("{name}: {e}"));
            }
            continue;
        }
        let err = result
            .err()
            .unwrap_or_else(|| panic!("{name}: parsed, TensorFlow refused"));
        assert!(
            matches!(
                err.downcast_ref::<streamload::Error>(),
                Some(streamload::Error::InvalidArgument(_))
            ),
            "{name}: {err:?}"
        );
        let core = case["error"]["core_message"].as_str().expect("message");
        if name == "value_key_shared_with_varlen" {
            // TensorFlow refuses the spec in its own words; streamload names the features.
            assert!(err.to_string().contains("value_key ints"), "{name}: {err}");
            continue;
        }
        assert_eq!(err.to_string(), core, "{name}");
    }
}

#[test]
fn ragged_accessors_name_the_feature_and_take_moves_it_out() -> anyhow::Result<()> {
    use streamload::format::Example;
    let spec = ParseSpec::new([
        ("r", FeatureSpec::ragged(DType::Float32)),
        (
            "d",
            FeatureSpec::fixed_len([], DType::Int64).with_default(0),
        ),
    ])?;
    let records = [
        Example::new()
            .with_floats("r", [1.0, 2.0])
            .encode_to_bytes(),
        Example::new().encode_to_bytes(),
    ];
    let mut batch = parse_example(&records, &spec)?;
    assert_eq!(
        batch.dense("r").unwrap_err().to_string(),
        "feature r is ragged"
    );
    assert_eq!(
        batch.sparse("r").unwrap_err().to_string(),
        "feature r is ragged"
    );
    assert_eq!(
        batch.ragged("d").unwrap_err().to_string(),
        "feature d is dense"
    );
    assert_eq!(
        batch.scalar::<f32>("r").unwrap_err().to_string(),
        "feature r holds 2 values (a ragged batch), not one"
    );
    assert!(batch.take_ragged("d").is_err());
    assert!(batch.take_dense("r").is_err());
    let r = batch.take_ragged("r")?;
    assert_eq!(r.row_splits(), [0, 2, 2]);
    assert_eq!(r.into_ragged::<f32>()?.to_vecs(), [vec![1.0, 2.0], vec![]]);
    assert!(batch.ragged("r").is_err(), "taken out");
    assert_eq!(batch.dense("d")?.as_slice::<i64>(), Some(&[0, 0][..]));

    // with_value_key leaves other kinds alone; with_default leaves Ragged alone.
    assert_eq!(
        FeatureSpec::var_len(DType::Int64).with_value_key("k"),
        FeatureSpec::var_len(DType::Int64)
    );
    assert_eq!(
        FeatureSpec::ragged(DType::Int64).with_default(3),
        FeatureSpec::ragged(DType::Int64)
    );
    // A value_key that is another feature's name is refused, naming both.
    let err = ParseSpec::new([
        ("x", FeatureSpec::fixed_len([], DType::Int64)),
        ("y", FeatureSpec::ragged(DType::Int64).with_value_key("x")),
    ])
    .unwrap_err();
    assert!(
        err.to_string().starts_with("feature y: its value_key x"),
        "{err}"
    );
    Ok(())
}

/// Large specs (searched by halves) with a renamed feature still find every key.
#[test]
fn a_renamed_ragged_feature_in_a_large_spec_is_found() -> anyhow::Result<()> {
    use streamload::format::Example;
    let mut features: Vec<(String, FeatureSpec)> = (0..12)
        .map(|i| (format!("f{i:02}"), FeatureSpec::var_len(DType::Int64)))
        .collect();
    features.push((
        "a".into(),
        FeatureSpec::ragged(DType::Int64).with_value_key("zz"),
    ));
    let spec = ParseSpec::new(features)?;
    let record = Example::new()
        .with_int64("zz", [5, 6])
        .with_int64("f07", [7])
        .encode_to_bytes();
    let one = parse_single_example(&record, &spec)?;
    assert_eq!(one.dense("a")?.as_slice::<i64>(), Some(&[5, 6][..]));
    assert_eq!(one.sparse("f07")?.values(), &Values::Int64(vec![7]));
    assert!(one.get("zz").is_none(), "zz is a key, not a feature's name");
    let batch = parse_example(&[record.clone(), record], &spec)?;
    assert_eq!(batch.ragged("a")?.row_splits(), [0, 2, 4]);
    Ok(())
}
