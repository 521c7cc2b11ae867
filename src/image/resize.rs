//! `tf.image.resize` with its default method (bilinear, no antialiasing, half-pixel centres).

use std::cell::RefCell;

use anyhow::Context as _;
use fast_image_resize::images::{Image, ImageRef};
use fast_image_resize::{FilterType, PixelType, ResizeAlg, ResizeOptions, Resizer};
use ndarray::Array3;

thread_local! {
    /// One resizer per thread: it keeps its scratch buffers between calls.
    static RESIZER: RefCell<Resizer> = RefCell::new(Resizer::new());
}

/// What `tf.image.resize(images, size)` does by default: bilinear interpolation between the
/// two nearest pixels on each axis, pixel centres at `i + 0.5` (`half_pixel_centers`), no
/// antialiasing (a 4x reduction averages 2 of every 4 pixels per axis, as TensorFlow does).
/// fast_image_resize calls this `Interpolation(Bilinear)`; its `Convolution` form is the
/// antialiased one (`antialias=True`).
fn options() -> ResizeOptions {
    ResizeOptions::new().resize_alg(ResizeAlg::Interpolation(FilterType::Bilinear))
}

/// How [`resize_with`] and [`resize_u8_with`] resample (`tf.image.resize`'s `method`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum ResizeMethod {
    /// `tf.image.ResizeMethod.BILINEAR` (the default): bilinear between the two nearest pixels
    /// on each axis, half-pixel centres, no antialiasing.
    #[default]
    Bilinear,
    /// `tf.image.ResizeMethod.AREA`: each output pixel is the mean of the input pixels its
    /// box covers, each weighted by the fraction of it inside the box (TensorFlow's
    /// `resize_area` arithmetic, computed separably; for a whole-number reduction, the mean of
    /// each `k` × `k` block). Antialiased: the right choice for large reductions. Not SIMD:
    /// slower than bilinear.
    Area,
}

/// Resizes a float RGB image to `height` × `width` (`tf.image.resize(image, [height, width])`
/// with its defaults: bilinear, no antialiasing, half-pixel centres), with SIMD
/// ([`fast_image_resize`](https://docs.rs/fast_image_resize)).
///
/// ```
/// use ndarray::Array3;
/// // 4x4 -> 2x2: each output pixel sits between two input pixels on each axis.
/// let img = Array3::from_shape_fn((4, 4, 3), |(y, x, _)| (y * 4 + x) as f32);
/// let small = streamload::image::resize(img, 2, 2)?;
/// assert_eq!(small.shape(), &[2, 2, 3]);
/// assert_eq!(small[[0, 0, 0]], (0.0 + 1.0 + 4.0 + 5.0) / 4.0);
/// # anyhow::Ok(())
/// ```
///
/// # Errors
///
/// If the image does not have 3 channels, or a size is 0.
pub fn resize(image: Array3<f32>, height: usize, width: usize) -> anyhow::Result<Array3<f32>> {
    resize_with(image, height, width, ResizeMethod::Bilinear)
}

/// [`resize`] with a choice of [`ResizeMethod`] (`tf.image.resize(image, size, method)`).
///
/// ```
/// use ndarray::Array3;
/// use streamload::image::{ResizeMethod, resize_with};
/// // 4x4 -> 2x2 by area: each output pixel is the mean of a 2x2 block.
/// let img = Array3::from_shape_fn((4, 4, 3), |(y, x, _)| (y * 4 + x) as f32);
/// let small = resize_with(img, 2, 2, ResizeMethod::Area)?;
/// assert!((small[[1, 1, 0]] - (10.0 + 11.0 + 14.0 + 15.0) / 4.0).abs() < 1e-4);
/// # anyhow::Ok(())
/// ```
///
/// # Errors
///
/// If the image does not have 3 channels, or a size is 0.
pub fn resize_with(
    image: Array3<f32>,
    height: usize,
    width: usize,
    method: ResizeMethod,
) -> anyhow::Result<Array3<f32>> {
    let image = super::standard(image);
    let (h, w, c) = image.dim();
    if (h, w) == (height, width) {
        return Ok(image);
    }
    let src = image.as_slice().context("resize: image not contiguous")?;
    if method == ResizeMethod::Area {
        check((h, w, c), (height, width))?;
        let out = area(src, |v| v, (h, w, c), (height, width));
        return Ok(Array3::from_shape_vec((height, width, c), out)?);
    }
    let mut out = vec![0f32; height * width * c];
    resize_bytes(
        bytemuck::cast_slice(src),
        bytemuck::cast_slice_mut(&mut out),
        (h, w, c),
        (height, width),
        PixelType::F32x3,
    )?;
    Ok(Array3::from_shape_vec((height, width, c), out)?)
}

/// [`resize`] for 8-bit images: the same interpolation in fixed-point arithmetic, each result
/// within one step (1/255) of the float result. Cheaper than converting first and resizing
/// floats when the image shrinks, at the price of that rounding.
///
/// Against TensorFlow 2.21 (`tf.image.resize` of a `uint8` image, which returns the float
/// result) the largest difference measured was 1.00006 (the rounding between the horizontal
/// and vertical passes); rounding [`resize`]'s result instead is within 0.5 but took 4x as
/// long (220 vs 54 µs for 256x256 to 64x64).
///
/// # Errors
///
/// If the image does not have 3 channels, or a size is 0.
pub fn resize_u8(image: Array3<u8>, height: usize, width: usize) -> anyhow::Result<Array3<u8>> {
    resize_u8_with(image, height, width, ResizeMethod::Bilinear)
}

/// [`resize_u8`] with a choice of [`ResizeMethod`].
///
/// # Errors
///
/// If the image does not have 3 channels, or a size is 0.
pub fn resize_u8_with(
    image: Array3<u8>,
    height: usize,
    width: usize,
    method: ResizeMethod,
) -> anyhow::Result<Array3<u8>> {
    let image = super::standard(image);
    let (h, w, c) = image.dim();
    if (h, w) == (height, width) {
        return Ok(image);
    }
    let src = image.as_slice().context("resize: image not contiguous")?;
    if method == ResizeMethod::Area {
        check((h, w, c), (height, width))?;
        let out = area(src, f32::from, (h, w, c), (height, width));
        let out = out
            .into_iter()
            .map(|v| v.round().clamp(0.0, 255.0) as u8)
            .collect();
        return Ok(Array3::from_shape_vec((height, width, c), out)?);
    }
    let mut out = vec![0u8; height * width * c];
    resize_bytes(src, &mut out, (h, w, c), (height, width), PixelType::U8x3)?;
    Ok(Array3::from_shape_vec((height, width, c), out)?)
}

fn check((h, w, c): (usize, usize, usize), (height, width): (usize, usize)) -> anyhow::Result<()> {
    anyhow::ensure!(c == 3, "resize: expected 3 channels (RGB), got {c}");
    anyhow::ensure!(
        h > 0 && w > 0 && height > 0 && width > 0,
        "resize: cannot resize {h}x{w} to {height}x{width} (sizes must be positive)"
    );
    Ok(())
}

/// For each output index along an axis of `input` pixels resized to `output`: the input
/// pixels its box `[i * scale, (i + 1) * scale)` overlaps and the overlap of each
/// (TensorFlow's `resize_area`, `align_corners=False`).
fn area_weights(input: usize, output: usize) -> Vec<Vec<(usize, f32)>> {
    let scale = input as f32 / output as f32;
    (0..output)
        .map(|i| {
            let (start, end) = (i as f32 * scale, (i + 1) as f32 * scale);
            let (first, last) = (start.floor() as usize, end.ceil() as usize);
            (first..last)
                .map(|j| {
                    let weight = ((j + 1) as f32).min(end) - (j as f32).max(start);
                    (j.min(input - 1), weight)
                })
                .collect()
        })
        .collect()
}

/// Area resize of a packed `(h, w, c)` image to `(height, width, c)` floats: a horizontal
/// pass into `(h, width, c)`, then a vertical one, then the division by the box's area.
pub(crate) fn area<T: Copy>(
    src: &[T],
    to_f32: impl Fn(T) -> f32,
    (h, w, c): (usize, usize, usize),
    (height, width): (usize, usize),
) -> Vec<f32> {
    let xs = area_weights(w, width);
    let ys = area_weights(h, height);
    let norm = 1.0 / ((h as f32 / height as f32) * (w as f32 / width as f32));
    let mut rows = vec![0f32; h * width * c];
    for (src_row, dst_row) in src
        .chunks_exact(w * c)
        .zip(rows.chunks_exact_mut(width * c))
    {
        for (dst, taps) in dst_row.chunks_exact_mut(c).zip(&xs) {
            for &(x, weight) in taps {
                for (d, s) in dst.iter_mut().zip(&src_row[x * c..x * c + c]) {
                    *d += weight * to_f32(*s);
                }
            }
        }
    }
    let mut out = vec![0f32; height * width * c];
    for (dst_row, taps) in out.chunks_exact_mut(width * c).zip(&ys) {
        for &(y, weight) in taps {
            for (d, s) in dst_row
                .iter_mut()
                .zip(&rows[y * width * c..(y + 1) * width * c])
            {
                *d += weight * s;
            }
        }
        for d in dst_row.iter_mut() {
            *d *= norm;
        }
    }
    out
}

fn resize_bytes(
    src: &[u8],
    dst: &mut [u8],
    (h, w, c): (usize, usize, usize),
    (height, width): (usize, usize),
    pixel: PixelType,
) -> anyhow::Result<()> {
    anyhow::ensure!(c == 3, "resize: expected 3 channels (RGB), got {c}");
    anyhow::ensure!(
        h > 0 && w > 0 && height > 0 && width > 0,
        "resize: cannot resize {h}x{w} to {height}x{width} (sizes must be positive)"
    );
    let dim = |v: usize| u32::try_from(v).context("resize: image too large");
    let src = ImageRef::new(dim(w)?, dim(h)?, src, pixel)
        .map_err(|e| anyhow::anyhow!("resize: source image: {e}"))?;
    let mut dst = Image::from_slice_u8(dim(width)?, dim(height)?, dst, pixel)
        .map_err(|e| anyhow::anyhow!("resize: destination image: {e}"))?;
    RESIZER.with(|r| {
        let mut resizer = r.try_borrow_mut().context("resize: resizer in use")?;
        resizer
            .resize(&src, &mut dst, &options())
            .map_err(|e| anyhow::anyhow!("resize: {e}"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn downscale_samples_two_of_four_like_tensorflow() -> anyhow::Result<()> {
        // tf.image.resize(8x8 -> 2x2), bilinear, no antialias: output pixel i samples input
        // coordinate (i + 0.5) * 4 - 0.5 = 4i + 1.5, the mean of pixels 4i+1 and 4i+2.
        let img = Array3::from_shape_fn((8, 8, 3), |(y, x, c)| (y * 8 + x) as f32 + c as f32);
        let out = resize(img.clone(), 2, 2)?;
        for (i, j) in [(0, 0), (0, 1), (1, 0), (1, 1)] {
            let (y, x) = (4 * i + 1, 4 * j + 1);
            let want =
                (img[[y, x, 0]] + img[[y, x + 1, 0]] + img[[y + 1, x, 0]] + img[[y + 1, x + 1, 0]])
                    / 4.0;
            assert!(
                (out[[i, j, 0]] - want).abs() < 1e-4,
                "{i},{j}: {} vs {want}",
                out[[i, j, 0]]
            );
            assert!((out[[i, j, 2]] - want - 2.0).abs() < 1e-4);
        }
        Ok(())
    }

    #[test]
    fn upscale_interpolates_and_clamps_at_the_edges() -> anyhow::Result<()> {
        // 1x2 -> 1x4: centres at -0.25, 0.25, 0.75, 1.25 -> a, .75a+.25b, .25a+.75b, b.
        let img = Array3::from_shape_vec((1, 2, 3), vec![0.0, 0.0, 0.0, 1.0, 1.0, 1.0])?;
        let out = resize(img, 1, 4)?;
        let row: Vec<f32> = (0..4).map(|x| out[[0, x, 1]]).collect();
        for (got, want) in row.iter().zip([0.0, 0.25, 0.75, 1.0]) {
            assert!((got - want).abs() < 1e-5, "{row:?}");
        }
        Ok(())
    }

    #[test]
    fn u8_resize_rounds_the_float_result() -> anyhow::Result<()> {
        let img = Array3::from_shape_fn((16, 16, 3), |(y, x, c)| (y * 13 + x * 7 + c * 50) as u8);
        let bytes = resize_u8(img.clone(), 5, 7)?;
        let floats = resize(img.mapv(f32::from), 5, 7)?;
        for (b, f) in bytes.iter().zip(floats.iter()) {
            assert!((f32::from(*b) - f).abs() <= 1.0, "{b} vs {f}");
        }
        Ok(())
    }

    #[test]
    fn area_averages_whole_blocks_in_both_types() -> anyhow::Result<()> {
        let img = Array3::from_shape_fn((12, 9, 3), |(y, x, c)| (y * 9 + x + c * 7) as u8);
        let small = resize_u8_with(img.clone(), 4, 3, ResizeMethod::Area)?;
        let floats = resize_with(img.mapv(f32::from), 4, 3, ResizeMethod::Area)?;
        for ((i, j, c), v) in small.indexed_iter() {
            let block = img.slice(ndarray::s![3 * i..3 * i + 3, 3 * j..3 * j + 3, c]);
            let mean = block.iter().map(|v| f32::from(*v)).sum::<f32>() / 9.0;
            assert!(
                (f32::from(*v) - mean).abs() <= 1.0,
                "{i},{j},{c}: {v} vs {mean}"
            );
            assert!((floats[[i, j, c]] - mean).abs() < 1e-3, "{i},{j},{c}");
        }
        Ok(())
    }

    #[test]
    fn wrong_channels_and_zero_sizes_are_errors() {
        assert!(resize(Array3::zeros((4, 4, 1)), 2, 2).is_err());
        assert!(resize(Array3::zeros((4, 4, 3)), 0, 2).is_err());
    }
}
