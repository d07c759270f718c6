"""The report pages in a real browser (issue 33): Debian's headless `chromium` driven by
Selenium through Debian's `chromium-driver`, each page opened from `file://` with no server.

For slot-spider, rest-spider-variants, seq-topv2 (their `report/index.html`, built here with
`target/release/toolforge build`, a no-op when `just test` built them) and one eval run
(`toolforge eval score` over slot-spider with a predictions file made from the gold calls, every
fifth row with its last call removed; then `eval report … --html`), it checks: no console error; the tables hold the numbers
of the independent files (`report/verification.json`, `report.json`); the search finds a row
read from `data/*.jsonl`; a drift row shows its schema diff; the seq-topv2 page (137k rows)
loads and answers a search in under 2 s. Screenshots go to `<out>/browser-test/` (kept after a
passing run). Without chromium, its driver or selenium the tests are SKIPPED, loudly.

Environment: TOOLFORGE_PAGES_OUT (output root, default `<project>/out`), TOOLFORGE_STORE.
"""
import json
import os
import shutil
import subprocess
import sys
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.environ.get("TOOLFORGE_PAGES_OUT", os.path.join(ROOT, "out"))
BIN = os.path.join(ROOT, "target", "release", "toolforge")
SHOTS = os.path.join(OUT, "browser-test")


def _skip_loudly(why):
    msg = f"SKIPPED: browser tests need {why}"
    print(f"\n!!!!! {msg} !!!!!\n", file=sys.stderr)
    pytest.skip(msg)


def _chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


@pytest.fixture(scope="module")
def driver():
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        _skip_loudly("selenium (pip install selenium)")
    browser, chromedriver = _chromium(), shutil.which("chromedriver")
    if not browser or not chromedriver:
        _skip_loudly("Debian's chromium and chromium-driver (apt-get install chromium chromium-driver)")
    opts = webdriver.ChromeOptions()
    opts.binary_location = browser
    for a in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
              "--window-size=1400,1000", "--allow-file-access-from-files"):
        opts.add_argument(a)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    d = webdriver.Chrome(service=Service(chromedriver), options=opts)
    d.set_page_load_timeout(120)
    os.makedirs(SHOTS, exist_ok=True)
    yield d
    d.quit()


def build(recipe):
    """`out/<recipe>/` with its page (a no-op when it is already built)."""
    if not os.path.exists(BIN):
        _skip_loudly(f"{BIN} (cargo build --release)")
    subprocess.run([BIN, "build", recipe, "--out", OUT, "--quiet"], check=True, stdout=subprocess.DEVNULL)
    return os.path.join(OUT, recipe)


def open_page(driver, path, timeout=60):
    """Opens `path` from file://, waits for the page script to finish; returns the seconds taken."""
    start = time.monotonic()
    driver.get("file://" + os.path.abspath(path))
    while driver.execute_script("return document.body && document.body.getAttribute('data-ready')") != "1":
        errors = console_errors(driver)
        assert not errors, errors
        assert time.monotonic() - start < timeout, f"{path}: not ready after {timeout} s"
        time.sleep(0.02)
    return time.monotonic() - start


def console_errors(driver):
    return [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]


def search(driver, box_id, text, timeout=30):
    """Types `text` into the search box; returns (seconds until the results show it, hits)."""
    from selenium.webdriver.common.by import By
    box = driver.find_element(By.ID, box_id)
    box.clear()
    start = time.monotonic()
    box.send_keys(text)
    tbody_query = f"return document.querySelector('[data-query]') && [...document.querySelectorAll('tbody[data-query]')].some(t => t.getAttribute('data-query') === arguments[0])"
    while not driver.execute_script(tbody_query, text):
        assert time.monotonic() - start < timeout, f"search {text!r} not answered"
        time.sleep(0.01)
    return time.monotonic() - start


def wait_for(driver, script, *args, timeout=30):
    """Waits until `script` (JS returning a truthy value) holds; errors on a console error."""
    start = time.monotonic()
    while not driver.execute_script(script, *args):
        errors = console_errors(driver)
        assert not errors, errors
        assert time.monotonic() - start < timeout, f"not after {timeout} s: {script}"
        time.sleep(0.02)


def first_jsonl_row(path, pick=lambda row: True):
    with open(path, encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            if pick(row):
                return row
    raise AssertionError(f"no row picked in {path}")


def summary_numbers_match(driver, report):
    from selenium.webdriver.common.by import By
    assert driver.find_element(By.ID, "kept").text == str(report["kept"])
    assert driver.find_element(By.ID, "attempted").text == str(report["attempted"])
    assert driver.find_element(By.ID, "dropped").text == str(report["dropped"])
    for group, g in report["per_group"].items():
        cells = driver.find_elements(By.CSS_SELECTOR, f'#groups tr[data-group="{group}"] td')
        assert [c.get_attribute("textContent") for c in cells[1:4]] == [
            str(g["attempted"]), str(g["kept"]), str(g["attempted"] - g["kept"])], group
    for reason, n in report["dropped_by_reason"].items():
        cells = driver.find_elements(By.CSS_SELECTOR, f'#reasons tr[data-reason="{reason}"] td')
        assert cells[1].get_attribute("textContent") == str(n), reason


def test_slot_spider_page(driver):
    from selenium.webdriver.common.by import By
    out = build("slot-spider")
    report = json.load(open(os.path.join(out, "report", "verification.json")))
    open_page(driver, os.path.join(out, "report", "index.html"))
    summary_numbers_match(driver, report)
    row = first_jsonl_row(os.path.join(out, "data", "dev.jsonl"), lambda r: r["db_id"] == "concert_singer" and "average" in r["input"].lower())
    search(driver, "rows-search", row["input"])
    ids = [tr.get_attribute("data-id") for tr in driver.find_elements(By.CSS_SELECTOR, "#rows tbody tr")]
    assert row["id"] in ids
    driver.find_element(By.CSS_SELECTOR, f'#rows tr[data-id="{row["id"]}"]').click()
    # The row's chunk (report/rows/<n>.js) is read when it is opened.
    wait_for(driver, "return document.getElementById('detail').getAttribute('data-id') === arguments[0]", row["id"])
    detail = driver.find_element(By.ID, "detail")
    for call in json.loads(row["output"]) if isinstance(row["output"], str) else row["output"]:
        assert call["name"] in detail.text
    # Drop examples show the dropped question and its gold SQL, as Spider's dev.json has them.
    dev = json.load(open(os.path.join(ROOT, "..", "shared", "corpora", "spider", "dev.json"), encoding="utf-8"))
    reason = next(iter(report["dropped_by_reason"]))
    driver.find_element(By.CSS_SELECTOR, f'#reasons tr[data-reason="{reason}"] summary').click()
    example = driver.find_element(By.CSS_SELECTOR, f'#reasons tr[data-reason="{reason}"] .drop-example')
    source = dev[int(example.get_attribute("data-id").rsplit("/", 1)[1])]
    assert example.find_element(By.CSS_SELECTOR, ".drop-question").get_attribute("textContent") == source["question"]
    assert example.find_element(By.CSS_SELECTOR, ".drop-source").get_attribute("textContent") == source["query"]
    # The trajectory chat view marks a faulted trajectory.
    assert driver.find_elements(By.CSS_SELECTOR, "#trajectory-list tr")
    assert driver.find_elements(By.CSS_SELECTOR, "#trajectory-list .tag.bad")
    driver.save_screenshot(os.path.join(SHOTS, "slot-spider.png"))
    assert not console_errors(driver)


def test_rest_spider_variants_drift_row_shows_its_schema_diff(driver):
    from selenium.webdriver.common.by import By
    out = build("rest-spider-variants")
    report = json.load(open(os.path.join(out, "report", "verification.json")))
    open_page(driver, os.path.join(out, "report", "index.html"))
    summary_numbers_match(driver, report)
    drift = first_jsonl_row(os.path.join(out, "data", "dev.jsonl"),
                            lambda r: r["meta"] and json.loads(r["meta"]).get("variant_kind") == "drift")
    search(driver, "rows-search", drift["id"])
    driver.find_element(By.CSS_SELECTOR, f'#rows tr[data-id="{drift["id"]}"]').click()
    wait_for(driver, "return document.querySelector('#detail .schema-diff')")
    diff = driver.find_element(By.CSS_SELECTOR, "#detail .schema-diff")
    assert diff.find_elements(By.CSS_SELECTOR, ".rm") or diff.find_elements(By.CSS_SELECTOR, ".add")
    changed = list(json.loads(drift["meta"])["variant"]["changes"])
    assert any(name in driver.find_element(By.ID, "detail").text for name in changed)
    driver.save_screenshot(os.path.join(SHOTS, "rest-spider-variants-drift.png"))
    assert not console_errors(driver)


def test_seq_topv2_page_loads_and_answers_a_search_in_under_2_s(driver):
    from selenium.webdriver.common.by import By
    out = build("seq-topv2")
    report = json.load(open(os.path.join(out, "report", "verification.json")))
    loaded = open_page(driver, os.path.join(out, "report", "index.html"))
    row = first_jsonl_row(os.path.join(out, "data", "eval.jsonl"))
    answered = search(driver, "rows-search", row["id"])
    ids = [tr.get_attribute("data-id") for tr in driver.find_elements(By.CSS_SELECTOR, "#rows tbody tr")]
    print(f"seq-topv2 page: loaded in {loaded:.2f} s, search answered in {answered:.2f} s", file=sys.stderr)
    assert row["id"] in ids
    assert driver.find_element(By.ID, "kept").text == str(report["kept"])
    assert loaded + answered < 2.0, (loaded, answered)
    driver.save_screenshot(os.path.join(SHOTS, "seq-topv2.png"))
    assert not console_errors(driver)


def test_eval_run_page(driver, tmp_path):
    from selenium.webdriver.common.by import By
    out = build("slot-spider")
    lines, perturbed = [], []
    with open(os.path.join(out, "data", "dev.jsonl"), encoding="utf-8") as f:
        for i, line in enumerate(f):
            row = json.loads(line)
            calls = json.loads(row["output"]) if isinstance(row["output"], str) else row["output"]
            if i % 5 == 0 and len(calls) > 1:
                calls = calls[:-1]
                perturbed.append(row["id"])
            lines.append(json.dumps({"id": row["id"], "output": calls}))
    preds = tmp_path / "perturbed.jsonl"
    preds.write_text("\n".join(lines) + "\n")
    evals = os.path.join(OUT, "browser-test", "eval")
    subprocess.run([BIN, "eval", "score", out, str(preds), "--out", evals, "--run", "gold-perturbed"],
                   check=True, stdout=subprocess.DEVNULL)
    run = os.path.join(evals, "gold-perturbed")
    report = json.load(open(os.path.join(run, "report.json")))
    open_page(driver, os.path.join(run, "index.html"))
    for key, m in report["totals"]["metrics"].items():
        cells = driver.find_elements(By.CSS_SELECTOR, f'#metric-table tr[data-metric="{key}"] td')
        if not cells:
            continue
        assert cells[1].text == f"{100 * m['mean']:.1f}", key
        interval = report["totals"].get("intervals", {}).get(key)
        if interval:
            assert cells[2].text == f"[{100 * interval['lo']:.1f}, {100 * interval['hi']:.1f}]", key
    assert driver.find_elements(By.CSS_SELECTOR, "#metric-table tbody tr")
    # Every chart of the run is shown and loaded from its sibling file.
    imgs = driver.find_elements(By.CSS_SELECTOR, "#chart-list img")
    assert imgs and all(driver.execute_script("return arguments[0].naturalWidth", i) > 0 for i in imgs)
    search(driver, "failures-search", perturbed[0])
    driver.find_element(By.CSS_SELECTOR, f'#failure-table tr[data-id="{perturbed[0]}"]').click()
    wait_for(driver, "return document.querySelector('#failure [data-id]').getAttribute('data-id') === arguments[0]", perturbed[0])
    failure = driver.find_element(By.ID, "failure")
    assert "exact_match" in failure.text
    assert failure.find_elements(By.CSS_SELECTOR, "table.aligned tr.mismatch")
    driver.save_screenshot(os.path.join(SHOTS, "eval-run.png"))
    assert not console_errors(driver)
    # `eval report … --html`: the comparison's page links each run's page and shows its charts.
    compare = os.path.join(evals, "compare")
    subprocess.run([BIN, "eval", "report", run, run, "--out", compare, "--allow-different-rows", "--html"],
                   check=True, stdout=subprocess.DEVNULL)
    driver.get("file://" + os.path.join(compare, "index.html"))
    links = driver.find_elements(By.CSS_SELECTOR, "#runs a")
    assert len(links) == 2 and all(a.get_attribute("href").endswith("gold-perturbed/index.html") for a in links)
    # The comparison as HTML tables: the first one holds each run's totals (the run against
    # itself: both rows are report.json's numbers).
    assert not driver.find_elements(By.CSS_SELECTOR, "pre")
    table = driver.find_element(By.CSS_SELECTOR, "table.compare-table")
    headers = [th.text for th in table.find_elements(By.CSS_SELECTOR, "thead th")]
    rows = table.find_elements(By.CSS_SELECTOR, "tbody tr")
    assert len(rows) == 2
    for tr in rows:
        cells = [td.text for td in tr.find_elements(By.CSS_SELECTOR, "td")]
        assert "gold-perturbed" in cells[0]
        assert cells[headers.index("EM")] == f"{100 * report['totals']['metrics']['exact_match']['mean']:.1f}"
        assert cells[headers.index("Completion")] == f"{100 * report['totals']['metrics']['completion']['mean']:.1f}"
    imgs = driver.find_elements(By.CSS_SELECTOR, ".charts img")
    assert imgs and all(driver.execute_script("return arguments[0].naturalWidth", i) > 0 for i in imgs)
    driver.save_screenshot(os.path.join(SHOTS, "eval-compare.png"))
    assert not console_errors(driver)


def test_agent_episode_turns_in_the_failure_browser(driver, tmp_path):
    """An agent run's turns on its page: a SCRIPTED OpenAI-compatible endpoint (plumbing, not a
    model) answers every request with a text that calls no tool, so each row fails with a
    one-turn episode whose messages the failure browser shows."""
    import http.server
    import threading
    from selenium.webdriver.common.by import By
    out = build("slot-spider")
    answer = "I cannot tell."

    class Script(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            self.rfile.read(int(self.headers["Content-Length"]))
            body = json.dumps({"id": "x", "object": "chat.completion", "created": 0, "model": "script",
                               "choices": [{"index": 0, "finish_reason": "stop",
                                            "message": {"role": "assistant", "content": answer}}]}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Script)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        row = first_jsonl_row(os.path.join(out, "data", "dev.jsonl"))
        evals = os.path.join(OUT, "browser-test", "eval")
        subprocess.run([BIN, "eval", "run", out, "--model", "script", "--mode", "agent", "--ids", row["id"],
                        "--base-url", f"http://127.0.0.1:{server.server_port}/v1", "--quiet", "--out", evals,
                        "--run", "agent-turns", "--store", str(tmp_path / "store")],
                       check=True, stdout=subprocess.DEVNULL, env={**os.environ, "OPENAI_API_KEY": "test"})
    finally:
        server.shutdown()
    open_page(driver, os.path.join(evals, "agent-turns", "index.html"))
    wait_for(driver, "return document.querySelector('#failure [data-id]').getAttribute('data-id') === arguments[0]", row["id"])
    msgs = driver.find_elements(By.CSS_SELECTOR, "#failure .turns .msg")
    assert [m.get_attribute("data-role") for m in msgs] == ["user", "assistant"]
    assert row["input"].strip() in msgs[0].text
    assert answer in msgs[1].text
    driver.save_screenshot(os.path.join(SHOTS, "eval-agent-turns.png"))
    assert not console_errors(driver)
