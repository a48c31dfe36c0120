"""Where a request comes from, judged without believing the client: proxies, hosts, origins, networks, budgets."""

from __future__ import annotations

import pytest

from jaxplay.server.clients.budgets import Budgets
from jaxplay.server.clients.hosts import AllowedHosts
from jaxplay.server.clients.identity import is_browser_session, network_of
from jaxplay.server.clients.proxies import TrustedProxies, parse_networks
from jaxplay.server.clients.same_origin import origin_allowed, write_refusal


def proxies(networks: str, header: str = "x-forwarded-for") -> TrustedProxies:
    return TrustedProxies(parse_networks(networks), header)


def test_forwarded_headers_count_only_from_a_trusted_proxy():
    forged = {"x-forwarded-for": "6.6.6.6", "x-forwarded-proto": "https", "forwarded": "for=6.6.6.6;proto=https"}
    assert proxies("").judge("127.0.0.1", forged, "http") == ("127.0.0.1", "http")  # none trusted: the peer
    assert proxies("10.0.0.0/8").judge("192.0.2.1", forged, "http") == ("192.0.2.1", "http")


def test_the_client_is_the_rightmost_address_that_is_not_a_trusted_proxy():
    trusted = proxies("10.0.0.0/8")
    # The client wrote "6.6.6.6" itself; the proxy appended what it saw.
    headers = {"x-forwarded-for": "6.6.6.6, 203.0.113.9", "x-forwarded-proto": "https"}
    assert trusted.judge("10.1.2.3", headers, "http") == ("203.0.113.9", "https")
    # Two proxies of ours in a row, and addresses written with ports or brackets.
    headers = {"x-forwarded-for": "[2001:db8::5]:4711, 10.9.9.9:80"}
    assert trusted.judge("10.1.2.3", headers, "http") == ("2001:db8::5", "http")
    # A proxy that cannot say who it served: the proxy is the client.
    assert trusted.judge("10.1.2.3", {"x-forwarded-for": "unknown"}, "http") == ("10.1.2.3", "http")


def test_only_the_header_the_proxy_writes_is_read():
    headers = {"forwarded": 'for=6.6.6.6;proto=http, for="[2001:db8::7]";proto=https',
               "x-forwarded-for": "7.7.7.7"}
    assert proxies("10.0.0.0/8", "forwarded").judge("10.0.0.2", headers, "http") == ("2001:db8::7", "https")
    assert proxies("10.0.0.0/8").judge("10.0.0.2", headers, "http") == ("7.7.7.7", "http")


def test_settings_that_cannot_work_are_refused_with_the_setting_named():
    with pytest.raises(ValueError, match="--trusted-proxies: 'ingress' is not an IP address"):
        parse_networks("10.0.0.0/8, ingress")
    with pytest.raises(ValueError, match="--trusted-proxy-header"):
        TrustedProxies((), "x-real-ip")
    with pytest.raises(ValueError, match="--allowed-hosts: 'https://play.example.org' is not a host name"):
        AllowedHosts("https://play.example.org", "127.0.0.1")


def test_allowed_hosts_default_to_the_bound_host_and_localhost_and_always_take_addresses():
    default = AllowedHosts("", "127.0.0.1")
    for host in ("127.0.0.1:8000", "localhost:8000", "LOCALHOST", "[::1]:8000", "10.2.3.4:8000"):
        assert default.allows(host), host
    for host in ("evil.example", "evil.example:8000", "localhost.evil.example", None, "",
                 "127.0.0.1:8000@evil.example", "127.0.0.1:evil", "localhost:80/x", "127.0.0.1 evil.example",
                 "localhost:\u00b2", "[::1]:8\u00b2"):
        assert not default.allows(host), host
    assert AllowedHosts("", "play.internal").allows("play.internal:8000")
    named = AllowedHosts("play.example.org, *.example.net", "0.0.0.0")
    assert named.allows("play.example.org") and named.allows("a.example.net") and named.allows("192.0.2.4")
    assert named.allows("localhost:8000")  # kubectl port-forward; no page can rebind localhost
    assert not named.allows("example.net") and not named.allows("evil.example")
    assert AllowedHosts("*", "0.0.0.0").allows("anything.example")


def test_writes_from_other_sites_are_refused_and_the_pages_own_are_not():
    own = {"host": "127.0.0.1:8000", "content-type": "application/json", "origin": "http://127.0.0.1:8000",
           "sec-fetch-site": "same-origin"}
    assert write_refusal("POST", own) is None
    assert write_refusal("POST", {"host": "h", "content-type": "application/json; charset=utf-8"}) is None  # a script
    assert write_refusal("GET", {"origin": "http://evil.example"}) is None
    for changed, status in (({"content-type": "text/plain"}, 415),
                            ({"content-type": "application/x-www-form-urlencoded"}, 415),
                            ({"content-type": "multipart/form-data; boundary=x"}, 415),
                            ({"origin": "http://evil.example"}, 403),
                            ({"origin": "null"}, 403),
                            ({"origin": "http://127.0.0.1:8001"}, 403),
                            ({"sec-fetch-site": "cross-site"}, 403)):
        refused = write_refusal("POST", own | changed)
        assert refused is not None and refused[0] == status, changed
    assert origin_allowed(None, "h") and origin_allowed("https://h:1", "h:1") and not origin_allowed("null", "h")


def test_a_write_that_names_its_origin_twice_is_no_browsers_and_is_refused():
    own = {"host": "h", "content-type": "application/json", "origin": "http://h"}
    assert write_refusal("POST", own, repeated={"origin"})[0] == 403
    assert write_refusal("POST", own, repeated={"sec-fetch-site"})[0] == 403
    assert write_refusal("POST", own, repeated=set()) is None


def test_over_https_an_http_page_of_the_same_host_is_another_site():
    own = {"host": "play.example", "content-type": "application/json"}
    assert write_refusal("POST", own | {"origin": "http://play.example"}, secure=True)[0] == 403
    assert write_refusal("POST", own | {"origin": "https://play.example"}, secure=True) is None
    # Seen as http (a proxy nobody said is trusted): an https page of the host still writes.
    assert write_refusal("POST", own | {"origin": "https://play.example"}) is None
    assert not origin_allowed("http://play.example", "play.example", secure=True)


def test_networks_group_ipv6_by_48_and_address_clients_are_no_sessions():
    assert network_of("203.0.113.7") == "203.0.113.7"
    assert network_of("2001:db8:1:2:a:b:c:d") == network_of("2001:db8:1:ff::1") == "2001:db8:1::/48"
    assert network_of("::ffff:203.0.113.7") == "203.0.113.7" and network_of(None) == "unknown"
    assert is_browser_session("0123456789abcdef0123456789abcdef")
    assert not is_browser_session("address:203.0.113.7") and not is_browser_session("")


def test_budgets_refill_and_forget_the_longest_unused_key():
    now = [0.0]
    budgets = Budgets(per_hour=2, max_keys=2, clock=lambda: now[0])
    assert budgets.spend("a") and budgets.spend("a") and not budgets.spend("a")
    now[0] += 1800.0  # half an hour: one back
    assert budgets.spend("a") and not budgets.allows("a")
    budgets.spend("b")
    budgets.spend("c")  # a third key: "a", unused longest, is forgotten (and full again)
    assert budgets.left("a") == 2.0 and len(budgets._buckets) == 2
