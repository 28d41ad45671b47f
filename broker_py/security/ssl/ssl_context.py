"""The TLS context of an SSL or SASL_SSL listener, from Kafka's ``ssl.*`` keys (or a
listener's own ``listener.name.<listener>.ssl.*``), as Kafka's SslFactory builds it.

Keystore (the broker's certificate chain and private key), by ``ssl.keystore.type``:
- ``PEM``: ``ssl.keystore.location``, a file holding the private key and the chain, or
  the PEM text itself in ``ssl.keystore.key`` and ``ssl.keystore.certificate.chain``;
  ``ssl.key.password`` if the key is encrypted.
- ``PKCS12``: ``ssl.keystore.location`` with ``ssl.keystore.password`` (read through the
  ``cryptography`` package, the ``tls`` extra).
- ``JKS`` (Kafka's default) is not read: ``keytool -importkeystore -deststoretype
  PKCS12`` converts one.

Truststore (the CAs a client certificate must chain to), by ``ssl.truststore.type``:
``PEM`` (``ssl.truststore.location`` or ``ssl.truststore.certificates``) or ``PKCS12``.
It is needed when ``ssl.client.auth`` is ``requested`` or ``required``.
``ssl.enabled.protocols`` (default TLSv1.2,TLSv1.3) bounds the TLS versions.

Every problem is a ConfigError naming the key, never showing a password or key.
"""

from __future__ import annotations

import os
import ssl
import tempfile

from broker_py.config.kafka_config import BrokerConfig, ConfigError

_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
_CLIENT_AUTH = {
    "none": ssl.CERT_NONE,
    "requested": ssl.CERT_OPTIONAL,
    "required": ssl.CERT_REQUIRED,
}


def server_context(config: BrokerConfig, listener: str) -> ssl.SSLContext:
    def value(key: str) -> tuple[str, str | None]:
        return config.listener_value(listener, key)

    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    key, raw = value("ssl.enabled.protocols")
    versions = [p.strip() for p in (raw or "").split(",") if p.strip()]
    unknown = [p for p in versions if p not in _VERSIONS]
    if not versions or unknown:
        raise ConfigError(key, raw or "", f"must list protocols among {', '.join(_VERSIONS)}")
    ctx.minimum_version = min(_VERSIONS[p] for p in versions)
    ctx.maximum_version = max(_VERSIONS[p] for p in versions)
    _load_keystore(ctx, listener, value)
    key, raw = value("ssl.client.auth")
    mode = (raw or "none").strip().lower()
    if mode not in _CLIENT_AUTH:
        raise ConfigError(key, raw or "", "must be one of none, requested, required")
    if mode != "none":
        _load_truststore(ctx, listener, value)
    ctx.verify_mode = _CLIENT_AUTH[mode]
    return ctx


def _load_keystore(ctx: ssl.SSLContext, listener: str, value) -> None:
    type_key, kind = value("ssl.keystore.type")
    kind = (kind or "JKS").strip().upper()
    location_key, location = value("ssl.keystore.location")
    password = value("ssl.key.password")[1]
    if kind == "PEM":
        chain_key, chain = value("ssl.keystore.certificate.chain")
        key_key, key = value("ssl.keystore.key")
        if location:
            _load_chain(ctx, location_key, location, password)
        elif chain and key:
            _load_chain_text(ctx, chain_key, chain, key, password)
        else:
            raise ConfigError(
                location_key,
                "",
                f"listener {listener} needs ssl.keystore.location, "
                "or ssl.keystore.key and ssl.keystore.certificate.chain",
            )
    elif kind == "PKCS12":
        if not location:
            raise ConfigError(location_key, "", f"listener {listener} needs a keystore")
        store_password = value("ssl.keystore.password")[1]
        key, cert, extra = _read_pkcs12(location_key, location, store_password)
        if key is None or cert is None:
            raise ConfigError(location_key, location, "holds no private key and certificate")
        from cryptography.hazmat.primitives import serialization

        key_pem = key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        chain_pem = b"".join(c.public_bytes(serialization.Encoding.PEM) for c in [cert, *extra])
        _load_chain_text(ctx, location_key, chain_pem.decode(), key_pem.decode(), None)
    elif kind == "JKS" and location:
        raise ConfigError(
            type_key,
            kind,
            "JKS keystores are not read here; convert with "
            "`keytool -importkeystore -deststoretype PKCS12` or use PEM",
        )
    elif kind == "JKS":
        raise ConfigError(
            location_key,
            "",
            f"listener {listener} is SSL but has no keystore (ssl.keystore.type PEM or PKCS12)",
        )
    else:
        raise ConfigError(type_key, kind, "must be PEM or PKCS12")


def _load_chain(ctx: ssl.SSLContext, key: str, path: str, password: str | None) -> None:
    """Loads a PEM file holding the private key and the certificate chain."""
    try:
        ctx.load_cert_chain(path, password=password or None)
    except FileNotFoundError:
        raise ConfigError(key, path, "no such file") from None
    except (ssl.SSLError, OSError) as e:
        reason = getattr(e, "reason", None) or e.__class__.__name__
        raise ConfigError(
            key, path, f"cannot load the key and certificate chain: {reason}"
        ) from None


def _load_chain_text(
    ctx: ssl.SSLContext, key: str, chain: str, private_key: str, password: str | None
) -> None:
    """Loads PEM text through a private temporary file (the ssl module reads files)."""
    with tempfile.TemporaryDirectory(prefix="logstore-tls-") as d:
        path = os.path.join(d, "keystore.pem")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(private_key.strip() + "\n" + chain.strip() + "\n")
        try:
            ctx.load_cert_chain(path, password=password or None)
        except (ssl.SSLError, OSError) as e:
            raise ConfigError(
                key,
                "(hidden)",
                "cannot load the key and certificate chain: "
                f"{getattr(e, 'reason', None) or e.__class__.__name__}",
            ) from None


def _read_pkcs12(key: str, location: str, password: str | None):
    try:
        from cryptography.hazmat.primitives.serialization import pkcs12
    except ImportError:
        raise ConfigError(
            key,
            location,
            "PKCS12 stores need the cryptography package (pip install 'logstore[tls]'), or use PEM",
        ) from None
    try:
        with open(location, "rb") as f:
            data = f.read()
    except OSError as e:
        raise ConfigError(key, location, e.strerror or str(e)) from None
    try:
        return pkcs12.load_key_and_certificates(data, password.encode() if password else None)
    except ValueError:
        raise ConfigError(
            key, location, "cannot be read as PKCS12 with the given password"
        ) from None


def _load_truststore(ctx: ssl.SSLContext, listener: str, value) -> None:
    type_key, kind = value("ssl.truststore.type")
    kind = (kind or "JKS").strip().upper()
    location_key, location = value("ssl.truststore.location")
    if kind == "PEM":
        certs_key, certs = value("ssl.truststore.certificates")
        try:
            if location:
                ctx.load_verify_locations(cafile=location)
            elif certs:
                ctx.load_verify_locations(cadata=certs)
            else:
                raise ConfigError(
                    location_key,
                    "",
                    f"listener {listener} authenticates clients (ssl.client.auth) "
                    "but has no truststore",
                )
        except FileNotFoundError:
            raise ConfigError(location_key, location or "", "no such file") from None
        except ssl.SSLError as e:
            raise ConfigError(
                location_key if location else certs_key,
                location or "(text)",
                f"cannot load certificates: {e.reason or e}",
            ) from None
    elif kind == "PKCS12":
        if not location:
            raise ConfigError(
                location_key,
                "",
                f"listener {listener} authenticates clients (ssl.client.auth) "
                "but has no truststore",
            )
        _, cert, extra = _read_pkcs12(location_key, location, value("ssl.truststore.password")[1])
        from cryptography.hazmat.primitives import serialization

        pem = "".join(
            c.public_bytes(serialization.Encoding.PEM).decode()
            for c in [*(c for c in [cert] if c), *extra]
        )
        if not pem:
            raise ConfigError(location_key, location, "holds no certificate")
        ctx.load_verify_locations(cadata=pem)
    elif kind == "JKS" and location:
        raise ConfigError(type_key, kind, "JKS truststores are not read here; use PEM or PKCS12")
    elif kind == "JKS":
        raise ConfigError(
            location_key,
            "",
            f"listener {listener} authenticates clients (ssl.client.auth) "
            "but has no truststore (ssl.truststore.type PEM or PKCS12)",
        )
    else:
        raise ConfigError(type_key, kind, "must be PEM or PKCS12")


# RFC 2253 keywords for the attribute names Python's ``getpeercert()`` reports.
_DN_KEYWORDS = {
    "commonName": "CN",
    "countryName": "C",
    "localityName": "L",
    "stateOrProvinceName": "ST",
    "organizationName": "O",
    "organizationalUnitName": "OU",
    "streetAddress": "STREET",
    "domainComponent": "DC",
    "userId": "UID",
}


def _escape_dn_value(value: str) -> str:
    out = "".join("\\" + c if c in ',+"\\<>;=' else c for c in value)
    if out.startswith(("#", " ")):
        out = "\\" + out
    if out.endswith(" ") and not out.endswith("\\ "):
        out = out[:-1] + "\\ "
    return out


def distinguished_name(subject) -> str:
    """A certificate subject (``getpeercert()["subject"]``, RDNs in certificate order) as
    RFC 2253 writes it, last RDN first: ``CN=client,OU=eng,O=example``; Kafka's default
    SSL principal is ``User:`` and this string."""
    return ",".join(
        "+".join(f"{_DN_KEYWORDS.get(name, name)}={_escape_dn_value(value)}" for name, value in rdn)
        for rdn in reversed(subject)
    )
