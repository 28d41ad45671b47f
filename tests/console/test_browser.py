"""The console in a real browser (Debian's headless Chromium, driven by Selenium through
chromium-driver) against a real three-broker cluster: every page opens; records are
browsed by offset and timestamp and found by key; an empty group's offsets are reset
(preview first) and a consumer resumes there; a share group read by a ShareConsumer is
listed and shows its member's assignment and start offsets; a write is refused without
--allow-writes; the ISR shown after a broker is SIGKILLed leaves it out.

Each page is saved as a PNG under the test's directory, and also under
``$LOGSTORE_CONSOLE_SCREENSHOTS`` when set (docs/console/ holds a run's).
"""

from __future__ import annotations

import html
import os
import shutil
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, ShareConsumer, TopicPartition
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as ec
from selenium.webdriver.support.ui import Select, WebDriverWait

from tests.cluster.harness.cluster import Cluster
from tests.console.conftest import ConsoleProcess, form_token, text_of
from tests.integration.clients import incremental_alter_configs
from tests.support.waiting import wait_until

# Debian's chromium and chromium-driver (scripts/test.sh installs them).
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
DRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"

TOPIC = "events"
GROUP = "team/replay"  # a "/" in a group id: one URL path segment all the same
SHARE_GROUP = "team-share"
SHARE_TOPIC = "jobs"
WAIT = 30  # seconds any one element may take to appear on a busy machine


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = Cluster(
        tmp_path_factory.mktemp("console-cluster"),
        n_brokers=3,
        zk_session_timeout_ms=4000,
        overrides={
            "replica.lag.time.max.ms": "1500",
            "offsets.topic.replication.factor": "3",
            "share.coordinator.state.topic.num.partitions": "3",
        },
    )
    with c:
        c.create_topic(TOPIC, partitions=3, replication_factor=3)
        yield c


@pytest.fixture(scope="module")
def stamps(cluster):
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "linger.ms": 0})
    out = []
    for i in range(30):
        out.append(int(time.time() * 1000))
        producer.produce(TOPIC, key=f"k{i}", value=f'{{"n": {i}}}', partition=i % 3)
        producer.flush(10)
        time.sleep(0.002)
    return out


@pytest.fixture(scope="module")
def console(cluster):
    c = ConsoleProcess(cluster.bootstrap_servers, "--allow-writes", "--sample-interval", "1")
    yield c
    assert "Traceback" not in c.stop()


@pytest.fixture(scope="module")
def browser():
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1280,1000"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(DRIVER), options=options)
    driver.set_page_load_timeout(WAIT)
    yield driver
    driver.quit()


@pytest.fixture(scope="module")
def shots(tmp_path_factory):
    dirs = [tmp_path_factory.mktemp("screenshots")]
    if os.environ.get("LOGSTORE_CONSOLE_SCREENSHOTS"):
        dirs.append(Path(os.environ["LOGSTORE_CONSOLE_SCREENSHOTS"]))

    def save(driver, name):
        # the whole page, not the window: the viewport set to the page's height
        height = driver.execute_script("return document.documentElement.scrollHeight")
        metrics = {"width": 1280, "height": min(height, 3000), "deviceScaleFactor": 1}
        driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {**metrics, "mobile": False})
        try:
            for d in dirs:
                d.mkdir(parents=True, exist_ok=True)
                driver.save_screenshot(str(d / f"{name}.png"))
        finally:
            driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})

    return save


def wait_for(driver, css):
    return WebDriverWait(driver, WAIT).until(ec.presence_of_element_located((By.CSS_SELECTOR, css)))


def submit(driver, element):
    """Clicks (or submits) ``element`` and waits for the next page to replace this one,
    so nothing is read from the page being left."""
    page = driver.find_element(By.TAG_NAME, "html")
    if element.tag_name == "input":
        element.submit()
    else:
        element.click()
    WebDriverWait(driver, WAIT).until(ec.staleness_of(page))


def cells(driver, css):
    return [e.text for e in driver.find_elements(By.CSS_SELECTOR, css)]


def records_form(driver, console, **fields):
    driver.get(f"{console.url}/topics/{TOPIC}/records")
    wait_for(driver, "#records-form")
    Select(driver.find_element(By.ID, "mode")).select_by_value(fields.pop("mode", "newest"))
    for name, value in fields.items():
        box = driver.find_element(By.ID, name)
        box.clear()
        box.send_keys(str(value))
    submit(driver, driver.find_element(By.ID, "records-submit"))
    wait_for(driver, "#records-summary")
    return cells(driver, "#records td.key")


def test_pages_records_and_groups(cluster, stamps, console, browser, shots):
    d = browser
    d.get(console.url + "/")
    wait_for(d, "#brokers tr[data-broker='3']")
    assert cells(d, "#brokers td.status") == ["up", "up", "up"]
    shots(d, "overview")

    d.get(console.url + "/topics")
    box = wait_for(d, "#q")
    box.send_keys("ven")
    submit(d, box)
    wait_for(d, "#topics a")
    assert cells(d, "#topics td a") == [TOPIC]
    shots(d, "topics")

    d.get(f"{console.url}/topics/{TOPIC}")
    wait_for(d, "#partitions tr[data-partition='2']")
    assert cells(d, "#partitions td.end") == ["10", "10", "10"]
    assert cells(d, "#partitions td.isr") == ["1,2,3"] * 3 or all(
        sorted(c.split(",")) == ["1", "2", "3"] for c in cells(d, "#partitions td.isr")
    )
    shots(d, "topic")

    assert records_form(d, console, mode="offset", partition=1, offset=6) == [
        f"k{i}" for i in (19, 22, 25, 28)
    ]
    assert records_form(d, console, mode="timestamp", timestamp=stamps[25]) == [
        f"k{i}" for i in range(25, 30)
    ]
    assert records_form(d, console, key="k13") == ["k13"]
    assert cells(d, "#records td.offset") == ["4"]
    assert records_form(d, console)[:3] == ["k29", "k28", "k27"]
    shots(d, "records")

    # An empty group that read everything; reset it to offset 4 of every partition.
    reader = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": GROUP,
            "enable.auto.commit": False,
        }
    )
    reader.commit(offsets=[TopicPartition(TOPIC, p, 10) for p in range(3)], asynchronous=False)
    reader.close()
    # A share group (KIP-932): one ShareConsumer reading a topic of its own from the start.
    cluster.create_topic(SHARE_TOPIC, partitions=2, replication_factor=3)
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers})
    for i in range(4):
        producer.produce(SHARE_TOPIC, value=f"job {i}", partition=i % 2)
    assert producer.flush(10) == 0
    earliest = ("share.auto.offset.reset", 0, "earliest")
    assert incremental_alter_configs(cluster.bootstrap(1), 32, SHARE_GROUP, earliest) == (0, None)
    sharer = ShareConsumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": SHARE_GROUP,
            "client.id": "share-reader",
        }
    )
    sharer.subscribe([SHARE_TOPIC])
    read: list[str] = []
    try:

        def share_shown() -> bool:
            read.extend(m.value().decode() for m in sharer.poll(0.2) if m.error() is None)
            d.get(f"{console.url}/groups/{SHARE_GROUP}")
            wait_for(d, "#group-state")
            starts = cells(d, "#share-offsets td.start")
            return len(read) == 4 and len(starts) == 2 and "-" not in starts

        # a start offset shows once the leader wrote the share-partition's state (the
        # acknowledgement of a delivered batch)
        wait_until(share_shown, WAIT, 0, "the share group's start offsets")
        assert cells(d, "#group-state") == ["STABLE"]
        assert cells(d, "#members td.client") == ["share-reader"]
        assert cells(d, "#members td.assigned") == [f"{SHARE_TOPIC}-0, {SHARE_TOPIC}-1"]
        assert cells(d, "#share-offsets td.end") == ["2", "2"]
        starts = [int(c) for c in cells(d, "#share-offsets td.start")]
        assert cells(d, "#share-offsets td.in-flight") == [str(2 - s) for s in starts]
        assert not d.find_elements(By.ID, "reset")
        shots(d, "share-group")

        d.get(console.url + "/groups")
        wait_for(d, "#groups a")
        share_row = f"#groups tr[data-group='{SHARE_GROUP}']"
        assert cells(d, f"{share_row} td.type") == ["share"]
        assert cells(d, f"{share_row} td.state") == ["STABLE"]
        assert cells(d, f"{share_row} td.members") == ["1"]
        assert GROUP in cells(d, "#groups td a")
        shots(d, "groups")
    finally:
        sharer.close()
    submit(d, d.find_element(By.LINK_TEXT, GROUP))
    wait_for(d, "#reset-to").clear()
    d.find_element(By.ID, "reset-to").send_keys("4")
    submit(d, d.find_element(By.ID, "reset-preview"))
    wait_for(d, "#reset-plan")
    assert "Preview" in d.find_element(By.CSS_SELECTOR, "#reset-plan caption").text
    assert cells(d, "#reset-plan td.new") == ["4", "4", "4"]
    assert cells(d, "#lag td.committed") == ["10", "10", "10"]
    submit(d, d.find_element(By.ID, "reset-execute"))
    wait_for(d, "#message")
    assert d.find_element(By.ID, "message").text == "Offsets reset."
    assert cells(d, "#lag td.committed") == ["4", "4", "4"]
    assert cells(d, "#lag td.lag") == ["6", "6", "6"]
    shots(d, "group")

    resumed = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": GROUP,
            "auto.offset.reset": "latest",
        }
    )
    resumed.subscribe([TOPIC])
    firsts: dict[int, int] = {}
    try:

        def got_all() -> bool:
            msg = resumed.poll(0.5)
            if msg is not None and msg.error() is None:
                firsts.setdefault(msg.partition(), msg.offset())
            return len(firsts) == 3

        wait_until(got_all, WAIT, 0, "the resumed consumer's first records")
    finally:
        resumed.close()
    assert firsts == {0: 4, 1: 4, 2: 4}

    d.get(console.url + "/security")
    wait_for(d, "#broker-configs td")
    shots(d, "security")


def test_auth_tokens_and_writes(cluster, console, browser, shots):
    """Basic auth on every request; a forged form token refused; a write refused without
    --allow-writes (in the browser too) and done with it."""
    readonly = ConsoleProcess(cluster.bootstrap_servers, "--basic-auth", "ann:secret")
    auth = ("ann", "secret")
    try:
        assert readonly.get("/")[0] == 401
        assert readonly.get("/static/console.css")[0] == 401
        assert readonly.get("/", ("ann", "wrong"))[0] == 401
        status, page = readonly.get(f"/topics/{TOPIC}", auth)
        assert status == 200 and "read-only" in page
        form = {"token": form_token(page), "key": "x", "value": "refused"}
        status, page = readonly.post(f"/topics/{TOPIC}/produce", form, auth)
        assert status == 403 and "--allow-writes" in html.unescape(text_of(page))
        status, page = readonly.get("/topics/no-such-topic", auth)
        assert status == 502 and "UNKNOWN_TOPIC_OR_PART" in page

        d = browser
        d.get(f"http://ann:secret@127.0.0.1:{readonly.port}/topics/{TOPIC}")
        assert wait_for(d, "#writes").text == "read-only"
        d.find_element(By.ID, "produce-value").send_keys("not allowed")
        submit(d, d.find_element(By.ID, "produce-submit"))
        assert "--allow-writes" in wait_for(d, "#error").text
        assert d.find_element(By.TAG_NAME, "h1").text == "Writes are off"
        shots(d, "write-refused")
    finally:
        assert "Traceback" not in readonly.stop()

    forged = {"token": "forged", "key": "x", "value": "v"}
    assert console.post(f"/topics/{TOPIC}/produce", forged)[0] == 403
    d.get(f"{console.url}/topics/{TOPIC}")
    wait_for(d, "#produce-key").send_keys("from-page")
    d.find_element(By.NAME, "partition").send_keys("2")
    d.find_element(By.ID, "produce-value").send_keys("hello")
    submit(d, d.find_element(By.ID, "produce-submit"))
    assert wait_for(d, "#message").text == "Produced to partition 2 at offset 10."
    assert records_form(d, console, mode="offset", partition=2, offset=10) == ["from-page"]


def test_isr_after_a_broker_is_killed(cluster, console, browser, shots):
    cluster.broker(3).kill()
    d = browser

    def isr_without_3() -> bool:
        d.get(f"{console.url}/topics/{TOPIC}")
        wait_for(d, "#partitions tr[data-partition='2']")
        shown = cells(d, "#partitions td.isr")
        return len(shown) == 3 and all("3" not in c.split(",") for c in shown)

    wait_until(isr_without_3, WAIT, 0.5, "ISR shown without broker 3")
    assert all(c in ("1", "2") for c in cells(d, "#partitions td.leader"))
    shots(d, "topic-broker-down")
    d.get(console.url + "/")
    wait_for(d, "#brokers tr[data-broker='3']")
    assert cells(d, "#brokers td.status") == ["up", "up", "down"]
    assert d.find_element(By.ID, "health").text == "unhealthy"
    assert int(d.find_element(By.ID, "under-replicated").text) >= 3
    shots(d, "overview-broker-down")
