//! The `tfrecord` command-line tool (`examples/tfrecord.rs`), run as a process on TensorFlow's
//! files: count, verify (exit code 1 and the damaged record's index and offset), head as JSON
//! Examples, and write then read back.

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
    let mut child = Command::new(tool())
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run examples/tfrecord (built by cargo test)");
    let mut input = child.stdin.take().expect("stdin");
    input
        .write_all(stdin.unwrap_or("").as_bytes())
        .expect("stdin");
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
