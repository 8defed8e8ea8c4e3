// The entity of a mention under a score cut: its highest ancestor reached through
// clusters that all formed at a linkage score >= $threshold, as of batch $as_of.
// No row: the mention is an entity on its own.
MATCH path = (m:Node {collection: $collection, id: $id})-[:PARENT*1..]->(a:Cluster)
WHERE all(r IN relationships(path) WHERE r.since <= $as_of AND (r.until IS NULL OR r.until > $as_of))
  AND all(n IN nodes(path)[1..] WHERE n.score >= $threshold)
RETURN a.id AS id, length(path) AS depth, a.size AS size, a.score AS score
ORDER BY depth DESC, id
LIMIT 1
