// The entity of a mention at SCC/MBSCC level $level (a cluster spans
// level_lo..level_hi), as of batch $as_of. No row: the mention is on its own.
MATCH path = (m:Node {collection: $collection, id: $id})-[:PARENT*1..]->(a:Cluster)
WHERE all(r IN relationships(path) WHERE r.since <= $as_of AND (r.until IS NULL OR r.until > $as_of))
  AND a.level_lo <= $level AND $level <= a.level_hi
RETURN a.id AS id, length(path) AS depth, a.size AS size, a.score AS score
ORDER BY depth, id
LIMIT 1
