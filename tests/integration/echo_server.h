// kEchoServer: a WebSocket echo server for tests of exposed ports (tests/integration/
// ports_test.cc, replica_ports_test.cc), as a Python program run in a session with the port as
// its argument: `python3 echo.py 9000`.
#ifndef SANDGATE_TESTS_INTEGRATION_ECHO_SERVER_H_
#define SANDGATE_TESTS_INTEGRATION_ECHO_SERVER_H_

namespace sandgate::testing {

// A WebSocket echo server on the standard library alone (the sandbox has no websocket
// package): the RFC 6455 handshake, then every frame's payload back, unmasked.
inline constexpr char kEchoServer[] = R"PY(
import base64, hashlib, socket, struct, sys, threading
def serve(c):
    head = b""
    while b"\r\n\r\n" not in head:
        d = c.recv(4096)
        if not d: return
        head += d
    key = [l.split(b":", 1)[1].strip() for l in head.split(b"\r\n") if l.lower().startswith(b"sec-websocket-key:")][0]
    accept = base64.b64encode(hashlib.sha1(key + b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11").digest())
    c.sendall(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: " + accept + b"\r\n\r\n")
    buf = head.split(b"\r\n\r\n", 1)[1]
    def need(n):
        nonlocal buf
        while len(buf) < n:
            d = c.recv(65536)
            if not d: raise EOFError
            buf += d
        out, buf = buf[:n], buf[n:]
        return out
    try:
        while True:
            b0, b1 = need(2)
            n = b1 & 127
            if n == 126: n = struct.unpack(">H", need(2))[0]
            elif n == 127: n = struct.unpack(">Q", need(8))[0]
            mask = need(4) if b1 & 128 else b"\0\0\0\0"
            data = bytes(x ^ mask[i % 4] for i, x in enumerate(need(n)))
            hdr = bytes([b0]) + (bytes([n]) if n < 126 else bytes([126]) + struct.pack(">H", n))
            c.sendall(hdr + data)
            if b0 & 15 == 8: return
    except EOFError:
        return
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(16)
while True:
    c, _ = s.accept(); threading.Thread(target=serve, args=(c,), daemon=True).start()
)PY";

}  // namespace sandgate::testing

#endif  // SANDGATE_TESTS_INTEGRATION_ECHO_SERVER_H_
