"""The cluster CA and server certificates (pure, with the clock passed in)."""

from __future__ import annotations

import datetime as dt
import ssl

import pytest
from cryptography import x509

from mysql_operator import tls

NOW = dt.datetime(2026, 11, 23, 12, 0, tzinfo=dt.timezone.utc)
NAMES = ["*.shop-headless.prod.svc", "shop-rw.prod.svc", "shop-ro.prod.svc"]


@pytest.fixture(scope="module")
def ca():
    return tls.new_ca("shop", NOW)


def test_server_certificate_verifies_against_the_ca_for_its_names(ca, tmp_path):
    pair = tls.server_certificate(ca, NAMES, NOW, dt.timedelta(hours=1))
    cert = x509.load_pem_x509_certificate(pair.cert_pem.encode())
    assert (
        cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(
            x509.DNSName
        )
        == NAMES
    )
    cert.verify_directly_issued_by(x509.load_pem_x509_certificate(ca.cert_pem.encode()))
    # the standard library accepts the chain (what the operator's connections use)
    ctx = ssl.create_default_context(cadata=ca.cert_pem)
    assert ctx.cert_store_stats()["x509_ca"] == 1
    assert tls.not_after(pair.cert_pem) == NOW + dt.timedelta(hours=1)
    assert "key=<hidden>" in repr(pair) and "PRIVATE" not in repr(pair)


def test_renewal_when_a_third_is_left_names_changed_or_foreign(ca):
    pair = tls.server_certificate(ca, NAMES, NOW, dt.timedelta(minutes=90))
    assert tls.renewal_reason(pair.cert_pem, ca, NAMES, NOW) is None
    assert tls.renewal_reason(pair.cert_pem, ca, NAMES, NOW + dt.timedelta(minutes=55)) is None
    assert "a third" in tls.renewal_reason(pair.cert_pem, ca, NAMES, NOW + dt.timedelta(minutes=60))
    assert "names" in tls.renewal_reason(pair.cert_pem, ca, NAMES + ["x.prod.svc"], NOW)
    other = tls.new_ca("other", NOW)
    assert "CA" in tls.renewal_reason(tls.server_certificate(other, NAMES, NOW).cert_pem, ca, NAMES, NOW)
    assert tls.renewal_reason(None, ca, NAMES, NOW) == "no server certificate yet"
    assert "cannot be read" in tls.renewal_reason("garbage", ca, NAMES, NOW)


def test_a_ca_is_usable_until_it_could_not_cover_a_full_server_validity(ca):
    assert tls.ca_usable(ca, NOW)
    assert not tls.ca_usable(ca, NOW + tls.CA_VALIDITY - dt.timedelta(days=30))
    assert not tls.ca_usable(None, NOW) and not tls.ca_usable(tls.KeyPair("x", "y"), NOW)
