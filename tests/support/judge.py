"""An independent reading of the sanitiser's output: html5lib (a WHATWG HTML5 parser) for the HTML and
tinycss2 (a CSS Syntax Level 3 parser) for the CSS, never the project's own tokenizers. What a
browser would fetch without a click, and the tree a browser builds."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import html5lib
import tinycss2

NS = "{http://www.w3.org/1999/xhtml}"
_LOAD_ATTRS = ("src", "lowsrc", "dynsrc", "background", "poster")


def tree(html: str) -> ET.Element:
    """The document a browser builds from ``html``."""
    return html5lib.parse(html, namespaceHTMLElements=True)


def fragment(html: str) -> ET.Element:
    """The elements a browser builds from ``html`` inside a ``div``."""
    return html5lib.parseFragment(html, container="div", namespaceHTMLElements=True)


def css_urls(css: str) -> list[str]:
    """Every url token, ``url("...")`` and string in ``css`` (a stylesheet, or a style attribute's
    declarations)."""
    nodes = tinycss2.parse_component_value_list(css, skip_comments=True)
    out: list[str] = []
    todo = list(nodes)
    while todo:
        node = todo.pop()
        if node.type in ("url", "string"):
            out.append(node.value)
        elif node.type == "function":
            todo += node.arguments
        elif node.type in ("() block", "[] block", "{} block"):
            todo += node.content
    return out


def loads(root: ET.Element) -> list[str]:
    """The URLs a mail client fetches by itself from the document: image sources and candidates,
    backgrounds and posters, style attributes and style elements."""
    out: list[str] = []
    for el in root.iter():
        if not isinstance(el.tag, str):
            continue
        tag = el.tag.removeprefix(NS)
        for attr in _LOAD_ATTRS:
            if attr in el.attrib:
                out.append(el.attrib[attr])
        for attr in ("srcset", "imagesrcset"):
            for candidate in el.attrib.get(attr, "").split(","):
                if candidate.split():
                    out.append(candidate.split()[0])
        if "style" in el.attrib:
            out += css_urls(el.attrib["style"])
        if tag == "style":
            out += css_urls(el.text or "")
        if tag == "link" and "href" in el.attrib:
            out.append(el.attrib["href"])
    return out


def tags(root: ET.Element) -> list[str]:
    return [el.tag.removeprefix(NS) for el in root.iter() if isinstance(el.tag, str)]
