#!/usr/bin/env python3
"""Stand-in for the numasched daemon's control socket, for slurm/spank/test.sh.

usage: fake_daemon.py SOCKET LOG [ok|silent]

Accepts one request line per connection, appends it verbatim to LOG and the
peer's uid (SO_PEERCRED) to LOG.uid, then answers {"ok":true} ("ok") or holds
the connection for 2 s without answering ("silent", to exercise the plugin's
timeout). Runs until killed; single-threaded on purpose (a stuck client only
delays the next one, like a busy daemon).
"""
import os
import socket
import struct
import sys
import time


def main() -> None:
    path, log = sys.argv[1], sys.argv[2]
    mode = sys.argv[3] if len(sys.argv) > 3 else "ok"
    if os.path.exists(path):
        os.unlink(path)
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen(64)
    while True:
        conn, _ = srv.accept()
        with conn:
            cred = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
            _pid, uid, _gid = struct.unpack("3i", cred)
            conn.settimeout(2)
            buf = b""
            try:
                while b"\n" not in buf and len(buf) < 65536:
                    chunk = conn.recv(4096)
                    if not chunk:
                        break
                    buf += chunk
            except OSError:
                pass
            line = buf.split(b"\n", 1)[0].decode("utf-8", "replace")
            with open(log, "a") as f:
                f.write(line + "\n")
            with open(log + ".uid", "a") as f:
                f.write(f"{uid}\n")
            if mode == "silent":
                time.sleep(2)
                continue
            try:
                conn.sendall(b'{"ok":true}\n')
            except OSError:
                pass


if __name__ == "__main__":
    main()
