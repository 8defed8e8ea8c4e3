// FalkorDB indexes for the er graph model (README, "Graph model").
// Applied on every `er init`; an index that already exists is skipped.
// Writes find nodes by `key` (one property, fastest); reads and users by (collection, id).
CREATE INDEX FOR (n:Node) ON (n.key);
CREATE INDEX FOR (n:Node) ON (n.collection, n.id);
CREATE INDEX FOR (n:Mention) ON (n.collection, n.id);
CREATE INDEX FOR (n:Cluster) ON (n.collection, n.id);
CREATE INDEX FOR ()-[p:PARENT]-() ON (p.since, p.until);
