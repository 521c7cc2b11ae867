//! An image input pipeline (W5 of WORKLOADS.md): JPEG files and labels -> shuffle ->
//! parallel read, decode and resize -> seeded random augmentation -> batch(32) ->
//! prefetch(1). Prints images per second and the per-stage report.
//!
//! ```text
//! cargo run --release --example image_pipeline            # on 1,000 JPEGs it generates
//! cargo run --release --example image_pipeline -- DIR     # on DIR/jpeg/NNNNN.jpg + labels.txt (D2)
//! ```
//!
//! `cargo run --release --example workloads -- --generate DIR --only D2` writes the full D2
//! (2,000 JPEGs of 256x256, quality 90, smooth gradients plus noise).
//!
//! The augmentation runs in `random_map`: each image's randomness derives from (seed,
//! epoch, index), so the batches are the same whatever the number of threads, and each epoch
//! draws afresh.

#[path = "../benches/support/workloads.rs"]
mod workloads;

/// Allocation-heavy pipelines free on one thread what another allocated (see `mimalloc` in
/// ARCHITECTURE.md).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::path::PathBuf;
use std::time::Instant;

use futures::StreamExt;
use ndarray::Array3;
use streamload::{AUTOTUNE, Dataset, Options, image};

/// Read, decode, resize to 64x64 and convert to floats in [0, 1]. Blocking work: it runs on
/// `map_parallel`'s blocking threads. A bad file is an error element naming the file.
fn load(path: &std::path::Path) -> anyhow::Result<Array3<f32>> {
    let pixels = image::read_image(path)?;
    // Resizing the bytes, then converting, equals converting then resizing to within 1/255.
    Ok(image::convert_image_dtype(&image::resize_u8(
        pixels, 64, 64,
    )?))
}

/// Random flip left-right, brightness +-32/255, saturation 0.5..1.5 (in HSV, as
/// `tf.image.random_saturation`), clip to [0, 1].
fn augment(img: Array3<f32>, rng: &mut streamload::ChaCha8Rng) -> Array3<f32> {
    let img = image::random_flip_left_right(img, rng);
    let img = image::random_brightness(img, 32.0 / 255.0, rng);
    let img = image::random_saturation(img, 0.5, 1.5, rng);
    image::clip_by_value(img, 0.0, 1.0)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let _tmp; // keeps generated data alive until the end
    let dir = match std::env::args().nth(1) {
        Some(dir) => PathBuf::from(dir),
        None => {
            let tmp = tempfile::tempdir()?;
            let start = Instant::now();
            let bytes = workloads::generate_d2(tmp.path(), 1000).await?;
            eprintln!(
                "generated 1,000 JPEGs ({:.1} MB) in {:.1} s",
                bytes as f64 / 1e6,
                start.elapsed().as_secs_f64()
            );
            let dir = tmp.path().to_path_buf();
            _tmp = tmp;
            dir
        }
    };
    let items: Vec<(PathBuf, i64)> = workloads::d2_files(&dir)?;
    let n = items.len();

    let ds = Dataset::from_vec(items)
        .shuffle(2000, Some(5))
        .try_map_parallel(AUTOTUNE, |(path, label)| Ok((load(&path)?, label)))
        .random_map(AUTOTUNE, Some(5), |(img, label), rng| {
            (augment(img, rng), label)
        })
        .batch(32)
        .prefetch(1)
        .with_options(Options::new().stats_timing(true));

    let start = Instant::now();
    let mut epoch = ds.iter();
    let (mut images, mut batches) = (0usize, 0usize);
    while let Some(batch) = epoch.next().await {
        let batch = batch?;
        images += batch.len();
        batches += 1;
    }
    let seconds = start.elapsed().as_secs_f64();
    anyhow::ensure!(images == n, "read {images} of {n} images");
    println!(
        "{images} images in {batches} batches of 64x64x3 floats: {:.0} images/s ({seconds:.2} s)",
        images as f64 / seconds
    );
    println!("{}", epoch.stats());
    Ok(())
}
