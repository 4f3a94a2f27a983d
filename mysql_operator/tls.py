"""Certificates of a cluster: its own CA, the servers' certificate, and when to renew it.

    ca = new_ca(cluster_name, now)                                   # once per cluster
    cert = server_certificate(ca, names, now, validity)             # renewed before expiry
    reason = renewal_reason(cert.cert_pem, ca, names, now)           # None while it is fine

Keys are ECDSA P-256 (fast to make, accepted by MySQL, MariaDB and every client library). The CA
lives in the cluster's `<name>-ca` Secret (key included: only the operator reads it); servers get
`<name>-tls` (their certificate, its key and the CA certificate); applications get
`<name>-ca-bundle` (the CA certificate only). A server certificate is renewed when a third of its
validity is left, when the names it must carry change, or when it was not signed by the CA.
Everything here is pure given its inputs (time, key material): `new_key` is the only effect.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Sequence

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CA_VALIDITY = dt.timedelta(days=3650)
DEFAULT_VALIDITY = dt.timedelta(days=90)
BACKDATE = dt.timedelta(minutes=5)  # tolerate clocks a little behind the operator's


@dataclass(frozen=True)
class KeyPair:
    cert_pem: str
    key_pem: str

    def __repr__(self) -> str:  # never a private key in a log or an exception
        return f"KeyPair(cert={len(self.cert_pem)} bytes, key=<hidden>)"


def new_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _key_pem(key) -> str:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()


def _cert_pem(cert: x509.Certificate) -> str:
    return cert.public_bytes(serialization.Encoding.PEM).decode()


def new_ca(cluster: str, now: dt.datetime, key=None) -> KeyPair:
    key = key or new_key()
    name = x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "mysql-operator"),
            x509.NameAttribute(NameOID.COMMON_NAME, f"{cluster} CA"[:64]),
        ]
    )
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - BACKDATE)
        .not_valid_after(now + CA_VALIDITY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return KeyPair(_cert_pem(cert), _key_pem(key))


def server_certificate(
    ca: KeyPair, names: Sequence[str], now: dt.datetime, validity: dt.timedelta = DEFAULT_VALIDITY, key=None
) -> KeyPair:
    """A server (and client: replicas present it too) certificate for `names` (DNS names; the
    first is the subject's common name), signed by `ca`."""
    key = key or new_key()
    ca_cert = x509.load_pem_x509_certificate(ca.cert_pem.encode())
    ca_key = serialization.load_pem_private_key(ca.key_pem.encode(), password=None)
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[0][:64])]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - BACKDATE)
        .not_valid_after(now + validity)
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(n) for n in names]), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]),
            critical=False,
        )
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_cert.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    return KeyPair(_cert_pem(cert), _key_pem(key))


def not_after(cert_pem: str) -> dt.datetime:
    return x509.load_pem_x509_certificate(cert_pem.encode()).not_valid_after_utc


def renewal_reason(cert_pem: str | None, ca: KeyPair, names: Sequence[str], now: dt.datetime) -> str | None:
    """Why the server certificate must be (re)issued now, or None."""
    if not cert_pem:
        return "no server certificate yet"
    try:
        cert = x509.load_pem_x509_certificate(cert_pem.encode())
        ca_cert = x509.load_pem_x509_certificate(ca.cert_pem.encode())
    except ValueError:
        return "the stored server certificate cannot be read"
    if cert.issuer != ca_cert.subject:
        return "the server certificate was not issued by the cluster's CA"
    try:
        cert.verify_directly_issued_by(ca_cert)
    except (ValueError, TypeError, Exception):  # noqa: BLE001 - any failure: not ours
        return "the server certificate was not signed by the cluster's CA"
    try:
        have = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(
            x509.DNSName
        )
    except x509.ExtensionNotFound:
        have = []
    if sorted(have) != sorted(names):
        return "the names the server certificate must carry changed"
    start, end = cert.not_valid_before_utc, cert.not_valid_after_utc
    if now >= end - (end - start) / 3:
        return f"the server certificate expires at {end:%Y-%m-%dT%H:%M:%SZ} (a third of its validity is left)"
    return None


def ca_usable(ca: KeyPair | None, now: dt.datetime) -> bool:
    """A stored CA that can still sign certificates for a full server validity."""
    if ca is None or not ca.cert_pem or not ca.key_pem:
        return False
    try:
        cert = x509.load_pem_x509_certificate(ca.cert_pem.encode())
        serialization.load_pem_private_key(ca.key_pem.encode(), password=None)
    except ValueError:
        return False
    return cert.not_valid_after_utc - now > DEFAULT_VALIDITY


__all__ = [
    "CA_VALIDITY",
    "DEFAULT_VALIDITY",
    "KeyPair",
    "ca_usable",
    "new_ca",
    "new_key",
    "not_after",
    "renewal_reason",
    "server_certificate",
]
