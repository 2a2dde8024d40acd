#!/usr/bin/env bash
# The package as its users meet it: pack the built checkout as it is
# published (scripts/pack.sh: the main package, JS and types with
# optionalDependencies on the per-platform packages, and this platform's
# binary package procward-linux-x64-gnu), install both tarballs with pnpm
# into a fresh TypeScript project (strict, skipLibCheck false), type-check
# it, and run a small vitest suite there that imports procward by name from
# ESM and from CommonJS against real processes. The main package reaches its
# binary through its optionalDependencies, as from a registry: an override
# points procward-linux-x64-gnu at its tarball, and the other platforms'
# packages are skipped (not published here, and not for this os/cpu/libc).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/procward-consumer.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT

cd "$ROOT"
bash scripts/pack.sh "$WORK/dist" >/dev/null
VERSION="$(node -p 'require("./package.json").version')"
TARBALL="$WORK/dist/procward-$VERSION.tgz"
PLATFORM_TARBALL="$WORK/dist/procward-linux-x64-gnu-$VERSION.tgz"
for t in "$TARBALL" "$PLATFORM_TARBALL"; do echo "packed $(basename "$t") ($(du -h "$t" | cut -f1))"; done

# What ships must stand alone: a LICENSE matching package.json, and a README
# that links nowhere outside the package.
tar -xzf "$TARBALL" -C "$WORK" package/README.md package/LICENSE package/package.json
node -e '
  const fs = require("fs");
  const dir = process.argv[1] + "/package";
  const license = require(dir + "/package.json").license;
  const text = fs.readFileSync(dir + "/LICENSE", "utf8");
  if (!text.startsWith(license + " License")) throw new Error("LICENSE does not match package.json license " + license);
  const readme = fs.readFileSync(dir + "/README.md", "utf8");
  const outside = readme.match(/\]\((?:\.\.\/|\/)[^)]*\)|\.\.\/shared/g);
  if (outside) throw new Error("README links outside the package: " + outside.join(", "));
' "$WORK"

cp -r "$ROOT/consumer-check/." "$WORK/app"
cd "$WORK/app"
# As docs/contributing.md says: the tarballs in the app's own vendor/,
# named by relative paths, so that the lockfile holds no path of this
# machine and a frozen install elsewhere (a Dockerfile's) finds them.
mkdir vendor
cp "$TARBALL" "$PLATFORM_TARBALL" vendor/
# Same pinned tool versions as the project itself.
node -e '
  const fs = require("fs");
  const root = require(process.argv[1] + "/package.json");
  const app = JSON.parse(fs.readFileSync("package.json", "utf8"));
  app.dependencies = { procward: "file:vendor/" + process.argv[2] };
  for (const k of ["typescript", "vitest", "vite", "@types/node"]) app.devDependencies[k] = root.devDependencies[k];
  app.packageManager = root.packageManager;
  fs.writeFileSync("package.json", JSON.stringify(app, null, 2));
' "$ROOT" "$(basename "$TARBALL")"
printf 'overrides:\n  procward-linux-x64-gnu: file:vendor/%s\n' "$(basename "$PLATFORM_TARBALL")" >pnpm-workspace.yaml
pnpm install --no-frozen-lockfile --reporter=append-only >/dev/null
if grep -n "$WORK" pnpm-lock.yaml; then
  echo "consumer-check: the lockfile names a path of this machine" >&2
  exit 1
fi
# The app copied elsewhere, installed as a Dockerfile would: frozen.
cp -r "$WORK/app" "$WORK/app2"
rm -rf "$WORK/app2/node_modules"
(cd "$WORK/app2" && pnpm install --frozen-lockfile --reporter=append-only >/dev/null)
node -e 'require(process.argv[1] + "/node_modules/procward").isProcessRunning(process.pid) || process.exit(1)' "$WORK/app2"
pnpm exec tsc -p tsconfig.json
pnpm exec vitest run ${PROCWARD_REPORTS:+--reporter=default --reporter=json --outputFile.json=$PROCWARD_REPORTS/consumer.json}
