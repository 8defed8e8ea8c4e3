// The entity of a mention at SCC/MBSCC level $level (a cluster spans
// level_lo..level_hi), as of batch $as_of. No row: the mention is on its own.
// Levels and attributes as of $as_of: v counts the versions replaced at or before
// it; prev_x[v] is then the value of x (null past the list: the current value).
MATCH path = (m:Node {collection: $collection, id: $id})-[:PARENT*1..]->(a:Cluster)
WHERE all(r IN relationships(path) WHERE r.since <= $as_of AND (r.until IS NULL OR r.until > $as_of))
WITH a, length(path) AS depth, size([u IN coalesce(a.prev_until, []) WHERE u <= $as_of]) AS v
WHERE coalesce(a.prev_level_lo[v], a.level_lo) <= $level
  AND $level <= coalesce(a.prev_level_hi[v], a.level_hi)
WITH a, depth, v, coalesce(a.prev_score[v], a.score) AS score
RETURN a.id AS id, depth, coalesce(a.prev_size[v], a.size) AS size,
       CASE WHEN score <> score THEN null ELSE score END AS score
ORDER BY depth, id
LIMIT 1
