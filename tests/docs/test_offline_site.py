"""The site's offline check (docs/_hooks/offline_check.py) finds what a browser would fetch
from another host, and only that."""

from __future__ import annotations

from tests.docs.site_hooks import load_site_hook


def _check():
    return load_site_hook("offline_check")


def test_remote_scripts_styles_fonts_and_images_are_found(tmp_path) -> None:
    (tmp_path / "index.html").write_text(
        '<script src="https://cdn.example/require.js"></script>'
        "<link rel='stylesheet' href='//fonts.example/css'>"
        '<img alt="x" src="assets/local.png"><a href="https://github.com/">a link</a>'
    )
    (tmp_path / "extra.css").write_text("@font-face { src: url(https://fonts.example/a.woff2) }")
    found = _check().remote_fetches(tmp_path)
    assert found == [
        "extra.css: https://fonts.example/a.woff2",
        "index.html: https://cdn.example/require.js",
        "index.html: //fonts.example/css",
    ]
