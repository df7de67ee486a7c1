"""A small fenced file: a value and the highest token it accepted, both in
one file, updated under an exclusive flock. write() accepts a token equal to
or above the highest accepted one and records it, in one atomic step
(R-FEN-1); a lower token changes nothing."""

import fcntl
import os
from typing import Tuple


class StaleToken(Exception):
    pass


class FencedFile:
    def __init__(self, path: str) -> None:
        self.path = path
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        os.close(fd)

    def _read(self, f) -> Tuple[int, str]:
        f.seek(0)
        data = f.read()
        if not data:
            return 0, ""
        token, _, value = data.partition("\n")
        return int(token), value

    def read(self) -> Tuple[int, str]:
        with open(self.path, "r+") as f:
            fcntl.flock(f, fcntl.LOCK_SH)
            return self._read(f)

    def write(self, token: int, value: str) -> None:
        if token < 0 or token > 2**63 - 1:
            raise ValueError(f"token {token} out of range")
        with open(self.path, "r+") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            highest, _ = self._read(f)
            if token < highest or token == 0 and highest > 0:
                raise StaleToken(f"token {token} is below {highest}")
            f.seek(0)
            f.truncate()
            f.write(f"{token}\n{value}")
            f.flush()
            os.fsync(f.fileno())
