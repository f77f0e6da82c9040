"""Draws the extension's icons (images/icon.png 256x256, images/file-icon.png 64x64).

Deterministic: run `python images/make_icon.py` from vscode-ext/ with Pillow installed; the font
is DejaVu, shipped by matplotlib (and by Debian's fonts-dejavu).
"""

from __future__ import annotations

import os
import sys

from PIL import Image, ImageDraw, ImageFont


def font(bold: bool, size: int) -> ImageFont.FreeTypeFont:
    name = "DejaVuSerif-Bold.ttf" if bold else "DejaVuSans.ttf"
    candidates = [os.path.join("/usr/share/fonts/truetype/dejavu", name)]
    try:
        import matplotlib

        candidates.append(os.path.join(os.path.dirname(matplotlib.__file__), "mpl-data", "fonts", "ttf", name))
    except ImportError:
        pass  # the system font is enough when it is there
    for path in candidates:
        if os.path.exists(path):
            return ImageFont.truetype(path, size)
    sys.exit(f"no {name} found in {candidates}")


def draw_icon(size: int) -> Image.Image:
    s = size / 256
    img = Image.new("RGBA", (size, size), (0, 0, 0, 0))
    d = ImageDraw.Draw(img)
    d.rounded_rectangle([4 * s, 4 * s, 252 * s, 252 * s], radius=44 * s, fill=(24, 36, 64, 255))
    # a loop nest drawn as three bracketed bands, the notation's `L^{N}_{i=0} [ ... ];`
    for k, color in enumerate([(76, 163, 255), (96, 214, 170), (255, 196, 87)]):
        x0, y0 = (34 + 20 * k) * s, (120 + 24 * k) * s
        d.rounded_rectangle([x0, y0, 222 * s, y0 + 14 * s], radius=7 * s, fill=color)
    d.text((36 * s, 18 * s), "L", font=font(True, int(104 * s)), fill=(255, 255, 255, 255))
    d.text((128 * s, 14 * s), "N", font=font(False, int(38 * s)), fill=(190, 210, 255, 255))
    d.text((128 * s, 62 * s), "i=0", font=font(False, int(34 * s)), fill=(190, 210, 255, 255))
    return img


if __name__ == "__main__":
    here = os.path.dirname(os.path.abspath(__file__))
    draw_icon(256).save(os.path.join(here, "icon.png"), optimize=True)
    draw_icon(256).resize((64, 64), Image.LANCZOS).save(os.path.join(here, "file-icon.png"), optimize=True)
    print("wrote images/icon.png and images/file-icon.png")
