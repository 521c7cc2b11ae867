"""Image transforms run in Rust, without the GIL (``tf.image`` and ``tf.io``'s names;
torchvision's for :func:`RandomResizedCrop` and :func:`CenterCrop`).

Each function returns a :class:`Transform` to pass to :meth:`Dataset.map`, which runs it on
streamload's threads (``num_parallel_calls`` of them)::

    ds = (sl.WebDataset(shards)
            .map(sl.image.RandomResizedCrop(224, key="jpg", layout="CHW"),
                 num_parallel_calls=sl.AUTOTUNE)
            .batch(256))

``key`` picks the component a transform applies to (a dict key or a tuple index; the whole
element by default). Each takes one item or a batch of them: decoders a string (``bytes``)
or a 1-d array of them, image ops an image of shape (height, width, 3) or a batch of shape
(n, height, width, 3); a batch's results are stacked, so they must have one shape. The
random ones draw from a generator of the element's own, seeded by ``seed`` (or the
pipeline's ``Options.seed``): the same draws whatever the parallelism, fresh ones each
epoch. A transform can also be called on one element (``t(element)``) to try it.

Decoding is libjpeg-turbo with TensorFlow's settings (full-size decodes are TensorFlow's
pixels exactly) and PNG through the ``image`` crate; images come out RGB, ``uint8``.
"""

from collections.abc import Sequence

from . import _native
from ._native import Transform

_Key = "str | int | None"


def _size(size):
    if isinstance(size, int):
        return (size, size)
    h, w = size
    return (int(h), int(w))


def decode_jpeg(channels: int = 3, key: _Key = None) -> Transform:
    """``tf.io.decode_jpeg(contents, channels=3)``: JPEG bytes to a ``uint8`` RGB image
    (grey and CMYK JPEGs come out RGB; only ``channels=3``). A damaged JPEG raises
    :class:`~streamload.errors.InvalidArgumentError` (or ``Error``)."""
    return _native.decode("decode_jpeg", channels, key)


def decode_png(channels: int = 3, key: _Key = None) -> Transform:
    """``tf.io.decode_png(contents, channels=3)``: grey repeated, alpha dropped, 16-bit
    samples cut to their high byte (TensorFlow's pixels)."""
    return _native.decode("decode_png", channels, key)


def decode_image(channels: int = 3, key: _Key = None) -> Transform:
    """``tf.io.decode_image(contents, channels=3)``: a JPEG or a PNG."""
    return _native.decode("decode_image", channels, key)


def convert_image_dtype(dtype="float32", key: _Key = None) -> Transform:
    """``tf.image.convert_image_dtype(image, tf.float32)``: ``uint8`` to ``float32`` in
    [0, 1] (only that conversion)."""
    if str(getattr(dtype, "name", dtype)) != "float32":
        raise ValueError("convert_image_dtype: only uint8 -> float32 is supported")
    return _native.convert_image_dtype(key)


def resize(size: "int | Sequence[int]", method: str = "bilinear", key: _Key = None) -> Transform:
    """``tf.image.resize(images, size, method)``: ``"bilinear"`` (half-pixel centres, no
    antialiasing, SIMD) or ``"area"``; ``float32`` out (a ``uint8`` image is resized as its
    values, 0..255, as TensorFlow does)."""
    return _native.resize(_size(size), method, key)


def flip_left_right(key: _Key = None) -> Transform:
    """``tf.image.flip_left_right``."""
    return _native.image_op("flip_left_right", key=key)


def random_flip_left_right(seed: "int | None" = None, key: _Key = None) -> Transform:
    """``tf.image.random_flip_left_right``: flipped with probability 1/2."""
    return _native.image_op("random_flip_left_right", seed=seed, key=key)


def adjust_brightness(delta: float, key: _Key = None) -> Transform:
    """``tf.image.adjust_brightness``: ``delta`` added to every value."""
    return _native.image_op("adjust_brightness", float(delta), key=key)


def random_brightness(max_delta: float, seed: "int | None" = None, key: _Key = None) -> Transform:
    """``tf.image.random_brightness``: a delta drawn from [-max_delta, max_delta)."""
    return _native.image_op("random_brightness", float(max_delta), seed=seed, key=key)


def adjust_saturation(saturation_factor: float, key: _Key = None) -> Transform:
    """``tf.image.adjust_saturation`` (in HSV, TensorFlow's arithmetic)."""
    return _native.image_op("adjust_saturation", float(saturation_factor), key=key)


def random_saturation(
    lower: float, upper: float, seed: "int | None" = None, key: _Key = None
) -> Transform:
    """``tf.image.random_saturation``: a factor drawn from [lower, upper)."""
    return _native.image_op("random_saturation", float(lower), float(upper), seed=seed, key=key)


def clip_by_value(clip_value_min: float, clip_value_max: float, key: _Key = None) -> Transform:
    """``tf.clip_by_value`` on a float image."""
    return _native.image_op("clip_by_value", float(clip_value_min), float(clip_value_max), key=key)


def RandomResizedCrop(
    size: "int | Sequence[int]",
    scale: "tuple[float, float]" = (0.08, 1.0),
    ratio: "tuple[float, float]" = (3 / 4, 4 / 3),
    flip: bool = True,
    mean: "Sequence[float] | None" = None,
    std: "Sequence[float] | None" = None,
    layout: str = "HWC",
    dct_scaling: bool = True,
    seed: "int | None" = None,
    key: _Key = None,
) -> Transform:
    """ImageNet training's input transform, from encoded bytes to a normalized ``float32``
    image: torchvision's ``RandomResizedCrop(size, scale, ratio)`` +
    ``RandomHorizontalFlip()`` (``flip``) + ``ToTensor()`` + ``Normalize(mean, std)``
    (default ImageNet's; give ``mean=(0, 0, 0), std=(1, 1, 1)`` for [0, 1] values), as
    TensorFlow's official ResNet preprocessing draws the window
    (``sample_distorted_bounding_box``, 10 attempts, then the whole image).

    Fused: only the window is decoded, at the smallest DCT scale that keeps it at least the
    target size (``dct_scaling=False`` for full-size decoding), then resized (bilinear),
    flipped, normalized and laid out (``"HWC"``, or ``"CHW"`` for PyTorch) in one pass."""
    return _native.random_resized_crop(
        _size(size),
        tuple(scale),
        tuple(ratio),
        flip,
        None if mean is None else [float(m) for m in mean],
        None if std is None else [float(s) for s in std],
        layout,
        dct_scaling,
        seed,
        key,
    )


def CenterCrop(
    size: "int | Sequence[int]",
    resize_shorter: int = 256,
    mean: "Sequence[float] | None" = None,
    std: "Sequence[float] | None" = None,
    layout: str = "HWC",
    key: _Key = None,
) -> Transform:
    """ImageNet evaluation's input transform: torchvision's ``Resize(resize_shorter)`` +
    ``CenterCrop(size)`` + ``ToTensor()`` + ``Normalize(mean, std)``, from encoded bytes
    (only the centre window is decoded)."""
    return _native.center_crop(
        _size(size),
        resize_shorter,
        None if mean is None else [float(m) for m in mean],
        None if std is None else [float(s) for s in std],
        layout,
        key,
    )


__all__ = [
    "Transform",
    "decode_jpeg",
    "decode_png",
    "decode_image",
    "convert_image_dtype",
    "resize",
    "flip_left_right",
    "random_flip_left_right",
    "adjust_brightness",
    "random_brightness",
    "adjust_saturation",
    "random_saturation",
    "clip_by_value",
    "RandomResizedCrop",
    "CenterCrop",
]
