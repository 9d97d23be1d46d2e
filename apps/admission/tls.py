"""TLS for the admission webhook: only the API server may call it, and a renewed certificate is served.

The webhook's port requires a client certificate signed by ``ADMISSION_CLIENT_CA_FILE`` (the CA of
the certificate the API server presents, named in its ``AdmissionConfiguration`` kubeconfig;
``deploy/admission/README.md``). A caller without one, or with one from another CA, fails the TLS
handshake: its request never reaches Django.

The serving certificate is a mounted Secret that cert-manager renews in place; the context re-reads
the pair when either file changes (a Secret volume swaps a symlink, so the inode and mtime change)
or on SIGHUP. ``load_cert_chain`` on the live context applies to every handshake after it; the
reload runs on the server's event loop, the thread that does the handshakes.
"""

from __future__ import annotations

import logging
import os
import shutil
import ssl
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from cryptography import x509

from apps.core import metrics

log = logging.getLogger(__name__)


def not_after(cert_file: Path) -> float | None:
    """The notAfter (epoch seconds) of the first certificate in ``cert_file`` (the serving one; a
    chain follows it), or None when it cannot be read."""
    try:
        return x509.load_pem_x509_certificate(cert_file.read_bytes()).not_valid_after_utc.timestamp()
    except (OSError, ValueError) as exc:
        log.warning("admission TLS: cannot read the certificate's expiry: %s", exc)
        return None


_FileStamp = tuple[int, int, int]  # inode, mtime (ns), size


def _stamp(path: Path) -> _FileStamp:
    info = os.stat(path)  # follows the Secret volume's symlinks to the file in force
    return (info.st_ino, info.st_mtime_ns, info.st_size)


@dataclass
class ReloadingServerContext:
    """A server ``SSLContext`` that verifies client certificates and follows its cert/key files."""

    cert_file: Path
    key_file: Path
    client_ca_file: Path
    context: ssl.SSLContext = field(init=False)
    _loaded: tuple[_FileStamp, _FileStamp] | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        # CERT_REQUIRED: no certificate, or one the CA did not sign, ends the handshake.
        context.verify_mode = ssl.CERT_REQUIRED
        context.load_verify_locations(cafile=str(self.client_ca_file))
        self.context = context
        if not self.reload_if_changed():
            raise ssl.SSLError(f"cannot load {self.cert_file} / {self.key_file}")

    def reload_if_changed(self, *, force: bool = False) -> bool:
        """Load the pair if it changed since the last load (or ``force``); True if a pair is now loaded
        that was not before. A half-written or mismatched pair keeps the one in force, logged."""
        try:
            stamps = (_stamp(self.cert_file), _stamp(self.key_file))
        except OSError as exc:
            log.warning("admission TLS: cannot stat the certificate files: %s", exc)
            return False
        if stamps == self._loaded and not force:
            return False
        try:
            self._load_checked()
        except (OSError, ssl.SSLError) as exc:
            # cert-manager writes cert and key together; between the two a pair may not match.
            log.warning("admission TLS: new certificate not loaded (keeping the current one): %s", exc)
            return False
        self._loaded = stamps
        log.info("admission TLS: serving certificate loaded from %s", self.cert_file)
        return True

    def _load_checked(self) -> None:
        """Load the pair into the live context only once a scratch context accepted it: a failed
        ``load_cert_chain`` leaves the new certificate with the old key, which breaks every handshake.
        Both files are copied first, so the pair checked is the pair loaded."""
        with tempfile.TemporaryDirectory() as scratch:
            cert, key = Path(scratch) / "tls.crt", Path(scratch) / "tls.key"
            shutil.copyfile(self.cert_file, cert)
            shutil.copyfile(self.key_file, key)
            ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).load_cert_chain(str(cert), str(key))
            self.context.load_cert_chain(str(cert), str(key))
            metrics.ADMISSION_CERTIFICATE.not_after = not_after(cert)
