//! 8-bit image → normalised float tensor in one pass: `convert_image_dtype`, the per-channel
//! `(x - mean) / std`, an optional left-right flip and the HWC/CHW layout, fused.

use ndarray::Array3;

/// Per-channel normalisation `(x - mean) / std`, with `x` in `[0, 1]` (the 8-bit value / 255).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Normalize {
    /// The mean of each channel (R, G, B), on the `[0, 1]` scale.
    pub mean: [f32; 3],
    /// The standard deviation of each channel, on the `[0, 1]` scale.
    pub std: [f32; 3],
}

impl Normalize {
    /// ImageNet's statistics (torchvision's and most models' normalisation):
    /// mean (0.485, 0.456, 0.406), std (0.229, 0.224, 0.225).
    pub const IMAGENET: Self = Self {
        mean: [0.485, 0.456, 0.406],
        std: [0.229, 0.224, 0.225],
    };

    /// No normalisation: the output is `convert_image_dtype`'s, values in `[0, 1]`.
    pub const NONE: Self = Self {
        mean: [0.0; 3],
        std: [1.0; 3],
    };
}

impl Default for Normalize {
    /// [`Normalize::NONE`].
    fn default() -> Self {
        Self::NONE
    }
}

/// The order of a float image's axes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Layout {
    /// (height, width, channels): TensorFlow's and `streamload::image`'s layout.
    #[default]
    Hwc,
    /// (channels, height, width): PyTorch's.
    Chw,
}

/// Converts an 8-bit RGB image to normalised floats in one pass: each value `v` becomes
/// `(v / 255 - mean[c]) / std[c]` (one multiply-add per value), mirrored left to right if
/// `flip`, written in `layout`. With [`Normalize::NONE`], no flip and [`Layout::Hwc`] this is
/// [`convert_image_dtype`](super::convert_image_dtype).
///
/// The last step of [`RandomResizedCrop`](super::RandomResizedCrop) and
/// [`CenterCrop`](super::CenterCrop): resizing the bytes first and converting the small result
/// reads and writes each output value once.
///
/// ```
/// use ndarray::array;
/// use streamload::image::{Layout, Normalize, convert_and_normalize};
/// let img = array![[[0u8, 51, 255], [255, 255, 255]]]; // 1 x 2 pixels
/// let n = Normalize { mean: [0.5; 3], std: [0.5; 3] };
/// let out = convert_and_normalize(&img, &n, Layout::Chw, true);
/// assert_eq!(out.shape(), &[3, 1, 2]);
/// assert_eq!(out[[0, 0, 1]], -1.0); // red of the first pixel, now on the right
/// assert_eq!(out[[2, 0, 0]], 1.0);
/// ```
///
/// # Panics
///
/// If the image does not have 3 channels.
pub fn convert_and_normalize(
    image: &Array3<u8>,
    normalize: &Normalize,
    layout: Layout,
    flip: bool,
) -> Array3<f32> {
    let (h, w, c) = image.dim();
    assert_eq!(
        c, 3,
        "convert_and_normalize: expected 3 channels (RGB), got {c}"
    );
    let scale: [f32; 3] = std::array::from_fn(|i| 1.0 / (255.0 * normalize.std[i]));
    let offset: [f32; 3] = std::array::from_fn(|i| -normalize.mean[i] / normalize.std[i]);
    let shape = match layout {
        Layout::Hwc => (h, w, 3),
        Layout::Chw => (3, h, w),
    };
    if h == 0 || w == 0 {
        return Array3::zeros(shape);
    }
    let image = image.as_standard_layout();
    // Standard layout, so the slice exists.
    let src = image.as_slice().unwrap_or_default();
    let mut out = vec![0f32; h * w * 3];
    match layout {
        Layout::Hwc => {
            for (src_row, dst_row) in src.chunks_exact(w * 3).zip(out.chunks_exact_mut(w * 3)) {
                for (x, dst) in dst_row.chunks_exact_mut(3).enumerate() {
                    let sx = if flip { w - 1 - x } else { x };
                    let px = &src_row[sx * 3..sx * 3 + 3];
                    for i in 0..3 {
                        dst[i] = f32::from(px[i]) * scale[i] + offset[i];
                    }
                }
            }
        }
        Layout::Chw => {
            let (p0, rest) = out.split_at_mut(h * w);
            let (p1, p2) = rest.split_at_mut(h * w);
            for (y, src_row) in src.chunks_exact(w * 3).enumerate() {
                let rows = [
                    &mut p0[y * w..(y + 1) * w],
                    &mut p1[y * w..(y + 1) * w],
                    &mut p2[y * w..(y + 1) * w],
                ];
                for (i, row) in rows.into_iter().enumerate() {
                    for (x, dst) in row.iter_mut().enumerate() {
                        let sx = if flip { w - 1 - x } else { x };
                        *dst = f32::from(src_row[sx * 3 + i]) * scale[i] + offset[i];
                    }
                }
            }
        }
    }
    Array3::from_shape_vec(shape, out).unwrap_or_else(|_| Array3::zeros(shape))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_convert_then_normalise_then_flip_in_both_layouts() {
        let img = Array3::from_shape_fn((5, 7, 3), |(y, x, c)| (y * 40 + x * 9 + c * 70) as u8);
        let n = Normalize::IMAGENET;
        for flip in [false, true] {
            let hwc = convert_and_normalize(&img, &n, Layout::Hwc, flip);
            let chw = convert_and_normalize(&img, &n, Layout::Chw, flip);
            assert_eq!(hwc.shape(), &[5, 7, 3]);
            assert_eq!(chw.shape(), &[3, 5, 7]);
            for ((y, x, c), v) in img.indexed_iter() {
                let want = (f32::from(*v) / 255.0 - n.mean[c]) / n.std[c];
                let ox = if flip { 6 - x } else { x };
                assert!((hwc[[y, ox, c]] - want).abs() < 1e-5);
                assert_eq!(hwc[[y, ox, c]], chw[[c, y, ox]]);
            }
        }
        let plain = convert_and_normalize(&img, &Normalize::NONE, Layout::Hwc, false);
        let reference = crate::image::convert_image_dtype(&img);
        for (a, b) in plain.iter().zip(reference.iter()) {
            assert!((a - b).abs() < 1e-6);
        }
    }
}
