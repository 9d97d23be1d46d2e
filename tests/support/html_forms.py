"""The first form of an HTML page, as a browser would submit it: its action and its inputs."""

from __future__ import annotations

from html.parser import HTMLParser
from urllib.parse import urljoin


class _FormParser(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.action: str | None = None
        self.fields: dict[str, str] = {}
        self._in_form = False
        self._done = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {name: value or "" for name, value in attrs}
        if tag == "form" and not self._done:
            self._in_form, self.action = True, values.get("action", "")
        elif tag == "input" and self._in_form and values.get("name"):
            self.fields[values["name"]] = values.get("value", "")

    def handle_endtag(self, tag: str) -> None:
        if tag == "form" and self._in_form:
            self._in_form, self._done = False, True


def first_form(html: str, page_url: str) -> tuple[str, dict[str, str]]:
    """``(absolute action URL, {input name: value})`` of the page's first form."""
    parser = _FormParser()
    parser.feed(html)
    if parser.action is None:
        raise AssertionError(f"no form on {page_url}: {html[:500]}")
    return urljoin(page_url, parser.action or page_url), parser.fields
