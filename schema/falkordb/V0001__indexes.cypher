// FalkorDB indexes for the er graph model (README, "Graph model").
// Applied on every `er init`; an index that already exists is skipped.
// Writes find nodes by `key` (one property, fastest); reads and users by (collection, id).
// Every node field is indexed under the one label `Node` (see V0009 for why); edges
// carry no index (see V0010).
CREATE INDEX FOR (n:Node) ON (n.key);
CREATE INDEX FOR (n:Node) ON (n.collection, n.id);
