// Ancestors of a node (usually a mention) as of batch $as_of, nearest first.
// An edge belongs to batch b when since <= b < until (until null: still current).
// Attributes as of $as_of: v counts the versions replaced at or before it; prev_x[v]
// is then the value of x (null past the list: the current value). A null score is
// kept in prev_score as NaN, the one value not equal to itself.
MATCH path = (m:Node {collection: $collection, id: $id})-[:PARENT*1..]->(a:Cluster)
WHERE all(r IN relationships(path) WHERE r.since <= $as_of AND (r.until IS NULL OR r.until > $as_of))
WITH a, min(length(path)) AS depth
WITH a, depth, size([u IN coalesce(a.prev_until, []) WHERE u <= $as_of]) AS v
WITH a, depth, v, coalesce(a.prev_score[v], a.score) AS score
RETURN a.id AS id, depth, CASE WHEN score <> score THEN null ELSE score END AS score,
       coalesce(a.prev_level_lo[v], a.level_lo) AS level_lo,
       coalesce(a.prev_level_hi[v], a.level_hi) AS level_hi,
       coalesce(a.prev_size[v], a.size) AS size
ORDER BY depth, id
