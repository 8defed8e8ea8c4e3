// Ancestors of a node (usually a mention) as of batch $as_of, nearest first.
// An edge belongs to batch b when since <= b < until (until null: still current).
MATCH path = (m:Node {collection: $collection, id: $id})-[:PARENT*1..]->(a:Cluster)
WHERE all(r IN relationships(path) WHERE r.since <= $as_of AND (r.until IS NULL OR r.until > $as_of))
RETURN a.id AS id, min(length(path)) AS depth, a.score AS score,
       a.level_lo AS level_lo, a.level_hi AS level_hi, a.size AS size
ORDER BY depth, id
