#!/usr/bin/env python3
# Writes the small hostile and unusual images of tests/image_hostile.rs into tests/data/images/
# (run once; the files are committed): CMYK (Adobe, inverted, as Photoshop and PIL write it),
# grayscale and progressive JPEGs, made with Pillow:
#   /work/venv/bin/python scripts/make_hostile_images.py tests/data/images
import os, sys
from PIL import Image

out = sys.argv[1]
os.makedirs(out, exist_ok=True)

# CMYK: four 16x16 blocks of flat colour (so JPEG keeps them nearly exact):
# red (C0 M255 Y255 K0), cyan (C255 M0 Y0 K0), white (0 0 0 0), mid grey (0 0 0 K128).
img = Image.new("CMYK", (32, 32))
blocks = [((0, 0), (0, 255, 255, 0)), ((16, 0), (255, 0, 0, 0)),
          ((0, 16), (0, 0, 0, 0)), ((16, 16), (0, 0, 0, 128))]
for (x0, y0), colour in blocks:
    for y in range(y0, y0 + 16):
        for x in range(x0, x0 + 16):
            img.putpixel((x, y), colour)
img.save(os.path.join(out, "cmyk.jpg"), quality=95)

# Grayscale: a horizontal ramp, 64x16.
grey = Image.new("L", (64, 16))
for y in range(16):
    for x in range(64):
        grey.putpixel((x, y), x * 4)
grey.save(os.path.join(out, "grey.jpg"), quality=95)

# Progressive: a smooth colour gradient, 80x60.
rgb = Image.new("RGB", (80, 60))
for y in range(60):
    for x in range(80):
        rgb.putpixel((x, y), (x * 3, y * 4, 128))
rgb.save(os.path.join(out, "progressive.jpg"), quality=90, progressive=True)
rgb.save(os.path.join(out, "baseline.jpg"), quality=90)
