"""Credentials never reach what auditor writes or prints: redaction by variable name pattern."""

from __future__ import annotations

import json

from auditor.core.redaction import redact
from tests.clitools import run_auditor


def test_every_variable_named_like_a_credential_is_redacted(monkeypatch):
    secrets = {
        "OPENAI_API_KEY": "sk-openai-0123456789",  # one of the well-known names
        "REPLICATE_API_KEY": "r8_abcdefghij",
        "MY_SERVICE_TOKEN": "tok-98765432",
        "OAUTH_CLIENT_SECRET": "cs_abcdefgh",
        "DB_PASSWORD": "12345678",  # exactly the 8-character minimum
        "lower_case_token": "lc-token-value",  # the pattern ignores case
    }
    for name, value in secrets.items():
        monkeypatch.setenv(name, value)
    text = " | ".join(f"{name}={value}" for name, value in secrets.items())
    assert redact(text) == " | ".join(f"{name}=***" for name in secrets)


def test_short_values_and_other_names_are_left_alone(monkeypatch):
    monkeypatch.setenv("SHORT_KEY", "1234567")  # 7 characters: redacting "1" or "true" everywhere would garble text
    monkeypatch.setenv("TURNKEY", "turnkey-value")  # ends in KEY, not _KEY
    monkeypatch.setenv("KEY_FILE", "/etc/keyfile")  # starts with KEY_
    monkeypatch.setenv("PASSWORD_HINT", "my dog's name")
    text = "1234567 turnkey-value /etc/keyfile my dog's name"
    assert redact(text) == text


def test_an_error_line_never_shows_a_credential_of_any_name(tmp_path):
    secret = "s3cr3t-token-abcdef"
    result = run_auditor("score", str(tmp_path / f"{secret}.json"), env={"ACME_UPLOAD_TOKEN": secret}, process=True)
    assert result.returncode == 2
    assert secret not in result.stderr and "***" in result.stderr


def test_doctor_lists_credential_names_of_any_service_but_never_their_values():
    secret = "tok-very-secret-value"
    result = run_auditor(
        "doctor", "--json", env={"ACME_UPLOAD_TOKEN": secret, "ACME_SHORT_TOKEN": "short"}, process=True
    )
    assert result.returncode == 0, result.stderr
    credentials = json.loads(result.stdout)["credentials"]
    assert credentials["ACME_UPLOAD_TOKEN"] is True
    assert "ACME_SHORT_TOKEN" not in credentials  # too short to be redacted, so not reported as a credential
    assert credentials["OPENAI_API_KEY"] is False  # the well-known names are listed, set or not
    assert secret not in result.stdout + result.stderr
    human = run_auditor("doctor", env={"ACME_UPLOAD_TOKEN": secret}, process=True)
    assert "ACME_UPLOAD_TOKEN" in human.stdout and secret not in human.stdout
