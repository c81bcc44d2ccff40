"""pl.layout(x)'s picture shows memory order at a glance.

Each element is numbered and coloured by its memory offset, so an NCHW tensor
and its channels_last copy (same shape, same values) must look different, a
transposed view must look transposed, and a broadcast dim must look shared.
Checked twice: on the HTML (the numbers in each cell), and on the pixels that
headless Chromium renders from it (Debian's `chromium`; skipped, with the
reason, where it is not installed).

The picture in the README, docs/layout.png, is rendered here too: run this
file with PYLAYOUT_UPDATE_DOCS=1 to rewrite it.
"""
from __future__ import annotations

import colorsys
import os
import pathlib
import re
import shutil
import struct
import subprocess
import zlib

import pytest

import pylayout as pl

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOCS_PNG = ROOT / "docs" / "layout.png"


def cells(html):
    """[(title, offset, hue)] of every element cell in layout()'s HTML, in document order."""
    found = re.findall(r'<td title="x\[([^\]]*)\]: offset (\d+)" style="[^"]*hsl\((\d+),[^"]*">(\d+)</td>', html)
    assert found, html
    for _, off, _, shown in found:
        assert off == shown, "the number in a cell is its offset"
    return [(idx, int(off), int(hue)) for idx, off, hue, _ in found]


@pytest.fixture(scope="module")
def nchw(torch):
    return torch.arange(120.0).view(2, 3, 4, 5)


# ------------------------------------------------------------------ the HTML


def test_nchw_and_nhwc_number_each_element_by_its_offset(torch, nchw):
    nhwc = nchw.contiguous(memory_format=torch.channels_last)
    a, b = cells(pl.layout(nchw)._picture_html()), cells(pl.layout(nhwc)._picture_html())
    assert [c[0] for c in a] == [c[0] for c in b], "same shape: the same elements, in the same places"
    for (idx, off_a, _), (_, off_b, _) in zip(a, b):
        n, c, h, w = map(int, idx.split(", "))
        assert off_a == 60 * n + 20 * c + 5 * h + w            # NCHW: w innermost
        assert off_b == 60 * n + c + 15 * h + 3 * w            # NHWC: c innermost
    assert sum(ha != hb for (_, _, ha), (_, _, hb) in zip(a, b)) > len(a) // 2
    html = pl.layout(nhwc)._picture_html()
    assert "dim 1 \u2192 stride 1" in html and "dim 3 \u2192 stride 3" in html and "dim 2 \u2193 stride 15" in html


def test_a_transposed_view_is_drawn_transposed(torch):
    x = torch.arange(16.0).view(4, 4)
    a, b = cells(pl.layout(x)._picture_html()), cells(pl.layout(x.t())._picture_html())
    grid_a = [[a[4 * i + j][1] for j in range(4)] for i in range(4)]
    grid_b = [[b[4 * i + j][1] for j in range(4)] for i in range(4)]
    assert grid_b == [list(col) for col in zip(*grid_a)]


def test_a_broadcast_dim_is_drawn_shared(torch):
    html = pl.layout(torch.rand(3, 1).expand(3, 4))._picture_html()
    rows = [[off for _, off, _ in cells(html)[4 * i: 4 * i + 4]] for i in range(3)]
    assert rows == [[0] * 4, [1] * 4, [2] * 4]
    assert html.count("dashed") >= 12 and "stride 0 (broadcast" in html


def test_negative_strides_count_from_the_lowest_address(np):
    a = np.arange(6.0).reshape(2, 3)[:, ::-1]
    offs = [off for _, off, _ in cells(pl.layout(a)._picture_html())]
    assert offs == [2, 1, 0, 5, 4, 3]
    assert "steps go down in memory" in pl.layout(a)._picture_html()


def test_large_tensors_are_capped_and_say_so(torch):
    html = pl.layout(torch.rand(3, 7, 20, 20))._picture_html()
    assert len(cells(html)) == 3 * 6 * 8 * 8
    assert "first 6 of 7" in html and "first 8 of 20" in html
    assert "dims 0..1 at index 0" in pl.layout(torch.rand(2, 2, 2, 2, 2, 2))._picture_html()


# ------------------------------------------------------------------ the pixels


def _chromium():
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        path = shutil.which(name)
        if path:
            return path
    pytest.skip("headless Chromium renders the picture and is not installed (apt-get install chromium)")


def render(html, tmp_path, name, size=(700, 420)):
    """PNG bytes of `html` as headless Chromium draws it."""
    page = tmp_path / f"{name}.html"
    png = tmp_path / f"{name}.png"
    page.write_text('<!doctype html><html><head><meta charset="utf-8"></head>'
                    f'<body style="margin:8px;background:#fff">{html}</body></html>', encoding="utf-8")
    cmd = [_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
           f"--user-data-dir={tmp_path / 'chromium-profile'}", f"--window-size={size[0]},{size[1]}",
           f"--screenshot={png}", page.as_uri()]
    # Chromium is not ours to sanitize: under the ASan run (.ci/reliability.sh)
    # the preloaded runtime must not reach it, or it hangs.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LD_PRELOAD", "ASAN_", "UBSAN_"))}
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0 and png.is_file(), proc.stderr[-2000:]
    return png.read_bytes()


def decode_png(data):
    """(width, height, rows of (r, g, b) tuples) of an 8-bit, non-interlaced RGB or RGBA PNG."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat = 8, b""
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", body)
            assert depth == 8 and color in (2, 6) and interlace == 0, (depth, color, interlace)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    bpp = 4 if color == 6 else 3
    raw, stride = zlib.decompress(idat), width * bpp
    prev = bytearray(stride)
    rows = []
    for y in range(height):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        if kind == 1:
            for i in range(bpp, stride):
                line[i] = (line[i] + line[i - bpp]) & 255
        elif kind == 2:
            line = bytearray((a + b) & 255 for a, b in zip(line, prev))
        elif kind == 3:
            for i in range(stride):
                left = line[i - bpp] if i >= bpp else 0
                line[i] = (line[i] + ((left + prev[i]) >> 1)) & 255
        elif kind == 4:
            for i in range(stride):
                a = line[i - bpp] if i >= bpp else 0
                b, c = prev[i], prev[i - bpp] if i >= bpp else 0
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append([tuple(line[i:i + 3]) for i in range(0, stride, bpp)])
        prev = line
    return width, height, rows


def coloured(rows):
    """{(x, y): hue in degrees} of the saturated pixels: the cells, not text, borders or background."""
    out = {}
    for y, row in enumerate(rows):
        for x, (r, g, b) in enumerate(row):
            if max(r, g, b) - min(r, g, b) > 60:
                out[(x, y)] = colorsys.rgb_to_hls(r / 255, g / 255, b / 255)[0] * 360
    return out


def address(hue):
    """layout() colours from 240 degrees (lowest address) down to 0 (highest): undo it."""
    return 240 - min(hue, 240)


def correlation(pairs):
    n = len(pairs)
    mx, my = sum(p[0] for p in pairs) / n, sum(p[1] for p in pairs) / n
    sxy = sum((x - mx) * (y - my) for x, y in pairs)
    sxx = sum((x - mx) ** 2 for x, _ in pairs)
    syy = sum((y - my) ** 2 for _, y in pairs)
    return sxy / (sxx * syy) ** 0.5


def test_pixels_nchw_and_nhwc_look_different(torch, nchw, tmp_path):
    nhwc = nchw.contiguous(memory_format=torch.channels_last)
    a = coloured(decode_png(render(pl.layout(nchw)._picture_html(legend=False), tmp_path, "nchw"))[2])
    b = coloured(decode_png(render(pl.layout(nhwc)._picture_html(legend=False), tmp_path, "nhwc"))[2])
    assert len(a) > 5000, "the cells should be drawn in colour"
    both = set(a) & set(b)
    assert len(both) > 0.9 * len(a), "the same shape gives the same geometry"
    differ = sum(abs(a[p] - b[p]) > 15 for p in both)
    assert differ > 0.4 * len(both), f"only {differ} of {len(both)} cell pixels differ in colour"


def test_pixels_a_transposed_view_looks_transposed(torch, tmp_path):
    x = torch.arange(64.0).view(8, 8)
    for name, t, along in (("rowmajor", x, "down"), ("transposed", x.t(), "across")):
        px = coloured(decode_png(render(pl.layout(t)._picture_html(legend=False), tmp_path, name))[2])
        by_x = correlation([(p[0], address(h)) for p, h in px.items()])
        by_y = correlation([(p[1], address(h)) for p, h in px.items()])
        # memory runs mostly down the rows (row-major: stride 8 down) or across them (the transpose)
        assert (by_y > 0.9 > by_x) if along == "down" else (by_x > 0.9 > by_y), (name, by_x, by_y)


def test_pixels_a_broadcast_dim_looks_shared(torch, tmp_path):
    px = coloured(decode_png(render(pl.layout(torch.rand(4, 1).expand(4, 6))._picture_html(legend=False),
                                    tmp_path, "expanded"))[2])
    hues_by_y = {}
    for (x, y), h in px.items():
        hues_by_y.setdefault(y, []).append(h)
    spread = [max(hs) - min(hs) for hs in hues_by_y.values() if len(hs) > 20]
    assert spread and max(spread) < 3, "each row of a stride-0 dim is one colour"
    assert len({round(sum(hs) / len(hs)) for hs in hues_by_y.values() if len(hs) > 20}) >= 4


def test_docs_picture(torch, nchw, tmp_path):
    """docs/layout.png: NCHW vs channels_last vs a transposed view, as the README shows it."""
    views = [("x = torch.rand(2, 3, 4, 5): contiguous (NCHW)", nchw),
             ("x.contiguous(memory_format=torch.channels_last) (NHWC)", nchw.contiguous(memory_format=torch.channels_last)),
             ("x.transpose(2, 3): a transposed view", nchw.transpose(2, 3))]
    html = "".join(f'<div style="font:bold 13px monospace;margin:10px 0 4px">{title}</div>'
                   + pl.layout(t)._picture_html() for title, t in views)
    html = f'<div style="font-family:monospace;font-size:12px">{html}</div>'
    png = render(html, tmp_path, "docs", size=(900, 1010))
    width, height, rows = decode_png(png)
    px = coloured(rows)
    bands = [{p: h for p, h in px.items() if lo <= p[1] < hi} for lo, hi in ((0, 330), (330, 660), (660, 1010))]
    assert all(len(b) > 5000 for b in bands), [len(b) for b in bands]
    if os.environ.get("PYLAYOUT_UPDATE_DOCS"):
        DOCS_PNG.write_bytes(png)
    assert DOCS_PNG.is_file(), "docs/layout.png is missing: run this test with PYLAYOUT_UPDATE_DOCS=1"
    assert decode_png(DOCS_PNG.read_bytes())[:2] == (width, height)
    assert "](docs/layout.png)" in (ROOT / "README.md").read_text()
