"""A throwaway PKI for TLS tests: a CA, a server certificate for 127.0.0.1/localhost
and a client certificate, as PEM files (and the server's as PKCS12), made with the
cryptography package."""

from __future__ import annotations

import datetime
import ipaddress
import os

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import NameOID


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _cert(
    subject: str, key, issuer: str, issuer_key, ca: bool, san: list | None = None
) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    b = (
        x509.CertificateBuilder()
        .subject_name(_name(subject))
        .issuer_name(_name(issuer))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if san:
        b = b.add_extension(x509.SubjectAlternativeName(san), critical=False)
    return b.sign(issuer_key, hashes.SHA256())


def _pem_key(key, password: bytes | None = None) -> bytes:
    enc = (
        serialization.BestAvailableEncryption(password)
        if password
        else serialization.NoEncryption()
    )
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, enc)


def make_pki(directory: str, password: str = "store-secret") -> dict[str, str]:
    """Writes ca.pem, server.pem (key + chain), server-encrypted.pem (key under
    ``password``), server.p12 (under ``password``), client.pem and client.key; returns
    their paths by name."""
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = _cert("logstore test CA", ca_key, "logstore test CA", ca_key, ca=True)
    server_key = ec.generate_private_key(ec.SECP256R1())
    server = _cert(
        "localhost",
        server_key,
        "logstore test CA",
        ca_key,
        ca=False,
        san=[x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))],
    )
    client_key = ec.generate_private_key(ec.SECP256R1())
    client = _cert("client", client_key, "logstore test CA", ca_key, ca=False)
    pem = lambda c: c.public_bytes(serialization.Encoding.PEM)  # noqa: E731
    files = {
        "ca.pem": pem(ca),
        "server.pem": _pem_key(server_key) + pem(server) + pem(ca),
        "server-encrypted.pem": _pem_key(server_key, password.encode()) + pem(server) + pem(ca),
        "server.p12": pkcs12.serialize_key_and_certificates(
            b"server",
            server_key,
            server,
            [ca],
            serialization.BestAvailableEncryption(password.encode()),
        ),
        "client.pem": pem(client),
        "client.key": _pem_key(client_key),
    }
    paths = {}
    for name, data in files.items():
        path = os.path.join(directory, name)
        with open(path, "wb") as f:
            f.write(data)
        paths[name] = path
    return paths
