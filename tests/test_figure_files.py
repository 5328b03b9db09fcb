"""book/_ext/figure_files.py: the figures' SVG data URIs become files under _images/."""

import base64
import hashlib
import importlib.util
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("figure_files", ROOT / "book/_ext/figure_files.py")
figure_files = importlib.util.module_from_spec(spec)
spec.loader.exec_module(figure_files)
nodes = figure_files.nodes  # docutils', which comes with Sphinx

SVG = '<svg xmlns="http://www.w3.org/2000/svg" width="10pt" height="10pt"></svg>'


def uri(svg):
    return "data:image/svg+xml;base64," + base64.b64encode(svg.encode()).decode()


def page(html, other="<p>a table</p>"):
    doc = nodes.container()  # stands in for a page's doctree
    doc += nodes.raw("", html, format="html", classes=["output", "text_html"])
    doc += nodes.raw("", other, format="html")
    return doc


def test_data_uris_become_files_next_to_the_pages(tmp_path):
    phone = SVG.replace("10pt", "5pt")
    html = (
        f'<picture class="kv-figure"><source srcset="{uri(phone)}" data-min-text-px="12">'
        f'<img src="{uri(SVG)}" alt=""></picture>'
    )
    doc = page(html)
    app = SimpleNamespace(builder=SimpleNamespace(format="html"), outdir=str(tmp_path))
    figure_files.store_figure_files(app, doc, "book/01_page")
    raws = list(doc.findall(nodes.raw))
    assert raws[1].astext() == "<p>a table</p>"
    text = raws[0].astext()
    assert "data:" not in text
    assert raws[0]["classes"] == ["output", "text_html"]
    for svg in (SVG, phone):
        name = f"_images/{hashlib.sha256(svg.encode()).hexdigest()}.svg"
        assert f'"../{name}"' in text
        assert (tmp_path / name).read_text() == svg
    assert 'data-min-text-px="12"' in text


def test_other_builders_and_other_html_are_left_alone(tmp_path):
    html = f'<img src="{uri(SVG)}">'  # not one of the book's figure pictures
    doc = page(html)
    app = SimpleNamespace(builder=SimpleNamespace(format="html"), outdir=str(tmp_path))
    figure_files.store_figure_files(app, doc, "index")
    assert next(iter(doc.findall(nodes.raw))).astext() == html
    latex = SimpleNamespace(builder=SimpleNamespace(format="latex"), outdir=str(tmp_path))
    figure_doc = page(f'<picture class="kv-figure"><img src="{uri(SVG)}"></picture>')
    figure_files.store_figure_files(latex, figure_doc, "index")
    assert "data:" in next(iter(figure_doc.findall(nodes.raw))).astext()
    assert not (tmp_path / "_images").exists()


def test_a_captioned_figure_gets_its_first_sentence_as_alt_text(tmp_path):
    html = f'<picture class="kv-figure"><img src="{uri(SVG)}" alt=""></picture>'
    app = SimpleNamespace(builder=SimpleNamespace(format="html"), outdir=str(tmp_path))
    for caption, alt in [
        (
            "Hit rate against capacity (Fig. 3 of the paper). Dashed: the bound.",
            "Hit rate against capacity (Fig. 3 of the paper).",
        ),
        ("命中率随容量的变化。虚线是上界。", "命中率随容量的变化。"),
        ('Blocks "shared" & <kept>', "Blocks &quot;shared&quot; &amp; &lt;kept&gt;"),
    ]:
        figure = nodes.figure()
        figure += nodes.raw("", html, format="html")
        figure += nodes.caption(caption, caption)
        doc = nodes.container()
        doc += figure
        figure_files.store_figure_files(app, doc, "book/01_page")
        assert f'alt="{alt}"' in next(iter(doc.findall(nodes.raw))).astext()
    bare = page(html)  # no figure around it: nothing to say
    figure_files.store_figure_files(app, bare, "book/01_page")
    assert 'alt=""' in next(iter(bare.findall(nodes.raw))).astext()
