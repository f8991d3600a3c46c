# SPDX-License-Identifier: MIT
"""The CPU harness drives the plugin over the daemon like NCCL's proxy, with 2, 4 and 8 ranks."""
import pytest

# Large sizes cost CPU time on a 2-core CI machine; 8 ranks share two cores.
CASES = [
    pytest.param(2, [], id="2ranks"),
    pytest.param(4, ["--max-bytes", "16777216"], id="4ranks"),
    pytest.param(8, ["--max-bytes", "4194304", "--threads", "2"], id="8ranks",
                 marks=pytest.mark.slow),
]


@pytest.mark.parametrize("nranks,extra", CASES)
def test_03_01_all_tests(harness, fabric, nranks, extra):
    r = harness(nranks=nranks, tests="all", fabric=fabric, extra=extra, timeout=400)
    r.check_ok()
    names = {t["name"] for t in r.tests()}
    for want in ("connect", "props", "sizes", "tags", "inflight", "allreduce", "alltoall",
                 "close_inflight", "listen_reuse", "threads", "reload", "mr"):
        assert want in names, "test %s did not run\n%s" % (want, r.report())
    assert r.json["api_version"] == 12, r.report()
    assert len({t["rank"] for t in r.tests()}) == nranks
    # Every connection the harness made was cleaned up.
    st = fabric.show()
    assert all(c.get("state") != "open" for c in st["chans"]), st


@pytest.mark.parametrize("version", [8, 9, 10, 11])
def test_03_02_older_api_versions(harness, version):
    r = harness(nranks=2, tests="connect,props,sizes,tags,allreduce,close_inflight",
                extra=["--api-version", str(version), "--max-bytes", "4194304"])
    r.check_ok()
    assert r.json["api_version"] == version


def test_03_03_counters_match_the_traffic(harness, fabric):
    r = harness(nranks=2, tests="sizes", fabric=fabric, extra=["--max-bytes", "1048576"])
    r.check_ok()
    st = fabric.show()
    assert st["chans"], st
    for c in st["chans"]:
        assert c["shm_bytes"] > 0
    total = sum(c["bytes"] for c in st["chans"])
    msgs = sum(c["msgs"] for c in st["chans"])
    sent = sum(t.get("metrics", {}).get("bytes_sent", 0) for t in r.tests("sizes"))
    nsent = sum(t.get("metrics", {}).get("msgs_sent", 0) for t in r.tests("sizes"))
    if sent:
        assert total == sent, (total, sent)
    if nsent:
        assert msgs == nsent, (msgs, nsent)
    assert total > 0 and msgs > 0
