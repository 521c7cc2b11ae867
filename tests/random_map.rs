//! `Dataset::random_map`: each element's randomness derives from (seed, epoch, index), so the
//! output does not depend on the parallelism, the scheduling or the run.

use std::time::Duration;

use streamload::rand::Rng;
use streamload::{Dataset, Options};

/// Noise added to each element; calls take uneven time so that, with several workers, they
/// finish out of order.
fn noisy(parallelism: usize, seed: Option<u64>) -> Dataset<(i64, u32)> {
    Dataset::range(0, 300).random_map(parallelism, seed, |x, rng| {
        if x % 7 == 0 {
            std::thread::sleep(Duration::from_micros(300));
        }
        (x, rng.random::<u32>())
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_output_at_every_parallelism() -> anyhow::Result<()> {
    let reference = noisy(1, Some(11)).collect().await?;
    assert_eq!(reference.len(), 300);
    assert_eq!(
        reference.iter().map(|(x, _)| *x).collect::<Vec<_>>(),
        (0..300).collect::<Vec<_>>()
    );
    for p in [2, 3, 8] {
        assert_eq!(
            noisy(p, Some(11)).collect().await?,
            reference,
            "parallelism {p}"
        );
    }
    // The draws are spread, not one value repeated.
    let mut draws: Vec<u32> = reference.iter().map(|(_, r)| *r).collect();
    draws.sort_unstable();
    draws.dedup();
    assert_eq!(draws.len(), 300);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_epoch_draws_afresh_and_runs_repeat_epoch_by_epoch() -> anyhow::Result<()> {
    let epochs = |ds: Dataset<(i64, u32)>| async move {
        let mut all = Vec::new();
        for _ in 0..3 {
            all.push(ds.collect().await?);
        }
        anyhow::Ok(all)
    };
    let run1 = epochs(noisy(2, Some(5))).await?;
    assert_ne!(run1[0], run1[1]);
    assert_ne!(run1[1], run1[2]);
    // Another recipe with the same seed (another run of the program) gives the same epochs.
    assert_eq!(epochs(noisy(4, Some(5))).await?, run1);
    // Another seed, other draws.
    assert_ne!(noisy(2, Some(6)).collect().await?, run1[0]);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repeat_counts_as_a_new_epoch() -> anyhow::Result<()> {
    let twice = noisy(2, Some(5)).repeat_n(2).collect().await?;
    let (first, second) = twice.split_at(300);
    assert_eq!(first, noisy(1, Some(5)).collect().await?.as_slice());
    assert_eq!(
        first.iter().map(|(x, _)| *x).collect::<Vec<_>>(),
        second.iter().map(|(x, _)| *x).collect::<Vec<_>>()
    );
    assert_ne!(first, second);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_global_seed_seeds_it_and_no_seed_differs_between_recipes() -> anyhow::Result<()> {
    let global = |p| noisy(p, None).with_options(Options::new().seed(99));
    let a = global(1).collect().await?;
    assert_eq!(global(3).collect().await?, a);
    assert_ne!(
        noisy(1, Some(99)).collect().await?,
        a,
        "the stage's seed is derived"
    );
    // Without any seed, two recipes (two runs) draw differently.
    assert_ne!(
        noisy(2, None).collect().await?,
        noisy(2, None).collect().await?
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nondeterministic_order_keeps_each_elements_randomness() -> anyhow::Result<()> {
    let reference = noisy(1, Some(3)).collect().await?;
    let mut fast = noisy(4, Some(3))
        .with_options(Options::new().deterministic(false))
        .collect()
        .await?;
    fast.sort_unstable();
    assert_eq!(fast, reference);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_and_panics_become_error_elements() -> anyhow::Result<()> {
    let ds = Dataset::range(0, 6).try_random_map(2, Some(1), |x, rng| {
        let r: f64 = rng.random();
        match x {
            2 => anyhow::bail!("bad element {x}"),
            4 => panic!("boom"),
            _ => Ok(x as f64 + r),
        }
    });
    let mut epoch = ds.iter();
    let mut out = Vec::new();
    while let Some(item) = futures::StreamExt::next(&mut epoch).await {
        out.push(item.map_err(|e| format!("{e:#}")));
    }
    assert_eq!(out.len(), 6);
    assert!(out[2].as_ref().is_err_and(|e| e.contains("bad element 2")));
    assert!(out[4].as_ref().is_err_and(|e| e.contains("boom")));
    let ok: Vec<i64> = out
        .iter()
        .filter_map(|r| r.as_ref().ok())
        .map(|v| *v as i64)
        .collect();
    assert_eq!(ok, [0, 1, 3, 5]);
    Ok(())
}

#[test]
#[should_panic(expected = "random_map must be greater than zero")]
fn zero_parallelism_panics() {
    let _ = Dataset::range(0, 1).random_map(0, None, |x, _| x);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_epoch_stops_the_workers() -> anyhow::Result<()> {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    let calls = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&calls);
    let ds = Dataset::range(0, 100_000).random_map(2, Some(1), move |x, _| {
        counter.fetch_add(1, Ordering::Relaxed);
        std::thread::sleep(Duration::from_millis(1));
        x
    });
    let mut epoch = ds.iter();
    let first = futures::StreamExt::next(&mut epoch).await;
    assert_eq!(first.transpose()?, Some(0));
    drop(epoch);
    tokio::time::sleep(Duration::from_millis(50)).await;
    let after_drop = calls.load(Ordering::Relaxed);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        calls.load(Ordering::Relaxed),
        after_drop,
        "workers kept calling"
    );
    assert!(after_drop < 1_000, "{after_drop} calls for one element");
    Ok(())
}
