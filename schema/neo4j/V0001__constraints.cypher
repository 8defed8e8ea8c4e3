// Neo4j 5 constraints and indexes for the er graph model (README, "Graph model").
// Writes find nodes by `key` = JSON [collection, id]; reads and users by (collection, id).
CREATE CONSTRAINT er_node_key IF NOT EXISTS FOR (n:Node) REQUIRE n.key IS UNIQUE;
CREATE INDEX er_node_collection_id IF NOT EXISTS FOR (n:Node) ON (n.collection, n.id);
CREATE INDEX er_mention_key IF NOT EXISTS FOR (n:Mention) ON (n.collection, n.id);
CREATE INDEX er_cluster_key IF NOT EXISTS FOR (n:Cluster) ON (n.collection, n.id);
CREATE INDEX er_parent_since IF NOT EXISTS FOR ()-[p:PARENT]-() ON (p.since, p.until);
