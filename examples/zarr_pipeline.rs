//! Zarr stores read natively and in parallel: chunks along the first axis of an array, with
//! the same rows of a labels array, preprocessed in a parallel map, batched, checkpointed
//! and resumed.
//!
//! The Python this replaces: a loop over a zarr-python array's chunks, one at a time,
//!
//! ```text
//! points, labels = zarr.open_array(store, path="points"), zarr.open_array(store, path="labels")
//! def gen():
//!     for start in range(0, points.shape[0], points.chunks[0]):
//!         X, y = points[start:start + points.chunks[0]], labels[start:start + points.chunks[0]]
//!         for i in range(len(y)):
//!             yield center(X[i]), y[i]
//! ds = tf.data.Dataset.from_generator(gen, ...).shuffle(256).batch(32)
//! ```
//!
//! Here each store's chunks (a shard's inner chunks, for a sharded array) are fetched by
//! async reads, locally or from object storage (`s3://bucket/run.zarr` works the same),
//! decoded on blocking threads, several at once, and the rows are preprocessed in parallel.
//!
//! ```text
//! cargo run --release --features zarr --example zarr_pipeline [STORE.zarr ...]
//! ```
//!
//! Without arguments it reads the two small stores zarr-python wrote for the tests
//! (`tests/data/zarr/scenes-*.zarr`, `scripts/zarr_conformance.py`: a Zarr v3 store with a
//! sharded array and a Zarr v2 store with blosc chunks).

use futures::StreamExt;
use ndarray::{Array2, Axis};
use streamload::format::zarr::{ArrayD, ZarrDataset};
use streamload::{AUTOTUNE, Checkpoint};

/// The preprocessing: each point cloud centred on its mean.
fn center(points: ArrayD<f32>) -> anyhow::Result<Array2<f32>> {
    let points = points.into_dimensionality::<ndarray::Ix2>()?;
    let mean = points
        .mean_axis(Axis(0))
        .ok_or_else(|| anyhow::anyhow!("an empty point cloud"))?;
    Ok(&points - &mean)
}

/// Rows of `points` with their `labels`, centred, shuffled and batched by 32.
fn pipeline(stores: &[String]) -> streamload::Dataset<(ndarray::Array3<f32>, Vec<i64>)> {
    ZarrDataset::new(stores.to_vec(), "points")
        .with_labels("labels")
        .num_parallel_reads(AUTOTUNE)
        .build_labeled::<f32, i64>()
        .try_map_parallel(AUTOTUNE, |(points, label)| {
            let label = label.first().copied().unwrap_or_default();
            Ok((center(points)?, label))
        })
        .shuffle(256, Some(0))
        .batch(32)
        .try_map(|batch| {
            // Stack the batch: (32, 16, 3) points and 32 labels.
            let views: Vec<_> = batch.iter().map(|(p, _)| p.view()).collect();
            let points = ndarray::stack(Axis(0), &views)?;
            let labels: Vec<i64> = batch.iter().map(|(_, l)| *l).collect();
            Ok((points, labels))
        })
        .prefetch(2)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut stores: Vec<String> = std::env::args().skip(1).collect();
    if stores.is_empty() {
        let data = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/zarr");
        stores = vec![
            format!("{data}/scenes-0.zarr"),
            format!("{data}/scenes-1.zarr"),
        ];
    }

    // One batch, a checkpoint, then the rest of the epoch from a fresh pipeline.
    let mut epoch = pipeline(&stores).iter();
    let mut labels_seen = Vec::new();
    if let Some(first) = epoch.next().await {
        let (points, labels) = first?;
        println!(
            "first batch: points {:?}, labels {:?}...",
            points.shape(),
            &labels[..4.min(labels.len())]
        );
        labels_seen.extend(labels);
    }
    let checkpoint = epoch.checkpoint()?.to_bytes();
    drop(epoch);
    println!("checkpoint after one batch: {} bytes", checkpoint.len());

    let mut resumed = pipeline(&stores).iter_from(&Checkpoint::from_bytes(&checkpoint)?)?;
    let mut batches = 1;
    while let Some(batch) = resumed.next().await {
        let (_, labels) = batch?;
        labels_seen.extend(labels);
        batches += 1;
    }
    let rows = labels_seen.len();
    labels_seen.sort_unstable();
    labels_seen.dedup();
    println!(
        "{batches} batches, {rows} rows, {} distinct: none lost or repeated across the resume",
        labels_seen.len()
    );
    anyhow::ensure!(
        rows == labels_seen.len(),
        "a row repeated across the resume"
    );
    println!("{}", resumed.stats());
    Ok(())
}
