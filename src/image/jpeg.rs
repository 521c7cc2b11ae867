//! Decoding only what is used: `tf.io.decode_jpeg(ratio=)`, `tf.io.decode_and_crop_jpeg`,
//! `tf.io.extract_jpeg_shape`, and a DCT-scaled decode-and-resize, on libjpeg-turbo.

use ndarray::Array3;

use super::jpeg_turbo::{self, scaled};

/// The most pixels (width × height) a JPEG or PNG may declare: 89,478,485, PIL's
/// `MAX_IMAGE_PIXELS` (about 256 MiB of RGB bytes, a 9,459 × 9,459 image).
///
/// Every decoder in [`streamload::image`](crate::image) reads the header first and refuses a
/// larger image with an error before allocating anything sized by it, so a small file that
/// declares 30,000 × 30,000 pixels (a decompression bomb) costs microseconds and no memory.
/// Within the limit, a decode holds its output (3 bytes a pixel, less for a crop or a scaled
/// decode) and, for a progressive JPEG, libjpeg's coefficients (2 bytes a pixel per channel at
/// most); a progressive JPEG of more than 1,000 scans (the "many scans" attack: a small file
/// that takes minutes) is refused by the libjpeg-turbo decoders.
pub const MAX_PIXELS: u64 = 89_478_485;

/// The (height, width) a JPEG declares, from its header alone (`tf.io.extract_jpeg_shape`,
/// without the channel count): no pixel is decoded.
///
/// ```
/// # let jpeg = streamload::image::__doc_jpeg(40, 30);
/// assert_eq!(streamload::image::extract_jpeg_shape(&jpeg)?, (30, 40));
/// # anyhow::Ok(())
/// ```
///
/// # Errors
///
/// If the header cannot be read (not a JPEG, truncated before the frame header).
pub fn extract_jpeg_shape(bytes: &[u8]) -> anyhow::Result<(usize, usize)> {
    super::decode::ensure_jpeg(bytes)?;
    let info = jpeg_turbo::header(bytes)?;
    Ok((info.height, info.width))
}

/// Decodes a JPEG at `1/ratio` of its size, `ratio` 1, 2, 4 or 8 (`tf.io.decode_jpeg(bytes,
/// channels=3, ratio=ratio)`): libjpeg-turbo scales in the inverse DCT, so a 1/4 decode does
/// a fraction of the work of a full one. Each side is `ceil(side / ratio)`, as in TensorFlow.
///
/// ```
/// # let jpeg = streamload::image::__doc_jpeg(250, 100);
/// let quarter = streamload::image::decode_jpeg_scaled(&jpeg, 4)?;
/// assert_eq!(quarter.shape(), &[25, 63, 3]); // ceil(100/4), ceil(250/4)
/// # anyhow::Ok(())
/// ```
///
/// # Errors
///
/// If `ratio` is not 1, 2, 4 or 8, if `bytes` is not a JPEG libjpeg-turbo can read (corrupt,
/// truncated: strict, as tf.io's without `try_recover_truncated`), or if the image is over
/// [`MAX_PIXELS`]. Grayscale and CMYK JPEGs come out as RGB, as in tf.io.
pub fn decode_jpeg_scaled(bytes: &[u8], ratio: usize) -> anyhow::Result<Array3<u8>> {
    super::decode::ensure_jpeg(bytes)?;
    jpeg_turbo::decode(bytes, ratio, None)
}

/// Decodes only the window `[y, x, height, width]` of a JPEG (`tf.io.decode_and_crop_jpeg(bytes,
/// crop_window, channels=3)`): the entropy decoding of the rows above and inside the window
/// cannot be skipped, but the inverse DCT, upsampling and colour conversion of everything
/// outside it are (libjpeg-turbo's `jpeg_skip_scanlines` and `jpeg_crop_scanline`), and rows
/// below it are not read at all. Equal to cropping the full decode.
///
/// ```
/// use ndarray::s;
/// use streamload::image;
/// # let jpeg = image::__doc_jpeg(64, 48);
/// let crop = image::decode_and_crop_jpeg(&jpeg, [8, 20, 16, 24])?;
/// assert_eq!(crop, image::decode_jpeg_scaled(&jpeg, 1)?.slice(s![8..24, 20..44, ..]));
/// # anyhow::Ok(())
/// ```
///
/// # Errors
///
/// As [`decode_jpeg_scaled`], and if the window is empty or not inside the image (tf.io:
/// "crop_window is not valid").
pub fn decode_and_crop_jpeg(bytes: &[u8], crop_window: [usize; 4]) -> anyhow::Result<Array3<u8>> {
    super::decode::ensure_jpeg(bytes)?;
    let [y, x, h, w] = crop_window;
    jpeg_turbo::decode(bytes, 1, Some((y, x, h, w)))
}

/// The largest DCT scale denominator (8, 4, 2 or 1) at which a `h` × `w` region stays at
/// least `target_h` × `target_w`.
pub(crate) fn dct_denominator(h: usize, w: usize, target_h: usize, target_w: usize) -> usize {
    [8, 4, 2]
        .into_iter()
        .find(|&d| h / d >= target_h && w / d >= target_w)
        .unwrap_or(1)
}

/// Decodes a JPEG straight to `height` × `width` 8-bit RGB: at the smallest DCT scale (1/8,
/// 1/4, 1/2 or 1) that is still at least the target on both sides, then the rest of the way
/// with [`resize_u8`](super::resize_u8) (bilinear, as `tf.image.resize`). This is PIL's
/// `Image.draft` and DALI's scaled decoding: most of the reduction happens in the inverse DCT,
/// which averages each 8×8 block (an antialiased reduction), so the result is smoother than
/// `tf.image.resize` of the full decode (which, without antialiasing, samples 2 of every `k`
/// pixels per axis) and much cheaper.
///
/// ```
/// # let jpeg = streamload::image::__doc_jpeg(256, 256);
/// let small = streamload::image::decode_and_resize(&jpeg, 64, 64)?; // a 1/4 decode, no resize
/// assert_eq!(small.shape(), &[64, 64, 3]);
/// # anyhow::Ok(())
/// ```
///
/// # Errors
///
/// As [`decode_jpeg_scaled`], and if a target size is 0.
pub fn decode_and_resize(bytes: &[u8], height: usize, width: usize) -> anyhow::Result<Array3<u8>> {
    anyhow::ensure!(
        height > 0 && width > 0,
        "decode_and_resize: target {height}x{width} must be positive"
    );
    super::decode::ensure_jpeg(bytes)?;
    let info = jpeg_turbo::header(bytes)?;
    let denom = dct_denominator(info.height, info.width, height, width);
    let img = jpeg_turbo::decode_known(bytes, info, denom, None)?;
    super::resize_u8(img, height, width)
}

/// Decodes `window` (`[y, x, h, w]` in full-size pixels) at the smallest DCT scale that keeps
/// it at least `target_h` × `target_w` (the window of the scaled image, at least one pixel):
/// the decode half of [`RandomResizedCrop`](super::RandomResizedCrop) and
/// [`CenterCrop`](super::CenterCrop), which resize it to the target themselves.
pub(crate) fn decode_crop_scaled(
    bytes: &[u8],
    (img_h, img_w): (usize, usize),
    [y, x, h, w]: [usize; 4],
    (target_h, target_w): (usize, usize),
) -> anyhow::Result<Array3<u8>> {
    let denom = dct_denominator(h, w, target_h, target_w);
    let (sh, sw) = (scaled(img_h, denom), scaled(img_w, denom));
    // The window in scaled pixels, kept inside the scaled image and at least one pixel.
    let (sy, sx) = ((y / denom).min(sh - 1), (x / denom).min(sw - 1));
    let wh = (h / denom).clamp(1, sh - sy);
    let ww = (w / denom).clamp(1, sw - sx);
    let info = jpeg_turbo::JpegInfo {
        height: img_h,
        width: img_w,
    };
    jpeg_turbo::decode_known(bytes, info, denom, Some((sy, sx, wh, ww)))
}

#[cfg(test)]
mod tests {
    use ndarray::s;

    use super::*;

    fn jpeg(width: u32, height: u32) -> Vec<u8> {
        crate::image::__doc_jpeg(width, height)
    }

    #[test]
    fn scaled_sizes_round_up_as_tensorflow() -> anyhow::Result<()> {
        let bytes = jpeg(500, 375);
        for (ratio, shape) in [
            (1, [375, 500]),
            (2, [188, 250]),
            (4, [94, 125]),
            (8, [47, 63]),
        ] {
            let img = decode_jpeg_scaled(&bytes, ratio)?;
            assert_eq!(&img.shape()[..2], &shape, "ratio {ratio}");
        }
        let err = decode_jpeg_scaled(&bytes, 3).expect_err("ratio 3");
        assert!(err.to_string().contains("1, 2, 4 or 8"), "{err:#}");
        Ok(())
    }

    #[test]
    fn scaled_decode_is_close_to_a_block_average() -> anyhow::Result<()> {
        let bytes = jpeg(64, 64);
        let full = decode_jpeg_scaled(&bytes, 1)?.mapv(f32::from);
        let quarter = decode_jpeg_scaled(&bytes, 4)?;
        for (y, x) in [(2, 3), (10, 10), (15, 0)] {
            let block = full.slice(s![4 * y..4 * y + 4, 4 * x..4 * x + 4, 0]);
            let mean = block.sum() / 16.0;
            let got = f32::from(quarter[[y, x, 0]]);
            assert!((got - mean).abs() < 6.0, "({y}, {x}): {got} vs {mean}");
        }
        Ok(())
    }

    #[test]
    fn crops_equal_the_full_decode_cut() -> anyhow::Result<()> {
        let bytes = jpeg(100, 70);
        let full = decode_jpeg_scaled(&bytes, 1)?;
        for [y, x, h, w] in [
            [0, 0, 70, 100],
            [0, 0, 1, 1],
            [69, 99, 1, 1],
            [13, 17, 30, 41],
            [8, 16, 16, 16],
            [5, 3, 60, 90],
        ] {
            let crop = decode_and_crop_jpeg(&bytes, [y, x, h, w])?;
            assert_eq!(
                crop,
                full.slice(s![y..y + h, x..x + w, ..]),
                "{y} {x} {h} {w}"
            );
        }
        for bad in [
            [0, 0, 0, 10],
            [60, 0, 11, 10],
            [0, 95, 10, 6],
            [usize::MAX, 0, 2, 2],
        ] {
            let err = decode_and_crop_jpeg(&bytes, bad).expect_err("outside");
            assert!(err.to_string().contains("crop window"), "{err:#}");
        }
        Ok(())
    }

    #[test]
    fn decode_and_resize_picks_the_largest_scale_not_below_the_target() -> anyhow::Result<()> {
        assert_eq!(dct_denominator(256, 256, 64, 64), 4);
        assert_eq!(dct_denominator(375, 500, 224, 224), 1);
        assert_eq!(dct_denominator(1000, 1000, 224, 224), 4);
        assert_eq!(dct_denominator(900, 1000, 224, 224), 4);
        assert_eq!(dct_denominator(800, 1000, 224, 224), 2);
        assert_eq!(dct_denominator(10, 10, 224, 224), 1);
        let bytes = jpeg(256, 256);
        let direct = decode_and_resize(&bytes, 64, 64)?;
        assert_eq!(direct, decode_jpeg_scaled(&bytes, 4)?);
        assert_eq!(decode_and_resize(&bytes, 50, 70)?.shape(), &[50, 70, 3]);
        Ok(())
    }

    #[test]
    fn shape_from_the_header() -> anyhow::Result<()> {
        assert_eq!(extract_jpeg_shape(&jpeg(33, 17))?, (17, 33));
        assert!(extract_jpeg_shape(b"\x89PNG\r\n\x1a\n....").is_err());
        Ok(())
    }
}
