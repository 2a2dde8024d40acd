// The usage texts (`procward <verb> --help`).

const USAGE = {
  up: `usage: procward up [-f FILE] [--json] [--init]

Runs the daemons of FILE (default: procward.config.mjs, .cjs or .json in the
working directory; a module's default export, or JSON: { stateDir?, daemons:
{ NAME: { command, args, after, memoryLimit, log, ready, ... } } }) in the
foreground, as a SupervisorGroup: each daemon started once the daemons in its
after are ready, restarted alone when it crashes. Each line a daemon writes is
copied with its name before it (coloured on a terminal; a daemon with its own
stdio or a log is not copied); one line per daemon event on stderr,
timestamped unless stderr is the systemd journal (--json: JSON lines).
SIGTERM, SIGINT, SIGHUP or SIGQUIT stops every daemon in reverse order, then
ends procward with that signal (status 128 + n); a second one kills at once.
Exits 0 when every daemon ended by itself, 1 when one failed or the group
could not start; a FILE that cannot be read or holds a bad config: one line
naming the problem, status 2, nothing started.

Under a service manager (NOTIFY_SOCKET: a systemd unit with Type=notify)
procward is the group's one main process: READY=1 once every daemon is ready,
STATUS= with how many run, STOPPING=1 when it stops, WATCHDOG=1 with
WATCHDOG_USEC. As PID 1 (or with --init) it reaps orphans, as procward run.

  -f, --file FILE  the config file
  --json           log events as JSON lines
  --init           reap orphaned descendants (implied when procward is PID 1)`,
  run: `usage: procward run [--name N] [--restart always|on-failure|never] [--state-file F]
                    [--listen [HOST:]PORT|/PATH[=NAME]]...
                    [--ready-port P | --ready-http URL | --ready-notify] [--grace MS] [--max-restarts N]
                    [--health-port P | --health-http URL] [--health-interval MS]
                    [--health-timeout MS] [--health-failures N] [--health-start-period MS]
                    [--cgroup] [--hup stop|forward|reload] [--prefix] [--json] [--init]
                    [--cwd DIR] [--env K=V]... [--env-file FILE]... [--user USER[:GROUP]]
                    [--umask 0NNN] -- COMMAND [ARGS...]

Runs COMMAND under a supervisor in the foreground: restarted when it exits
(with backoff; given up after a crash loop), and stopped with its whole
process group by any signal that would end procward (SIGTERM, SIGINT, SIGHUP,
SIGQUIT, SIGUSR2...), which then ends procward itself (status 128 + n). A
second signal while stopping kills at once. One line per lifecycle event on
stderr, timestamped unless stderr is the systemd journal (--json: one JSON
object per line). With --restart never, exits with the child's status (128 + n
when killed by signal n), or 1 when procward stopped it for failed ready or
health checks or it exited 0 before it was ready. A COMMAND that cannot be
found exits 127, one that cannot be run 126.

Under a service manager (NOTIFY_SOCKET set: a systemd unit with Type=notify, or
a container runtime that speaks the protocol) procward reports READY=1 once
COMMAND is ready (again after each restart's ready), STATUS= on each event,
STOPPING=1 when it stops, and with WATCHDOG_USEC set, WATCHDOG=1 at half that
period while procward's loop turns (in every state, a backoff too). Without a ready check, COMMAND counts as ready once
it has run 1 s (a daemon that dies at start-up is never reported ready).
NOTIFY_SOCKET and WATCHDOG_* are not passed on to COMMAND.

  --name N            name in the log lines and the state file (default: COMMAND's basename)
  --restart POLICY    always (default), on-failure or never
  --state-file F      record the state in F (and lock F.lock: one supervisor per file);
                      a dead predecessor's child recorded there is stopped first
  --listen SPEC       hold a listening socket for COMMAND (repeatable): [HOST:]PORT (HOST
                      an IP address, default 127.0.0.1; [::1]:PORT for IPv6; port 0: any)
                      or /PATH (a unix socket), optionally =NAME. Bound once, kept open
                      across restarts (a connection waits instead of being refused), and
                      handed to COMMAND as fds 3.. with LISTEN_FDS, LISTEN_FDNAMES and
                      LISTEN_PID, as systemd's socket units do (Linux). Started by a
                      socket unit, procward passes on the unit's sockets instead (--listen
                      NAME then picks them by FileDescriptorName=)
  --ready-port P      ready once something accepts connections on 127.0.0.1:P (not a
                      --listen port: a held port always accepts)
  --ready-http URL    ready once a GET of URL answers 2xx
  --ready-notify      ready once COMMAND sends READY=1 to the NOTIFY_SOCKET procward gives
                      it (sd_notify(3); from COMMAND, a descendant of it or its cgroup);
                      its STATUS= is recorded in the state file (Linux)
  --health-port P     once ready, check every --health-interval that something accepts
                      connections on 127.0.0.1:P; --health-failures failed checks in a row
                      stop COMMAND with its group, and it is restarted as after a crash
  --health-http URL   the same check as an HTTP GET of URL (http: or https:), passed by a
                      2xx answer within --health-timeout (sees a hung or stopped daemon,
                      which a port check does not: the kernel accepts connections for it)
  --health-interval MS  from the end of one check to the next (default 10000)
  --health-timeout MS   a check not passed by then failed (default 5000, or half the
                        interval when less; less than the interval)
  --health-failures N   failed checks in a row that stop COMMAND (default 3)
  --health-start-period MS  failures within MS of ready are not counted (default 0)
  --grace MS          time the child gets to exit after SIGTERM (default 5000)
  --max-restarts N    restarts allowed within 60 s before giving up (default 5)
  --cgroup            contain the child in a cgroup of its own (where supported)
  --hup stop|forward|reload
                      SIGHUP (a closed terminal or ssh session) stops (default), is
                      passed on to COMMAND (a daemon's own reload), or (with --listen)
                      starts a new COMMAND on the held sockets and stops the old one once
                      the new one is ready: a reload no client sees (RELOADING=1 and
                      READY=1 to systemd, as Type=notify-reload expects)
  --prefix            prefix each line COMMAND writes with its name (and the time, as
                      for our own lines); its output is then read through pipes
  --json              log events as JSON lines
  --init              reap orphaned descendants, as a container's init does (implied
                      when procward is PID 1: docker run without --init)

COMMAND's own, as a unit's WorkingDirectory=, Environment=, EnvironmentFile=,
User=/Group= and UMask= (procward itself keeps its own; each is checked before
anything starts, and one that is missing is bad usage, exit 2):

  --cwd DIR             COMMAND's working directory (a relative COMMAND is found from it)
  --env K=V             set K in COMMAND's environment (repeatable; wins over --env-file)
  --env-file FILE       read variables from FILE, in systemd's EnvironmentFile= syntax
                        (KEY=VALUE lines, # or ; comments, quotes, trailing \\ joins lines;
                        no 'export'); repeatable, a later one winning
  --environment-file FILE
                        the same, under systemd's name, which Node itself never reads
                        (Node reads any --env-file FILE first: see docs/cli.md)
  --user USER[:GROUP]   run COMMAND as USER (a name or a uid) with GROUP (default: USER's
                        primary group); USER, LOGNAME, HOME and SHELL from its passwd
                        entry; supplementary groups are dropped (where procward may
                        drop them). Needs root (or CAP_SETUID and CAP_SETGID)
  --umask 0NNN          COMMAND's umask, in octal (Linux)`,
  status: `usage: procward status STATE_FILE [--json]
       procward status -f FILE | DIR [--json]

Tells what a supervisor recorded in STATE_FILE, judged now: active (running),
activating, deactivating, failed or inactive (dead), since when, the main pid,
restarts, the last exit, the ready time, the last health check, and with a
cgroup its tasks, memory and CPU. Exit status (LSB): 0 running, 3 not running, 4 unknown.

For a group (procward up, a SupervisorGroup): -f FILE (its config: each
daemon's state file, <stateDir>/NAME.json or its own stateFile) or DIR (its
stateDir: each NAME.json in it) prints one row per daemon, as pm2 ls does: name,
state, pid, uptime, restarts, CPU time and memory of its tree (its cgroup, or
its process group), health. Exit status: the worst of the daemons'.

  -f, --file FILE  a group's config file
  --json           print the record and the judgement as JSON (a group's:
                   { "daemons": { NAME: that, ... } })`,
  restart: `usage: procward restart NAME [-f FILE] [--json]

Restarts daemon NAME of the group a procward up -f FILE runs (FILE as procward
up finds it), through the group's control socket (FILE's stateDir/procward.sock:
only its owner, or root, is answered; the kernel says who asks). Returns once
the new child is ready (a stopped daemon is started). Exit 0 once done, 1 when
refused, when no procward up runs the group, or when it did not start again.

  -f, --file FILE  the group's config file
  --json           print the group's answer as JSON`,
  stop: `usage: procward stop STATE_FILE [--grace MS]
       procward stop NAME -f FILE [--json]

With -f FILE: stops daemon NAME of the group a procward up -f FILE runs,
through its control socket (as procward restart); the others run on.

Stops what STATE_FILE records. A live supervisor gets SIGTERM (pid and identity
checked) and is waited for; the child it recorded is stopped directly (with its
process group, and its cgroup if it had one) if it still runs afterwards, or if
the supervisor is dead.

  --grace MS    time each gets to exit after SIGTERM before SIGKILL (default: the
                supervisor's own, as recorded; else 5000)`,
  reload: `usage: procward reload STATE_FILE [--timeout MS]
       procward reload NAME -f FILE [--json]

Reloads the daemon of the supervisor STATE_FILE records (a procward run started
with --hup reload and --listen): sends it SIGHUP (pid and identity checked) and
waits for the outcome. Exit 0 once the new daemon serves and the old one is being
stopped; 1 when the new one failed (the old one serves on), the supervisor is not
running, or was not started with --hup reload (nothing is sent: SIGHUP would stop
it).

With -f FILE: reloads daemon NAME of the group a procward up -f FILE runs,
through its control socket (as procward restart): its Supervisor's reload(),
which needs its listen (else refused, exit 1: use restart).

  --timeout MS     how long to wait for the outcome (default 120000)
  -f, --file FILE  the group's config file
  --json           print the group's answer as JSON`,
  lock: `usage: procward lock FILE [--wait[=MS]] [--] COMMAND [ARGS...]
       procward lock --postgres URL --key KEY [--wait[=MS]] [--host-loss-ms MS] [--] COMMAND [ARGS...]

Runs COMMAND while holding an exclusive lock on FILE (flock(2), as flock(1)
does), with a holder record in FILE; with --postgres, a PostgreSQL session
advisory lock named KEY instead (needs the pg package), for more than one
host. Exits with COMMAND's status, or 75 when the lock is held by another
process (or, with --postgres, lost: COMMAND's group then gets SIGTERM, and
SIGKILL before the server can free the lock). SIGTERM, SIGINT and SIGHUP are
passed on to COMMAND (a Ctrl-C at a terminal reaches it directly, and is not
passed on twice); the lock is held until COMMAND has exited, and a second
signal SIGKILLs it. A COMMAND that cannot be found exits 127, one that cannot
be run 126. With --postgres, COMMAND's environment has PROCWARD_LOCK_FENCE
(to fence its writes), PROCWARD_LOCK_KEY and PROCWARD_LOCK_HOLDER (JSON).

  --wait[=MS]        wait for the lock (at most MS milliseconds) instead of failing at once
  --postgres URL     lock on this PostgreSQL server (postgres://...) rather than a file
  --key KEY          the lock's name on the server (required with --postgres)
  --host-loss-ms MS  with --postgres: the bound on a takeover after this host is lost
                     (at least 3000; default 10000)`,
}

const MAIN_USAGE = `usage: procward <command> [options]

commands:
  run      run a command under a supervisor, in the foreground
  up       run the daemons of a config file (a SupervisorGroup), in the foreground
  status   show a supervisor's state (or a group's, one row each), judged now (exit 0 running, 3 not, 4 unknown)
  stop     stop a supervisor (or its orphaned child) by its state file, or a group's daemon
  restart  restart a daemon of a running group (procward up), through its control socket
  reload   replace a supervisor's daemon without a gap (procward run --hup reload), or a group's
  lock     run a command while holding a lock (a file, or PostgreSQL)

procward <command> --help shows a command's options; procward --version its version.`

module.exports = { USAGE, MAIN_USAGE }
