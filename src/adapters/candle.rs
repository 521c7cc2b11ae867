//! candle: arrays and batches handed to [`candle_core::Tensor::from_vec`], their buffers
//! moved into the tensor, not copied.

use candle_core::{Device, Tensor, WithDType};
use ndarray::{Array, Dimension};

use crate::Dataset;

/// `array` as a tensor of its shape on `device`. An array in standard (row-major, contiguous)
/// layout that owns exactly its elements (what [`collate`](crate::Dataset::collate) and
/// `padded_batch` make) gives its buffer to the tensor: on the CPU the tensor's storage *is*
/// that buffer, no byte is copied. Other arrays (transposed, sliced) are copied into
/// row-major order first.
///
/// ```
/// use streamload::adapters::candle::tensor;
/// use streamload::ndarray::array;
///
/// let batch = array![[1.0f32, 2.0, 3.0], [4.0, 5.0, 6.0]];
/// let t = tensor(batch, &candle_core::Device::Cpu)?;
/// assert_eq!(t.dims(), [2, 3]);
/// assert_eq!(t.to_vec2::<f32>()?, [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]);
/// # Ok::<(), candle_core::Error>(())
/// ```
///
/// # Errors
///
/// candle's, when the device cannot hold the tensor (on the CPU, none).
pub fn tensor<T: WithDType, D: Dimension>(
    array: Array<T, D>,
    device: &Device,
) -> candle_core::Result<Tensor> {
    let shape = array.shape().to_vec();
    let n = array.len();
    let values = if array.is_standard_layout() {
        match array.into_raw_vec_and_offset() {
            (values, Some(0) | None) if values.len() == n => values,
            (values, offset) => {
                // Owns more than its elements: keep the run that is the array.
                let start = offset.unwrap_or(0);
                values[start..start + n].to_vec()
            }
        }
    } else {
        array.iter().copied().collect()
    };
    Tensor::from_vec(values, shape, device)
}

/// Each array of `dataset` as a tensor on `device`, as [`tensor`] makes it (no copy for
/// batches made by `collate`): `tensors(&ds.batch(32).collate(), Device::Cpu)`.
///
/// ```
/// use streamload::Dataset;
/// use streamload::adapters::candle::tensors;
/// # tokio_test::block_on(async {
/// let rows = Dataset::range(0, 6).map(|i| streamload::ndarray::arr1(&[i as f32, 10.0 * i as f32]));
/// let batches = tensors(&rows.batch(4).collate(), candle_core::Device::Cpu);
/// let dims: Vec<Vec<usize>> = batches.collect().await?.iter().map(|t| t.dims().to_vec()).collect();
/// assert_eq!(dims, [vec![4, 2], vec![2, 2]]);
/// # anyhow::Ok(()) }).unwrap();
/// ```
///
/// # Errors
///
/// An error element where candle refuses a tensor (see [`tensor`]).
pub fn tensors<T, D>(dataset: &Dataset<Array<T, D>>, device: Device) -> Dataset<Tensor>
where
    T: WithDType,
    D: Dimension + 'static,
{
    dataset.try_map(move |array| tensor(array, &device).map_err(anyhow::Error::from))
}
