//! The `tfrecord` command-line tool (`examples/tfrecord.rs`), run as a process on TensorFlow's
//! files: count, verify (exit code 1 and the damaged record's index and offset), head and cat
//! (payloads as JSON or base64, Examples as JSON), index (DALI's format, beside the files or into
//! a directory), and write (text lines as bytes, JSON
//! Examples, GZIP/ZLIB; on an error, a readable file of the lines before it) then read back.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

/// The example binary `cargo test` built beside this test (target/<profile>/examples).
fn tool() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    let profile_dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("target/<profile>");
    profile_dir.join("examples").join("tfrecord")
}

fn data(name: &str) -> String {
    format!(
        "{}/tests/data/tensorflow/{name}",
        env!("CARGO_MANIFEST_DIR")
    )
}

fn run(args: &[&str], stdin: Option<&str>) -> Output {
    run_bytes(args, stdin.unwrap_or("").as_bytes())
}

fn run_bytes(args: &[&str], stdin: &[u8]) -> Output {
    let mut child = Command::new(tool())
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run examples/tfrecord (built by cargo test)");
    let mut input = child.stdin.take().expect("stdin");
    input.write_all(stdin).expect("stdin");
    drop(input);
    child.wait_with_output().expect("output")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn count_and_verify_tensorflows_files() {
    let out = run(
        &["count", &data("plain.tfrecord"), &data("gzip.tfrecord.gz")],
        None,
    );
    assert!(out.status.success(), "{out:?}");
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].starts_with("100\t"), "{text}");
    assert!(lines[1].starts_with("100\t"), "{text}");
    assert_eq!(lines[2], "200\ttotal");

    let out = run(
        &[
            "verify",
            &data("plain.tfrecord"),
            &data("corrupt_data_crc.tfrecord"),
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let text = stdout(&out);
    assert!(
        text.lines()
            .next()
            .is_some_and(|l| l.starts_with("ok\t100 records")),
        "{text}"
    );
    let damaged = text.lines().nth(1).expect("second line");
    assert!(
        damaged.starts_with("DAMAGED\trecord 3\toffset "),
        "{damaged}"
    );
    assert!(damaged.contains("corrupted record"), "{damaged}");
    assert!(damaged.ends_with("corrupt_data_crc.tfrecord"), "{damaged}");
}

/// `--report` without `--timing` tells how to time the stages in the tool's own terms (the
/// library's `Options::stats_timing` is out of a command-line user's reach); with it, the
/// report names a bottleneck.
#[test]
fn the_report_advises_the_timing_flag_and_the_flag_times_the_stages() {
    let out = run(&["count", "--report", &data("plain.tfrecord")], None);
    assert!(out.status.success(), "{out:?}");
    let report = stderr(&out);
    let verdict = report
        .lines()
        .find(|l| l.starts_with("bottleneck: "))
        .unwrap_or_default();
    assert_eq!(
        verdict, "bottleneck: unknown: run with --timing to time the stages",
        "{report}"
    );
    assert!(!report.contains("Options::"), "{report}");

    let out = run(
        &["count", "--report", "--timing", &data("plain.tfrecord")],
        None,
    );
    assert!(out.status.success(), "{out:?}");
    let report = stderr(&out);
    let verdict = report
        .lines()
        .find(|l| l.starts_with("bottleneck: "))
        .unwrap_or_default();
    assert!(
        !verdict.is_empty() && !verdict.contains("unknown"),
        "{report}"
    );
    assert!(report.contains("tfrecord "), "{report}");
}

#[test]
fn head_prints_examples_as_json_and_write_round_trips() {
    let out = run(
        &["head", "-n", "2", "--example", &data("examples.tfrecord")],
        None,
    );
    assert!(out.status.success(), "{out:?}");
    let text = stdout(&out);
    assert_eq!(text.lines().count(), 2);
    let first: serde_json::Value =
        serde_json::from_str(text.lines().next().expect("line")).expect("JSON");
    assert!(first.get("id").is_some(), "{first}");

    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("out.tfrecord.gz");
    let path = path.to_str().expect("utf-8 path");
    let out = run(&["write", "--gzip", path], Some("alpha\nbeta\n\ngamma\n"));
    assert!(out.status.success(), "{out:?}");
    let out = run(&["cat", path], None);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(stdout(&out), "alpha\nbeta\n\ngamma\n");
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn b64(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// `plain.expected.jsonl`: TensorFlow's payloads of `plain.tfrecord`, base64.
fn plain_payloads() -> Vec<Vec<u8>> {
    use base64::Engine;
    std::fs::read_to_string(data("plain.expected.jsonl"))
        .expect("plain.expected.jsonl")
        .lines()
        .map(|line| {
            let v: serde_json::Value = serde_json::from_str(line).expect("JSON");
            base64::engine::general_purpose::STANDARD
                .decode(v["b64"].as_str().expect("b64"))
                .expect("base64")
        })
        .collect()
}

#[test]
fn write_takes_each_line_as_bytes_and_cat_base64_gives_them_back() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("w1.tfrecord");
    let path = path.to_str().expect("utf-8 path");
    // Not UTF-8, `\r\n`, an empty line, a last line without `\n`.
    let out = run_bytes(&["write", path], b"ok\n\xffbad\r\n\nlast");
    assert!(out.status.success(), "{out:?}");
    assert!(stderr(&out).contains("wrote 4 records"), "{}", stderr(&out));
    let out = run(&["cat", "--base64", path], None);
    assert!(out.status.success(), "{out:?}");
    let want: Vec<String> = [&b"ok"[..], b"\xffbad", b"", b"last"]
        .iter()
        .map(|p| b64(p))
        .collect();
    assert_eq!(stdout(&out).lines().collect::<Vec<_>>(), want);
    // `head` prints a payload that is not UTF-8 as base64 in JSON.
    let out = run(&["head", "-n", "2", path], None);
    assert_eq!(
        stdout(&out),
        format!("\"ok\"\n{{\"b64\":\"{}\"}}\n", b64(b"\xffbad"))
    );
}

#[test]
fn head_and_cat_base64_print_tensorflows_payloads() {
    let payloads = plain_payloads();
    let out = run(&["head", "-n", "3", &data("plain.tfrecord")], None);
    assert!(out.status.success(), "{out:?}");
    let text = stdout(&out);
    let got: Vec<Vec<u8>> = text
        .lines()
        .map(|line| match serde_json::from_str(line).expect("JSON") {
            serde_json::Value::String(s) => s.into_bytes(),
            other => {
                use base64::Engine;
                base64::engine::general_purpose::STANDARD
                    .decode(other["b64"].as_str().expect("b64"))
                    .expect("base64")
            }
        })
        .collect();
    assert_eq!(got, payloads[..3]);

    let out = run(&["cat", "--base64", &data("gzip.tfrecord.gz")], None);
    assert!(out.status.success(), "{out:?}");
    let want: Vec<String> = payloads.iter().map(|p| b64(p)).collect();
    assert_eq!(stdout(&out).lines().collect::<Vec<_>>(), want);
}

#[test]
fn verify_a_truncated_file_names_the_record_and_its_offset() {
    // `truncated.tfrecord` is `plain.tfrecord` cut inside record 7: TensorFlow's
    // "truncated record at <record 7's start>".
    let offset: usize = plain_payloads()[..7].iter().map(|p| 16 + p.len()).sum();
    let out = run(&["verify", &data("truncated.tfrecord")], None);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let text = stdout(&out);
    assert_eq!(
        text.lines().collect::<Vec<_>>(),
        [format!(
            "DAMAGED\trecord 7\toffset {offset}\ttruncated record\t{}",
            data("truncated.tfrecord")
        )]
    );
    assert!(
        stderr(&out).contains("1 of 1 files damaged"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn write_json_examples_with_zlib_and_read_them_back() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("examples.tfrecord");
    let path = path.to_str().expect("utf-8 path");
    let input = concat!(
        "{\"label\": [1, -9223372036854775808], \"weights\": [0.5, 2], \"text\": [\"hi\", \"there\"]}\n",
        "{\"label\": 9223372036854775807, \"score\": 1.5, \"empty\": []}\n",
    );
    let out = run(&["write", "--json", "--zlib", path], Some(input));
    assert!(out.status.success(), "{out:?}");
    // ZLIB: a 0x78 header; unreadable as an uncompressed file.
    let bytes = std::fs::read(path).expect("written");
    assert_eq!(bytes[0], 0x78, "a ZLIB stream");
    let out = run(&["verify", "--compression", "none", path], None);
    assert_eq!(out.status.code(), Some(1), "{out:?}");

    let out = run(&["head", "--example", "--compression", "zlib", path], None);
    assert!(out.status.success(), "{out:?}");
    let got: Vec<serde_json::Value> = stdout(&out)
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON"))
        .collect();
    assert_eq!(
        got,
        [
            serde_json::json!({
                "label": {"int64_list": [1, i64::MIN]},
                "weights": {"float_list": [0.5, 2.0]},
                "text": {"bytes_list": ["hi", "there"]},
            }),
            serde_json::json!({
                "label": {"int64_list": [i64::MAX]},
                "score": {"float_list": [1.5]},
                "empty": {"int64_list": []},
            }),
        ]
    );
}

#[test]
fn write_stops_at_a_bad_line_naming_it_and_keeps_the_lines_before() {
    let dir = tempfile::tempdir().expect("tempdir");
    for (name, flag) in [("a.tfrecord", None), ("b.tfrecord.gz", Some("--gzip"))] {
        let path = dir.path().join(name);
        let path = path.to_str().expect("utf-8 path");
        let mut args = vec!["write", "--json"];
        args.extend(flag);
        args.push(path);
        // Line 3: an integer outside int64, once written as a float without a word.
        let input =
            "{\"a\": [1]}\n{\"a\": [2, 3]}\n{\"a\": [4, 18446744073709551615]}\n{\"a\": [5]}\n";
        let out = run(&args, Some(input));
        assert_eq!(out.status.code(), Some(2), "{out:?}");
        let err = stderr(&out);
        assert!(err.contains("stdin line 3"), "{err}");
        assert!(err.contains("feature \"a\""), "{err}");
        assert!(
            err.contains("18446744073709551615 is outside int64"),
            "{err}"
        );
        assert!(err.contains("wrote 2 records"), "{err}");
        // The file is whole: every CRC (and the GZIP trailer) checks, two Examples in it.
        let out = run(&["verify", path], None);
        assert!(out.status.success(), "{name}: {out:?}");
        assert!(
            stdout(&out).starts_with("ok\t2 records"),
            "{}",
            stdout(&out)
        );
        let out = run(&["head", "--example", path], None);
        assert_eq!(
            stdout(&out),
            "{\"a\":{\"int64_list\":[1]}}\n{\"a\":{\"int64_list\":[2,3]}}\n"
        );
    }
    // A line that is not JSON fails the same way, naming it.
    let path = dir.path().join("c.tfrecord");
    let path = path.to_str().expect("utf-8 path");
    let out = run_bytes(&["write", "--json", path], b"{\"a\": [1]}\n\xff\n");
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(stderr(&out).contains("stdin line 2"), "{}", stderr(&out));
    let out = run(&["count", path], None);
    assert!(stdout(&out).starts_with("1\t"), "{}", stdout(&out));
}

#[path = "support/s3.rs"]
mod s3;

/// `count` and `cat` take a URL with glob characters for the objects it matches, listed
/// from a real S3 server on 127.0.0.1 (the tool's store comes from the `AWS_*` environment,
/// set explicitly here: endpoint, credentials, region).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn count_and_cat_expand_a_url_glob() {
    use streamload::format::{Compression, TFRecordWriter};
    let server = s3::MemoryS3::default();
    for (shard, records) in [(0, 3usize), (1, 5), (2, 2)] {
        let mut writer = TFRecordWriter::new(Vec::new(), Compression::None);
        for r in 0..records {
            writer
                .write(format!("shard {shard} record {r}").as_bytes())
                .await
                .expect("written");
        }
        let bytes = writer.finish().await.expect("finished");
        let key = format!("shards/train-{shard:05}.tfrecord");
        server.insert("cli-bucket", &key, bytes.into());
    }
    server.insert("cli-bucket", "shards/notes.txt", "not a shard".into());
    let addr = s3::memory_s3_server(server, "AKIDCLI", "cli-secret").await;
    let pattern = "s3://cli-bucket/shards/train-*.tfrecord";
    let run_with_s3 = move |args: Vec<String>| {
        Command::new(tool())
            .args(args)
            .env("AWS_ENDPOINT", format!("http://{addr}"))
            .env("AWS_ALLOW_HTTP", "true")
            .env("AWS_ACCESS_KEY_ID", "AKIDCLI")
            .env("AWS_SECRET_ACCESS_KEY", "cli-secret")
            .env("AWS_REGION", "us-east-1")
            .env_remove("AWS_SESSION_TOKEN")
            .env_remove("AWS_PROFILE")
            .output()
            .expect("run examples/tfrecord")
    };
    let count =
        tokio::task::spawn_blocking(move || run_with_s3(vec!["count".into(), pattern.into()]))
            .await
            .expect("count ran");
    assert!(count.status.success(), "{count:?}");
    let shard = |i: usize| format!("s3://cli-bucket/shards/train-{i:05}.tfrecord");
    assert_eq!(
        stdout(&count),
        format!(
            "3\t{}\n5\t{}\n2\t{}\n10\ttotal\n",
            shard(0),
            shard(1),
            shard(2)
        )
    );
    let cat = tokio::task::spawn_blocking(move || run_with_s3(vec!["cat".into(), pattern.into()]))
        .await
        .expect("cat ran");
    assert!(cat.status.success(), "{cat:?}");
    let want: Vec<String> = [(0, 3), (1, 5), (2, 2)]
        .iter()
        .flat_map(|&(s, n)| (0..n).map(move |r| format!("shard {s} record {r}")))
        .collect();
    assert_eq!(stdout(&cat).lines().collect::<Vec<_>>(), want);

    // `index` over the glob: the indexes are written locally, into --out-dir (needed).
    let out_dir = tempfile::tempdir().expect("temp dir");
    let dir = out_dir.path().to_str().expect("UTF-8").to_string();
    let index = tokio::task::spawn_blocking(move || {
        run_with_s3(vec![
            "index".into(),
            "--out-dir".into(),
            dir,
            pattern.into(),
        ])
    })
    .await
    .expect("index ran");
    assert!(index.status.success(), "{index:?}");
    assert_eq!(stdout(&index).lines().count(), 3, "{}", stdout(&index));
    let idx = std::fs::read_to_string(out_dir.path().join("train-00001.tfrecord.idx")).unwrap();
    let sizes: Vec<&str> = idx.lines().map(|l| l.split(' ').nth(1).unwrap()).collect();
    // "shard 1 record r" is 16 bytes, framed 32.
    assert_eq!(sizes, ["32"; 5]);
    let no_dir =
        tokio::task::spawn_blocking(move || run_with_s3(vec!["index".into(), pattern.into()]))
            .await
            .expect("index ran");
    assert_eq!(no_dir.status.code(), Some(2), "{no_dir:?}");
    assert!(String::from_utf8_lossy(&no_dir.stderr).contains("pass --out-dir"));
}

/// `sequence_examples.expected.json`'s feature (`{"kind", "values"}`, bytes in base64) as the
/// tool prints a feature (`{"int64_list": [...]}`, bytes as text when UTF-8).
fn tf_feature_as_printed(feature: &serde_json::Value) -> serde_json::Value {
    use base64::Engine;
    let Some(kind) = feature["kind"].as_str() else {
        return serde_json::Value::Null;
    };
    let values = feature["values"].as_array().expect("values");
    let values: Vec<serde_json::Value> = if kind == "bytes_list" {
        values
            .iter()
            .map(|v| {
                let bytes = base64::engine::general_purpose::STANDARD
                    .decode(v.as_str().expect("base64"))
                    .expect("base64");
                match String::from_utf8(bytes) {
                    Ok(text) => serde_json::json!(text),
                    Err(e) => serde_json::json!({ "b64": b64(e.as_bytes()) }),
                }
            })
            .collect()
    } else {
        values.clone()
    };
    serde_json::json!({ kind: values })
}

/// `head --example` prints a SequenceExample's feature lists with its context, as TensorFlow
/// read them (`sequence_examples.expected.json`); a record without feature lists is an
/// Example. `--sequence-example` prints every record in the SequenceExample form.
#[test]
fn head_prints_sequence_examples_with_their_feature_lists() {
    let expected: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(data("sequence_examples.expected.json")).expect("expected"),
    )
    .expect("JSON");
    let records = expected["records"].as_array().expect("records");
    assert_eq!(records.len(), 5);
    let as_printed = |record: &serde_json::Value| {
        let context: serde_json::Map<String, serde_json::Value> = record["context"]
            .as_object()
            .expect("context")
            .iter()
            .map(|(k, f)| (k.clone(), tf_feature_as_printed(f)))
            .collect();
        let lists: serde_json::Map<String, serde_json::Value> = record["feature_lists"]
            .as_object()
            .expect("feature_lists")
            .iter()
            .map(|(k, steps)| {
                let steps = steps.as_array().expect("steps");
                (k.clone(), steps.iter().map(tf_feature_as_printed).collect())
            })
            .collect();
        (serde_json::Value::Object(context), lists)
    };
    let lines = |flag: &str| -> Vec<serde_json::Value> {
        let out = run(&["head", flag, &data("sequence_examples.tfrecord")], None);
        assert!(out.status.success(), "{out:?}");
        stdout(&out)
            .lines()
            .map(|l| serde_json::from_str(l).expect("JSON"))
            .collect()
    };
    let sequence = lines("--sequence-example");
    let auto = lines("--example");
    assert_eq!((sequence.len(), auto.len()), (5, 5));
    for (i, record) in records.iter().enumerate() {
        let (context, lists) = as_printed(record);
        let whole = serde_json::json!({ "context": context, "feature_lists": lists });
        assert_eq!(sequence[i], whole, "record {i}");
        if record["has_feature_lists"]
            .as_bool()
            .expect("has_feature_lists")
        {
            assert_eq!(auto[i], whole, "record {i}: its feature lists");
        } else {
            assert_eq!(auto[i], context, "record {i}: an Example");
        }
    }
    // The lists of record 0 are there, not dropped.
    assert_eq!(
        auto[0]["feature_lists"]["tokens"][2],
        serde_json::json!({ "bytes_list": ["sat"] })
    );
}

/// No path, or a pattern that matches nothing, is an error naming the pattern: a script whose
/// glob is empty does not pass.
#[test]
fn count_verify_and_cat_refuse_no_paths_and_an_empty_pattern() {
    let dir = tempfile::tempdir().expect("tempdir");
    let pattern = format!("{}/train-*.tfrecord", dir.path().display());
    for command in ["count", "verify", "cat"] {
        let out = run(&[command], None);
        assert_eq!(out.status.code(), Some(2), "{command}: {out:?}");
        assert!(stdout(&out).is_empty(), "{command}: {}", stdout(&out));
        assert!(stderr(&out).contains("<PATHS>"), "{}", stderr(&out));

        let out = run(&[command, &pattern], None);
        assert_eq!(out.status.code(), Some(2), "{command}: {out:?}");
        assert!(stdout(&out).is_empty(), "{command}: {}", stdout(&out));
        let err = stderr(&out);
        assert!(
            err.contains("No files matched pattern") && err.contains(&pattern),
            "{command}: {err}"
        );
    }
}

/// `count` reports a damaged file and counts the files after it; the total leaves the damaged
/// file out and the exit code is 1. `cat` goes on to the next file the same way.
#[test]
fn count_and_cat_go_on_after_a_damaged_file() {
    let out = run(
        &[
            "count",
            &data("corrupt_data_crc.tfrecord"),
            &data("plain.tfrecord"),
            &data("gzip.tfrecord.gz"),
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert_eq!(
        stdout(&out),
        format!(
            "100\t{}\n100\t{}\n200\ttotal\n",
            data("plain.tfrecord"),
            data("gzip.tfrecord.gz")
        )
    );
    let err = stderr(&out);
    assert!(
        err.contains(&format!(
            "error: {}: corrupted record at ",
            data("corrupt_data_crc.tfrecord")
        )),
        "{err}"
    );
    assert!(err.contains("1 of 3 files could not be counted"), "{err}");

    let payloads = plain_payloads();
    let out = run(
        &[
            "cat",
            "--base64",
            &data("truncated.tfrecord"),
            &data("plain.tfrecord"),
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let want: Vec<String> = payloads[..7]
        .iter()
        .chain(&payloads)
        .map(|p| b64(p))
        .collect();
    assert_eq!(stdout(&out).lines().collect::<Vec<_>>(), want);
    assert!(
        stderr(&out).contains("truncated record at"),
        "{}",
        stderr(&out)
    );
}

/// `tfrecord cat x | head -1`: when the reader of the output goes away, the tool stops
/// quietly with exit code 0, as Unix tools do (no "error: Broken pipe", no exit code 2).
#[test]
fn cat_into_a_closed_pipe_stops_quietly() {
    use std::io::BufRead;
    // plain.tfrecord's payloads (one of 1 MB) are far more than a pipe holds: the tool is
    // still writing when the reader goes.
    let mut child = Command::new(tool())
        .args(["cat", "--base64", &data("plain.tfrecord")])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run examples/tfrecord");
    let mut reader = std::io::BufReader::new(child.stdout.take().expect("stdout"));
    let mut first = String::new();
    reader.read_line(&mut first).expect("a line");
    assert_eq!(first, format!("{}\n", b64(&plain_payloads()[0])));
    drop(reader);
    let out = child.wait_with_output().expect("exit");
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(stderr(&out), "");
}

/// A quoted local pattern is expanded by the tool, as a URL pattern is; a file whose name has
/// glob characters is read as it is.
#[test]
fn count_expands_a_quoted_local_pattern() {
    let dir = tempfile::tempdir().expect("tempdir");
    let write = |name: &str, lines: &str| {
        let path = dir.path().join(name);
        let out = run(&["write", path.to_str().expect("utf-8")], Some(lines));
        assert!(out.status.success(), "{out:?}");
        path.to_str().expect("utf-8").to_string()
    };
    let a = write("train-0.tfrecord", "a\nb\n");
    let b = write("train-1.tfrecord", "c\n");
    write("notes.txt", "not a shard\n");
    let odd = write("odd[1].tfrecord", "x\ny\nz\n");
    let pattern = format!("{}/train-*.tfrecord", dir.path().display());
    let out = run(&["count", &pattern, &odd], None);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        stdout(&out),
        format!("2\t{a}\n1\t{b}\n3\t{odd}\n6\ttotal\n")
    );
    let out = run(&["cat", &pattern], None);
    assert_eq!(stdout(&out), "a\nb\nc\n");
}

/// A file that is not TFRecords: TensorFlow's "corrupted record at 0 (Is this even a TFRecord
/// file?)"; a compressed file read as uncompressed says which `--compression` to give.
#[test]
fn a_file_that_is_not_tfrecords_gets_tensorflows_reminder_and_a_compression_hint() {
    let json = data("examples.expected.json");
    let out = run(&["verify", &json], None);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert_eq!(
        stdout(&out),
        format!(
            "DAMAGED\trecord 0\toffset 0\tcorrupted record (Is this even a TFRecord file?)\t{json}\n"
        )
    );
    let out = run(&["count", &json], None);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(
        stderr(&out).contains(&format!(
            "error: {json}: corrupted record at 0 (Is this even a TFRecord file?) (record 0)\n"
        )),
        "{}",
        stderr(&out)
    );
    for (file, flag) in [
        ("gzip.tfrecord.gz", "--compression gzip"),
        ("zlib.tfrecord.zz", "--compression zlib"),
    ] {
        let out = run(&["count", "--compression", "none", &data(file)], None);
        assert_eq!(out.status.code(), Some(1), "{out:?}");
        let err = stderr(&out);
        assert!(
            err.contains("corrupted record at 0 (Is this even a TFRecord file?)"),
            "{err}"
        );
        assert!(err.contains(flag), "{file}: {err}");
        let out = run(&["verify", "--compression", "none", &data(file)], None);
        assert!(stdout(&out).contains(flag), "{}", stdout(&out));
    }
}

/// `verify --resync` lists every damaged range of a file; `cat --skip-damaged` prints every
/// whole record around them; both exit with 1.
#[test]
fn verify_resync_lists_every_damaged_range_and_cat_skips_them() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("damaged.tfrecord");
    let path = path.to_str().expect("utf-8");
    let lines: String = (0..10).map(|i| format!("r{i}\n")).collect();
    let written = run(&["write", path], Some(&lines));
    assert!(written.status.success(), "{}", stderr(&written));
    // Records of 18 bytes: a flipped payload byte in record 3, a damaged length in record 7.
    let mut bytes = std::fs::read(path).expect("read");
    bytes[3 * 18 + 12] ^= 1;
    bytes[7 * 18 + 2] ^= 1;
    std::fs::write(path, bytes).expect("write");

    let verified = run(&["verify", "--resync", path], None);
    assert_eq!(verified.status.code(), Some(1), "{}", stderr(&verified));
    let shown = stdout(&verified);
    let lines: Vec<&str> = shown.lines().collect();
    assert_eq!(lines.len(), 3, "{shown}");
    assert!(
        lines[0].starts_with("DAMAGED\trecord 3\toffset 66\tbytes 54..72\tcorrupted record"),
        "{shown}"
    );
    assert!(
        lines[1].starts_with("DAMAGED\trecord 7\toffset 126\tbytes 126..144\tcorrupted record"),
        "{shown}"
    );
    assert!(
        lines[2].starts_with("damaged\t8 records read\t2 damaged ranges"),
        "{shown}"
    );
    // Without --resync, verify stops at the first damage, as before.
    let plain = run(&["verify", path], None);
    assert!(
        stdout(&plain).starts_with("DAMAGED\trecord 3\toffset 66"),
        "{}",
        stdout(&plain)
    );

    let cat = run(&["cat", "--skip-damaged", path], None);
    assert_eq!(cat.status.code(), Some(1));
    assert_eq!(stdout(&cat), "r0\nr1\nr2\nr4\nr5\nr6\nr8\nr9\n");
    assert_eq!(
        stderr(&cat).matches("skipped: ").count(),
        2,
        "{}",
        stderr(&cat)
    );
    let cat = run(&["cat", path], None);
    assert_eq!(stdout(&cat), "r0\nr1\nr2\n");
}

#[test]
fn index_writes_dalis_format_beside_the_files_or_into_a_directory() {
    let dir = tempfile::tempdir().unwrap();
    let dali = |name: &str| {
        std::fs::read_to_string(format!(
            "{}/tests/data/tfrecord_index/{name}.idx",
            env!("CARGO_MANIFEST_DIR")
        ))
        .unwrap()
    };
    let names = ["plain.tfrecord", "examples.tfrecord", "empty.tfrecord"];
    let mut paths = Vec::new();
    for name in names {
        let to = dir.path().join(name);
        std::fs::copy(data(name), &to).unwrap();
        paths.push(to.display().to_string());
    }
    let args: Vec<&str> = std::iter::once("index")
        .chain(paths.iter().map(String::as_str))
        .collect();
    let out = run(&args, None);
    assert!(out.status.success(), "{out:?}");
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "{text}");
    assert!(
        lines[0].starts_with("100\t") && lines[0].ends_with("plain.tfrecord.idx"),
        "{text}"
    );
    assert!(lines[1].starts_with("20\t"), "{text}");
    assert!(lines[2].starts_with("0\t"), "{text}");
    for name in names {
        let written = std::fs::read_to_string(dir.path().join(format!("{name}.idx"))).unwrap();
        assert_eq!(written, dali(name), "{name}");
    }

    // Into a directory, one job at a time; a compressed file is an error naming it, the
    // others are indexed, exit code 1.
    let idx = dir.path().join("idx");
    std::fs::create_dir(&idx).unwrap();
    let out = run(
        &[
            "index",
            "-j",
            "1",
            "--out-dir",
            idx.to_str().unwrap(),
            &data("gzip.tfrecord.gz"),
            &data("sequence_examples.tfrecord"),
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("gzip.tfrecord.gz is GZIP-compressed") && err.contains("no random access"),
        "{err}"
    );
    assert_eq!(
        std::fs::read_to_string(idx.join("sequence_examples.tfrecord.idx")).unwrap(),
        dali("sequence_examples.tfrecord")
    );
    assert!(!idx.join("gzip.tfrecord.gz.idx").exists());

    // A damaged file names the record.
    let out = run(
        &[
            "index",
            "--out-dir",
            idx.to_str().unwrap(),
            &data("corrupt_data_crc.tfrecord"),
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("corrupted record") && err.contains("(record 3)"),
        "{err}"
    );
}
