//! WebDataset shards are read streaming: the heap never holds a whole shard, and a member's
//! declared size (up to the limit) allocates nothing before its bytes arrive. This binary
//! counts every allocation through a global allocator of its own, so it holds this one test
//! only (another test running beside it would count too).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use futures::StreamExt;
use streamload::format::{Sample, ShardWriter, WebDataset, webdataset_samples};

/// The system allocator, counting the bytes it has handed out and not taken back, and the
/// most it has held at once.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

fn grew(by: usize) {
    let now = LIVE.fetch_add(by, Ordering::Relaxed) + by;
    PEAK.fetch_max(now, Ordering::Relaxed);
}

// SAFETY: every call goes to `System` as is; the counters only observe.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            grew(layout.size());
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
            LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
            grew(size);
        }
        q
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// The most the heap held above what it held before `f` ran.
async fn peak_above<F: std::future::Future>(f: F) -> (F::Output, usize) {
    let before = LIVE.load(Ordering::Relaxed);
    PEAK.store(before, Ordering::Relaxed);
    let out = f.await;
    (out, PEAK.load(Ordering::Relaxed).saturating_sub(before))
}

const MIB: usize = 1 << 20;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shards_are_streamed_and_declared_sizes_allocate_nothing() {
    let dir = tempfile::tempdir().unwrap();
    // One shard of 32 samples of 1 MiB (32 MiB), plain and GZIP-compressed.
    for pattern in ["big-%d.tar", "big-%d.tar.gz"] {
        let mut w = ShardWriter::new(dir.path().join(pattern).to_str().unwrap()).unwrap();
        for i in 0..32u8 {
            let data: Vec<u8> = (0..MIB).map(|j| (j as u8) ^ i).collect();
            w.write(&Sample::new(format!("s{i:03}")).with("bin", data))
                .await
                .unwrap();
        }
        w.finish().await.unwrap();
    }
    for (name, memory_map) in [
        ("big-0.tar", false),
        ("big-0.tar", true),
        ("big-0.tar.gz", false),
    ] {
        let path = dir.path().join(name);
        let ds = WebDataset::new([&path]).memory_map(memory_map).build();
        let (count, peak) = peak_above(async {
            let mut epoch = ds.iter();
            let mut n = 0;
            while let Some(sample) = epoch.next().await {
                let sample = sample.unwrap();
                assert_eq!(sample.get("bin").unwrap().len(), MIB);
                n += 1;
            }
            n
        })
        .await;
        assert_eq!(count, 32, "{name}");
        eprintln!("{name} (memory_map {memory_map}): peak {peak} bytes above the start");
        // A sample being gathered, the one held, the reader's blocks read ahead (1 MiB each)
        // and the inflater's buffers: a few MiB, never the 32 MiB shard.
        assert!(
            peak < 12 * MIB,
            "{name} (memory_map {memory_map}): the heap grew by {peak} bytes"
        );
    }

    // A member declaring 2 GiB - 1 (under the limit) followed by 100 KiB: the error comes
    // after reading what is there, and nothing near the declared size was allocated.
    let mut tar = vec![0u8; 512];
    tar[..5].copy_from_slice(b"a.bin");
    tar[100..108].copy_from_slice(b"0000644\0");
    tar[124..136].copy_from_slice(b"17777777777\0");
    tar[156] = b'0';
    tar[148..156].fill(b' ');
    let sum: u32 = tar.iter().map(|&b| u32::from(b)).sum();
    tar[148..156].copy_from_slice(format!("{sum:06o}\0 ").as_bytes());
    tar.extend(std::iter::repeat_n(7u8, 100 * 1024));
    let (items, peak) = peak_above(async {
        webdataset_samples(&tar[..], "declared.tar")
            .collect::<Vec<_>>()
            .await
    })
    .await;
    let err = items[0].as_ref().unwrap_err().to_string();
    assert!(
        err.contains("truncated tar member (102400 of 2147483647 bytes)"),
        "{err}"
    );
    assert!(peak < 4 * MIB, "the heap grew by {peak} bytes");
}
