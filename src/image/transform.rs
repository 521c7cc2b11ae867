//! The ImageNet training and evaluation transforms, each fused from the encoded bytes to the
//! normalised float tensor: [`RandomResizedCrop`] and [`CenterCrop`].

use ndarray::Array3;
use rand::Rng;

use super::convert_resize::{Affine, resize_to_f32};
use super::crop::{DistortedBoxOptions, sample_distorted_bounding_box};
use super::decode::{JPEG_MAGIC, PNG_MAGIC, check_pixels};
use super::normalize::{Layout, Normalize};
use super::resize::ResizeMethod;

/// ImageNet training's input transform, from JPEG bytes to a normalised float tensor:
/// random-resized-crop (a window from [`sample_distorted_bounding_box`], decoded alone with
/// [`decode_and_crop_jpeg`](super::decode_and_crop_jpeg)), resize to `height` × `width`,
/// random left-right flip, [`convert_and_normalize`](super::convert_and_normalize).
/// TensorFlow's official ResNet preprocessing and torchvision's `RandomResizedCrop` +
/// `RandomHorizontalFlip` + `ToTensor` + `Normalize`.
///
/// Fused so nothing is done twice and nothing is wasted: the window is decoded at the smallest
/// DCT scale (1/8, 1/4, 1/2) that keeps it at least the target size (a 1,000 × 800 crop for a
/// 224 × 224 output is decoded at 1/2; set `dct_scaling` to `false` for full-size decoding
/// and only the bilinear resize, exactly TensorFlow's arithmetic), everything outside the
/// window is skipped, the resize runs on bytes, and the flip, the conversion to float, the
/// normalisation and the layout are one pass over the output.
///
/// A PNG (ImageNet has one among its JPEGs) is decoded whole and cropped, rather than refused.
///
/// # Examples
///
/// In a pipeline: the generator of [`random_map`](crate::Dataset::random_map) makes each
/// element's crop and flip reproducible whatever the parallelism, and
/// [`collate`](crate::Dataset::collate) stacks the batch into one `Array4`.
///
/// ```
/// use ndarray::{Array1, Array4};
/// use streamload::image::{Layout, RandomResizedCrop};
/// use streamload::{AUTOTUNE, Dataset};
/// # tokio_test::block_on(async {
/// let jpegs: Vec<(Vec<u8>, i64)> = (0..8).map(|i| (streamload::image::__doc_jpeg(120, 90), i)).collect();
/// let mut train = RandomResizedCrop::new(32, 32);
/// train.layout = Layout::Chw; // PyTorch's order
/// let batches = Dataset::from_vec(jpegs)
///     .shuffle(8, Some(1))
///     .try_random_map(AUTOTUNE, Some(42), move |(bytes, label), rng| {
///         Ok((train.apply(&bytes, rng)?, label))
///     })
///     .batch(4)
///     .collate();
/// let batches: Vec<(Array4<f32>, Array1<i64>)> = batches.collect().await?;
/// let (images, labels) = &batches[0];
/// assert_eq!(images.shape(), &[4, 3, 32, 32]);
/// assert_eq!(labels.len(), 4);
/// # anyhow::Ok(()) }).unwrap();
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct RandomResizedCrop {
    /// Output height.
    pub height: usize,
    /// Output width.
    pub width: usize,
    /// The crop's ranges. Default: [`DistortedBoxOptions::imagenet`].
    pub crop: DistortedBoxOptions,
    /// The resize. Default: bilinear (`tf.image.resize`'s default and torchvision's).
    pub method: ResizeMethod,
    /// Decode at a DCT scale when the window is at least twice the target. Default: true.
    pub dct_scaling: bool,
    /// Flip left-right with probability 1/2. Default: true.
    pub flip: bool,
    /// Default: [`Normalize::IMAGENET`].
    pub normalize: Normalize,
    /// Default: [`Layout::Hwc`].
    pub layout: Layout,
}

impl RandomResizedCrop {
    /// The transform to `height` × `width` with ImageNet's defaults (see the fields).
    ///
    /// # Panics
    ///
    /// If a size is 0.
    pub fn new(height: usize, width: usize) -> Self {
        assert!(
            height > 0 && width > 0,
            "RandomResizedCrop: sizes must be positive"
        );
        Self {
            height,
            width,
            crop: DistortedBoxOptions::imagenet(),
            method: ResizeMethod::Bilinear,
            dct_scaling: true,
            flip: true,
            normalize: Normalize::IMAGENET,
            layout: Layout::Hwc,
        }
    }

    /// Transforms one encoded image; draws the crop, then the flip, from `rng`.
    ///
    /// # Errors
    ///
    /// If `bytes` is not a JPEG or PNG the decoders can read, or is over
    /// [`MAX_PIXELS`](super::MAX_PIXELS). The message names no file: add the file's name as
    /// context (`.with_context(|| format!("decoding image {}", path.display()))`).
    pub fn apply(&self, bytes: &[u8], rng: &mut impl Rng) -> anyhow::Result<Array3<f32>> {
        let shape = image_shape(bytes)?;
        let window = sample_distorted_bounding_box(shape.0, shape.1, &self.crop, rng);
        let flip = self.flip && rng.random_bool(0.5);
        let crop = decode_window(
            bytes,
            shape,
            window,
            (self.height, self.width),
            self.dct_scaling,
        )?;
        resize_to_f32(
            &crop,
            (self.height, self.width),
            self.method,
            &Affine::normalize(&self.normalize),
            flip,
            self.layout,
        )
    }
}

/// ImageNet evaluation's input transform: the centre `height` × `width` of the image resized
/// so its shorter side is `resize_shorter` (torchvision's `Resize(256)` + `CenterCrop(224)`;
/// TensorFlow's official ResNet eval, whose crop is 224/(224+32) of the shorter side), then
/// [`convert_and_normalize`](super::convert_and_normalize).
///
/// Computed the cheap way round: the window of the original image that becomes the output is
/// decoded alone (at a DCT scale if it is at least twice the target), then resized to the
/// target. The result is the same geometry as resizing the whole image and cropping.
///
/// ```
/// use streamload::image::CenterCrop;
/// # let jpeg = streamload::image::__doc_jpeg(500, 375);
/// let eval = CenterCrop::new(224, 224, 256);
/// let img = eval.apply(&jpeg)?;
/// assert_eq!(img.shape(), &[224, 224, 3]);
/// # anyhow::Ok(())
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct CenterCrop {
    /// Output height.
    pub height: usize,
    /// Output width.
    pub width: usize,
    /// The shorter side of the (virtual) resized image the crop is taken from.
    pub resize_shorter: usize,
    /// Default: bilinear.
    pub method: ResizeMethod,
    /// Decode at a DCT scale when the window is at least twice the target. Default: true.
    pub dct_scaling: bool,
    /// Default: [`Normalize::IMAGENET`].
    pub normalize: Normalize,
    /// Default: [`Layout::Hwc`].
    pub layout: Layout,
}

impl CenterCrop {
    /// The transform to `height` × `width` from an image resized to `resize_shorter` on its
    /// shorter side, with ImageNet's normalisation (see the fields).
    ///
    /// # Panics
    ///
    /// If a size is 0.
    pub fn new(height: usize, width: usize, resize_shorter: usize) -> Self {
        assert!(
            height > 0 && width > 0 && resize_shorter > 0,
            "CenterCrop: sizes must be positive"
        );
        Self {
            height,
            width,
            resize_shorter,
            method: ResizeMethod::Bilinear,
            dct_scaling: true,
            normalize: Normalize::IMAGENET,
            layout: Layout::Hwc,
        }
    }

    /// The window `[y, x, h, w]` of an `img_h` × `img_w` image that becomes the output.
    pub(crate) fn window(&self, img_h: usize, img_w: usize) -> [usize; 4] {
        // The image is scaled by s = resize_shorter / shorter side; the output covers
        // height / s x width / s source pixels, centred.
        let shorter = img_h.min(img_w) as f64;
        let per_out = shorter / self.resize_shorter as f64;
        let h = ((self.height as f64 * per_out).round() as usize).clamp(1, img_h);
        let w = ((self.width as f64 * per_out).round() as usize).clamp(1, img_w);
        [(img_h - h) / 2, (img_w - w) / 2, h, w]
    }

    /// Transforms one encoded image.
    ///
    /// # Errors
    ///
    /// As [`RandomResizedCrop::apply`].
    pub fn apply(&self, bytes: &[u8]) -> anyhow::Result<Array3<f32>> {
        let shape = image_shape(bytes)?;
        let crop = decode_window(
            bytes,
            shape,
            self.window(shape.0, shape.1),
            (self.height, self.width),
            self.dct_scaling,
        )?;
        resize_to_f32(
            &crop,
            (self.height, self.width),
            self.method,
            &Affine::normalize(&self.normalize),
            false,
            self.layout,
        )
    }
}

/// (height, width) of a JPEG or PNG from its header, checked against the pixel limit.
fn image_shape(bytes: &[u8]) -> anyhow::Result<(usize, usize)> {
    let (h, w) = if bytes.starts_with(PNG_MAGIC) {
        let reader = ::image::ImageReader::with_format(
            std::io::Cursor::new(bytes),
            ::image::ImageFormat::Png,
        );
        let (w, h) = reader
            .into_dimensions()
            .map_err(|e| anyhow::anyhow!("corrupt or truncated PNG: {e}"))?;
        (h as usize, w as usize)
    } else {
        super::extract_jpeg_shape(bytes)?
    };
    anyhow::ensure!(h > 0 && w > 0, "image of {w}x{h} pixels has no pixels");
    check_pixels(
        if bytes.starts_with(JPEG_MAGIC) {
            "JPEG"
        } else {
            "PNG"
        },
        w,
        h,
    )?;
    Ok((h, w))
}

/// Decodes `window` of the image, at the smallest DCT scale that keeps it at least `target`
/// if `dct_scaling` (the resize to `target` is left to the caller, fused with the rest).
fn decode_window(
    bytes: &[u8],
    shape: (usize, usize),
    window: [usize; 4],
    target: (usize, usize),
    dct_scaling: bool,
) -> anyhow::Result<Array3<u8>> {
    if bytes.starts_with(PNG_MAGIC) {
        let [y, x, h, w] = window;
        let full = super::decode_png(bytes)?;
        return Ok(full.slice(ndarray::s![y..y + h, x..x + w, ..]).to_owned());
    }
    if dct_scaling {
        super::jpeg::decode_crop_scaled(bytes, shape, window, target)
    } else {
        super::decode_and_crop_jpeg(bytes, window)
    }
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;

    use super::*;
    use crate::image::__doc_jpeg as jpeg;

    #[test]
    fn training_output_has_the_shape_range_and_layout_asked() -> anyhow::Result<()> {
        let bytes = jpeg(500, 375);
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
        let mut t = RandomResizedCrop::new(224, 224);
        let img = t.apply(&bytes, &mut rng)?;
        assert_eq!(img.shape(), &[224, 224, 3]);
        // ImageNet normalisation maps [0, 1] to about [-2.12, 2.64].
        assert!(img.iter().all(|v| (-2.2..=2.7).contains(v)));
        t.layout = Layout::Chw;
        t.normalize = Normalize::NONE;
        let img = t.apply(&bytes, &mut rng)?;
        assert_eq!(img.shape(), &[3, 224, 224]);
        assert!(img.iter().all(|v| (0.0..=1.0).contains(v)));
        Ok(())
    }

    #[test]
    fn training_transform_is_the_crop_resize_flip_of_the_full_decode() -> anyhow::Result<()> {
        // Without DCT scaling the fused transform is: draw the window, crop the full decode,
        // convert to float, resize, flip (up to float rounding).
        let bytes = jpeg(300, 200);
        let full = crate::image::decode_jpeg_scaled(&bytes, 1)?;
        let mut t = RandomResizedCrop::new(48, 64);
        t.dct_scaling = false;
        t.normalize = Normalize::NONE;
        for seed in 0..10 {
            let got = t.apply(&bytes, &mut rand_chacha::ChaCha8Rng::seed_from_u64(seed))?;
            let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
            let [y, x, h, w] = sample_distorted_bounding_box(200, 300, &t.crop, &mut rng);
            let flip = rng.random_bool(0.5);
            let crop = full.slice(ndarray::s![y..y + h, x..x + w, ..]).to_owned();
            // Unfused, as TensorFlow's ResNet preprocessing: convert, resize the floats, flip.
            let small = crate::image::resize(crate::image::convert_image_dtype(&crop), 48, 64)?;
            let want = if flip {
                crate::image::flip_left_right(small)
            } else {
                small
            };
            let worst = got
                .iter()
                .zip(&want)
                .map(|(a, b)| (a - b).abs())
                .fold(0f32, f32::max);
            assert!(worst <= 1e-5, "seed {seed}: max difference {worst}");
        }
        Ok(())
    }

    #[test]
    fn dct_scaled_training_crop_is_close_to_the_full_size_one() -> anyhow::Result<()> {
        let bytes = jpeg(1200, 900);
        let mut exact = RandomResizedCrop::new(64, 64);
        exact.normalize = Normalize::NONE;
        exact.flip = false;
        let mut fast = exact.clone();
        exact.dct_scaling = false;
        fast.dct_scaling = true;
        for seed in 0..5 {
            let a = exact.apply(&bytes, &mut rand_chacha::ChaCha8Rng::seed_from_u64(seed))?;
            let b = fast.apply(&bytes, &mut rand_chacha::ChaCha8Rng::seed_from_u64(seed))?;
            // The smooth channels (the third is a sawtooth, where unfiltered and filtered
            // reductions differ most).
            let diff = &a.slice(ndarray::s![.., .., ..2]) - &b.slice(ndarray::s![.., .., ..2]);
            let mean = diff.mapv(f32::abs).mean().unwrap_or(1.0);
            assert!(mean < 0.03, "seed {seed}: mean difference {mean}");
        }
        Ok(())
    }

    #[test]
    fn eval_window_is_the_centre_of_the_resized_image() {
        let eval = CenterCrop::new(224, 224, 256);
        // 375 -> 256: 224 output pixels cover 224 * 375 / 256 = 328 source pixels.
        assert_eq!(eval.window(375, 500), [23, 86, 328, 328]);
        assert_eq!(eval.window(256, 256), [16, 16, 224, 224]);
        // A tiny image: the window is clamped to the image.
        assert_eq!(
            CenterCrop::new(224, 224, 100).window(50, 50),
            [0, 0, 50, 50]
        );
    }

    #[test]
    fn png_goes_through_the_same_transforms() -> anyhow::Result<()> {
        let img = ::image::RgbImage::from_fn(80, 60, |x, y| ::image::Rgb([x as u8, y as u8, 9]));
        let mut png = std::io::Cursor::new(Vec::new());
        img.write_to(&mut png, ::image::ImageFormat::Png)?;
        let png = png.into_inner();
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
        assert_eq!(
            RandomResizedCrop::new(16, 16)
                .apply(&png, &mut rng)?
                .shape(),
            &[16, 16, 3]
        );
        assert_eq!(
            CenterCrop::new(16, 16, 20).apply(&png)?.shape(),
            &[16, 16, 3]
        );
        Ok(())
    }
}
