// The entity of a mention under a score cut: its highest ancestor reached through
// clusters that all formed at a linkage score >= $threshold, as of batch $as_of.
// No row: the mention is an entity on its own. Scores as of $as_of: prev_score[v],
// v the number of versions replaced at or before it (null past the list: the
// current score; NaN there, a null score, passes no cut).
MATCH path = (m:Node {collection: $collection, id: $id})-[:PARENT*1..]->(a:Cluster)
WHERE all(r IN relationships(path) WHERE r.since <= $as_of AND (r.until IS NULL OR r.until > $as_of))
  AND all(n IN nodes(path)[1..]
          WHERE coalesce(n.prev_score[size([u IN coalesce(n.prev_until, []) WHERE u <= $as_of])],
                         n.score) >= $threshold)
WITH a, length(path) AS depth, size([u IN coalesce(a.prev_until, []) WHERE u <= $as_of]) AS v
RETURN a.id AS id, depth, coalesce(a.prev_size[v], a.size) AS size,
       coalesce(a.prev_score[v], a.score) AS score
ORDER BY depth DESC, id
LIMIT 1
