#!/usr/bin/env python3
"""Test vectors for the enc:v1 secrets format (anchor-daemons.md §3.1), written from the
description alone so the C++ implementation is checked against code it does not share.

Usage: gen_enc_v1.py                      print the fixed vector used by tests/unit/crypto_test.cpp
       gen_enc_v1.py --decrypt KEY VALUE  decrypt a value produced elsewhere (e.g. by our C++)
Needs the `cryptography` package (Debian: python3-cryptography).
"""
import base64
import hashlib
import hmac
import sys

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

PREFIX = "enc:v1:"
SALT = b"yourhq-secrets-v1"
INFO = b"aes-256-gcm"

SERVICE_ROLE_KEY = "test-service-role-key/2026+é"
IV = bytes(range(12))
PLAINTEXT = "sk-ant-api03-Ünïcødé €uro ✓ 'quoted' $HOME"


def hkdf_by_hand(ikm: bytes) -> bytes:
    """RFC 5869 the way §3.1 spells it: PRK = HMAC(salt, ikm); T(i) = HMAC(PRK, T(i-1)||info||i)."""
    prk = hmac.new(SALT, ikm, hashlib.sha256).digest()
    okm, t, i = b"", b"", 1
    while len(okm) < 32:
        t = hmac.new(prk, t + INFO + bytes([i]), hashlib.sha256).digest()
        okm += t
        i += 1
    return okm[:32]


def derive_key(service_role_key: str) -> bytes:
    ikm = service_role_key.encode("utf-8")
    key = hkdf_by_hand(ikm)
    library = HKDF(algorithm=hashes.SHA256(), length=32, salt=SALT, info=INFO).derive(ikm)
    assert key == library, "hand-written HKDF disagrees with cryptography's"
    return key


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode("ascii").rstrip("=")


def unb64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "==")


def encrypt(plaintext: str, service_role_key: str, iv: bytes) -> str:
    sealed = AESGCM(derive_key(service_role_key)).encrypt(iv, plaintext.encode("utf-8"), None)
    ciphertext, tag = sealed[:-16], sealed[-16:]
    return PREFIX + b64url(iv) + "." + b64url(tag) + "." + b64url(ciphertext)


def decrypt(value: str, service_role_key: str) -> str:
    parts = value[len(PREFIX):].split(".")
    if len(parts) == 4 and parts[0] == "":
        parts = parts[1:]
    iv, tag, ciphertext = (unb64url(p) for p in parts)
    return AESGCM(derive_key(service_role_key)).decrypt(iv, ciphertext + tag, None).decode("utf-8")


def main() -> None:
    if len(sys.argv) == 4 and sys.argv[1] == "--decrypt":
        print(decrypt(sys.argv[3], sys.argv[2]))
        return
    value = encrypt(PLAINTEXT, SERVICE_ROLE_KEY, IV)
    assert decrypt(value, SERVICE_ROLE_KEY) == PLAINTEXT
    print("service_role_key:", SERVICE_ROLE_KEY)
    print("plaintext:       ", PLAINTEXT)
    print("derived key hex: ", derive_key(SERVICE_ROLE_KEY).hex())
    print("value:           ", value)
    print("legacy value:    ", PREFIX + "." + value[len(PREFIX):])
    print("empty plaintext: ", encrypt("", SERVICE_ROLE_KEY, bytes(12)))


if __name__ == "__main__":
    main()
