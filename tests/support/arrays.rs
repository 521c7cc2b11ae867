//! What the array formats' tests share (tests/hdf5.rs, tests/zarr.rs): values compared with
//! those the Python libraries read back (as JSON), and an epoch checkpointed midway.

use futures::StreamExt;
use ndarray::ArrayD;
use serde_json::Value;
use streamload::{Checkpoint, Dataset};

/// Equal values; floats within a rounding of the JSON parser (serde_json's default float
/// parsing can be one unit in the last place off: 3.4028234663852886e38, f32::MAX, reads
/// back as 3.402823466385289e38), far below any error of a wrong width or byte order.
pub(crate) fn same(got: &Value, want: &Value) -> bool {
    match (got, want) {
        (Value::Number(a), Value::Number(b)) if a.is_f64() || b.is_f64() => {
            let (a, b) = (a.as_f64().unwrap(), b.as_f64().unwrap());
            a == b || (a - b).abs() <= b.abs() * 4.0 * f64::EPSILON
        }
        _ => got == want,
    }
}

/// An integer of any width as JSON.
pub(crate) fn int<T: Into<i128> + Copy>(v: &T) -> Value {
    let v: i128 = (*v).into();
    match i64::try_from(v) {
        Ok(v) => Value::from(v),
        Err(_) => Value::from(u64::try_from(v).unwrap()),
    }
}

/// A float as JSON.
pub(crate) fn float<T: Into<f64> + Copy>(v: &T) -> Value {
    Value::from((*v).into())
}

/// Takes `k` elements, checkpoints through bytes, resumes from a fresh recipe.
pub(crate) async fn take_then_resume<T: Send + 'static>(
    make: impl Fn() -> Dataset<T>,
    k: usize,
) -> anyhow::Result<Vec<T>> {
    let mut epoch = make().iter();
    let mut seen = Vec::new();
    for _ in 0..k {
        seen.push(epoch.next().await.expect("an element")?);
    }
    let bytes = epoch.checkpoint()?.to_bytes();
    drop(epoch);
    let mut resumed = make().iter_from(&Checkpoint::from_bytes(&bytes)?)?;
    while let Some(x) = resumed.next().await {
        seen.push(x?);
    }
    Ok(seen)
}

/// An expected.json entry's values as `f32`, in row-major order.
pub(crate) fn floats(entry: &Value) -> Vec<f32> {
    entry["values"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap() as f32)
        .collect()
}

/// The scene files' rows as the Python library read them (`points` float32 (rows, 16, 3),
/// `labels` int64 (rows,), each an expected.json entry): (points, label) per row.
pub(crate) fn scene_rows(points: &Value, labels: &Value) -> Vec<(Vec<f32>, i64)> {
    let points = floats(points);
    labels["values"]
        .as_array()
        .unwrap()
        .iter()
        .enumerate()
        .map(|(i, l)| (points[i * 48..(i + 1) * 48].to_vec(), l.as_i64().unwrap()))
        .collect()
}

/// Scene rows read as (points, label) arrays, flattened to compare with [`scene_rows`].
pub(crate) fn flat(rows: &[(ArrayD<f32>, ArrayD<i64>)]) -> Vec<(Vec<f32>, i64)> {
    rows.iter()
        .map(|(p, l)| {
            assert_eq!(p.shape(), [16, 3]);
            assert_eq!(l.ndim(), 0);
            (
                p.iter().copied().collect(),
                l.iter().copied().next().unwrap(),
            )
        })
        .collect()
}
