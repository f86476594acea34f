"""The adb transport wire format: 24-byte headers, commands, and the shell v2 and sync framing.

Everything here is pure (bytes in, bytes out). Facts from the AOSP adb sources:
a header is six little-endian u32 ``command, arg0, arg1, data_length, data_check, magic``
with ``magic = command ^ 0xffffffff``; since version 0x01000001 the checksum is not checked.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

A_CNXN = 0x4E584E43
A_AUTH = 0x48545541
A_OPEN = 0x4E45504F
A_OKAY = 0x59414B4F
A_WRTE = 0x45545257
A_CLSE = 0x45534C43
A_STLS = 0x534C5453

COMMAND_NAMES = {A_CNXN: "CNXN", A_AUTH: "AUTH", A_OPEN: "OPEN", A_OKAY: "OKAY",
                 A_WRTE: "WRTE", A_CLSE: "CLSE", A_STLS: "STLS"}

A_VERSION = 0x01000001
MAX_PAYLOAD_BYTES = 1024 * 1024
"""The largest payload this device accepts and offers in its CNXN."""

HEADER = struct.Struct("<6I")
HEADER_BYTES = HEADER.size


class ProtocolError(Exception):
    """The peer sent something that is not an adb message."""


@dataclass(frozen=True)
class Message:
    """One adb transport message."""

    command: int
    """One of the A_* constants."""
    arg0: int
    arg1: int
    data: bytes = b""

    @property
    def name(self) -> str:
        return COMMAND_NAMES.get(self.command, f"0x{self.command:08x}")


def pack(command: int, arg0: int, arg1: int, data: bytes = b"") -> bytes:
    """Encode one message; the checksum is the byte sum, which old peers still want."""
    check = sum(data) & 0xFFFFFFFF
    return HEADER.pack(command, arg0, arg1, len(data), check, command ^ 0xFFFFFFFF) + data


def unpack_header(header: bytes, max_payload_bytes: int = MAX_PAYLOAD_BYTES) -> tuple[int, int, int, int]:
    """Decode a header into (command, arg0, arg1, data_length); checks magic and length only."""
    command, arg0, arg1, length, _check, magic = HEADER.unpack(header)
    if magic != command ^ 0xFFFFFFFF:
        raise ProtocolError(f"bad magic 0x{magic:08x} for command 0x{command:08x}")
    if length > max_payload_bytes:
        raise ProtocolError(f"payload of {length} bytes exceeds {max_payload_bytes}")
    return command, arg0, arg1, length


# --- shell protocol v2: [id u8][length u32le][data] ---
SHELL_STDIN = 0
SHELL_STDOUT = 1
SHELL_STDERR = 2
SHELL_EXIT = 3
SHELL_CLOSE_STDIN = 4  # window-size packets (5) are ignored

SHELL_PACKET = struct.Struct("<BI")


def shell_packet(packet_id: int, data: bytes) -> bytes:
    return SHELL_PACKET.pack(packet_id, len(data)) + data


# --- sync v1: 8-byte requests id[4] + u32le length ---
SYNC_HEADER = struct.Struct("<4sI")
SYNC_MAX_DATA_BYTES = 64 * 1024
"""The largest DATA chunk sync v1 allows in either direction."""


def sync_fail(message: str) -> bytes:
    text = message.encode("utf-8")
    return SYNC_HEADER.pack(b"FAIL", len(text)) + text


def sync_stat(mode: int, size_bytes: int, mtime_s: int) -> bytes:
    return b"STAT" + struct.pack("<3I", mode & 0xFFFFFFFF, size_bytes & 0xFFFFFFFF, mtime_s & 0xFFFFFFFF)


def sync_dent(mode: int, size_bytes: int, mtime_s: int, name: bytes) -> bytes:
    return b"DENT" + struct.pack("<4I", mode & 0xFFFFFFFF, size_bytes & 0xFFFFFFFF,
                                 mtime_s & 0xFFFFFFFF, len(name)) + name


# LIST ends with a whole dent-sized record whose id is DONE; the adb client reads all 20 bytes.
SYNC_LIST_DONE = b"DONE" + bytes(16)
SYNC_DATA_DONE = b"DONE" + bytes(4)
SYNC_OKAY = b"OKAY" + bytes(4)
