#!/bin/sh
# Expire knowledge-base facts past their TTL; meant for cron. Safe while a research run
# writes to the same workspace: the sweep uses short batched transactions on a WAL database.
#
# Example crontab line (every night at 03:15, workspace in ~/research/memory):
#   15 3 * * * DEEPRESEARCH_HOME=$HOME/research/memory /path/to/deepresearch/scripts/cron_sweep.sh >>$HOME/research/sweep.log 2>&1
#
# Exit status is deepresearch's: 0 on success, 1 on any failure (cron mails the error line).
# Set SWEEP_PURGE=1 to delete expired facts instead of marking them (their history stays).
set -eu

if [ -z "${DEEPRESEARCH_HOME:-}" ]; then
    echo "cron_sweep.sh: set DEEPRESEARCH_HOME to the workspace folder" >&2
    exit 2
fi
DEEPRESEARCH="${DEEPRESEARCH:-deepresearch}"
if [ "${SWEEP_PURGE:-0}" = "1" ]; then
    set -- --purge
else
    set --
fi
printf '%s ' "$(date -u +%Y-%m-%dT%H:%M:%SZ)"
exec "$DEEPRESEARCH" kb sweep "$@"
