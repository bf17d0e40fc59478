"""MkDocs hook: docstring reference lists render as numbered lists.

The library's docstrings follow TensorFlow Probability's convention for references::

    #### References

    [1]: Max Welling and Yee Whye Teh. Bayesian learning via stochastic gradient
         Langevin dynamics. In _ICML_, 2011.
    [2]: ...

Markdown has no list syntax of that shape, so mkdocstrings hands it on as a single paragraph
in which the entries run together. This hook rewrites every paragraph that starts with
``[1]:`` (or any ``[k]:``) into an ordered list whose items keep their numbers, so the
prose's ``[2]`` still names the second entry. Plain ``help()`` output is unchanged.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["on_page_content", "references_to_lists"]

#: A paragraph made of reference entries: it opens with ``[k]: `` (k a number).
_PARAGRAPH = re.compile(r"<p>(\[\d+\]:\s.*?)</p>", re.S)
#: The start of each entry: ``[k]: `` at the paragraph's start or at the start of a line.
_ENTRY = re.compile(r"(?:^|\n)\s*\[(\d+)\]:\s+")


def _as_list(match: re.Match[str]) -> str:
    parts = _ENTRY.split(match.group(1))
    # parts = ["", k1, text1, k2, text2, ...]: the split leaves nothing before the first entry.
    if parts[0].strip():
        return match.group(0)
    items = [
        f'<li value="{number}">{" ".join(text.split())}</li>'
        for number, text in zip(parts[1::2], parts[2::2])
    ]
    return '<ol class="references">\n' + "\n".join(items) + "\n</ol>"


def references_to_lists(html: str) -> str:
    """``html`` with each ``[k]: ...`` reference paragraph rewritten as an ``<ol>``."""
    return _PARAGRAPH.sub(_as_list, html)


def on_page_content(html: str, **kwargs: Any) -> str:
    """MkDocs' ``on_page_content`` event: the page's HTML body, after Markdown."""
    return references_to_lists(html)
