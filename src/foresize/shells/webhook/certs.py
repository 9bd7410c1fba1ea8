"""TLS for the webhook server: a self-signed CA and a serving certificate generated with
`cryptography`, the `kubernetes.io/tls` Secret holding them, and an `ssl.SSLContext`
from certificate files or from a pair held in memory (`load_pair`: the key is on disk
only while `ssl` loads it).

cert-manager (in the chart) is the production alternative; this is for `foresize webhook
--self-signed`, the operator's default, tests and the benchmark.
"""

from __future__ import annotations

import base64
import datetime as dt
import ipaddress
import logging
import os
import shutil
import ssl
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from foresize.core.errors import ForesizeError


@dataclass(frozen=True, slots=True)
class CertBundle:
    ca_pem: bytes
    cert_pem: bytes  # serving certificate
    key_pem: bytes  # serving key (PKCS8, unencrypted)

    def write(self, directory: Path) -> tuple[Path, Path, Path]:
        """Write ca.crt, tls.crt, tls.key. The key is 0600 whatever the umask and even when
        a tls.key with wider permissions was there before (touch(mode=) would keep those);
        a directory created here is 0700."""
        if not directory.exists():
            directory.mkdir(parents=True, mode=0o700)
        ca, crt, key = directory / "ca.crt", directory / "tls.crt", directory / "tls.key"
        ca.write_bytes(self.ca_pem)
        crt.write_bytes(self.cert_pem)
        fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.fchmod(fd, 0o600)  # an existing file keeps its mode on open: set it
        with os.fdopen(fd, "wb") as handle:
            handle.write(self.key_pem)
        return ca, crt, key

    def secret_data(self) -> dict[str, str]:
        """The bundle as the data of a `kubernetes.io/tls` Secret (ca.crt, tls.crt and
        tls.key, base64 as the API stores them)."""
        return {
            "ca.crt": base64.b64encode(self.ca_pem).decode(),
            "tls.crt": base64.b64encode(self.cert_pem).decode(),
            "tls.key": base64.b64encode(self.key_pem).decode(),
        }


def tls_secret(
    bundle: CertBundle, name: str, namespace: str, labels: dict[str, str] | None = None
) -> dict[str, Any]:
    """The `kubernetes.io/tls` Secret holding `bundle`, as the webhook replicas share it."""
    metadata: dict[str, Any] = {"name": name, "namespace": namespace}
    if labels:
        metadata["labels"] = dict(labels)
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "kubernetes.io/tls",
        "metadata": metadata,
        "data": bundle.secret_data(),
    }


def service_dns_names(service: str, namespace: str) -> list[str]:
    return [
        service,
        f"{service}.{namespace}",
        f"{service}.{namespace}.svc",
        f"{service}.{namespace}.svc.cluster.local",
    ]


def generate_self_signed(
    hosts: Iterable[str] = ("localhost", "127.0.0.1"),
    *,
    now: dt.datetime | None = None,
    days: int = 365,
) -> CertBundle:
    """A fresh CA and a serving certificate for `hosts` (DNS names or IP addresses)."""
    now = now or dt.datetime.now(dt.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "foresize-webhook-ca")])
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(
            x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    hosts = list(hosts)
    sans: list[x509.GeneralName] = []
    for h in hosts:
        try:
            sans.append(x509.IPAddress(ipaddress.ip_address(h)))
        except ValueError:
            sans.append(x509.DNSName(h))
    cert = (
        x509.CertificateBuilder()
        .subject_name(
            x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hosts[0] if hosts else "foresize")])
        )
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=days))
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    return CertBundle(
        ca_pem=ca_cert.public_bytes(serialization.Encoding.PEM),
        cert_pem=cert.public_bytes(serialization.Encoding.PEM),
        key_pem=key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ),
    )


def certificate_window(cert_pem: bytes) -> tuple[float, float]:
    """(notBefore, notAfter) of the first certificate in `cert_pem`, epoch seconds."""
    cert = x509.load_pem_x509_certificate(cert_pem)
    return cert.not_valid_before_utc.timestamp(), cert.not_valid_after_utc.timestamp()


def validity_problem(cert_pem: bytes, now: float) -> str | None:
    """Why a serving certificate cannot be served at `now` (expired, or not valid yet), or
    None. The webhooks fail open, so a server presenting such a certificate would be
    skipped by the API server without a word: say it before serving."""
    try:
        not_before, not_after = certificate_window(cert_pem)
    except ValueError:
        return None  # not a PEM certificate: loading it into the TLS context says why
    if now >= not_after:
        return f"the certificate expired {_utc(not_after)}"
    if now < not_before:
        return f"the certificate is not valid before {_utc(not_before)}"
    return None


def _utc(epoch: float) -> str:
    return f"{dt.datetime.fromtimestamp(epoch, dt.UTC):%Y-%m-%dT%H:%M:%SZ}"


def server_ssl_context(cert_file: Path | str, key_file: Path | str) -> ssl.SSLContext:
    """A TLS server context from PEM files; a clear error naming the file if unusable."""
    for path in (cert_file, key_file):
        if not Path(path).is_file():
            raise ForesizeError(f"{path}: no such certificate/key file")
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        ctx.load_cert_chain(str(cert_file), str(key_file))
    except (ssl.SSLError, OSError) as exc:
        raise ForesizeError(
            f"{cert_file} / {key_file}: cannot load certificate and key ({exc})"
        ) from exc
    return ctx


def load_pair(
    cert_pem: bytes,
    key_pem: bytes,
    *,
    source: str,
    context: ssl.SSLContext | None = None,
    scratch: Path | None = None,
) -> ssl.SSLContext:
    """Serve `cert_pem` with `key_pem`, held in memory: into `context` (a hot reload: new
    handshakes get the new pair) or a new server context. `ssl` loads keys from files
    alone, so the key is written 0600 into a fresh 0700 folder under `scratch` ($TMPDIR
    if None), loaded, and the folder removed at once: whatever ends the process later
    (even SIGKILL), no private key is left behind. A pair that does not load is a
    ForesizeError naming `source` (the files loaded are gone by then)."""
    # mkdtemp's folder is 0700; the key is created 0600 (O_EXCL: never an existing file).
    try:
        folder = Path(tempfile.mkdtemp(prefix="foresize-tls-", dir=scratch))
    except OSError as exc:
        where = scratch or f"{tempfile.gettempdir()} ($TMPDIR)"
        raise ForesizeError(
            f"{source}: cannot write the key to {where} to load it ({exc.strerror})"
        ) from None
    try:
        cert, key = folder / "tls.crt", folder / "tls.key"
        try:
            cert.write_bytes(cert_pem)
            fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as handle:
                handle.write(key_pem)
        except OSError as exc:
            raise ForesizeError(
                f"{source}: cannot write the key to {folder.parent} to load it ({exc.strerror})"
            ) from None
        try:
            if context is None:
                return server_ssl_context(cert, key)
            context.load_cert_chain(str(cert), str(key))
            return context
        except (ssl.SSLError, ForesizeError) as exc:
            raise ForesizeError(f"{source}: cannot load certificate and key ({exc})") from None
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        if folder.exists():
            logging.getLogger("foresize.shells.webhook").error(
                "could not remove %s, which holds the webhook's private key", folder
            )


def client_ssl_context(ca_pem: bytes) -> ssl.SSLContext:
    """A client context trusting only `ca_pem` (tests, benchmark)."""
    ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cadata=ca_pem.decode())
    return ctx
