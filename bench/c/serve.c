/* The daemon of `pnpm bench supervisor`: listens on 127.0.0.1:PORT as soon
 * as it runs (no runtime to start, so a restart measures the supervisor, not
 * Node's start-up) and answers every connection with an HTTP/1.0 response
 * whose JSON body carries its pid, as __test__/fixtures/http-daemon.cjs
 * does. Usage: serve --port PORT. A port still held for a moment by a
 * predecessor is retried every millisecond for up to a second. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv) {
  int port = 0;
  for (int i = 1; i + 1 < argc; i++)
    if (strcmp(argv[i], "--port") == 0) port = atoi(argv[i + 1]);
  if (port <= 0 || port > 65535) {
    fprintf(stderr, "usage: serve --port PORT\n");
    return 2;
  }
  int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s < 0) return 1;
  int one = 1;
  setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_port = htons((unsigned short)port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  struct timespec ms = {0, 1000000};
  int tries = 0;
  while (bind(s, (struct sockaddr *)&a, sizeof a) != 0) {
    if (errno != EADDRINUSE || ++tries > 1000) {
      perror("bind");
      return 1;
    }
    nanosleep(&ms, NULL);
  }
  if (listen(s, 128) != 0) {
    perror("listen");
    return 1;
  }
  char body[64];
  int blen = snprintf(body, sizeof body, "{\"pid\":%d}", (int)getpid());
  char resp[256];
  int rlen = snprintf(resp, sizeof resp,
                      "HTTP/1.0 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
                      "Connection: close\r\n\r\n%s",
                      blen, body);
  for (;;) {
    int c = accept(s, NULL, NULL);
    if (c < 0) continue;
    char buf[2048];
    (void)read(c, buf, sizeof buf); /* the request line; its content does not matter */
    (void)write(c, resp, (size_t)rlen);
    close(c);
  }
}
