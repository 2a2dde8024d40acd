# The daemon of `pnpm bench supervisor` where there is no C compiler: the
# same as bench/c/serve.c (listens on 127.0.0.1:PORT at once, answers every
# connection with its pid as JSON), at Python's start-up cost.
import os
import socket
import sys
import time

port = int(sys.argv[sys.argv.index('--port') + 1])
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
for attempt in range(1000):
    try:
        s.bind(('127.0.0.1', port))
        break
    except OSError:
        time.sleep(0.001)
else:
    sys.exit(1)
s.listen(128)
body = ('{"pid":%d}' % os.getpid()).encode()
resp = b'HTTP/1.0 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s' % (
    len(body),
    body,
)
while True:
    c, _ = s.accept()
    c.recv(2048)
    c.sendall(resp)
    c.close()
