# Admin targets (included by the root Makefile). Each uses the data directory of FUSION_HOME
# (default ~/.local/state/fusion) and the daemon on its socket: with the shipped systemd unit,
# run them as root with FUSION_HOME=/var/lib/fusion (docs/operations.md#systemd).
#   make daemon           builds, then runs the daemon in the foreground (JSON logs on stderr)
#   make status           a short health summary (database, sandbox backend and image, providers, queue) and the 10 newest tasks
#   make status-json      the full health reply and the 20 newest tasks, as JSON
#   make verify TASK=ID   offline audit of one task: every digest, seal, broker cross-check, the signature, and a replay of every tool call
#   make gc               retention, orphan reaper and stale-task sweep, now
#   make backup           a backup now: databases, signing key, task folders (FUSION_BACKUP_DIR, keeps FUSION_BACKUP_KEEP)
#   make keys             creates the Ed25519 signing key if there is none; prints the public key
.PHONY: daemon status status-json verify gc backup keys

FUSION := node dist/src/cli/main.js
ADMIN_DIST := dist/src/cli/main.js

# The admin targets need the built CLI; build it once when it is missing.
$(ADMIN_DIST):
	$(MAKE) build

daemon: build
	$(FUSION) daemon

status: | $(ADMIN_DIST)
	@node scripts/admin.mjs status

status-json: | $(ADMIN_DIST)
	@node scripts/admin.mjs status --json

verify: | $(ADMIN_DIST)
	@if [[ -z "$(TASK)" ]]; then echo "usage: make verify TASK=<task id>" >&2; exit 2; fi
	$(FUSION) audit verify $(TASK) --replay

gc: | $(ADMIN_DIST)
	@node scripts/admin.mjs run retention reaper stale-sweep

backup: | $(ADMIN_DIST)
	@node scripts/admin.mjs run backup

keys: | $(ADMIN_DIST)
	@if $(FUSION) keys signing-public >/dev/null 2>&1; then $(FUSION) keys signing-public; else $(FUSION) keys signing-init; fi
