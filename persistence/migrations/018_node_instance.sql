-- Which running process speaks for a node id (docs/scaling.md, "One process per node id"). The
-- leases and the writers' fence name node ids, so two processes started with the same id would
-- both pass the fence. Each process draws a random instance id when it starts; the heartbeat keeps
-- the row only for the instance that wrote it, until that instance's heartbeat is older than the
-- lease TTL. A process that takes the row over from a silent one hands that one's leases back
-- first, so it takes them again one epoch higher, and the silent one's writers are fenced.
-- NULL: a row written before this migration, by a process that drew no instance id.
ALTER TABLE cluster_node ADD COLUMN instance UUID;

GRANT UPDATE (instance) ON cluster_node TO wallet_app;
