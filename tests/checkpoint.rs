//! Checkpoint and exact resume: the elements received before a checkpoint, followed by those
//! after resuming from it (in a fresh recipe, as a new process would build it), equal the
//! uninterrupted epoch's, at every point.

use std::fmt::Debug;

use futures::StreamExt;
use streamload::{Checkpoint, Dataset};

/// For every `k` in `points`: takes `k` elements, checkpoints (through bytes), resumes from a
/// freshly built recipe, and checks the whole against the uninterrupted epoch. Returns the
/// largest checkpoint's size in bytes.
async fn assert_exact<T, F>(make: F, points: impl IntoIterator<Item = usize>) -> usize
where
    T: PartialEq + Debug + Send + 'static,
    F: Fn() -> Dataset<T>,
{
    let full = make().collect().await.expect("uninterrupted epoch");
    let mut largest = 0;
    for k in points {
        let k = k.min(full.len());
        let ds = make();
        let mut epoch = ds.iter();
        let mut seen = Vec::new();
        for _ in 0..k {
            seen.push(epoch.next().await.expect("an element").expect("no error"));
        }
        let bytes = epoch.checkpoint().expect("checkpoint").to_bytes();
        largest = largest.max(bytes.len());
        // The epoch goes on unchanged after a checkpoint.
        let mut rest_here = Vec::new();
        while let Some(x) = epoch.next().await {
            rest_here.push(x.expect("no error"));
        }
        assert_eq!(&full[k..], &rest_here[..], "epoch changed by a checkpoint at {k}");
        drop(epoch);
        let restored = Checkpoint::from_bytes(&bytes).expect("from_bytes");
        let mut resumed = make().iter_from(&restored).expect("iter_from");
        while let Some(x) = resumed.next().await {
            seen.push(x.expect("no error"));
        }
        assert_eq!(seen.len(), full.len(), "resumed at {k}: wrong length");
        assert_eq!(seen, full, "resumed at {k}: elements differ");
    }
    largest
}

#[tokio::test]
async fn range_map_filter_take_skip_enumerate_batch() {
    let make = || {
        Dataset::range(0, 1000)
            .map(|x| x * 3)
            .filter(|x| x % 2 == 0)
            .skip(7)
            .take(400)
            .enumerate(5)
            .batch(16)
    };
    assert_exact(make, [0, 1, 2, 5, 12, 24, 25, 26]).await;
}

#[tokio::test]
async fn from_vec_and_batch_remainder() {
    let make = || Dataset::from_vec((0..37).map(|i| format!("s{i}")).collect()).batch_drop_remainder(5);
    assert_exact(make, 0..8).await;
}

#[tokio::test]
async fn a_checkpoint_of_another_recipe_is_refused() {
    let ds = Dataset::range(0, 10).batch(2);
    let mut epoch = ds.iter();
    epoch.next().await.unwrap().unwrap();
    let cp = epoch.checkpoint().unwrap();
    let other = Dataset::range(0, 10).batch(3);
    let err = other.iter_from(&cp).unwrap_err();
    assert!(err.to_string().contains("another recipe"), "{err:#}");
    let err = Checkpoint::from_bytes(b"not a checkpoint").unwrap_err();
    assert!(err.to_string().contains("SLCK"), "{err:#}");
    let mut bytes = cp.to_bytes();
    bytes[4] = 9;
    let err = Checkpoint::from_bytes(&bytes).unwrap_err();
    assert!(err.to_string().contains("format version 9"), "{err:#}");
}

#[tokio::test]
async fn a_stage_that_cannot_save_is_named() {
    let ds = Dataset::from_generator(4, || 0..10).map(|x| x + 1);
    let mut epoch = ds.iter();
    epoch.next().await.unwrap().unwrap();
    let err = epoch.checkpoint().unwrap_err();
    let e = err.downcast_ref::<streamload::Error>().expect("a streamload error");
    assert!(matches!(e, streamload::Error::NotResumable { stage, .. } if stage == "from_generator"), "{err:#}");
}
