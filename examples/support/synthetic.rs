//! The training data of the burn and candle examples: TFRecord files of 9 little-endian `f32`s
//! per record (8 features drawn in [-1, 1), then the target, a fixed function of them).
//! Included by each example with `#[path = "support/synthetic.rs"] mod synthetic;`.

use streamload::format::{Compression, TFRecordWriter};

/// Features per record.
pub(crate) const FEATURES: usize = 8;

/// The function to learn.
fn target(x: &[f32; FEATURES]) -> f32 {
    x[0].sin() + x[1] * x[2] - 0.5 * x[3] + 0.25 * x[4] * x[4]
}

/// Writes `sizes.len()` files `train-NN.tfrecord` into `dir`, of that many records each
/// (features from an xorshift generator started at `seed`, so the data is the same every run).
pub(crate) async fn write_data(
    dir: &std::path::Path,
    sizes: &[usize],
    seed: u64,
) -> anyhow::Result<Vec<std::path::PathBuf>> {
    let mut state = seed | 1;
    let mut uniform = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state >> 40) as f32 / (1u64 << 23) as f32 - 1.0
    };
    let mut files = Vec::new();
    for (f, &n) in sizes.iter().enumerate() {
        let path = dir.join(format!("train-{f:02}.tfrecord"));
        let mut writer =
            TFRecordWriter::new(tokio::fs::File::create(&path).await?, Compression::None);
        for _ in 0..n {
            let x: [f32; FEATURES] = std::array::from_fn(|_| uniform());
            let mut record = Vec::with_capacity(4 * (FEATURES + 1));
            for v in x.iter().chain([target(&x)].iter()) {
                record.extend_from_slice(&v.to_le_bytes());
            }
            writer.write(&record).await?;
        }
        writer.finish().await?;
        files.push(path);
    }
    Ok(files)
}

/// A record's features and target; an error naming the file and record if it is not
/// `4 * (FEATURES + 1)` bytes long.
pub(crate) fn parse_record(
    bytes: &[u8],
    file: usize,
    record: u64,
) -> anyhow::Result<([f32; FEATURES], f32)> {
    anyhow::ensure!(
        bytes.len() == 4 * (FEATURES + 1),
        "record {record} of file {file}: {} bytes, expected {}",
        bytes.len(),
        4 * (FEATURES + 1)
    );
    let value = |i: usize| {
        f32::from_le_bytes([
            bytes[4 * i],
            bytes[4 * i + 1],
            bytes[4 * i + 2],
            bytes[4 * i + 3],
        ])
    };
    Ok((std::array::from_fn(value), value(FEATURES)))
}
