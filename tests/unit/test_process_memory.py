"""The process's memory as the snapshot task and the merge driver report it."""
from airflow_provider_binlog.common.process_memory import current_rss_mib, peak_rss_mib


def test_the_peak_is_at_least_the_current_resident_set_and_rises_with_an_allocation():
    before = peak_rss_mib()
    now = current_rss_mib()
    assert now is not None and 10 < now <= before + 1
    held = bytearray(300 * 1024 * 1024)  # touched: resident
    for at in range(0, len(held), 4096):
        held[at] = 1
    assert peak_rss_mib() >= max(before, now + 250)
    assert current_rss_mib() >= now + 250
    del held
