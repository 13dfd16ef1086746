"""The run browser in a real browser: headless Debian Chromium driven by Playwright (never `playwright
install`; .ci/run installs the `chromium` package). Starts `scripts/ui.py` on a small run made here,
checks each view's numbers, clicks a lineage node, appends a solution to the live archive and waits for
it, and checks that hostile programs, completions and feedback stay text. Screenshots of every view go to
$HELIX_UI_SHOTS (default: the test's tmp folder), printed at the end."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from population.archive import Archive
from tests.helpers.env import ROOT, child_env
from tests.helpers.ui_runs import LOOSE, build_ui_run

CHROMIUM = os.environ.get("HELIX_CHROMIUM", "/usr/bin/chromium")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync"]


@pytest.fixture()
def server(tmp_path):
    ids = build_ui_run(tmp_path / "runs" / "uirun")
    build_ui_run(tmp_path / "runs" / "old", recorded=False)  # a run from before the recorded advantages and artefacts
    (tmp_path / "runs" / "broken").mkdir()
    (tmp_path / "runs" / "broken" / "archive.sqlite").write_bytes(b"SQLite format 3\x00" + b"\x00" * 100)  # truncated
    proc = subprocess.Popen([sys.executable, str(ROOT / "scripts" / "ui.py"), str(tmp_path / "runs"), "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=child_env())
    line = proc.stdout.readline()
    match = re.search(r"(http://127\.0\.0\.1:\d+)/", line)
    if not match:
        proc.kill()
        pytest.fail(f"scripts/ui.py printed no URL: {line!r} {proc.stdout.read()}")
    yield match[1], tmp_path / "runs" / "uirun", ids
    import psutil

    assert psutil.Process(proc.pid).children(recursive=True) == []  # the browser starts no process of its own
    proc.terminate()
    proc.wait(timeout=30)


@pytest.fixture()
def page(tmp_path):
    from playwright.sync_api import sync_playwright

    assert Path(CHROMIUM).is_file(), f"{CHROMIUM} is missing: apt-get install -y chromium (.ci/run does it)"
    with sync_playwright() as p:
        ctx = p.chromium.launch_persistent_context(str(tmp_path / "profile"), executable_path=CHROMIUM, args=FLAGS,
                                                   headless=True, viewport={"width": 1400, "height": 1000})
        pg = ctx.new_page()
        pg.errors = []
        pg.on("pageerror", lambda e: pg.errors.append(str(e)))
        pg.on("dialog", lambda d: (pg.errors.append("dialog: " + d.message), d.dismiss()))
        yield pg
        ctx.close()


def _open(page, url):
    page.goto(url)
    page.wait_for_selector("body[data-ready]", timeout=60_000)
    assert page.get_attribute("body", "data-ready") == "1", page.inner_text("main")


@pytest.mark.slow  # end to end through a subprocess (5-9 s): kept out of the -m 'not slow' tier
def test_every_view_in_chromium(server, page, tmp_path):
    base, run, ids = server
    shots = Path(os.environ.get("HELIX_UI_SHOTS", tmp_path / "screenshots"))
    shots.mkdir(parents=True, exist_ok=True)

    _open(page, base + "/")  # runs
    row = page.locator("tr", has_text="uirun")
    assert "circle_packing_26" in row.inner_text() and "finished" in row.inner_text() and "1.90000" in row.inner_text()
    assert "0.7208" in row.inner_text()  # 1.9 / 2.6359830849 (best known)
    assert f"within tolerance only: {LOOSE}" in row.inner_text()  # the best's exact check, beside its reward
    assert "unreadable" in page.locator("tr", has_text="broken").inner_text()  # one broken run hides no other
    assert page.locator("#runs tr").count() == 1 + 3
    page.screenshot(path=shots / "runs.png", full_page=True)

    _open(page, f"{base}/run?run=uirun")  # overview: header, three charts, the solutions table
    assert f"#{ids['d']}" in page.inner_text("#ovhead") and "1.900000000" in page.inner_text("#ovhead")
    head = page.inner_text("#ovhead")  # the best holds only within the tolerance; the earlier best exactly
    assert f"within tolerance only: {LOOSE}" in head and f"best that holds exactly\t#{ids['a']} reward 1.850000000" in head
    assert page.locator(".chart").count() == 4 and page.locator(".chart .uplot").count() == 4
    assert page.locator("#solutions tr").count() == 1 + 8
    page.screenshot(path=shots / "overview.png", full_page=True)
    with Archive(run / "archive.sqlite") as arch:  # the trainer appends while the page is open
        (new,) = arch.add_many([dict(parent_id=ids["d"], epoch=3, code="new = 1\n", reward=0.5, valid=True,
                                     feedback="ok", prompt_id="e3-p0-g0")])
    page.wait_for_selector(f"#solutions a:text-is('#{new}')", timeout=10_000)
    assert "9 of 9" in page.inner_text(".pager") or "1–9 of 9" in page.inner_text(".pager")

    _open(page, f"{base}/lineage?run=uirun")  # click the node of d: its code and its diff against a
    page.wait_for_function("() => window.cy && window.cy.nodes().length > 0")
    assert page.evaluate("cy.edges('.second').length") >= 1  # the crossover child's second-parent edge
    pos = page.evaluate(f"(() => {{ const p = cy.getElementById('n{ids['d']}').renderedPosition(); "
                        "const r = document.getElementById('cy').getBoundingClientRect(); return [r.left + p.x, r.top + p.y]; })()")
    page.mouse.click(*pos)
    page.wait_for_selector("#side h2 a", timeout=30_000)
    side = page.inner_text("#side")
    assert f"open solution #{ids['d']}" in side and "0.32 *" in side and f"Diff against parent #{ids['a']}" in side
    assert "+        centers[1 + i] = [0.5 + 0.32" in side
    page.click("text=expand children")
    page.wait_for_function(f"() => cy.getElementById('n{new}').length === 1", timeout=10_000)
    page.screenshot(path=shots / "lineage.png")

    _open(page, f"{base}/solution?run=uirun&id={ids['d']}")  # fields, group with advantages, prompt
    text = page.inner_text("main")
    assert "1.90000" in text and "oldest ancestor" in text and "e2-p0" in text
    assert f"exact check\twithin tolerance only: {LOOSE}" in text
    adv = page.locator("#group tr").all_inner_texts()  # the advantages the run recorded, drawn with the page
    assert "0.7071" in adv[1] and "-0.7071" in adv[2] and "lost (infra)" in adv[3]
    assert "grpo, norm by std: true" in text
    page.wait_for_selector("#render img", timeout=30_000)  # the recorded artefact through the task's render.py
    assert page.evaluate("document.querySelector('#render img').naturalWidth") > 300
    page.screenshot(path=shots / "solution.png", full_page=True)

    _open(page, f"{base}/solution?run=uirun&id={ids['hostile']}")  # escaping
    assert page.inner_text("#code").count("<script>window.__pwned = 1</script>") == 1
    assert "</textarea><script>" in page.inner_text("#completion")
    assert "<img src=x onerror=" in page.inner_text("#feedback")
    assert "an invalid solution has no picture" in page.inner_text("#render")
    assert page.locator("main img").count() == 0 and page.locator("main script").count() == 0
    assert page.locator("main textarea").count() == 0
    page.wait_for_timeout(500)
    assert page.evaluate("window.__pwned") is None and page.errors == []
    page.screenshot(path=shots / "escaping.png", full_page=True)

    _open(page, f"{base}/solution?run=old&id={ids['d']}")  # an older run opens and says what it lacks
    assert "did not record advantages" in page.inner_text("#groupnote")
    assert page.locator("#group tr").all_inner_texts()[1].count("not recorded") == 1
    assert "predates recorded artefacts" in page.inner_text("#render")

    _open(page, f"{base}/population?run=uirun&epoch=1")
    assert page.locator("#members tr").count() == 1 + 3 and page.input_value("#epoch") == "1"
    page.screenshot(path=shots / "population.png", full_page=True)
    page.fill("#epoch", "2")
    page.dispatch_event("#epoch", "change")
    page.wait_for_url(re.compile(r"epoch=2"))
    page.wait_for_selector("body[data-ready='1']")
    assert "Population at epoch 2" in page.inner_text("h1")

    _open(page, f"{base}/compare?runs=uirun")
    assert page.locator(".chart").count() == 3 and "top-10 mean @8" in page.inner_text("main")
    assert "Starts at uirun: never (fewer than 10 valid)" in page.inner_text("#topk-note")
    page.screenshot(path=shots / "compare.png", full_page=True)
    assert page.errors == []
    print(f"\nrun-browser screenshots: {shots}")
