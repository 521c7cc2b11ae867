//! `convert_image_dtype` fused into `tf.image.resize`: 8-bit pixels in, floats out, one pass
//! over the output (and, with a per-channel affine map, flip and layout, the whole tail of
//! [`RandomResizedCrop`](super::RandomResizedCrop) and [`CenterCrop`](super::CenterCrop)).

use anyhow::Context as _;
use ndarray::Array3;

use super::normalize::Layout;
use super::resize::ResizeMethod;

/// Converts an 8-bit RGB image to floats in `[0, 1]` and resizes it to `height` × `width`, in
/// one pass: `tf.image.resize(tf.image.convert_image_dtype(image, tf.float32), [height,
/// width])` (bilinear, no antialiasing, half-pixel centres).
///
/// The bilinear interpolation reads the bytes and runs TensorFlow's arithmetic (`top = tl +
/// (tr - tl) * x_lerp`, the same for the bottom row, then `top + (bottom - top) * y_lerp`) on
/// them as floats, then scales by 1/255: equal to converting first and resizing the floats up
/// to float rounding (within 1e-6 of TensorFlow's outputs), without the full-size float image
/// that converting first makes (for a 256 × 256 JPEG resized to 64 × 64, 768 KiB written and
/// read again for 48 KiB of output). Only the source rows the output samples are read.
///
/// ```
/// use ndarray::Array3;
/// use streamload::image;
/// let img = Array3::from_shape_fn((8, 8, 3), |(y, x, c)| (y * 30 + x * 3 + c) as u8);
/// let fused = image::convert_and_resize(&img, 2, 2)?;
/// let unfused = image::resize(image::convert_image_dtype(&img), 2, 2)?;
/// assert!(fused.iter().zip(&unfused).all(|(a, b)| (a - b).abs() < 1e-6));
/// # anyhow::Ok(())
/// ```
///
/// # Errors
///
/// If the image does not have 3 channels, or a size is 0.
pub fn convert_and_resize(
    image: &Array3<u8>,
    height: usize,
    width: usize,
) -> anyhow::Result<Array3<f32>> {
    resize_to_f32(
        image,
        (height, width),
        ResizeMethod::Bilinear,
        &Affine::CONVERT,
        false,
        Layout::Hwc,
    )
}

/// What is done to each resized value `v` (on the 0..255 scale of the bytes) before it is
/// written: `v * scale[c] + offset[c]` for channel `c`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Affine {
    pub(crate) scale: [f32; 3],
    pub(crate) offset: [f32; 3],
}

impl Affine {
    /// `convert_image_dtype`: `v / 255` (as a multiplication by `1 / 255`, as TensorFlow's).
    pub(crate) const CONVERT: Self = Self {
        scale: [1.0 / 255.0; 3],
        offset: [0.0; 3],
    };

    /// `(v / 255 - mean) / std` per channel.
    pub(crate) fn normalize(n: &super::Normalize) -> Self {
        Self {
            scale: std::array::from_fn(|i| 1.0 / (255.0 * n.std[i])),
            offset: std::array::from_fn(|i| -n.mean[i] / n.std[i]),
        }
    }
}

/// Resizes an 8-bit RGB image to `(height, width)` floats by `method`, maps each value through
/// `affine`, mirrors it left to right if `flip` and writes it in `layout`: one pass over the
/// output. Bilinear reads only the source rows it samples; area computes its box sums in
/// floats (no rounding to bytes in between) and maps them on the way out.
pub(crate) fn resize_to_f32(
    image: &Array3<u8>,
    (height, width): (usize, usize),
    method: ResizeMethod,
    affine: &Affine,
    flip: bool,
    layout: Layout,
) -> anyhow::Result<Array3<f32>> {
    let (h, w, c) = image.dim();
    anyhow::ensure!(c == 3, "resize: expected 3 channels (RGB), got {c}");
    anyhow::ensure!(
        h > 0 && w > 0 && height > 0 && width > 0,
        "resize: cannot resize {h}x{w} to {height}x{width} (sizes must be positive)"
    );
    let image = image.as_standard_layout();
    let src = image.as_slice().context("resize: image not contiguous")?;
    let mut out = vec![0f32; height * width * 3];
    let sink = Sink {
        affine,
        flip,
        layout,
        height,
        width,
    };
    match method {
        ResizeMethod::Bilinear => bilinear(src, (h, w), &sink, &mut out),
        ResizeMethod::Area => {
            let sums = super::resize::area(src, f32::from, (h, w, 3), (height, width));
            for (y, row) in sums.chunks_exact(width * 3).enumerate() {
                sink.row(&mut out, y, row);
            }
        }
    }
    let shape = match layout {
        Layout::Hwc => (height, width, 3),
        Layout::Chw => (3, height, width),
    };
    Ok(Array3::from_shape_vec(shape, out)?)
}

/// Where resized rows go: through the affine map, mirrored or not, into HWC or CHW.
struct Sink<'a> {
    affine: &'a Affine,
    flip: bool,
    layout: Layout,
    height: usize,
    width: usize,
}

impl Sink<'_> {
    /// Writes output row `y` from `row`, `width * 3` resized values (HWC, 0..255 scale).
    #[inline]
    fn row(&self, out: &mut [f32], y: usize, row: &[f32]) {
        let Affine { scale, offset } = *self.affine;
        let w = self.width;
        match (self.layout, self.flip) {
            (Layout::Hwc, false) => {
                let dst = &mut out[y * w * 3..(y + 1) * w * 3];
                for (d, s) in dst.chunks_exact_mut(3).zip(row.chunks_exact(3)) {
                    for i in 0..3 {
                        d[i] = s[i] * scale[i] + offset[i];
                    }
                }
            }
            (Layout::Hwc, true) => {
                let dst = &mut out[y * w * 3..(y + 1) * w * 3];
                for (d, s) in dst.chunks_exact_mut(3).rev().zip(row.chunks_exact(3)) {
                    for i in 0..3 {
                        d[i] = s[i] * scale[i] + offset[i];
                    }
                }
            }
            (Layout::Chw, flip) => {
                let plane = self.height * w;
                for i in 0..3 {
                    let dst = &mut out[i * plane + y * w..i * plane + (y + 1) * w];
                    for (x, s) in row.chunks_exact(3).enumerate() {
                        let ox = if flip { w - 1 - x } else { x };
                        dst[ox] = s[i] * scale[i] + offset[i];
                    }
                }
            }
        }
    }
}

/// For each output index along an axis of `input` pixels resized to `output`, TensorFlow's
/// bilinear taps with half-pixel centres (`compute_interpolation_weights`): the source
/// coordinate `(i + 0.5) * scale - 0.5`, its lower and upper neighbours clamped to the image,
/// and the fraction between them.
pub(crate) fn bilinear_taps(input: usize, output: usize) -> Vec<(usize, usize, f32)> {
    let scale = input as f32 / output as f32;
    let last = input as i64 - 1;
    (0..output)
        .map(|i| {
            let at = (i as f32 + 0.5) * scale - 0.5;
            let floor = at.floor();
            let lower = (floor as i64).clamp(0, last) as usize;
            let upper = (at.ceil() as i64).clamp(0, last) as usize;
            (lower, upper, at - floor)
        })
        .collect()
}

/// Bilinear resize of packed `(h, w, 3)` bytes into `sink`.
///
/// Enlarging vertically, consecutive output rows share source rows: each sampled source row is
/// interpolated horizontally once (and kept), then each output row is the vertical
/// interpolation of its two, TensorFlow's order of operations exactly. Reducing, they rarely
/// do: each output row is the vertical interpolation of its two source rows over their whole
/// width (contiguous, so SIMD), then one horizontal interpolation of that, which halves the
/// gathers of the other order (equal up to float rounding: bilinear interpolation is
/// separable). TensorFlow's order, four source pixels gathered per output pixel, measured
/// slower on W5 (256 × 256 to 64 × 64, 8% fewer images/s), though it reads a quarter of the
/// pixels.
fn bilinear(src: &[u8], (h, w): (usize, usize), sink: &Sink<'_>, out: &mut [f32]) {
    let (height, width) = (sink.height, sink.width);
    let xs = bilinear_taps(w, width);
    let ys = bilinear_taps(h, height);
    let row = |y: usize| &src[y * w * 3..(y + 1) * w * 3];
    let mut line = vec![[0f32; 3]; width];
    if height <= h {
        // One float more than the row: the horizontal pass loads 4 values per pixel.
        let mut blend = vec![0f32; w * 3 + 1];
        let taps = flat_taps(&xs, sink.flip);
        for (y, &(y0, y1, t)) in ys.iter().enumerate() {
            lerp_rows(row(y0), row(y1), t, &mut blend[..w * 3]);
            if sink.layout == Layout::Hwc {
                // The horizontal pass writes the output row itself (mapped, mirrored).
                let dst = &mut out[y * width * 3..(y + 1) * width * 3];
                gather_mapped(&blend, &taps, sink.affine, dst);
            } else {
                gather(bytemuck::cast_slice(&blend[..w * 3]), &xs, &mut line);
                sink.row(out, y, line.as_flattened());
            }
        }
        return;
    }
    // The source row as floats (converted once, contiguous: SIMD), then interpolated.
    let mut floats = vec![[0f32; 3]; w];
    let mut horizontal = |y: usize, dst: &mut [[f32; 3]]| {
        for (f, v) in floats.as_flattened_mut().iter_mut().zip(row(y)) {
            *f = f32::from(*v);
        }
        gather(&floats, &xs, dst);
    };
    // The horizontally interpolated rows `top_y` and `bottom_y` of the source.
    let (mut top, mut bottom) = (vec![[0f32; 3]; width], vec![[0f32; 3]; width]);
    let (mut top_y, mut bottom_y) = (usize::MAX, usize::MAX);
    for (y, &(y0, y1, t)) in ys.iter().enumerate() {
        if top_y != y0 {
            if bottom_y == y0 {
                std::mem::swap(&mut top, &mut bottom);
                std::mem::swap(&mut top_y, &mut bottom_y);
            } else {
                horizontal(y0, &mut top);
                top_y = y0;
            }
        }
        if bottom_y != y1 {
            if y1 == y0 {
                bottom.copy_from_slice(&top);
            } else {
                horizontal(y1, &mut bottom);
            }
            bottom_y = y1;
        }
        let values = line.as_flattened_mut().iter_mut();
        for ((l, a), b) in values.zip(top.as_flattened()).zip(bottom.as_flattened()) {
            *l = a + (b - a) * t;
        }
        sink.row(out, y, line.as_flattened());
    }
}

/// `out = a + (b - a) * t` over two rows of bytes, as floats: the vertical interpolation,
/// compiled for each instruction set (8 or 16 values at once) and picked at run time.
#[multiversion::multiversion(targets(
    "x86_64+avx512f+avx512bw+avx512vl",
    "x86_64+avx2+avx",
    "x86_64+sse4.1",
    "aarch64+neon"
))]
fn lerp_rows(a: &[u8], b: &[u8], t: f32, out: &mut [f32]) {
    for ((v, a), b) in out.iter_mut().zip(a).zip(b) {
        let (a, b) = (f32::from(*a), f32::from(*b));
        *v = a + (b - a) * t;
    }
}

/// The taps of [`gather_mapped`]: for each output pixel, left to right (mirrored if `flip`),
/// the offsets of its two source pixels' first values and the fraction between them.
fn flat_taps(xs: &[(usize, usize, f32)], flip: bool) -> Vec<(usize, usize, f32)> {
    let flat = |&(l, r, t): &(usize, usize, f32)| (l * 3, r * 3, t);
    if flip {
        xs.iter().rev().map(flat).collect()
    } else {
        xs.iter().map(flat).collect()
    }
}

/// [`gather`] and [`Sink::row`]'s HWC arm in one: output pixel `x` is `affine` of the
/// interpolation between the pixels at `taps[x]` of `src` (packed RGB values and one more),
/// the same operations on each value as the two steps.
///
/// A pixel is done as 4 lanes (its 3 values and the next pixel's first, computed and thrown
/// away): one vector load of each neighbour, one vector operation per step and one store,
/// whose fourth lane the next pixel overwrites (the output is written left to right; the
/// last pixel stores 3).
#[inline]
fn gather_mapped(src: &[f32], taps: &[(usize, usize, f32)], affine: &Affine, dst: &mut [f32]) {
    let Affine { scale, offset } = *affine;
    let (scale, offset) = (
        [scale[0], scale[1], scale[2], 0.0],
        [offset[0], offset[1], offset[2], 0.0],
    );
    let value = |&(l, r, t): &(usize, usize, f32)| -> [f32; 4] {
        let (Some(a), Some(b)) = (src.get(l..l + 4), src.get(r..r + 4)) else {
            return [0.0; 4]; // not reached: the taps are inside the row, `src` has one more
        };
        std::array::from_fn(|i| (a[i] + (b[i] - a[i]) * t) * scale[i] + offset[i])
    };
    let Some((last, body)) = taps.split_last() else {
        return;
    };
    for (x, tap) in body.iter().enumerate() {
        let v = value(tap);
        if let Some(d) = dst.get_mut(x * 3..x * 3 + 4) {
            d.copy_from_slice(&v);
        }
    }
    let x = body.len();
    if let Some(d) = dst.get_mut(x * 3..x * 3 + 3) {
        d.copy_from_slice(&value(last)[..3]);
    }
}

/// One horizontal bilinear pass: `dst[x]` between the pixels `xs[x]` of `src` (one bounds
/// check per tap, three lanes at a time).
#[inline]
fn gather(src: &[[f32; 3]], xs: &[(usize, usize, f32)], dst: &mut [[f32; 3]]) {
    for (d, &(l, r, t)) in dst.iter_mut().zip(xs) {
        let (Some(a), Some(b)) = (src.get(l), src.get(r)) else {
            continue; // not reached: the taps are inside the row
        };
        *d = std::array::from_fn(|i| a[i] + (b[i] - a[i]) * t);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::image::{Normalize, convert_image_dtype, resize, resize_with};

    /// TensorFlow's `ResizeBilinear` kernel (half-pixel centres) on a float image, value by
    /// value: `compute_lerp(top_left, top_right, bottom_left, bottom_right, x_lerp, y_lerp)`.
    fn tensorflow(img: &Array3<f32>, height: usize, width: usize) -> Array3<f32> {
        let (h, w, _) = img.dim();
        let (ys, xs) = (bilinear_taps(h, height), bilinear_taps(w, width));
        Array3::from_shape_fn((height, width, 3), |(y, x, c)| {
            let ((y0, y1, yl), (x0, x1, xl)) = (ys[y], xs[x]);
            let top = img[[y0, x0, c]] + (img[[y0, x1, c]] - img[[y0, x0, c]]) * xl;
            let bottom = img[[y1, x0, c]] + (img[[y1, x1, c]] - img[[y1, x0, c]]) * xl;
            top + (bottom - top) * yl
        })
    }

    fn pattern(h: usize, w: usize) -> Array3<u8> {
        Array3::from_shape_fn((h, w, 3), |(y, x, c)| {
            ((y * 37 + x * 11 + c * 90 + (x * y) % 13) % 256) as u8
        })
    }

    const SIZES: [((usize, usize), (usize, usize)); 7] = [
        ((256, 256), (64, 64)),
        ((375, 500), (224, 224)),
        ((17, 9), (40, 33)),
        ((1, 1), (3, 5)),
        ((5, 7), (5, 7)),
        ((100, 30), (7, 61)),
        ((2, 2), (1, 1)),
    ];

    #[test]
    fn taps_are_tensorflows_half_pixel_centres() {
        // 8 -> 2: coordinates 1.5 and 5.5.
        assert_eq!(bilinear_taps(8, 2), [(1, 2, 0.5), (5, 6, 0.5)]);
        // 2 -> 4: -0.25 (clamped to pixel 0), 0.25, 0.75, 1.25 (clamped to pixel 1).
        assert_eq!(
            bilinear_taps(2, 4),
            [(0, 0, 0.75), (0, 1, 0.25), (0, 1, 0.75), (1, 1, 0.25)]
        );
    }

    #[test]
    fn bytes_in_floats_out_equal_tensorflows_arithmetic_on_the_bytes() -> anyhow::Result<()> {
        // With the identity map the fused resize is TensorFlow's kernel on the bytes as floats
        // (tf.image.resize of a uint8 image), in every layout and mirrored: the same operations
        // in the same order when enlarging vertically (exact), vertical before horizontal when
        // reducing (float rounding: within 4 float steps at 255, 6.1e-5).
        let identity = Affine {
            scale: [1.0; 3],
            offset: [0.0; 3],
        };
        for ((h, w), (height, width)) in SIZES {
            let img = pattern(h, w);
            let want = tensorflow(&img.mapv(f32::from), height, width);
            for flip in [false, true] {
                for layout in [Layout::Hwc, Layout::Chw] {
                    let got = resize_to_f32(
                        &img,
                        (height, width),
                        ResizeMethod::Bilinear,
                        &identity,
                        flip,
                        layout,
                    )?;
                    for ((y, x, c), v) in want.indexed_iter() {
                        let ox = if flip { width - 1 - x } else { x };
                        let got = match layout {
                            Layout::Hwc => got[[y, ox, c]],
                            _ => got[[c, y, ox]],
                        };
                        let at =
                            format!("{h}x{w} -> {height}x{width} {layout:?} {flip} {y},{x},{c}");
                        if height > h {
                            assert_eq!(got.to_bits(), v.to_bits(), "{at}");
                        }
                        assert!((got - v).abs() <= 6.1e-5, "{at}: {got} vs {v}");
                    }
                }
            }
        }
        Ok(())
    }

    #[test]
    fn fused_convert_resize_equals_convert_then_resize() -> anyhow::Result<()> {
        for ((h, w), (height, width)) in SIZES {
            let img = pattern(h, w);
            let fused = convert_and_resize(&img, height, width)?;
            let floats = convert_image_dtype(&img);
            // fast_image_resize (`resize`) places its taps in f64, TensorFlow in f32: on this
            // high-contrast pattern they differ by up to 4e-5 (a 1e-5 shift of the sample
            // point across a jump of 200 levels); the fused resize follows TensorFlow.
            for (what, unfused, tolerance) in [
                ("tensorflow", tensorflow(&floats, height, width), 1e-6),
                ("resize", resize(floats.clone(), height, width)?, 1e-4),
            ] {
                let worst = fused
                    .iter()
                    .zip(&unfused)
                    .map(|(a, b)| (a - b).abs())
                    .fold(0f32, f32::max);
                assert!(
                    worst <= tolerance,
                    "{what} {h}x{w} -> {height}x{width}: {worst}"
                );
            }
        }
        Ok(())
    }

    #[test]
    fn normalise_flip_and_layout_equal_the_unfused_steps() -> anyhow::Result<()> {
        let n = Normalize::IMAGENET;
        let affine = Affine::normalize(&n);
        for method in [ResizeMethod::Bilinear, ResizeMethod::Area] {
            for ((h, w), (height, width)) in SIZES {
                let img = pattern(h, w);
                // Unfused: convert, resize the floats, normalise, flip.
                let floats = convert_image_dtype(&img);
                let small = match method {
                    ResizeMethod::Bilinear => tensorflow(&floats, height, width),
                    _ => resize_with(floats, height, width, method)?,
                };
                for flip in [false, true] {
                    let hwc =
                        resize_to_f32(&img, (height, width), method, &affine, flip, Layout::Hwc)?;
                    let chw =
                        resize_to_f32(&img, (height, width), method, &affine, flip, Layout::Chw)?;
                    assert_eq!(hwc.shape(), &[height, width, 3]);
                    assert_eq!(chw.shape(), &[3, height, width]);
                    for ((y, x, c), v) in small.indexed_iter() {
                        let want = (v - n.mean[c]) / n.std[c];
                        let ox = if flip { width - 1 - x } else { x };
                        let got = hwc[[y, ox, c]];
                        assert!(
                            (got - want).abs() <= 2e-5,
                            "{method:?} {h}x{w} -> {height}x{width} flip {flip} at \
                             {y},{x},{c}: {got} vs {want}"
                        );
                        assert_eq!(got, chw[[c, y, ox]]);
                    }
                }
            }
        }
        Ok(())
    }

    #[test]
    fn wrong_channels_and_zero_sizes_are_errors() {
        assert!(convert_and_resize(&Array3::zeros((4, 4, 1)), 2, 2).is_err());
        assert!(convert_and_resize(&Array3::zeros((4, 4, 3)), 0, 2).is_err());
        assert!(convert_and_resize(&Array3::zeros((0, 4, 3)), 2, 2).is_err());
    }
}
