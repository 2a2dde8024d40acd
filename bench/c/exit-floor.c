/* The C floor of `pnpm bench split`'s exit: what procward's exit path does
 * on the JS loop, without JS. `sleep 100` started with posix_spawn in a
 * process group of its own, stdio on /dev/null, its pidfd in an epoll; 2 ms
 * later SIGKILL, then: epoll_wait until the pidfd is readable, the exit
 * seen (waitid WNOWAIT), the group swept (killpg), the reap (waitid).
 * Usage: exit-floor N. Prints one JSON line: {"latUs": [...]}, µs from each
 * kill until its reap returned. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 0;
  if (n <= 0) {
    fprintf(stderr, "usage: exit-floor N\n");
    return 2;
  }
  int ep = epoll_create1(EPOLL_CLOEXEC);
  if (ep < 0) return 1;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  for (int fd = 0; fd < 3; fd++) posix_spawn_file_actions_addopen(&fa, fd, "/dev/null", O_RDWR, 0);
  posix_spawnattr_t at;
  posix_spawnattr_init(&at);
  posix_spawnattr_setpgroup(&at, 0);
  posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP);
  char *av[] = {"sleep", "100", NULL};
  printf("{\"latUs\":[");
  for (int i = 0; i < n; i++) {
    pid_t pid;
    if (posix_spawnp(&pid, "sleep", &fa, &at, av, environ) != 0) return 1;
    int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
    if (pidfd < 0) {
      kill(pid, SIGKILL); /* nothing of ours left running */
      waitpid(pid, NULL, 0);
      return 1;
    }
    struct epoll_event ev = {.events = EPOLLIN};
    epoll_ctl(ep, EPOLL_CTL_ADD, pidfd, &ev);
    usleep(2000);
    double t0 = now_us();
    kill(pid, SIGKILL);
    while (epoll_wait(ep, &ev, 1, -1) != 1) {
    }
    siginfo_t si;
    waitid(P_PIDFD, pidfd, &si, WEXITED | WNOWAIT | WNOHANG);
    killpg(pid, SIGKILL);
    waitid(P_PIDFD, pidfd, &si, WEXITED | WNOHANG);
    double t1 = now_us();
    epoll_ctl(ep, EPOLL_CTL_DEL, pidfd, NULL);
    close(pidfd);
    printf("%s%.1f", i ? "," : "", t1 - t0);
  }
  printf("]}\n");
  return 0;
}
