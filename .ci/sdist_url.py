"""Prints the URL of file FILE of package PACKAGE on the index pip is configured with (its simple
API page, PEP 503), so that no script here names an index's host. Usage: sdist_url.py PACKAGE FILE"""
import html.parser
import subprocess
import sys
import urllib.parse
import urllib.request


def index_url():
    """pip's index: its configuration (files and PIP_INDEX_URL), else pip's own default."""
    out = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True).stdout
    for line in out.splitlines():
        key, _, value = line.partition("=")
        if key.strip().endswith("index-url") and value.strip():
            return value.strip().strip("'\"")
    from pip._internal.models.index import PyPI

    return PyPI.simple_url


class Links(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.hrefs = []

    def handle_starttag(self, tag, attrs):
        if tag == "a":
            self.hrefs.extend(v for k, v in attrs if k == "href" and v)


def main(package, filename):
    page = index_url().rstrip("/") + "/" + package + "/"
    with urllib.request.urlopen(page, timeout=60) as r:
        links = Links()
        links.feed(r.read().decode())
    for href in links.hrefs:
        url = urllib.parse.urljoin(page, href)
        if urllib.parse.urlsplit(url).path.endswith("/" + filename):
            print(url.split("#")[0])
            return 0
    print(f"{filename} is not on {page}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
