# Cluster mode (docs/operations.md#cluster-mode), included by the root Makefile.
#   make cluster-demo   two daemons on this machine sharing one PostgreSQL and one Redis
#                       (throwaway servers), TASKS builtin tasks (default 6) submitted to the
#                       first and waited for through the second; prints which daemon ran what
.PHONY: cluster-demo

cluster-demo: setup
	node scripts/cluster-demo.mjs
