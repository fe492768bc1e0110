"""The pages in a real browser: Debian's chromium driven by Playwright against a server this test starts."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from served import serving

playwright_api = pytest.importorskip("playwright.sync_api")
pytest.importorskip("fastapi")
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
if not os.path.exists(CHROMIUM):
    pytest.skip("Debian's chromium is not installed (apt-get install chromium)", allow_module_level=True)
ARTIFACTS = Path(os.environ.get("GPUWISE_TEST_ARTIFACTS", Path(__file__).parents[1] / "test-artifacts"))
CONSOLE: list[str] = []  # errors the pages printed (a CSP violation is one)
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage"]


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    with serving() as url:
        yield url


@pytest.fixture(scope="module")
def page(server: str) -> Iterator[object]:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with playwright_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=FLAGS)
        tab = browser.new_page(viewport={"width": 1200, "height": 1000})
        tab.on("console", lambda m: CONSOLE.append(m.text) if m.type == "error" else None)
        yield tab
        browser.close()
    # no page broke the Content-Security-Policy (script-src 'self': no inline script, no CDN) or threw
    assert not [m for m in CONSOLE if "favicon" not in m], CONSOLE


def _opened(tab: Any, url: str, api: str) -> None:
    """Open a page and let its worked example (submitted on load) answer first, so the answer a test reads is the one
    its own submit asked for, not the example's arriving late on a loaded machine."""
    with tab.expect_response(lambda r: r.url.endswith(api), timeout=60000):
        tab.goto(url)


def _submitted(tab: Any, button: str, api: str) -> None:
    """Click a form's button and wait for its API's answer."""
    with tab.expect_response(lambda r: r.url.endswith(api), timeout=60000):
        tab.click(button)


def test_fit_form_renders_the_breakdown_chart(server: str, page: object) -> None:
    tab = page  # a playwright Page
    _opened(tab, server + "/fit", "/api/fit")
    tab.select_option("select[name=model]", "qwen2-7b")  # type: ignore[attr-defined]
    tab.select_option("select[name=gpu]", "rtx-4070-ti-super")  # type: ignore[attr-defined]
    _submitted(tab, "#fit-go", "/api/fit")
    tab.wait_for_selector("#fit-chart .main-svg", timeout=15000)  # type: ignore[attr-defined]
    bars = tab.locator("#fit-chart .bars path").count()  # type: ignore[attr-defined]
    assert bars >= 3  # weights, activations, overhead ... stacked
    verdict = tab.inner_text("#fit-verdict")  # type: ignore[attr-defined]
    assert "GiB per GPU" in verdict and "fits" in verdict
    chart = tab.inner_text("#fit-chart")  # type: ignore[attr-defined]
    assert "the card's memory" in chart and "_" not in chart  # every series and line in words, no internal keys
    tab.screenshot(path=str(ARTIFACTS / "fit.png"), full_page=True)  # type: ignore[attr-defined]


def test_recommend_gives_a_table_and_a_pareto_scatter(server: str, page: object) -> None:
    tab = page
    _opened(tab, server + "/recommend", "/api/recommend")
    _submitted(tab, "#rec-go", "/api/recommend")
    tab.wait_for_selector("#rec-table tbody tr", timeout=20000)  # type: ignore[attr-defined]
    tab.wait_for_selector("#rec-chart .main-svg", timeout=10000)  # type: ignore[attr-defined]
    assert tab.locator("#rec-table tbody tr").count() >= 5  # type: ignore[attr-defined]
    assert tab.locator("#rec-chart .scatterlayer .point").count() >= 5  # type: ignore[attr-defined]
    assert "memory" in tab.inner_text("#rec-rejected") or tab.locator("#rec-rejected li").count() > 0  # type: ignore[attr-defined]
    axes = tab.inner_text("#rec-chart")  # type: ignore[attr-defined]
    assert "hours per job" in axes and "total cost of ownership" in axes and "Pareto front" in axes
    assert "★" in tab.inner_text("#rec-legend")  # type: ignore[attr-defined]
    assert "x desktop" in tab.inner_text("#rec-table") or "x workstation" in tab.inner_text("#rec-table")  # type: ignore[attr-defined]
    tab.screenshot(path=str(ARTIFACTS / "recommend.png"), full_page=True)  # type: ignore[attr-defined]


def test_recommend_serves_one_user_on_your_own_desktop_with_used_cards(server: str, page: object) -> None:
    """The page's serving, usage, own-host, chassis and acquisition inputs reach the request: one user on a
    desktop the user owns, bought used only, so every answer is a used card in one desktop with no host cost."""
    tab = page
    _opened(tab, server + "/recommend", "/api/recommend")
    tab.select_option("select[name=model]", "llama-3.1-8b")  # type: ignore[attr-defined]
    tab.select_option("select[name=task]", "one-user")  # type: ignore[attr-defined]
    assert tab.locator("input[name=tokens]").is_hidden()  # type: ignore[attr-defined]
    tab.fill("input[name=min_tps]", "30")  # type: ignore[attr-defined]
    tab.uncheck("input[name=buy-new]")  # type: ignore[attr-defined]
    tab.uncheck("input[name=rent]")  # type: ignore[attr-defined]
    tab.check("input[name=own_host]")  # type: ignore[attr-defined]
    tab.select_option("select[name=chassis]", "desktop")  # type: ignore[attr-defined]
    _submitted(tab, "#rec-go", "/api/recommend")
    tab.wait_for_selector("#rec-table tbody tr", timeout=20000)  # type: ignore[attr-defined]
    # the rows' text in one read of the page (a row count read apart from the rows can race a re-render)
    texts = tab.eval_on_selector_all("#rec-table tbody tr", "rows => rows.map((r) => r.innerText)")  # type: ignore[attr-defined]
    assert texts
    for text in texts:
        assert "buy-used" in text and "desktop" in text and "tok/s" in text
    assert "USD per million generated tokens" in tab.inner_text("#rec-chart")  # type: ignore[attr-defined]
    tab.screenshot(path=str(ARTIFACTS / "recommend-one-user.png"), full_page=True)  # type: ignore[attr-defined]


def test_recommend_per_watt_says_whether_a_75_watt_card_wins(server: str, page: object) -> None:
    """Vision serving ranked per watt: the finding under the chart compares the best T4/L4 with the best bigger card."""
    tab = page
    _opened(tab, server + "/recommend", "/api/recommend")
    tab.select_option("select[name=model]", "resnet-50")  # type: ignore[attr-defined]
    tab.select_option("select[name=task]", "serve")  # type: ignore[attr-defined]
    tab.fill("input[name=qps]", "500")  # type: ignore[attr-defined]
    tab.fill("input[name=p99]", "50")  # type: ignore[attr-defined]
    tab.select_option("select[name=objective]", "perf-per-watt")  # type: ignore[attr-defined]
    _submitted(tab, "#rec-go", "/api/recommend")
    tab.wait_for_selector("#rec-findings li", timeout=20000)  # type: ignore[attr-defined]
    finding = tab.inner_text("#rec-findings")  # type: ignore[attr-defined]
    assert "500 QPS within P99 50 ms of resnet-50" in finding and "per W at the wall" in finding
    assert "QPS per W" in tab.inner_text("#rec-table")  # type: ignore[attr-defined]


def test_each_page_opens_with_its_example_computed(server: str, page: object) -> None:
    tab = page
    for path, chart in (("/fit", "#fit-chart .main-svg"), ("/compare", "#cmp-chart .bars path"),
                        ("/tco", "#tco-chart .scatterlayer .trace"), ("/serving", "#srv-chart .scatterlayer .trace"),
                        ("/images", "#img-chart .bars path"),
                        ("/diagnose", "#dx-table tbody tr")):
        tab.goto(server + path)  # type: ignore[attr-defined]
        tab.wait_for_selector(chart, timeout=30000)  # type: ignore[attr-defined]  # no click: computed on opening
        tab.screenshot(path=str(ARTIFACTS / f"opened{path.replace('/', '-')}.png"),  # type: ignore[attr-defined]
                       full_page=True)
    assert "CUDA out of memory" in tab.inner_text("#dx-table")  # type: ignore[attr-defined]


def test_compare_and_tco_charts(server: str, page: object) -> None:
    tab = page
    tab.goto(server + "/compare")  # type: ignore[attr-defined]
    tab.click("#cmp-go")  # type: ignore[attr-defined]
    tab.wait_for_selector("#cmp-chart .bars path", timeout=10000)  # type: ignore[attr-defined]
    table = tab.inner_text("#cmp-table")  # type: ignore[attr-defined]  # absolute figures beside the ratios
    assert "80 GB" in table and "3,350 GB/s" in table and "(1.00x)" in table  # the H100 SXM datasheet's memory
    tab.screenshot(path=str(ARTIFACTS / "compare.png"), full_page=True)  # type: ignore[attr-defined]
    tab.goto(server + "/tco")  # type: ignore[attr-defined]
    tab.click("#tco-go")  # type: ignore[attr-defined]
    tab.wait_for_selector("#tco-chart .scatterlayer .trace", timeout=10000)  # type: ignore[attr-defined]
    assert "residual" in tab.inner_text("#tco-detail")  # type: ignore[attr-defined]
    legend = tab.locator("#tco-chart .legendtext").all_text_contents()  # type: ignore[attr-defined]
    assert len(legend) == len(set(legend)) > 1  # no two lines share a name
    tab.screenshot(path=str(ARTIFACTS / "tco.png"), full_page=True)  # type: ignore[attr-defined]


def test_the_api_docs_render_offline(server: str, page: object) -> None:
    # Swagger UI from the installed swagger-ui-bundle (the machine has no network): every operation is listed
    tab = page
    tab.goto(server + "/docs")  # type: ignore[attr-defined]
    tab.wait_for_selector(".swagger-ui .opblock", timeout=15000)  # type: ignore[attr-defined]
    assert tab.locator(".swagger-ui .opblock").count() >= 9  # type: ignore[attr-defined]
    # Swagger UI's own styles: the site's button colours stay off its method badges and schema buttons
    background = tab.eval_on_selector(".swagger-ui .opblock-summary-method",  # type: ignore[attr-defined]
                                      "e => getComputedStyle(e).backgroundColor")
    assert background != "rgb(31, 111, 235)"  # gpuwise.css's #1f6feb
    tab.screenshot(path=str(ARTIFACTS / "docs.png"), full_page=False)  # type: ignore[attr-defined]
