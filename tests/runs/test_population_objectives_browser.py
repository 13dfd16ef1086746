"""The population page's two axis selects in Chromium (as tests/runs/test_ui_browser.py drives it), on a run
whose task declares objectives: picking eval_time_s for y redraws the chart and keeps the pick in the URL."""

import threading

import pytest

from tests.runs.test_population_objectives import run_with_objectives  # noqa: F401 (a fixture)
from tests.runs.test_ui_browser import _open, page  # noqa: F401 (a fixture)
from train.runs.ui.hosts import HostCheck
from train.runs.ui.server import _bind, create_app


@pytest.fixture()
def in_process(run_with_objectives):  # noqa: F811
    """The browser's server in this process, so it sees the task folder the fixture declared objectives in."""
    import uvicorn

    root, ids = run_with_objectives
    sock = _bind("127.0.0.1", 0)
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(create_app(root, HostCheck("127.0.0.1", port)), log_level="warning",
                                           access_log=False))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{port}", ids
    server.should_exit = True
    thread.join(timeout=30)
    sock.close()


@pytest.mark.slow  # a real browser (~10 s)
def test_the_axis_selects_redraw_the_population(in_process, page):  # noqa: F811
    base, ids = in_process
    _open(page, f"{base}/population?run=uirun&epoch=1")
    options = page.locator("#axis-y option").all_inner_texts()
    assert options == ["reward", "Div (eq. 6)", "eval_time_s (min)", "overlap (min)"]
    assert page.input_value("#axis-x") == "diversity" and page.input_value("#axis-y") == "reward"
    assert page.inner_text("#plot h3") == "reward against Div (eq. 6)"
    page.select_option("#axis-y", "eval_time_s")
    assert page.inner_text("#plot h3") == "eval_time_s (min) against Div (eq. 6)" and "y=eval_time_s" in page.url
    page.select_option("#axis-x", "overlap")  # only member a has an overlap: one point
    assert page.inner_text("#plot h3") == "eval_time_s (min) against overlap (min)"
    assert "Pareto front of reward, Div and eval_time_s (min), overlap (min)" in page.inner_text("main")
    _open(page, f"{base}/population?run=uirun&epoch=1&x=eval_time_s&y=nonsense")  # an unknown pick: the default
    assert page.input_value("#axis-x") == "eval_time_s" and page.input_value("#axis-y") == "reward"
    assert page.locator("#members tr").count() == 1 + 3 and page.errors == []
