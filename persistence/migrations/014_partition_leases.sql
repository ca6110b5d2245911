-- Several server nodes on one ledger (docs/scaling.md): accounts belong to partitions, and a node
-- debits an account only while it holds its partition's lease.

-- The number of partitions, fixed per deployment: the first node that starts in cluster mode
-- stores it, and a node configured with another number refuses to start.
CREATE TABLE cluster_config (
  singleton   BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (singleton),
  partitions  INTEGER NOT NULL CHECK (partitions BETWEEN 1 AND 4096),
  created_at  TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- One row per partition. `epoch` goes up each time the partition changes hands; a ledger writer
-- that debits an account locks its partition's row FOR SHARE and commits only if the row still
-- names its node at the epoch its account actor decided under (the fence). Taking a partition
-- over is an UPDATE of this row, so it waits for such a writer's transaction, and every writer
-- transaction after it sees the new epoch.
CREATE TABLE partition_lease (
  partition   INTEGER PRIMARY KEY CHECK (partition >= 0),
  node_id     TEXT CHECK (node_id IS NULL OR length(node_id) BETWEEN 1 AND 64),
  epoch       BIGINT NOT NULL DEFAULT 0 CHECK (epoch >= 0),
  expires_at  TIMESTAMPTZ NOT NULL DEFAULT '-infinity',
  CHECK ((node_id IS NULL) = (expires_at = '-infinity'))
);

-- The nodes that are up, with the address other nodes reach their actors at. A node that holds no
-- partition yet is known here, so the others hand it its share.
CREATE TABLE cluster_node (
  node_id       TEXT PRIMARY KEY CHECK (length(node_id) BETWEEN 1 AND 64),
  address       TEXT NOT NULL CHECK (length(address) BETWEEN 1 AND 255),
  heartbeat_at  TIMESTAMPTZ NOT NULL DEFAULT now()
);

GRANT SELECT, INSERT ON cluster_config TO wallet_app;
GRANT SELECT, INSERT ON partition_lease TO wallet_app;
GRANT UPDATE (node_id, epoch, expires_at) ON partition_lease TO wallet_app;
GRANT SELECT, INSERT, DELETE ON cluster_node TO wallet_app;
GRANT UPDATE (address, heartbeat_at) ON cluster_node TO wallet_app;
