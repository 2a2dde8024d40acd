/* The C floor of `pnpm bench spawn`: /bin/true started with posix_spawn and
 * reaped with waitpid, one after the other, stdio on /dev/null as the Node
 * side's 'ignore'. Usage: spawn-floor N. Prints one JSON line with the same
 * raw samples as bench/bun-peer.mjs: {"secs": S, "callUs": [...]}, the
 * time of each posix_spawn call in µs, and "cpuUs": [...], the calling
 * thread's CPU time of each (CLOCK_THREAD_CPUTIME_ID: the vfork wait for
 * the child's execve is not in it). */
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <fcntl.h>

extern char **environ;

static double clock_s(clockid_t id) {
  struct timespec ts;
  clock_gettime(id, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}
static double now(void) { return clock_s(CLOCK_MONOTONIC); }
static double cpu(void) { return clock_s(CLOCK_THREAD_CPUTIME_ID); }

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 0;
  if (n <= 0) {
    fprintf(stderr, "usage: spawn-floor N\n");
    return 2;
  }
  double *call = malloc(sizeof(double) * (size_t)n);
  double *cpu_us = malloc(sizeof(double) * (size_t)n);
  if (!call || !cpu_us) return 1;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  char *args[] = {"/bin/true", NULL};
  double t0 = now();
  for (int i = 0; i < n; i++) {
    pid_t pid;
    double p0 = cpu();
    double c0 = now();
    int err = posix_spawn(&pid, "/bin/true", &fa, NULL, args, environ);
    call[i] = (now() - c0) * 1e6;
    cpu_us[i] = (cpu() - p0) * 1e6;
    if (err) {
      fprintf(stderr, "posix_spawn: error %d\n", err);
      return 1;
    }
    int status;
    if (waitpid(pid, &status, 0) != pid) {
      perror("waitpid");
      return 1;
    }
  }
  double secs = now() - t0;
  printf("{\"secs\":%.9f,\"callUs\":[", secs);
  for (int i = 0; i < n; i++) printf(i ? ",%.3f" : "%.3f", call[i]);
  printf("],\"cpuUs\":[");
  for (int i = 0; i < n; i++) printf(i ? ",%.3f" : "%.3f", cpu_us[i]);
  printf("]}\n");
  return 0;
}
