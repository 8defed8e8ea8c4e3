// Every node of a collection that was alive at batch $as_of: a node lives in the
// intervals lives_since[k] <= b < lives_until[k] (it can be retired and come back).
// Attributes as of $as_of: v counts the versions replaced at or before it; prev_x[v]
// is then the value of x (null past the list: the current value). A null score is
// kept in prev_score as NaN, the one value not equal to itself.
MATCH (n:Node {collection: $collection})
WHERE any(k IN range(0, size(n.lives_since) - 1)
          WHERE n.lives_since[k] <= $as_of AND n.lives_until[k] > $as_of)
WITH n, size([u IN coalesce(n.prev_until, []) WHERE u <= $as_of]) AS v
WITH n, v, coalesce(n.prev_score[v], n.score) AS score
RETURN n.id AS id, n.leaf AS leaf, coalesce(n.prev_size[v], n.size) AS size,
       CASE WHEN score <> score THEN null ELSE score END AS score,
       coalesce(n.prev_level_lo[v], n.level_lo) AS level_lo,
       coalesce(n.prev_level_hi[v], n.level_hi) AS level_hi
ORDER BY id
