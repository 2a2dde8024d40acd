/* The kernel floor of `pnpm bench cgroup`: what a cgroup per child costs the
 * kernel itself, with no library in between. For each of N rounds, a child
 * (`sleep 100`, forked, stdio as inherited) is started in a fresh cgroup
 * under PARENT (it writes itself into cgroup.procs before its exec) and,
 * alternately, without one; then SIGKILLed, and the time until its pidfd
 * turns readable is taken. The cgroup's mkdir and rmdir are timed too.
 * Usage: cgroup-floor PARENT N. Prints one JSON line of raw samples in µs:
 * {"mkdirUs": [...], "rmdirUs": [...], "exitUs": [...], "exitContainedUs": [...]}. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

/* Starts `sleep 100` (in `cgroup` unless NULL) and returns once it has
 * exec'd, or -1. */
static pid_t start(const char *cgroup) {
  int ready[2];
  if (pipe2(ready, O_CLOEXEC)) return -1;
  pid_t pid = fork();
  if (pid == 0) {
    if (cgroup) {
      char procs[4096];
      snprintf(procs, sizeof procs, "%s/cgroup.procs", cgroup);
      int f = open(procs, O_WRONLY);
      if (f < 0 || write(f, "0", 1) != 1) _exit(126);
      close(f);
    }
    close(ready[0]);
    execlp("sleep", "sleep", "100", (char *)NULL);
    _exit(127);
  }
  close(ready[1]);
  char c;
  /* EOF once the exec closed the write end. */
  while (read(ready[0], &c, 1) > 0) {
  }
  close(ready[0]);
  return pid;
}

/* SIGKILL → pidfd readable, in µs; the child is reaped after. */
static double kill_to_exit(pid_t pid) {
  int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
  double t0 = now_us();
  kill(pid, SIGKILL);
  struct pollfd p = {pidfd, POLLIN, 0};
  poll(&p, 1, -1);
  double us = now_us() - t0;
  waitpid(pid, NULL, 0);
  close(pidfd);
  return us;
}

static void print(const char *name, const double *v, int n, const char *sep) {
  printf("\"%s\": [", name);
  for (int i = 0; i < n; i++) printf("%s%.1f", i ? "," : "", v[i]);
  printf("]%s", sep);
}

int main(int argc, char **argv) {
  int n = argc > 2 ? atoi(argv[2]) : 0;
  if (n <= 0) {
    fprintf(stderr, "usage: cgroup-floor PARENT N\n");
    return 2;
  }
  double *mk = calloc((size_t)n, sizeof(double)), *rm = calloc((size_t)n, sizeof(double));
  double *ex = calloc((size_t)n, sizeof(double)), *exc = calloc((size_t)n, sizeof(double));
  if (!mk || !rm || !ex || !exc) return 1;
  for (int i = 0; i < n; i++) {
    char path[4096];
    snprintf(path, sizeof path, "%s/floor-%d-%d", argv[1], (int)getpid(), i);
    double t0 = now_us();
    if (mkdir(path, 0755)) {
      perror("mkdir");
      return 1;
    }
    mk[i] = now_us() - t0;
    pid_t pid = start(path);
    if (pid < 0) return 1;
    usleep(2000);
    exc[i] = kill_to_exit(pid);
    t0 = now_us();
    if (rmdir(path)) {
      perror("rmdir");
      return 1;
    }
    rm[i] = now_us() - t0;
    pid = start(NULL);
    if (pid < 0) return 1;
    usleep(2000);
    ex[i] = kill_to_exit(pid);
  }
  printf("{");
  print("mkdirUs", mk, n, ", ");
  print("rmdirUs", rm, n, ", ");
  print("exitUs", ex, n, ", ");
  print("exitContainedUs", exc, n, "}\n");
  return 0;
}
