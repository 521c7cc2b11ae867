//! `examples/tiny_lm.rs` run as a process: a tiny language model trained on packed, mixed
//! sequences, killed (`SIGKILL`) after it saved step 30, resumed, and the loss curve equal
//! to an uninterrupted run's, bit for bit (the example checks it and fails otherwise).
#![cfg(feature = "candle")]

use std::process::Command;

#[test]
fn a_killed_and_resumed_training_has_the_uninterrupted_loss_curve() {
    let exe = std::env::current_exe().expect("test binary path");
    let profile_dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("target/<profile>");
    let out = Command::new(profile_dir.join("examples").join("tiny_lm"))
        .output()
        .expect("run examples/tiny_lm (built by cargo test)");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("SIGKILL"), "{stdout}");
    assert!(stdout.contains("resumed at step"), "{stdout}");
    assert!(
        stdout.contains("the same 60 losses, bit for bit"),
        "{stdout}"
    );
}
