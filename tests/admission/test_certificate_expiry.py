"""The serving certificate's expiry as a gauge (issue #27 items 1-2): seconds until the notAfter of the
certificate the admission server loaded last, followed across a renewal; a scrape reads no file and
no database, it subtracts."""

from __future__ import annotations

import shutil
from pathlib import Path

from cryptography import x509
from prometheus_client import REGISTRY

from apps.admission.devcerts import make_dev_certificates
from apps.admission.tls import ReloadingServerContext
from apps.core import metrics


def expiry_of(cert: Path) -> float:
    return x509.load_pem_x509_certificate(cert.read_bytes()).not_valid_after_utc.timestamp()


def test_the_expiry_gauge_follows_the_certificate_in_force(tmp_path: Path) -> None:
    first, renewed = make_dev_certificates(tmp_path / "one"), make_dev_certificates(tmp_path / "two")
    serving = tmp_path / "tls"
    serving.mkdir()
    shutil.copy(first.server.cert, serving / "tls.crt")
    shutil.copy(first.server.key, serving / "tls.key")
    tls = ReloadingServerContext(serving / "tls.crt", serving / "tls.key", first.client_ca.cert)

    seconds = REGISTRY.get_sample_value(metrics.ADMISSION_CERT_EXPIRY)
    assert seconds is not None and 29 * 86400 < seconds <= 30 * 86400  # devcerts issue for 30 days
    assert metrics.ADMISSION_CERTIFICATE.not_after == expiry_of(first.server.cert)

    shutil.copy(renewed.server.cert, serving / "tls.crt")
    shutil.copy(renewed.server.key, serving / "tls.key")
    assert tls.reload_if_changed(force=True)
    assert metrics.ADMISSION_CERTIFICATE.not_after == expiry_of(renewed.server.cert)
    later = REGISTRY.get_sample_value(metrics.ADMISSION_CERT_EXPIRY)
    renewal = expiry_of(renewed.server.cert) - expiry_of(first.server.cert)  # issued a moment later
    assert later is not None and 0 < later <= seconds + renewal
