//! `tf.image.sample_distorted_bounding_box` (for the whole image as the object): the random
//! crop of ImageNet training.

use rand::Rng;

/// The ranges of [`sample_distorted_bounding_box`] (its arguments in `tf.image`).
///
/// [`Default`] is `tf.image.sample_distorted_bounding_box`'s defaults; [`imagenet`]
/// (`DistortedBoxOptions::imagenet`) is the random-resized-crop of ImageNet training
/// (TensorFlow's official ResNet preprocessing, torchvision's `RandomResizedCrop`).
///
/// [`imagenet`]: DistortedBoxOptions::imagenet
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DistortedBoxOptions {
    /// The crop must cover at least this fraction of the image (tf.image's
    /// `min_object_covered`, with the whole image as the object's box). Default 0.1.
    pub min_object_covered: f32,
    /// Width / height of the crop, drawn uniformly from this range. Default (0.75, 1.33).
    pub aspect_ratio_range: (f32, f32),
    /// Area of the crop as a fraction of the image's, from this range. Default (0.05, 1.0).
    pub area_range: (f32, f32),
    /// Tries before falling back to the whole image. Default 100.
    pub max_attempts: usize,
}

impl Default for DistortedBoxOptions {
    fn default() -> Self {
        Self {
            min_object_covered: 0.1,
            aspect_ratio_range: (0.75, 1.33),
            area_range: (0.05, 1.0),
            max_attempts: 100,
        }
    }
}

impl DistortedBoxOptions {
    /// ImageNet training's crop: area 8% to 100%, aspect 3/4 to 4/3, 10 attempts (with
    /// `min_object_covered` 0.1), as TensorFlow's official ResNet preprocessing.
    pub fn imagenet() -> Self {
        Self {
            min_object_covered: 0.1,
            aspect_ratio_range: (3.0 / 4.0, 4.0 / 3.0),
            area_range: (0.08, 1.0),
            max_attempts: 10,
        }
    }
}

/// Draws a random crop window `[y, x, height, width]` of a `height` × `width` image, as
/// `tf.image.sample_distorted_bounding_box(image_size, bounding_boxes=<the whole image>, ...)`
/// with `use_image_if_no_bounding_boxes=True` does: up to `max_attempts` times, an aspect
/// ratio is drawn from `aspect_ratio_range` and a height between those giving the smallest and
/// largest area of `area_range` (rounded as TensorFlow rounds); the first crop that fits in
/// the image and covers `min_object_covered` of it is placed uniformly at random. If none
/// does, the whole image (TensorFlow's fallback). The window is in the form
/// [`decode_and_crop_jpeg`](super::decode_and_crop_jpeg) takes.
///
/// Pass the element's generator of [`Dataset::random_map`](crate::Dataset::random_map) so
/// each element's crop is reproducible whatever the parallelism. (The draws are TensorFlow's
/// algorithm on a different generator: the same distribution, not the same numbers.)
///
/// ```
/// use rand::SeedableRng;
/// use streamload::image::{DistortedBoxOptions, sample_distorted_bounding_box};
/// let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
/// let options = DistortedBoxOptions::imagenet();
/// let [y, x, h, w] = sample_distorted_bounding_box(375, 500, &options, &mut rng);
/// assert!(y + h <= 375 && x + w <= 500);
/// let area = (h * w) as f32 / (375.0 * 500.0);
/// assert!((0.08..=1.0).contains(&area));
/// ```
///
/// # Panics
///
/// If a range is empty or reversed, or an area bound is not in `(0, 1]` (tf.image's
/// InvalidArgument checks).
pub fn sample_distorted_bounding_box(
    height: usize,
    width: usize,
    options: &DistortedBoxOptions,
    rng: &mut impl Rng,
) -> [usize; 4] {
    let (min_ratio, max_ratio) = options.aspect_ratio_range;
    let (min_area, max_area) = options.area_range;
    assert!(
        min_ratio > 0.0 && min_ratio <= max_ratio,
        "sample_distorted_bounding_box: aspect_ratio_range must be positive and ordered"
    );
    assert!(
        min_area > 0.0 && min_area <= max_area && max_area <= 1.0,
        "sample_distorted_bounding_box: area_range must be within (0, 1] and ordered"
    );
    let whole = [0, 0, height, width];
    if height == 0 || width == 0 {
        return whole;
    }
    for _ in 0..options.max_attempts {
        let ratio = rng.random::<f32>() * (max_ratio - min_ratio) + min_ratio;
        let covers = |[_, _, h, w]: &[usize; 4]| {
            (h * w) as f32 >= options.min_object_covered * (height * width) as f32
        };
        if let Some(window) =
            random_crop(height, width, min_area, max_area, ratio, rng).filter(covers)
        {
            return window;
        }
    }
    whole
}

/// TensorFlow's `GenerateRandomCrop` (sample_distorted_bounding_box_op.cc).
fn random_crop(
    height: usize,
    width: usize,
    min_relative: f32,
    max_relative: f32,
    ratio: f32,
    rng: &mut impl Rng,
) -> Option<[usize; 4]> {
    let (oh, ow) = (height as f32, width as f32);
    let min_area = min_relative * ow * oh;
    let max_area = max_relative * ow * oh;
    // lrintf: round half to even.
    let round = |v: f32| v.round_ties_even() as i64;
    let mut h = round((min_area / ratio).sqrt());
    let mut max_h = round((max_area / ratio).sqrt());
    if round(max_h as f32 * ratio) > width as i64 {
        // The largest height whose rounded width still fits.
        max_h = ((ow + 0.5 - 1e-7) / ratio) as i64;
        if round(max_h as f32 * ratio) > width as i64 {
            max_h -= 1;
        }
    }
    max_h = max_h.min(height as i64);
    h = h.min(max_h);
    if h < max_h {
        h += rng.random_range(0..=max_h - h);
    }
    let mut w = round(h as f32 * ratio);
    let mut area = (w * h) as f32;
    if area < min_area {
        h += 1;
        w = round(h as f32 * ratio);
        area = (w * h) as f32;
    }
    if area > max_area {
        h -= 1;
        w = round(h as f32 * ratio);
        area = (w * h) as f32;
    }
    if area < min_area
        || area > max_area
        || w > width as i64
        || h > height as i64
        || w <= 0
        || h <= 0
    {
        return None;
    }
    let (h, w) = (h as usize, w as usize);
    let y = if h < height {
        rng.random_range(0..height - h)
    } else {
        0
    };
    let x = if w < width {
        rng.random_range(0..width - w)
    } else {
        0
    };
    Some([y, x, h, w])
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;

    use super::*;

    #[test]
    fn crops_respect_the_ranges_and_vary() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(3);
        let options = DistortedBoxOptions::imagenet();
        let (mut small, mut whole, mut offsets) = (0, 0, std::collections::HashSet::new());
        for _ in 0..2000 {
            let [y, x, h, w] = sample_distorted_bounding_box(375, 500, &options, &mut rng);
            assert!(y + h <= 375 && x + w <= 500 && h > 0 && w > 0);
            if [y, x, h, w] == [0, 0, 375, 500] {
                whole += 1;
                continue;
            }
            let area = (h * w) as f32 / (375.0 * 500.0);
            assert!((0.1..=1.0).contains(&area), "area {area}");
            let ratio = w as f32 / h as f32;
            // Rounding to whole pixels moves the ratio a little.
            assert!((0.74..=1.35).contains(&ratio), "ratio {ratio} ({h}x{w})");
            if area < 0.3 {
                small += 1;
            }
            offsets.insert((y, x));
        }
        assert!(small > 300, "{small} small crops");
        assert!(whole < 200, "{whole} fallbacks");
        assert!(offsets.len() > 1000);
    }

    #[test]
    fn impossible_constraints_fall_back_to_the_whole_image() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(3);
        // A 10x1000 strip cannot hold a near-square crop of 50% of its area.
        let options = DistortedBoxOptions {
            area_range: (0.5, 0.6),
            aspect_ratio_range: (0.9, 1.1),
            ..DistortedBoxOptions::default()
        };
        assert_eq!(
            sample_distorted_bounding_box(10, 1000, &options, &mut rng),
            [0, 0, 10, 1000]
        );
        // min_object_covered above the largest area: never satisfied.
        let options = DistortedBoxOptions {
            min_object_covered: 0.9,
            area_range: (0.1, 0.5),
            ..DistortedBoxOptions::default()
        };
        assert_eq!(
            sample_distorted_bounding_box(100, 100, &options, &mut rng),
            [0, 0, 100, 100]
        );
    }

    #[test]
    fn the_same_generator_state_gives_the_same_crop() {
        let options = DistortedBoxOptions::imagenet();
        let draw = |seed| {
            let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
            sample_distorted_bounding_box(480, 640, &options, &mut rng)
        };
        assert_eq!(draw(11), draw(11));
        assert!(
            (0..20)
                .map(draw)
                .collect::<std::collections::HashSet<_>>()
                .len()
                > 15
        );
    }

    #[test]
    fn distribution_matches_tensorflows() {
        // TensorFlow 2.21, 3,000 draws of sample_distorted_bounding_box([375, 500, 3], the
        // whole image, min_object_covered 0.1, aspect [3/4, 4/3], area [0.08, 1], 10
        // attempts): area fraction mean 0.385, median 0.357, 10th and 90th percentiles 0.138
        // and 0.680; width/height mean 1.042; no fallback to the whole image; mean y 58.1.
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(21);
        let options = DistortedBoxOptions::imagenet();
        let n = 20_000;
        let (mut areas, mut ratio, mut whole, mut y_sum) = (Vec::new(), 0.0, 0, 0);
        for _ in 0..n {
            let [y, _, h, w] = sample_distorted_bounding_box(375, 500, &options, &mut rng);
            whole += usize::from(h == 375 && w == 500);
            areas.push((h * w) as f64 / (375.0 * 500.0));
            ratio += w as f64 / h as f64;
            y_sum += y;
        }
        areas.sort_by(f64::total_cmp);
        let mean = areas.iter().sum::<f64>() / n as f64;
        let pct = |p: usize| areas[n * p / 100];
        let near = |got: f64, want: f64, tol: f64| {
            assert!((got - want).abs() <= tol, "{got} vs TensorFlow's {want}");
        };
        near(mean, 0.385, 0.015);
        near(pct(50), 0.357, 0.02);
        near(pct(10), 0.138, 0.015);
        near(pct(90), 0.680, 0.02);
        near(ratio / n as f64, 1.042, 0.01);
        near(y_sum as f64 / n as f64, 58.1, 3.0);
        assert!(whole < n / 200, "{whole} fallbacks");
    }
}
