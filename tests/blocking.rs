//! `Dataset::iter_blocking`: an epoch as a blocking `Iterator` for synchronous code, run on
//! streamload's own runtime; dropping it stops the work the epoch spawned.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

use streamload::{AUTOTUNE, Dataset};

/// How long a test waits for something that must happen before it calls it a hang (the
/// checks do not depend on it: it only turns a hang into a failure).
const HANG: Duration = Duration::from_secs(30);

/// A pipeline with every kind of spawned work: blocking workers, async tasks, a producer task.
fn pipeline() -> Dataset<Vec<i64>> {
    Dataset::range(0, 1_000)
        .map_parallel(AUTOTUNE, |x| x * 2)
        .map_async(4, |x| async move { x + 1 })
        .batch(64)
        .prefetch(2)
}

fn expected() -> Vec<Vec<i64>> {
    let all: Vec<i64> = (0..1_000).map(|x| x * 2 + 1).collect();
    all.chunks(64).map(<[i64]>::to_vec).collect()
}

#[test]
fn a_plain_for_loop_runs_the_epoch_without_a_runtime() -> anyhow::Result<()> {
    let ds = pipeline();
    let mut batches = Vec::new();
    for batch in ds.iter_blocking() {
        batches.push(batch?);
    }
    assert_eq!(batches, expected());
    // The recipe runs again, as with `iter`.
    let again: Vec<Vec<i64>> = ds.iter_blocking().collect::<anyhow::Result<_>>()?;
    assert_eq!(again, expected());
    Ok(())
}

#[test]
fn it_ends_once_and_stays_ended() {
    let mut epoch = Dataset::range(0, 2).iter_blocking();
    assert_eq!(epoch.next().map(|r| r.ok()), Some(Some(0)));
    assert_eq!(epoch.next().map(|r| r.ok()), Some(Some(1)));
    assert!(epoch.next().is_none());
    assert!(epoch.next().is_none());
}

#[test]
fn error_elements_arrive_in_place_and_the_epoch_goes_on() {
    let ds = Dataset::range(0, 6)
        .try_map_parallel(2, |x| {
            anyhow::ensure!(x % 3 != 1, "bad element {x}");
            Ok(x)
        })
        .prefetch(1);
    let items: Vec<Result<i64, String>> = ds
        .iter_blocking()
        .map(|r| r.map_err(|e| e.to_string()))
        .collect();
    assert_eq!(
        items,
        [
            Ok(0),
            Err("bad element 1".into()),
            Ok(2),
            Ok(3),
            Err("bad element 4".into()),
            Ok(5)
        ]
    );
}

#[test]
fn stats_count_the_epoch() {
    let ds = Dataset::range(0, 10).filter(|x| x % 2 == 0);
    let mut epoch = ds.iter_blocking();
    assert_eq!(epoch.by_ref().filter_map(Result::ok).count(), 5);
    let stages = epoch.stats().snapshot();
    let count = |name| stages.iter().find(|s| s.name == name).map(|s| s.elements);
    assert_eq!((count("range"), count("filter")), (Some(10), Some(5)));
}

/// From a single-threaded runtime's only thread: the epoch runs on streamload's runtime, so
/// blocking this thread neither panics nor deadlocks (even with stages that spawn).
#[tokio::test(flavor = "current_thread")]
async fn inside_a_current_thread_runtime_it_neither_panics_nor_deadlocks() -> anyhow::Result<()> {
    let batches: Vec<Vec<i64>> = pipeline().iter_blocking().collect::<anyhow::Result<_>>()?;
    assert_eq!(batches, expected());
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inside_a_multi_thread_runtime_it_neither_panics_nor_deadlocks() -> anyhow::Result<()> {
    let batches: Vec<Vec<i64>> = pipeline().iter_blocking().collect::<anyhow::Result<_>>()?;
    assert_eq!(batches, expected());
    Ok(())
}

#[test]
fn inside_futures_block_on_it_neither_panics_nor_deadlocks() -> anyhow::Result<()> {
    let batches: anyhow::Result<Vec<Vec<i64>>> =
        futures::executor::block_on(async { pipeline().iter_blocking().collect() });
    assert_eq!(batches?, expected());
    Ok(())
}

#[test]
fn it_makes_at_most_one_element_ahead_of_the_caller() {
    let made = Arc::new(AtomicU64::new(0));
    let counter = Arc::clone(&made);
    // An endless source with no spawned stage: elements are made only when the epoch's task
    // polls for them.
    let ds = Dataset::counter(0, 1).map(move |x| {
        counter.fetch_add(1, Ordering::SeqCst);
        x
    });
    let mut epoch = ds.iter_blocking();
    for expected in 0..3 {
        assert_eq!(epoch.next().map(|r| r.ok()), Some(Some(expected)));
    }
    // Give the task every chance to run ahead; it may make the fourth element, no more.
    std::thread::sleep(Duration::from_millis(50));
    let n = made.load(Ordering::SeqCst);
    assert!((3..=4).contains(&n), "{n} elements made after 3 were taken");
}

/// Sends nothing; its receiver sees it dropped when the task holding it is dropped.
struct Witness(#[allow(dead_code)] mpsc::Sender<()>); // held only to be dropped

#[test]
fn dropping_it_stops_the_tasks_the_epoch_spawned() {
    let (tx, rx) = mpsc::channel::<()>();
    let slot = Arc::new(Mutex::new(Some(Witness(tx))));
    let started = Arc::new(AtomicU64::new(0));
    let (s, st) = (Arc::clone(&slot), Arc::clone(&started));
    // Element 1's task never finishes on its own and holds the witness; a producer task
    // (prefetch) and blocking workers (map_parallel) sit upstream and downstream of it.
    let ds = Dataset::counter(0, 1)
        .map_parallel(2, |x| x)
        .map_async(2, move |x| {
            let witness = if x == 1 {
                s.lock().expect("not poisoned").take()
            } else {
                None
            };
            st.fetch_add(1, Ordering::SeqCst);
            async move {
                if let Some(witness) = witness {
                    let _held = witness;
                    futures::future::pending::<()>().await;
                }
                x
            }
        })
        .prefetch(2);
    let mut epoch = ds.iter_blocking();
    assert_eq!(epoch.next().map(|r| r.ok()), Some(Some(0)));
    // Wait until element 1's call has run (its task holds the witness).
    let deadline = std::time::Instant::now() + HANG;
    while slot.lock().expect("not poisoned").is_some() {
        assert!(
            std::time::Instant::now() < deadline,
            "element 1 never started"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(
        rx.try_recv(),
        Err(mpsc::TryRecvError::Empty),
        "the task is still running"
    );
    drop(epoch);
    // The witness is dropped with the aborted task: the channel disconnects (a hang here
    // means the epoch's tasks outlived the iterator).
    assert_eq!(
        rx.recv_timeout(HANG),
        Err(mpsc::RecvTimeoutError::Disconnected)
    );
    // And no new calls start after the drop settles.
    std::thread::sleep(Duration::from_millis(50));
    let settled = started.load(Ordering::SeqCst);
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(
        started.load(Ordering::SeqCst),
        settled,
        "calls after the drop"
    );
}

#[test]
fn it_is_send_and_sync() {
    fn send_sync<T: Send + Sync>(_: &T) {}
    send_sync(&Dataset::range(0, 1).iter_blocking());
}
