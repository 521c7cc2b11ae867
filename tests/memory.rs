//! Memory stays flat over many epochs: the heap bytes a file pipeline holds do not grow with
//! the epochs it has run, in either spelling (a fresh `iter()` per epoch, or one
//! `repeat_n`). This binary counts every allocation through a global allocator of its own,
//! so it holds this one test only (another test running beside it would count too).
//!
//! The figure is the floor of the live bytes over a stretch of epochs: a sample can catch
//! readers in flight (a few kilobytes, depending on the scheduling), the floor cannot, and a
//! leak raises it epoch after epoch.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use futures::StreamExt;
use streamload::format::{Compression, TFRecordDataset, TFRecordWriter};
use streamload::{AUTOTUNE, Dataset};

/// The system allocator, counting the bytes it has handed out and not taken back.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call goes to `System` as is; the counter only observes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            LIVE.fetch_add(layout.size(), Ordering::Relaxed);
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            LIVE.fetch_add(layout.size(), Ordering::Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, p: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: the caller's contract, passed on.
        unsafe { System.dealloc(p, layout) }
    }

    unsafe fn realloc(&self, p: *mut u8, layout: Layout, size: usize) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        let q = unsafe { System.realloc(p, layout, size) };
        if !q.is_null() {
            LIVE.fetch_add(size, Ordering::Relaxed);
            LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        }
        q
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

const FILES: usize = 16;
/// Epochs run before the first stretch is measured (buffers and pools reach their size).
const WARM_UP: usize = 20;
/// Epochs per measured stretch.
const STRETCH: usize = 20;
/// Epochs in all: the second stretch ends here.
const EPOCHS: usize = 200;
/// Growth of the floor allowed between the stretches (measured: none with a fresh `iter()`
/// per epoch, up to 1.8 KB of scheduling noise with `repeat_n`). A leak of 64 bytes per epoch,
/// or of one allocation per file, is more: 10 KB, or 20 KB, over the 160 epochs between them.
const SLACK: usize = 8 * 1024;

/// `FILES` TFRecord files of one record each in a temporary directory, and their pattern.
async fn shards() -> anyhow::Result<(tempfile::TempDir, String)> {
    let dir = tempfile::tempdir()?;
    for i in 0..FILES {
        let path = dir.path().join(format!("shard-{i:04}.tfrecord"));
        let mut writer =
            TFRecordWriter::new(tokio::fs::File::create(path).await?, Compression::None);
        writer.write(format!("record {i}").as_bytes()).await?;
        writer.finish().await?;
    }
    let pattern = format!("{}/shard-*.tfrecord", dir.path().display());
    Ok((dir, pattern))
}

fn pipeline(pattern: &str) -> Dataset<bytes::Bytes> {
    Dataset::list_files(pattern, None)
        .parallel_interleave(4, 1, AUTOTUNE, |f| TFRecordDataset::new([f]).build())
}

/// The floor of the live bytes sampled after epochs `from..from + STRETCH` (0-based).
fn floor(samples: &[usize], from: usize) -> usize {
    samples[from..from + STRETCH]
        .iter()
        .copied()
        .min()
        .expect("a stretch of samples")
}

fn assert_flat(spelling: &str, samples: &[usize]) {
    assert_eq!(samples.len(), EPOCHS, "{spelling}: a sample per epoch");
    let early = floor(samples, WARM_UP);
    let late = floor(samples, EPOCHS - STRETCH);
    assert!(
        late <= early + SLACK,
        "{spelling}: the heap grew from {early} to {late} bytes between epochs {} and {} \
         (floors of {STRETCH} epochs)",
        WARM_UP + STRETCH,
        EPOCHS
    );
}

#[test]
fn live_heap_bytes_stay_flat_over_many_epochs() -> anyhow::Result<()> {
    // Few threads, and a fixed number: each thread holds a little heap of its own (its name,
    // the runtime's context), which is not what this measures.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .max_blocking_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let (_dir, pattern) = shards().await?;
        let dataset = pipeline(&pattern);

        // A fresh `iter()` per epoch: a sample once each epoch is dropped.
        let mut samples = Vec::with_capacity(EPOCHS);
        for epoch in 0..EPOCHS {
            let mut elements = dataset.iter();
            let mut n = 0;
            while let Some(element) = elements.next().await {
                element?;
                n += 1;
            }
            drop(elements);
            anyhow::ensure!(n == FILES, "epoch {epoch}: {n} elements");
            samples.push(LIVE.load(Ordering::Relaxed));
        }
        assert_flat("a fresh iter() per epoch", &samples);

        // One iterator over `repeat_n`: the least live bytes seen at an element of each epoch,
        // while it runs.
        let mut samples = Vec::with_capacity(EPOCHS);
        let mut elements = dataset.repeat_n(EPOCHS as u64).iter();
        let mut n = 0;
        while let Some(element) = elements.next().await {
            element?;
            let live = LIVE.load(Ordering::Relaxed);
            if n % FILES == 0 {
                samples.push(live);
            } else if let Some(least) = samples.last_mut() {
                *least = live.min(*least);
            }
            n += 1;
        }
        anyhow::ensure!(n == FILES * EPOCHS, "{n} elements");
        assert_flat("one iter() of repeat_n", &samples);
        anyhow::Ok(())
    })
}
