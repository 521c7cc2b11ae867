//! `random_flip_left_right`, `random_brightness`, `random_saturation` and `clip_by_value` fused
//! into one pass over the image, after the flip's (W5's augmentation).

use ndarray::Array3;
use rand::Rng;

/// `tf.image.random_flip_left_right`, `random_brightness(max_delta)`, `random_saturation(lower,
/// upper)` and `tf.clip_by_value(min, max)`, in that order, in place: if the flip was drawn
/// each row is mirrored, then one pass brightens, saturates and clips every pixel, several
/// pixels at a time (vector instructions; the four separate calls make four passes and three
/// new images).
///
/// The same random draws in the same order as the four calls one after another
/// ([`random_flip_left_right`](super::random_flip_left_right), then
/// [`random_brightness`](super::random_brightness), then
/// [`random_saturation`](super::random_saturation)), and the same arithmetic on each value, so
/// the result is theirs bit for bit; an image without 3 channels goes through them one by one.
///
/// ```
/// use ndarray::Array3;
/// use rand::SeedableRng;
/// use streamload::image;
/// let img = Array3::from_shape_fn((4, 5, 3), |(y, x, c)| (y * 15 + x * 3 + c) as f32 / 60.0);
/// let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
/// let fused = image::random_flip_brightness_saturation_clip(
///     img.clone(), 32.0 / 255.0, (0.5, 1.5), (0.0, 1.0), &mut rng);
/// let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
/// let img = image::random_flip_left_right(img, &mut rng);
/// let img = image::random_brightness(img, 32.0 / 255.0, &mut rng);
/// let img = image::random_saturation(img, 0.5, 1.5, &mut rng);
/// assert_eq!(fused, image::clip_by_value(img, 0.0, 1.0));
/// ```
///
/// # Panics
///
/// As [`random_brightness`](super::random_brightness) and
/// [`random_saturation`](super::random_saturation): if `max_delta` is negative or not finite,
/// if `lower` is negative or `upper <= lower`.
pub fn random_flip_brightness_saturation_clip(
    image: Array3<f32>,
    max_delta: f32,
    (lower, upper): (f32, f32),
    (min, max): (f32, f32),
    rng: &mut impl Rng,
) -> Array3<f32> {
    assert!(
        max_delta >= 0.0 && max_delta.is_finite(),
        "random_brightness: max_delta must be non-negative and finite"
    );
    assert!(
        lower >= 0.0,
        "random_saturation: lower must be non-negative"
    );
    assert!(upper > lower, "random_saturation: upper must be > lower");
    // The draws of the three random calls, in their order.
    let flip = rng.random_bool(0.5);
    let delta = if max_delta == 0.0 {
        0.0
    } else {
        rng.random_range(-max_delta..max_delta)
    };
    let factor = rng.random_range(lower..upper);
    let mut image = super::standard(image);
    let (_, width, channels) = image.dim();
    let Some(pixels) = image.as_slice_mut().filter(|_| channels == 3) else {
        let image = if flip {
            super::flip_left_right(image)
        } else {
            image
        };
        let image = super::adjust_brightness(image, delta);
        let image = super::adjust_saturation(image, factor);
        return super::clip_by_value(image, min, max);
    };
    if flip && width > 0 {
        for row in pixels.chunks_exact_mut(width * 3) {
            mirror_row(row);
        }
    }
    brighten_saturate_clip(pixels, delta, factor, (min, max));
    image
}

/// Reverses the order of the pixels (3 values each) of one row.
fn mirror_row(row: &mut [f32]) {
    let n = row.len() / 3;
    for left in 0..n / 2 {
        let right = n - 1 - left;
        for c in 0..3 {
            row.swap(left * 3 + c, right * 3 + c);
        }
    }
}

/// `adjust_brightness(delta)`, `adjust_saturation(factor)` (its closed form, see there) and
/// the clip to `[min, max]` of packed RGB values, each pixel on its own: branch-free (the grey
/// and black pixels, whose saturation is 0, are a select), so the compiler runs it on 4, 8 or
/// 16 pixels at once, compiled for each instruction set and picked at run time. Each lane does
/// the scalar operations in the scalar order, so the values are the unfused calls' bit for bit.
#[multiversion::multiversion(targets(
    "x86_64+avx512f+avx512bw+avx512vl",
    "x86_64+avx2+avx",
    "x86_64+sse4.1",
    "aarch64+neon"
))]
fn brighten_saturate_clip(values: &mut [f32], delta: f32, factor: f32, (min, max): (f32, f32)) {
    for px in values.chunks_exact_mut(3) {
        let (r, g, b) = (px[0] + delta, px[1] + delta, px[2] + delta);
        let v = r.max(g).max(b);
        let range = v - r.min(g).min(b);
        let grey = v <= 0.0 || range <= 0.0;
        let s = (range / v * factor).clamp(0.0, 1.0);
        let k = s * v / range;
        let adjust = |x: f32| {
            let x = if grey { v } else { v - k * (v - x) };
            x.max(min).min(max)
        };
        px[0] = adjust(r);
        px[1] = adjust(g);
        px[2] = adjust(b);
    }
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;

    use super::*;
    use crate::image::{
        clip_by_value, random_brightness, random_flip_left_right, random_saturation,
    };

    fn unfused(
        img: Array3<f32>,
        max_delta: f32,
        (lower, upper): (f32, f32),
        (min, max): (f32, f32),
        rng: &mut impl Rng,
    ) -> Array3<f32> {
        let img = random_flip_left_right(img, rng);
        let img = random_brightness(img, max_delta, rng);
        let img = random_saturation(img, lower, upper, rng);
        clip_by_value(img, min, max)
    }

    #[test]
    fn equals_the_four_calls_bit_for_bit() {
        let mut values = rand_chacha::ChaCha8Rng::seed_from_u64(11);
        for seed in 0..200u64 {
            // Odd and even widths (the middle pixel of a flipped odd row), one-pixel images,
            // values a little outside [0, 1], greys (range 0) and blacks (v <= 0).
            let (h, w) = (1 + seed as usize % 4, 1 + seed as usize % 7);
            let img = Array3::from_shape_fn((h, w, 3), |(y, x, c)| match (y + x + c) % 9 {
                0 => 0.0,
                1 => -0.1,
                _ => values.random_range(-0.2..1.2),
            });
            let max_delta = [0.0, 32.0 / 255.0, 0.5][seed as usize % 3];
            let (sat, clip) = ((0.5, 1.5), (0.0, 1.0));
            let mut a = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
            let mut b = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
            let fused =
                random_flip_brightness_saturation_clip(img.clone(), max_delta, sat, clip, &mut a);
            let want = unfused(img, max_delta, sat, clip, &mut b);
            assert_eq!(fused, want, "seed {seed}");
            // The generator is left where the four calls leave it.
            assert_eq!(a.random::<u64>(), b.random::<u64>());
        }
    }

    #[test]
    fn other_channel_counts_and_layouts_go_through_the_four_calls() {
        let img = Array3::from_shape_fn((3, 4, 1), |(y, x, _)| (y * 4 + x) as f32 / 12.0);
        let t = Array3::from_shape_fn((4, 3, 3), |(y, x, c)| (y * 9 + x * 3 + c) as f32 / 36.0)
            .permuted_axes([1, 0, 2]);
        for (i, img) in [img, t].into_iter().enumerate() {
            for seed in 0..8 {
                let mut a = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
                let mut b = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
                let fused = random_flip_brightness_saturation_clip(
                    img.clone(),
                    0.2,
                    (0.5, 1.5),
                    (0.0, 1.0),
                    &mut a,
                );
                let want = unfused(img.clone(), 0.2, (0.5, 1.5), (0.0, 1.0), &mut b);
                assert_eq!(fused, want, "image {i} seed {seed}");
            }
        }
    }
}
