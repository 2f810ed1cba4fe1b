"""A backup that holds secrets is encrypted whole with a passphrase: AES-256-GCM from `cryptography`, the key
derived from the passphrase by Scrypt (salted, memory-hard), in the STREAM construction (Hoang, Reyhanitabar,
Rogaway and Vizár, 2015) so a file of any size is sealed in 1 MiB chunks without being held in memory.

Each chunk's nonce is a random prefix, the chunk's number and a flag set only on the last chunk; the file's header
is authenticated with every chunk. A chunk changed, removed, reordered or added, a header edited, or a file cut
short after any chunk fails to decrypt, and the restore says so instead of reading a part of it.
"""

from __future__ import annotations

import io
import os
import struct
from typing import BinaryIO

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.scrypt import Scrypt

from .manifest import BackupRefused

MAGIC = b"JARVIS-BACKUP-AESGCM-1\n"
CHUNK = 1 << 20
TAG = 16
SCRYPT_LOG2_N, SCRYPT_R, SCRYPT_P = 15, 8, 1
MAX_LOG2_N = 20  # a header asking for more memory than this is not one Jarvis wrote


def _key(passphrase: str, salt: bytes, log2_n: int, r: int, p: int) -> AESGCM:
    kdf = Scrypt(salt=salt, length=32, n=1 << log2_n, r=r, p=p)
    return AESGCM(kdf.derive(passphrase.encode()))


def _nonce(prefix: bytes, counter: int, last: bool) -> bytes:
    return prefix + struct.pack(">IB", counter, 1 if last else 0)


class _Sealer(io.RawIOBase):
    def __init__(self, out: BinaryIO, passphrase: str):
        salt, self.prefix = os.urandom(16), os.urandom(7)
        self.header = MAGIC + salt + bytes([SCRYPT_LOG2_N, SCRYPT_R, SCRYPT_P]) + self.prefix
        self.aead = _key(passphrase, salt, SCRYPT_LOG2_N, SCRYPT_R, SCRYPT_P)
        self.out, self.buffer, self.counter = out, bytearray(), 0
        out.write(self.header)

    def writable(self) -> bool:
        return True

    def _seal(self, data: bytes, last: bool) -> None:
        sealed = self.aead.encrypt(_nonce(self.prefix, self.counter, last), data, self.header)
        self.out.write(struct.pack(">I", len(sealed)) + sealed)
        self.counter += 1

    def write(self, data) -> int:
        self.buffer += data
        while len(self.buffer) > CHUNK:  # the last chunk is sealed by close(), flagged as last
            self._seal(bytes(self.buffer[:CHUNK]), False)
            del self.buffer[:CHUNK]
        return len(data)

    def close(self) -> None:
        if not self.closed and not self.out.closed:
            self._seal(bytes(self.buffer), True)
            self.buffer.clear()
        super().close()


def encrypting(passphrase: str):
    """A wrapper for archive.written: the archive written through it is sealed with the passphrase."""
    return lambda out: _Sealer(out, passphrase)


class _Opener(io.RawIOBase):
    def __init__(self, source: BinaryIO, passphrase: str):
        head = source.read(len(MAGIC) + 16 + 3 + 7)
        if len(head) < len(MAGIC) + 26 or not head.startswith(MAGIC):
            raise BackupRefused("the encrypted backup is truncated before its header")
        salt, params, self.prefix = head[len(MAGIC):len(MAGIC) + 16], head[-10:-7], head[-7:]
        if params[0] > MAX_LOG2_N:
            raise BackupRefused("the encrypted backup's header was tampered with")
        self.header, self.source = head, source
        self.aead = _key(passphrase, salt, *params)
        self.counter, self.pending, self.done = 0, b"", False

    def readable(self) -> bool:
        return True

    def _next(self) -> None:
        size = self.source.read(4)
        if len(size) < 4:
            raise BackupRefused("the encrypted backup is truncated: it ends before its last part")
        (length,) = struct.unpack(">I", size)
        if length > CHUNK + TAG:
            raise BackupRefused("the encrypted backup was tampered with (a part longer than Jarvis writes)")
        sealed = self.source.read(length)
        for last in (False, True):
            try:
                self.pending = self.aead.decrypt(_nonce(self.prefix, self.counter, last), sealed, self.header)
            except InvalidTag:
                continue
            self.counter += 1
            self.done = last
            if last and self.source.read(1):
                raise BackupRefused("the encrypted backup was tampered with: data follows its last part")
            return
        if self.counter == 0:
            raise BackupRefused("the passphrase is wrong, or the encrypted backup was tampered with")
        raise BackupRefused("the encrypted backup was tampered with or damaged (a part fails its check)")

    def readinto(self, buffer) -> int:
        while not self.pending and not self.done:
            self._next()
        n = min(len(buffer), len(self.pending))
        buffer[:n] = self.pending[:n]
        self.pending = self.pending[n:]
        return n


def decrypting(source: BinaryIO, passphrase: str) -> BinaryIO:
    """The plain archive read from the encrypted `source`; BackupRefused when the passphrase is wrong or the file
    was cut or changed."""
    return io.BufferedReader(_Opener(source, passphrase), CHUNK)


def is_encrypted(path) -> bool:
    with open(path, "rb") as f:
        return f.read(len(MAGIC)) == MAGIC
