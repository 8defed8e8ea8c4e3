// Indexes under the labels Mention and Cluster, dropped from graphs that earlier
// versions made; `er init` skips each one that is not there.
// Why: FalkorDB re-indexes a node in every index of its labels on any SET, even of an
// attribute no index holds, and each label's index costs about as much as all the
// fields of another. A batch writes thousands of nodes; with a second label index a
// versioned upsert of 1,000 clusters took 54.5 ms on a 300k graph and 41.1 ms without
// it (38 and 34 ms at 20k): the write grew with the graph. The reads match nodes under
// `Node`, whose index holds key, collection, id and external_id.
DROP INDEX FOR (n:Mention) ON (n.collection);
DROP INDEX FOR (n:Mention) ON (n.id);
DROP INDEX FOR (n:Mention) ON (n.external_id);
DROP INDEX FOR (n:Cluster) ON (n.collection);
DROP INDEX FOR (n:Cluster) ON (n.id);
