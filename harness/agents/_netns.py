"""A listening socket on 127.0.0.1 inside another process's network namespace: how a container reaches the services.

A container runs with no network (``network_mode="none"``): its namespace has
a loopback and nothing else, so the services on the host's 127.0.0.1 are out
of its reach, as they should be. Instead of opening a network to it, the
harness (root) makes a socket *in the container's namespace*, on the same port
the services have on the host: the URLs the agent was handed
(``http://127.0.0.1:PORT/SECRET``) then reach the services from inside the
container too, and nothing else does. The socket is the harness's: it lives
outside the killed tree, accepted by the services' own threads.

A namespace belongs to the thread that enters it (``setns(2)``), so a
short-lived thread enters the container's, makes the socket and ends; the
socket keeps the namespace it was made in.
"""

from __future__ import annotations

import ctypes
import os
import socket
import threading

CLONE_NEWNET = 0x40000000
BACKLOG = 128


def own_network(pid: int) -> bool:
    """Whether ``pid`` has a network namespace of its own (a container's), not the harness's."""
    try:
        return os.stat(f"/proc/{pid}/ns/net").st_ino != os.stat("/proc/self/ns/net").st_ino
    except OSError:  # it is gone already: nothing to reach
        return False


def listen_in_network_of(pid: int, port: int) -> socket.socket:
    """A socket listening on 127.0.0.1:``port`` in ``pid``'s network namespace; OSError when it cannot be made
    (the process is gone, the harness may not enter its namespace, the port is taken there)."""
    made: list[socket.socket] = []
    failed: list[OSError] = []

    def enter_and_listen() -> None:
        try:
            namespace = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY | os.O_CLOEXEC)
            try:
                if ctypes.CDLL(None, use_errno=True).setns(namespace, CLONE_NEWNET) != 0:
                    error = ctypes.get_errno()
                    raise OSError(error, f"setns into the network of pid {pid}: {os.strerror(error)}")
            finally:
                os.close(namespace)
            listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            try:
                listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                listener.bind(("127.0.0.1", port))
                listener.listen(BACKLOG)
            except OSError:
                listener.close()
                raise
            made.append(listener)
        except OSError as error:
            failed.append(error)

    thread = threading.Thread(target=enter_and_listen, name=f"netns-{pid}")
    thread.start()
    thread.join()
    if failed:
        raise failed[0]
    return made[0]
