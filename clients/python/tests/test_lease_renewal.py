"""A lease's background renewal when the connection it renews on stops
answering (a stale keep-alive connection through a load balancer, a
half-open socket after a network blip): each try is bounded by ttl/4 and a
failed one is tried again on a fresh connection before the lease expires.

Before, a renewal waited the client's whole timeout (30 s by default, 10 s
in cachesvc.jax) on that connection, the lease expired meanwhile, and a
waiter took it over and compiled the program a second time.

A real server behind a real TCP forwarder that can stall the connections
open at a given moment while it forwards new ones.
"""

from __future__ import annotations

import socket
import threading
import time

from cachesvc import Client


class Forwarder:
    """Forwards 127.0.0.1:port to the server; :meth:`stall` makes every
    connection open at that moment swallow what it is sent, unanswered."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self._stalled: set[socket.socket] = set()
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def stall(self) -> None:
        with self._lock:
            self._stalled |= self._open

    def _accept(self) -> None:
        while True:
            try:
                c, _ = self.listener.accept()
            except OSError:
                return
            s = socket.create_connection(self.target)
            with self._lock:
                self._open.add(c)
            threading.Thread(target=self._pipe, args=(c, s, c), daemon=True).start()
            threading.Thread(target=self._pipe, args=(s, c, c), daemon=True).start()

    def _pipe(self, src: socket.socket, dst: socket.socket, client: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                with self._lock:
                    if client in self._stalled:
                        continue  # swallowed: the client waits for an answer that never comes
                dst.sendall(data)
        except OSError:
            pass

    def close(self) -> None:
        self.listener.close()
        with self._lock:
            for c in self._open:
                c.close()


def test_renewal_on_a_stalled_connection_keeps_the_lease(server):
    fwd = Forwarder(("127.0.0.1", int(server.url.rsplit(":", 1)[1])))
    try:
        holder = Client(f"http://127.0.0.1:{fwd.port}", namespace="default", timeout=30.0)
        key = "ab" * 32
        ttl = 6.0
        lease = holder.lease(key, holder="holder:1", ttl=ttl, renew=False)
        assert lease.acquire()
        lease.start_renewing()
        fwd.stall()  # the pooled connection the renewals would use stops answering
        time.sleep(ttl + 2)  # past the expiry, had no renewal got through
        other = Client(server.url, namespace="default").lease(key, holder="waiter:2", ttl=ttl, renew=False)
        # Before: granted to the waiter, the holder's renewal still hung on
        # the stalled connection (for the client's 30 s timeout).
        assert other.acquire() is False and other.current_holder == "holder:1", (other.code, other.expires)
        lease.release()
    finally:
        fwd.close()
