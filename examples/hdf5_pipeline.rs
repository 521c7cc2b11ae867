//! The h5py generator recipe, read natively and in parallel.
//!
//! The tf.data question this answers: a user's generator opens HDF5 files, reads rows of a
//! dataset and the matching labels, preprocesses them and yields `(X, y)`:
//!
//! ```text
//! def gen():
//!     for path in files:
//!         with h5py.File(path) as f:
//!             X, y = f["/scenes/points"], f["/scenes/labels"]
//!             for i in range(len(y)):
//!                 yield center(X[i]), y[i]
//! ds = tf.data.Dataset.from_generator(gen, ...).shuffle(256).batch(32)
//! ```
//!
//! It is slow because every read, decompression and preprocessing step runs on the
//! generator's one thread (and, in Python, under the GIL and libhdf5's lock). Here the files'
//! blocks of rows are read and decompressed on blocking threads, several at once
//! (`num_parallel_reads`), the preprocessing runs in a parallel map, and the pipeline can be
//! checkpointed and resumed.
//!
//! ```text
//! cargo run --release --features hdf5 --example hdf5_pipeline [FILE.h5 ...]
//! ```
//!
//! Without arguments it reads the two small files h5py wrote for the tests
//! (`tests/data/hdf5/scenes-*.h5`, `scripts/hdf5_conformance.py`).

use futures::StreamExt;
use ndarray::{Array2, Axis};
use streamload::AUTOTUNE;
use streamload::format::hdf5::{ArrayD, Hdf5Dataset};

/// The preprocessing of the generator: each point cloud centred on its mean.
fn center(points: ArrayD<f32>) -> anyhow::Result<Array2<f32>> {
    let points = points.into_dimensionality::<ndarray::Ix2>()?;
    let mean = points
        .mean_axis(Axis(0))
        .ok_or_else(|| anyhow::anyhow!("an empty point cloud"))?;
    Ok(&points - &mean)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut files: Vec<String> = std::env::args().skip(1).collect();
    if files.is_empty() {
        let data = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/hdf5");
        files = vec![format!("{data}/scenes-0.h5"), format!("{data}/scenes-1.h5")];
    }

    let batches = Hdf5Dataset::new(files, "/scenes/points")
        .with_labels("/scenes/labels")
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
        .prefetch(2);

    let mut epoch = batches.iter();
    let (mut rows, mut count) = (0, 0);
    while let Some(batch) = epoch.next().await {
        let (points, labels) = batch?;
        if count == 0 {
            println!(
                "first batch: points {:?}, labels {:?}...",
                points.shape(),
                &labels[..4.min(labels.len())]
            );
        }
        rows += labels.len();
        count += 1;
    }
    println!("{count} batches, {rows} rows");
    println!("{}", epoch.stats());
    Ok(())
}
